"""What runs a body: one :class:`Runner` type, eager or through a CUDA graph, for the reset body or the step.

The wrapper builds two runners from :attr:`StepConfig.graph <gym_graphreset.core.config.StepConfig>`: one for
the masked reset body (a graph with ``graph="reset"``) and one for the whole step (a graph with
``graph="step"``); every other runner calls its body. A graph is made on first use by :class:`GraphFactory`
(warm-up, capture on the participants' stream, registered generators, warp's external capture) and guarded
by a :class:`~gym_graphreset.core.participants.BufferWatch` over every buffer it can hold, built once from a
fixed list of holders. :class:`StepInputs` is the step graph's static input: the actions are copied into it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

import torch

from gym_graphreset.capture.graph import AutoresetGraph
from gym_graphreset.capture.host_transitions import HostTransitions
from gym_graphreset.core.buffers import owned_like
from gym_graphreset.core.config import StepConfig
from gym_graphreset.core.participants import BufferWatch, Participants

__all__ = ["GraphFactory", "Runner", "StepInputs"]

_T = TypeVar("_T")


class GraphFactory:
    """Makes the :class:`AutoresetGraph` of a body, with a fingerprint that covers every held buffer.

    Args:
        device: The env's CUDA device.
        config: Warm-up and capture mode.
        parts: The participants (stream, generators, capture scopes, buffers).
        transitions: Host transitions recorded at capture, replayed after each launch.
        holders: The wrapper's own buffer holders (selection, latch, reset path, step inputs), complete:
            the watch is built once from them and the participants.
    """

    def __init__(
        self,
        device: torch.device,
        config: StepConfig,
        parts: Participants,
        transitions: HostTransitions,
        holders: Sequence[object],
    ) -> None:
        self.device, self.config, self.parts, self.transitions = device, config, parts, transitions
        self.watch = BufferWatch([*holders, *parts.members])

    def make(self, body: Callable[[], _T]) -> AutoresetGraph[_T]:
        """The graph of ``body`` (captured on its first call after the warm-up)."""
        return AutoresetGraph(
            body,
            device=self.device,
            warmup=self.config.graph_warmup,
            capture_mode=self.config.capture_mode,
            stream=self.parts.stream(),
            generators=self.parts.generators(),
            capture_scopes=self.parts.capture_scopes(),
            fingerprint=self.watch,
            on_capture=self.watch.rescan,
            transitions=self.transitions,
        )


class Runner(Generic[_T]):
    """Runs a body: as written (``factory=None``), or through one graph made on the first call.

    A graph replays what its first capture recorded: later calls' bodies must do the same work on the
    same buffers (the wrapper's do: they read persistent buffers only). ``watch``, when set, is entered
    around each call (the capture report's host-read counter).
    """

    def __init__(self, factory: GraphFactory | None) -> None:
        self.factory = factory
        self.graph: AutoresetGraph[_T] | None = None
        self.watch: contextlib.AbstractContextManager[Any] | None = None

    @property
    def captures(self) -> bool:
        """Whether bodies run through a graph of their own (else as written, inline)."""
        return self.factory is not None

    def __call__(self, body: Callable[[], _T]) -> _T:
        """Run ``body``: eagerly, or the graph's warm-up, capture or replay (inside ``watch`` when set)."""
        with self.watch if self.watch is not None else contextlib.nullcontext():
            if self.factory is None:
                return body()
            if self.graph is None:
                self.graph = self.factory.make(body)
            return self.graph()


class StepInputs:
    """The actions a step graph reads: copied into one persistent tensor (as given when there is no graph)."""

    def __init__(self, static: bool) -> None:
        self.static = static
        self.actions: torch.Tensor | None = None

    def take(self, actions: torch.Tensor) -> torch.Tensor:
        """The tensor the step reads: ``actions``, or the static copy a graph holds."""
        if not self.static:
            return actions
        if self.actions is None:
            self.actions = owned_like(actions)  # not an inference tensor: written every step
        self.actions.copy_(actions)
        return self.actions

    def capture_buffers(self) -> Iterable[torch.Tensor]:
        """The static actions the graph reads."""
        return () if self.actions is None else (self.actions,)
