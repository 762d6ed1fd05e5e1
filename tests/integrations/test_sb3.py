"""The Stable-Baselines3 adapter: a real VecEnv; terminal observations, truncation flags, episode
statistics; SB3's PPO and SAC learn on it unmodified; VecNormalize and VecMonitor wrap it."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3", reason="stable-baselines3 is the optional `sb3` extra")
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.vec_env import VecEnv, VecMonitor, VecNormalize

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.envs import CartPoleVectorEnv
from gym_graphreset.integrations.sb3 import SB3VecEnv
from tests.conftest import MODES, preset_device, scripted_env


@pytest.fixture
def cartpole(preset: str) -> SB3VecEnv:
    inner = CartPoleVectorEnv(8, max_episode_steps=6, device=preset_device(preset))  # short: truncations happen
    return SB3VecEnv(FixedShapeAutoresetVectorEnv(inner, preset, reset_terms={"ep": EpisodeStatistics()}))


def test_reset_returns_a_copy_that_later_steps_leave_alone(cartpole: SB3VecEnv) -> None:
    """SB3 keeps the reset obs as `_last_obs`: it must not be a view of a buffer the ring rewrites."""
    cartpole.seed(0)
    obs = cartpole.reset()
    kept = obs.copy()
    for t in range(5):
        cartpole.step(np.full(8, t % 2))
    np.testing.assert_array_equal(obs, kept)


def test_float_actions_for_discrete_are_refused_not_truncated(cartpole: SB3VecEnv) -> None:
    cartpole.reset()
    with pytest.raises(ValueError, match=re.escape("integer dtype for a Discrete action space")):
        cartpole.step_async(np.array([0.7, 1.9, -0.4, 0.0, 1.0, 0.0, 1.0, 0.0]))


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


@pytest.mark.slow
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


# ---------------------------------------------------------------- SB3's generic VecEnv contract, ported


class _Tagged(gym.Wrapper):
    """A sub-env wrapper with an attribute and a method, like the ones SB3's VecEnv tests poke at."""

    def __init__(self, env: gym.Env, tag: int) -> None:
        super().__init__(env)
        self.tag = tag

    def double_tag(self, plus: int = 0) -> int:
        return 2 * self.tag + plus


def _sync_backed(n: int = 4) -> SB3VecEnv:
    from gymnasium.vector import SyncVectorEnv
    from gymnasium.wrappers.vector import NumpyToTorch

    subs = [lambda i=i: _Tagged(gym.make("CartPole-v1"), i) for i in range(n)]
    return SB3VecEnv(FixedShapeAutoresetVectorEnv(NumpyToTorch(SyncVectorEnv(subs, autoreset_mode="Disabled"))))


def test_attributes_reach_each_sub_env_with_index_semantics() -> None:
    env = _sync_backed()
    assert env.get_attr("tag") == [0, 1, 2, 3] and env.get_attr("tag", indices=[1, 3]) == [1, 3]
    env.set_attr("tag", 9, indices=2)
    assert env.get_attr("tag") == [0, 1, 9, 3]  # per-index value kept
    assert env.env_method("double_tag", 1, indices=[0, 2]) == [1, 19]
    assert env.env_is_wrapped(_Tagged) == [True] * 4
    assert env.env_is_wrapped(gym.wrappers.TimeLimit) == [True] * 4  # gym.make's own wrapper on the sub-envs
    assert env.env_is_wrapped(gym.wrappers.ClipAction) == [False] * 4


def test_torch_batched_env_refuses_per_index_writes_clearly(cartpole: SB3VecEnv) -> None:
    with pytest.raises(ValueError, match="set_attr on a subset of indices: .* no per-index sub-envs"):
        cartpole.set_attr("validation_poll_interval", 8, indices=[1])
    with pytest.raises(AttributeError, match="no per-index sub-envs.* have no attribute 'no_such_method'"):
        cartpole.env_method("no_such_method")
    assert cartpole.get_attr("max_episode_steps") == [6] * 8  # found down the chain, on the inner env


def test_render_without_a_render_mode_is_refused_with_a_clear_error(cartpole: SB3VecEnv) -> None:
    with pytest.raises(NotImplementedError, match=re.escape("does not render (render_mode=None): build the env with")):
        cartpole.get_images()


def test_vec_video_recorder_films_the_rendered_worlds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3's own VecVideoRecorder over a MuJoCo Warp env with render_mode="rgb_array": one tile per world."""
    pytest.importorskip("mujoco_warp", reason="rendering needs a MuJoCo Warp env (the `mjwarp` extra)")
    from stable_baselines3.common.vec_env import VecVideoRecorder

    from gym_graphreset.envs.mjwarp.frames import RenderUnavailable

    inner = gym.make_vec(
        "gym_graphreset/InvertedPendulum-v5",
        num_envs=4,
        vectorization_mode="vector_entry_point",
        device="cpu",
        render_mode="rgb_array",
        render_worlds=[0, 2],
        render_size=(32, 24),
    )
    env = SB3VecEnv(FixedShapeAutoresetVectorEnv(inner, "masked"))
    assert env.render_mode == "rgb_array"
    env.reset()
    try:
        images = env.get_images()
    except RenderUnavailable as exc:
        pytest.skip(f"no OpenGL context on this machine: {exc}")
    assert [im.shape for im in images] == [(24, 32, 3), (24, 32, 3)]  # the two render_worlds
    written: list[np.ndarray] = []

    class Clip:  # moviepy's ImageSequenceClip as the recorder calls it: keeps the frames, encodes nothing
        def __init__(self, frames: list[np.ndarray], fps: float) -> None:
            written.extend(frames)

        def write_videofile(self, path: str) -> None:
            pass

    for name in ("moviepy", "moviepy.video", "moviepy.video.io", "moviepy.video.io.ImageSequenceClip"):
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(ImageSequenceClip=Clip))
    recorder = VecVideoRecorder(env, str(tmp_path), record_video_trigger=lambda step: step == 0, video_length=3)
    recorder.reset()
    for _ in range(3):
        recorder.step(np.zeros((4, 1), dtype=np.float32))
    recorder.close()
    assert len(written) >= 3 and written[0].shape == (48, 32, 3)  # SB3's tile_images: two tiles, one above the other
    assert written[0].std() > 0
    assert not np.array_equal(written[0], written[-1])  # the pendulums moved


def test_set_options_reaches_the_reset() -> None:
    inner = CartPoleVectorEnv(4)
    env = SB3VecEnv(FixedShapeAutoresetVectorEnv(inner))
    env.reset()
    before = inner.episode.clone()
    env.set_options({"reset_mask": [False, True, False, True]})
    env.reset()
    assert (inner.episode - before).tolist() == [0, 1, 0, 1]
    env.set_options([{"reset_mask": [True, False, False, False]}, {}, {}, {}])
    with pytest.raises(ValueError, match="set_options\\(\\) gave different options to different indices"):
        env.reset()


def test_seeding_reproduces_and_differs() -> None:
    def first_obs(seed: int) -> np.ndarray:
        env = SB3VecEnv(FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4)))
        env.seed(seed)
        return env.reset()

    np.testing.assert_array_equal(first_obs(3), first_obs(3))
    assert not np.array_equal(first_obs(3), first_obs(4))


def test_vec_frame_stack_on_top_keeps_terminal_observations(cartpole: SB3VecEnv) -> None:
    from stable_baselines3.common.vec_env import VecFrameStack

    stacked = VecFrameStack(cartpole, n_stack=3)
    obs = stacked.reset()
    assert obs.shape == (8, 12)
    for t in range(8):
        obs, _, dones, infos = stacked.step(np.full(8, t % 2))
        for i in np.flatnonzero(dones):
            assert infos[i]["terminal_observation"].shape == (12,)
            np.testing.assert_array_equal(obs[i, :8], 0.0)  # the stack restarts on the new episode


def test_step_before_reset_is_refused(cartpole: SB3VecEnv) -> None:
    """SB3's learn() resets first; a bare step before it is an error, not undefined data (documented)."""
    with pytest.raises(RuntimeError, match="call reset\\(\\) before step\\(\\)"):
        cartpole.step(np.zeros(8, dtype=np.int64))


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_step_observations_keep_their_dtype_exactly_like_reset(dtype: torch.dtype) -> None:
    """float64 / int64 observations cross to numpy exact (a float32 pass would round them), as reset's do."""
    from gym_graphreset.wrappers import TransformObservation

    def make() -> FixedShapeAutoresetVectorEnv:
        inner = CartPoleVectorEnv(4, max_episode_steps=5)
        if dtype == torch.int64:  # values past 2**24, where float32 has no integers left
            inner = TransformObservation(inner, lambda o: (o * 2**40).to(torch.int64))
        else:  # thirds: float64 digits that float32 does not hold
            inner = TransformObservation(inner, lambda o: o.double() / 3)
        return FixedShapeAutoresetVectorEnv(inner, **MODES["masked"])

    direct, adapted = make(), SB3VecEnv(make())
    first, _ = direct.reset(seed=1)
    adapted.seed(1)
    np.testing.assert_array_equal(adapted.reset(), first.numpy())
    for t in range(8):
        a = np.full(4, t % 2)
        obs, _, _, _, info = direct.step(torch.as_tensor(a))
        obs_np, _, dones, infos = adapted.step(a)
        assert obs_np.dtype == obs.numpy().dtype
        np.testing.assert_array_equal(obs_np, obs.numpy())
        for i in np.flatnonzero(dones):
            np.testing.assert_array_equal(infos[i]["terminal_observation"], info["final_obs"][i].numpy())
