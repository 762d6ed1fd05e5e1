"""Value checks and geometry helpers shared by the terrain generator and its sub-terrain configs (private)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_EPS = 1e-6


def _fail(where: str, name: str, text: str, value: Any) -> None:
    raise ValueError(f"{where}: `{name}` must be {text}, got {value!r}")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x)


def _check_positive(where: str, name: str, value: Any) -> None:
    if not (_finite(value) and value > 0):
        _fail(where, name, "a finite number > 0", value)


def _check_non_negative(where: str, name: str, value: Any) -> None:
    if not (_finite(value) and value >= 0):
        _fail(where, name, "a finite number >= 0", value)


def _check_range(where: str, name: str, value: Any, low: float = 0.0, high: float = math.inf) -> None:
    ok = (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(_finite(v) and low <= v <= high for v in value)
        and value[0] <= value[1]
    )
    if not ok:
        within = f">= {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
        _fail(where, name, f"a (low, high) of finite numbers {within} with low <= high", value)


def _check_int(where: str, name: str, value: Any, low: int, high: int | None = None, optional: bool = False) -> None:
    if optional and value is None:
        return
    top = value if high is None else high
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= top):
        text = f"an int in [{low}, {high}]" if high is not None else f"an int >= {low}"
        _fail(where, name, f"None or {text}" if optional else text, value)


def _check_literal(where: str, name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        _fail(where, name, f"one of {list(allowed)}", value)


def _box_surface(boxes: np.ndarray, base: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = np.full(np.shape(x), base, dtype=np.float64)
    for b in boxes:
        cover = (np.abs(x - b[0]) <= b[3] + 1e-9) & (np.abs(y - b[1]) <= b[4] + 1e-9)
        z = np.where(cover, np.maximum(z, b[2] + b[5]), z)
    return z


def _frame(ex: float, ey: float, width: float, depth: float) -> np.ndarray:
    """Four boxes (top at z = 0) framing an ``ex x ey`` rectangle centred at the origin."""
    hz, zc = 0.5 * depth, -0.5 * depth
    ox, oy = 0.5 * ex + 0.5 * width, 0.5 * ey + 0.5 * width
    return np.array(
        [
            [ox, 0.0, zc, 0.5 * width, 0.5 * ey + width, hz],
            [-ox, 0.0, zc, 0.5 * width, 0.5 * ey + width, hz],
            [0.0, oy, zc, 0.5 * ex, 0.5 * width, hz],
            [0.0, -oy, zc, 0.5 * ex, 0.5 * width, hz],
        ]
    )
