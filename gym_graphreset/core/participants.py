"""Who takes part in a step: the inner env chain and the reset terms, sorted by role once.

:class:`Participants` is built at construction (and again when a term is added): it checks every
member against :mod:`gym_graphreset.core.protocols`, names the blockers of masked reset and step capture, and
keeps one list per role, so the step runs through plain lists with no hook lookups.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
from gymnasium.vector import VectorEnv, VectorWrapper

from gym_graphreset.core.protocols import (
    CheckSink,
    ReportsReset,
    RewardTransform,
    StepData,
    check_participant,
    hook,
    roles,
)
from gym_graphreset.core.selection import declares, participant_name

__all__ = [
    "WRAPPER_INFO_KEYS",
    "BufferWatch",
    "Participants",
    "claim_inner_env",
    "claim_terms",
    "is_wrapped",
    "record_inner_env",
    "record_terms",
    "release_inner_env",
    "release_terms",
]

WRAPPER_INFO_KEYS = ("final_obs", "_final_obs", "final_info", "_final_info")
"""Info keys the wrapper itself publishes (Gymnasium's SAME_STEP keys): no term may publish them."""

_BOUND: dict[int, tuple[weakref.ref[Any], str]] = {}  # id(term) -> (the open env it is bound to, its name there)


def _bound_elsewhere(term: object, env: object) -> str | None:
    entry = _BOUND.get(id(term))
    if entry is None:
        return None
    owner = entry[0]()
    if owner is None or owner is env:  # that env is gone (so the id may be reused) or it is this one
        return None
    return entry[1]


def claim_terms(env: object, terms: dict[str, Any], existing: dict[str, Any] | None = None) -> None:
    """Refuse a term object used twice: under two names, or while another open env holds it.

    One object's buffers (running sums, masks) hold one env's rows: shared, both envs (or both names)
    add into the same rows. Called before ``bind``; it records nothing (:func:`record_terms` does, once
    the env is built).
    """
    seen = {id(t): n for n, t in (existing or {}).items()}
    for name, term in terms.items():
        if id(term) in seen:
            raise ValueError(
                f"reset term {name!r} is the same {participant_name(term)} object as term {seen[id(term)]!r}: "
                "it would count every step twice; make one instance per name"
            )
        other = _bound_elsewhere(term, env)
        if other is not None:
            raise ValueError(
                f"reset term {name!r} ({participant_name(term)}) is already bound to another open env (as "
                f"{other!r}): its per-row buffers would take both envs' steps; make one instance per env "
                "(or close() the other env first)"
            )
        seen[id(term)] = name


def record_terms(env: object, terms: dict[str, Any]) -> None:
    """Record that ``env`` holds ``terms`` (after :func:`claim_terms` passed and construction succeeded)."""
    ref = weakref.ref(env, _forget)
    for name, term in terms.items():
        _BOUND[id(term)] = (ref, name)


def _forget(ref: weakref.ref[Any]) -> None:
    for key in [k for k, (r, _) in _BOUND.items() if r is ref]:
        del _BOUND[key]


def release_terms(env: object, terms: dict[str, Any]) -> None:
    """Forget the bindings of a closed env: its terms may be used by another env."""
    for term in terms.values():
        entry = _BOUND.get(id(term))
        if entry is not None and entry[0]() is env:
            del _BOUND[id(term)]


_WRAPPED: dict[int, weakref.ref[Any]] = {}  # id(inner chain member) -> the open wrapper stepping it


def claim_inner_env(wrapper: object, env: VectorEnv) -> None:
    """Refuse an inner env (or any member of its chain) that another open wrapper already steps.

    Two wrappers over one inner env would both step its physics and reset each other's rows. Checks
    only; :func:`record_inner_env` records the claim once the wrapper is built. It lasts until
    :func:`release_inner_env` (the wrapper's ``close()``) or until the wrapper is collected.

    Raises:
        ValueError: Another open wrapper holds a member of ``env``'s chain.
    """
    for member in _chain(env):
        entry = _WRAPPED.get(id(member))
        owner = None if entry is None else entry()
        if owner is not None and owner is not wrapper:
            name = participant_name(member)
            where = f"the inner env {name}" if member is env else f"{name} (in the inner env's chain)"
            raise ValueError(
                f"{where} is already wrapped by another open {type(owner).__name__}: both would step the same "
                "physics and reset each other's rows; close() the other wrapper first, or build another inner env"
            )


def record_inner_env(wrapper: object, env: VectorEnv) -> None:
    """Record that ``wrapper`` steps ``env``'s chain (after :func:`claim_inner_env` passed)."""
    ref = weakref.ref(wrapper, _forget_wrapper)
    for member in _chain(env):
        _WRAPPED[id(member)] = ref


def _forget_wrapper(ref: weakref.ref[Any]) -> None:
    for key in [k for k, r in _WRAPPED.items() if r is ref]:
        del _WRAPPED[key]


def is_wrapped(env: VectorEnv) -> bool:
    """Whether an open wrapper steps ``env`` (it recorded its claim: :func:`record_inner_env`)."""
    entry = _WRAPPED.get(id(env))
    return entry is not None and entry() is not None


def release_inner_env(wrapper: object, env: VectorEnv) -> None:
    """Forget ``wrapper``'s claim on ``env``'s chain (it was closed): another wrapper may take it."""
    for member in _chain(env):
        entry = _WRAPPED.get(id(member))
        if entry is not None and entry() is wrapper:
            del _WRAPPED[id(member)]


def _chain(env: VectorEnv) -> Iterator[VectorEnv]:
    while isinstance(env, VectorWrapper):
        yield env
        env = env.env
    yield env


def _forwards_reset(env: VectorEnv) -> bool:
    return isinstance(env, VectorWrapper) and type(env).reset is VectorWrapper.reset


def _forwards_step(env: VectorEnv) -> bool:
    return isinstance(env, VectorWrapper) and type(env).step is VectorWrapper.step


_Path = tuple[object, str, Any]  # (holder, attribute, key in a dict/list/tuple attribute or None)


def _tensor_paths(obj: object) -> list[_Path]:
    paths: list[_Path] = []
    for key, value in getattr(obj, "__dict__", {}).items():
        if isinstance(value, torch.Tensor):
            paths.append((obj, key, None))
        elif isinstance(value, dict):
            paths.extend((obj, key, k) for k, v in value.items() if isinstance(v, torch.Tensor))
        elif isinstance(value, (list, tuple)):
            paths.extend((obj, key, i) for i, v in enumerate(value) if isinstance(v, torch.Tensor))
    return paths


def _pointer(path: _Path) -> int | None:
    holder, attr, key = path
    value = getattr(holder, "__dict__", {}).get(attr)
    if key is not None:
        try:
            value = value[key]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return None
    return value.data_ptr() if isinstance(value, torch.Tensor) else None


class BufferWatch:
    """The addresses of every tensor a graph may hold: what its fingerprint compares before each replay.

    Built once from a fixed list of holders (the wrapper's and the participants). :meth:`rescan` (at each
    capture) finds every tensor attribute (and tensor one container deep) of every holder; each call then
    reads those paths, and every holder's declared ``capture_buffers()``, with no scan and no type test.
    A replaced or removed tensor changes the fingerprint: the next replay recaptures.
    """

    def __init__(self, holders: Sequence[object]) -> None:
        self.holders = list(holders)
        self.declared: list[Callable[[], Iterable[torch.Tensor]]] = [
            fn for fn in (hook(h, "capture_buffers") for h in self.holders) if fn is not None
        ]
        self._paths: list[_Path] | None = None

    def rescan(self) -> None:
        """Find the tensor attributes of every holder (called when a graph is captured)."""
        self._paths = [p for h in self.holders for p in _tensor_paths(h)]

    def __call__(self) -> Hashable:
        """The addresses now, along the paths of the last scan, and of every declared buffer."""
        if self._paths is None:
            self.rescan()
        assert self._paths is not None
        return tuple(_pointer(p) for p in self._paths), tuple(t.data_ptr() for fn in self.declared for t in fn())


class Participants:
    """The inner env chain (outermost first) and the reset terms, with one list per role.

    Args:
        env: The wrapped env (the top of the chain).
        terms: ``{name: term}`` in run order.
    """

    def __init__(self, env: VectorEnv, terms: dict[str, Any]) -> None:
        self.chain: list[tuple[str, VectorEnv]] = [(participant_name(e), e) for e in _chain(env)]
        self.terms = dict(terms)
        for name, member in self.chain:
            check_participant(name, member, term=False)
        for name, term in self.terms.items():
            check_participant(name, term, term=True)
        members = [m for _, m in self.chain] + list(self.terms.values())
        term_list = list(self.terms.values())

        def hooks(of: list[Any], name: str) -> list[Any]:
            return [fn for fn in (hook(m, name) for m in of) if fn is not None]

        # One list of bound hooks per role, found once: a step calls plain lists, with no lookups.
        self.observers: list[Callable[[StepData], None]] = hooks(term_list, "on_step")
        self.info_providers: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            (name, fn) for name, term in self.terms.items() if (fn := hook(term, "info")) is not None
        ]
        self.publishers: list[Callable[[], None]] = hooks(term_list, "clear_published")
        self.check_providers: list[Callable[[CheckSink], None]] = hooks(members, "add_checks")
        self.stream_owners: list[Any] = [m for m in members if getattr(m, "cuda_stream", None) is not None]
        self.generator_sources: list[Callable[[], list[torch.Generator]]] = hooks(members, "torch_generators")
        self.members = members
        transforms = [m for _, m in self.chain if isinstance(m, RewardTransform)]
        self.raw_reward_source: RewardTransform | None = transforms[-1] if transforms else None  # innermost

    def check_info_keys(self) -> None:
        """Refuse two terms publishing one info key, or a term publishing one of :data:`WRAPPER_INFO_KEYS`.

        Reads each info provider's keys once (after ``bind``); one would silently replace the other.
        """
        owners = dict.fromkeys(WRAPPER_INFO_KEYS, "the wrapper itself")
        for name, info in self.info_providers:
            term = self.terms[name]
            for key in info():
                if key in owners:
                    raise ValueError(
                        f"reset term {name!r} ({participant_name(term)}) publishes info[{key!r}], which "
                        f"{owners[key]} publishes too: one would silently replace the other; give it another key"
                    )
                owners[key] = f"reset term {name!r}"

    def with_term(self, name: str, term: Any) -> Participants:
        """A new registry with ``term`` appended (names are unique)."""
        if name in self.terms:
            raise ValueError(f"a reset term named {name!r} already exists; names: {list(self.terms)}")
        return Participants(self.chain[0][1], {**self.terms, name: term})

    # ------------------------------------------------------------------ negotiation

    def reset_selection_blockers(self) -> list[str]:
        """Names of every reset participant that cannot take a ResetSelection (pure forwarders skipped)."""
        members = [(n, e) for n, e in self.chain if not _forwards_reset(e)] + list(self.terms.items())
        return [name for name, obj in members if not declares(obj, "reset_selection")]

    def step_capture_blockers(self) -> list[str]:
        """Names of the chain members that do not declare ``supports_step_capture = True``."""
        return [name for name, env in self.chain if not declares(env, "step_capture") and not _forwards_step(env)]

    def report(self) -> dict[str, list[str]]:
        """Each participant's declarations and protocol roles (hook names), for ``capture_report()``.

        ``"reset_selection"`` / ``"step_capture"`` are the declared capabilities; the rest are the hooks the
        wrapper calls (a chain member's Gymnasium ``reset`` is not listed).
        """
        blockers = set(self.reset_selection_blockers())
        step_blockers = set(self.step_capture_blockers())
        out: dict[str, list[str]] = {}
        for name, env in self.chain:
            declared = ["reset_selection"] if name not in blockers else []
            declared += ["step_capture"] if name not in step_blockers else []
            out[name] = declared + [r for r in roles(env) if r != "reset"]
        for name, term in self.terms.items():
            out[f"term {name!r}"] = (["reset_selection"] if name not in blockers else []) + roles(term)
        return out

    def reset_reports(self) -> dict[str, dict[str, str]]:
        """Each chain member's :class:`~gym_graphreset.core.protocols.ReportsReset` report, by name."""
        return {name: env.reset_report() for name, env in self.chain if isinstance(env, ReportsReset)}

    # ------------------------------------------------------------------ capture

    def stream(self) -> torch.cuda.Stream | None:
        """The one stream the chain launches on (``None``: the wrapper makes one); two distinct is an error."""
        streams = {id(o.cuda_stream): o.cuda_stream for o in self.stream_owners}
        if len(streams) > 1:
            raise ValueError(
                "participants launch on different CUDA streams; a graph is captured on one: "
                + ", ".join(participant_name(o) for o in self.stream_owners)
            )
        return next(iter(streams.values()), None)

    def capture_scopes(self) -> list[Callable[[torch.cuda.Stream, str], AbstractContextManager[Any]]]:
        """The stream owners' ``graph_capture_scope(stream, capture_mode)``, entered inside the capture."""
        return [fn for fn in (hook(m, "graph_capture_scope") for m in self.members) if fn is not None]

    def generators(self) -> list[torch.Generator]:
        """Every torch.Generator drawn from inside the captured region."""
        return [g for source in self.generator_sources for g in source()]
