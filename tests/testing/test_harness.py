"""The conformance harness itself: it passes conforming envs and fails the ones that differ."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from gym_graphreset import (
    EpisodeStatistics,
    FixedShapeAutoresetVectorEnv,
    ResetSelection,
    reset_selection_capable,
    resolve_reset_mask,
)
from gym_graphreset.envs import CartPoleVectorEnv
from gym_graphreset.testing import (
    assert_masked_matches_selected,
    assert_statistically_equivalent,
    count_host_syncs,
    ks_statistic,
    rollout,
)
from tests.conftest import ScriptedVectorEnv

ACTIONS = [torch.full((8,), t % 2) for t in range(120)]


def test_passes_a_conforming_env() -> None:
    assert_masked_matches_selected(lambda flags: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8), **flags), ACTIONS)


def test_fails_an_env_whose_masked_path_differs() -> None:
    def factory(flags):  # the masked configuration draws other resets: must be caught
        return FixedShapeAutoresetVectorEnv(
            CartPoleVectorEnv(8, global_env_offset=1 if flags["config"].masked else 0), **flags
        )

    with pytest.raises(AssertionError, match="masked vs selected: obs differs at step 0"):
        assert_masked_matches_selected(factory, ACTIONS)


def test_rollout_records_host_copies() -> None:
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8, max_episode_steps=5), "masked")
    records = rollout(env, ACTIONS[:6])
    assert len(records) == 7 and "final_obs" in records[5]
    assert records[5]["final_obs"][()].shape == (8, 4)  # step 5: every row truncated


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU behaviour")
def test_count_host_syncs_is_zero_without_cuda() -> None:
    assert count_host_syncs(lambda: None) == (0, [])


RANDOM = [torch.randint(0, 2, (64,), generator=torch.Generator().manual_seed(t)) for t in range(300)]


def _cartpole(max_steps_candidate: int = 500):
    def factory(flags):
        steps = max_steps_candidate if flags["config"].masked else 500
        inner = CartPoleVectorEnv(64, max_episode_steps=steps)
        return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)

    return factory


def test_statistical_check_passes_equivalent_paths() -> None:
    """Masked vs selected on the CPU are identical, so every statistic agrees (KS 0, z 0)."""
    report = assert_statistically_equivalent(_cartpole(), RANDOM)
    assert report["length"]["n_selected"] == report["length"]["n_candidate"] > 500
    assert report["return"]["ks"] == 0.0 and report["return"]["welch_z"] == 0.0


def test_statistical_check_fails_a_different_env() -> None:
    """A candidate whose episodes are truncated at 12 steps has other length statistics: caught."""
    with pytest.raises(AssertionError, match="episode statistics differ"):
        assert_statistically_equivalent(_cartpole(max_steps_candidate=12), RANDOM)


def test_statistical_check_refuses_too_few_episodes() -> None:
    with pytest.raises(AssertionError, match="episodes finished"):
        assert_statistically_equivalent(_cartpole(), RANDOM[:5])


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 0.0), ([1.0, 2.0], [3.0, 4.0], 1.0), ([1.0, 2.0, 3.0, 4.0], [2.5], 0.5)],
)
def test_ks_statistic(a: list[float], b: list[float], expected: float) -> None:
    assert ks_statistic(torch.tensor(a), torch.tensor(b)) == pytest.approx(expected)


@reset_selection_capable
class _PathDependentInfo:
    """Publishes how often ``reset`` was called: once per done step on the selected path, every step on the
    masked one. Its info differs between paths while obs, reward and flags agree: the harness must see it."""

    def __init__(self) -> None:
        self.calls = torch.zeros(8)

    def reset(self, env_ids) -> None:
        self.calls.add_(1)

    def info(self) -> dict:
        return {"reset_calls": {"count": self.calls}}


def test_fails_a_term_whose_info_differs_between_paths() -> None:
    def factory(flags):
        return FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8), reset_terms={"calls": _PathDependentInfo()}, **flags)

    with pytest.raises(AssertionError, match=r"masked vs selected: reset_calls\['count'\] differs at step 1"):
        assert_masked_matches_selected(factory, ACTIONS)


def test_masked_entries_compared_on_their_rows_only() -> None:
    """``final_obs`` is published every step on the masked path, on done steps on the selected one: equal."""
    records = rollout(FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8, max_episode_steps=5)), ACTIONS[:6])
    assert "final_obs" not in records[1] and "final_obs" in records[5]
    assert_masked_matches_selected(
        lambda flags: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8, max_episode_steps=5), **flags), ACTIONS
    )


class _SharedGeneratorReset(ScriptedVectorEnv):
    """Draws reset positions from one generator for all rows: the draws depend on how often reset is called."""

    supports_reset_selection = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[torch.Tensor, dict]:
        if seed is not None:
            self.gen = torch.Generator().manual_seed(seed)
        _, info = super().reset(seed=seed, options=options)
        m = (options or {}).get("reset_mask")
        mask = m.mask if isinstance(m, ResetSelection) else resolve_reset_mask(m, self.num_envs, self.device)
        self.pos.copy_(torch.where(mask.unsqueeze(1), torch.randn(self.num_envs, 3, generator=self.gen), self.pos))
        return self._obs(), info


def test_a_difference_names_its_rows_and_likely_cause() -> None:
    term = torch.zeros(6, 4, dtype=torch.bool)
    term[1, 2] = True  # row 2 ends at the second step; nobody ends at the first

    def factory(kwargs):
        return FixedShapeAutoresetVectorEnv(_SharedGeneratorReset(4, term, torch.zeros_like(term)), **kwargs)

    actions = [torch.zeros(4, 3)] * 4
    message = r"masked vs selected: obs differs at step 2 in row\(s\) \[2\], which reset at this step"
    with pytest.raises(AssertionError, match=message + r".*depends on which rows reset together"):
        assert_masked_matches_selected(factory, actions)


def _feet_speed(env: Any) -> torch.Tensor:
    """A user's critic term reading body velocities (``cvel``: the ``com_vel`` pass)."""
    return env.cvel[:, 1, 3:6]


@pytest.mark.parametrize("declared", [("kinematics",), ("com_vel",)])
def test_declared_forward_check_catches_a_term_reading_outside_its_passes(declared: tuple[str, ...]) -> None:
    """A term declaring ``kinematics`` but reading ``cvel`` reads it stale under the reduced forward: the check
    names it; declared ``com_vel``, it passes (and the reduced forward is not the full one)."""
    from dataclasses import replace

    from gym_graphreset.managers.forward_passes import reads_forward
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv
    from gym_graphreset.tasks import ObsGroup, ObsTerm, velocity_task
    from gym_graphreset.testing import assert_declared_forward_matches_full
    from tests.tasks.test_layer import ROBOT

    term = reads_forward(*declared)(lambda env: _feet_speed(env))  # type: ignore[arg-type]
    base = velocity_task(ROBOT)
    cfg = replace(base, observations={**base.observations, "critic": ObsGroup({"speed": ObsTerm(term)})})
    made: list[ManagerBasedEnv] = []

    def factory(mode: Any) -> FixedShapeAutoresetVectorEnv:
        made.append(ManagerBasedEnv(replace(cfg, forward_before_obs=True, forward_passes=mode), 3, device="cpu"))
        return FixedShapeAutoresetVectorEnv(made[-1], "masked")

    actions = [torch.full((3, 2), 0.5 * (-1) ** t) for t in range(6)]
    if declared == ("com_vel",):
        assert_declared_forward_matches_full(factory, actions, seed=1)
        assert made[-1].forward_plan.passes == ("kinematics", "com_pos", "com_vel")
        return
    with pytest.raises(AssertionError, match=re.escape("observation term(s) ['critic/speed'] differ first at step 1")):
        assert_declared_forward_matches_full(factory, actions, seed=1)
