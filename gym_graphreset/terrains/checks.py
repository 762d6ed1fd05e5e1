"""Value checks shared by the terrain generator and its sub-terrain configs: each names the config and field."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

EPS = 1e-6


def fail(where: str, name: str, text: str, value: Any) -> None:
    """Raise ``ValueError``: ``<where>: `<name>` must be <text>, got <value>``."""
    raise ValueError(f"{where}: `{name}` must be {text}, got {value!r}")


def finite(x: Any) -> bool:
    """``x`` is a finite real number (not a bool)."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x)


def check_positive(where: str, name: str, value: Any) -> None:
    """``value`` is a finite number > 0."""
    if not (finite(value) and value > 0):
        fail(where, name, "a finite number > 0", value)


def check_non_negative(where: str, name: str, value: Any) -> None:
    """``value`` is a finite number >= 0."""
    if not (finite(value) and value >= 0):
        fail(where, name, "a finite number >= 0", value)


def check_range(where: str, name: str, value: Any, low: float = 0.0, high: float = math.inf) -> None:
    """``value`` is a ``(lo, hi)`` pair of finite numbers with ``low <= lo <= hi <= high``."""
    ok = (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(finite(v) and low <= v <= high for v in value)
        and value[0] <= value[1]
    )
    if not ok:
        within = f">= {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
        fail(where, name, f"a (low, high) of finite numbers {within} with low <= high", value)


def check_int(where: str, name: str, value: Any, low: int, high: int | None = None, optional: bool = False) -> None:
    """``value`` is an int in ``[low, high]`` (``None`` too, if ``optional``)."""
    if optional and value is None:
        return
    top = value if high is None else high
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= top):
        text = f"an int in [{low}, {high}]" if high is not None else f"an int >= {low}"
        fail(where, name, f"None or {text}" if optional else text, value)


def check_literal(where: str, name: str, value: Any, allowed: tuple[str, ...]) -> None:
    """``value`` is one of ``allowed``."""
    if value not in allowed:
        fail(where, name, f"one of {list(allowed)}", value)
