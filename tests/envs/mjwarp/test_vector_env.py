"""MJWarpVectorEnv on CUDA: captured physics, every wrapper mode, sync-free steps, capture == eager.

The CPU behaviour of the backend (oracle parity, masked reset, draws, validation) is tested in
test_mujoco_tasks.py; these need the GPU machine.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.envs.gym_mujoco.tasks import AntEnv, HopperEnv, InvertedPendulumEnv
from gym_graphreset.testing import (
    assert_capture_matches_eager,
    assert_statistically_equivalent,
    assert_sync_free,
    count_host_syncs,
)
from tests.conftest import GRAPH_MODES, MODES, needs_cuda

pytestmark = [pytest.mark.cuda, needs_cuda]

ALL_MODES = MODES | GRAPH_MODES


@pytest.fixture(scope="module")
def ant() -> AntEnv:
    return AntEnv(1024, device="cuda")


def test_zero_copy_views(ant: AntEnv) -> None:
    """qpos/qvel/ctrl are torch views of the warp arrays (same memory, no copy)."""
    import warp as wp

    assert ant.qpos.data_ptr() == wp.to_torch(ant.d.qpos).data_ptr() and ant.qpos.device.type == "cuda"
    ant.ctrl.fill_(0.25)
    assert float(wp.to_torch(ant.d.ctrl).mean()) == pytest.approx(0.25)


@pytest.mark.parametrize("mode", list(ALL_MODES))
def test_every_mode_steps_ant(ant: AntEnv, mode: str) -> None:
    env = FixedShapeAutoresetVectorEnv(
        ant, reset_terms={"ep": EpisodeStatistics()}, **{**ALL_MODES[mode], "validation_poll_interval": 8}
    )
    env.reset(seed=0)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for _ in range(24):
        obs, reward, *_ = env.step(torch.rand(1024, 8, device="cuda", generator=gen) * 2 - 1)
    torch.cuda.synchronize()
    assert torch.isfinite(obs).all() and torch.isfinite(reward).all()
    if mode in GRAPH_MODES:
        assert env.graph is not None and env.graph.captured and env.graph.replays > 0
    env.poll_finite_validation()


@pytest.mark.parametrize("mode", ["masked", "masked_persistent", "reset_graph", "step_graph"])
def test_ant_steps_are_sync_free(ant: AntEnv, mode: str) -> None:
    """The sleep canary sees warp's syncs too: none between polls in any masked mode."""
    env = FixedShapeAutoresetVectorEnv(
        ant, reset_terms={"ep": EpisodeStatistics()}, **{**ALL_MODES[mode], "validation_poll_interval": 10_000}
    )
    env.reset(seed=0)
    a = torch.zeros(1024, 8, device="cuda")
    for _ in range(5):
        env.step(a)
    # 1 step: a relaunch of MuJoCo Warp's physics graph (conditional nodes) waits for the pending launch
    # while the GPU sleeps (measured: step 1 returns in ~10 ms, step 2 waits) - back-pressure, not a sync.
    # One step proves it: every step runs the same code.
    result = assert_sync_free(lambda: env.step(a), steps=1)
    print(f"Ant {mode}: {result}")
    syncs, where = count_host_syncs(lambda: env.step(a))
    assert syncs == 0, where


@pytest.mark.parametrize("scope", ["reset", "step"])
def test_capture_matches_eager_without_contacts(scope: str) -> None:
    """InvertedPendulum (no contacts, so no atomics): captured and eager steps agree to float32 noise."""
    actions = [torch.full((256, 1), (-1.0) ** i * 0.5, device="cuda") for i in range(60)]

    def factory(flags):
        return FixedShapeAutoresetVectorEnv(
            InvertedPendulumEnv(256, device="cuda"), reset_terms={"ep": EpisodeStatistics()}, **flags
        )

    assert_capture_matches_eager(factory, actions, graph=scope, atol=1e-5)


def test_whole_step_graph_keeps_sentinels_and_outputs(ant: AntEnv) -> None:
    """The premise of whole-step capture: memory outside the graph's pool survives replays untouched."""
    env = FixedShapeAutoresetVectorEnv(ant, **{**GRAPH_MODES["step_graph"], "validation_poll_interval": 10_000})
    env.reset(seed=0)
    a = torch.zeros(1024, 8, device="cuda")
    for _ in range(3):
        env.step(a)
    sentinels = [torch.full((4096,), float(i), device="cuda") for i in range(8)]
    for _ in range(20):
        obs, *_ = env.step(a)
    torch.cuda.synchronize()
    assert all(bool((s == i).all()) for i, s in enumerate(sentinels))
    qpos, _ = ant.state()
    assert torch.equal(obs[:, :13], qpos[:, 2:])  # the published obs is the state the graph left


@pytest.mark.parametrize("mode", ["masked", "step_graph"])
def test_selected_and_masked_episode_statistics_agree_on_gpu(mode: str) -> None:
    """GPU contact physics is not bitwise deterministic: compare Hopper's episode distributions instead."""

    def factory(flags):
        return FixedShapeAutoresetVectorEnv(
            HopperEnv(2048, device="cuda"), reset_terms={"ep": EpisodeStatistics()}, **flags
        )

    gen = torch.Generator(device="cuda").manual_seed(0)
    actions = [torch.rand(2048, 3, device="cuda", generator=gen) * 2 - 1 for _ in range(200)]
    report = assert_statistically_equivalent(factory, actions, config=ALL_MODES[mode]["config"])
    print(f"\n{mode}: {report}")


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(ALL_MODES))
def test_gpu_memory_flat_over_10k_steps(mode: str) -> None:
    """No mode allocates per step: memory after 10,000 steps equals memory after the first 100."""
    from gym_graphreset.envs.gym_mujoco.tasks import HalfCheetahEnv

    env = FixedShapeAutoresetVectorEnv(
        HalfCheetahEnv(512, device="cuda", max_episode_steps=100),
        reset_terms={"ep": EpisodeStatistics()},
        **{**ALL_MODES[mode], "validation_poll_interval": 64},
    )
    env.reset(seed=0)
    gen = torch.Generator(device="cuda").manual_seed(0)
    pool = [torch.rand(512, 6, device="cuda", generator=gen) * 2 - 1 for _ in range(16)]
    for i in range(100):  # warm-up, capture included
        env.step(pool[i % 16])
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for i in range(100):  # steady state: the peak of a step's temporaries
        env.step(pool[i % 16])
    torch.cuda.synchronize()
    after_warmup, steady_peak = torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()
    device_free = torch.cuda.mem_get_info()[0]  # the whole device: warp's allocations too
    for i in range(10_000):
        env.step(pool[i % 16])
    torch.cuda.synchronize()
    now, peak = torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()
    print(
        f"\n{mode}: {after_warmup / 2**20:.2f} MiB after 200 steps, {now / 2**20:.2f} MiB after 10,200; "
        f"peak {steady_peak / 2**20:.2f} MiB over steps 100-200, {peak / 2**20:.2f} MiB over all"
    )
    print(f"device memory used by the 10,000 steps: {(device_free - torch.cuda.mem_get_info()[0]) / 2**20:.2f} MiB")
    assert now == after_warmup
    assert torch.cuda.mem_get_info()[0] == device_free
    assert peak <= steady_peak + 2**20  # selected-row temporaries scale with the done rows of a step


def _faulted_pair(task: Any, n: int, inject: Any, steps: int = 30, **env_kwargs: Any) -> tuple[Any, Any, Any]:
    """A clean and a faulted step-graph env stepped with the same actions; ``inject(inner)`` after capture."""
    flags = {**GRAPH_MODES["step_graph"], "validation_poll_interval": 10_000}
    envs = [FixedShapeAutoresetVectorEnv(task(n, device="cuda", **env_kwargs), **flags) for _ in range(2)]
    gen = torch.Generator(device="cuda").manual_seed(0)
    actions = [
        torch.rand(n, envs[0].single_action_space.shape[0], device="cuda", generator=gen) * 2 - 1 for _ in range(steps)
    ]
    outs = []
    for k, env in enumerate(envs):
        env.reset(seed=0)
        for t, a in enumerate(actions):
            if k == 1 and t == 10:
                assert env.graph is not None and env.graph.captured
                inject(env.env)  # in place: the captured graph holds these buffers
            obs, *_ = env.step(a)
        torch.cuda.synchronize()
        outs.append(obs.clone())
    return envs[0], envs[1], outs


def test_fault_injection_under_step_graph_names_rows_and_spares_other_worlds() -> None:
    """NaN written into two worlds mid-run: latched with their rows; every other world equals a clean run.

    InvertedPendulum has no contacts, so its GPU physics is run-to-run deterministic (with contacts,
    MuJoCo Warp's atomics reorder sums: two clean runs differ too) and "equal" can mean bit for bit.
    """
    from gym_graphreset import DeferredValidationError

    bad = [3, 700]
    clean, faulted, (clean_obs, faulted_obs) = _faulted_pair(
        InvertedPendulumEnv,
        1024,
        lambda inner: inner.qvel.index_fill_(0, torch.tensor(bad, device="cuda"), float("nan")),
    )
    clean.poll_finite_validation()  # silent
    with pytest.raises(DeferredValidationError) as err:
        faulted.poll_finite_validation()
    text = str(err.value)
    print("\nfault injection:", text)
    assert "mjwarp_finite_state" in text and "(first failed at step 10, row 3 and 1 more)" in text
    keep = torch.ones(1024, dtype=torch.bool, device="cuda")
    keep[bad] = False
    same = torch.equal(clean_obs[keep], faulted_obs[keep])
    print("other worlds bit-identical to the clean run:", same)
    assert same


def test_capacity_overflow_under_step_graph_is_latched_with_worlds() -> None:
    from gym_graphreset import DeferredValidationError

    _, faulted, _ = _faulted_pair(AntEnv, 1024, lambda inner: None, nconmax=1)
    with pytest.raises(DeferredValidationError, match=r"mjwarp_overflow\[BROADPHASE\].*row \d+") as err:
        faulted.poll_finite_validation()
    print("\ncapacity overflow:", err.value)
