"""Where an env's warp work runs: one torch-made stream shared with warp, and its cached warp graphs.

On CUDA, torch and warp must launch on one stream (a warp launch on another stream inside a torch
capture breaks it), and eager mujoco_warp is launch-bound, so each warp body is captured once as a warp
graph and replayed. Inside the wrapper's own torch capture the bodies run as plain launches instead;
warp joins that capture through :func:`warp_external_capture`. On the CPU every
body just runs.

Warp logs every module it loads (~36 "Module ... load" lines for one MuJoCo model on the CPU). A runtime
is quiet by default: its warp work runs with ``warp.config.log_level`` raised to ``LOG_WARNING`` (and put
back after), so warnings and errors still show; ``verbose=True`` leaves warp's level as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from gym_graphreset.capture.compiling import opaque
from gym_graphreset.capture.modes import check_capture_mode

__all__ = ["WarpRuntime", "warp_external_capture"]


@contextmanager
def warp_external_capture(stream: torch.cuda.Stream, capture_mode: str, wstream: Any = None) -> Iterator[None]:
    """Join warp launches to the torch capture in progress on ``stream`` (same capture mode).

    ``wstream`` must be the very ``warp.Stream`` object the warp code launches on: warp registers the
    capture per stream object, and code such as ``capture_while`` looks it up there (another wrapper of
    the same CUDA stream makes it run eagerly and synchronise inside the capture).
    """
    import warp as wp

    mode = {
        "global": wp.CaptureMode.GLOBAL,
        "thread_local": wp.CaptureMode.THREAD_LOCAL,
        "relaxed": wp.CaptureMode.RELAXED,
    }[check_capture_mode(capture_mode)]
    wstream = wstream if wstream is not None else wp.stream_from_torch(stream)
    wp.capture_begin(stream=wstream, external=True, capture_mode=mode)
    try:
        yield
    finally:
        wp.capture_end(stream=wstream)


class WarpRuntime:
    """The device, the shared stream and the named warp graphs of one env.

    Args:
        device: The torch device (``cpu`` or ``cuda:N``).
        verbose: Let warp log at its own level (module loads, its greeting); default quiet.
    """

    def __init__(self, device: torch.device, verbose: bool = False) -> None:
        import warp as wp

        if not isinstance(verbose, bool):
            raise ValueError(f"`warp_verbose` must be a bool, got {verbose!r}")
        self.wp = wp
        self.verbose = verbose
        with self.quiet():
            wp.init()  # idempotent; at construction, never at import
        self.device = device
        self.wp_device = wp.device_from_torch(device)
        self.cuda_stream: torch.cuda.Stream | None = None
        self.wstream: Any = None
        if device.type == "cuda":
            self.cuda_stream = torch.cuda.Stream(device)
            self.wstream = wp.stream_from_torch(self.cuda_stream)
        self.graphs: dict[str, Any] = {}

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Warp's info logs (module loads) silenced while inside, unless the runtime is ``verbose``."""
        config: Any = self.wp.config  # warp >= 1.19's `config.log_level` (absent from its type stubs)
        level = config.log_level
        if not self.verbose:
            config.log_level = max(level, self.wp.LOG_WARNING)
        try:
            yield
        finally:
            config.log_level = level

    def on_stream(self, wait: bool = True) -> contextlib.AbstractContextManager[None]:
        """Run torch and warp work on the env's stream (ordered after the caller's stream when ``wait``).

        In code ``torch.compile`` traces this is a ``nullcontext``: a compiled step already runs on this
        stream (:class:`~gym_graphreset.core.stepping.StepBody` enters it), and :meth:`run` scopes warp itself.
        """
        if torch.compiler.is_compiling():
            return contextlib.nullcontext()
        return self._on_stream(wait)

    @contextlib.contextmanager
    def _on_stream(self, wait: bool) -> Iterator[None]:
        if self.cuda_stream is None:
            with self.wp.ScopedDevice(self.wp_device), self.quiet():
                yield
            return
        caller = torch.cuda.current_stream(self.device)
        if wait:
            self.cuda_stream.wait_stream(caller)
        with torch.cuda.stream(self.cuda_stream), self._warp_scope(), self.quiet():
            yield
        if wait:
            caller.wait_stream(self.cuda_stream)

    def _warp_scope(self) -> contextlib.AbstractContextManager[Any]:
        """Warp launches on this env's device and stream."""
        if self.cuda_stream is None:
            return self.wp.ScopedDevice(self.wp_device)
        return self.wp.ScopedStream(self.wstream, sync_enter=False)

    def capturing(self) -> bool:
        """Whether a torch capture is in progress on CUDA (warp bodies then launch plainly)."""
        return self.cuda_stream is not None and torch.cuda.is_current_stream_capturing()

    @opaque
    def run(self, name: str, fn: Callable[[], None]) -> None:
        """Run warp work ``fn``: a cached warp graph when eager on CUDA, plain launches otherwise."""
        with self._warp_scope(), self.quiet():
            self._run(name, fn)

    def _run(self, name: str, fn: Callable[[], None]) -> None:
        if self.cuda_stream is None or self.capturing():
            fn()
            return
        graph = self.graphs.get(name)
        if graph is None:
            fn()  # loads every module (and compiles closures) before capture; the one logical call
            with self.wp.ScopedCapture(device=self.wp_device, stream=self.wstream) as capture:
                fn()
            self.graphs[name] = capture.graph
            return
        self.wp.capture_launch(graph, stream=self.wstream)

    def capture_scope(self, stream: torch.cuda.Stream, capture_mode: str) -> contextlib.AbstractContextManager[Any]:
        """Warp's external capture joined to the torch capture on ``stream`` (which must be this stream)."""
        if self.cuda_stream is None or stream.cuda_stream != self.cuda_stream.cuda_stream:
            raise ValueError("the graph must be captured on the env's own stream (`env.cuda_stream`)")
        return warp_external_capture(stream, capture_mode, wstream=self.wstream)
