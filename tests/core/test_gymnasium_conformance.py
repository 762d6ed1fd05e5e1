"""Conformance with Gymnasium's own SAME_STEP contract, ported from the ideas of Gymnasium's vector tests
(``tests/vector/test_autoreset_mode.py``, the info part of ``test_vector_env.py``) and run on every path the
wrapper supports: the reference is Gymnasium's ``SyncVectorEnv(autoreset_mode=SAME_STEP)`` on the same
counting env; ours wraps the DISABLED ``SyncVectorEnv`` (numpy, selected-row path) or a torch twin of the
env (every CPU preset). Compared: obs, rewards, flags, ``final_obs`` / ``final_info`` on done rows with
their masks, and the reset's info merged on reset rows; then Gymnasium's ``RecordEpisodeStatistics`` and
``NormalizeReward`` on top of ours against the same wrappers on top of the reference."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.vector import ArrayConversion, NumpyToTorch

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.selection import options_reset_mask
from tests.conftest import MODES

MAX_COUNT = [2, 3, 3, 5]
N = len(MAX_COUNT)


class CountingEnv(gym.Env):
    """obs = steps since reset (Discrete), reward = action, terminated at ``max_count``; infos on both calls."""

    observation_space = spaces.Discrete(10)
    action_space = spaces.Discrete(5)

    def __init__(self, max_count: int) -> None:
        self.max_count, self.count, self.resets = max_count, 0, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.count, self.resets = 0, self.resets + 1
        return self.count, {"resets": self.resets}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        self.count += 1
        return self.count, float(action), self.count == self.max_count, False, {"count": self.count}


class TorchCountingEnv(VectorEnv):
    """The same env as a batched torch env, selection-capable: the masked path's counterpart."""

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}
    supports_reset_selection = True
    supports_step_capture = True

    def __init__(self, max_count: list[int]) -> None:
        self.num_envs, self.device = len(max_count), torch.device("cpu")
        self.single_observation_space, self.single_action_space = spaces.Discrete(10), spaces.Discrete(5)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.max_count = torch.tensor(max_count)
        self.count = torch.zeros(self.num_envs, dtype=torch.long)
        self.resets = torch.zeros(self.num_envs, dtype=torch.long)
        self._all = torch.ones(self.num_envs, dtype=torch.bool)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        mask = options_reset_mask(options, self._all)
        self.count.masked_fill_(mask, 0)
        self.resets.add_(mask.long())
        return self.count.clone(), {"resets": self.resets.clone(), "_resets": mask.clone()}

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        self.count.add_(1)
        ones = torch.ones(self.num_envs, dtype=torch.bool)
        info = {"count": self.count.clone(), "_count": ones}
        return self.count.clone(), actions.double(), self.count == self.max_count, ~ones, info


def _reference() -> SyncVectorEnv:
    return SyncVectorEnv([lambda m=m: CountingEnv(m) for m in MAX_COUNT], autoreset_mode=AutoresetMode.SAME_STEP)


def _ours(path: str) -> FixedShapeAutoresetVectorEnv:
    if path == "numpy-selected":
        inner = NumpyToTorch(SyncVectorEnv([lambda m=m: CountingEnv(m) for m in MAX_COUNT], autoreset_mode="Disabled"))
        return FixedShapeAutoresetVectorEnv(inner)
    return FixedShapeAutoresetVectorEnv(TorchCountingEnv(MAX_COUNT), **MODES[path])


PATHS = ["numpy-selected", "selected", "masked", "masked_persistent"]


def _np(x: Any) -> np.ndarray:
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _assert_info_conforms(ours: dict[str, Any], ref: dict[str, Any], done: np.ndarray, step: int) -> None:
    """Every key Gymnasium returns is there, equal on the rows its mask marks (masks equal too)."""
    for key, value in ref.items():
        if key.startswith("_"):
            continue
        mask = np.asarray(ref[f"_{key}"])
        assert key in ours and f"_{key}" in ours, f"step {step}: {key} missing from {sorted(ours)}"
        np.testing.assert_array_equal(_np(ours[f"_{key}"]), mask, err_msg=f"step {step}: _{key}")
        if key == "final_obs":
            np.testing.assert_array_equal(_np(ours[key])[mask], np.stack(value[mask]).astype(np.int64))
        elif key == "final_info":
            _assert_info_conforms(ours[key], value, done, step)
        else:
            np.testing.assert_array_equal(_np(ours[key])[mask], np.asarray(value)[mask], err_msg=f"step {step}: {key}")


@pytest.mark.parametrize("path", PATHS)
def test_same_step_autoreset_matches_gymnasium(path: str) -> None:
    ref, env = _reference(), _ours(path)
    ref_obs, _ = ref.reset(seed=0)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(_np(obs), ref_obs)
    rng = np.random.default_rng(0)
    dones = 0
    for t in range(12):
        a = rng.integers(1, 5, N)
        ref_obs, ref_r, ref_te, ref_tr, ref_info = ref.step(a)
        obs, r, te, tr, info = env.step(torch.as_tensor(a))
        for ours, theirs in ((obs, ref_obs), (r, ref_r), (te, ref_te), (tr, ref_tr)):
            np.testing.assert_array_equal(_np(ours), theirs, err_msg=f"step {t}")
        done = ref_te | ref_tr
        _assert_info_conforms(info, ref_info, done, t)
        if done.any():  # what the reset said, merged on the reset rows (Gymnasium: top-level keys)
            np.testing.assert_array_equal(_np(info["_resets"])[done], True)
        dones += int(done.sum())
    assert dones >= 8


@pytest.mark.parametrize("path", PATHS)
def test_gymnasium_wrappers_on_top_match(path: str) -> None:
    """Gymnasium's RecordEpisodeStatistics and NormalizeReward on top of ours == on top of the reference."""

    def stack(env: VectorEnv) -> VectorEnv:
        return gym.wrappers.vector.NormalizeReward(gym.wrappers.vector.RecordEpisodeStatistics(env), gamma=0.9)

    ref = stack(_reference())
    ours = stack(ArrayConversion(_ours(path), env_xp=torch, target_xp=np))
    ref.reset(seed=0)
    ours.reset(seed=0)
    rng = np.random.default_rng(1)
    episodes = 0
    for t in range(20):
        a = rng.integers(1, 5, N)
        _, ref_r, *_, ref_info = ref.step(a)
        _, r, *_, info = ours.step(a)
        np.testing.assert_allclose(r, ref_r, rtol=1e-6, err_msg=f"normalised reward, step {t}")
        assert ("episode" in info) == ("episode" in ref_info)
        if "episode" in ref_info:
            done = ref_info["_episode"]
            np.testing.assert_array_equal(info["_episode"], done)
            np.testing.assert_array_equal(info["episode"]["r"][done], ref_info["episode"]["r"][done])
            np.testing.assert_array_equal(info["episode"]["l"][done], ref_info["episode"]["l"][done])
            episodes += int(done.sum())
    assert episodes >= 8


@pytest.mark.parametrize(
    "space",
    [
        spaces.Sequence(spaces.Discrete(3)),
        spaces.Text(5),
        spaces.Graph(spaces.Box(0, 1, (2,)), None),
        spaces.OneOf([spaces.Discrete(2), spaces.Discrete(3)]),
        spaces.Dict({"ok": spaces.Discrete(2), "bad": spaces.Sequence(spaces.Discrete(2))}),
    ],
    ids=["Sequence", "Text", "Graph", "OneOf", "Dict-with-Sequence"],
)
def test_variable_shape_spaces_refused_by_name(space: spaces.Space) -> None:
    """A fixed-shape wrapper cannot hold them: refused at construction, naming the space."""
    inner = TorchCountingEnv(MAX_COUNT)
    inner.single_observation_space = space
    with pytest.raises(ValueError, match=r"observation space .*(Sequence|Text|Graph|OneOf).* fixed-shape"):
        FixedShapeAutoresetVectorEnv(inner)
