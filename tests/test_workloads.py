"""The reset-heavy workload: one definition for every mode, bit-identical selected vs masked on the CPU,
real per-world randomisation, buffers reset through the mask, the curriculum stamp as a host transition."""

from __future__ import annotations

import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.testing import assert_masked_matches_selected
from gym_graphreset.workloads import ResetHeavyHalfCheetahEnv

from .conftest import MODES

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def actions() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.rand(6, 6, generator=gen) * 2 - 1 for _ in range(40)]


def _factory(flags):
    inner = ResetHeavyHalfCheetahEnv(6, device="cpu", max_episode_steps=12, early_reset_prob=0.1)
    return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)


@pytest.mark.parametrize("mode", ["masked", "masked_persistent"])
def test_selected_and_masked_identical(actions, mode: str) -> None:
    assert_masked_matches_selected(_factory, actions, flags=MODES[mode])


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
