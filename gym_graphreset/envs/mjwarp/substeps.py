"""Sensor values after every physics substep of a step, kept on the device.

A step runs ``frame_skip`` substeps; the task reads the sensors once, after the last. Terms that must see
what happened in between (a contact that opened and closed within the step: mjlab's contact-sensor
``history_length``) ask :meth:`~gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv.record_substeps` for
sensor columns; one warp launch after each substep copies them into a ``(nworld, frame_skip, k)`` buffer.
The launches are part of the physics (its warp graph, or the step's torch graph): no host read; a bare-physics
timing (``run_physics``) includes them.

Imported lazily by the env: warp is an optional dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import warp as wp

__all__ = ["SubstepRecord"]


@wp.kernel(enable_backward=False)
def _record_kernel(
    sensordata: wp.array2d(dtype=float),
    cols: wp.array(dtype=int),
    substep: int,
    out: wp.array3d(dtype=float),
):
    w, j = wp.tid()
    out[w, substep, j] = sensordata[w, cols[j]]


class SubstepRecord:
    """``values``: ``(nworld, frame_skip, len(cols))``; row ``k`` holds ``sensordata[:, cols]`` after substep ``k``.

    Its contents are those of the last step's physics (zeros before the first step); a reset does not
    clear them (the reading terms clear their own state).
    """

    def __init__(self, d: Any, cols: Sequence[int], frame_skip: int, device: Any) -> None:
        nworld = int(d.sensordata.shape[0])
        self.cols = wp.array(list(cols), dtype=int, device=device)
        self._out = wp.zeros((nworld, frame_skip, len(cols)), dtype=float, device=device)
        self.values: torch.Tensor = wp.to_torch(self._out)

    def record(self, d: Any, substep: int) -> None:
        """Copy the columns after substep ``substep`` (one launch; captured with the physics)."""
        wp.launch(
            _record_kernel,
            dim=(self._out.shape[0], self._out.shape[2]),
            inputs=[d.sensordata, self.cols, substep, self._out],
            device=self._out.device,
        )
