"""The reset-heavy workload: one definition for every mode, bit-identical selected vs masked on the CPU,
real per-world randomisation, buffers reset through the mask, the curriculum stamp as a host transition."""

from __future__ import annotations

import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.envs.gym_mujoco.reset_heavy import ResetHeavyHalfCheetahEnv
from gym_graphreset.testing import assert_masked_matches_selected
from tests.conftest import MODES

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def actions() -> list[torch.Tensor]:
    """26 steps of a 12-step horizon: every row resets at least twice (by truncation, or earlier at random)."""
    gen = torch.Generator().manual_seed(0)
    return [torch.rand(6, 6, generator=gen) * 2 - 1 for _ in range(26)]


def _factory(flags):
    inner = ResetHeavyHalfCheetahEnv(6, device="cpu", max_episode_steps=12, early_reset_prob=0.1)
    return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)


@pytest.mark.parametrize("mode", ["masked", pytest.param("masked_persistent", marks=pytest.mark.slow)])
def test_selected_and_masked_identical(actions, mode: str) -> None:
    """Selected-row and masked resets of all 13 terms give bit-identical trajectories on the CPU."""
    assert_masked_matches_selected(_factory, actions, config=MODES[mode]["config"])


def test_features_are_real() -> None:
    env = _factory(MODES["masked"])
    inner = env.env
    assert env.reset_selection_blockers() == [] and len(inner.reset_term_names) >= 12
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"policy", "critic"}
    assert inner.friction[:, 0, 0].unique().numel() == 6 and inner.mass[:, 1].unique().numel() == 6
    assert not torch.equal(inner.friction[0], inner.friction[1])  # per-world model fields
    updates = inner.curriculum_updates
    for _ in range(5):
        obs, reward, *_ = env.step(torch.ones(6, 6) * 0.3)
    assert inner.curriculum_updates == updates + 5  # the masked reset ran (and stamped) every step
    assert inner.history.abs().sum() > 0 and torch.isfinite(reward).all()
    before = inner.history.clone()
    env.reset(options={"reset_mask": torch.tensor([True] + [False] * 5)})
    assert inner.history[0].abs().sum() == 0 and torch.equal(inner.history[1:], before[1:])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")
@pytest.mark.parametrize("mode", ["masked", "masked_persistent", "reset_graph", "step_graph"])
def test_reset_heavy_steps_are_sync_free_on_gpu(mode: str) -> None:
    """Every term, DR write and buffer reset of the workload stays on the device.

    Graph modes: the sleep canary (which sees warp's syncs too) on a whole step. Eager modes launch more
    kernels per step (~2,000) than CUDA's launch queue holds (~1,000-1,500 measured on the H200), so behind
    a 400 ms sleep the host blocks on queue space - back-pressure, not a sync. There the canary checks
    the two halves (inner step, masked reset) separately, and torch's sync counter the whole step.
    """
    from gym_graphreset.core.selection import ResetSelection
    from gym_graphreset.testing import assert_sync_free, count_host_syncs
    from tests.conftest import GRAPH_MODES

    flags = {**(MODES | GRAPH_MODES)[mode], "validation_poll_interval": 10_000}
    inner = ResetHeavyHalfCheetahEnv(512, device="cuda")
    env = FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)
    env.reset(seed=0)
    a = torch.zeros(512, 6, device="cuda")
    for _ in range(5):
        env.step(a)
    if mode in GRAPH_MODES:
        print(f"reset-heavy {mode}: {assert_sync_free(lambda: env.step(a), steps=1)}")
    else:
        selection = ResetSelection(512, "cuda")
        selection.mask.fill_(True)
        for name, half in (
            ("inner step", lambda: inner.step(a)),
            ("masked reset", lambda: inner.reset(options={"reset_mask": selection})),
        ):
            print(f"reset-heavy {mode} {name}: {assert_sync_free(half, steps=1)}")
    syncs, where = count_host_syncs(lambda: [env.step(a) for _ in range(8)])
    assert syncs == 0, where


@pytest.mark.parametrize("prob", [-0.1, 1.5, float("nan")])
def test_early_reset_prob_outside_0_1_refused_by_name(prob: float) -> None:
    """A probability outside [0, 1] is refused at construction, before any warp work."""
    with pytest.raises(ValueError, match="`early_reset_prob` must lie in"):
        ResetHeavyHalfCheetahEnv(4, device="cpu", early_reset_prob=prob)
