"""The Stable-Baselines3 adapter: a real VecEnv; terminal observations, truncation flags, episode
statistics; SB3's PPO and SAC learn on it unmodified; VecNormalize and VecMonitor wrap it."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3", reason="stable-baselines3 is the optional `sb3` extra")
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.vec_env import VecEnv, VecMonitor, VecNormalize

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.envs import CartPoleVectorEnv
from gym_graphreset.integrations.sb3 import SB3VecEnv

from .conftest import MODES, scripted_env


@pytest.fixture(params=["selected", "masked_persistent"])
def cartpole(request: pytest.FixtureRequest) -> SB3VecEnv:
    inner = CartPoleVectorEnv(8, max_episode_steps=6)  # short: truncations happen
    return SB3VecEnv(
        FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **MODES[request.param])
    )


def test_is_a_vecenv_with_numpy_io(cartpole: SB3VecEnv) -> None:
    assert isinstance(cartpole, VecEnv)
    cartpole.seed(3)
    obs = cartpole.reset()
    assert isinstance(obs, np.ndarray) and obs.shape == (8, 4) and obs.dtype == np.float32
    obs, reward, dones, infos = cartpole.step(np.ones(8, dtype=np.int64))
    assert obs.shape == (8, 4) and reward.shape == (8,) and dones.dtype == bool and len(infos) == 8


def test_terminal_observation_truncation_and_episode(cartpole: SB3VecEnv) -> None:
    """Done rows carry final_obs as terminal_observation, TimeLimit.truncated and episode stats."""
    cartpole.seed(0)
    cartpole.reset()
    seen_truncated = False
    for _ in range(30):
        actions = np.random.default_rng(0).integers(0, 2, 8)
        cartpole.step_async(actions)
        _, _, dones, infos = cartpole.step_wait()
        for i in np.flatnonzero(dones):
            info = infos[i]
            assert info["terminal_observation"].shape == (4,)
            assert info["episode"]["l"] >= 1
            seen_truncated |= info["TimeLimit.truncated"]
        for i in np.flatnonzero(~dones):
            assert infos[i] == {}
    assert seen_truncated  # 6-step episodes: every row truncates


def test_terminal_observation_equals_final_obs() -> None:
    """Compare against the wrapper run side by side with the same seed and actions."""

    def make():
        return FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4, max_episode_steps=5), **MODES["masked"])

    direct, adapted = make(), SB3VecEnv(make())
    direct.reset(seed=1)
    adapted.seed(1)
    adapted.reset()
    for t in range(12):
        a = np.full(4, t % 2)
        _, _, te, tr, info = direct.step(torch.as_tensor(a))
        _, _, dones, infos = adapted.step(a)
        np.testing.assert_array_equal(dones, (te | tr).numpy())
        for i in np.flatnonzero(dones):
            np.testing.assert_array_equal(infos[i]["terminal_observation"], info["final_obs"][i].numpy())
            assert infos[i]["TimeLimit.truncated"] == bool(tr[i] and not te[i])


def test_attribute_api(cartpole: SB3VecEnv) -> None:
    assert cartpole.get_attr("num_envs", [0, 1]) == [8, 8]
    assert cartpole.env_method("reset_selection_blockers", indices=[2]) == [[]]
    assert cartpole.env_is_wrapped(FixedShapeAutoresetVectorEnv) == [True] * 8
    cartpole.set_attr("validation_poll_interval", 64)
    assert cartpole.env.validation_poll_interval == 64


def test_needs_same_step() -> None:
    with pytest.raises(ValueError, match=re.escape("SB3VecEnv needs a SAME_STEP vector env")):
        SB3VecEnv(CartPoleVectorEnv(2))


def test_ppo_learns_call_runs_unmodified(cartpole: SB3VecEnv) -> None:
    model = PPO("MlpPolicy", VecMonitor(cartpole), n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256


def test_sac_with_vecnormalize() -> None:
    env = SB3VecEnv(
        FixedShapeAutoresetVectorEnv(scripted_env(4, 200, p_done=0.05), reset_terms={"ep": EpisodeStatistics()})
    )
    venv = VecNormalize(env)
    model = SAC("MlpPolicy", venv, learning_starts=32, batch_size=32, train_freq=1, seed=0, device="cpu")
    model.learn(total_timesteps=160)
    assert model.num_timesteps >= 160 and np.isfinite(venv.obs_rms.mean).all()


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        (np.zeros((3,)), "actions must have shape (8,) (one row per env), got (3,)"),
        (np.zeros((8, 2)), "actions must have shape (8,) (one row per env), got (8, 2)"),
        (np.array(["a"] * 8), "actions must be numeric (shape (8,)), got dtype <U1"),
    ],
)
def test_step_async_checks_by_name(actions, message: str) -> None:
    from gym_graphreset.integrations.sb3 import SB3VecEnv

    env = SB3VecEnv(FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8)))
    env.reset()
    with pytest.raises(ValueError, match=re.escape(message)):
        env.step_async(actions)
