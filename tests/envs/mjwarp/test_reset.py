"""The fused masked-reset kernel against the reference path (reset_data + torch draws + masked writes)."""

from __future__ import annotations

import mujoco
import pytest
import torch

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.envs.gym_mujoco.tasks import AntEnv, HopperEnv, InvertedPendulumEnv
from gym_graphreset.envs.mjwarp.reset import needs_reset_data
from gym_graphreset.testing import rollout

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
