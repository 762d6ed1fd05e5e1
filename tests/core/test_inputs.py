"""Bad input, table-driven: each case is refused by name (type and message matched), and afterwards the env
steps exactly as a clean env that never saw the bad call."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from gym_graphreset import (
    ClosedEnvironmentError,
    DeferredValidationError,
    EpisodeStatistics,
    FixedShapeAutoresetVectorEnv,
    ResetSelection,
    ResetTerm,
    StepConfig,
)
from gym_graphreset.core.validation import ValidationLatch
from gym_graphreset.envs import CartPoleVectorEnv
from tests.conftest import MODES, load_example, preset_device

N = 4


def _cartpole(mode: str = "selected", **kwargs: Any) -> FixedShapeAutoresetVectorEnv:
    return FixedShapeAutoresetVectorEnv(
        CartPoleVectorEnv(N), reset_terms={"ep": EpisodeStatistics()}, **{**MODES[mode], **kwargs}
    )


def _actions(steps: int = 40) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randint(0, 2, (N,), generator=gen) for _ in range(steps)]


# ---------------------------------------------------------------- construction

CONSTRUCTION: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "reset_terms as a list": (
        lambda: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), reset_terms=[EpisodeStatistics()]),  # type: ignore[arg-type]
        TypeError,
        "`reset_terms` must be a dict {name: term}, got list",
    ),
    "process_group=True without torch.distributed": (
        lambda: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), process_group=True),
        ValueError,
        "`process_group` was given but torch.distributed is not initialised",
    ),
    "process_group as a string": (
        lambda: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), process_group="default"),
        TypeError,
        "`process_group` must be None, True (the default group) or a torch.distributed.ProcessGroup, got 'default'",
    ),
    "a numpy VectorEnv without NumpyToTorch": (
        lambda: FixedShapeAutoresetVectorEnv(
            gym.make_vec("CartPole-v1", N, vectorization_mode="sync", vector_kwargs={"autoreset_mode": "Disabled"})
        ),
        TypeError,
        "has no `device` attribute: the wrapper needs torch tensors on a known device (wrap a numpy VectorEnv in "
        "gymnasium.wrappers.vector.NumpyToTorch",
    ),
    "an unknown keyword": (
        lambda: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), masked=True),
        TypeError,
        "unknown keyword(s) ['masked']; FixedShapeAutoresetVectorEnv accepts ['config', 'reset_terms', ",
    ),
    "EpisodeStatistics sized for another batch": (
        lambda: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), reset_terms={"ep": EpisodeStatistics(num_envs=3)}),
        ValueError,
        "EpisodeStatistics was built for num_envs=3 on cpu, but the env has num_envs=4",
    ),
    "an old-style on_step hook": (
        lambda: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), reset_terms={"old": _OldStyleTerm()}),
        TypeError,
        "old.on_step must take 1 positional argument(s) (on_step(step: StepData))",
    ),
    "a ResetTerm subclass without reset": (
        lambda: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), reset_terms={"bare": _NoReset()}),
        TypeError,
        "reset term 'bare' must have a `reset(env_ids)` method, got _NoReset",
    ),
    "an add_checks hook without the sink": (
        lambda: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), reset_terms={"old": _NoSinkTerm()}),
        TypeError,
        "old.add_checks must take 1 positional argument(s) (add_checks(checks))",
    ),
    "CartPoleVectorEnv(2.5)": (lambda: CartPoleVectorEnv(2.5), TypeError, "`num_envs` must be an int >= 1, got 2.5"),  # type: ignore[arg-type]
    "max_episode_steps=0": (
        lambda: CartPoleVectorEnv(N, max_episode_steps=0),
        ValueError,
        "`max_episode_steps` must be >= 1, got 0",
    ),
    "an integer physics dtype": (
        lambda: CartPoleVectorEnv(N, dtype=torch.int32),
        ValueError,
        "`dtype` must be one of CartPoleVectorEnv.supported_dtypes (torch.float32, torch.float64)",
    ),
    "max_episode_steps beyond int64": (
        lambda: CartPoleVectorEnv(N, max_episode_steps=10**30),
        ValueError,
        f"`max_episode_steps` must be <= {2**63 - 1}, got {10**30}",
    ),
    "num_envs beyond int32 rows": (
        lambda: CartPoleVectorEnv(2**31),
        ValueError,
        f"`num_envs` must be <= {2**31 - 1}, got {2**31}",
    ),
    "negative global_env_offset": (
        lambda: CartPoleVectorEnv(N, global_env_offset=-1),
        ValueError,
        "`global_env_offset` must be >= 0, got -1",
    ),
    "global_env_offset whose ids overflow int64": (
        lambda: CartPoleVectorEnv(N, global_env_offset=2**63 - 2),
        ValueError,
        f"`global_env_offset` must be <= {2**63 - 1 - N}, got {2**63 - 2}",
    ),
    "published_buffer_depth=sys.maxsize": (
        lambda: FixedShapeAutoresetVectorEnv(
            CartPoleVectorEnv(N), "masked_persistent", published_buffer_depth=2**63 - 1
        ),
        ValueError,
        f"`published_buffer_depth` must be an int <= {2**16} (one copy of the step's outputs per slot), got ",
    ),
    "validation_poll_interval beyond int64": (
        lambda: FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), "masked", validation_poll_interval=2**64),
        ValueError,
        f"`validation_poll_interval` must be an int <= {2**63 - 1} (steps are counted in int64), got {2**64}",
    ),
    "graph_warmup beyond int64": (
        lambda: StepConfig(graph_warmup=2**63),
        ValueError,
        f"`graph_warmup` must be an int <= {2**63 - 1} (steps are counted in int64), got {2**63}",
    ),
    "device='tpu'": (lambda: CartPoleVectorEnv(N, device="tpu"), ValueError, "`device` must be 'cpu' or 'cuda[:N]'"),
    "ResetSelection(2.5)": (lambda: ResetSelection(2.5, "cpu"), TypeError, "`num_envs` must be an int >= 1, got 2.5"),  # type: ignore[arg-type]
    "require_many with a list": (
        lambda: ValidationLatch("cpu").require_many([True], ("a",), ("m",)),  # type: ignore[arg-type]
        TypeError,
        "`ok` must be a bool torch.Tensor of shape (1,) or (rows, 1), got list",
    ),
    "require with a Python bool": (
        lambda: ValidationLatch("cpu").require(True, "a", "m"),  # type: ignore[arg-type]
        TypeError,
        "`ok` must be a bool torch.Tensor, got bool",
    ),
}
if not torch.cuda.is_available():
    CONSTRUCTION["device='cuda' without CUDA"] = (
        lambda: CartPoleVectorEnv(N, device="cuda"),
        ValueError,
        "`device` is 'cuda' but CUDA is not available here; use 'cpu'",
    )


class _OldStyleTerm:
    supports_reset_selection = True

    def reset(self, env_ids: Any) -> None: ...

    def on_step(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None: ...


class _NoReset(ResetTerm):
    def on_step(self, step: Any) -> None: ...


class _NoSinkTerm(ResetTerm):
    def reset(self, env_ids: Any) -> None: ...

    def add_checks(self) -> None: ...


@pytest.mark.parametrize("case", list(CONSTRUCTION))
def test_construction_refused_by_name(case: str) -> None:
    make, error, message = CONSTRUCTION[case]
    with pytest.raises(error, match=re.escape(message)):
        make()


def test_deepest_ring_constructs_without_allocating() -> None:
    """The largest accepted ``published_buffer_depth`` makes no slot before it is used (no hang)."""
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), "masked_persistent", published_buffer_depth=2**16)
    assert env.ring.slots == []
    env.reset(seed=0)
    env.step(torch.zeros(N, dtype=torch.long))
    assert len(env.ring.slots) == 2


def test_longest_horizon_steps_without_overflow() -> None:
    """``max_episode_steps`` at the int64 limit is accepted and compared on the device without overflow."""
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N, max_episode_steps=2**63 - 1))
    env.reset(seed=0)
    _, _, _, truncated, _ = env.step(torch.zeros(N, dtype=torch.long))
    assert not bool(truncated.any())


def test_cpu_0_is_the_cpu() -> None:
    """``device="cpu:0"`` is the CPU: actions made on "cpu" are accepted."""
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N, device="cpu:0"))
    assert env.device == torch.device("cpu")
    env.reset(seed=0)
    env.step(torch.zeros(N, dtype=torch.long))


# ---------------------------------------------------------------- reset: refused, and nothing changed

BAD_RESETS: dict[str, tuple[dict[str, Any], type[Exception], str]] = {
    "negative seed": (
        {"seed": -1},
        ValueError,
        "`seed` must be an int or None (non-negative, as in Gymnasium), got -1",
    ),
    "string seed": (
        {"seed": "1"},
        ValueError,
        "`seed` must be an int or None (non-negative, as in Gymnasium), got '1'",
    ),
    "options not a dict": ({"options": "all"}, TypeError, "`options` must be a dict or None, got str"),
    "ids out of range": ({"options": {"reset_mask": [0, 5]}}, ValueError, "env ids must lie in [0, 4), got [5]"),
    "negative ids": ({"options": {"reset_mask": [-1]}}, ValueError, "env ids must lie in [0, 4), got [-1]"),
    "mixed list": ({"options": {"reset_mask": [True, 1]}}, ValueError, "must hold only bools (a mask) or only ints"),
    "mask of the wrong shape": (
        {"options": {"reset_mask": torch.ones(3, dtype=torch.bool)}},
        ValueError,
        "a bool reset mask must have shape (4,), got (3,)",
    ),
    "float ids": (
        {"options": {"reset_mask": torch.tensor([0.0, 1.0])}},
        ValueError,
        "env ids must be an integer tensor or a bool mask, got dtype torch.float32",
    ),
    "selection of the wrong size": (
        {"options": {"reset_mask": ResetSelection(3, "cpu")}},
        ValueError,
        "ResetSelection has 3 rows, expected 4",
    ),
    "a set of ids": ({"options": {"reset_mask": {0, 1}}}, TypeError, "`reset_mask` must be None, a bool mask"),
    "torch uint8": (
        {"options": {"reset_mask": torch.tensor([1, 0, 1, 0], dtype=torch.uint8)}},
        TypeError,
        "`reset_mask` of dtype uint8 is ambiguous",
    ),
    "numpy uint8": (
        {"options": {"reset_mask": np.array([1, 0, 1, 0], dtype=np.uint8)}},
        TypeError,
        "`reset_mask` of dtype uint8 is ambiguous",
    ),
    "list of numpy uint8": (
        {"options": {"reset_mask": list(np.array([1, 0, 1, 0], dtype=np.uint8))}},
        TypeError,
        "`reset_mask` of dtype uint8 is ambiguous",
    ),
    "numpy object array": (
        {"options": {"reset_mask": np.array([True, None, True, False])}},
        TypeError,
        "`reset_mask` must be a bool mask or integer row ids, got a numpy array of dtype object",
    ),
}


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
@pytest.mark.parametrize("case", list(BAD_RESETS))
def test_bad_reset_refused_and_changes_nothing(mode: str, case: str) -> None:
    """A refused ``reset(seed=123, options=bad)`` changes nothing: the next steps equal a clean run's.

    The bad call comes after a full reset and some steps, and no reset follows it, so a re-seed or a
    partial reset before the refusal would show in the steps after it.
    """
    kwargs, error, message = BAD_RESETS[case]
    actions = _actions()
    clean, env = _cartpole(mode), _cartpole(mode)
    for e in (clean, env):
        e.reset(seed=0)
        for a in actions[:10]:
            e.step(a)
    with pytest.raises(error, match=re.escape(message)):
        env.reset(**{"seed": 123, **kwargs})
    for t, a in enumerate(actions[10:]):
        want, got = clean.step(a), env.step(a)
        for i, (x, y) in enumerate(zip(want[:4], got[:4], strict=True)):
            assert torch.equal(x, y), f"output {i} differs {t} steps after the refused reset"
        assert torch.equal(want[4]["episode"]["r"], got[4]["episode"]["r"])


def test_refused_reset_keeps_a_latched_failure() -> None:
    """After a failed poll, a refused reset must not clear the failure: the env still refuses to step."""
    env = _cartpole("masked")
    env.reset(seed=0)
    env.step(torch.full((N,), 7))  # out of the Discrete(2) space: latched in deferred mode
    with pytest.raises(DeferredValidationError, match="valid_actions"):
        env.poll_finite_validation()
    with pytest.raises(ValueError, match="env ids must lie"):
        env.reset(options={"reset_mask": [9]})
    with pytest.raises(DeferredValidationError):
        env.step(torch.zeros(N, dtype=torch.long))
    env.reset(seed=0)  # a valid reset recovers
    env.step(torch.zeros(N, dtype=torch.long))


@pytest.mark.parametrize("mode", ["selected", "masked"])
def test_bool_list_is_a_mask_and_int_list_ids(mode: str) -> None:
    """``[True, False, True, False]`` resets rows 0 and 2 (never read as ids 1, 0, 1, 0)."""
    env = _cartpole(mode)
    env.reset(seed=0)
    before = env.env.episode.clone()
    env.reset(options={"reset_mask": [True, False, True, False]})
    assert (env.env.episode - before).tolist() == [1, 0, 1, 0]
    env.reset(options={"reset_mask": [3]})
    assert (env.env.episode - before).tolist() == [1, 0, 1, 1]


NUMPY_LAYOUTS: dict[str, Callable[[], np.ndarray]] = {  # each selects rows 0 and 1
    "reversed bool": lambda: np.array([False, False, True, True])[::-1],
    "strided bool": lambda: np.array([True, False, True, False, False, True, False, True])[::2],
    "reversed ids": lambda: np.array([1, 0])[::-1],
    "big-endian ids": lambda: np.array([0, 1], dtype=">i8"),
    "read-only bool": lambda: _read_only(np.array([True, True, False, False])),
}


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
@pytest.mark.parametrize("layout", list(NUMPY_LAYOUTS))
def test_numpy_mask_in_any_memory_layout(mode: str, layout: str) -> None:
    """A valid numpy mask or ids array resets rows 0 and 1, whatever its strides or byte order."""
    env = _cartpole(mode)
    env.reset(seed=0)
    before = env.env.episode.clone()
    env.reset(options={"reset_mask": NUMPY_LAYOUTS[layout]()})
    assert (env.env.episode - before).tolist() == [1, 1, 0, 0]


def test_huge_seed_is_folded_not_refused() -> None:
    env = _cartpole()
    a, _ = env.reset(seed=2**63)
    b, _ = env.reset(seed=2**63 + 1)
    c, _ = env.reset(seed=2**63)
    assert torch.equal(a, c) and not torch.equal(a, b)


# ---------------------------------------------------------------- step


@pytest.mark.parametrize("bad", [2, -1])
def test_out_of_space_discrete_actions(bad: int) -> None:
    """Refused at once without deferral; latched (naming the row) and clamped with it."""
    actions = torch.tensor([0, 1, bad, 0])
    env = _cartpole()
    env.reset(seed=0)
    with pytest.raises(
        ValueError, match=re.escape("actions must lie in the action space Discrete(2); out of range in rows [2]")
    ):
        env.step(actions)
    env.step(torch.zeros(N, dtype=torch.long))  # nothing was lost: it steps on
    deferred = _cartpole("masked")
    deferred.reset(seed=0)
    deferred.step(actions)
    with pytest.raises(DeferredValidationError, match=r"valid_actions: .*\(first failed at step 0, row 2\)"):
        deferred.poll_finite_validation()


@pytest.mark.parametrize("mode", ["selected", "masked", "masked_persistent"])
def test_actions_with_grad_are_detached(mode: str) -> None:
    """The policy's autograd graph stops at the env: no grad reaches reward, state or episode sums."""
    point_mass = load_example("point_mass")
    env = FixedShapeAutoresetVectorEnv(
        point_mass.PointMassVectorEnv(N), reset_terms={"ep": EpisodeStatistics()}, **MODES[mode]
    )
    env.reset(seed=0)
    w = torch.ones(N, 2, requires_grad=True)
    for _ in range(3):
        obs, reward, *_ = env.step(w * 0.5)
    assert not reward.requires_grad and not obs.requires_grad
    assert not env.reset_terms["ep"].running_return.requires_grad and not env.env.pos.requires_grad


@pytest.mark.parametrize("call", ["step", "reset"])
def test_calls_after_close_are_refused(call: str) -> None:
    env = _cartpole()
    env.reset(seed=0)
    env.close()
    with pytest.raises(ClosedEnvironmentError, match=f"{call}\\(\\) was called after close\\(\\)"):
        env.step(torch.zeros(N, dtype=torch.long)) if call == "step" else env.reset()


def test_action_space_sample_is_accepted_as_numpy(preset: str) -> None:
    """Gymnasium's first line, env.step(env.action_space.sample()): the numpy sample steps like its tensor."""
    device = preset_device(preset)
    env, twin = (FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N, device=device), preset) for _ in range(2))
    env.reset(seed=0)
    twin.reset(seed=0)
    env.action_space.seed(3)
    for _ in range(30):
        sample = env.action_space.sample()
        assert isinstance(sample, np.ndarray)
        got, want = env.step(sample), twin.step(torch.as_tensor(sample, device=device))
        for a, b in zip(got[:4], want[:4], strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("layout", ["big-endian", "strided"])
def test_numpy_actions_in_any_layout(layout: str) -> None:
    actions = np.array([0, 1, 1, 0], dtype=">i8") if layout == "big-endian" else np.array([0, 9, 1, 9, 1, 9, 0, 9])[::2]
    env, twin = _cartpole(), _cartpole()
    env.reset(seed=0)
    twin.reset(seed=0)
    assert torch.equal(env.step(actions)[0], twin.step(torch.tensor([0, 1, 1, 0]))[0])


def test_numpy_actions_out_of_range_are_refused_by_name() -> None:
    env = _cartpole()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=re.escape("actions must lie in the action space Discrete(2)")):
        env.step(np.full(N, 2))


def test_inner_env_autoreset_mode_named() -> None:
    inner = CartPoleVectorEnv(N)
    inner.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
    with pytest.raises(ValueError, match="uses AutoresetMode.NEXT_STEP"):
        FixedShapeAutoresetVectorEnv(inner)


def test_inner_env_without_autoreset_mode_is_told_what_to_declare() -> None:
    """An env that declares nothing is not told it "uses NEXT_STEP": it is told what to declare."""
    inner = CartPoleVectorEnv(N)
    inner.metadata = {}
    with pytest.raises(ValueError, match=re.escape("declares no metadata['autoreset_mode']")) as err:
        FixedShapeAutoresetVectorEnv(inner)
    assert str(err.value).startswith("the inner env CartPoleVectorEnv declares no") and "DISABLED" in str(err.value)


def test_tutorial_names_are_re_exported() -> None:
    import gym_graphreset
    from gym_graphreset.core.rng import EpisodeKeys, counter_uniform
    from gym_graphreset.core.selection import options_reset_mask

    assert gym_graphreset.EpisodeKeys is EpisodeKeys and gym_graphreset.counter_uniform is counter_uniform
    assert gym_graphreset.options_reset_mask is options_reset_mask
