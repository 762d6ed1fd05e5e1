"""Torch-native vector wrappers: negotiation participants, identical paths, capture-safe state,
normalisation that reaches final_obs; Gymnasium's array-conversion wrappers around our envs."""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.vector import ArrayConversion

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.envs import CartPoleVectorEnv
from gym_graphreset.testing import assert_masked_matches_selected
from gym_graphreset.wrappers import ClipAction, ClipObservation, NormalizeObservation, NormalizeReward, RescaleAction
from tests.conftest import MODES, ScriptedVectorEnv, scripted_env


def _stack(n: int = 6, steps: int = 80):
    return NormalizeReward(NormalizeObservation(ClipAction(RescaleAction(scripted_env(n, steps, p_done=0.15), -2, 2))))


def test_wrappers_are_participants_without_blockers() -> None:
    env = FixedShapeAutoresetVectorEnv(_stack(), **MODES["masked"])
    assert env.reset_selection_blockers() == []
    assert env.step_capture_blockers() == []


@pytest.mark.parametrize("mode", ["masked", "masked_persistent"])
def test_paths_identical_through_the_wrappers(mode: str) -> None:
    gen = torch.Generator().manual_seed(0)
    actions = [torch.rand(6, 3, generator=gen) * 4 - 2 for _ in range(80)]

    def factory(flags):
        return FixedShapeAutoresetVectorEnv(_stack(), reset_terms={"ep": EpisodeStatistics()}, **flags)

    assert_masked_matches_selected(factory, actions, config=MODES[mode]["config"])


def test_normalize_observation_standardises_and_reaches_final_obs() -> None:
    inner = NormalizeObservation(scripted_env(64, 300, p_done=0.02))
    env = FixedShapeAutoresetVectorEnv(inner, **MODES["masked"])
    env.reset(seed=0)
    gen = torch.Generator().manual_seed(1)
    seen = []
    for _ in range(300):
        obs, *_, info = env.step(torch.randn(64, 3, generator=gen))
        seen.append(obs)
        done = info["_final_obs"]
        assert torch.equal(info["final_obs"][~done], obs[~done])  # final_obs is the normalised obs
    late = torch.cat(seen[150:])[:, :3]  # column 3 is the episode index: not stationary
    assert late.mean(0).abs().max() < 0.35 and (late.std(0) - 1).abs().max() < 0.35
    ptr = inner.mean.data_ptr()
    env.step(torch.zeros(64, 3))
    assert inner.mean.data_ptr() == ptr  # updated in place: a captured graph keeps pointing at it


def test_normalize_reward_scales_by_return_std() -> None:
    inner = NormalizeReward(scripted_env(128, 400, p_done=0.01), gamma=0.9)
    env = FixedShapeAutoresetVectorEnv(inner, **MODES["masked"])
    env.reset(seed=0)
    for _ in range(400):
        _, reward, *_ = env.step(torch.full((128, 3), 0.5))
    raw_scale = inner.var.sqrt().item()
    assert raw_scale > 1.0 and torch.isfinite(reward).all()
    assert inner.returns.abs().max() < float("inf")


def test_action_wrappers() -> None:
    rescale = RescaleAction(scripted_env(2, 5), min_action=0.0, max_action=1.0)
    assert torch.allclose(rescale._action(torch.tensor([[0.0, 0.5, 1.0]] * 2)), torch.tensor([[-1.0, 0.0, 1.0]] * 2))
    clip = ClipAction(scripted_env(2, 5))
    assert torch.allclose(clip._action(torch.tensor([[5.0, -5.0, 0.2]] * 2)), torch.tensor([[1.0, -1.0, 0.2]] * 2))
    with pytest.raises(ValueError, match=re.escape("`min_action` must be < `max_action`, got 1.0 and 1.0")):
        RescaleAction(scripted_env(2, 5), 1.0, 1.0)


def test_clip_observation() -> None:
    env = ClipObservation(scripted_env(2, 5), -0.1, 0.1)
    obs, _ = env.reset(seed=0)
    assert obs.abs().max() <= 0.1 and env.single_observation_space.high[0] == np.float32(0.1)


def test_gymnasium_array_conversion_to_numpy_around_our_env() -> None:
    """Gymnasium's ArrayConversion (torch -> numpy; gymnasium 1.4 has no vector TorchToNumpy) works."""
    env = ArrayConversion(
        FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4), **MODES["masked"]), env_xp=torch, target_xp=np
    )
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, np.ndarray) and obs.shape == (4, 4)
    for _ in range(30):
        obs, reward, *_, info = env.step(np.ones(4, dtype=np.int64))
    assert isinstance(reward, np.ndarray) and isinstance(info["final_obs"], np.ndarray)


def test_normalize_observation_ignores_non_finite_rows_and_latches_them() -> None:
    """One NaN row must not poison every row's running statistics; the bad row is latched by name."""
    from gym_graphreset import DeferredValidationError

    inner = scripted_env(4, 20, p_done=0.0)
    norm = NormalizeObservation(inner)
    env = FixedShapeAutoresetVectorEnv(norm, **{**MODES["masked"], "validation_poll_interval": 1000})
    env.reset(seed=0)
    inner.pos[2, 1] = float("nan")  # a fault in the inner env: row 2's state turns NaN
    env.step(torch.zeros(4, 3))
    assert torch.isfinite(norm.mean).all() and torch.isfinite(norm.var).all()
    obs, *_ = env.step(torch.zeros(4, 3))
    assert torch.isfinite(obs[[0, 1, 3]]).all()  # the other rows still normalise
    with pytest.raises(DeferredValidationError, match=r"normalize_observation_finite: .*row 2\)"):
        env.poll_finite_validation()
    env.reset(seed=0)  # and reset() recovers
    obs, *_ = env.step(torch.zeros(4, 3))
    assert torch.isfinite(obs).all()


def test_reward_and_observation_transforms_on_every_path() -> None:
    """CleanRL's transforms: selection-capable, capture-safe, identical on both paths; raw reward kept."""
    from gym_graphreset.wrappers import ClipReward, TransformObservation, TransformReward

    def stack(p_done: float = 0.2):
        inner = scripted_env(6, 60, p_done=p_done)
        return ClipReward(
            TransformReward(TransformObservation(inner, lambda o: o.clamp(-0.5, 0.5)), lambda r: 3 * r), -1, 1
        )

    env = FixedShapeAutoresetVectorEnv(stack(p_done=0.0), **MODES["masked"])
    assert env.reset_selection_blockers() == [] and env.step_capture_blockers() == []
    env.reset(seed=0)
    scripted = env.env.env.env.env
    obs, reward, *_ = env.step(torch.full((6, 3), 0.3))
    paid = scripted.pos.sum(dim=1)  # no row ends: this state is the one that paid
    assert obs.abs().max() <= 0.5 and reward.abs().max() <= 1
    clip, transform = env.env, env.env.env
    torch.testing.assert_close(transform.raw_reward, paid)  # each keeps the reward it was given
    torch.testing.assert_close(clip.raw_reward, 3 * paid)
    torch.testing.assert_close(reward, (3 * paid).clamp(-1, 1))
    gen = torch.Generator().manual_seed(0)
    actions = [torch.rand(6, 3, generator=gen) - 0.5 for _ in range(60)]

    def factory(flags):
        return FixedShapeAutoresetVectorEnv(stack(), reset_terms={"ep": EpisodeStatistics()}, **flags)

    for mode in ("masked", "masked_persistent"):
        assert_masked_matches_selected(factory, actions, config=MODES[mode]["config"])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda env: __import__("gym_graphreset.wrappers").wrappers.ClipReward(env),
            "needs `min_reward` or `max_reward`",
        ),
        (lambda env: __import__("gym_graphreset.wrappers").wrappers.ClipReward(env, 2, 1), "`min_reward` must be <="),
        (lambda env: __import__("gym_graphreset.wrappers").wrappers.TransformReward(env, 3), "`fn` must be callable"),
    ],
)
def test_transform_arguments_refused_by_name(make, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        make(scripted_env(2, 4))


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
@pytest.mark.parametrize("update", [True, False])
@pytest.mark.parametrize("source", ["step", "reset", "partial reset"])
def test_normalize_observation_latches_non_finite_obs_frozen_or_not(mode: str, update: bool, source: str) -> None:
    """An inf observation, which normalising and clipping would hide, is latched with its row (frozen stats too)."""
    from gym_graphreset import DeferredValidationError
    from gym_graphreset.wrappers import TransformObservation

    poison = torch.zeros(4, dtype=torch.bool)
    inf = float("inf")
    inner = TransformObservation(scripted_env(4, 20, p_done=0.0), lambda o: o.masked_fill(poison.unsqueeze(1), inf))
    norm = NormalizeObservation(inner, update=update)
    env = FixedShapeAutoresetVectorEnv(norm, **{**MODES[mode], "validation_poll_interval": 1000})
    env.reset(seed=0)
    env.step(torch.zeros(4, 3))
    poison[1] = True
    with pytest.raises(DeferredValidationError, match=r"normalize_observation_finite: .*row 1\)"):
        if source == "step":
            obs, *_ = env.step(torch.zeros(4, 3))
        else:
            obs, _ = env.reset(options={"reset_mask": [1]} if source == "partial reset" else None)
            poison[1] = False
            env.step(torch.zeros(4, 3))
        assert bool(torch.isfinite(obs).all())  # the clipped output hides it: only the latch can tell
        env.poll_finite_validation()
    poison[1] = False
    env.reset(seed=0)  # a full reset recovers, and nothing stale is reported after it
    env.step(torch.zeros(4, 3))
    env.poll_finite_validation()


def _unbounded_actions(env: ScriptedVectorEnv) -> ScriptedVectorEnv:
    """The env with an action space unbounded in entries 0 and 2 (as Go1's is everywhere)."""
    env.single_action_space = spaces.Box(
        np.array([-np.inf, -1, -np.inf]), np.array([np.inf, 1, np.inf]), (3,), np.float32
    )
    return env


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda env: NormalizeObservation(env, epsilon=0.0), ValueError, "`epsilon` must lie in (0.0, inf], got 0.0"),
        (lambda env: NormalizeObservation(env, clip=-1.0), ValueError, "`clip` must lie in (0.0, inf], got -1.0"),
        (lambda env: NormalizeObservation(env, clip=float("nan")), ValueError, "`clip` must lie in"),
        (lambda env: NormalizeObservation(env, update=1), TypeError, "`update` must be a bool, got 1"),
        (lambda env: NormalizeReward(env, gamma=1.5), ValueError, "`gamma` must lie in [0.0, 1.0], got 1.5"),
        (lambda env: NormalizeReward(env, epsilon=-1e-8), ValueError, "`epsilon` must lie in (0.0, inf]"),
        (lambda env: NormalizeReward(env, gamma="0.9"), TypeError, "`gamma` must be a real number, got '0.9'"),
        (lambda env: ClipObservation(env, 1.0, -1.0), ValueError, "`low` must be <= `high`, got 1.0 and -1.0"),
        (lambda env: ClipObservation(env, float("nan"), 1.0), ValueError, "`low` must lie in"),
        (lambda env: RescaleAction(env, float("nan"), 1.0), ValueError, "`min_action` must lie in"),
        (
            lambda env: RescaleAction(_unbounded_actions(env)),
            ValueError,
            "action space is unbounded in entries [0, 2]",
        ),
        (
            lambda env: __import__("gym_graphreset.wrappers").wrappers.ClipReward(env, float("nan")),
            ValueError,
            "`min_reward` must lie in",
        ),
    ],
)
def test_numeric_wrapper_arguments_refused_by_name(make, error: type[Exception], message: str) -> None:
    """Out-of-range or NaN numeric settings are refused at construction, naming the argument."""
    with pytest.raises(error, match=re.escape(message)):
        make(scripted_env(2, 4))


class _DictObsEnv(VectorEnv):
    """Two rows of Dict observations ({"pos": (3,), "vel": (2,)}), values from -2 to 2."""

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(self) -> None:
        self.num_envs, self.device = 2, torch.device("cpu")
        box = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.single_observation_space = gym.spaces.Dict({"pos": box, "vel": gym.spaces.Box(-5, 5, (2,), np.float32)})
        self.observation_space = batch_space(self.single_observation_space, 2)
        self.single_action_space = gym.spaces.Box(-1, 1, (1,), np.float32)
        self.action_space = batch_space(self.single_action_space, 2)

    def _obs(self) -> dict[str, torch.Tensor]:
        return {"pos": torch.linspace(-2, 2, 6).reshape(2, 3), "vel": torch.tensor([[-2.0, 0.05], [2.0, -0.05]])}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        return self._obs(), {}

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        no = torch.zeros(2, dtype=torch.bool)
        return self._obs(), torch.zeros(2), no, no, {}


def test_clip_observation_over_a_dict_space() -> None:
    """Every Box of a Dict observation space is clipped, and the space says so."""
    env = ClipObservation(_DictObsEnv(), -0.1, 0.1)
    assert isinstance(env.single_observation_space, gym.spaces.Dict)
    assert all(float(s.high.max()) == np.float32(0.1) for s in env.single_observation_space.spaces.values())
    for obs in (env.reset(seed=0)[0], env.step(torch.zeros(2, 1))[0]):
        assert set(obs) == {"pos", "vel"} and all(v.abs().max() <= 0.1 for v in obs.values())
        assert obs["vel"][0, 1] == pytest.approx(0.05) and env.single_observation_space.contains(
            {k: v[0].numpy() for k, v in obs.items()}
        )
    inner = _DictObsEnv()
    inner.single_observation_space = gym.spaces.Dict({"pos": gym.spaces.Discrete(3)})
    with pytest.raises(ValueError, match=re.escape("needs Box observations (or a Dict or Tuple of them), got")):
        ClipObservation(inner, -1.0, 1.0)
    with pytest.raises(ValueError, match=re.escape("at observation['pos']")):
        ClipObservation(inner, -1.0, 1.0)
