"""The declared contracts between :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` and what it runs.

Everything the wrapper talks to is one of these protocols; the wrapper checks membership once, at
construction (:func:`roles`), and never looks a hook up while stepping. A participant implements only
the protocols it needs.

**The inner env** (:class:`TorchVectorEnv`): a Gymnasium ``VectorEnv`` of torch tensors with a
``device`` and ``metadata["autoreset_mode"]`` of ``DISABLED`` (the wrapper resets done rows) or
``SAME_STEP``. Its ``reset(seed=..., options=...)`` receives in ``options["reset_mask"]``:

- nothing (``options`` is ``None``): reset every row;
- on the selected-row path, a bool tensor ``(num_envs,)`` of the rows to reset;
- on the masked path, a :class:`~gym_graphreset.ResetSelection` (read ``selection.mask``; it refuses to
  act as an index). To take it, the env declares ``supports_reset_selection = True`` at or below the
  class that defines its ``reset`` (see :mod:`gym_graphreset.selection`).

It returns full-width observations ``(num_envs, ...)`` and an info dict; only the rows it was asked to
reset are read. For the masked path to return what the selected-row path returns, its draws must not
depend on which rows reset together: draw with :mod:`gym_graphreset.rng` (a pure function of seed, env
index and episode index). ``supports_step_capture = True`` declares that ``step`` follows the captured-path
rules (:mod:`gym_graphreset.graph`), so the whole step may be one CUDA graph.

**Reset terms** (:class:`ResetTerm`, in ``reset_terms={name: term}``) hold per-row state reset with the
env, after it, in order. ``reset(env_ids)`` receives ``None`` (a full reset, no mask), a long tensor of
row ids (the selected-row path), or the wrapper's :class:`~gym_graphreset.ResetSelection` (the masked
path; a full reset is an all-True selection there). Write rows with :func:`~gym_graphreset.fill_rows_` /
:func:`~gym_graphreset.assign_rows_`, which take all three.

Optional roles: :class:`Bindable`, :class:`StepObserver` (sees the step's actions and outputs every
step), :class:`InfoProvider` (its keys are in every step's info, on every path), :class:`EpisodePublisher`
(for terms); :class:`CheckProvider` (adds device-side checks to the latch it is handed) and, for capture,
:class:`CaptureParticipant`, :class:`StreamOwner` and :class:`GeneratorOwner` (for terms and the chain
alike); :class:`RewardTransform` (a chain member that changes rewards keeps the raw ones).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from gym_graphreset.selection import ResetSelection

__all__ = [
    "Bindable",
    "CaptureParticipant",
    "CheckProvider",
    "CheckSink",
    "EpisodePublisher",
    "GeneratorOwner",
    "InfoProvider",
    "ResetTerm",
    "RewardTransform",
    "Rows",
    "StepCapturable",
    "StepData",
    "StepObserver",
    "StreamOwner",
    "TorchVectorEnv",
    "check_participant",
    "roles",
]

Rows = ResetSelection | torch.Tensor | None
"""What a reset participant receives: ``None`` (all rows), row ids (selected path), a ResetSelection."""


@dataclass(frozen=True)
class StepData:
    """One step as the wrapper saw it, handed to every :class:`StepObserver` (before the done-row reset).

    Attributes:
        actions: The actions the inner env stepped (``(num_envs, ...)``, non-finite entries already zeroed
            in deferred mode).
        obs: The inner env's observations (the finished episodes' last ones on done rows).
        reward: ``(num_envs,)``.
        terminated: ``(num_envs,)`` bool.
        truncated: ``(num_envs,)`` bool.
        done: ``terminated | truncated``: the rows reset at the end of this step.
        raw_reward: The reward before any :class:`RewardTransform` in the chain (normalised, clipped...):
            the innermost transform's input, or ``reward`` when there is none.
    """

    actions: torch.Tensor
    obs: Any
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    done: torch.Tensor
    raw_reward: torch.Tensor


@runtime_checkable
class TorchVectorEnv(Protocol):
    """The inner env: a Gymnasium ``VectorEnv`` whose values are torch tensors on ``device``."""

    num_envs: int
    device: torch.device
    metadata: dict[str, Any]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset every row, or ``options["reset_mask"]`` (a bool mask or a ResetSelection); full width."""

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every row: ``(obs, reward, terminated, truncated, info)``, full width."""


@runtime_checkable
class RewardTransform(Protocol):
    """A chain member that changes rewards keeps the reward it was given this step, in place.

    So episode statistics report raw returns wherever they sit (Gymnasium gets that by wrapper order).
    """

    raw_reward: torch.Tensor


@runtime_checkable
class StepCapturable(Protocol):
    """Declares (``True``) that ``step`` follows the captured-path rules, so the whole step may be a graph."""

    supports_step_capture: bool


@runtime_checkable
class ResetTerm(Protocol):
    """Per-row state reset with the env, after it (see the module docstring for ``env_ids`` on each path)."""

    def reset(self, env_ids: Rows) -> None:
        """Reset ``env_ids``: ``None`` (all), row ids, or a ResetSelection. No host read on the masked path."""


@runtime_checkable
class Bindable(Protocol):
    """Gets the wrapper once, when added (e.g. to allocate buffers for its ``num_envs`` and ``device``)."""

    def bind(self, env: Any) -> None:
        """Called once with the wrapping env (read ``num_envs``, ``device``, spaces)."""


@runtime_checkable
class StepObserver(Protocol):
    """Sees every step, after the inner env stepped and before done rows are reset."""

    def on_step(self, step: StepData) -> None:
        """Update per-row state from the step (in place: it may run inside a captured graph)."""


@runtime_checkable
class InfoProvider(Protocol):
    """Adds entries to the step's info on every step and every path (fixed keys, full width)."""

    def info(self) -> dict[str, Any]:
        """This step's entries; a key ``k`` valid on some rows only comes with a bool mask ``_k``."""


@runtime_checkable
class EpisodePublisher(Protocol):
    """Holds published per-episode values that a full ``reset()`` (no mask) must forget."""

    def clear_published(self) -> None:
        """Forget what was published (in place)."""


@runtime_checkable
class CheckSink(Protocol):
    """Where checks go: the wrapper's :class:`~gym_graphreset.validation.ValidationLatch`."""

    def require(self, ok: torch.Tensor, name: str, message: str) -> None:
        """Latch ``ok.all()`` under ``name`` (no host read); an ``ok`` with a first dim names failing rows."""

    def require_many(
        self,
        ok: torch.Tensor,
        names: tuple[str, ...],
        messages: tuple[str, ...],
        bad_rows: torch.Tensor | None = None,
    ) -> None:
        """Latch ``len(names)`` verdicts from a bool ``(k,)`` tensor at once; ``bad_rows`` ``(num_envs, k)``."""


@runtime_checkable
class CheckProvider(Protocol):
    """Adds its device-side checks every step, after the inner env stepped (before done rows reset)."""

    def add_checks(self, latch: CheckSink) -> None:
        """Call ``latch.require``/``latch.require_many``; never read the host."""


@runtime_checkable
class CaptureParticipant(Protocol):
    """Declares the tensors a captured graph reads or writes that are not plain tensor attributes.

    The wrapper's capture fingerprint covers every tensor attribute of every participant (and tensors in
    dicts/lists/tuples held by one) plus what this returns; replacing any of them makes the next replay
    recapture. Declare views of foreign memory (e.g. warp arrays) and tensors held deeper than that.
    """

    def capture_buffers(self) -> Iterable[torch.Tensor]:
        """The tensors a graph holds, whose replacement must trigger a recapture."""


@runtime_checkable
class StreamOwner(Protocol):
    """Launches on its own CUDA stream (e.g. warp's), so the graph must be captured on that stream."""

    cuda_stream: torch.cuda.Stream | None

    def graph_capture_scope(self, stream: torch.cuda.Stream, capture_mode: str) -> AbstractContextManager[Any]:
        """Entered inside the capture, e.g. warp's external capture on ``stream``."""


@runtime_checkable
class GeneratorOwner(Protocol):
    """Draws from ``torch.Generator`` objects inside the captured region: they are registered with it."""

    def torch_generators(self) -> list[torch.Generator]:
        """The generators used in ``reset``/``on_step``/``step``."""


ROLE_PROTOCOLS: Mapping[str, type] = {
    "reset": ResetTerm,
    "bind": Bindable,
    "on_step": StepObserver,
    "info": InfoProvider,
    "clear_published": EpisodePublisher,
    "add_checks": CheckProvider,
    "capture_buffers": CaptureParticipant,
    "graph_capture_scope": StreamOwner,
    "torch_generators": GeneratorOwner,
}

_RENAMED: Mapping[str, tuple[str, str]] = {  # old hook -> (its replacement, what changed)
    "deferred_checks": ("add_checks", "`deferred_checks(wrapper)` became `add_checks(latch)` (CheckProvider)"),
    "capture_fingerprint": (
        "capture_buffers",
        "`capture_fingerprint()` became `capture_buffers()` returning tensors (CaptureParticipant)",
    ),
}


def roles(obj: object) -> list[str]:
    """The protocols ``obj`` implements, by hook name (e.g. ``["reset", "on_step", "info"]``)."""
    return [name for name, proto in ROLE_PROTOCOLS.items() if isinstance(obj, proto)]


def _positional_arity(fn: Any) -> tuple[int, int]:
    """(required, maximum) positional parameters of a bound method (``maximum`` large for ``*args``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0, 1 << 30
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(p.default is p.empty for p in positional)
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    return required, 1 << 30 if varargs else len(positional)


def check_participant(name: str, obj: object, *, term: bool) -> None:
    """Refuse a participant whose hooks do not match the protocols, naming it and the hook.

    Args:
        name: How messages name it (a term's name, or the class of a chain member).
        obj: The term or inner env / wrapper.
        term: Whether it is a reset term (``reset(env_ids)`` is then required).

    Raises:
        TypeError: A required hook is missing, a hook takes the wrong number of arguments, or a hook
            uses a name this library no longer calls.
    """
    if term and not isinstance(obj, ResetTerm):
        raise TypeError(f"reset term {name!r} must have a `reset(env_ids)` method, got {type(obj).__name__}")
    for old, (new, advice) in _RENAMED.items():
        if callable(getattr(obj, old, None)) and not isinstance(obj, ROLE_PROTOCOLS[new]):
            raise TypeError(f"{name}: {advice}; the wrapper does not call `{old}`")
    arity = {"reset": 1, "bind": 1, "on_step": 1, "info": 0, "clear_published": 0, "add_checks": 1}
    for hook, wanted in arity.items():
        if hook == "reset" and not term:
            continue  # the inner env's reset takes keywords (the Gymnasium API)
        fn = getattr(obj, hook, None)
        if not callable(fn):
            continue
        required, maximum = _positional_arity(fn)
        if not required <= wanted <= maximum:
            signature = {"on_step": "on_step(step: StepData)", "add_checks": "add_checks(latch)"}.get(hook, hook)
            raise TypeError(
                f"{name}.{hook} must take {wanted} positional argument(s) ({signature}), "
                f"got {hook}{inspect.signature(fn)}"
            )
