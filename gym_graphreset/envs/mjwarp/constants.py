"""The model constants MuJoCo derives at ``qpos0``, which ``mujoco_warp.set_const`` recomputes per world.

After per-world writes of masses, centres of mass, inertias or armatures, the inverse weights (contact and
joint-limit softness), subtree masses and actuator accelerations follow them once
:meth:`~gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv.recompute_constants` runs; it needs these fields
per world. Kept apart from the env's module so that term configs can name them without importing the engine.
"""

from __future__ import annotations

__all__ = ["SET_CONST_FIELDS"]

SET_CONST_FIELDS = (
    "body_subtreemass",
    "dof_invweight0",
    "body_invweight0",
    "tendon_length0",
    "tendon_invweight0",
    "actuator_acc0",
)
"""The derived model fields ``mujoco_warp.set_const`` writes per world: per-world for
:meth:`~gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv.recompute_constants`."""
