"""What every ray sensor shares: warp buffers, one ``mujoco_warp.rays`` launch over a BVH, and when it casts.

:class:`RayBuffers` is the base of the height scan (:mod:`gym_graphreset.mdp.height_scan`) and the foot
clearances (:mod:`gym_graphreset.mdp.terrain_height`): its launch walks a bounding-volume hierarchy of
one geom group (:func:`ray_context`, as mjlab's sensors do) and reads nothing on the host; it casts in every
step phase that reads it or, with ``cast="before_obs"`` (:data:`RayCast`), only for observations, as mjlab's
``sense()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["RayBuffers", "RayCast", "RayContext", "check_cast", "check_geom_group", "ray_context"]

RayCast = Literal["each_phase", "before_obs"]
"""When a ray sensor casts: in every step phase that reads it, or only for observations (mjlab's ``sense``)."""


def check_cast(where: str, cast: object) -> None:
    """Refuse a ``cast`` that is not a :data:`RayCast` (``where`` names the sensor config)."""
    if cast not in ("each_phase", "before_obs"):
        raise ValueError(f"{where}: `cast` must be 'each_phase' or 'before_obs', got {cast!r}")


def check_refresh(env: ManagerBasedEnv, where: str) -> None:
    """Refuse a task whose resets leave body and site poses stale (``TaskCfg.refresh="none"``).

    Rays start at a body's or site's pose: after a reset without a refresh that is still the previous
    episode's, so the reset rows' first observation would scan the ground where the robot was, not where it is.
    """
    if env.refresh == "none":
        raise ValueError(
            f"{where}: rays are cast from body and site poses, which a reset with TaskCfg.refresh='none' "
            "leaves at the previous episode's; use refresh='kinematics' (or 'com')"
        )


def check_geom_group(env: ManagerBasedEnv, group: int | None, where: str) -> None:
    """Refuse a ``geom_group`` no geom of the model is in (``where`` names the sensor): every ray would miss."""
    if group is None:
        return
    groups = sorted({int(g) for g in env.mjm.geom_group})
    if group not in groups:
        raise ValueError(
            f"{where}: no geom of the model is in `geom_group` {group}, so every ray would miss; "
            f"its geoms are in groups {groups} (the terrain's: TerrainGeneratorCfg.geom_group)"
        )


class RayBuffers:
    """What a ray sensor holds: its warp buffers (set by each sensor) and one ``mujoco_warp.rays`` launch over them.

    The launch walks a bounding-volume hierarchy of the geoms in the sensor's group (:func:`ray_context`)
    rather than testing every geom of the model per ray: on a generated terrain of hundreds of boxes that
    is what keeps a scan cheap beside the physics.
    """

    env: ManagerBasedEnv
    cast: RayCast
    _live: tuple[torch.Tensor, ...]
    """What a cast writes (heights first); with ``cast="before_obs"`` it is copied into ``_kept`` for the
    rows an observation is made for, and phases that are not observations read ``_kept``."""
    _kept: tuple[torch.Tensor, ...]
    _pnt: Any
    _vec: Any
    _geomgroup: Any
    _bodyexclude: Any
    _dist: Any
    _geomid: Any
    _normal: Any
    _context: RayContext

    def _set_group(self, group: int | None) -> None:
        """Cast against geoms of MuJoCo group ``group`` alone (``None``: every group)."""
        import warp as wp

        mask = [-1.0] * 6 if group is None else [1.0 if g == group else 0.0 for g in range(6)]
        self._geomgroup = wp.types.vector(length=6, dtype=wp.float32)(*mask)
        self._context = ray_context(self.env, group)

    def heights(self) -> torch.Tensor:
        """``(n, ...)`` the sensor's first output, cast (or kept) as :meth:`_current` says; each sensor's own."""
        raise NotImplementedError

    has_cast: bool = False
    """Whether the sensor has cast at least once (host-side; set at the first cast)."""

    def _outputs(self, *live: torch.Tensor) -> None:
        """Declare the tensors a cast writes, heights first (and keep copies of them for ``"before_obs"``)."""
        self._live = live
        self._kept = tuple(torch.zeros_like(t) for t in live)

    def _reads_kept(self) -> bool:
        """Whether this phase reads the last observation's cast (``"before_obs"``, outside an observation)."""
        return self.cast == "before_obs" and self.env.phase.name != "observe"

    def _current(self, key: tuple[str, int], cast: Callable[[], torch.Tensor]) -> torch.Tensor:
        """``cast()`` once per step phase, or (``cast="before_obs"``, outside an observation) the last cast.

        An observation's cast is kept for the rows it observes (every row after a step, the reset rows after
        a reset), so the masked and the selected reset paths keep the same values.
        """
        if self._reads_kept():
            return self._kept[0]
        if self.cast == "each_phase":
            return self.env.cached(key, cast)

        def cast_and_keep() -> torch.Tensor:
            out = cast()
            self.has_cast = True
            rows = self.env.phase.rows
            for kept, live in zip(self._kept, self._live, strict=True):
                if rows is None:
                    kept.copy_(live)
                else:
                    kept.copy_(torch.where(rows.view(-1, *([1] * (live.dim() - 1))), live, kept))
            return out

        return self.env.cached(key, cast_and_keep)

    def _launch(self) -> None:
        import mujoco_warp as mjw

        env, context = self.env, self._context
        context.refit()
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
            context.rc,
        )


@dataclass
class RayContext:
    """A MuJoCo Warp ``RenderContext`` used for its BVH of one geom group's geoms, over all worlds.

    The BVH bounds an infinite plane to +-1000 m (MuJoCo Warp's choice): a ray cast farther from the origin
    misses such a plane, where MuJoCo's ``mj_ray`` would hit it; generated terrains are finite geoms.

    Attributes:
        rc: The render context (no camera: its scene BVH alone).
        moving: Some geom of the group is on a moving body: the BVH is refit before every cast.
        fitted: The BVH has been refit to the env's own data once (static geoms: enough).
    """

    env: ManagerBasedEnv
    rc: Any
    moving: bool
    fitted: bool = False

    def refit(self) -> None:
        """Bring the BVH to the geoms' current poses where they can have moved (a device launch, no host read)."""
        import mujoco_warp as mjw

        if self.moving or not self.fitted:
            mjw.refit_bvh(self.env.m, self.env.d, self.rc)
            self.fitted = True


def ray_context(env: ManagerBasedEnv, group: int | None) -> RayContext:
    """The env's :class:`RayContext` for ``group`` (``None``: every group), built once and shared by its sensors."""

    def build() -> RayContext:
        import mujoco_warp as mjw
        import numpy as np
        import warp as wp

        mjm = env.mjm
        groups = sorted({int(g) for g in mjm.geom_group}) if group is None else [group]  # None: any, even > 5
        with wp.ScopedDevice(env.wp_device):
            rc = mjw.create_render_context(
                mjm, nworld=env.num_envs, cam_res=[], render_rgb=[], render_depth=[], render_seg=[],
                use_textures=False, enabled_geom_groups=groups, cam_active=[],
            )  # fmt: skip
        enabled = np.isin(mjm.geom_group, groups)
        moving = bool((mjm.body_weldid[mjm.geom_bodyid[enabled]] != 0).any())
        return RayContext(env, rc, moving)

    context: RayContext = env.constant(("ray_context", group), build)
    return context
