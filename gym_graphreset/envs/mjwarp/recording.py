"""Sensor values after every physics substep: the env's side (a mixin of ``MJWarpVectorEnv``).

:class:`SubstepRecording` gives the env
:meth:`~gym_graphreset.envs.mjwarp.recording.SubstepRecording.record_substeps`: a term that must see what
happened between a step's substeps (a contact that opened and closed within it: mjlab's contact-sensor
``history_length``) asks for sensordata columns while the env is built; the physics then copies them after
each substep (:class:`~gym_graphreset.envs.mjwarp.substeps.SubstepRecord`, one warp launch each). Kept apart
from :mod:`~gym_graphreset.envs.mjwarp.substeps`, which imports warp, so that the env module does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from gym_graphreset.envs.mjwarp.substeps import SubstepRecord

__all__ = ["SubstepRecording"]


class SubstepRecording:
    """The env's substep records (its construction allocates them; its physics writes them).

    Attributes:
        substep_records: The :class:`~gym_graphreset.envs.mjwarp.substeps.SubstepRecord` of every
            :meth:`record_substeps` call, written after each physics substep.
    """

    mjm: Any
    d: Any
    frame_skip: int
    wp_device: Any
    substep_records: list[SubstepRecord]
    _physics_started: bool

    def record_substeps(self, cols: Sequence[int]) -> torch.Tensor:
        """A ``(num_envs, frame_skip, len(cols))`` view: ``sensordata[:, cols]`` after each substep of the last step.

        Ask while building (in :meth:`_setup_task` or a sensor's ``build``): the physics is captured at its
        first run, so columns asked for later would never be recorded, and are refused.

        Raises:
            RuntimeError: the physics has run already.
            ValueError: ``cols`` empty, not integers, or a column not in ``[0, nsensordata)``.
        """
        from gym_graphreset.envs.mjwarp.substeps import SubstepRecord

        if self._physics_started:
            raise RuntimeError("record_substeps: the physics has run already; ask while building the env")
        cols = list(cols)
        ints = all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in cols)
        if not cols or not ints or any(not 0 <= c < self.mjm.nsensordata for c in cols):
            raise ValueError(
                f"record_substeps: `cols` must be a non-empty sequence of sensordata columns in "
                f"[0, {self.mjm.nsensordata}), got {cols!r}"
            )
        record = SubstepRecord(self.d, cols, self.frame_skip, self.wp_device)
        self.substep_records.append(record)
        return record.values
