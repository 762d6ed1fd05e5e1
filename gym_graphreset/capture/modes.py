"""What a capture is configured by: the CUDA stream capture mode and the eager warm-up before it.

Capture owns these types; the wrapper's :class:`~gym_graphreset.core.config.StepConfig` and the engine use them.
"""

from __future__ import annotations

import numbers
from typing import Any, Literal, get_args

__all__ = ["CaptureMode", "check_capture_mode", "check_warmup"]

CaptureMode = Literal["global", "thread_local", "relaxed"]
"""CUDA stream capture modes (torch's and warp's names alike)."""

_INT64_MAX = 2**63 - 1


def check_warmup(warmup: Any) -> int:
    """Validate a graph's warm-up (eager calls before the capture): an int (or a numpy integer) >= 0."""
    if isinstance(warmup, bool) or not isinstance(warmup, numbers.Integral) or int(warmup) < 0:
        raise ValueError(f"`graph_warmup` must be an int >= 0, got {warmup!r}")
    if int(warmup) > _INT64_MAX:
        raise ValueError(f"`graph_warmup` must be an int <= {_INT64_MAX} (steps are counted in int64), got {warmup!r}")
    return int(warmup)


def check_capture_mode(capture_mode: Any) -> CaptureMode:
    """Validate a CUDA stream capture mode name."""
    choices = get_args(CaptureMode)
    if capture_mode not in choices:
        raise ValueError(f"`capture_mode` must be one of {choices}, got {capture_mode!r}")
    return capture_mode
