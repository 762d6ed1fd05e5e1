"""A CPU-side detector of host reads: the torch calls that make the host wait for device data.

On CUDA each is a synchronisation; on the CPU nothing waits, so torch's sync debug mode sees nothing.
Counting the calls themselves works on any device, so an env author without a GPU can prove that a step
reads nothing. The counter is :mod:`gym_graphreset.capture.host_reads` (the wrapper's capture report uses
it too); :func:`count_host_reads` is importable from here. Re-exported by
:mod:`gym_graphreset.testing.harness`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gym_graphreset.capture.host_reads import count_host_reads

__all__ = ["assert_no_host_reads", "count_host_reads"]


def assert_no_host_reads(fn: Callable[[], Any]) -> None:
    """Assert that ``fn`` (e.g. a few masked steps between polls) makes no host read (:func:`count_host_reads`)."""
    n, where = count_host_reads(fn)
    if n:
        raise AssertionError(f"{n} host read(s) of device data:\n  " + "\n  ".join(where[:20]))
