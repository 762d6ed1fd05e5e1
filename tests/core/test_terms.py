"""EpisodeStatistics: raw returns wherever it sits (CleanRL's order without the order), wrapped on request,
published in ``final_info`` too."""

from __future__ import annotations

import re

import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.wrappers import ClipReward, NormalizeReward
from tests.conftest import MODES, ScriptedVectorEnv, scripted_env


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


# ---------------------------------------------------------------- info keys and bindings are one term's own


class _KeyTerm:
    """A selection-capable term publishing the given info keys."""

    supports_reset_selection = True

    def __init__(self, *keys: str) -> None:
        self.keys = keys

    def reset(self, rows: object) -> None: ...

    def info(self) -> dict[str, torch.Tensor]:
        return {k: torch.zeros(4) for k in self.keys}


COLLISIONS = {  # terms, the term refused, what its message names
    "two EpisodeStatistics (raw and wrapped)": (
        lambda: {"ep": EpisodeStatistics(), "ep_wrapped": EpisodeStatistics(rewards="wrapped")},
        "reset term 'ep_wrapped' (EpisodeStatistics) publishes info['episode'], which reset term 'ep'",
    ),
    "a term's final_obs": (
        lambda: {"mine": _KeyTerm("final_obs")},
        "reset term 'mine' (_KeyTerm) publishes info['final_obs'], which the wrapper itself publishes too",
    ),
    "a term's _final_info": (lambda: {"mine": _KeyTerm("x", "_final_info")}, "info['_final_info'], which the wrapper"),
    "a term's mask key on another's": (
        lambda: {"ep": EpisodeStatistics(), "mine": _KeyTerm("_episode")},
        "reset term 'mine' (_KeyTerm) publishes info['_episode'], which reset term 'ep'",
    ),
}


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
@pytest.mark.parametrize("case", list(COLLISIONS))
def test_info_key_collisions_refused_at_construction(mode: str, case: str) -> None:
    """Two publishers of one info key would silently lose one: refused by name, at construction."""
    make, message = COLLISIONS[case]
    with pytest.raises(ValueError, match=re.escape(message)):
        FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms=make(), **MODES[mode])


def test_info_key_collision_refused_by_add_reset_term() -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms={"ep": EpisodeStatistics()})
    with pytest.raises(ValueError, match=re.escape("reset term 'ep2' (EpisodeStatistics) publishes info['episode']")):
        env.add_reset_term("ep2", EpisodeStatistics())
    assert list(env.reset_terms) == ["ep"]
    env.reset(seed=0)
    env.step(torch.zeros(4, 3))


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
def test_term_key_colliding_with_the_inner_envs_info_is_refused(mode: str) -> None:
    """The inner env's info keys are known only at a step: there (as Gymnasium's RecordEpisodeStatistics)."""
    from gym_graphreset import InterruptedStepError

    env = FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms={"mine": _KeyTerm("pos_norm")}, **MODES[mode])
    env.reset(seed=0)
    with pytest.raises(ValueError, match=re.escape("_KeyTerm publishes info key(s) ['pos_norm'] that the step's info")):
        env.step(torch.zeros(4, 3))
    with pytest.raises(InterruptedStepError):
        env.step(torch.zeros(4, 3))


@pytest.mark.parametrize("mode", ["selected", "masked"])
def test_one_term_under_two_names_is_refused(mode: str) -> None:
    ep = EpisodeStatistics()
    with pytest.raises(ValueError, match=re.escape("reset term 'b' is the same EpisodeStatistics object as term 'a'")):
        FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms={"a": ep, "b": ep}, **MODES[mode])
    env = FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms={"a": ep}, **MODES[mode])
    with pytest.raises(ValueError, match=re.escape("reset term 'b' is the same EpisodeStatistics object as term 'a'")):
        env.add_reset_term("b", ep)


@pytest.mark.parametrize("how", ["constructor", "add_reset_term"])
def test_one_term_in_two_open_envs_is_refused_until_the_first_closes(how: str) -> None:
    """A module-level dict of terms reused for a second env: refused, naming the term; fine once closed."""
    terms = {"ep": EpisodeStatistics()}
    first = FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms=terms)
    message = re.escape("reset term 'ep' (EpisodeStatistics) is already bound to another open env (as 'ep')")

    def second() -> FixedShapeAutoresetVectorEnv:
        if how == "constructor":
            return FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms=terms)
        env = FixedShapeAutoresetVectorEnv(scripted_env(4, 10))
        env.add_reset_term("ep", terms["ep"])
        return env

    with pytest.raises(ValueError, match=message):
        second()
    first.reset(seed=0)
    first.step(torch.zeros(4, 3))  # the first env is untouched by the refusal
    first.close()
    second().reset(seed=0)


def test_a_refused_construction_binds_nothing() -> None:
    """A term handed to a construction that failed is free for the next env."""
    ep = EpisodeStatistics()

    class _Blocker:
        def reset(self, rows: object) -> None: ...

    with pytest.raises(ValueError, match="cannot take a ResetSelection"):
        FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms={"ep": ep, "b": _Blocker()}, **MODES["masked"])
    FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms={"ep": ep}, **MODES["masked"])


def test_a_collected_env_releases_its_terms() -> None:
    import gc

    ep = EpisodeStatistics()
    FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms={"ep": ep})
    gc.collect()
    FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms={"ep": ep})


@pytest.mark.parametrize(("num_envs", "error"), [(0, ValueError), (2**31, ValueError), (2.5, TypeError)])
def test_episode_statistics_num_envs_refused_by_name(num_envs: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="`num_envs` must be"):
        EpisodeStatistics(num_envs=num_envs)  # type: ignore[arg-type]
