"""A height scan: a grid of rays under a body cast down with MuJoCo Warp's public ``rays``, full width.

:class:`RayCastSensorCfg` is mjlab's ``RayCastSensorCfg`` with a ``GridPatternCfg`` (1.6 m x 1.0 m at
0.1 m: 17 x 11 = 187 rays, yaw-aligned, 5 m range, terrain geoms only). Every buffer (ray origins and
directions, distances, hit geoms, normals) is a warp array allocated once and read by torch zero-copy
(``wp.to_torch``); a scan launches one ``mujoco_warp.rays`` over all worlds, walking a bounding-volume
hierarchy of the group's geoms (:func:`~gym_graphreset.mdp.rays.ray_context`, as mjlab's sensor does),
and reads nothing on the host, so it runs inside the captured step. The scan is computed on demand, once
per step phase (the policy and critic groups share it), so an observation made right after a reset sees the
new pose. With
``cast="before_obs"`` (mjlab's sensing) it is cast only for observations: rewards and terminations read the
scan of the last observation, made before the step's physics, and a step casts one time fewer.

:func:`height_scan` is the observation term (mjlab's convention: the body's height minus each hit's height,
``max_distance`` where a ray misses); noise, clip and scale come from its ``ObsTerm``, e.g. mjlab's
``ObsTerm(mdp.height_scan, {"sensor_name": "terrain_scan"}, noise=UniformNoise(-0.1, 0.1), scale=1 / 5.0)``.
:func:`terrain_normal` fits a plane to a scan's hits (mjlab's ``terrain_normal_from_sensors``).

The rays' buffers, their launch and when they are cast are :mod:`gym_graphreset.mdp.rays`'s, shared with
the foot clearances of :mod:`gym_graphreset.mdp.terrain_height`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

import torch

from gym_graphreset.managers.binding import reads_sensors
from gym_graphreset.managers.forward_passes import reads_forward
from gym_graphreset.mdp import math as mdp_math
from gym_graphreset.mdp.rays import RayBuffers, RayCast, check_cast, check_geom_group, check_refresh

if TYPE_CHECKING:
    from gym_graphreset.managers.forward_passes import ForwardPass
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = [
    "RayCastSensor",
    "RayCastSensorCfg",
    "grid_pattern",
    "height_scan",
    "terrain_normal",
]


_MAX_RAYS = 65_536
"""The most rays one sensor casts per env (mjlab's Go1 scan: 187)."""


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
            or ``None``: every geom of any group, the robot's other bodies included (the body's own too unless
            ``exclude_body``); then the hierarchy is refit before every cast, since robot geoms move.
        exclude_body: Ignore the body's own geoms.
        cast: ``"each_phase"``: cast in every step phase that reads the scan (rewards after the physics,
            observations), so each reads the current pose. ``"before_obs"``: mjlab's ``sense()``, cast only
            for observations (after the step, and after a reset); rewards and terminations read the last
            observation's scan, made before the step's physics, and a step casts once fewer.
    """

    body: str
    size: tuple[float, float] = (1.6, 1.0)
    resolution: float = 0.1
    max_distance: float = 5.0
    alignment: Literal["yaw", "base", "world"] = "yaw"
    geom_group: int | None = 2
    exclude_body: bool = True
    cast: RayCast = "each_phase"

    def __post_init__(self) -> None:
        where = "RayCastSensorCfg"
        check_cast(where, self.cast)
        if not (isinstance(self.body, str) and self.body):
            raise ValueError(f"{where}: `body` must be a body name, got {self.body!r}")
        ok = isinstance(self.size, (tuple, list)) and len(self.size) == 2
        finite = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)  # noqa: E731
        if not (ok and all(finite(s) and s >= 0 for s in self.size)):
            raise ValueError(f"{where}: `size` must be an (x, y) pair of finite numbers >= 0, got {self.size!r}")
        for name in ("resolution", "max_distance"):
            v = getattr(self, name)
            if not (finite(v) and v > 0):
                raise ValueError(f"{where}: `{name}` must be a finite number > 0, got {v!r}")
        rays = math.prod(math.floor(s / self.resolution + 0.5) + 1 for s in self.size)
        if rays > _MAX_RAYS:
            raise ValueError(
                f"{where}: a {self.size[0]:g} x {self.size[1]:g} m grid at resolution {self.resolution:g} m has "
                f"{rays:,} rays per env; at most {_MAX_RAYS:,} are accepted (raise `resolution`)"
            )
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


class RayCastSensor(RayBuffers):
    """The buffers of a :class:`RayCastSensorCfg` and its cast (see the module docstring).

    Attributes:
        offsets: ``(n_rays, 3)`` the grid in the body frame.
        origins: ``(n, n_rays, 3)`` this scan's ray origins (world), a view of the warp input.
        distances: ``(n, n_rays)`` hit distances (-1: no hit), a view of the warp output.
        geom_ids: ``(n, n_rays)`` the geom each ray hit (-1: none).
    """

    forward_passes: ClassVar[frozenset[ForwardPass]] = frozenset()
    """What :meth:`refresh` reads: nothing (a term that reads a cast declares ``kinematics``)."""

    def __init__(self, cfg: RayCastSensorCfg, env: ManagerBasedEnv) -> None:
        import warp as wp

        self.cfg, self.env, self.cast = cfg, env, cfg.cast
        n, dev = env.num_envs, env.device
        check_refresh(env, "RayCastSensorCfg")
        check_geom_group(env, cfg.geom_group, "RayCastSensorCfg")
        try:
            self.body_id = env.body_id(cfg.body)
        except ValueError as exc:  # the lookup lists the model's bodies
            raise ValueError(f"RayCastSensorCfg: {exc}") from exc
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
        self._set_group(cfg.geom_group)
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
        self._outputs(self._heights, self._hits, self._hit)

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
            q = mdp_math.yaw_quat(mdp_math.heading(quat))
            offsets = mdp_math.quat_rotate(q.repeat_interleave(k, 0), offsets.reshape(-1, 3)).view(n, k, 3)
        elif cfg.alignment == "base":
            qk = quat.repeat_interleave(k, 0)
            offsets = mdp_math.quat_rotate(qk, offsets.reshape(-1, 3)).view(n, k, 3)
            self.directions.copy_(mdp_math.quat_rotate(qk, self._down).view(n, k, 3))
        self.origins.copy_(pos.unsqueeze(1) + offsets)
        env.runtime.run(f"ray_cast:{cfg.body}:{id(self)}", self._launch)
        self._hits.copy_(self.origins + self.distances.unsqueeze(-1) * self.directions)
        self._hit.copy_((self.distances >= 0.0) & (self.distances <= cfg.max_distance))
        self._heights.copy_(torch.where(self._hit, pos[:, 2:3] - self._hits[..., 2], cfg.max_distance))
        return self._heights

    def heights(self) -> torch.Tensor:
        """``(n, n_rays)`` the body's height above each hit (``max_distance`` on a miss), as ``cast`` says."""
        return self._current(("ray_cast", id(self)), self._cast)

    def hits(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(n, n_rays, 3)`` the world points the rays hit, and ``(n, n_rays)`` which rays hit (as ``heights``)."""
        self.heights()
        if self._reads_kept():
            return self._kept[1], self._kept[2]
        return self._hits, self._hit

    def update(self) -> None:
        """Nothing: the scan is cast on demand (:meth:`heights`)."""

    def refresh(self) -> None:
        """Nothing: a cast reads the state of its step phase."""

    def reset(self, rows: torch.Tensor) -> None:
        """Nothing: a scan holds no per-episode state."""


@reads_forward("kinematics")
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


@reads_forward("kinematics")
@reads_sensors(sensor_name=RayCastSensor)
def terrain_normal(env: ManagerBasedEnv, sensor_name: str, max_points: int = 32) -> torch.Tensor:
    """The terrain's upward normal under a scan, ``(n, 3)``: a plane fitted to ``max_points`` of its hits.

    mjlab's ``terrain_normal_from_sensors`` for one sensor: evenly spaced rays (``linspace`` over the grid)
    when it has more, :func:`~gym_graphreset.mdp.math.fit_plane_normal` of their hits; ``(0, 0, 1)``
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
        return mdp_math.fit_plane_normal(points, hit)

    return env.cached(("terrain_normal", sensor_name, max_points), compute)
