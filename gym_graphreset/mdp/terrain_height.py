"""Each foot's clearance above the terrain: a ring of rays under each site, cast down with MuJoCo Warp's ``rays``.

:class:`TerrainHeightSensorCfg` is mjlab's ``TerrainHeightSensorCfg`` with a ``RingPatternCfg``: a few rays
around each foot site, cast down against the terrain, reduced to one clearance per foot (the site's height
above the terrain under it). The foot terms of a rough task read it (:func:`terrain_height`, the
``height_sensor_name`` of the foot rewards) in place of the site's world height. Like the height scan
(:mod:`gym_graphreset.mdp.height_scan`; both are :mod:`gym_graphreset.mdp.rays` sensors) it is
cast on demand, once per step phase or (``cast="before_obs"``) only for observations, full width, with no host
read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

import torch

from gym_graphreset.managers.binding import reads_sensors
from gym_graphreset.managers.forward_passes import reads_forward
from gym_graphreset.mdp.rays import RayBuffers, RayCast, check_cast, check_geom_group, check_refresh

if TYPE_CHECKING:
    from gym_graphreset.managers.forward_passes import ForwardPass
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["TerrainHeightSensor", "TerrainHeightSensorCfg", "ring_pattern", "terrain_height"]

_MAX_RING_SAMPLES = 1024
"""The most rays of one site's ring (mjlab's feet use 4 to 6): more would allocate and cast per site for nothing."""


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
            the site's own body's (the robot's other bodies included: a foot inside its own leg reads 0).
        reduction: How a site's rays become one clearance: ``"min"`` (mjlab's default: the nearest ground),
            ``"max"`` or ``"mean"``.
        cast: When the rays are cast, as :attr:`RayCastSensorCfg.cast
            <gym_graphreset.mdp.height_scan.RayCastSensorCfg.cast>` (``"before_obs"``: mjlab's).
    """

    sites: tuple[str, ...]
    radius: float = 0.04
    num_samples: int = 4
    max_distance: float = 1.0
    geom_group: int | None = 2
    reduction: Literal["min", "max", "mean"] = "min"
    cast: RayCast = "each_phase"

    def __post_init__(self) -> None:
        where = "TerrainHeightSensorCfg"
        check_cast(where, self.cast)
        if not (isinstance(self.sites, tuple) and self.sites and all(isinstance(x, str) for x in self.sites)):
            raise ValueError(f"{where}: `sites` must be a non-empty tuple of site names, got {self.sites!r}")
        r = self.radius
        if not (isinstance(r, (int, float)) and not isinstance(r, bool) and 0 <= r < float("inf")):
            raise ValueError(f"{where}: `radius` must be a finite number >= 0, got {r!r}")
        n = self.num_samples
        if not (isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= _MAX_RING_SAMPLES):
            raise ValueError(f"{where}: `num_samples` must be an int in [0, {_MAX_RING_SAMPLES}], got {n!r}")
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


class TerrainHeightSensor(RayBuffers):
    """The rays of a :class:`TerrainHeightSensorCfg` and its clearances, cast on demand (see its ``cast``).

    Attributes:
        offsets: ``(r, 3)`` the ring around a site (site frame, yaw only).
        distances: ``(n, f * r)`` hit distances (-1: no hit), a view of the warp output; site-major.
    """

    forward_passes: ClassVar[frozenset[ForwardPass]] = frozenset()
    """What :meth:`refresh` reads: nothing (a term that reads a cast declares ``kinematics``)."""

    def __init__(self, cfg: TerrainHeightSensorCfg, env: ManagerBasedEnv) -> None:
        import warp as wp

        self.cfg, self.env, self.cast = cfg, env, cfg.cast
        n, dev, wdev = env.num_envs, env.device, env.wp_device
        check_refresh(env, "TerrainHeightSensorCfg")
        check_geom_group(env, cfg.geom_group, "TerrainHeightSensorCfg")
        try:
            self.site_ids = env.site_ids(cfg.sites)
        except ValueError as exc:  # the lookup lists the model's sites
            raise ValueError(f"TerrainHeightSensorCfg: {exc}") from exc
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
        self._set_group(cfg.geom_group)
        self.origins = wp.to_torch(self._pnt).view(n, f, r, 3)
        self.distances = wp.to_torch(self._dist)
        self._normals = wp.to_torch(self._normal).view(n, f, r, 3)
        wp.to_torch(self._vec).copy_(torch.tensor([0.0, 0.0, -1.0], device=dev).expand(n, f * r, 3))
        self._site_xmat = wp.to_torch(env.d.site_xmat)
        self._heights = torch.zeros(n, f, device=dev)
        self._outputs(self._heights)

    def _cast(self) -> torch.Tensor:
        env, cfg = self.env, self.cfg
        n, f, r = self._shape
        pos = env.site_xpos[:, self.site_ids]  # (n, f, 3)
        xmat = self._site_xmat[:, self.site_ids].reshape(n, f, 9)  # row-major 3 x 3
        yaw = torch.atan2(xmat[..., 3], xmat[..., 0])  # the site's x axis, projected on the ground
        c, s = torch.cos(yaw).unsqueeze(-1), torch.sin(yaw).unsqueeze(-1)
        ox, oy = self.offsets[:, 0], self.offsets[:, 1]
        self.origins.copy_(pos.unsqueeze(2).expand(n, f, r, 3))  # the ring turned with the site's yaw, z = 0
        self.origins[..., 0].add_(c * ox - s * oy)
        self.origins[..., 1].add_(s * ox + c * oy)
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
        """``(n, f)`` each site's clearance above the terrain (see the cfg), as ``cast`` says."""
        return self._current(("terrain_height", id(self)), self._cast)

    def update(self) -> None:
        """Nothing: the rays are cast on demand (:meth:`heights`)."""

    def refresh(self) -> None:
        """Nothing: a cast reads the state of its step phase."""

    def reset(self, rows: torch.Tensor) -> None:
        """Nothing: it holds no per-episode state."""


@reads_forward("kinematics")
@reads_sensors(sensor_name=TerrainHeightSensor)
def terrain_height(env: ManagerBasedEnv, sensor_name: str) -> torch.Tensor:
    """Sensor ``sensor_name``'s clearances (a :class:`TerrainHeightSensorCfg`), ``(n, f)``: mjlab's ``foot_height``."""
    sensor = env.sensors[sensor_name]
    if not isinstance(sensor, TerrainHeightSensor):
        raise TypeError(
            f"terrain_height: sensor {sensor_name!r} is a {type(sensor).__name__}, not a TerrainHeightSensor"
        )
    return sensor.heights()
