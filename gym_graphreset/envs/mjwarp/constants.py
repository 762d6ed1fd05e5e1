"""Constants MuJoCo derives from the model, recomputed per world: the env's side (a mixin of ``MJWarpVectorEnv``).

:class:`ModelConstants` gives the env :meth:`~gym_graphreset.envs.mjwarp.constants.ModelConstants.recompute_constants`
(``mujoco_warp.set_const``): after per-world writes of masses, centres of mass, inertias or armatures, the
inverse weights (contact and joint-limit softness), subtree masses and actuator accelerations follow them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

__all__ = ["SET_CONST_FIELDS", "ModelConstants"]

SET_CONST_FIELDS = (
    "body_subtreemass",
    "dof_invweight0",
    "body_invweight0",
    "tendon_length0",
    "tendon_invweight0",
    "actuator_acc0",
)
"""The derived model fields ``mujoco_warp.set_const`` writes per world: per-world for
:meth:`ModelConstants.recompute_constants`."""


class ModelConstants:
    """The env's derived-constant recomputation (its model ``m``, data ``d`` and per-world fields are the env's)."""

    m: Any
    d: Any
    batched_model_fields: tuple[str, ...]
    _on_stream: Callable[[], contextlib.AbstractContextManager[None]]

    def recompute_constants(self) -> None:
        """``mujoco_warp.set_const`` on every world: constants derived at ``qpos0`` follow per-world model writes.

        After writing ``body_ipos``, ``body_mass``, ``body_inertia`` or ``dof_armature`` per world, their
        derived constants (inverse weights, which set contact and joint-limit softness, subtree masses, actuator
        accelerations: ``body_subtreemass``, ``dof_invweight0``, ``body_invweight0``, ``tendon_length0``,
        ``tendon_invweight0``, ``actuator_acc0``) are still the compiled model's until this runs. The derived
        state is then recomputed from the current ``qpos`` and ``qvel`` (kinematics, centres of mass, body
        velocities: ``set_const`` evaluates the model at ``qpos0``). Eager only: not part of a captured step.
        ``set_const`` also writes camera and light references, equality anchors and geom bounds; those that are
        not per-world take one world's values (a camera tracking the centre of mass follows one world's).

        Raises:
            ValueError: one of those fields is not per-world (``batched_model_fields``): every world would
                write one shared row.
        """
        import mujoco_warp as mjw

        missing = [f for f in SET_CONST_FIELDS if f not in self.batched_model_fields]
        if missing:
            raise ValueError(
                f"recompute_constants: {missing} must be per-world: set_const writes each world's derived "
                f"constants there. On a task, give a startup EventTerm recompute='set_const' (it makes them "
                f"per-world); on an MJWarpVectorEnv subclass, list them in `batched_model_fields`"
            )
        with self._on_stream():
            mjw.set_const(self.m, self.d)
            mjw.kinematics(self.m, self.d)
            mjw.com_pos(self.m, self.d)
            mjw.com_vel(self.m, self.d)
