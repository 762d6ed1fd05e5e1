"""The fused masked-reset kernel against the reference path (reset_data + torch draws + masked writes).

Both take the initial state as an input: the engine's noise draws, or a task's proposals (Reacher's own
draws, every task-layer env's reset events), so every env runs the fused kernel unless asked otherwise.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import gymnasium as gym
import mujoco
import pytest
import torch

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.buffers import tree_leaves
from gym_graphreset.envs.gym_mujoco.tasks import AntEnv, HopperEnv, InvertedPendulumEnv, ReacherEnv
from gym_graphreset.envs.mjwarp.reset import needs_reset_data
from gym_graphreset.testing import assert_capture_matches_eager, rollout
from tests.conftest import needs_cuda

N = 24
MASK = torch.arange(N) % 3 == 1


def _pair(cls, **kwargs):
    return cls(N, device="cpu", kernel_reset=True, **kwargs), cls(N, device="cpu", kernel_reset=False, **kwargs)


@pytest.mark.parametrize(
    ("cls", "atol"),
    [(InvertedPendulumEnv, 0.0), (HopperEnv, 0.0), (AntEnv, 1e-6)],
    ids=["uniform-qpos-qvel", "uniform-contacts", "normal-qvel"],
)
@pytest.mark.parametrize(("seed", "offset"), [(7, 0), (2**40 + 3, 2**32 + 5)], ids=["low", "high-words"])
def test_kernel_draws_and_clears_what_the_reference_does(cls, atol: float, seed: int, offset: int) -> None:
    """Same keys, same state after a full and a masked reset: bitwise for uniform noise, float32 rounding
    (log/cos implementations) for Box-Muller normals; seeds and env indices of 2**32 or more alike."""
    fused, reference = _pair(cls, global_env_offset=offset)
    for env in (fused, reference):
        env.reset(seed=seed)
        env.step(torch.full(env.action_space.shape, 0.3))
        env.reset(options={"reset_mask": MASK})
    torch.testing.assert_close(fused.qpos, reference.qpos, atol=atol, rtol=0)
    torch.testing.assert_close(fused.qvel, reference.qvel, atol=atol, rtol=0)
    for name in ("episode", "elapsed", "overflow"):
        assert torch.equal(getattr(fused, name), getattr(reference, name)), name
    for name in ("ctrl", "cfrc_ext", "qfrc_actuator", "qfrc_constraint"):  # rows that stepped carry the drift
        torch.testing.assert_close(getattr(fused, name), getattr(reference, name), atol=10 * atol, rtol=0)
        assert not getattr(fused, name)[MASK].any(), f"{name} not cleared on reset rows"
    assert fused.episode.tolist() == [1 if m else 0 for m in MASK.tolist()]


@pytest.mark.slow
def test_kernel_reset_trajectories_match_reference_through_the_wrapper() -> None:
    """Fields the kernel leaves alone (contacts, constraint rows, M) are recomputed by the next step:
    Hopper with contacts and early terminations gives bitwise the same trajectories either way."""
    gen = torch.Generator().manual_seed(0)
    actions = [torch.rand(N, 3, generator=gen) * 2 - 1 for _ in range(60)]
    runs = [
        rollout(FixedShapeAutoresetVectorEnv(HopperEnv(N, device="cpu", kernel_reset=k), "masked"), actions)
        for k in (True, False)
    ]
    assert sum(int(r["terminated"][()].sum()) for r in runs[0][1:]) > 0, "no reset happened: the test is void"
    for t, (a, b) in enumerate(zip(*runs, strict=True)):
        for key in a:
            for leaf in a[key]:
                assert torch.equal(a[key][leaf], b[key][leaf]), f"{key} differs at step {t}"


@pytest.mark.parametrize(
    ("xml", "expected"),
    [
        ("<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>", False),
        ("<mujoco><worldbody><body mocap='true'><geom size='.1'/></body></worldbody></mujoco>", True),
        (
            "<mujoco><worldbody><body><joint name='j'/><geom size='.1'/></body></worldbody>"
            "<sensor><jointpos joint='j'/></sensor></mujoco>",
            True,
        ),
    ],
    ids=["plain", "mocap", "sensor"],
)
def test_models_with_extra_state_still_run_reset_data(xml: str, expected: bool) -> None:
    assert needs_reset_data(mujoco.MjModel.from_xml_string(xml)) is expected


def test_physics_switch_leaves_state_and_non_physics_bench_needs_cuda() -> None:
    """``physics_enabled=False`` (the benchmarks' non-physics split) steps everything but the substeps."""
    from gym_graphreset.bench.runner import measure_non_physics

    env = HopperEnv(4, device="cpu")
    env.reset(seed=0)
    before = env.qpos.clone()
    env.physics_enabled = False
    _, reward, *_ = env.step(torch.full((4, 3), 0.5))
    assert torch.equal(env.qpos, before) and torch.isfinite(reward).all() and int(env.elapsed[0]) == 1
    assert measure_non_physics(lambda: HopperEnv(4, device="cpu"), steps=1) is None  # CUDA only


def test_a_task_s_own_draws_take_the_fused_kernel_and_match_the_reference() -> None:
    """Reacher declares its own draws (``initial_state_draws="task"``): the kernel writes them, bit for bit as the
    reference path does, and each env's report says which reset it runs and why."""
    fused, reference = _pair(ReacherEnv)
    for env in (fused, reference):
        env.reset(seed=5)
        env.step(torch.full(env.action_space.shape, 0.3))
        env.reset(options={"reset_mask": MASK})
    for name in ("qpos", "qvel", "episode", "elapsed", "ctrl", "cfrc_ext", "qfrc_actuator", "qfrc_constraint"):
        assert torch.equal(getattr(fused, name), getattr(reference, name)), name
    assert not torch.equal(fused.qpos[MASK, -2:], fused.init_qpos[-2:].expand(int(MASK.sum()), 2))  # targets drawn
    assert fused.reset_report() == {
        "reset": "kernel",
        "initial_state": "task",
        "why": "kernel_reset=True (the default)",
    }
    assert reference.reset_report() == {
        "reset": "reference",
        "initial_state": "task",
        "why": "kernel_reset=False (asked for at construction)",
    }


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("scope", ["reset", "step"])
def test_task_proposals_through_warp_and_torch_graphs_on_cuda(scope: str) -> None:
    """CUDA: Reacher's proposals through the fused kernel, eager (a cached warp graph holds the proposal buffers)
    and captured (the wrapper's graph): the reference path's trajectories, and the captured run the eager one's."""
    n = 64
    actions = [torch.full((n, 2), (-1.0) ** i * 0.5, device="cuda") for i in range(24)]

    def factory(flags: dict[str, Any], kernel_reset: bool = True) -> FixedShapeAutoresetVectorEnv:
        inner = ReacherEnv(n, device="cuda", kernel_reset=kernel_reset, max_episode_steps=5)
        return FixedShapeAutoresetVectorEnv(inner, **flags)

    fused, reference = (rollout(factory({"config": "masked"}, k), actions) for k in (True, False))
    for t, (a, b) in enumerate(zip(fused, reference, strict=True)):
        for key in a:
            for leaf in a[key]:
                torch.testing.assert_close(a[key][leaf], b[key][leaf], atol=1e-5, rtol=0, msg=f"{key} at step {t}")
    assert_capture_matches_eager(factory, actions, graph=scope, atol=1e-5)


class _UndeclaredDraws(InvertedPendulumEnv):
    def _sample_initial_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.init_qpos.expand_as(self.qpos).clone(), self.init_qvel.expand_as(self.qvel).clone()


class _UnknownDraws(InvertedPendulumEnv):
    initial_state_draws = "physics"  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (_UndeclaredDraws, {}, "_UndeclaredDraws overrides _sample_initial_state but declares initial_state_draws="),
        (_UnknownDraws, {}, "_UnknownDraws.initial_state_draws must be 'engine' or 'task', got 'physics'"),
        (InvertedPendulumEnv, {"kernel_reset": "yes"}, "`kernel_reset` must be a bool, got 'yes'"),
    ],
    ids=["undeclared-own-draws", "unknown-source", "kernel-reset-not-bool"],
)
def test_a_reset_choice_that_would_be_silent_is_refused(cls: type, kwargs: dict[str, Any], message: str) -> None:
    """Own draws the fused kernel would ignore, an unknown draw source, a non-bool switch: refused by name."""
    with pytest.raises(ValueError, match=re.escape(message)):
        cls(2, device="cpu", **kwargs)


def _rough_terrain() -> dict[str, Any]:
    from gym_graphreset.tasks.velocity.config.go1 import GO1_ROUGH_TERRAIN

    return {"terrain": replace(GO1_ROUGH_TERRAIN, num_rows=3, border_width=1.0)}  # a small heightfield


TASKS: dict[str, Any] = {
    "gym_graphreset/Go1-Velocity-Flat-v0": dict,
    "gym_graphreset/G1-Velocity-Flat-v0": dict,
    "gym_graphreset/Go1-Velocity-Rough-v0": _rough_terrain,
    "gym_graphreset/G1-Tracking-Flat-v0": dict,
}
"""Task ids -> their env kwargs (a small terrain for the rough task)."""


def _task_run(env_id: str, kernel_reset: bool, steps: int = 5, n: int = 4) -> tuple[list[dict[str, Any]], Any]:
    """A masked rollout of ``env_id`` with 2-step episodes (every row resets twice): host copies of what each step
    returned and of the state after it; and the wrapper."""
    kwargs = TASKS[env_id]()
    inner = gym.make_vec(
        env_id,
        n,
        vectorization_mode="vector_entry_point",
        device="cpu",
        max_episode_steps=2,
        kernel_reset=kernel_reset,
        **kwargs,
    )
    env = FixedShapeAutoresetVectorEnv(inner, "masked")
    gen = torch.Generator().manual_seed(0)

    def state() -> dict[str, torch.Tensor]:
        return {"qpos": inner.qpos.clone(), "qvel": inner.qvel.clone(), "episode": inner.episode.clone()}

    obs, _ = env.reset(seed=3)
    out: list[dict[str, Any]] = [{"obs": obs, **state()}]
    for _ in range(steps):
        action = torch.randn(n, *env.single_action_space.shape, generator=gen) * 0.5
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated | truncated
        out.append({"obs": obs, "reward": reward, "done": done, "final_obs": info["final_obs"], **state()})
    records = [{k: {p: t.clone() for p, t in tree_leaves(v)} for k, v in r.items()} for r in out]
    return records, env


@pytest.mark.slow
@pytest.mark.parametrize("env_id", list(TASKS))
def test_task_layer_envs_take_the_fused_kernel_bitwise_equal_to_the_reference(env_id: str) -> None:
    """Go1 and G1 flat, Go1 rough, G1 tracking: the reset events' proposals go through the fused kernel, and
    observations, rewards, final observations, qpos, qvel and episode counters equal the reference path's bitwise
    at every step; ``capture_report`` names the reset each inner env runs."""
    (fused, fused_env), (reference, reference_env) = (_task_run(env_id, k) for k in (True, False))
    assert sum(int(r["done"][()].sum()) for r in fused[1:]) >= 8, "too few resets: the test is void"
    for t, (a, b) in enumerate(zip(fused, reference, strict=True)):
        for key in a:
            for leaf in a[key]:
                assert torch.equal(a[key][leaf], b[key][leaf]), f"{key}{list(leaf)} differs at step {t}"
    for env, kind in ((fused_env, "kernel"), (reference_env, "reference")):
        report = env.capture_report().state["resets"]
        assert [r["reset"] for r in report.values()] == [kind] and all(
            r["initial_state"] == "task" for r in report.values()
        )
