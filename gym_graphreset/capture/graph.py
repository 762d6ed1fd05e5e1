"""Capture of the masked reset body (or the whole step) as one ``torch.cuda.graph``.

Captured-path rules (everything inside ``body`` must follow them):

- no host read (``.item()``, ``.any()`` in an ``if``, ``.nonzero()``, ``.cpu()``, printing a tensor);
- no allocation that must outlive the step: write persistent buffers with ``copy_``/``torch.where``;
- fixed shapes: masks, never index lists;
- torch and warp launch on one stream (the one this object captures on); warp kernels join the graph
  through warp's external capture
  (:func:`gym_graphreset.envs.mjwarp.runtime.warp_external_capture`) with the same capture mode;
- every ``torch.Generator`` drawn from inside is registered (``generators=``);
- host-side bookkeeping goes through :func:`~gym_graphreset.capture.host_transitions.host_transition`: it is
  recorded at capture and replayed, in order, after every launch;
- when a buffer the graph points at is replaced, the graph is recaptured (``on_stale="recapture"``) or
  the launch refused (``on_stale="raise"``), never replayed with stale pointers (``fingerprint=``).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, get_args

import torch

from gym_graphreset.capture.host_transitions import HostTransitions
from gym_graphreset.capture.modes import CaptureMode, check_capture_mode, check_warmup

__all__ = [
    "CAPTURE_MODES",
    "AutoresetGraph",
    "CaptureReport",
    "StaleGraphError",
    "cuda_capture_reasons",
]

CAPTURE_MODES = get_args(CaptureMode)
"""CUDA stream capture modes accepted by the graph and warp's external capture."""
DEVICE_REASONS = ("device", "cuda_unavailable", "memory_pool")
"""Reason codes about where the env runs, not about the env itself."""

_T = TypeVar("_T")
CaptureScope = Callable[[torch.cuda.Stream, str], AbstractContextManager[Any]]


@dataclass
class CaptureReport:
    """Whether the reset body / whole step can be captured here, with structured reasons when not.

    ``reasons`` maps a short code (``"device"``, ``"cuda_unavailable"``, ``"memory_pool"``, ``"flags"``,
    ``"step_capture_blockers"``, ``"reset_selection_blockers"``, ``"host_reads"``) to a message. ``state``
    says what the graph did so far (captures, replays, recorded host transitions).

    ``host_reads`` is what a check of the captured body found: ``None`` when no check ran (the report
    then claims no eligibility: :attr:`eligible` and :attr:`eligible_on_cuda` are ``False``), else the
    location of each host read (empty: none). A graph of the scope that captured is such a check.
    """

    scope: str
    reasons: dict[str, str] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    host_reads: list[str] | None = None
    unchecked_because: str = ""
    """Why a check that was asked for counted nothing (the step it took ran no such body)."""

    @property
    def host_reads_checked(self) -> bool:
        """Whether the body was checked for host reads (one counted step, or a capture)."""
        return self.host_reads is not None

    @property
    def eligible(self) -> bool:
        """No reason prevents capture here, and the body was checked for host reads."""
        return not self.reasons and self.host_reads_checked

    @property
    def eligible_on_cuda(self) -> bool:
        """Only where it runs prevents capture: the env, terms and flags (host reads checked) would capture on CUDA."""
        return not (set(self.reasons) - set(DEVICE_REASONS)) and self.host_reads_checked

    def __str__(self) -> str:
        why = self.unchecked_because or (
            "capture_report(..., check_host_reads=True) counts them over one step, which it takes"
        )
        unchecked = "" if self.host_reads_checked else f"\n  - host reads: not checked ({why})"
        if self.eligible:
            return f"capture of scope {self.scope!r} is possible; {self.state}"
        if not self.reasons:
            return f"capture of scope {self.scope!r} is not known to be possible:{unchecked}"
        lines = "\n".join(f"  - {code}: {message}" for code, message in self.reasons.items())
        where = " (the env and terms would capture on a CUDA device)" if self.eligible_on_cuda else ""
        return f"capture of scope {self.scope!r} is not possible here{where}:\n{lines}{unchecked}"


def cuda_capture_reasons(device: torch.device) -> dict[str, str]:
    """Reasons (code -> message) why CUDA graphs cannot be captured on ``device``; empty when they can."""
    import os

    reasons: dict[str, str] = {}
    if device.type != "cuda":
        reasons["device"] = f"the env is on {device}; CUDA graphs need a CUDA device"
        return reasons
    if not torch.cuda.is_available():
        reasons["cuda_unavailable"] = "torch reports no usable CUDA device"
        return reasons
    if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") not in ("", "0"):
        reasons["memory_pool"] = "PYTORCH_NO_CUDA_MEMORY_CACHING is set: graphs need torch's caching allocator pools"
    return reasons


class StaleGraphError(RuntimeError):
    """A captured graph's buffers were replaced and ``on_stale="raise"`` forbids recapture."""


class AutoresetGraph(Generic[_T]):
    """Run ``body`` eagerly ``warmup`` times, then capture it once and replay it on every call.

    Args:
        body: The work to capture; returns a tree of tensors (held by the graph, rewritten on replay).
        device: A CUDA device.
        warmup: Eager calls before the capture (each one is a real step).
        capture_mode: ``"global"``, ``"thread_local"`` or ``"relaxed"``, for torch and warp alike.
        stream: The non-default stream to run and capture on (one is created when omitted).
        generators: ``torch.Generator`` objects the body draws from; registered with the graph.
        capture_scopes: Context-manager factories ``(stream, capture_mode)`` entered inside the capture,
            e.g. :func:`gym_graphreset.envs.mjwarp.runtime.warp_external_capture`.
        fingerprint: Returns something hashable that changes when a captured buffer is replaced.
        on_stale: ``"recapture"`` or ``"raise"`` when the fingerprint changed.
        on_capture: Called after each capture, before the fingerprint is taken (e.g. to find the buffers
            the new graph holds).
    """

    def __init__(
        self,
        body: Callable[[], _T],
        *,
        device: torch.device | str,
        warmup: int = 3,
        capture_mode: str = "thread_local",
        stream: torch.cuda.Stream | None = None,
        generators: Sequence[torch.Generator] = (),
        capture_scopes: Sequence[CaptureScope] = (),
        fingerprint: Callable[[], Hashable] | None = None,
        on_stale: Literal["recapture", "raise"] = "recapture",
        on_capture: Callable[[], None] | None = None,
        transitions: HostTransitions | None = None,
    ) -> None:
        device = torch.device(device)
        if device.type != "cuda":
            raise ValueError(f"CUDA graph capture needs a CUDA device, got device {device}")
        if not torch.cuda.is_available():
            raise ValueError(f"CUDA graph capture asked for on {device}, but CUDA is not available")
        check_warmup(warmup)
        if on_stale not in ("recapture", "raise"):
            raise ValueError(f"`on_stale` must be 'recapture' or 'raise', got {on_stale!r}")
        self.body = body
        self.device = device
        self.warmup = warmup
        self.capture_mode = check_capture_mode(capture_mode)
        self.stream = stream if stream is not None else torch.cuda.Stream(device)
        self.generators = list(generators)
        self.capture_scopes = list(capture_scopes)
        self.fingerprint = fingerprint
        self.on_stale = on_stale
        self.on_capture = on_capture
        self.transitions = transitions if transitions is not None else HostTransitions()
        self.captures = 0
        self.replays = 0
        self.eager_calls = 0
        self._graph: torch.cuda.CUDAGraph | None = None
        self._outputs: Any = None
        self._fingerprint: Hashable = None

    @property
    def captured(self) -> bool:
        """Whether a graph is held (the next call replays it)."""
        return self._graph is not None

    def invalidate(self) -> None:
        """Drop the graph; the next call captures again (after no further warm-up)."""
        self._graph = None
        self._outputs = None

    def __call__(self) -> _T:
        """Run one step of the body: eager during warm-up, then capture once, then replay."""
        if self._graph is not None and self.fingerprint is not None and self.fingerprint() != self._fingerprint:
            if self.on_stale == "raise":
                raise StaleGraphError(
                    "a buffer captured by the graph was replaced since capture; refusing to replay stale "
                    "pointers (construct with on_stale='recapture' to capture again)"
                )
            self.invalidate()
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)
        try:
            if self._graph is None and self.eager_calls < self.warmup and self.captures == 0:
                with torch.cuda.stream(self.stream), self.transitions.active():
                    out = self.body()
                self.eager_calls += 1
                return out
            if self._graph is None:
                self._capture()
            assert self._graph is not None
            with torch.cuda.stream(self.stream):
                self._graph.replay()
            self.replays += 1
            self.transitions.replay()
            return self._outputs
        finally:
            current.wait_stream(self.stream)

    def _capture(self) -> None:
        graph = torch.cuda.CUDAGraph()
        for gen in self.generators:
            graph.register_generator_state(gen)
        gc_was_enabled = gc.isenabled()
        gc.collect()
        gc.disable()  # stale warp graphs finalised mid-capture corrupt it
        try:
            with (
                self.transitions.recording_scope(),
                torch.cuda.graph(graph, stream=self.stream, capture_error_mode=self.capture_mode),
                ExitStack() as stack,
            ):
                for scope in self.capture_scopes:
                    stack.enter_context(scope(self.stream, self.capture_mode))
                outputs = self.body()
        finally:
            if gc_was_enabled:
                gc.enable()
        self._graph = graph
        self._outputs = outputs
        if self.on_capture is not None:
            self.on_capture()
        self._fingerprint = self.fingerprint() if self.fingerprint is not None else None
        self.captures += 1
