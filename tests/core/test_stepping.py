"""The step body and the reset paths: published values are fresh or ring-held, reset observations are
checked on every path, and faults are latched with their rows."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from gym_graphreset import (
    DeferredValidationError,
    EpisodeStatistics,
    FixedShapeAutoresetVectorEnv,
    ResetTerm,
    StepData,
    fill_rows_,
    reset_selection_capable,
)
from tests.conftest import MODES, ScriptedVectorEnv, scripted_env


@pytest.mark.parametrize("mode", ["selected", "masked"])
def test_non_persistent_modes_publish_fresh_term_infos(mode: str) -> None:
    """A reference to ``info["episode"]`` kept by the user is not overwritten by the next step."""
    env = FixedShapeAutoresetVectorEnv(
        scripted_env(4, 40, p_done=0.5), reset_terms={"ep": EpisodeStatistics()}, **MODES[mode]
    )
    env.reset(seed=0)
    a = torch.ones(4, 3)
    kept = []
    for _ in range(10):
        *_, info = env.step(a)
        kept.append((info["episode"]["r"], info["_episode"], info["episode"]["r"].clone(), info["_episode"].clone()))
    for r, done, r_then, done_then in kept:
        assert torch.equal(r, r_then) and torch.equal(done, done_then)


class _NaNResetEnv(ScriptedVectorEnv):
    """Resets row 1 to NaN from its second episode on (a broken initial-state sampler)."""

    supports_reset_selection = True  # reset is overridden with masked writes: re-declared (the MRO rule)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[torch.Tensor, dict]:
        _, info = super().reset(seed=seed, options=options)
        bad = (self.episode >= 1) & (torch.arange(self.num_envs) == 1)
        self.pos.copy_(torch.where(bad.unsqueeze(1), float("nan"), self.pos))
        return self._obs(), info


def _nan_reset_env() -> _NaNResetEnv:
    term = torch.zeros(20, 3, dtype=torch.bool)
    term[2] = True  # every row ends at step 2; row 1's next episode starts with NaN
    return _NaNResetEnv(3, term, torch.zeros_like(term))


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
def test_nan_in_autoreset_observations_is_reported_on_every_path(mode: str) -> None:
    env = FixedShapeAutoresetVectorEnv(_nan_reset_env(), **{**MODES[mode], "validation_poll_interval": 1000})
    env.reset(seed=0)
    a = torch.zeros(3, 3)
    with pytest.raises(DeferredValidationError, match=r"finite_reset_obs: .*\(first failed at step 2, row 1\)"):
        for _ in range(4):
            env.step(a)
        env.poll_finite_validation()


@pytest.mark.parametrize("mode", ["masked", "masked_persistent"])
def test_inline_reset_body_latches_with_the_step(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reset body run inside the step adds its checks to the step's region: one latch write per step."""
    env = FixedShapeAutoresetVectorEnv(_nan_reset_env(), **{**MODES[mode], "validation_poll_interval": 1000})
    env.reset(seed=0)
    writes: list[tuple[str, ...]] = []
    latch_pending = type(env.latch)._latch_pending
    monkeypatch.setattr(
        env.latch, "_latch_pending", lambda pending: (writes.append(tuple(pending)), latch_pending(env.latch, pending))
    )
    for _ in range(3):
        env.step(torch.zeros(3, 3))
    assert len(writes) == 3 and all("finite_reset_obs" in names and "finite_obs" in names for names in writes)
    with pytest.raises(DeferredValidationError, match=r"finite_reset_obs: .*\(first failed at step 2, row 1\)"):
        env.poll_finite_validation()


@pytest.mark.parametrize("mode", ["selected", "masked"])
def test_nan_from_an_explicit_reset_is_reported(mode: str) -> None:
    env = FixedShapeAutoresetVectorEnv(_nan_reset_env(), **MODES[mode])
    env.reset(seed=0)
    if mode == "selected":  # checked at once: the host reads every step there anyway
        with pytest.raises(DeferredValidationError, match=r"finite_reset_obs.*row 1\)"):
            env.reset(options={"reset_mask": [1]})
    else:
        env.reset(options={"reset_mask": [1]})
        with pytest.raises(
            DeferredValidationError,
            match=r"finite_reset_obs.*row 1\)[\s\S]*before the first step|"
            r"before the first step[\s\S]*finite_reset_obs.*row 1\)",
        ):
            env.poll_finite_validation()


def test_nan_step_observations_name_their_rows() -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(5, 10, p_done=0.0), **MODES["masked"])
    env.reset(seed=0)
    a = torch.zeros(5, 3)
    a[3, 0] = float("inf")  # the env adds the action to the position: row 3's obs turn inf
    env.step(a)
    with pytest.raises(DeferredValidationError) as err:
        env.poll_finite_validation()
    text = str(err.value)
    assert "finite_actions" in text and "row 3)" in text and "between steps 0 and 0" in text


@reset_selection_capable
class _StepCounter(ResetTerm):
    """Counts the steps of the current episode and publishes the running count."""

    def bind(self, env: Any) -> None:
        self.count = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)

    def on_step(self, step: StepData) -> None:
        self.count.add_(1)

    def reset(self, env_ids: Any) -> None:
        fill_rows_(self.count, env_ids, 0)

    def info(self) -> dict[str, Any]:
        return {"count": self.count}


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
def test_final_info_holds_term_values_from_before_the_reset(mode: str) -> None:
    """A counter that ended an episode at 8 shows 8 in ``final_info`` (Gymnasium: the ending step's info),
    and the reset value 0 in ``info`` on that row."""
    from gym_graphreset.envs import CartPoleVectorEnv

    env = FixedShapeAutoresetVectorEnv(
        CartPoleVectorEnv(4, max_episode_steps=8), reset_terms={"n": _StepCounter()}, **MODES[mode]
    )
    env.reset(seed=0)
    for t in range(1, 9):
        *_, info = env.step(torch.zeros(4, dtype=torch.long))
        done = info.get("_final_info", torch.zeros(4, dtype=torch.bool))
        if done.any():
            ended = info["final_info"]["_count"]
            assert torch.equal(ended, done)
            lengths = info["final_info"]["count"][done]
            assert (lengths > 0).all() and (lengths <= t).all(), f"final counts {lengths.tolist()} at step {t}"
            assert (info["count"][done] == 0).all()  # after the reset
    assert done.all() and info["final_info"]["count"].tolist() == [8, 8, 8, 8]  # step 8: every row truncated


class _BadInfo(ResetTerm):
    supports_reset_selection = True

    def __init__(self, kind: str) -> None:
        self.kind, self.calls = kind, 0

    def reset(self, env_ids: Any) -> None: ...

    def info(self) -> dict[str, Any]:
        self.calls += 1
        if self.kind == "narrow":
            return {"x": torch.zeros(3)}
        if self.kind == "scalar":
            return {"x": {"y": torch.zeros(())}}
        if self.kind == "shrinks":  # full width at first, narrow from the third read on
            return {"x": torch.zeros(4 if self.calls < 3 else 2)}
        return {"x": torch.zeros(4)} if self.calls % 2 else {"y": torch.zeros(4)}  # keys change every read


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("narrow", "reset term 'bad': info()['x'] must be full width, shape (num_envs=4, ...), got (3,)"),
        ("scalar", "reset term 'bad': info()['x']['y'] must be full width, shape (num_envs=4, ...), got ()"),
        ("shrinks", "reset term 'bad': info()['x'] must be full width, shape (num_envs=4, ...), got (2,)"),
        (
            "keys",
            "reset term 'bad': info() must return the same keys every step (fixed keys), returned ['x'] after ['y']",
        ),
    ],
)
@pytest.mark.parametrize("mode", ["selected", "masked"])
def test_term_info_contract_enforced_by_name(kind: str, message: str, mode: str) -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(4, 10), reset_terms={"bad": _BadInfo(kind)}, **MODES[mode])
    env.reset(seed=0)
    with pytest.raises(ValueError, match=re.escape(message)):
        for _ in range(3):
            env.step(torch.zeros(4, 3))


class _BadOutputEnv(ScriptedVectorEnv):
    """Returns one of its step outputs with the wrong shape, dtype or device (``bad``)."""

    bad: tuple[str, Any] = ("reward", lambda r: r)

    def step(self, actions: torch.Tensor) -> tuple[Any, ...]:
        obs, reward, terminated, truncated, info = super().step(actions)
        out = {"reward": reward, "terminated": terminated, "truncated": truncated}
        field, make = self.bad
        out[field] = make(out[field])
        return obs, out["reward"], out["terminated"], out["truncated"], info


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
def test_a_reward_of_shape_n_by_1_is_refused_naming_the_inner_env_not_a_term(mode: str) -> None:
    """A ``(n, 1)`` reward used to pass through; an ``EpisodeStatistics`` term then failed, blamed."""
    inner = _BadOutputEnv(4, torch.zeros(1, 4, dtype=torch.bool), torch.zeros(1, 4, dtype=torch.bool))
    inner.bad = ("reward", lambda r: r.unsqueeze(1))
    env = FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **MODES[mode])
    env.reset(seed=0)
    message = (
        "the inner env _BadOutputEnv returned `reward` of shape (4, 1) from step(); the wrapper needs shape (4,) "
        "(one value per env)"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        env.step(torch.zeros(4, 3))


@pytest.mark.parametrize(
    ("field", "make", "error", "message"),
    [
        ("reward", lambda r: r.long(), TypeError, "`reward` of dtype torch.int64 from step(); the wrapper needs "
         "a floating dtype"),
        ("terminated", lambda t: t.float(), TypeError, "`terminated` of dtype torch.float32 from step(); the "
         "wrapper needs dtype torch.bool"),
        ("truncated", lambda t: t[:3], ValueError, "`truncated` of shape (3,) from step(); the wrapper needs "
         "shape (4,)"),
        ("terminated", lambda t: t.numpy(), TypeError, "`terminated` of type ndarray from step(); the wrapper "
         "needs a torch.Tensor of shape (4,) on cpu"),
        ("reward", lambda r: r.to("meta"), ValueError, "`reward` on device meta from step(); the wrapper needs "
         "device cpu"),
    ],
)  # fmt: skip
def test_inner_step_outputs_checked_on_every_step(field: str, make: Any, error: type, message: str) -> None:
    """Shape, dtype and device of reward / terminated / truncated: checked every step (metadata, no host read)."""
    inner = _BadOutputEnv(4, torch.zeros(1, 4, dtype=torch.bool), torch.zeros(1, 4, dtype=torch.bool))
    env = FixedShapeAutoresetVectorEnv(inner, "masked")
    env.reset(seed=0)
    env.step(torch.zeros(4, 3))  # a good step first: the check is not only on the first step
    inner.bad = (field, make)
    with pytest.raises(error, match=re.escape(f"the inner env _BadOutputEnv returned {message}")):
        env.step(torch.zeros(4, 3))
