"""A NaN from an observation or reward term is latched (no host read) under the term's own name; a task env
stepped with no wrapper warns once that nothing resets it."""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset import DeferredValidationError, FixedShapeAutoresetVectorEnv
from gym_graphreset.tasks import ManagerBasedEnv, ObsTerm, RewardTerm, TaskCfg, UnwrappedStepWarning
from gym_graphreset.testing import assert_no_host_reads
from tests.tasks.test_layer import user_task

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
N = 4


def nan_on_row_2(env: ManagerBasedEnv) -> torch.Tensor:
    """A term that is NaN on row 2 only (a user's bug)."""
    x = torch.zeros(env.num_envs, device=env.device)
    return torch.where(torch.arange(env.num_envs, device=env.device) == 2, float("nan"), x)


def nan_obs_on_row_2(env: ManagerBasedEnv) -> torch.Tensor:
    return nan_on_row_2(env).unsqueeze(1)


@pytest.mark.parametrize(
    ("change", "name"),
    [
        (lambda c: c.with_obs("critic", "broken", ObsTerm(nan_obs_on_row_2)), "finite_obs[critic/broken]"),
        (lambda c: c.with_term("rewards", "broken", RewardTerm(nan_on_row_2, 1.0)), "finite_reward[broken]"),
    ],
    ids=["observation", "reward"],
)
def test_a_nan_is_latched_naming_its_term_and_row(change: object, name: str) -> None:
    """The poll names the term (its group) and its function, and row 2; the steps read nothing on the host."""
    cfg: TaskCfg = change(user_task())  # type: ignore[operator]
    env = FixedShapeAutoresetVectorEnv(ManagerBasedEnv(cfg, N, device="cpu"), "masked", validation_poll_interval=1000)
    env.reset(seed=0)
    assert_no_host_reads(lambda: [env.step(torch.zeros(N, 2)) for _ in range(2)])
    with pytest.raises(DeferredValidationError) as caught:
        env.poll_finite_validation()
    text = str(caught.value)
    assert name in text and "'nan_" in text and "row 2" in text, text
    clean = [n for n in env.latch.names if n.startswith(("finite_obs[", "finite_reward[")) and n != name]
    assert clean and all(n not in text for n in clean), "only the broken term is named"
    env.close()


def test_a_task_env_stepped_alone_warns_once_that_nothing_resets_it() -> None:
    """Alone: one warning naming the wrapper, at the first step only; through the wrapper: none."""
    env = ManagerBasedEnv(user_task(), 2, device="cpu")
    with pytest.warns(UnwrappedStepWarning, match=r"nothing resets the rows that end.*FixedShapeAutoresetVectorEnv"):
        env.step(torch.zeros(2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnwrappedStepWarning)
        env.step(torch.zeros(2, 2))
        wrapped = FixedShapeAutoresetVectorEnv(ManagerBasedEnv(user_task(), 2, device="cpu"), "masked")
        wrapped.reset(seed=0)
        wrapped.step(torch.zeros(2, 2))
    wrapped.close()
