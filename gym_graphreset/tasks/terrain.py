"""Rough terrain: a seeded grid of sub-terrains (difficulty by row) in one MJCF, with per-cell spawn origins.

The grid has ``num_rows`` levels (rows, along x; difficulty grows with the row) and one column per
sub-terrain type (along y; mjlab's curriculum layout), centred at the world origin. Every cell is
rasterised into ONE MuJoCo heightfield (``hfield``) covering the whole grid; the box terrains (stairs,
random boxes) are also box geoms by default (exact vertical faces), standing on the heightfield lowered to
their base. A flat border frame of boxes surrounds the grid.

- :class:`TerrainGeneratorCfg` and the sub-terrain configs (:class:`FlatTerrainCfg`,
  :class:`RandomRoughTerrainCfg`, :class:`PyramidStairsTerrainCfg`, :class:`PyramidSlopeTerrainCfg`,
  :class:`RandomBoxesTerrainCfg`) are frozen and validated; :data:`ROUGH_TERRAINS_CFG` is mjlab 1.6's
  rough set on them.
- :func:`generate_terrain` builds a :class:`Terrain` (heights, boxes, origins ``(rows, cols, 3)``) from a
  config, the same for the same seed.
- :meth:`Terrain.to_mjcf` writes the fragment; :func:`add_terrain` puts it into a robot's MJCF in place of
  its flat floor; :meth:`Terrain.env_origins` places envs by ``(level, type)`` cell.
- :class:`TerrainCfg` is the terrain as a task part (in ``TaskCfg.sensors``): per-env levels, types and
  origins on the device, moved by :func:`~gym_graphreset.tasks.mdp.terrain_levels.terrain_levels_vel`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

if TYPE_CHECKING:
    from gym_graphreset.tasks.env import ManagerBasedEnv

__all__ = [
    "ROUGH_TERRAINS_CFG",
    "FlatTerrainCfg",
    "PyramidSlopeTerrainCfg",
    "PyramidStairsTerrainCfg",
    "RandomBoxesTerrainCfg",
    "RandomRoughTerrainCfg",
    "SubTerrainCfg",
    "Terrain",
    "TerrainCfg",
    "TerrainGeneratorCfg",
    "TerrainState",
    "add_terrain",
    "generate_terrain",
]

TERRAIN_BODY = "terrain"
"""The static body holding every terrain geom (contact sensors and rays may name it)."""
HFIELD_NAME = "terrain_hfield"
"""The name of the heightfield asset and of its geom."""
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


def _check_range(where: str, name: str, value: Any, low: float = 0.0) -> None:
    ok = (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(_finite(v) and v >= low for v in value)
        and value[0] <= value[1]
    )
    if not ok:
        _fail(where, name, f"a (low, high) of finite numbers >= {low:g} with low <= high", value)


def _check_literal(where: str, name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        _fail(where, name, f"one of {list(allowed)}", value)


# ---------------------------------------------------------------------------------------------- sub-terrains


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
        _check_positive(type(self).__name__, "proportion", self.proportion)

    def _make(self, difficulty: float, size: tuple[float, float], hs: float, rng: np.random.Generator) -> _Cell:
        raise NotImplementedError


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
        _check_range(where, "noise_range", self.noise_range)
        _check_positive(where, "noise_step", self.noise_step)
        _check_non_negative(where, "border_width", self.border_width)
        if not isinstance(self.scale_with_difficulty, bool):
            _fail(where, "scale_with_difficulty", "a bool", self.scale_with_difficulty)

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
        _check_range(where, "slope_range", self.slope_range)
        _check_non_negative(where, "platform_width", self.platform_width)
        _check_non_negative(where, "border_width", self.border_width)
        if not isinstance(self.inverted, bool):
            _fail(where, "inverted", "a bool", self.inverted)

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
        _check_range(where, "step_height_range", self.step_height_range)
        _check_positive(where, "step_width", self.step_width)
        _check_non_negative(where, "platform_width", self.platform_width)
        _check_non_negative(where, "border_width", self.border_width)
        if not isinstance(self.inverted, bool):
            _fail(where, "inverted", "a bool", self.inverted)

    def num_steps(self, size: tuple[float, float]) -> int:
        """Steps on each side for a cell of ``size``."""
        return max(0, int((min(size) - 2.0 * self.border_width - self.platform_width) / (2.0 * self.step_width)))

    def _make(self, difficulty: float, size: tuple[float, float], hs: float, rng: np.random.Generator) -> _Cell:
        h = self.step_height_range[0] + difficulty * (self.step_height_range[1] - self.step_height_range[0])
        n, w, bw = self.num_steps(size), self.step_width, self.border_width
        cx, cy = 0.5 * size[0], 0.5 * size[1]
        boxes: list[list[float]] = []
        if not self.inverted:  # nested squares on the ground: square k spans ring k inward, top (k + 1) h
            for k in range(n + 1):
                top = (k + 1) * h
                hx, hy = 0.5 * size[0] - bw - k * w, 0.5 * size[1] - bw - k * w
                if top > _EPS and hx > _EPS and hy > _EPS:
                    boxes.append([cx, cy, 0.5 * top, hx, hy, 0.5 * top])
            return _Cell(base=0.0, boxes=np.array(boxes).reshape(-1, 6))
        base = -(n + 1) * h  # the pit's platform is the heightfield itself
        rings = [(0.0, bw, 0.0)] + [(bw + k * w, bw + (k + 1) * w, -(k + 1) * h) for k in range(n)]
        for inner_off, outer_off, top in rings:  # a square annulus of 4 boxes from `base` up to `top`
            half_z = 0.5 * (top - base)
            if half_z <= _EPS or outer_off - inner_off <= _EPS:
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
            _fail(where, "num_boxes", "an int >= 0", self.num_boxes)
        for name in ("box_width_range", "box_length_range"):
            _check_range(where, name, getattr(self, name), low=_EPS)
        _check_range(where, "box_height_range", self.box_height_range)
        _check_non_negative(where, "platform_width", self.platform_width)
        _check_non_negative(where, "border_width", self.border_width)

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
        keep = clear & (top > _EPS)
        boxes = np.stack((x, y, 0.5 * top, hx, hy, 0.5 * top), axis=1)[keep]
        return _Cell(base=0.0, boxes=boxes)


SubTerrain = (
    FlatTerrainCfg | RandomRoughTerrainCfg | PyramidSlopeTerrainCfg | PyramidStairsTerrainCfg | RandomBoxesTerrainCfg
)
"""A sub-terrain config."""


def _samples(size: tuple[float, float], hs: float) -> tuple[int, int]:
    return round(size[0] / hs) + 1, round(size[1] / hs) + 1


# ---------------------------------------------------------------------------------------------- the generator


@dataclass(frozen=True)
class TerrainGeneratorCfg:
    """A grid of sub-terrains: ``num_rows`` difficulty levels x one column per sub-terrain type.

    Attributes:
        sub_terrains: The terrain types by name, in column order.
        size: (x, y) size of one cell [m]; both multiples of ``2 * horizontal_scale``.
        num_rows: Difficulty levels (rows, along x).
        difficulty_range: Difficulty of row 0 and of the last row (linear in between, mjlab's curriculum mode).
        horizontal_scale: Heightfield sample spacing [m].
        border_width: Flat frame of boxes around the grid [m] (0: none).
        border_height: Depth of the frame and of the heightfield's base [m].
        seed: Seed of every random draw (the same seed gives the same terrain).
        box_terrains: ``"boxes"``: stairs and random boxes are box geoms (exact vertical faces);
            ``"heightfield"``: rasterised into the heightfield too (one geom: cheapest rays and collisions,
            but each vertical face becomes a ramp one sample wide).
        geom_group: MuJoCo geom group of the terrain geoms (a height scan can cast against it alone).
        friction: Sliding, torsional and rolling friction of the terrain geoms.
        rgba: Colour of the heightfield; boxes are shaded by height.
    """

    sub_terrains: Mapping[str, SubTerrain]
    size: tuple[float, float] = (8.0, 8.0)
    num_rows: int = 10
    difficulty_range: tuple[float, float] = (0.0, 1.0)
    horizontal_scale: float = 0.1
    border_width: float = 20.0
    border_height: float = 1.0
    seed: int = 0
    box_terrains: Literal["boxes", "heightfield"] = "boxes"
    geom_group: int = 2
    friction: tuple[float, float, float] = (1.0, 0.005, 0.0001)
    rgba: tuple[float, float, float, float] = (0.45, 0.47, 0.5, 1.0)

    def __post_init__(self) -> None:
        where = "TerrainGeneratorCfg"
        subs = self.sub_terrains
        if not (isinstance(subs, Mapping) and len(subs) > 0):
            _fail(where, "sub_terrains", "a non-empty {name: sub-terrain config}", subs)
        for name, sub in subs.items():
            if not isinstance(sub, SubTerrainCfg):
                _fail(where, f"sub_terrains[{name!r}]", "a sub-terrain config (e.g. FlatTerrainCfg())", sub)
        if not (isinstance(self.size, (tuple, list)) and len(self.size) == 2 and all(_finite(s) for s in self.size)):
            _fail(where, "size", "an (x, y) pair of finite numbers", self.size)
        _check_positive(where, "horizontal_scale", self.horizontal_scale)
        for s in self.size:
            q = s / (2.0 * self.horizontal_scale)
            if s <= 0 or abs(q - round(q)) > 1e-6:
                _fail(
                    where,
                    "size",
                    f"positive multiples of 2 * horizontal_scale ({2 * self.horizontal_scale:g})",
                    self.size,
                )
        if not (isinstance(self.num_rows, int) and not isinstance(self.num_rows, bool) and self.num_rows >= 1):
            _fail(where, "num_rows", "an int >= 1", self.num_rows)
        _check_range(where, "difficulty_range", self.difficulty_range)
        _check_non_negative(where, "border_width", self.border_width)
        _check_positive(where, "border_height", self.border_height)
        if not (isinstance(self.seed, int) and not isinstance(self.seed, bool) and self.seed >= 0):
            _fail(where, "seed", "an int >= 0", self.seed)
        _check_literal(where, "box_terrains", self.box_terrains, ("boxes", "heightfield"))
        if not (
            isinstance(self.geom_group, int) and not isinstance(self.geom_group, bool) and 0 <= self.geom_group <= 5
        ):
            _fail(where, "geom_group", "an int in [0, 5]", self.geom_group)
        if not (len(self.friction) == 3 and all(_finite(f) and f >= 0 for f in self.friction)):
            _fail(where, "friction", "3 finite numbers >= 0", self.friction)
        if not (len(self.rgba) == 4 and all(_finite(c) and 0 <= c <= 1 for c in self.rgba)):
            _fail(where, "rgba", "4 numbers in [0, 1]", self.rgba)

    @property
    def num_cols(self) -> int:
        """One column per sub-terrain type."""
        return len(self.sub_terrains)

    def difficulty(self, row: int) -> float:
        """The difficulty of row ``row``."""
        lo, hi = self.difficulty_range
        return lo + (hi - lo) * row / max(self.num_rows - 1, 1)


ROUGH_TERRAINS_CFG = TerrainGeneratorCfg(
    sub_terrains={
        "flat": FlatTerrainCfg(proportion=0.2),
        "pyramid_stairs": PyramidStairsTerrainCfg(proportion=0.2, step_height_range=(0.0, 0.1)),
        "pyramid_stairs_inv": PyramidStairsTerrainCfg(proportion=0.2, step_height_range=(0.0, 0.1), inverted=True),
        "hf_pyramid_slope": PyramidSlopeTerrainCfg(proportion=0.1, slope_range=(0.0, 1.0)),
        "hf_pyramid_slope_inv": PyramidSlopeTerrainCfg(proportion=0.1, slope_range=(0.0, 1.0), inverted=True),
        "random_rough": RandomRoughTerrainCfg(proportion=0.1),
        "random_boxes": RandomBoxesTerrainCfg(proportion=0.1),
    },
)
"""mjlab 1.6's ``ROUGH_TERRAINS_CFG`` on this generator (8 m cells, 10 levels, 20 m border); its wave terrain
is replaced by random boxes."""


@dataclass(frozen=True)
class Terrain:
    """A generated terrain grid (see :func:`generate_terrain`).

    Attributes:
        cfg: The generator config.
        heights: ``(nx, ny)`` heightfield samples [m] over the whole grid (x = rows, y = columns).
        boxes: ``(k, 6)`` world centre and half sizes of every box geom (the border frame included).
        box_cells: ``(k,)`` the ``row * num_cols + col`` cell of each box (-1: the border frame).
        origins: ``(num_rows, num_cols, 3)`` spawn point of each cell (its centre, on the surface).
        difficulty: ``(num_rows,)`` each row's difficulty.
    """

    cfg: TerrainGeneratorCfg
    heights: np.ndarray
    boxes: np.ndarray
    box_cells: np.ndarray
    origins: np.ndarray
    difficulty: np.ndarray

    @property
    def extent(self) -> tuple[float, float]:
        """(x, y) size of the grid [m] (without the border)."""
        return self.cfg.num_rows * self.cfg.size[0], self.cfg.num_cols * self.cfg.size[1]

    def cell_of(self, name: str) -> int:
        """The column of sub-terrain ``name``."""
        names = list(self.cfg.sub_terrains)
        if name not in names:
            raise KeyError(f"no sub-terrain {name!r}; sub-terrains: {names}")
        return names.index(name)

    def surface(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The terrain's top surface [m] at world points (the heightfield's triangles and the boxes' tops)."""
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        hs = self.cfg.horizontal_scale
        ex, ey = self.extent
        fx = np.clip((x + 0.5 * ex) / hs, 0.0, self.heights.shape[0] - 1 - 1e-9)
        fy = np.clip((y + 0.5 * ey) / hs, 0.0, self.heights.shape[1] - 1 - 1e-9)
        i, j = np.floor(fx).astype(int), np.floor(fy).astype(int)
        u, v = fx - i, fy - j
        h = self.heights
        h00, h10, h01, h11 = h[i, j], h[i + 1, j], h[i, j + 1], h[i + 1, j + 1]
        # MuJoCo splits each cell along its (0,0)-(1,1) diagonal
        z = np.where(u >= v, h00 + u * (h10 - h00) + v * (h11 - h10), h00 + v * (h01 - h00) + u * (h11 - h01))
        inside = (np.abs(x) <= 0.5 * ex) & (np.abs(y) <= 0.5 * ey)
        z = np.where(inside, z, 0.0)
        for b in self.boxes:
            cover = (np.abs(x - b[0]) <= b[3] + 1e-9) & (np.abs(y - b[1]) <= b[4] + 1e-9)
            z = np.where(cover, np.maximum(z, b[2] + b[5]), z)
        return z

    def to_mjcf(self) -> str:
        """The terrain as one MJCF document: the heightfield asset, and a static body ``terrain`` with its geoms."""
        asset, body = self._mjcf_parts()
        head = '<mujoco model="terrain">\n  <asset>\n'
        return f"{head}{asset}\n  </asset>\n  <worldbody>\n{body}\n  </worldbody>\n</mujoco>\n"

    def _hfield_geometry(self) -> tuple[np.ndarray, float, float]:
        """Normalised elevation (MuJoCo's data order: rows along y), its height scale and base z."""
        zmin, zmax = float(self.heights.min()), float(self.heights.max())
        span = zmax - zmin
        data = (self.heights - zmin) / span if span > 0 else np.zeros_like(self.heights)
        return data.T, max(span, _EPS), zmin

    def _mjcf_parts(self) -> tuple[str, str]:
        cfg = self.cfg
        data, span, zmin = self._hfield_geometry()
        ex, ey = self.extent
        rows = "\n".join(" ".join(f"{v:.7g}" for v in row) for row in data[::-1])  # MJCF lists max y first
        asset = (
            f'    <hfield name="{HFIELD_NAME}" nrow="{data.shape[0]}" ncol="{data.shape[1]}" '
            f'size="{0.5 * ex:.9g} {0.5 * ey:.9g} {span:.9g} {cfg.border_height:.9g}" elevation="\n{rows}"/>'
        )
        common = f'group="{cfg.geom_group}" contype="1" conaffinity="1" friction="{_fmt(cfg.friction)}"'
        lines = [
            f'    <body name="{TERRAIN_BODY}">',
            f'      <geom name="{HFIELD_NAME}" type="hfield" hfield="{HFIELD_NAME}" pos="0 0 {zmin:.9g}" '
            f'rgba="{_fmt(cfg.rgba)}" {common}/>',
        ]
        for k, (b, cell) in enumerate(zip(self.boxes, self.box_cells, strict=True)):
            lines.append(
                f'      <geom name="terrain_box_{k}" type="box" pos="{_fmt(b[:3])}" size="{_fmt(b[3:])}" '
                f'rgba="{_fmt(_box_rgba(b, cell))}" {common}/>'
            )
        lines.append("    </body>")
        return asset, "\n".join(lines)

    def env_origins(
        self, num_envs: int, max_init_level: int | None = None, seed: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Initial ``(levels, types, origins)`` of ``num_envs`` envs: types by proportion, levels uniform.

        Types: each column gets ``round(proportion share * num_envs)`` consecutive envs (every column at least
        one when ``num_envs >= num_cols``); levels: uniform in ``[0, max_init_level]`` from ``seed`` (the
        generator's seed by default). Returns CPU tensors ``(n,)`` int64, ``(n,)`` int64, ``(n, 3)`` float32.
        """
        top = self.cfg.num_rows - 1 if max_init_level is None else min(int(max_init_level), self.cfg.num_rows - 1)
        rng = np.random.default_rng(self.cfg.seed if seed is None else seed)
        levels = rng.integers(0, top + 1, size=num_envs)
        types = np.repeat(np.arange(self.cfg.num_cols), _proportional_counts(num_envs, self._proportions()))
        origins = self.origins[levels, types].astype(np.float32)
        return torch.from_numpy(levels), torch.from_numpy(types), torch.from_numpy(origins)

    def _proportions(self) -> np.ndarray:
        p = np.array([s.proportion for s in self.cfg.sub_terrains.values()], dtype=np.float64)
        return p / p.sum()


def _fmt(values: Any) -> str:
    return " ".join(f"{float(v):.9g}" for v in values)


def _box_rgba(box: np.ndarray, cell: int) -> tuple[float, float, float, float]:
    if cell < 0:
        return (0.25, 0.25, 0.28, 1.0)
    t = float(np.clip(0.5 + (box[2] + box[5]) / 0.6, 0.0, 1.0))
    return (0.15 + 0.35 * t, 0.35 + 0.35 * t, 0.75, 1.0)


def _proportional_counts(n: int, p: np.ndarray) -> np.ndarray:
    """``n`` split by shares ``p`` (largest remainders; each share at least one when ``n >= len(p)``)."""
    k = len(p)
    base = np.ones(k, dtype=int) if n >= k else np.zeros(k, dtype=int)
    rest = n - int(base.sum())
    raw = p * rest
    counts = base + np.floor(raw).astype(int)
    left = n - int(counts.sum())
    order = np.argsort(-(raw - np.floor(raw)), kind="stable")
    counts[order[:left]] += 1
    return counts


def generate_terrain(cfg: TerrainGeneratorCfg) -> Terrain:
    """Build the grid of ``cfg``: every cell's heights and boxes, the border frame and the spawn origins.

    Cells are generated row by row, column by column, from one ``numpy`` generator seeded by ``cfg.seed``,
    so the same config gives the same terrain. Where cells meet, a shared heightfield sample takes the
    higher of the two (a box cell's lowered base stays under its own boxes).
    """
    rng = np.random.default_rng(cfg.seed)
    hs, (sx, sy) = cfg.horizontal_scale, cfg.size
    nrow, ncol = cfg.num_rows, cfg.num_cols
    cx, cy = round(sx / hs), round(sy / hs)
    heights = np.full((nrow * cx + 1, ncol * cy + 1), -np.inf)
    ex, ey = nrow * sx, ncol * sy
    boxes: list[np.ndarray] = []
    cells: list[np.ndarray] = []
    origins = np.zeros((nrow, ncol, 3))
    subs = list(cfg.sub_terrains.values())
    lx, ly = np.meshgrid(np.arange(cx + 1) * hs, np.arange(cy + 1) * hs, indexing="ij")
    for i in range(nrow):
        d = cfg.difficulty(i)
        for j, sub in enumerate(subs):
            cell = sub._make(d, (sx, sy), hs, rng)
            if cell.grid is not None:
                local = cell.grid
            elif cfg.box_terrains == "heightfield":
                local = _box_surface(cell.boxes, cell.base, lx, ly)
            else:
                local = np.full(lx.shape, cell.base)
            sl = (slice(i * cx, (i + 1) * cx + 1), slice(j * cy, (j + 1) * cy + 1))
            heights[sl] = np.maximum(heights[sl], local)
            corner = np.array([-0.5 * ex + i * sx, -0.5 * ey + j * sy, 0.0])
            if cell.grid is None:
                centre_z = float(_box_surface(cell.boxes, cell.base, np.array(0.5 * sx), np.array(0.5 * sy)))
            else:
                centre_z = float(cell.grid[cx // 2, cy // 2])
            origins[i, j] = corner + np.array([0.5 * sx, 0.5 * sy, centre_z])
            if cell.grid is None and cfg.box_terrains == "boxes" and len(cell.boxes):
                b = cell.boxes.copy()
                b[:, :2] += corner[:2]
                boxes.append(b)
                cells.append(np.full(len(b), i * ncol + j))
    if cfg.border_width > 0:
        frame = _frame(ex, ey, cfg.border_width, cfg.border_height)
        boxes.append(frame)
        cells.append(np.full(len(frame), -1))
    box_arr = np.concatenate(boxes) if boxes else np.zeros((0, 6))
    cell_arr = np.concatenate(cells) if cells else np.zeros(0, dtype=int)
    difficulty = np.array([cfg.difficulty(i) for i in range(nrow)])
    return Terrain(cfg, heights, box_arr, cell_arr.astype(int), origins, difficulty)


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


def add_terrain(model_xml: str, terrain: Terrain, *, floor: str = "floor") -> str:
    """``model_xml`` (MJCF text) with ``terrain`` in place of its world-body geom ``floor`` (if it has one).

    Sensors that named the floor geom as their reference (e.g. foot contact sensors) are pointed at the
    body ``terrain``, which holds every terrain geom. Returns the MJCF text.
    """
    import mujoco

    spec = mujoco.MjSpec.from_string(model_xml)
    for old in list(spec.worldbody.geoms):
        if old.name == floor:
            spec.delete(old)
    for sensor in spec.sensors:
        if sensor.reftype == mujoco.mjtObj.mjOBJ_GEOM and sensor.refname == floor:
            sensor.reftype, sensor.refname = mujoco.mjtObj.mjOBJ_BODY, TERRAIN_BODY
    cfg = terrain.cfg
    data, span, zmin = terrain._hfield_geometry()
    ex, ey = terrain.extent
    hf = spec.add_hfield(name=HFIELD_NAME, nrow=data.shape[0], ncol=data.shape[1])
    hf.size = [0.5 * ex, 0.5 * ey, span, cfg.border_height]
    hf.userdata = data.astype(np.float32).ravel().tolist()
    body = spec.worldbody.add_body(name=TERRAIN_BODY)

    def geom(**kw: Any) -> None:
        g = body.add_geom(**kw)
        g.group, g.contype, g.conaffinity = cfg.geom_group, 1, 1
        g.friction[:] = cfg.friction

    geom(name=HFIELD_NAME, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=HFIELD_NAME, pos=[0, 0, zmin], rgba=cfg.rgba)
    for k, (b, cell) in enumerate(zip(terrain.boxes, terrain.box_cells, strict=True)):
        geom(name=f"terrain_box_{k}", type=mujoco.mjtGeom.mjGEOM_BOX, pos=b[:3], size=b[3:], rgba=_box_rgba(b, cell))
    spec.compile()
    return spec.to_xml()


# ---------------------------------------------------------------------------------------------- the task part


@dataclass(frozen=True)
class TerrainCfg:
    """The terrain as a task part (put it in ``TaskCfg.sensors``): per-env levels, types and origins.

    The task's model must hold the same terrain (``add_terrain(xml, generate_terrain(generator))``: the same
    seed gives the same grid).

    Attributes:
        generator: The grid.
        max_init_level: Highest initial level (mjlab's Go1 rough: 5; ``None``: any row).
    """

    generator: TerrainGeneratorCfg
    max_init_level: int | None = 5

    def __post_init__(self) -> None:
        if not isinstance(self.generator, TerrainGeneratorCfg):
            _fail("TerrainCfg", "generator", "a TerrainGeneratorCfg", self.generator)
        m = self.max_init_level
        if m is not None and not (isinstance(m, int) and not isinstance(m, bool) and m >= 0):
            _fail("TerrainCfg", "max_init_level", "None or an int >= 0", m)

    def build(self, env: ManagerBasedEnv) -> TerrainState:
        """The terrain state of ``env``'s rows."""
        return TerrainState(generate_terrain(self.generator), env.num_envs, env.device, self.max_init_level)


class TerrainState:
    """Per-env terrain levels, types and origins on the device (a task "sensor": nothing to update per step).

    Attributes:
        terrain: The generated grid.
        levels, types: ``(n,)`` int64 each env's row and column.
        origins: ``(n, 3)`` each env's cell origin (reset events spawn relative to it).
        cell_origins: ``(num_rows, num_cols, 3)`` every cell's origin.
    """

    def __init__(self, terrain: Terrain, num_envs: int, device: torch.device | str, max_init_level: int | None) -> None:
        self.terrain = terrain
        levels, types, origins = terrain.env_origins(num_envs, max_init_level)
        self.levels, self.types, self.origins = levels.to(device), types.to(device), origins.to(device)
        self.cell_origins = torch.as_tensor(terrain.origins, dtype=torch.float32, device=device)
        self.num_rows = terrain.cfg.num_rows
        self._flat = self.cell_origins.view(-1, 3)

    def move(self, rows: torch.Tensor, up: torch.Tensor, down: torch.Tensor, u: torch.Tensor) -> None:
        """On ``rows``: level +1 where ``up``, -1 where ``down``; past the top: a random level (``u`` in [0, 1)).

        mjlab's rule: a level below 0 is clipped to 0, one at or past the last row is redrawn uniformly among
        the rows (so solved envs keep sampling the whole grid). Full width, no host read.
        """
        step = up.long() - (down & ~up).long()
        new = self.levels + step
        redrawn = (u * self.num_rows).long().clamp(max=self.num_rows - 1)
        new = torch.where(new >= self.num_rows, redrawn, new.clamp(min=0))
        self.levels.copy_(torch.where(rows, new, self.levels))
        cell = self.levels * self.terrain.cfg.num_cols + self.types
        self.origins.copy_(self._flat.index_select(0, cell))

    def histogram(self) -> torch.Tensor:
        """``(num_rows,)`` the share of envs on each level (on the device)."""
        counts = torch.zeros(self.num_rows, device=self.levels.device)
        counts.index_add_(0, self.levels, torch.ones_like(self.levels, dtype=counts.dtype))
        return counts / self.levels.numel()

    def update(self) -> None:
        """Nothing per step (levels move at resets)."""

    def reset(self, rows: torch.Tensor) -> None:
        """Nothing: the curriculum term moves levels (before the reset events read the origins)."""
