"""Sub-terrain configs: the cells of a rough-terrain grid (:mod:`gym_graphreset.terrains.terrain_generator`).

Each sub-terrain config (:class:`FlatTerrainCfg`, :class:`RandomRoughTerrainCfg`,
:class:`PyramidSlopeTerrainCfg`, :class:`PyramidStairsTerrainCfg`, :class:`RandomBoxesTerrainCfg`,
:class:`WaveTerrainCfg`) is frozen
and validated, and makes one cell of the grid at a difficulty. Their value checks are shared with the generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from gym_graphreset.terrains.checks import (
    EPS,
    check_int,
    check_non_negative,
    check_positive,
    check_range,
    fail,
)

__all__ = [
    "FlatTerrainCfg",
    "PyramidSlopeTerrainCfg",
    "PyramidStairsTerrainCfg",
    "RandomBoxesTerrainCfg",
    "RandomRoughTerrainCfg",
    "SubTerrainCfg",
    "WaveTerrainCfg",
]


@dataclass(frozen=True)
class _Cell:
    """One generated cell in local coordinates (``[0, sx] x [0, sy]``, z up, the border at z = 0).

    ``boxes``: ``(k, 6)`` centre and half sizes; ``base``: the heightfield level under the boxes; ``heights``
    gives the heightfield terrains' surface at local points (``None`` for box terrains).
    """

    base: float = 0.0
    boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    grid: np.ndarray | None = None
    """A heightfield terrain's own samples on the cell's sample grid (``(nx, ny)``), or ``None``."""


@dataclass(frozen=True)
class SubTerrainCfg:
    """Fields every sub-terrain has.

    Attributes:
        proportion: Share of the envs spawned on this terrain's column (normalised over the sub-terrains).
    """

    proportion: float = 1.0
    kind: str = field(default="", init=False)

    def __post_init__(self) -> None:
        check_positive(type(self).__name__, "proportion", self.proportion)

    def _make(self, difficulty: float, size: tuple[float, float], hs: float, rng: np.random.Generator) -> _Cell:
        raise NotImplementedError

    def size_problem(self, size: tuple[float, float], horizontal_scale: float) -> str | None:
        """Why this sub-terrain cannot be laid on a cell of ``size`` [m] sampled every ``horizontal_scale`` [m]."""
        return None

    def max_boxes(self, size: tuple[float, float]) -> tuple[int, str]:
        """At most how many boxes one cell of ``size`` gets, and the field that sets the count."""
        return 0, ""


def _border_problem(border_width: float, size: tuple[float, float]) -> str | None:
    """A border as wide as half the cell leaves it flat (nothing of the terrain inside)."""
    if 2.0 * border_width >= min(size):
        half = 0.5 * min(size)
        side = f"half the cell's side ({half:g} m)"
        return f"`border_width` ({border_width:g} m) must be less than {side}: the cell would be flat"
    return None


def _platform_problem(platform_width: float, size: tuple[float, float]) -> str | None:
    """A central platform wider than the cell leaves nothing of the terrain (narrower ones shrink it)."""
    if platform_width > min(size):
        return f"`platform_width` ({platform_width:g} m) must fit the cell ({min(size):g} m)"
    return None


@dataclass(frozen=True)
class FlatTerrainCfg(SubTerrainCfg):
    """Flat ground at z = 0 (mjlab's ``BoxFlatTerrainCfg``)."""

    kind: Literal["flat"] = field(default="flat", init=False)

    def _make(self, difficulty: float, size: tuple[float, float], hs: float, rng: np.random.Generator) -> _Cell:
        return _Cell(grid=np.zeros(_samples(size, hs)))


@dataclass(frozen=True)
class RandomRoughTerrainCfg(SubTerrainCfg):
    """Random uniform heights on every heightfield sample (mjlab's ``HfRandomUniformTerrainCfg``).

    Attributes:
        noise_range: (min, max) height [m] at difficulty 1; heights are drawn from ``min, min + noise_step,
            ... <= max``, both scaled by the difficulty when ``scale_with_difficulty``.
        noise_step: Height quantum [m].
        border_width: Flat border at z = 0 around the cell [m].
        scale_with_difficulty: Ramp the amplitude from flat (difficulty 0) to ``noise_range`` (1). mjlab's
            default is ``False`` (the same roughness on every row); here ``True`` so rows get harder.
    """

    noise_range: tuple[float, float] = (0.02, 0.10)
    noise_step: float = 0.02
    border_width: float = 0.25
    scale_with_difficulty: bool = True
    kind: Literal["random_rough"] = field(default="random_rough", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        where = "RandomRoughTerrainCfg"
        check_range(where, "noise_range", self.noise_range)
        check_positive(where, "noise_step", self.noise_step)
        check_non_negative(where, "border_width", self.border_width)
        if not isinstance(self.scale_with_difficulty, bool):
            fail(where, "scale_with_difficulty", "a bool", self.scale_with_difficulty)

    def size_problem(self, size: tuple[float, float], horizontal_scale: float) -> str | None:
        """The border must leave rough ground inside."""
        return _border_problem(self.border_width, size)

    def _make(self, difficulty: float, size: tuple[float, float], hs: float, rng: np.random.Generator) -> _Cell:
        scale = difficulty if self.scale_with_difficulty else 1.0
        lo, hi = self.noise_range[0] * scale, self.noise_range[1] * scale
        levels = np.arange(lo, hi + 0.5 * self.noise_step, self.noise_step) if hi > lo else np.array([lo])
        shape = _samples(size, hs)
        grid = rng.choice(levels, size=shape)
        b = round(self.border_width / hs)
        if b > 0:
            inner = np.zeros(shape, dtype=bool)
            inner[b:-b, b:-b] = True
            grid = np.where(inner, grid, 0.0)
        return _Cell(grid=grid)


@dataclass(frozen=True)
class PyramidSlopeTerrainCfg(SubTerrainCfg):
    """A four-sided pyramid (or pit, ``inverted``) rising from the border to a flat top platform.

    mjlab's ``HfPyramidSlopedTerrainCfg`` facts: ``slope_range`` (rise / run, by difficulty), platform and border.
    The pyramid here has planar faces (height = slope x distance to the nearest inner edge).

    Attributes:
        slope_range: (min, max) slope (rise / run) at difficulty 0 and 1.
        platform_width: Side of the flat top (bottom when inverted) [m].
        border_width: Flat border at z = 0 [m].
        inverted: A pit instead of a hill.
    """

    slope_range: tuple[float, float] = (0.0, 0.7)
    platform_width: float = 2.0
    border_width: float = 0.25
    inverted: bool = False
    kind: Literal["pyramid_slope"] = field(default="pyramid_slope", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        where = "PyramidSlopeTerrainCfg"
        check_range(where, "slope_range", self.slope_range)
        check_non_negative(where, "platform_width", self.platform_width)
        check_non_negative(where, "border_width", self.border_width)
        if not isinstance(self.inverted, bool):
            fail(where, "inverted", "a bool", self.inverted)

    def size_problem(self, size: tuple[float, float], horizontal_scale: float) -> str | None:
        """The platform must fit the cell, and the border and platform leave room for a slope."""
        if problem := _platform_problem(self.platform_width, size) or _border_problem(self.border_width, size):
            return problem
        if 2.0 * self.border_width + self.platform_width >= min(size):
            return (
                f"`platform_width` ({self.platform_width:g} m) and `border_width` ({self.border_width:g} m, each "
                f"side) leave no slope on the cell ({min(size):g} m): the cell would be flat"
            )
        return None

    def _make(self, difficulty: float, size: tuple[float, float], hs: float, rng: np.random.Generator) -> _Cell:
        slope = self.slope_range[0] + difficulty * (self.slope_range[1] - self.slope_range[0])
        nx, ny = _samples(size, hs)
        x, y = np.meshgrid(np.arange(nx) * hs, np.arange(ny) * hs, indexing="ij")
        bw = self.border_width
        dist = np.minimum(np.minimum(x - bw, size[0] - bw - x), np.minimum(y - bw, size[1] - bw - y))
        top = 0.5 * (min(size) - 2.0 * bw - self.platform_width)
        h = slope * np.clip(dist, 0.0, max(top, 0.0))
        return _Cell(grid=-h if self.inverted else h)


@dataclass(frozen=True)
class PyramidStairsTerrainCfg(SubTerrainCfg):
    """Square stairs up to a central platform (or down into a pit, ``inverted``), made of boxes.

    mjlab's ``BoxPyramidStairsTerrainCfg`` / ``BoxInvertedPyramidStairsTerrainCfg``: ring ``k`` (from the
    border inward) has its top at ``(k + 1) * step_height`` (``-(k + 1) * step_height`` inverted), the platform
    one step above (below) the last ring; ``num_steps = (min(size) - 2 border - platform) // (2 step_width)``.

    Attributes:
        step_height_range: (min, max) step height [m] at difficulty 0 and 1.
        step_width: Run of each step [m].
        platform_width: Side of the central platform [m].
        border_width: Flat border at z = 0 around the stairs [m].
        inverted: Stairs down into a pit.
    """

    step_height_range: tuple[float, float] = (0.0, 0.2)
    step_width: float = 0.3
    platform_width: float = 3.0
    border_width: float = 1.0
    inverted: bool = False
    kind: Literal["pyramid_stairs"] = field(default="pyramid_stairs", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        where = "PyramidStairsTerrainCfg"
        check_range(where, "step_height_range", self.step_height_range)
        check_positive(where, "step_width", self.step_width)
        check_non_negative(where, "platform_width", self.platform_width)
        check_non_negative(where, "border_width", self.border_width)
        if not isinstance(self.inverted, bool):
            fail(where, "inverted", "a bool", self.inverted)

    def num_steps(self, size: tuple[float, float]) -> int:
        """Steps on each side for a cell of ``size``."""
        return max(0, int((min(size) - 2.0 * self.border_width - self.platform_width) / (2.0 * self.step_width)))

    def size_problem(self, size: tuple[float, float], horizontal_scale: float) -> str | None:
        """The platform must fit the cell, and the border leave stairs inside."""
        return _platform_problem(self.platform_width, size) or _border_problem(self.border_width, size)

    def max_boxes(self, size: tuple[float, float]) -> tuple[int, str]:
        """One box per step (four per ring inverted), and the platform's."""
        return (4 if self.inverted else 1) * (self.num_steps(size) + 1), "step_width"

    def _make(self, difficulty: float, size: tuple[float, float], hs: float, rng: np.random.Generator) -> _Cell:
        h = self.step_height_range[0] + difficulty * (self.step_height_range[1] - self.step_height_range[0])
        n, w, bw = self.num_steps(size), self.step_width, self.border_width
        cx, cy = 0.5 * size[0], 0.5 * size[1]
        boxes: list[list[float]] = []
        if not self.inverted:  # nested squares on the ground: square k spans ring k inward, top (k + 1) h
            for k in range(n + 1):
                top = (k + 1) * h
                hx, hy = 0.5 * size[0] - bw - k * w, 0.5 * size[1] - bw - k * w
                if top > EPS and hx > EPS and hy > EPS:
                    boxes.append([cx, cy, 0.5 * top, hx, hy, 0.5 * top])
            return _Cell(base=0.0, boxes=np.array(boxes).reshape(-1, 6))
        base = -(n + 1) * h  # the pit's platform is the heightfield itself
        rings = [(0.0, bw, 0.0)] + [(bw + k * w, bw + (k + 1) * w, -(k + 1) * h) for k in range(n)]
        for inner_off, outer_off, top in rings:  # a square annulus of 4 boxes from `base` up to `top`
            half_z = 0.5 * (top - base)
            if half_z <= EPS or outer_off - inner_off <= EPS:
                continue
            zc = base + half_z
            t = 0.5 * (outer_off - inner_off)
            for yc in (inner_off + t, size[1] - inner_off - t):  # along x, full length of the annulus
                boxes.append([cx, yc, zc, 0.5 * size[0] - inner_off, t, half_z])
            for xc in (inner_off + t, size[0] - inner_off - t):  # along y, between the two above
                boxes.append([xc, cy, zc, t, 0.5 * size[1] - outer_off, half_z])
        return _Cell(base=base, boxes=np.array(boxes).reshape(-1, 6))


@dataclass(frozen=True)
class RandomBoxesTerrainCfg(SubTerrainCfg):
    """Boxes of random footprint and height scattered on flat ground, a flat platform kept clear at the centre.

    mjlab's ``BoxRandomSpreadTerrainCfg`` facts: count, width/length ranges, height range by difficulty.
    Each box's height is uniform in ``[0.5, 1] x h(difficulty)`` with ``h`` interpolated in ``box_height_range``.

    Attributes:
        num_boxes: Boxes per cell.
        box_width_range, box_length_range: Footprint ranges [m].
        box_height_range: (min, max) top height [m] at difficulty 0 and 1.
        platform_width: Side of the clear central platform [m].
        border_width: Clear border [m].
    """

    num_boxes: int = 40
    box_width_range: tuple[float, float] = (0.2, 1.0)
    box_length_range: tuple[float, float] = (0.2, 1.0)
    box_height_range: tuple[float, float] = (0.02, 0.2)
    platform_width: float = 1.5
    border_width: float = 0.25
    kind: Literal["random_boxes"] = field(default="random_boxes", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        where = "RandomBoxesTerrainCfg"
        if not (isinstance(self.num_boxes, int) and not isinstance(self.num_boxes, bool) and self.num_boxes >= 0):
            fail(where, "num_boxes", "an int >= 0", self.num_boxes)
        for name in ("box_width_range", "box_length_range"):
            check_range(where, name, getattr(self, name), low=EPS)
        check_range(where, "box_height_range", self.box_height_range)
        check_non_negative(where, "platform_width", self.platform_width)
        check_non_negative(where, "border_width", self.border_width)

    def size_problem(self, size: tuple[float, float], horizontal_scale: float) -> str | None:
        """The platform must fit the cell, and a box of the smallest footprint fit off it inside the border."""
        if problem := _platform_problem(self.platform_width, size):
            return problem
        bw, pw = self.border_width, 0.5 * self.platform_width
        room_x = 0.5 * size[0] - bw - self.box_length_range[0] >= pw
        room_y = 0.5 * size[1] - bw - self.box_width_range[0] >= pw
        if not (room_x or room_y):
            return (
                f"`platform_width` ({self.platform_width:g} m) and `border_width` ({bw:g} m) leave no room for a "
                f"box on cells of {tuple(size)}: every box would be dropped and the cell flat"
            )
        return None

    def max_boxes(self, size: tuple[float, float]) -> tuple[int, str]:
        """``num_boxes`` per cell."""
        return self.num_boxes, "num_boxes"

    def _make(self, difficulty: float, size: tuple[float, float], hs: float, rng: np.random.Generator) -> _Cell:
        h = self.box_height_range[0] + difficulty * (self.box_height_range[1] - self.box_height_range[0])
        n, bw, pw = self.num_boxes, self.border_width, 0.5 * self.platform_width
        hx = 0.5 * rng.uniform(*self.box_length_range, size=n)
        hy = 0.5 * rng.uniform(*self.box_width_range, size=n)
        top = h * rng.uniform(0.5, 1.0, size=n)
        ux, uy = rng.uniform(size=n), rng.uniform(size=n)
        x = bw + hx + ux * np.maximum(size[0] - 2 * bw - 2 * hx, 0.0)
        y = bw + hy + uy * np.maximum(size[1] - 2 * bw - 2 * hy, 0.0)
        cx, cy = 0.5 * size[0], 0.5 * size[1]
        clear = (np.abs(x - cx) >= hx + pw) | (np.abs(y - cy) >= hy + pw)  # off the platform
        keep = clear & (top > EPS)
        boxes = np.stack((x, y, 0.5 * top, hx, hy, 0.5 * top), axis=1)[keep]
        return _Cell(base=0.0, boxes=boxes)


@dataclass(frozen=True)
class WaveTerrainCfg(SubTerrainCfg):
    """Sine waves across both axes inside a flat border (mjlab's ``HfWaveTerrainCfg`` with its rough-set preset).

    Inside the border, at sample ``(i, j)`` (counted from the border; ``i`` along x, ``j`` along y), the height
    is ``v * rint(a * (cos(i k) + sin(j k)))`` with ``a = int(A / (2 v))`` and ``k = 2 pi num_waves / m``,
    ``m`` the samples across the inner cell along y, ``A`` the amplitude at the difficulty and ``v`` the
    ``vertical_scale``: mjlab's formula (its heightfield rows run along y), heights quantised to its vertical
    step, peak to peak about ``2 A``, centred on the border's z = 0.

    Attributes:
        amplitude_range: (min, max) amplitude ``A`` [m] at difficulty 0 and 1.
        num_waves: Whole wave cycles across the inner cell.
        vertical_scale: Height quantum [m].
        border_width: Flat border at z = 0 around the cell [m].
    """

    amplitude_range: tuple[float, float] = (0.0, 0.2)
    num_waves: int = 4
    vertical_scale: float = 0.005
    border_width: float = 0.25
    kind: Literal["wave"] = field(default="wave", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        where = "WaveTerrainCfg"
        check_range(where, "amplitude_range", self.amplitude_range)
        check_int(where, "num_waves", self.num_waves, 1)
        check_positive(where, "vertical_scale", self.vertical_scale)
        check_non_negative(where, "border_width", self.border_width)

    def size_problem(self, size: tuple[float, float], horizontal_scale: float) -> str | None:
        """The border must leave an inner cell and be no narrower than one sample (mjlab's rule), or be 0."""
        if 2.0 * self.border_width >= min(size):
            half = 0.5 * min(size)
            return f"`border_width` ({self.border_width:g} m) must be less than half the cell's side ({half:g} m)"
        if 0.0 < self.border_width < horizontal_scale:
            return (
                f"`border_width` ({self.border_width:g} m) must be 0 or at least the horizontal scale "
                f"({horizontal_scale:g} m): a narrower border would have no sample"
            )
        return None

    def _make(self, difficulty: float, size: tuple[float, float], hs: float, rng: np.random.Generator) -> _Cell:
        lo, hi = self.amplitude_range
        v = self.vertical_scale
        a = int(0.5 * (lo + difficulty * (hi - lo)) / v)
        nx, ny = _samples(size, hs)
        b = int(self.border_width / hs)  # mjlab truncates
        k = 2.0 * math.pi * self.num_waves / (ny - 2 * b)
        i, j = np.arange(nx - 2 * b)[:, None], np.arange(ny - 2 * b)[None, :]
        grid = np.zeros((nx, ny))
        grid[b : nx - b, b : ny - b] = v * np.rint(a * (np.cos(i * k) + np.sin(j * k)))
        return _Cell(grid=grid)


SubTerrain = (
    FlatTerrainCfg
    | RandomRoughTerrainCfg
    | PyramidSlopeTerrainCfg
    | PyramidStairsTerrainCfg
    | RandomBoxesTerrainCfg
    | WaveTerrainCfg
)
"""A sub-terrain config."""


def _samples(size: tuple[float, float], hs: float) -> tuple[int, int]:
    return round(size[0] / hs) + 1, round(size[1] / hs) + 1
