"""A height scan: a grid of rays under a body cast down with MuJoCo Warp's public ``rays``, full width.

:class:`RayCastSensorCfg` is mjlab's ``RayCastSensorCfg`` with a ``GridPatternCfg`` (1.6 m x 1.0 m at
0.1 m: 17 x 11 = 187 rays, yaw-aligned, 5 m range, terrain geoms only). Every buffer (ray origins and
directions, distances, hit geoms, normals) is a warp array allocated once and read by torch zero-copy
(``wp.to_torch``); a scan launches one ``mujoco_warp.rays`` over all worlds and reads nothing on the host,
so it runs inside the captured step. The scan is computed on demand, once per step phase (the policy and
critic groups share it), so an observation made right after a reset sees the new pose.

:func:`height_scan` is the observation term (mjlab's convention: the body's height minus each hit's height,
``max_distance`` where a ray misses); noise, clip and scale come from its ``ObsTerm``, e.g. mjlab's
``ObsTerm(mdp.height_scan, {"sensor_name": "terrain_scan"}, noise=UniformNoise(-0.1, 0.1), scale=1 / 5.0)``.
:func:`terrain_normal` fits a plane to a scan's hits (mjlab's ``terrain_normal_from_sensors``).

:class:`TerrainHeightSensorCfg` is mjlab's ``TerrainHeightSensorCfg`` with a ``RingPatternCfg``: a few rays
around each foot site, cast down against the terrain, reduced to one clearance per foot (the site's height
above the terrain under it). The foot terms of a rough task read it in place of the site's world height.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch

from gym_graphreset.tasks.binding import reads_sensors
from gym_graphreset.tasks.mdp import math as M

if TYPE_CHECKING:
    from gym_graphreset.tasks.env import ManagerBasedEnv

__all__ = [
    "RayCastSensor",
    "RayCastSensorCfg",
    "TerrainHeightSensor",
    "TerrainHeightSensorCfg",
    "grid_pattern",
    "height_scan",
    "ring_pattern",
    "terrain_height",
    "terrain_normal",
]


def grid_pattern(size: tuple[float, float], resolution: float) -> torch.Tensor:
    """The grid of mjlab's ``GridPatternCfg``: ``(n_rays, 3)`` offsets in the body frame, x fastest."""
    sx, sy = size
    x = torch.arange(-sx / 2, sx / 2 + resolution * 0.5, resolution, dtype=torch.float32)
    y = torch.arange(-sy / 2, sy / 2 + resolution * 0.5, resolution, dtype=torch.float32)
    gx, gy = torch.meshgrid(x, y, indexing="xy")
    out = torch.zeros(gx.numel(), 3)
    out[:, 0], out[:, 1] = gx.flatten(), gy.flatten()
    return out


@dataclass(frozen=True)
class RayCastSensorCfg:
    """A grid of rays cast straight down from a body (mjlab's ``RayCastSensorCfg`` + ``GridPatternCfg``).

    Attributes:
        body: The body the grid follows (e.g. ``"trunk"``).
        size: (x, y) extent of the grid [m].
        resolution: Spacing of the rays [m].
        max_distance: Hits farther than this count as misses [m].
        alignment: ``"yaw"``: the grid turns with the body's heading, rays stay vertical (mjlab's velocity
            task); ``"base"``: grid and rays follow the body's full orientation; ``"world"``: fixed axes.
        geom_group: Cast only against geoms of this MuJoCo group (the terrain's: ``TerrainGeneratorCfg.geom_group``),
            or ``None``: every geom except the body's own.
        exclude_body: Ignore the body's own geoms.
    """

    body: str
    size: tuple[float, float] = (1.6, 1.0)
    resolution: float = 0.1
    max_distance: float = 5.0
    alignment: Literal["yaw", "base", "world"] = "yaw"
    geom_group: int | None = 2
    exclude_body: bool = True

    def __post_init__(self) -> None:
        where = "RayCastSensorCfg"
        if not (isinstance(self.body, str) and self.body):
            raise ValueError(f"{where}: `body` must be a body name, got {self.body!r}")
        ok = isinstance(self.size, (tuple, list)) and len(self.size) == 2
        if not (ok and all(isinstance(s, (int, float)) and s >= 0 for s in self.size)):
            raise ValueError(f"{where}: `size` must be an (x, y) pair of numbers >= 0, got {self.size!r}")
        for name in ("resolution", "max_distance"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")):
                raise ValueError(f"{where}: `{name}` must be a finite number > 0, got {v!r}")
        if self.alignment not in ("yaw", "base", "world"):
            raise ValueError(f"{where}: `alignment` must be 'yaw', 'base' or 'world', got {self.alignment!r}")
        g = self.geom_group
        if g is not None and not (isinstance(g, int) and not isinstance(g, bool) and 0 <= g <= 5):
            raise ValueError(f"{where}: `geom_group` must be None or an int in [0, 5], got {g!r}")

    @property
    def num_rays(self) -> int:
        """Rays in the grid."""
        return grid_pattern(self.size, self.resolution).shape[0]

    def build(self, env: ManagerBasedEnv) -> RayCastSensor:
        """The sensor's buffers for ``env``."""
        return RayCastSensor(self, env)


def _check_geom_group(env: ManagerBasedEnv, group: int | None, where: str) -> None:
    """Refuse a ``geom_group`` no geom of the model is in: every ray would miss, silently."""
    if group is None:
        return
    groups = sorted({int(g) for g in env.mjm.geom_group})
    if group not in groups:
        raise ValueError(
            f"{where}: no geom of the model is in `geom_group` {group}, so every ray would miss; "
            f"its geoms are in groups {groups} (the terrain's: TerrainGeneratorCfg.geom_group)"
        )


class _Rays:
    """What both sensors share: their warp buffers (set by each) and one ``mujoco_warp.rays`` launch over them."""

    env: ManagerBasedEnv
    _pnt: Any
    _vec: Any
    _geomgroup: Any
    _bodyexclude: Any
    _dist: Any
    _geomid: Any
    _normal: Any

    def _launch(self) -> None:
        import mujoco_warp as mjw

        env = self.env
        mjw.rays(
            env.m,
            env.d,
            self._pnt,
            self._vec,
            self._geomgroup,
            True,
            self._bodyexclude,
            self._dist,
            self._geomid,
            self._normal,
        )


class RayCastSensor(_Rays):
    """The buffers of a :class:`RayCastSensorCfg` and its cast (see the module docstring).

    Attributes:
        offsets: ``(n_rays, 3)`` the grid in the body frame.
        origins: ``(n, n_rays, 3)`` this scan's ray origins (world), a view of the warp input.
        distances: ``(n, n_rays)`` hit distances (-1: no hit), a view of the warp output.
        geom_ids: ``(n, n_rays)`` the geom each ray hit (-1: none).
    """

    def __init__(self, cfg: RayCastSensorCfg, env: ManagerBasedEnv) -> None:
        import warp as wp

        self.cfg, self.env = cfg, env
        n, dev = env.num_envs, env.device
        _check_geom_group(env, cfg.geom_group, "RayCastSensorCfg")
        self.body_id = env.body_id(cfg.body)
        self.offsets = grid_pattern(cfg.size, cfg.resolution).to(dev)
        k = self.offsets.shape[0]
        wdev = env.wp_device
        self._pnt = wp.zeros((n, k), dtype=wp.vec3, device=wdev)
        self._vec = wp.zeros((n, k), dtype=wp.vec3, device=wdev)
        self._dist = wp.zeros((n, k), dtype=wp.float32, device=wdev)
        self._geomid = wp.zeros((n, k), dtype=wp.int32, device=wdev)
        self._normal = wp.zeros((n, k), dtype=wp.vec3, device=wdev)
        exclude = self.body_id if cfg.exclude_body else -1
        self._bodyexclude = wp.full(k, exclude, dtype=wp.int32, device=wdev)
        mask = [-1.0] * 6 if cfg.geom_group is None else [1.0 if g == cfg.geom_group else 0.0 for g in range(6)]
        self._geomgroup = wp.types.vector(length=6, dtype=wp.float32)(*mask)
        self.origins = wp.to_torch(self._pnt)
        self.directions = wp.to_torch(self._vec)
        self.distances = wp.to_torch(self._dist)
        self.geom_ids = wp.to_torch(self._geomid)
        self._down = torch.tensor([0.0, 0.0, -1.0], device=dev).expand(n * k, 3).contiguous()
        self.directions.copy_(self._down.view(n, k, 3))
        self._xquat = wp.to_torch(env.d.xquat)
        self._heights = torch.zeros(n, k, device=dev)
        self._hits = torch.zeros(n, k, 3, device=dev)
        self._hit = torch.zeros(n, k, dtype=torch.bool, device=dev)

    @property
    def num_rays(self) -> int:
        """Rays per world."""
        return int(self.offsets.shape[0])

    def _cast(self) -> torch.Tensor:
        """Place the rays at the body's pose, cast them over all worlds, return ``body z - hit z``."""
        env, cfg = self.env, self.cfg
        pos = env.xpos[:, self.body_id]
        quat = self._xquat[:, self.body_id]
        n, k = env.num_envs, self.num_rays
        offsets = self.offsets.expand(n, k, 3)
        if cfg.alignment == "yaw":
            q = M.yaw_quat(M.heading(quat))
            offsets = M.quat_rotate(q.repeat_interleave(k, 0), offsets.reshape(-1, 3)).view(n, k, 3)
        elif cfg.alignment == "base":
            qk = quat.repeat_interleave(k, 0)
            offsets = M.quat_rotate(qk, offsets.reshape(-1, 3)).view(n, k, 3)
            self.directions.copy_(M.quat_rotate(qk, self._down).view(n, k, 3))
        self.origins.copy_(pos.unsqueeze(1) + offsets)
        env.runtime.run(f"ray_cast:{cfg.body}:{id(self)}", self._launch)
        self._hits.copy_(self.origins + self.distances.unsqueeze(-1) * self.directions)
        self._hit.copy_((self.distances >= 0.0) & (self.distances <= cfg.max_distance))
        self._heights.copy_(torch.where(self._hit, pos[:, 2:3] - self._hits[..., 2], cfg.max_distance))
        return self._heights

    def heights(self) -> torch.Tensor:
        """``(n, n_rays)`` the body's height above each hit (``max_distance`` on a miss), once per step phase."""
        return self.env.cached(("ray_cast", id(self)), self._cast)

    def hits(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(n, n_rays, 3)`` the world points the rays hit, and ``(n, n_rays)`` which rays hit (this phase's)."""
        self.heights()
        return self._hits, self._hit

    def update(self) -> None:
        """Nothing: the scan is cast on demand (:meth:`heights`)."""

    def reset(self, rows: torch.Tensor) -> None:
        """Nothing: a scan holds no per-episode state."""


@reads_sensors(sensor_name=RayCastSensor)
def height_scan(env: ManagerBasedEnv, sensor_name: str, offset: float = 0.0) -> torch.Tensor:
    """Sensor ``sensor_name``'s scan: body height minus hit height per ray, minus ``offset``, ``(n, n_rays)``."""
    h = _height_scan_sensor(env, sensor_name, "height_scan").heights()
    return h - offset if offset else h


def _height_scan_sensor(env: ManagerBasedEnv, sensor_name: str, where: str) -> RayCastSensor:
    sensor = env.sensors[sensor_name]
    if not isinstance(sensor, RayCastSensor):
        raise TypeError(f"{where}: sensor {sensor_name!r} is a {type(sensor).__name__}, not a RayCastSensor")
    return sensor


@reads_sensors(sensor_name=RayCastSensor)
def terrain_normal(env: ManagerBasedEnv, sensor_name: str, max_points: int = 32) -> torch.Tensor:
    """The terrain's upward normal under a scan, ``(n, 3)``: a plane fitted to ``max_points`` of its hits.

    mjlab's ``terrain_normal_from_sensors`` for one sensor: evenly spaced rays (``linspace`` over the grid)
    when it has more, :func:`~gym_graphreset.tasks.mdp.math.fit_plane_normal` of their hits; ``(0, 0, 1)``
    where too few rays hit or the hits lie on a line.
    """
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 3:
        raise ValueError(
            f"terrain_normal: `max_points` must be an int >= 3 (a plane needs 3 points), got {max_points!r}"
        )
    sensor = _height_scan_sensor(env, sensor_name, "terrain_normal")

    def compute() -> torch.Tensor:
        points, hit = sensor.hits()
        k = points.shape[1]
        if k > max_points:
            idx = env.constant(
                ("scan_subsample", k, max_points),
                lambda: torch.linspace(0, k - 1, max_points, device=points.device).long(),
            )
            points, hit = points[:, idx], hit[:, idx]
        return M.fit_plane_normal(points, hit)

    return env.cached(("terrain_normal", sensor_name, max_points), compute)


def ring_pattern(radius: float, num_samples: int) -> torch.Tensor:
    """Ring rays as mjlab's ``RingPatternCfg.single_ring``: the centre, then ``num_samples`` around, ``(1 + m, 3)``."""
    angles = 2.0 * math.pi * torch.arange(num_samples, dtype=torch.float64) / num_samples
    ring = torch.stack((radius * torch.cos(angles), radius * torch.sin(angles), torch.zeros_like(angles)), dim=-1)
    return torch.cat((torch.zeros(1, 3, dtype=torch.float64), ring)).float()


@dataclass(frozen=True)
class TerrainHeightSensorCfg:
    """Each site's clearance above the terrain under it (mjlab's ``TerrainHeightSensorCfg`` on a ring pattern).

    Attributes:
        sites: The frames (e.g. the feet's sites); one clearance each.
        radius, num_samples: The ring of rays around each site (plus one at its centre), yaw-aligned with
            the site (mjlab's ``RingPatternCfg.single_ring``; Go1: 0.04 m, 4; G1: 0.03 m, 6).
        max_distance: Rays reach this far [m]; a ray that misses counts as ``max_distance``, a site whose
            rays all miss as its own height clamped to ``[0, max_distance]``.
        geom_group: Cast only against geoms of this MuJoCo group (the terrain's), or ``None``: any geom but
            the site's own body's.
        reduction: How a site's rays become one clearance: ``"min"`` (mjlab's default: the nearest ground),
            ``"max"`` or ``"mean"``.
    """

    sites: tuple[str, ...]
    radius: float = 0.04
    num_samples: int = 4
    max_distance: float = 1.0
    geom_group: int | None = 2
    reduction: Literal["min", "max", "mean"] = "min"

    def __post_init__(self) -> None:
        where = "TerrainHeightSensorCfg"
        if not (isinstance(self.sites, tuple) and self.sites and all(isinstance(x, str) for x in self.sites)):
            raise ValueError(f"{where}: `sites` must be a non-empty tuple of site names, got {self.sites!r}")
        r = self.radius
        if not (isinstance(r, (int, float)) and not isinstance(r, bool) and 0 <= r < float("inf")):
            raise ValueError(f"{where}: `radius` must be a finite number >= 0, got {r!r}")
        n = self.num_samples
        if not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
            raise ValueError(f"{where}: `num_samples` must be an int >= 0, got {n!r}")
        d = self.max_distance
        if not (isinstance(d, (int, float)) and not isinstance(d, bool) and 0 < d < float("inf")):
            raise ValueError(f"{where}: `max_distance` must be a finite number > 0, got {d!r}")
        g = self.geom_group
        if g is not None and not (isinstance(g, int) and not isinstance(g, bool) and 0 <= g <= 5):
            raise ValueError(f"{where}: `geom_group` must be None or an int in [0, 5], got {g!r}")
        if self.reduction not in ("min", "max", "mean"):
            raise ValueError(f"{where}: `reduction` must be 'min', 'max' or 'mean', got {self.reduction!r}")

    def build(self, env: ManagerBasedEnv) -> TerrainHeightSensor:
        """The sensor's buffers for ``env``."""
        return TerrainHeightSensor(self, env)


class TerrainHeightSensor(_Rays):
    """The rays of a :class:`TerrainHeightSensorCfg` and its clearances, cast on demand once per step phase.

    Attributes:
        offsets: ``(r, 3)`` the ring around a site (site frame, yaw only).
        distances: ``(n, f * r)`` hit distances (-1: no hit), a view of the warp output; site-major.
    """

    def __init__(self, cfg: TerrainHeightSensorCfg, env: ManagerBasedEnv) -> None:
        import warp as wp

        self.cfg, self.env = cfg, env
        n, dev, wdev = env.num_envs, env.device, env.wp_device
        _check_geom_group(env, cfg.geom_group, "TerrainHeightSensorCfg")
        try:
            self.site_ids = env.site_ids(cfg.sites)
        except ValueError as exc:
            sites = [env.mjm.site(i).name for i in range(env.mjm.nsite)]
            raise ValueError(f"TerrainHeightSensorCfg: {exc}; the model's sites: {sites}") from exc
        self.offsets = ring_pattern(cfg.radius, cfg.num_samples).to(dev)
        f, r = len(cfg.sites), self.offsets.shape[0]
        self._shape = (n, f, r)
        self._pnt = wp.zeros((n, f * r), dtype=wp.vec3, device=wdev)
        self._vec = wp.zeros((n, f * r), dtype=wp.vec3, device=wdev)
        self._dist = wp.zeros((n, f * r), dtype=wp.float32, device=wdev)
        self._geomid = wp.zeros((n, f * r), dtype=wp.int32, device=wdev)
        self._normal = wp.zeros((n, f * r), dtype=wp.vec3, device=wdev)
        bodies = [int(b) for b in env.site_body_ids(cfg.sites).tolist() for _ in range(r)]  # each ray's own foot
        self._bodyexclude = wp.array(bodies, dtype=wp.int32, device=wdev)
        mask = [-1.0] * 6 if cfg.geom_group is None else [1.0 if g == cfg.geom_group else 0.0 for g in range(6)]
        self._geomgroup = wp.types.vector(length=6, dtype=wp.float32)(*mask)
        self.origins = wp.to_torch(self._pnt).view(n, f, r, 3)
        self.distances = wp.to_torch(self._dist)
        self._normals = wp.to_torch(self._normal).view(n, f, r, 3)
        wp.to_torch(self._vec).copy_(torch.tensor([0.0, 0.0, -1.0], device=dev).expand(n, f * r, 3))
        self._site_xmat = wp.to_torch(env.d.site_xmat)
        self._heights = torch.zeros(n, f, device=dev)

    def _cast(self) -> torch.Tensor:
        env, cfg = self.env, self.cfg
        n, f, r = self._shape
        pos = env.site_xpos[:, self.site_ids]  # (n, f, 3)
        xmat = self._site_xmat[:, self.site_ids].reshape(n, f, 9)  # row-major 3 x 3
        yaw = torch.atan2(xmat[..., 3], xmat[..., 0])  # the site's x axis, projected on the ground
        c, s = torch.cos(yaw).unsqueeze(-1), torch.sin(yaw).unsqueeze(-1)
        ox, oy = self.offsets[:, 0], self.offsets[:, 1]
        ring = torch.stack((c * ox - s * oy, s * ox + c * oy, torch.zeros(n, f, r, device=pos.device)), dim=-1)
        self.origins.copy_(pos.unsqueeze(2) + ring)
        env.runtime.run(f"terrain_height:{id(self)}", self._launch)
        dist = self.distances.view(n, f, r)
        site_z = pos[..., 2:3]
        clearance = torch.where(self._normals[..., 2] < 0.0, 0.0, site_z - (self.origins[..., 2] - dist))
        miss = (dist < 0.0) | (dist > cfg.max_distance)
        all_miss = miss.all(dim=-1, keepdim=True)
        fallback = torch.where(all_miss, site_z.clamp(0.0, cfg.max_distance), cfg.max_distance)
        heights = torch.where(miss, fallback, clearance)
        if cfg.reduction == "min":
            reduced = heights.amin(dim=-1)
        elif cfg.reduction == "max":
            reduced = heights.amax(dim=-1)
        else:
            reduced = heights.mean(dim=-1)
        self._heights.copy_(reduced)
        return self._heights

    def heights(self) -> torch.Tensor:
        """``(n, f)`` each site's clearance above the terrain (see the cfg), once per step phase."""
        return self.env.cached(("terrain_height", id(self)), self._cast)

    def update(self) -> None:
        """Nothing: the rays are cast on demand (:meth:`heights`)."""

    def reset(self, rows: torch.Tensor) -> None:
        """Nothing: it holds no per-episode state."""


@reads_sensors(sensor_name=TerrainHeightSensor)
def terrain_height(env: ManagerBasedEnv, sensor_name: str) -> torch.Tensor:
    """Sensor ``sensor_name``'s clearances (a :class:`TerrainHeightSensorCfg`), ``(n, f)``: mjlab's ``foot_height``."""
    sensor = env.sensors[sensor_name]
    if not isinstance(sensor, TerrainHeightSensor):
        raise TypeError(
            f"terrain_height: sensor {sensor_name!r} is a {type(sensor).__name__}, not a TerrainHeightSensor"
        )
    return sensor.heights()
