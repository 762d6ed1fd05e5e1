"""What a captured graph holds stays where it is: on every registered task-layer env, an eager step and a reset
keep each tensor the wrapper's buffer watch follows (the env's attributes, its phase cache aside) at the same
address. Under ``graph="reset"`` the step runs eagerly between replays of the reset graph; a tensor replaced by the
step would make the graph recapture at every step (correct, but a capture per step: the preset ran 20x slower
than ``masked`` on G1 tracking before ``last_obs`` was kept in place)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.participants import BufferWatch
from gym_graphreset.tasks import ManagerBasedEnv

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.slow,
]
pytest.importorskip("mujoco_warp")

TASKS = (
    "gym_graphreset/Go1-Velocity-Flat-v0",
    "gym_graphreset/Go1-Velocity-Rough-v0",
    "gym_graphreset/G1-Velocity-Flat-v0",
    "gym_graphreset/G1-Velocity-Rough-v0",
    "gym_graphreset/G1-Tracking-Flat-v0",
)


@pytest.mark.parametrize("env_id", TASKS)
def test_steps_and_resets_keep_every_watched_buffer(env_id: str) -> None:
    """Fingerprint (the watch's addresses) equal before and after eager steps that reset rows."""
    n = 4
    inner = gym.make_vec(env_id, n, vectorization_mode="vector_entry_point", device="cpu", max_episode_steps=2)
    assert isinstance(inner.unwrapped, ManagerBasedEnv)
    env = FixedShapeAutoresetVectorEnv(inner, "masked")
    env.reset(seed=0)
    actions = torch.zeros(n, *env.single_action_space.shape)
    env.step(actions)
    watch = BufferWatch([inner.unwrapped])
    watch.rescan()
    before = watch()
    assert len(before[0]) > 10  # the env's buffers are watched (obs, state, draws)
    for _ in range(3):  # a 2-step horizon: every row resets in these steps
        env.step(actions)
    assert watch() == before
