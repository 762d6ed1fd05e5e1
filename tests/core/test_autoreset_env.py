"""FixedShapeAutoresetVectorEnv: Gymnasium parity, path equivalence, input checks, flags, negotiation,
deferred validation, publication ring and episode statistics."""

from __future__ import annotations

import re
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, VectorWrapper
from gymnasium.wrappers.vector import NumpyToTorch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gym_graphreset import (
    ConcurrentCallError,
    DeferredValidationError,
    EpisodeStatistics,
    FixedShapeAutoresetVectorEnv,
    InterruptedStepError,
    ResetSelection,
    ResetSelectionUnsupportedError,
    StepConfig,
    fill_rows_,
    reset_selection_capable,
)
from gym_graphreset.capture.host_transitions import host_transition
from gym_graphreset.envs import CartPoleVectorEnv
from tests.conftest import GRAPH_MODES, MODES, ScriptedVectorEnv, needs_cuda, scripted_env

MASKED = MODES["masked"]


def rollout(env: FixedShapeAutoresetVectorEnv, actions: list[torch.Tensor], seed: int = 0) -> list[dict[str, Any]]:
    """Step through ``actions``; clone what each step returned (so ring reuse cannot hide differences)."""
    obs, _ = env.reset(seed=seed)
    out = [{"obs": obs.to("cpu", copy=True)}]
    for a in actions:
        obs, rew, term, trunc, info = env.step(a)
        rec = {
            "obs": obs.to("cpu", copy=True),
            "rew": rew.to("cpu", copy=True),
            "term": term.to("cpu", copy=True),
            "trunc": trunc.to("cpu", copy=True),
        }
        if "_final_obs" in info:
            done = info["_final_obs"]
            rec["final_obs"] = info["final_obs"][done].to("cpu", copy=True)
            rec["_final_obs"] = done.to("cpu", copy=True)
        if "_episode" in info:
            done = info["_episode"]
            rec["ep"] = (
                info["episode"]["r"][done].to("cpu", copy=True),
                info["episode"]["l"][done].to("cpu", copy=True),
            )
        out.append(rec)
    return out


def assert_same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    """Identical values step for step; final_obs/episode compared on done rows (selected publishes them only then)."""
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b, strict=True)):
        for key in ("obs", "rew", "term", "trunc"):
            if key in x:
                assert torch.equal(x[key], y[key]), f"{key} differs at step {t}"
        x_done = x.get("_final_obs", torch.zeros(0, dtype=torch.bool))
        y_done = y.get("_final_obs", torch.zeros(0, dtype=torch.bool))
        if x_done.any() or y_done.any():
            assert torch.equal(x_done, y_done), f"done mask differs at step {t}"
            assert torch.equal(x["final_obs"], y["final_obs"]), f"final_obs differs at step {t}"
            if "ep" in x or "ep" in y:
                assert torch.equal(x["ep"][0], y["ep"][0]) and torch.equal(x["ep"][1], y["ep"][1])


# ---------------------------------------------------------------- parity with Gymnasium


@pytest.mark.parametrize("seed", [0, pytest.param(7, marks=pytest.mark.slow)])
def test_matches_gymnasium_same_step_cartpole(seed: int) -> None:
    """Wrapping SyncVectorEnv(CartPole-v1, DISABLED) gives exactly Gymnasium's SAME_STEP output."""
    n, steps = 4, 600  # past the 500-step truncation
    ref = gym.make_vec(
        "CartPole-v1", n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}
    )
    inner = gym.make_vec(
        "CartPole-v1", n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED}
    )
    env = FixedShapeAutoresetVectorEnv(NumpyToTorch(inner), reset_terms={"episode": EpisodeStatistics()})
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    ref_obs, _ = ref.reset(seed=seed)
    obs, _ = env.reset(seed=seed)
    np.testing.assert_array_equal(obs.numpy(), ref_obs)
    rng = np.random.default_rng(seed)
    saw_truncation = saw_termination = False
    for _ in range(steps):
        # Rows 0-1 balance (their episodes reach the 500-step truncation); rows 2-3 act at random.
        a = np.where(np.arange(n) < 2, ref_obs[:, 2] + 0.5 * ref_obs[:, 3] > 0, rng.integers(0, 2, n)).astype(np.int64)
        ref_obs, ref_r, ref_te, ref_tr, ref_info = ref.step(a)
        obs, r, te, tr, info = env.step(torch.as_tensor(a))
        np.testing.assert_array_equal(obs.numpy(), ref_obs)
        np.testing.assert_array_equal(r.numpy(), ref_r)
        np.testing.assert_array_equal(te.numpy(), ref_te)
        np.testing.assert_array_equal(tr.numpy(), ref_tr)
        assert ("final_obs" in info) == ("final_obs" in ref_info)
        if "final_obs" in ref_info:
            np.testing.assert_array_equal(info["_final_obs"].numpy(), ref_info["_final_obs"])
            for i in np.flatnonzero(ref_info["_final_obs"]):
                np.testing.assert_array_equal(info["final_obs"][i].numpy(), ref_info["final_obs"][i])
        saw_truncation |= bool(ref_tr.any())
        saw_termination |= bool(ref_te.any())
    assert saw_truncation and saw_termination


def test_matches_gymnasium_record_episode_statistics() -> None:
    """The episode-statistics term reports what RecordEpisodeStatistics reports.

    Term infos are published every step (fixed keys, ``_episode`` all False when nothing ended), where
    Gymnasium adds the key only on steps where an episode ended: same values on those rows.
    """
    n = 6
    ref = gym.wrappers.vector.RecordEpisodeStatistics(
        gym.make_vec(
            "CartPole-v1", n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}
        )
    )
    inner = gym.make_vec(
        "CartPole-v1", n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED}
    )
    env = FixedShapeAutoresetVectorEnv(NumpyToTorch(inner), reset_terms={"ep": EpisodeStatistics()})
    ref.reset(seed=3)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    episodes = 0
    for _ in range(300):
        a = rng.integers(0, 2, n)
        *_, ref_info = ref.step(a)
        *_, info = env.step(torch.as_tensor(a))
        assert "episode" in info and "_episode" in info
        if "episode" not in ref_info:
            assert not info["_episode"].any()
        else:
            done = ref_info["_episode"]
            np.testing.assert_array_equal(info["_episode"].numpy(), done)
            np.testing.assert_array_equal(info["episode"]["r"].numpy()[done], ref_info["episode"]["r"][done])
            np.testing.assert_array_equal(info["episode"]["l"].numpy()[done], ref_info["episode"]["l"][done])
            episodes += int(done.sum())
    assert episodes > 20


# ---------------------------------------------------------------- every path gives the same values


@pytest.mark.parametrize("mode", [m for m in MODES | GRAPH_MODES if m != "selected"])
def test_cartpole_paths_identical(mode: str, device: torch.device) -> None:
    """CartPole through every mode returns exactly what the selected-row path returns (CPU and CUDA).

    120 steps: random actions end an episode every ~10-40 steps, so each row resets several times, at
    steps that differ from row to row (CartPole's 500-step truncation is checked against Gymnasium above).
    """
    if mode in GRAPH_MODES and device.type != "cuda":
        pytest.skip("graph modes need CUDA (their refusal on the CPU is tested in test_graph_preset_needs_a_cuda_env)")
    n, steps = 16, 120
    gen = torch.Generator().manual_seed(1)
    actions = [torch.randint(0, 2, (n,), generator=gen).to(device) for _ in range(steps)]

    def make(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        return FixedShapeAutoresetVectorEnv(
            CartPoleVectorEnv(n, device=device), reset_terms={"ep": EpisodeStatistics()}, **flags
        )

    assert_same(rollout(make(MODES["selected"]), actions), rollout(make((MODES | GRAPH_MODES)[mode]), actions))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 9),
    steps=st.integers(1, 40),
    p_done=st.floats(0.0, 0.9),
    script_seed=st.integers(0, 2**16),
    env_seed=st.integers(0, 2**31),
    mode=st.sampled_from([m for m in MODES if m != "selected"]),
)
def test_paths_identical_on_random_sequences(
    n: int, steps: int, p_done: float, script_seed: int, env_seed: int, mode: str
) -> None:
    """Random action/termination sequences: every fast path returns what the selected-row path returns."""
    gen = torch.Generator().manual_seed(script_seed)
    actions = [torch.randn(n, 3, generator=gen) for _ in range(steps)]

    def make(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        inner = scripted_env(n, steps, p_done, seed=script_seed)
        return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)

    assert_same(rollout(make(MODES["selected"]), actions, env_seed), rollout(make(MODES[mode]), actions, env_seed))


def test_masked_publishes_final_obs_every_step() -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(4, 10, p_done=0.0), **MASKED)
    env.reset(seed=0)
    obs, *_, info = env.step(torch.zeros(4, 3))
    assert torch.equal(info["final_obs"], obs) and not info["_final_obs"].any()


def test_done_rows_get_next_episode_and_final_obs() -> None:
    term = torch.tensor([[True, False, False]])
    env = FixedShapeAutoresetVectorEnv(ScriptedVectorEnv(3, term, torch.zeros(1, 3, dtype=torch.bool)), **MASKED)
    obs0, _ = env.reset(seed=0)
    obs, _, te, _, info = env.step(torch.ones(3, 3))
    assert te.tolist() == [True, False, False]
    assert obs[0, 3] == 1 and obs[1, 3] == 0  # row 0 is in its second episode
    assert torch.allclose(info["final_obs"][0, :3], obs0[0, :3] + 1)


def test_caller_options_not_mutated() -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(3, 5))
    options = {"reset_mask": torch.tensor([True, False, True])}
    env.reset(seed=0)
    env.reset(options=options)
    assert list(options) == ["reset_mask"]


# ---------------------------------------------------------------- input checks


@pytest.fixture
def box_env() -> FixedShapeAutoresetVectorEnv:
    env = FixedShapeAutoresetVectorEnv(scripted_env(4, 20, p_done=0.0))
    env.reset(seed=0)
    return env


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        (torch.zeros(3, 3), "actions must have shape (4, 3), got (3, 3)"),
        (torch.zeros(4), "actions must have shape (4, 3), got (4,)"),
        (
            torch.zeros(4, 3, dtype=torch.long),
            "actions must have a floating dtype for a Box action space, got torch.int64",
        ),
        ([[0.0] * 3] * 4, "actions must be a torch.Tensor on cpu or a numpy array, got list"),
        (np.zeros((3, 3), np.float32), "actions must have shape (4, 3), got (3, 3)"),
        (np.zeros((4, 3), np.int64), "actions must have a floating dtype for a Box action space, got torch.int64"),
        (np.full((4, 3), None), "actions must be a numpy array of numbers, got a numpy array of dtype object"),
        (torch.full((4, 3), float("nan")), "actions must be finite; NaN or inf in rows [0, 1, 2, 3]"),
    ],
)
def test_bad_actions_raise_and_env_keeps_working(box_env: FixedShapeAutoresetVectorEnv, actions, message: str) -> None:
    before = box_env.env.pos.clone()
    with pytest.raises(ValueError, match=re.escape(message)):
        box_env.step(actions)
    assert torch.equal(box_env.env.pos, before)  # the inner env did not step
    box_env.step(torch.zeros(4, 3))


def test_discrete_actions_need_integers(cartpole_factory) -> None:
    env = cartpole_factory(4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=re.escape("an integer dtype for a Discrete action space, got torch.float32")):
        env.step(torch.zeros(4))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU to put actions on another device")
@pytest.mark.cuda
def test_actions_on_wrong_device(box_env: FixedShapeAutoresetVectorEnv) -> None:
    with pytest.raises(ValueError, match="actions must be on device cpu, got cuda:0"):
        box_env.step(torch.zeros(4, 3, device="cuda"))


def test_step_before_reset() -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(2, 3))
    with pytest.raises(RuntimeError, match=re.escape("call reset() before step()")):
        env.step(torch.zeros(2, 3))


# ---------------------------------------------------------------- flags


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"reset_path": "masked", "validation": "immediate"},
            "`reset_path='masked'` needs `validation='deferred'`",
        ),
        ({"reset_path": "selected", "graph": "step"}, "`graph='step'` resets through the mask"),
        ({"graph": "reset", "persistent_buffers": False}, "it needs `persistent_buffers=True`"),
        ({"graph": "all"}, "`graph` must be one of (None, 'reset', 'step'), got 'all'"),
        ({"reset_path": "ids"}, "`reset_path` must be one of (None, 'selected', 'masked'), got 'ids'"),
        ({"persistent_buffers": 1}, "`persistent_buffers` must be None or a bool, got 1"),
        ({"published_buffer_depth": 0}, "`published_buffer_depth` must be an int >= 1, got 0"),
        ({"validation_poll_interval": 0}, "`validation_poll_interval` must be an int >= 1, got 0"),
        ({"capture_mode": "local"}, "`capture_mode` must be one of"),
        ({"graph_warmup": -1}, "`graph_warmup` must be an int >= 0, got -1"),
    ],
)
def test_invalid_configurations_refused_by_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        StepConfig(**fields)


@pytest.mark.parametrize("preset", ["reset_graph", "step_graph"])
def test_graph_preset_needs_a_cuda_env(preset: str) -> None:
    with pytest.raises(
        ValueError, match=re.escape(f"`graph='{preset[:-6]}'` needs a CUDA env, but the env is on device cpu")
    ):
        FixedShapeAutoresetVectorEnv(scripted_env(2, 3), preset)


def test_a_graph_implies_the_masked_path_and_persistent_buffers() -> None:
    cfg = StepConfig(graph="step")
    assert (cfg.reset_path, cfg.persistent_buffers, cfg.validation) == ("masked", True, "deferred")
    assert StepConfig().reset_path == "selected" and StepConfig().validation == "immediate"


@pytest.mark.parametrize(
    "keyword", ["masked_autoreset", "defer_finite_validation", "autoreset_cuda_graph", "compile_step", "flags"]
)
def test_an_unknown_keyword_is_refused_by_name_with_the_accepted_ones(keyword: str) -> None:
    inner = scripted_env(2, 3)
    accepted = "FixedShapeAutoresetVectorEnv accepts ['config', 'reset_terms'"
    with pytest.raises(TypeError, match=re.escape(f"unknown keyword(s) ['{keyword}']; {accepted}")):
        FixedShapeAutoresetVectorEnv(inner, **{keyword: True})
    FixedShapeAutoresetVectorEnv(inner, "masked")  # nothing of the inner env was claimed by the refused call


def test_runtime_keywords_and_presets_need_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = FixedShapeAutoresetVectorEnv(scripted_env(2, 3), "masked_persistent", published_buffer_depth=4)
    assert env.config.published_buffer_depth == 4 and env.config.reset_path == "masked"
    env.validation_poll_interval = 7
    assert env.config.validation_poll_interval == 7
    with pytest.raises(TypeError, match=re.escape("pass ['reset_path'] in `config=StepConfig(...)`")):
        FixedShapeAutoresetVectorEnv(scripted_env(2, 3), reset_path="masked")


def test_next_step_inner_env_refused() -> None:
    inner = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")  # NEXT_STEP by default
    with pytest.raises(ValueError, match=re.escape("build it with autoreset_mode=AutoresetMode.DISABLED")):
        FixedShapeAutoresetVectorEnv(NumpyToTorch(inner))


class _SameStepEnv(ScriptedVectorEnv):
    """A torch env that autoresets itself (SAME_STEP) and publishes a full-width final_obs."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def step(self, actions):
        obs, r, te, tr, _info = super().step(actions)
        done = te | tr
        reset_obs, _ = self.reset(options={"reset_mask": done})
        return torch.where(done[:, None], reset_obs, obs), r, te, tr, {"final_obs": obs, "_final_obs": done}


def test_same_step_inner_env_passes_through() -> None:
    inner = gym.make_vec(
        "CartPole-v1", 2, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}
    )
    with pytest.raises(ValueError, match="`reset_path='masked'` needs an inner env with AutoresetMode.DISABLED"):
        FixedShapeAutoresetVectorEnv(NumpyToTorch(inner), **MASKED)
    term = torch.tensor([[False, False], [True, False], [False, False]])
    ep = EpisodeStatistics()
    env = FixedShapeAutoresetVectorEnv(_SameStepEnv(2, term, torch.zeros_like(term)), reset_terms={"ep": ep})
    env.reset(seed=0)
    env.step(torch.zeros(2, 3))
    obs, *_, info = env.step(torch.zeros(2, 3))
    assert info["_final_obs"].tolist() == [True, False] and obs[0, 3] == 1  # the inner env reset row 0
    assert info["episode"]["l"].tolist() == [2, 0] and ep.running_length.tolist() == [0, 2]


# ---------------------------------------------------------------- negotiation


class _PlainTerm:
    def reset(self, env_ids) -> None: ...


class _ResettingWrapper(VectorWrapper):
    def reset(self, **kwargs):
        return self.env.reset(**kwargs)


class _ForwardingWrapper(VectorWrapper):
    """Defines no reset: not a participant."""


def test_blockers_named_and_masked_refused() -> None:
    def inner() -> _ForwardingWrapper:
        return _ForwardingWrapper(_ResettingWrapper(scripted_env(2, 3)))

    env = FixedShapeAutoresetVectorEnv(inner(), reset_terms={"my_term": _PlainTerm(), "ep": EpisodeStatistics()})
    assert env.reset_selection_blockers() == ["_ResettingWrapper", "my_term"]
    with pytest.raises(ResetSelectionUnsupportedError, match="_ResettingWrapper, my_term"):
        FixedShapeAutoresetVectorEnv(inner(), reset_terms={"my_term": _PlainTerm()}, **MASKED)


def test_gymnasium_numpy_env_blockers() -> None:
    inner = NumpyToTorch(
        gym.make_vec(
            "CartPole-v1", 2, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED}
        )
    )
    env = FixedShapeAutoresetVectorEnv(inner)
    assert env.reset_selection_blockers() == ["NumpyToTorch", "SyncVectorEnv"]


def test_add_reset_term_checks() -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(2, 3), **MASKED)
    with pytest.raises(ResetSelectionUnsupportedError, match="reset term 'plain' cannot take a ResetSelection"):
        env.add_reset_term("plain", _PlainTerm())
    env.add_reset_term("ep", EpisodeStatistics())
    with pytest.raises(ValueError, match="a reset term named 'ep' already exists"):
        env.add_reset_term("ep", EpisodeStatistics())
    with pytest.raises(TypeError, match="must have a `reset\\(env_ids\\)` method"):
        env.add_reset_term("x", object())


class _OrderTerm:
    supports_reset_selection = True

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def reset(self, env_ids) -> None:
        assert isinstance(env_ids, ResetSelection)
        self.log.append(self.name)


def test_terms_run_in_order_with_a_selection() -> None:
    log: list[str] = []
    inner = scripted_env(2, 3)
    env = FixedShapeAutoresetVectorEnv(inner, reset_terms={"b": _OrderTerm("b", log)}, **MASKED)
    env.add_reset_term("a", _OrderTerm("a", log))
    env.reset(seed=0)
    calls = inner.reset_calls
    log.clear()
    env.step(torch.zeros(2, 3))
    assert log == ["b", "a"] and inner.reset_calls == calls + 1  # masked: the reset runs every step


# ---------------------------------------------------------------- deferred validation


class _NaNEnv(ScriptedVectorEnv):
    """Produces NaN observations at step ``bad_step``."""

    bad_step = 3

    def step(self, actions):
        obs, r, te, tr, info = super().step(actions)
        return torch.where(self.t == self.bad_step + 1, float("nan"), obs), r, te, tr, info


def _nan_env(n: int = 2) -> _NaNEnv:
    return _NaNEnv(n, torch.zeros(1, n, dtype=torch.bool), torch.zeros(1, n, dtype=torch.bool))


def test_deferred_failure_raised_at_poll_then_fails_closed() -> None:
    env = FixedShapeAutoresetVectorEnv(_nan_env(), **MASKED, validation_poll_interval=8)
    env.reset(seed=0)
    for _ in range(7):
        env.step(torch.zeros(2, 3))  # the NaN at step 3 is latched, not raised
    with pytest.raises(DeferredValidationError) as err:
        env.step(torch.zeros(2, 3))
    failed = {f.name: f.first_failed_step for f in err.value.failures}
    assert failed == {"finite_obs": 3}
    assert err.value.window == (0, 7)
    with pytest.raises(DeferredValidationError):
        env.step(torch.zeros(2, 3))  # fails closed
    env.reset(seed=1)
    env.step(torch.zeros(2, 3))


def test_non_deferred_polls_every_step() -> None:
    env = FixedShapeAutoresetVectorEnv(_nan_env())
    env.reset(seed=0)
    for _ in range(3):
        env.step(torch.zeros(2, 3))
    with pytest.raises(DeferredValidationError, match="finite_obs"):
        env.step(torch.zeros(2, 3))


def test_deferred_nan_actions_are_latched_and_zeroed() -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(2, 5, p_done=0.0), **MASKED, validation_poll_interval=100)
    env.reset(seed=0)
    before = env.env.pos.clone()
    a = torch.tensor([[float("nan"), 1.0, 0.0], [0.0, 0.0, 0.0]])
    env.step(a)
    assert torch.isfinite(env.env.pos).all()  # state not corrupted
    assert torch.equal(env.env.pos, before + torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    with pytest.raises(DeferredValidationError, match="finite_actions"):
        env.poll_finite_validation()


def test_user_require_and_poll_at_close() -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(2, 5), **MASKED)
    env.reset(seed=0)
    env.require(torch.tensor([True, False]), "my_check", "row 1 is off")
    with pytest.raises(DeferredValidationError, match="my_check: row 1 is off"):
        env.close()
    assert env.closed


def test_pending_failure_raised_at_reset() -> None:
    env = FixedShapeAutoresetVectorEnv(scripted_env(2, 5), **MASKED)
    env.reset(seed=0)
    env.require(torch.tensor(False), "c", "m")
    with pytest.raises(DeferredValidationError):
        env.reset(seed=0)
    env.reset(seed=0)  # the failure was reported; this reset recovers
    env.step(torch.zeros(2, 3))


# ---------------------------------------------------------------- publication ring


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_ring_keeps_published_values_for_depth_steps(depth: int) -> None:
    env = FixedShapeAutoresetVectorEnv(
        scripted_env(3, 30, p_done=0.3), "masked_persistent", published_buffer_depth=depth
    )
    env.reset(seed=0)
    held: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    ptrs = []
    for t in range(12):
        obs, rew, *_, info = env.step(torch.full((3, 3), float(t)))
        held.append((obs, obs.clone(), info["final_obs"].clone()))
        ptrs.append((obs.data_ptr(), rew.data_ptr(), info["final_obs"].data_ptr()))
        for k in range(max(0, t - depth + 1), t + 1):
            assert torch.equal(held[k][0], held[k][1]), f"step {k}'s obs changed before step {k + depth}"
    assert len(set(ptrs)) == depth and ptrs == [ptrs[i % depth] for i in range(len(ptrs))]
    assert env.ring.allocations == depth * len(list(_leaves(env)))


def _leaves(env: FixedShapeAutoresetVectorEnv):
    from gym_graphreset.core.buffers import tree_leaves

    return tree_leaves(env.ring.slots[0]._buffers)


def test_reset_with_mask_resets_terms_rows() -> None:
    ep = EpisodeStatistics()
    env = FixedShapeAutoresetVectorEnv(scripted_env(3, 30, p_done=0.0), reset_terms={"ep": ep}, **MASKED)
    env.reset(seed=0)
    for _ in range(4):
        env.step(torch.zeros(3, 3))
    env.reset(options={"reset_mask": torch.tensor([False, True, False])})
    assert ep.running_length.tolist() == [4, 0, 4]


@pytest.mark.parametrize("mode", ["selected", "masked"])
@pytest.mark.parametrize("form", ["ids", "mask", "selection"])
def test_reset_with_any_row_form_resets_those_terms_rows(mode: str, form: str) -> None:
    ep = EpisodeStatistics()
    env = FixedShapeAutoresetVectorEnv(scripted_env(3, 30, p_done=0.0), reset_terms={"ep": ep}, **MODES[mode])
    env.reset(seed=0)
    for _ in range(2):
        env.step(torch.zeros(3, 3))
    rows = {
        "ids": torch.tensor([2]),
        "mask": torch.tensor([False, False, True]),
        "selection": ResetSelection(3, "cpu").set_(torch.tensor([False, False, True])),
    }[form]
    env.reset(options={"reset_mask": rows})
    assert ep.running_length.tolist() == [2, 2, 0]


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("reset_kind", ["partial", "full", "two partial"])
def test_ring_promise_holds_across_resets(depth: int, reset_kind: str) -> None:
    """What step t (or a reset after it) returned is unchanged through step t + depth - 1, unless ``depth``
    more resets were published after it (resets in a row reuse at most ``depth`` ring slots)."""
    env = FixedShapeAutoresetVectorEnv(
        scripted_env(3, 40, p_done=0.2), "masked_persistent", published_buffer_depth=depth
    )
    env.reset(seed=0)
    held: list[list] = []  # [steps done when published, obs, its copy, resets published after it]
    for t in range(10):
        obs, *_ = env.step(torch.full((3, 3), 0.1 * t))
        steps = t + 1
        held.append([steps, obs, obs.clone(), 0])
        if t % 3 == 1:
            masks = {"partial": [[True, False, False]], "full": [None], "two partial": [[0], [2]]}[reset_kind]
            for mask in masks:
                obs, _ = env.reset(options=None if mask is None else {"reset_mask": mask})
                for entry in held:
                    entry[3] += 1
                held.append([steps, obs, obs.clone(), 0])
        for published_at, ref, copy, resets_after in held:
            if steps < published_at + depth and resets_after < depth:
                assert torch.equal(ref, copy), f"a value published after step {published_at} changed at step {steps}"


# ---------------------------------------------------------------- fail closed on an interrupted step or reset

FAULT_MODES = ["selected", "masked", "masked_persistent"]


@reset_selection_capable
class _FaultyTerm:
    """A reset term that raises, once, in the hook it is armed for (after the env and earlier terms moved)."""

    def __init__(self) -> None:
        self.armed: str | None = None
        self.exc: type[BaseException] = ValueError

    def _maybe_raise(self, hook: str) -> None:
        if self.armed == hook:
            self.armed = None
            raise self.exc(f"{hook} broke")

    def reset(self, rows: Any) -> None:
        self._maybe_raise("reset")

    def on_step(self, step: Any) -> None:
        self._maybe_raise("on_step")

    def add_checks(self, latch: Any) -> None:
        self._maybe_raise("add_checks")

    def info(self) -> dict[str, Any]:
        self._maybe_raise("info")
        return {}


class _FaultyInner(VectorWrapper):
    """Forwards to the inner env; raises, once, after the inner step or reset changed its state."""

    supports_reset_selection = True
    supports_step_capture = True

    def __init__(self, env: ScriptedVectorEnv) -> None:
        super().__init__(env)
        self.armed: str | None = None
        self.exc: type[BaseException] = ValueError

    def _maybe_raise(self, hook: str) -> None:
        if self.armed == hook:
            self.armed = None
            raise self.exc(f"inner {hook} broke")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        out = self.env.reset(seed=seed, options=options)
        self._maybe_raise("reset")
        return out

    def step(self, actions: torch.Tensor) -> tuple[Any, ...]:
        out = self.env.step(actions)
        self._maybe_raise("step")
        return out


@reset_selection_capable
class _StepCounter:
    """Steps since each row's reset, published as ``info["count"]`` (a term with state after the faulty one)."""

    def __init__(self, n: int, device: str = "cpu") -> None:
        self.count = torch.zeros(n, dtype=torch.long, device=device)

    def reset(self, rows: Any) -> None:
        fill_rows_(self.count, rows, 0)

    def on_step(self, step: Any) -> None:
        self.count.add_(1)

    def info(self) -> dict[str, Any]:
        return {"count": self.count}


def _fault_env(
    mode: str, n: int = 4, steps: int = 40
) -> tuple[FixedShapeAutoresetVectorEnv, _FaultyInner, _FaultyTerm]:
    term = torch.zeros(steps, n, dtype=torch.bool)
    term[3::4, 1] = True  # row 1 ends every 4th step from step index 3: the selected path resets there
    term[5::7, 2] = True
    inner = _FaultyInner(ScriptedVectorEnv(n, term, torch.zeros(steps, n, dtype=torch.bool)))
    faulty = _FaultyTerm()
    terms = {"ep": EpisodeStatistics(), "faulty": faulty, "count": _StepCounter(n)}
    env = FixedShapeAutoresetVectorEnv(inner, reset_terms=terms, **MODES[mode])
    return env, inner, faulty


FAULTS = {  # where: (which object is armed, hook, what triggers it)
    "term on_step": ("term", "on_step", "step"),
    "term reset in the autoreset": ("term", "reset", "step"),
    "term add_checks": ("term", "add_checks", "step"),
    "term info": ("term", "info", "step"),
    "inner step after advancing": ("inner", "step", "step"),
    "inner reset in the autoreset": ("inner", "reset", "step"),
    "term reset in reset()": ("term", "reset", "reset"),
    "inner reset in reset()": ("inner", "reset", "reset"),
}


def _outputs(out: tuple[Any, ...]) -> list[torch.Tensor]:
    obs, rew, term, trunc, info = out
    return [obs.clone(), rew.clone(), term.clone(), trunc.clone(), info["episode"]["l"].clone(), info["count"].clone()]


@pytest.mark.parametrize("mode", FAULT_MODES)
@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("exc", [ValueError, KeyboardInterrupt])
def test_interrupted_step_or_reset_fails_closed_until_a_full_reset(
    mode: str, fault: str, exc: type[BaseException]
) -> None:
    """After a step or reset that raised part-way the env refuses to step (naming what was interrupted),
    refuses a partial reset, and a full reset() recovers: then it steps exactly like an env never faulted."""
    who, hook, trigger = FAULTS[fault]
    env, inner, faulty = _fault_env(mode)
    clean, *_ = _fault_env(mode)
    actions = [torch.full((4, 3), 0.05 * (t % 5) - 0.1) for t in range(20)]
    env.reset(seed=0)
    for a in actions[:3]:
        env.step(a)
    target = faulty if who == "term" else inner
    target.armed, target.exc = hook, exc
    with pytest.raises(exc, match="broke"):
        if trigger == "step":
            env.step(actions[3])
        else:
            env.reset(options={"reset_mask": [1, 2]})
    call = "step\\(\\) 4" if trigger == "step" else "reset\\(\\)"
    where = f"reset term 'faulty'.{hook}" if who == "term" else f"_FaultyInner.{hook}"
    for _ in range(2):  # and keeps refusing, naming the step and the participant that raised
        with pytest.raises(
            InterruptedStepError,
            match=f"{call} was interrupted in {re.escape(where)}\\(\\) by {exc.__name__}: .*broke.*reset\\(\\)",
        ):
            env.step(actions[4])
    with pytest.raises(ValueError, match=re.escape("`options['reset_mask']` must cover every row here")):
        env.reset(options={"reset_mask": [0]})
    with pytest.raises(InterruptedStepError):
        env.step(actions[4])
    env.reset(seed=1)  # a full reset recovers
    clean.reset(seed=1)
    for t, a in enumerate(actions[4:]):
        want, got = _outputs(clean.step(a)), _outputs(env.step(a))
        for i, (x, y) in enumerate(zip(want, got, strict=True)):
            assert torch.equal(x, y), f"output {i} differs {t} steps after the recovering reset"


@pytest.mark.parametrize("mode", FAULT_MODES)
def test_a_reset_covering_every_row_recovers_too(mode: str) -> None:
    """A ``reset_mask`` selecting every row is a full reset: accepted after an interruption."""
    env, _, faulty = _fault_env(mode)
    env.reset(seed=0)
    faulty.armed = "on_step"
    with pytest.raises(ValueError, match="on_step broke"):
        env.step(torch.zeros(4, 3))
    env.reset(options={"reset_mask": [True] * 4})
    env.step(torch.zeros(4, 3))


def test_cartpole_episode_lengths_stay_within_the_cap_after_an_interrupt() -> None:
    """The reported symptom: with ``max_episode_steps=5`` no episode reported is longer than 5."""
    faulty = _FaultyTerm()
    ep = EpisodeStatistics()
    env = FixedShapeAutoresetVectorEnv(
        CartPoleVectorEnv(8, max_episode_steps=5), reset_terms={"ep": ep, "faulty": faulty}, **MASKED
    )
    env.reset(seed=0)
    lengths = []
    for t in range(40):
        if t in (3, 17):
            faulty.armed = "on_step"
            with pytest.raises(ValueError):
                env.step(torch.zeros(8, dtype=torch.long))
            with pytest.raises(InterruptedStepError):
                env.step(torch.zeros(8, dtype=torch.long))
            env.reset()
            continue
        *_, info = env.step(torch.ones(8, dtype=torch.long) * (t % 2))
        lengths += info["episode"]["l"][info["_episode"]].tolist()
    assert lengths and max(lengths) <= 5


@pytest.mark.parametrize("mask", [[0, 2], [True, False, True, False], "selection"])
@pytest.mark.parametrize("mode", FAULT_MODES)
def test_first_reset_with_a_partial_mask_is_refused(mode: str, mask: Any) -> None:
    """Rows outside a first reset's mask would step from a state they never got: refused, nothing changes."""
    if mask == "selection":
        mask = ResetSelection(4, "cpu").set_(torch.tensor([True, False, True, False]))
    env = FixedShapeAutoresetVectorEnv(scripted_env(4, 10), **MODES[mode])
    with pytest.raises(ValueError, match=re.escape("must cover every row here: the env was never reset")):
        env.reset(seed=0, options={"reset_mask": mask})
    assert env.env.reset_calls == 0
    with pytest.raises(RuntimeError, match=re.escape("call reset() before step()")):
        env.step(torch.zeros(4, 3))
    env.reset(seed=0, options={"reset_mask": [True] * 4})  # every row: a full first reset
    env.reset(options={"reset_mask": mask})  # and partial resets are fine from then on
    env.step(torch.zeros(4, 3))


class _FaultyHostTerm(_FaultyTerm):
    """Also counts its resets on the host through a host transition (replayed after each graph launch)."""

    supports_reset_selection = True  # its reset is overridden: re-declared (the MRO rule)

    def __init__(self) -> None:
        super().__init__()
        self.host_resets = 0

    def reset(self, rows: Any) -> None:
        super().reset(rows)
        host_transition(self._count, "faulty.count")

    def _count(self) -> None:
        self.host_resets += 1
        self._maybe_raise("host transition")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize(
    ("when", "hook", "step"),
    [
        ("warm-up", "on_step", 2),  # the warm-up steps run the body eagerly
        ("capture", "on_step", 3),  # warm-up is 2: the third step captures; Python raises inside the capture
        ("capture", "reset", 3),
        ("replay", "host transition", 5),  # Python runs only in the transitions replayed after the launch
    ],
)
@pytest.mark.parametrize("exc", [ValueError, KeyboardInterrupt])
@pytest.mark.parametrize("mode", ["step_graph", "reset_graph", "step_graph_no_warmup"])
def test_interrupted_step_under_a_cuda_graph(
    mode: str, when: str, hook: str, step: int, exc: type[BaseException]
) -> None:
    """Whole-step (and reset-body) CUDA graph: a term raising during warm-up, capture or replay leaves no
    half-captured graph and no capture in progress; the next step refuses naming what was interrupted; a
    full reset() recovers, the graph is captured (again, if the capture failed) and the outputs match a
    clean run's."""
    n, steps = 8, 40
    term = torch.zeros(steps, n, dtype=torch.bool)
    term[2::3, 1] = True
    term[4::5, 6] = True
    if mode == "step_graph_no_warmup":  # graph_warmup=0: the first step captures, so it is where capture fails
        if when == "warm-up":
            pytest.skip("no warm-up steps with graph_warmup=0")
        step = 1 if when == "capture" else step
    config = (
        {"config": StepConfig.preset("step_graph", graph_warmup=0)}
        if mode == "step_graph_no_warmup"
        else GRAPH_MODES[mode]
    )

    def make() -> tuple[FixedShapeAutoresetVectorEnv, _FaultyHostTerm]:
        faulty = _FaultyHostTerm()
        inner = ScriptedVectorEnv(n, term, torch.zeros(steps, n, dtype=torch.bool), device="cuda")
        terms = {"ep": EpisodeStatistics(), "faulty": faulty, "count": _StepCounter(n, "cuda")}
        return FixedShapeAutoresetVectorEnv(inner, reset_terms=terms, **config), faulty

    env, faulty = make()
    clean, _ = make()
    gen = torch.Generator().manual_seed(0)
    actions = [(torch.rand(n, 3, generator=gen) - 0.5).cuda() for _ in range(16)]
    env.reset(seed=0)
    for a in actions[: step - 1]:
        env.step(a)
    faulty.armed, faulty.exc = hook, exc
    with pytest.raises(exc, match="broke"):
        env.step(actions[step - 1])
    assert not torch.cuda.is_current_stream_capturing()
    graph = env.graph
    assert graph is not None
    if when == "capture":
        assert not graph.captured and graph.captures == 0  # nothing half-captured is kept
    with pytest.raises(
        InterruptedStepError,
        match=f"step\\(\\) {step} was interrupted in reset term 'faulty'\\.\\w+\\(\\) by {exc.__name__}",
    ):
        env.step(actions[step])
    env.reset(seed=1)
    clean.reset(seed=1)
    for t, a in enumerate(actions[step:]):
        want, got = _outputs(clean.step(a)), _outputs(env.step(a))
        for i, (x, y) in enumerate(zip(want, got, strict=True)):
            torch.testing.assert_close(y, x, msg=f"output {i} differs {t} steps after the recovering reset")
    env.poll_finite_validation()
    assert graph.captured and graph.captures == 1 and graph.replays > 0
    torch.cuda.synchronize()


class _CallsBack:
    """A reset term that calls back into its own env from ``on_step`` (``step``, ``reset`` or ``close``)."""

    supports_reset_selection = True

    def __init__(self) -> None:
        self.env: FixedShapeAutoresetVectorEnv | None = None
        self.call: str | None = None

    def reset(self, rows: Any) -> None:
        pass

    def on_step(self, step: Any) -> None:
        call, self.call = self.call, None
        if call is not None and self.env is not None:
            {"step": lambda: self.env.step(torch.zeros(4, 3)), "reset": self.env.reset, "close": self.env.close}[call]()


@pytest.mark.parametrize("call", ["step", "reset", "close"])
@pytest.mark.parametrize("mode", ["selected", "masked_persistent"])
def test_reentrant_calls_from_a_term_are_refused_by_name(mode: str, call: str) -> None:
    """A term calling back into its env is refused before the nested call changes anything; a full reset
    recovers, and the env then steps exactly like one that never saw the call."""
    back = _CallsBack()
    env = FixedShapeAutoresetVectorEnv(scripted_env(4, 20), reset_terms={"back": back}, **MODES[mode])
    clean = FixedShapeAutoresetVectorEnv(scripted_env(4, 20), reset_terms={"back": _CallsBack()}, **MODES[mode])
    back.env = env
    for e in (env, clean):
        e.reset(seed=0)
        e.step(torch.full((4, 3), 0.1))
    back.call = call
    message = f"{call}() was called from inside step() 2 (re-entrant: a reset term or the inner env called back"
    with pytest.raises(ConcurrentCallError, match=re.escape(message)):
        env.step(torch.full((4, 3), 0.2))
    with pytest.raises(InterruptedStepError, match=re.escape("step() 2 was interrupted in reset term 'back'")):
        env.step(torch.zeros(4, 3))  # the term raised in the outer step: it fails closed (not closed by the call)
    for e in (env, clean):
        e.reset(seed=1)
    for t in range(5):
        a = torch.full((4, 3), 0.05 * t)
        for x, y in zip(env.step(a)[:4], clean.step(a)[:4], strict=True):
            assert torch.equal(x, y)


class _BlockingInner(ScriptedVectorEnv):
    """A scripted env whose step waits (once armed) until the test releases it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        import threading

        self.armed, self.entered, self.release = False, threading.Event(), threading.Event()

    def step(self, actions: torch.Tensor) -> Any:
        if self.armed:
            self.armed = False
            self.entered.set()
            assert self.release.wait(60)
        return super().step(actions)


def test_a_second_thread_is_refused_while_a_step_runs() -> None:
    """step(), reset() and close() from another thread during a step are refused; the running step completes."""
    import threading

    def make(inner_class: type[ScriptedVectorEnv]) -> FixedShapeAutoresetVectorEnv:
        script = torch.zeros(10, 4, dtype=torch.bool)
        script[1, 2] = True
        return FixedShapeAutoresetVectorEnv(inner_class(4, script, torch.zeros_like(script)), "masked_persistent")

    env, clean = make(_BlockingInner), make(ScriptedVectorEnv)
    inner = env.env
    assert isinstance(inner, _BlockingInner)
    for e in (env, clean):
        e.reset(seed=0)
        e.step(torch.full((4, 3), 0.1))
    results: list[Any] = []
    inner.armed = True
    worker = threading.Thread(target=lambda: results.append(env.step(torch.full((4, 3), 0.3))), name="stepper")
    worker.start()
    try:
        assert inner.entered.wait(60)
        here = threading.current_thread().name
        for call, run in [
            ("step()", lambda: env.step(torch.zeros(4, 3))),
            ("reset()", env.reset),
            ("close()", env.close),
        ]:
            message = f"{call} was called from thread {here!r} while thread 'stepper' is inside step() 2: the env is"
            with pytest.raises(ConcurrentCallError, match=re.escape(message)):
                run()
    finally:
        inner.release.set()
        worker.join(60)
    want = clean.step(torch.full((4, 3), 0.3))
    for x, y in zip(results[0][:4], want[:4], strict=True):
        assert torch.equal(x, y)
    for x, y in zip(env.step(torch.zeros(4, 3))[:4], clean.step(torch.zeros(4, 3))[:4], strict=True):
        assert torch.equal(x, y)  # the refused calls changed nothing: it steps on


def test_a_second_open_wrapper_over_one_inner_env_is_refused() -> None:
    """Two open wrappers would step one physics; the second is refused by name until the first is closed."""
    from gym_graphreset.wrappers import ClipAction

    inner = scripted_env(4, 8)
    first = FixedShapeAutoresetVectorEnv(inner, "masked")
    message = "the inner env ScriptedVectorEnv is already wrapped by another open FixedShapeAutoresetVectorEnv"
    with pytest.raises(ValueError, match=re.escape(message)):
        FixedShapeAutoresetVectorEnv(inner)
    with pytest.raises(ValueError, match=re.escape("ScriptedVectorEnv (in the inner env's chain) is already wrapped")):
        FixedShapeAutoresetVectorEnv(ClipAction(inner))  # through a wrapper too
    first.reset(seed=0)
    first.step(torch.zeros(4, 3))  # the first is untouched by the refusals
    first.close()
    second = FixedShapeAutoresetVectorEnv(inner, "masked")  # a closed wrapper releases its inner env
    second.reset(seed=0)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_wrapper_copies_into_an_independent_env(preset: str, how: str) -> None:
    """copy.deepcopy and pickle of a wrapper over CartPole (every preset) give an env of its own, with a call guard
    of its own, that steps as the original does (a captured graph is not copyable: copied before the first step)."""
    import copy
    import pickle

    from tests.conftest import preset_device

    device = preset_device(preset)
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4, device=device, max_episode_steps=6), preset)
    env.reset(seed=0)
    if device.type == "cpu":
        for t in range(3):
            env.step(torch.tensor([t % 2, 1, 0, 1], device=device))
    twin = copy.deepcopy(env) if how == "deepcopy" else pickle.loads(pickle.dumps(env))
    assert twin._guard is not env._guard and twin.env is not env.env
    for t in range(8):  # through resets
        a = torch.tensor([1, t % 2, 0, 1], device=device)
        mine, theirs = env.step(a), twin.step(a)
        for x, y in zip(mine[:4], theirs[:4], strict=True):
            assert torch.equal(x, y)
    twin.close()
    env.close()


def test_a_shallow_copy_is_refused_by_name() -> None:
    """copy.copy would step the original's inner env (as a second wrapper over it would): refused, naming deepcopy."""
    import copy

    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(2), "masked")
    with pytest.raises(ValueError, match=re.escape("a shallow copy (copy.copy) of FixedShapeAutoresetVectorEnv")):
        copy.copy(env)
    env.close()
