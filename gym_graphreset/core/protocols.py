"""The contracts between :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` and what it runs: five.

A term author learns five things, each declared here or in :mod:`gym_graphreset.core.selection`:

1. :class:`ResetTerm`: per-row state reset with the env, after it. Subclass it (every hook but ``reset``
   is a no-op there) or write a plain class with the same methods: ``reset(rows)``, and optionally
   ``bind(env)`` (once, when added), ``on_step(step)`` (every step, sees a :class:`StepData`),
   ``info()`` (entries in every step's info, fixed keys, full width), ``clear_published()`` (a full
   ``reset()``) and ``add_checks(checks)`` (device-side checks every step).
2. :class:`StepData`: what ``on_step`` sees (actions, obs, rewards, flags, done, raw rewards).
3. :class:`CheckSink`: what ``add_checks`` writes to (``require``/``require_many``; the wrapper's
   :class:`~gym_graphreset.core.validation.ValidationLatch` is the implementation).
4. :class:`GraphParticipant`: for capture, the tensors a graph holds that are not plain attributes, the
   generators drawn from, and, for an env launching on its own stream, that stream and its capture scope.
   Every member is optional.
5. Capabilities, declared as class attributes and read one way
   (:func:`~gym_graphreset.core.selection.declares`): ``supports_reset_selection = True`` (``reset`` takes a
   :class:`~gym_graphreset.ResetSelection`) and, for an inner env, ``supports_step_capture = True``
   (``step`` follows the captured-path rules of :mod:`gym_graphreset.capture.graph`). A reset-selection
   declaration covers the class that defines ``reset`` and its subclasses until one overrides ``reset``.

**The inner env** (:class:`TorchVectorEnv`): a Gymnasium ``VectorEnv`` of torch tensors with a
``device`` and ``metadata["autoreset_mode"]`` of ``DISABLED`` (the wrapper resets done rows) or
``SAME_STEP``. Its ``reset(seed=..., options=...)`` receives in ``options["reset_mask"]``: nothing (every
row), a bool tensor ``(num_envs,)`` (the selected-row path), or a ResetSelection (the masked path; read
``selection.mask``). It returns full-width observations; only the reset rows are read. A chain member
that changes rewards keeps the reward it was given in ``raw_reward`` (:class:`RewardTransform`), so
episode statistics report raw returns. Chain members may add checks (``add_checks``) and be graph
participants too.

``reset(rows)`` of a term receives ``None`` (a full reset), a long tensor of row ids (the selected-row
path), or the wrapper's ResetSelection (the masked path); write rows with
:func:`~gym_graphreset.fill_rows_` / :func:`~gym_graphreset.assign_rows_`, which take all three. Hook
signatures are checked against :class:`ResetTerm`'s when a term is added (:func:`check_participant`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from gym_graphreset.core.selection import ResetSelection

__all__ = [
    "HOOKS",
    "CheckSink",
    "GraphParticipant",
    "InfoColumns",
    "ReportsReset",
    "ResetTerm",
    "RewardTransform",
    "Rows",
    "StepData",
    "TorchVectorEnv",
    "check_participant",
    "hook",
    "roles",
]

Rows = ResetSelection | torch.Tensor | None
"""What a reset participant receives: ``None`` (all rows), row ids (selected path), a ResetSelection."""


@dataclass(frozen=True)
class StepData:
    """One step as the wrapper saw it, handed to every term's ``on_step`` (before the done-row reset).

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
class InfoColumns(Protocol):
    """An env whose ``info`` entries have named columns (a task's ``reward_terms``: one column per reward term).

    The conformance harness names the columns that differ between two runs with it, so that a report points
    at the term, not only at the output.
    """

    info_columns: Mapping[str, tuple[str, ...]]
    """Info key -> the names of its last-dim columns."""


@runtime_checkable
class ReportsReset(Protocol):
    """An inner env (or chain member) with more than one way to reset its rows says which one it runs, and why.

    ``capture_report().state["resets"]`` lists each such member's report by name, so a slower reset path is
    never a silent choice.
    """

    def reset_report(self) -> dict[str, str]:
        """``{"reset": the path, "why": what chose it, ...}`` (further keys are the member's own)."""


@runtime_checkable
class CheckSink(Protocol):
    """Where checks go: the wrapper's :class:`~gym_graphreset.core.validation.ValidationLatch`."""

    def require(self, ok: torch.Tensor, name: str, message: str) -> None:
        """Latch ``ok.all()`` under ``name`` (no host read); an ``ok`` with a first dim names failing rows."""

    def require_many(self, ok: torch.Tensor, names: tuple[str, ...], messages: tuple[str, ...]) -> None:
        """Latch ``k = len(names)`` checks at once from a bool ``(k,)`` or per-row ``(rows, k)`` ``ok``."""


class ResetTerm:
    """Per-row state reset with the env, after it; every hook but ``reset`` is a no-op here.

    Subclass it and override what you need (or write a plain class with the same method names: the
    wrapper looks the hooks up once, when the term is added, and calls only those that are not the no-ops
    below). Every hook runs inside a captured graph on the masked path: no host read there.
    """

    def reset(self, env_ids: Rows) -> None:
        """Reset ``env_ids``: ``None`` (all), row ids, or a ResetSelection. No host read on the masked path."""
        raise NotImplementedError(f"{type(self).__name__} must define reset(env_ids)")

    def bind(self, env: Any) -> None:
        """Called once with the wrapping env when the term is added (read ``num_envs``, ``device``, spaces)."""

    def on_step(self, step: StepData) -> None:
        """See every step, after the inner env stepped and before done rows reset (update state in place)."""

    def info(self) -> dict[str, Any]:
        """Entries for this step's info, every step and every path: fixed keys, full-width tensors.

        A key ``k`` valid on some rows only comes with a bool mask ``_k``. Read after ``on_step`` and
        before the done rows reset, so a done row's value is the one its episode ended with.
        """
        return {}

    def clear_published(self) -> None:
        """Forget published per-episode values (a full ``reset()``, no mask)."""

    def add_checks(self, checks: CheckSink) -> None:
        """Add device-side checks every step, after ``on_step`` (``checks.require``); never read the host."""


class GraphParticipant:
    """What a CUDA graph needs to know of a term or chain member; every member is optional.

    The capture fingerprint covers every tensor attribute of every participant (and tensors in
    dicts/lists/tuples held by one) and what :meth:`capture_buffers` returns: replacing any of them makes
    the next replay recapture. Declare views of foreign memory (e.g. warp arrays) and deeper tensors.
    """

    cuda_stream: torch.cuda.Stream | None = None
    """The stream this participant launches on (e.g. warp's); a graph is captured on it."""

    def capture_buffers(self) -> Iterable[torch.Tensor]:
        """The tensors a graph holds, whose replacement must trigger a recapture."""
        return ()

    def torch_generators(self) -> list[torch.Generator]:
        """The ``torch.Generator`` objects drawn from inside the captured region (registered with it)."""
        return []

    def graph_capture_scope(self, stream: torch.cuda.Stream, capture_mode: str) -> AbstractContextManager[Any]:
        """Entered inside the capture, e.g. warp's external capture on ``stream``."""
        return contextlib.nullcontext()


HOOKS: dict[str, type] = {
    "reset": ResetTerm,
    "bind": ResetTerm,
    "on_step": ResetTerm,
    "info": ResetTerm,
    "clear_published": ResetTerm,
    "add_checks": ResetTerm,
    "capture_buffers": GraphParticipant,
    "graph_capture_scope": GraphParticipant,
    "torch_generators": GraphParticipant,
}
"""Every hook the wrapper may call, and the class that declares its signature (and its no-op)."""


def hook(obj: object, name: str) -> Any:
    """``obj``'s bound hook ``name``, or ``None`` when it has none or only the base class's no-op."""
    fn = getattr(obj, name, None)
    if not callable(fn):
        return None
    base = HOOKS[name]
    if name != "reset" and getattr(type(obj), name, None) is getattr(base, name):
        return None
    return fn


def roles(obj: object) -> list[str]:
    """The hooks ``obj`` implements, by name (e.g. ``["reset", "on_step", "info"]``)."""
    return [name for name in HOOKS if hook(obj, name) is not None]


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


def _declared(name: str) -> inspect.Signature:
    return inspect.signature(getattr(HOOKS[name], name))


def check_participant(name: str, obj: object, *, term: bool) -> None:
    """Refuse a participant whose hooks do not take what :class:`ResetTerm` declares, naming it and the hook.

    Args:
        name: How messages name it (a term's name, or the class of a chain member).
        obj: The term or inner env / wrapper.
        term: Whether it is a reset term (``reset(env_ids)`` is then required).

    Raises:
        TypeError: ``reset`` is missing on a term, or a hook takes a number of positional arguments other
            than its declaration's.
    """
    if term and (not callable(getattr(obj, "reset", None)) or getattr(type(obj), "reset", None) is ResetTerm.reset):
        raise TypeError(f"reset term {name!r} must have a `reset(env_ids)` method, got {type(obj).__name__}")
    for hook_name in ("reset", "bind", "on_step", "info", "clear_published", "add_checks"):
        if hook_name == "reset" and not term:
            continue  # the inner env's reset takes keywords (the Gymnasium API)
        fn = hook(obj, hook_name)
        if fn is None:
            continue
        declared = _declared(hook_name)
        wanted = len(declared.parameters) - 1  # without self
        required, maximum = _positional_arity(fn)
        if not required <= wanted <= maximum:
            params = [p for p in declared.parameters.values() if p.name != "self"]
            shown = ", ".join(f"{p.name}: {_annotation(p)}" if p.name == "step" else p.name for p in params)
            raise TypeError(
                f"{name}.{hook_name} must take {wanted} positional argument(s) ({hook_name}({shown})), "
                f"got {hook_name}{inspect.signature(fn)}"
            )


def _annotation(p: inspect.Parameter) -> str:
    return p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", str(p.annotation))
