"""What runs a step: eagerly, with the reset body captured, or the whole step captured.

The executor is chosen once from :attr:`AutoresetConfig.executor`. A graph is made on first use by
:class:`GraphFactory` (warm-up, capture on the participants' stream, registered generators, warp's
external capture) with a fingerprint over every buffer the graph can hold: the participants' tensor
attributes and declared buffers, the carriers, the selection, the latch and the static actions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import torch

from gym_graphreset.buffers import owned_like
from gym_graphreset.config import AutoresetConfig
from gym_graphreset.graph import AutoresetGraph
from gym_graphreset.host_transitions import HostTransitions
from gym_graphreset.participants import Participants, buffer_pointers
from gym_graphreset.stepping import StepBody, StepOut

__all__ = ["CapturedReset", "CapturedStep", "EagerStep", "GraphFactory"]


class GraphFactory:
    """Makes the :class:`AutoresetGraph` of a body, with a fingerprint that covers every held buffer.

    Args:
        device: The env's CUDA device.
        config: Warm-up and capture mode.
        parts: The participants (stream, generators, capture scopes, buffers).
        transitions: Host transitions recorded at capture, replayed after each launch.
        holders: The wrapper's own buffer holders (selection, latch, carriers, static actions).
    """

    def __init__(
        self,
        device: torch.device,
        config: AutoresetConfig,
        parts: Participants,
        transitions: HostTransitions,
        holders: Sequence[object],
    ) -> None:
        self.device, self.config, self.parts, self.transitions = device, config, parts, transitions
        self.holders = list(holders)

    def fingerprint(self) -> Hashable:
        """Changes when any buffer a graph may hold was replaced."""
        return tuple(buffer_pointers(h) for h in self.holders), self.parts.fingerprint()

    def make(self, body: Callable[[], Any]) -> AutoresetGraph[Any]:
        """The graph of ``body`` (captured on its first call after the warm-up)."""
        return AutoresetGraph(
            body,
            device=self.device,
            warmup=self.config.autoreset_graph_warmup,
            capture_mode=self.config.autoreset_graph_capture_mode,
            stream=self.parts.stream(),
            generators=self.parts.generators(),
            capture_scopes=self.parts.capture_scopes(),
            fingerprint=self.fingerprint,
            transitions=self.transitions,
        )


class EagerStep:
    """Runs the step body as plain calls (every mode without a step graph)."""

    graph: AutoresetGraph[Any] | None = None

    def __init__(self, body: StepBody) -> None:
        self.body = body

    def __call__(self, actions: torch.Tensor) -> StepOut:
        """One step."""
        return self.body(actions)

    def capture_buffers(self) -> Iterable[torch.Tensor]:
        """No graph, no buffers."""
        return ()


class CapturedStep:
    """The whole step as one graph: actions are copied into a static tensor the graph reads."""

    def __init__(self, body: StepBody, factory: GraphFactory) -> None:
        self.body, self.factory = body, factory
        self.static_actions: torch.Tensor | None = None
        self.graph: AutoresetGraph[Any] | None = None

    def __call__(self, actions: torch.Tensor) -> StepOut:
        """One step: the first calls run eagerly (warm-up), then capture, then replay."""
        if self.graph is None:
            static = self.static_actions = owned_like(actions)  # not an inference tensor: written every step
            static.copy_(actions)
            self.graph = self.factory.make(lambda: self.body(static))
        else:
            assert self.static_actions is not None
            self.static_actions.copy_(actions)
        return self.graph()

    def capture_buffers(self) -> Iterable[torch.Tensor]:
        """The static actions the graph reads."""
        return () if self.static_actions is None else (self.static_actions,)


class CapturedReset:
    """Runs the masked reset body through one graph (the ``"reset"`` scope); the rest of the step is eager."""

    def __init__(self, factory: GraphFactory) -> None:
        self.factory = factory
        self.graph: AutoresetGraph[Any] | None = None

    def __call__(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` through the graph (made on the first call)."""
        if self.graph is None:
            self.graph = self.factory.make(fn)
        self.graph()
