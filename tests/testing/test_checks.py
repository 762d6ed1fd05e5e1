"""``check_env`` on a task with a term that reads randomness of its own: the report names the term."""

from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset.tasks import ManagerBasedEnv, RewardTerm
from gym_graphreset.testing import check_env
from tests.tasks.test_layer import user_task

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def unseeded_noise(env: ManagerBasedEnv) -> torch.Tensor:
    """A reward written with torch.rand: other values on every run, whatever the seed."""
    return torch.rand(env.num_envs, device=env.device)


def test_a_term_with_its_own_randomness_is_named_with_the_draws_api() -> None:
    """Not a reset's fault: the report names the reward term whose column differs and the draws to use."""
    cfg = user_task().with_term("rewards", "noise", RewardTerm(unseeded_noise, 0.1))
    message = (
        "reward differs at step 1 in row(s) [0, 1, 2, 3]: the term(s) that differ: info['reward_terms'] columns "
        "['noise']"
    )
    with pytest.raises(AssertionError, match=re.escape(message)) as caught:
        check_env(lambda: ManagerBasedEnv(cfg, 4, device="cpu", max_episode_steps=10), steps=4, host_read_steps=1)
    assert "counter_uniform" in str(caught.value) and "not asked to" not in str(caught.value)
