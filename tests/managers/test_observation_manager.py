"""What the observation manager returns: values a consumer may keep, whatever the terms hand out."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.buffers import tree_map
from gym_graphreset.tasks import ManagerBasedEnv, ObsGroup, ObsTerm, TaskCfg, mdp
from tests.tasks.test_layer import user_task

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
N = 2


def _live_terms_task() -> TaskCfg:
    """A group of terms (concatenate=False) whose terms hand out live buffers: the action, a view of qvel, the
    command, a history ring and a delay ring."""
    cfg = user_task()
    live = {
        "action": ObsTerm(mdp.last_action),
        "base_vel": ObsTerm(lambda env: env.qvel[:, :3]),
        "command": ObsTerm(mdp.generated_commands, {"command_name": "twist"}),
        "history": ObsTerm(mdp.joint_vel, history_length=3),
        "delayed": ObsTerm(mdp.joint_vel, delay=1),
    }
    return replace(cfg, observations={**cfg.observations, "live": ObsGroup(live, concatenate=False)})


def _raw(_: Any) -> Any:
    return ManagerBasedEnv(_live_terms_task(), N, device="cpu", max_episode_steps=50)


def _wrapped(config: str) -> Any:
    return FixedShapeAutoresetVectorEnv(ManagerBasedEnv(_live_terms_task(), N, device="cpu"), config)


@pytest.mark.parametrize(
    "make", [_raw, lambda _: _wrapped("selected"), lambda _: _wrapped("masked")], ids=["raw", "selected", "masked"]
)
def test_a_returned_observation_does_not_change_at_the_next_step(make: Any) -> None:
    """What a step (or reset) returned stays as it was after the next step, for every term of a group of terms."""
    env = make(None)
    obs, _ = env.reset(seed=0)
    kept = [(obs, tree_map(torch.clone, obs))]
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        obs, *_ = env.step(torch.randn(N, 2, generator=gen))
        kept.append((obs, tree_map(torch.clone, obs)))
    for t, (returned, copy) in enumerate(kept[:-1]):
        for term, value in returned["live"].items():
            assert torch.equal(value, copy["live"][term]), f"{term!r} returned at step {t} changed later"
    env.close()
