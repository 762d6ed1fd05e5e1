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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch

from gym_graphreset.tasks.mdp import math as M

if TYPE_CHECKING:
    from gym_graphreset.tasks.env import ManagerBasedEnv

__all__ = ["RayCastSensor", "RayCastSensorCfg", "grid_pattern", "height_scan"]


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


class RayCastSensor:
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
        hit_z = self.origins[..., 2] + self.distances * self.directions[..., 2]
        miss = (self.distances < 0.0) | (self.distances > cfg.max_distance)
        self._heights.copy_(torch.where(miss, cfg.max_distance, pos[:, 2:3] - hit_z))
        return self._heights

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

    def heights(self) -> torch.Tensor:
        """``(n, n_rays)`` the body's height above each hit (``max_distance`` on a miss), once per step phase."""
        return self.env.cached(("ray_cast", id(self)), self._cast)

    def update(self) -> None:
        """Nothing: the scan is cast on demand (:meth:`heights`)."""

    def reset(self, rows: torch.Tensor) -> None:
        """Nothing: a scan holds no per-episode state."""


def height_scan(env: ManagerBasedEnv, sensor_name: str, offset: float = 0.0) -> torch.Tensor:
    """Sensor ``sensor_name``'s scan: body height minus hit height per ray, minus ``offset``, ``(n, n_rays)``."""
    sensor = env.sensors[sensor_name]
    if not isinstance(sensor, RayCastSensor):
        raise TypeError(f"height_scan: sensor {sensor_name!r} is a {type(sensor).__name__}, not a RayCastSensor")
    h = sensor.heights()
    return h - offset if offset else h
