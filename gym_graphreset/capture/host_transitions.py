"""Host transitions: host-side bookkeeping inside a reset body that a captured graph would skip.

Python counters, step stamps and curriculum levels change on the host. Eagerly a transition runs
inline. While :class:`~gym_graphreset.capture.graph.AutoresetGraph` captures, transitions are recorded instead,
and after each graph launch they are replayed in order. A transition must never read device data
(that would be a host sync).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gym_graphreset.capture.compiling import opaque

__all__ = ["HostTransitions", "host_transition"]

_state = threading.local()


class HostTransitions:
    """An ordered record of host-side callbacks made while a graph was being captured."""

    def __init__(self) -> None:
        self._recorded: list[tuple[str, Callable[[], Any]]] = []
        self._recording = False

    @property
    def recording(self) -> bool:
        """Whether transitions are being recorded (a capture is in progress)."""
        return self._recording

    @property
    def names(self) -> list[str]:
        """Names of the recorded transitions, in replay order."""
        return [name for name, _ in self._recorded]

    def __len__(self) -> int:
        return len(self._recorded)

    def run(self, fn: Callable[[], Any], name: str | None = None) -> None:
        """Run ``fn`` now (eager) or record it (capturing)."""
        if self._recording:
            self._recorded.append((name or str(getattr(fn, "__qualname__", repr(fn))), fn))
        else:
            fn()

    @contextmanager
    def recording_scope(self) -> Iterator[HostTransitions]:
        """Record (not run) every :func:`host_transition` made by this thread inside the block."""
        self._recorded.clear()
        self._recording = True
        with self.active():
            try:
                yield self
            finally:
                self._recording = False

    @contextmanager
    def active(self) -> Iterator[HostTransitions]:
        """Route :func:`host_transition` calls made by this thread to this object."""
        previous = getattr(_state, "current", None)
        _state.current = self
        try:
            yield self
        finally:
            _state.current = previous

    def replay(self) -> None:
        """Run every recorded transition, in the order it was recorded."""
        for _, fn in self._recorded:
            fn()


@opaque
def host_transition(fn: Callable[[], Any], name: str | None = None) -> None:
    """Declare a host-side state change made inside a reset body.

    Runs ``fn`` inline unless a graph is being captured, in which case it is recorded and replayed after
    every launch of that graph. Outside any wrapper it simply runs.
    """
    current: HostTransitions | None = getattr(_state, "current", None)
    if current is None:
        fn()
    else:
        current.run(fn, name)
