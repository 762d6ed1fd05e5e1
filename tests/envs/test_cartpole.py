"""The torch CartPole: Gymnasium CartPole-v1's dynamics, spaces, reset distribution and registration."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import gym_graphreset  # noqa: F401  (registers the ids)
from gym_graphreset import ResetSelection
from gym_graphreset.envs import CartPoleVectorEnv


def test_spaces_match_gymnasium() -> None:
    ref = gym.make("CartPole-v1")
    env = CartPoleVectorEnv(3)
    assert env.single_observation_space == ref.observation_space
    assert env.single_action_space == ref.action_space
    assert env.observation_space.shape == (3, 4)


def test_dynamics_match_gymnasium_from_the_same_state() -> None:
    """float64 state: every step from identical states equals Gymnasium's (float32 observations)."""
    n = 16
    env = CartPoleVectorEnv(n, dtype=torch.float64)
    env.reset(seed=0)
    refs = [gym.make("CartPole-v1").unwrapped for _ in range(n)]
    rng = np.random.default_rng(0)
    for ref, s in zip(refs, env.state.numpy(), strict=True):
        ref.reset(seed=0)
        ref.state = s.copy()
    for _ in range(30):
        a = rng.integers(0, 2, n)
        obs, r, te, _tr, _ = env.step(torch.as_tensor(a))
        for i, ref in enumerate(refs):
            if ref.steps_beyond_terminated is not None:
                continue
            ref_obs, ref_r, ref_te, _, _ = ref.step(int(a[i]))
            np.testing.assert_allclose(obs[i].numpy(), ref_obs, rtol=0, atol=1e-6)
            assert float(r[i]) == ref_r and bool(te[i]) == ref_te


def test_reset_distribution() -> None:
    env = CartPoleVectorEnv(20_000)
    obs, _ = env.reset(seed=3)
    assert obs.dtype == torch.float32 and obs.min() >= -0.05 and obs.max() <= 0.05
    assert abs(obs.mean().item()) < 0.001 and abs(obs.std().item() - 0.1 / 12**0.5) < 0.001


@pytest.mark.parametrize("mask_kind", ["selection", "tensor", "ids", "numpy"])
def test_partial_reset_touches_only_selected_rows(mask_kind: str) -> None:
    env = CartPoleVectorEnv(4)
    env.reset(seed=0)
    env.step(torch.ones(4, dtype=torch.long))
    before = env.state.clone()
    mask = torch.tensor([False, True, False, True])
    sel = ResetSelection(4, "cpu").set_(mask)
    reset_mask = {"selection": sel, "tensor": mask, "ids": torch.tensor([1, 3]), "numpy": mask.numpy()}[mask_kind]
    env.reset(options={"reset_mask": reset_mask})
    assert torch.equal(env.state[[0, 2]], before[[0, 2]]) and not torch.equal(env.state[[1, 3]], before[[1, 3]])
    assert env.episode.tolist() == [0, 1, 0, 1] and env.elapsed.tolist() == [1, 0, 1, 0]


def test_rows_do_not_depend_on_num_envs_or_offset() -> None:
    """Global env i draws the same episodes whatever the batch it sits in."""
    big = CartPoleVectorEnv(8)
    small = CartPoleVectorEnv(4, global_env_offset=4)
    assert torch.equal(big.reset(seed=9)[0][4:], small.reset(seed=9)[0])


def test_truncates_at_max_episode_steps() -> None:
    env = CartPoleVectorEnv(2, max_episode_steps=3)
    env.reset(seed=0)
    flags = [env.step(torch.tensor([0, 1]))[3].tolist() for _ in range(3)]
    assert flags == [[False, False], [False, False], [True, True]]


def test_make_vec_registration() -> None:
    env = gym.make_vec("gym_graphreset/CartPole-v1", num_envs=5, vectorization_mode="vector_entry_point")
    assert isinstance(env, CartPoleVectorEnv) and env.num_envs == 5


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="`num_envs` must be >= 1, got 0"):
        CartPoleVectorEnv(0)
    env = CartPoleVectorEnv(2)
    with pytest.raises(ValueError, match="`seed` must be an int or None"):
        env.reset(seed=[1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", CartPoleVectorEnv.supported_dtypes)
def test_supported_dtypes_reset_finite_and_in_range(dtype: torch.dtype) -> None:
    """Every declared dtype gives finite reset draws in [-0.05, 0.05] and steps."""
    env = CartPoleVectorEnv(64, dtype=dtype)
    obs, _ = env.reset(seed=0)
    assert env.state.dtype == dtype and bool(torch.isfinite(obs).all()) and float(obs.abs().max()) <= 0.05
    obs, *_ = env.step(torch.ones(64, dtype=torch.long))
    assert bool(torch.isfinite(obs).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, torch.complex64, "float32", None])
def test_unsupported_dtypes_refused_by_name(dtype: object) -> None:
    """A dtype outside ``supported_dtypes`` (half precision made every reset obs inf) is refused, naming both."""
    with pytest.raises(ValueError, match=r"`dtype` must be one of CartPoleVectorEnv.supported_dtypes \(torch.float32"):
        CartPoleVectorEnv(4, dtype=dtype)  # type: ignore[arg-type]


def test_step_takes_a_numpy_action_and_refuses_a_list_by_name() -> None:
    """A numpy action (``action_space.sample()``) steps as the same tensor does; a list is refused, named."""
    a, b = CartPoleVectorEnv(4), CartPoleVectorEnv(4)
    a.reset(seed=3)
    b.reset(seed=3)
    actions = np.array([0, 1, 1, 0])
    for x, y in zip(a.step(actions)[:4], b.step(torch.as_tensor(actions))[:4], strict=True):
        assert torch.equal(x, y)
    with pytest.raises(ValueError, match="actions must be a torch.Tensor or a numpy array, got list"):
        a.step([0, 1, 1, 0])  # type: ignore[arg-type]
