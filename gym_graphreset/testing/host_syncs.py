"""GPU-side sync detection: does a step ever make the host wait for the device?

:func:`assert_sync_free` is the sleep canary: it queues a long GPU sleep on the env's stream, steps a few
times, and checks that the host came back while the GPU was still busy, so it sees every sync (torch's,
warp's, the driver's). :func:`count_host_syncs` runs a function under torch's sync debug mode for a
traceback of the culprit (torch ops only). Both are re-exported by :mod:`gym_graphreset.testing.harness`.
"""

from __future__ import annotations

import os
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["SyncCanaryResult", "assert_sync_free", "count_host_syncs"]


class SyncCanaryResult(dict):
    """What the canary measured: ``host_seconds``, ``sleep_seconds``, ``gpu_busy_after``."""


def _sleep_cycles(seconds: float, device: torch.device) -> int:
    """GPU clock cycles that ``torch.cuda._sleep`` needs to spin for ``seconds`` (calibrated once)."""
    with torch.cuda.device(device):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        probe = 20_000_000
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        end.synchronize()
        return int(seconds * probe / (start.elapsed_time(end) / 1e3))


def assert_sync_free(
    step: Callable[[], Any], *, device: torch.device | str = "cuda", steps: int = 4, sleep_seconds: float = 0.4
) -> SyncCanaryResult:
    """Assert that ``step()`` never waits for the GPU, with a sleep canary on the current stream.

    Args:
        step: One env step (build actions beforehand; making them must not sync either).
        device: The env's CUDA device.
        steps: Calls to make; keep it <= 5 (graphs with conditional nodes apply queue back-pressure after
            ~10-30 launches, which looks like a sync but is not one).
        sleep_seconds: GPU time queued ahead of the steps.

    Raises:
        AssertionError: A step blocked the host until the queued GPU work finished.
    """
    device = torch.device(device)
    cycles = _sleep_cycles(sleep_seconds, device)
    torch.cuda.synchronize(device)
    stream = torch.cuda.current_stream(device)
    torch.cuda._sleep(cycles)
    per_step: list[float] = []
    start = time.perf_counter()
    for _ in range(steps):
        step()
        per_step.append(time.perf_counter() - start - sum(per_step))
    host = time.perf_counter() - start
    busy = not stream.query()
    torch.cuda.synchronize(device)
    result = SyncCanaryResult(
        host_seconds=host,
        sleep_seconds=sleep_seconds,
        gpu_busy_after=busy,
        per_step_ms=[round(t * 1e3, 3) for t in per_step],
    )
    if not busy or host > 0.5 * sleep_seconds:
        raise AssertionError(
            f"a step waited for the GPU: {steps} steps took {host * 1e3:.1f} ms of host time "
            f"(per step: {result['per_step_ms']} ms) behind a "
            f"{sleep_seconds * 1e3:.0f} ms GPU sleep (GPU still busy afterwards: {busy}); use "
            "count_host_syncs() for a traceback of torch-side syncs. A step that launches more kernels than "
            "CUDA's launch queue holds (~1,000 on an H200) also blocks here (back-pressure, not a sync): "
            "capture it, or check its parts separately"
        )
    return result


def count_host_syncs(fn: Callable[[], Any]) -> tuple[int, list[str]]:
    """Run ``fn`` under torch's sync debug mode; return the number of syncs and where each happened.

    Sees only syncs made by torch operations (``.item()``, ``.nonzero()``, ``bool(t)``...), not warp's.
    Each location is the innermost frame outside torch, so the culprit's file and line are named.
    Without CUDA there is no device to wait for: ``fn`` runs and ``(0, [])`` is returned.
    """
    if not torch.cuda.is_available():
        fn()
        return 0, []
    previous = torch.cuda.get_sync_debug_mode()
    found: list[str] = []

    def record(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if "called a synchronizing cuda operation" not in str(message).lower():
            return  # e.g. the one-time "prototype feature" notice
        frames = [f for f in traceback.extract_stack()[:-1] if f"{os.sep}torch{os.sep}" not in f.filename]
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else f"{filename}:{lineno}"
        found.append(f"{where}: {message}")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return len(found), found
