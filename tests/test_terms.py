"""EpisodeStatistics: raw returns wherever it sits (CleanRL's order without the order), wrapped on request,
published in ``final_info`` too."""

from __future__ import annotations

import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.wrappers import ClipReward, NormalizeReward

from .conftest import MODES, ScriptedVectorEnv, scripted_env


class _Recording(ScriptedVectorEnv):
    """Keeps a copy of the reward it paid (the truth the statistics are checked against)."""

    supports_reset_selection = True

    def step(self, actions: torch.Tensor):
        out = super().step(actions)
        self.paid = out[1].clone()
        return out


def _returns(rewards: str, mode: str) -> tuple[list[float], list[float]]:
    """Finished episodes' logged returns and the raw sums the inner env paid, for one configuration."""
    s = scripted_env(5, 80, p_done=0.1)
    inner = _Recording(5, s.term_script, s.trunc_script)
    env = FixedShapeAutoresetVectorEnv(
        ClipReward(NormalizeReward(inner), -0.5, 0.5),
        reset_terms={"ep": EpisodeStatistics(rewards=rewards)},
        **MODES[mode],
    )
    env.reset(seed=0)
    raw_sum = torch.zeros(5)
    logged, truth = [], []
    for t in range(80):
        *_, info = env.step(torch.full((5, 3), 0.01 * (t % 7)))
        raw_sum += inner.paid
        done = info["_episode"]
        logged += info["episode"]["r"][done].tolist()
        truth += raw_sum[done].tolist()
        raw_sum[done] = 0
        assert torch.equal(info["final_info"]["_episode"], done) if "final_info" in info else not done.any()
    return logged, truth


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
def test_returns_are_raw_by_default_with_normalize_reward_inside(mode: str) -> None:
    logged, truth = _returns("raw", mode)
    assert len(logged) >= 10
    torch.testing.assert_close(torch.tensor(logged), torch.tensor(truth))


def test_wrapped_returns_on_request_differ() -> None:
    logged, truth = _returns("wrapped", "masked")
    assert not torch.allclose(torch.tensor(logged), torch.tensor(truth))
    assert max(abs(r) for r in logged) <= 0.5 * 80  # sums of clipped rewards


def test_bad_rewards_argument() -> None:
    with pytest.raises(ValueError, match="`rewards` must be 'raw' or 'wrapped', got 'normalised'"):
        EpisodeStatistics(rewards="normalised")  # type: ignore[arg-type]
