"""Rough terrain: a seeded grid of sub-terrains (difficulty by row) in one MJCF, with per-cell spawn origins.

The grid has ``num_rows`` levels (rows, along x; difficulty grows with the row) and one column per sub-terrain type
(along y; mjlab's curriculum layout), centred at the world origin. Every cell is rasterised into ONE MuJoCo
heightfield (``hfield``) covering the whole grid; the box terrains (stairs, random boxes) are also box geoms by
default (exact vertical faces), standing on the heightfield lowered to their base. A flat border frame of boxes
surrounds the grid.

- :class:`TerrainGeneratorCfg` and the sub-terrain configs (in :mod:`gym_graphreset.terrains.sub_terrains`,
  re-exported here) are frozen and validated; :data:`ROUGH_TERRAINS_CFG` is mjlab 1.6's rough set on them.
- :func:`generate_terrain` builds a :class:`Terrain` (heights, boxes, origins ``(rows, cols, 3)``) from a
  config, the same for the same seed.
- :meth:`Terrain.to_mjcf` writes the fragment; :func:`add_terrain` puts it into a robot's MJCF in place of
  its flat floor; :meth:`Terrain.env_origins` places envs by ``(level, type)`` cell.
- :class:`TerrainCfg` is the terrain as a task part (in ``TaskCfg.sensors``): per-env levels, types and
  origins on the device (a :class:`~gym_graphreset.terrains.terrain_state.TerrainState`), moved by
  :func:`~gym_graphreset.mdp.terrain_levels.terrain_levels_vel`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from gym_graphreset.terrains.checks import (
    EPS,
    check_int,
    check_literal,
    check_non_negative,
    check_positive,
    check_range,
    fail,
    finite,
)
from gym_graphreset.terrains.sub_terrains import (
    FlatTerrainCfg,
    PyramidSlopeTerrainCfg,
    PyramidStairsTerrainCfg,
    RandomRoughTerrainCfg,
    SubTerrain,
    SubTerrainCfg,
    WaveTerrainCfg,
)
from gym_graphreset.terrains.terrain_state import TerrainState

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = [
    "ROUGH_TERRAINS_CFG",
    "Terrain",
    "TerrainCfg",
    "TerrainGeneratorCfg",
    "add_terrain",
    "check_model_terrain",
    "generate_terrain",
]

TERRAIN_BODY = "terrain"
"""The static body holding every terrain geom (contact sensors and rays may name it)."""
HFIELD_NAME = "terrain_hfield"
"""The name of the heightfield asset and of its geom."""
GENERATOR_TEXT = "terrain_generator"
"""The MJCF custom text holding the generator config a terrain was built from (field by field, JSON)."""


_LEVEL_STREAM = 0x7E7A
"""The counter-RNG stream of the initial terrain levels."""
_GOLDEN = (5**0.5 - 1) / 2
"""The golden ratio's fractional part: a low-discrepancy sequence spreads the types by proportion."""

_MAX_BOXES = 20_000
"""The most box geoms one sub-terrain column may have (each is a geom of the model, every ray and contact test
walks them): mjlab's rough set has 660 in all."""

_MAX_SAMPLES = 2**26
"""The most height samples a generated terrain may have (about 67M: 256 MB of float32 heights)."""


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
            fail(where, "sub_terrains", "a non-empty {name: sub-terrain config}", subs)
        for name, sub in subs.items():
            if not isinstance(sub, SubTerrainCfg):
                fail(where, f"sub_terrains[{name!r}]", "a sub-terrain config (e.g. FlatTerrainCfg())", sub)
        if not (isinstance(self.size, (tuple, list)) and len(self.size) == 2 and all(finite(s) for s in self.size)):
            fail(where, "size", "an (x, y) pair of finite numbers", self.size)
        check_positive(where, "horizontal_scale", self.horizontal_scale)
        step = 2.0 * self.horizontal_scale
        if any(s <= 0 or abs(s / step - round(s / step)) > 1e-6 for s in self.size):
            fail(where, "size", f"positive multiples of 2 * horizontal_scale ({step:g})", self.size)
        for name, sub in subs.items():
            if problem := sub.size_problem((self.size[0], self.size[1]), self.horizontal_scale):
                raise ValueError(f"{where}: sub_terrains[{name!r}] on cells of size {tuple(self.size)}: {problem}")
        check_int(where, "num_rows", self.num_rows, 1)
        check_range(where, "difficulty_range", self.difficulty_range, 0.0, 1.0)
        check_non_negative(where, "border_width", self.border_width)
        check_positive(where, "border_height", self.border_height)
        check_int(where, "seed", self.seed, 0)
        check_literal(where, "box_terrains", self.box_terrains, ("boxes", "heightfield"))
        check_int(where, "geom_group", self.geom_group, 0, 5)
        if not (len(self.friction) == 3 and all(finite(f) and f >= 0 for f in self.friction)):
            fail(where, "friction", "3 finite numbers >= 0", self.friction)
        if not (len(self.rgba) == 4 and all(finite(c) and 0 <= c <= 1 for c in self.rgba)):
            fail(where, "rgba", "4 numbers in [0, 1]", self.rgba)
        per_cell = (self.size[0] / self.horizontal_scale) * (self.size[1] / self.horizontal_scale)
        if (samples := self.num_rows * self.num_cols * per_cell) > _MAX_SAMPLES:
            text = f"a grid of at most {_MAX_SAMPLES:,} height samples over every cell (this one: {samples:,.0f})"
            fail(where, "size", text, self.size)
        for name, sub in subs.items():  # counted, not generated
            count, field_name = sub.max_boxes((self.size[0], self.size[1]))
            if (boxes := self.num_rows * count) > _MAX_BOXES:
                raise ValueError(
                    f"{where}: sub_terrains[{name!r}] gives {count:,} boxes per cell, {boxes:,} over its "
                    f"{self.num_rows} rows; at most {_MAX_BOXES:,} terrain boxes are accepted (set by its "
                    f"`{field_name}`)"
                )

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
        "wave_terrain": WaveTerrainCfg(proportion=0.1),
    },
)
"""mjlab 1.6's ``ROUGH_TERRAINS_CFG`` on this generator (8 m cells, 10 levels, 20 m border): the same seven
sub-terrains, names and proportions."""


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
        from xml.sax.saxutils import quoteattr

        asset, body = self._mjcf_parts()
        head = '<mujoco model="terrain">\n  <asset>\n'
        kept = quoteattr(_generator_json(self.cfg))
        text = f'  <custom>\n    <text name="{GENERATOR_TEXT}" data={kept}/>\n  </custom>\n'
        return f"{head}{asset}\n  </asset>\n{text}  <worldbody>\n{body}\n  </worldbody>\n</mujoco>\n"

    def _hfield_geometry(self) -> tuple[np.ndarray, float, float]:
        """Normalised elevation (MuJoCo's data order: rows along y), its height scale and base z."""
        zmin, zmax = float(self.heights.min()), float(self.heights.max())
        span = zmax - zmin
        data = (self.heights - zmin) / span if span > 0 else np.zeros_like(self.heights)
        return data.T, max(span, EPS), zmin

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
        self, num_envs: int, max_init_level: int | None = None, seed: int | None = None, *, first_env: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Initial ``(levels, types, origins)`` of the envs of global indices ``first_env .. + num_envs - 1``.

        Each env's level and type are a function of its global index alone (and ``seed``), so ranks that
        split one population (``global_env_offset``) place their envs as one process placing them all does.
        Types: envs ``0 .. num_cols - 1`` take one column each, the next ones follow the proportions (a
        golden-ratio sequence over the cumulative shares: every prefix of the population is within a few
        envs of them). Levels: uniform in ``[0, max_init_level]``, a counter-based draw keyed by ``seed``
        (the generator's by default) and the index. Returns CPU tensors ``(n,)`` int64, ``(n,)`` int64,
        ``(n, 3)`` float32.
        """
        from gym_graphreset.core.rng import counter_uniform

        check_int("Terrain.env_origins", "num_envs", num_envs, 1)
        check_int("Terrain.env_origins", "max_init_level", max_init_level, 0, optional=True)
        check_int("Terrain.env_origins", "seed", seed, 0, optional=True)
        check_int("Terrain.env_origins", "first_env", first_env, 0)
        top = self.cfg.num_rows - 1 if max_init_level is None else min(max_init_level, self.cfg.num_rows - 1)
        ids = torch.arange(first_env, first_env + num_envs, dtype=torch.int64)
        key = torch.tensor(self.cfg.seed if seed is None else seed, dtype=torch.int64)
        u = counter_uniform(key, ids, torch.zeros_like(ids), 1, stream=_LEVEL_STREAM, dtype=torch.float64)[:, 0]
        levels = (u * (top + 1)).long().clamp(max=top).numpy()
        cols = self.cfg.num_cols
        rest = ids.numpy() - cols + 1
        share = np.mod(rest.astype(np.float64) * _GOLDEN, 1.0)
        cum = np.cumsum(self._proportions())
        by_share = np.minimum(np.searchsorted(cum, share, side="right"), cols - 1)
        types = np.where(ids.numpy() < cols, ids.numpy(), by_share).astype(np.int64)
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


def add_terrain(model_xml: str, terrain: Terrain, *, floor: str | None = "floor") -> str:
    """``model_xml`` (MJCF text) with ``terrain`` in place of its world-body geom ``floor``.

    Sensors that named the floor geom as their reference (e.g. foot contact sensors) are pointed at the
    body ``terrain``, which holds every terrain geom. ``floor=None``: the model has no floor to replace. The
    generator config is kept in the model (a custom text), so a task's
    :class:`TerrainCfg` is checked against it field by field. Returns the MJCF text.

    Raises:
        ValueError: the model has no world-body geom ``floor`` (a plane left over the terrain would hide it).
    """
    import mujoco

    if floor is not None and not isinstance(floor, str):
        raise ValueError(f"add_terrain: `floor` must be a geom name or None, got {floor!r}")
    spec = mujoco.MjSpec.from_string(model_xml)
    if floor is not None:
        found = [g for g in spec.worldbody.geoms if g.name == floor]
        if not found:
            names = [g.name for g in spec.worldbody.geoms if g.name]
            raise ValueError(
                f"add_terrain: `floor` {floor!r} is no geom of the model's world body (its named world geoms: "
                f"{names}); name the floor geom the terrain replaces, or pass floor=None for a model without one"
            )
        for old in found:
            spec.delete(old)
    for sensor in spec.sensors:
        if floor is not None and sensor.reftype == mujoco.mjtObj.mjOBJ_GEOM and sensor.refname == floor:
            sensor.reftype, sensor.refname = mujoco.mjtObj.mjOBJ_BODY, TERRAIN_BODY
    spec.add_text(name=GENERATOR_TEXT, data=_generator_json(terrain.cfg))
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


def _plain(value: Any) -> Any:
    """A config value as JSON data: dataclasses by type and field, mappings by key, sequences as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"type": type(value).__name__, **fields}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value


def _generator_json(cfg: TerrainGeneratorCfg) -> str:
    """The generator config field by field, as JSON (kept in the model by :func:`add_terrain`)."""
    return json.dumps({f.name: _plain(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)})


def check_model_terrain(mjm: Any, terrain: Terrain, where: str) -> None:
    """Refuse a model whose built-in terrain is not ``terrain`` (another generator config), naming what differs.

    The generator config kept in the model (:func:`add_terrain`, :meth:`Terrain.to_mjcf`) is compared field by
    field; the heightfield (samples, size, elevation) and the terrain boxes are compared too, so a model
    edited by hand or built from another grid is refused as well: spawns would point at cells that are not
    there, metres above or inside the ground.
    """
    import mujoco

    fix = "build the model from the same config: add_terrain(xml, generate_terrain(generator))"
    tid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_TEXT, GENERATOR_TEXT)
    if tid >= 0:
        adr, size = int(mjm.text_adr[tid]), int(mjm.text_size[tid])
        raw = bytes(mjm.text_data[adr : adr + size]).split(b"\0", 1)[0].decode()
        built, ours = json.loads(raw), json.loads(_generator_json(terrain.cfg))
        for name, value in ours.items():
            if built.get(name) != value:
                raise ValueError(
                    f"{where}: `generator.{name}` is {value!r}, but the model's terrain was built with "
                    f"{built.get(name)!r}; {fix}"
                )
    hid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_HFIELD, HFIELD_NAME)
    if hid < 0:
        raise ValueError(f"{where}: the model holds no terrain (no heightfield {HFIELD_NAME!r}); {fix}")
    data, span, _ = terrain._hfield_geometry()
    ex, ey = terrain.extent
    nrow, ncol = int(mjm.hfield_nrow[hid]), int(mjm.hfield_ncol[hid])
    ours_size = np.array([0.5 * ex, 0.5 * ey, span, terrain.cfg.border_height])
    problem = None
    if (nrow, ncol) != data.shape:
        problem = f"the model's heightfield has {nrow} x {ncol} samples, the generator's {data.shape}"
    elif not np.allclose(mjm.hfield_size[hid], ours_size, rtol=1e-5, atol=1e-6):
        built_size = mjm.hfield_size[hid].tolist()
        problem = f"the model's heightfield size is {built_size}, the generator's {ours_size.tolist()}"
    else:
        adr = int(mjm.hfield_adr[hid])
        elevation = np.asarray(mjm.hfield_data[adr : adr + nrow * ncol]).reshape(nrow, ncol)
        if not np.allclose(elevation, data, atol=1e-4):
            problem = "the model's heightfield elevation differs from the generator's"
    if problem is None:
        names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(mjm.ngeom)]
        boxes = [g for g, n in enumerate(names) if n.startswith("terrain_box_")]
        if len(boxes) != len(terrain.boxes):
            problem = f"the model has {len(boxes)} terrain boxes, the generator {len(terrain.boxes)}"
        elif boxes and not (
            np.allclose(mjm.geom_pos[boxes], terrain.boxes[:, :3], atol=1e-5)
            and np.allclose(mjm.geom_size[boxes], terrain.boxes[:, 3:], atol=1e-5)
        ):
            problem = "the model's terrain boxes lie elsewhere than the generator's"
    if problem is not None:
        raise ValueError(f"{where}: the model's terrain is not the one `generator` makes: {problem}; {fix}")


# ---------------------------------------------------------------------------------------------- the task part


@dataclass(frozen=True)
class TerrainCfg:
    """The terrain as a task part (put it in ``TaskCfg.sensors``): per-env levels, types and origins.

    The task's model must hold the same terrain: ``add_terrain(xml, generate_terrain(generator))`` (same
    config); another one (more rows, another seed...) is refused when the env is built, naming the field.

    Attributes:
        generator: The grid.
        max_init_level: Highest initial level (mjlab's Go1 rough: 5; ``None``: any row).
    """

    generator: TerrainGeneratorCfg
    max_init_level: int | None = 5

    def __post_init__(self) -> None:
        if not isinstance(self.generator, TerrainGeneratorCfg):
            fail("TerrainCfg", "generator", "a TerrainGeneratorCfg", self.generator)
        check_int("TerrainCfg", "max_init_level", self.max_init_level, 0, optional=True)

    def build(self, env: ManagerBasedEnv) -> TerrainState:
        """The terrain state of ``env``'s rows; refused when ``env``'s model holds another terrain."""
        terrain = generate_terrain(self.generator)
        check_model_terrain(env.mjm, terrain, "TerrainCfg")
        first = int(env.keys.env_ids[0].item()) if env.num_envs else 0  # the global env offset (construction)
        return TerrainState(terrain, env.num_envs, env.device, self.max_init_level, first_env=first)


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
