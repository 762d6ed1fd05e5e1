"""The conformance harness itself: it passes conforming envs and fails the ones that differ."""

from __future__ import annotations

import pytest
import torch

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.envs import CartPoleVectorEnv
from gym_graphreset.testing import assert_masked_matches_selected, count_host_syncs, rollout

ACTIONS = [torch.full((8,), t % 2) for t in range(120)]


def test_passes_a_conforming_env() -> None:
    assert_masked_matches_selected(lambda flags: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8), **flags), ACTIONS)


def test_fails_an_env_whose_masked_path_differs() -> None:
    def factory(flags):  # the masked configuration draws other resets: must be caught
        return FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8, global_env_offset=1 if flags else 0), **flags)

    with pytest.raises(AssertionError, match="masked vs selected: obs differs at step 0"):
        assert_masked_matches_selected(factory, ACTIONS)


def test_rollout_records_host_copies() -> None:
    env = FixedShapeAutoresetVectorEnv(
        CartPoleVectorEnv(8, max_episode_steps=5), masked_autoreset=True, defer_finite_validation=True
    )
    records = rollout(env, ACTIONS[:6])
    assert len(records) == 7 and "final_obs" in records[5]
    assert records[5]["final_obs"][()].shape == (8, 4)  # step 5: every row truncated


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU behaviour")
def test_count_host_syncs_is_zero_without_cuda() -> None:
    assert count_host_syncs(lambda: None) == (0, [])
