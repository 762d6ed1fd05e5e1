"""TorchRL's GymWrapper runs our wrapped env (SAME_STEP): the true next observation on done steps."""

from __future__ import annotations

import math

import pytest
import torch

torchrl_envs = pytest.importorskip("torchrl.envs", reason="torchrl is the optional `torchrl` extra")

from gym_graphreset import FixedShapeAutoresetVectorEnv  # noqa: E402
from gym_graphreset.envs import CartPoleVectorEnv  # noqa: E402


@pytest.mark.filterwarnings("ignore")
def test_gymwrapper_rollout_keeps_final_observation() -> None:
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4), "masked")
    env.reset(seed=0)
    wrapped = torchrl_envs.GymWrapper(
        env, device="cpu", convert_actions_to_numpy=False, categorical_action_encoding=True
    )
    assert wrapped.batch_size == torch.Size([4])
    wrapped.set_seed(0)
    rollout = wrapped.rollout(80, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)
    assert done.sum() > 0
    for env_i, t in done.nonzero().tolist():
        final = rollout["next", "observation"][env_i, t]
        terminal = final[0].abs() > 2.4 or final[2].abs() > 12 * 2 * math.pi / 360
        truncated = bool(rollout["next", "truncated"][env_i, t])
        assert terminal or truncated  # the true last state, not the reset state
        if t + 1 < rollout.shape[1]:
            assert rollout["observation"][env_i, t + 1].abs().max() <= 0.05  # the next episode's first obs
