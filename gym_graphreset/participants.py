"""Who takes part in a step: the inner env chain and the reset terms, sorted by role once.

:class:`Participants` is built at construction (and again when a term is added): it checks every
member against :mod:`gym_graphreset.protocols`, names the blockers of masked reset and step capture, and
keeps one list per role, so the step runs through plain lists with no hook lookups.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import torch
from gymnasium.vector import VectorEnv, VectorWrapper

from gym_graphreset.protocols import (
    CaptureParticipant,
    CheckProvider,
    EpisodePublisher,
    GeneratorOwner,
    InfoProvider,
    RewardTransform,
    StepCapturable,
    StepObserver,
    StreamOwner,
    check_participant,
    roles,
)
from gym_graphreset.selection import participant_name, supports_reset_selection

__all__ = [
    "WRAPPER_INFO_KEYS",
    "Participants",
    "buffer_pointers",
    "claim_terms",
    "record_terms",
    "release_terms",
    "tensor_pointers",
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


def _chain(env: VectorEnv) -> Iterator[VectorEnv]:
    while isinstance(env, VectorWrapper):
        yield env
        env = env.env
    yield env


def _forwards_reset(env: VectorEnv) -> bool:
    return isinstance(env, VectorWrapper) and type(env).reset is VectorWrapper.reset


def _forwards_step(env: VectorEnv) -> bool:
    return isinstance(env, VectorWrapper) and type(env).step is VectorWrapper.step


def tensor_pointers(obj: object) -> tuple[tuple[str, int], ...]:
    """``(attribute, data_ptr)`` of every tensor attribute of ``obj``, and of tensors one container deep."""
    found: list[tuple[str, int]] = []
    for key, value in getattr(obj, "__dict__", {}).items():
        if isinstance(value, torch.Tensor):
            found.append((key, value.data_ptr()))
        elif isinstance(value, dict):
            found.extend((f"{key}[{k!r}]", v.data_ptr()) for k, v in value.items() if isinstance(v, torch.Tensor))
        elif isinstance(value, (list, tuple)):
            found.extend((f"{key}[{i}]", v.data_ptr()) for i, v in enumerate(value) if isinstance(v, torch.Tensor))
    return tuple(found)


def buffer_pointers(obj: object) -> Hashable:
    """Addresses of every tensor ``obj`` may hand a graph: its tensor attributes and declared buffers."""
    declared = tuple(t.data_ptr() for t in obj.capture_buffers()) if isinstance(obj, CaptureParticipant) else ()
    return tensor_pointers(obj), declared


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
        self.observers: list[StepObserver] = [t for t in self.terms.values() if isinstance(t, StepObserver)]
        self.info_providers: list[InfoProvider] = [t for t in self.terms.values() if isinstance(t, InfoProvider)]
        self.publishers: list[EpisodePublisher] = [t for t in self.terms.values() if isinstance(t, EpisodePublisher)]
        self.check_providers: list[CheckProvider] = [m for m in members if isinstance(m, CheckProvider)]
        self.capture_participants: list[CaptureParticipant] = [m for m in members if isinstance(m, CaptureParticipant)]
        self.stream_owners: list[StreamOwner] = [m for m in members if isinstance(m, StreamOwner)]
        self.generator_owners: list[GeneratorOwner] = [m for m in members if isinstance(m, GeneratorOwner)]
        self.members = members
        transforms = [m for _, m in self.chain if isinstance(m, RewardTransform)]
        self.raw_reward_source: RewardTransform | None = transforms[-1] if transforms else None  # innermost

    def check_info_keys(self) -> None:
        """Refuse two terms publishing one info key, or a term publishing one of :data:`WRAPPER_INFO_KEYS`.

        Reads each info provider's keys once (after ``bind``); one would silently replace the other.
        """
        owners = dict.fromkeys(WRAPPER_INFO_KEYS, "the wrapper itself")
        for name, term in self.terms.items():
            if not isinstance(term, InfoProvider):
                continue
            for key in term.info():
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
        return [name for name, obj in members if not supports_reset_selection(obj)]

    def step_capture_blockers(self) -> list[str]:
        """Names of the chain members that do not declare ``supports_step_capture = True``."""
        return [
            name
            for name, env in self.chain
            if not (isinstance(env, StepCapturable) and env.supports_step_capture is True) and not _forwards_step(env)
        ]

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

    # ------------------------------------------------------------------ capture

    def stream(self) -> torch.cuda.Stream | None:
        """The one stream the chain launches on (``None``: the wrapper makes one); two distinct is an error."""
        streams = {id(s): s for s in (o.cuda_stream for o in self.stream_owners) if s is not None}
        if len(streams) > 1:
            raise ValueError(
                "participants launch on different CUDA streams; a graph is captured on one: "
                + ", ".join(participant_name(o) for o in self.stream_owners)
            )
        return next(iter(streams.values()), None)

    def capture_scopes(self) -> list[Any]:
        """Context-manager factories ``(stream, capture_mode)`` to enter inside the capture."""
        scopes: list[Any] = []
        for owner in self.stream_owners:

            def scope(stream: torch.cuda.Stream, mode: str, o: StreamOwner = owner) -> AbstractContextManager[Any]:
                return o.graph_capture_scope(stream, mode)

            scopes.append(scope)
        return scopes

    def generators(self) -> list[torch.Generator]:
        """Every torch.Generator drawn from inside the captured region."""
        return [g for owner in self.generator_owners for g in owner.torch_generators()]

    def fingerprint(self) -> Hashable:
        """Addresses of every tensor a graph may hold: tensor attributes of every member, declared buffers."""
        return tuple(buffer_pointers(m) for m in self.members), tuple(self.terms)
