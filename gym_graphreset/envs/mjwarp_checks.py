"""Checks on the state of MuJoCo Warp worlds: what invalidates physics, and what ends a healthy episode.

:data:`OVERFLOW_CHECKS` names every overflow bit of ``d.overflow`` (MuJoCo Warp's public ``OverflowType``)
that invalidates a world's physics; :class:`~gym_graphreset.envs.mjwarp.MJWarpVectorEnv` latches each as a
named check (``mjwarp_overflow[BROADPHASE]``...). :func:`healthy_range` is the bounds test the locomotion
tasks terminate on. Both are re-exported by :mod:`gym_graphreset.envs.mjwarp`.
"""

from __future__ import annotations

import math

import torch

__all__ = ["OVERFLOW_CHECKS", "healthy_range"]

# Overflow bits that invalidate physics, from mujoco_warp's public OverflowType (ITERATIONS and
# LS_ITERATIONS only warn about convergence). Each is a named check, e.g. ``mjwarp_overflow[BROADPHASE]``.
_WARN_ONLY = ("ITERATIONS", "LS_ITERATIONS")


def _overflow_checks() -> dict[str, int]:
    try:
        import mujoco_warp as mjw
    except ImportError:  # the optional extra is missing: the env cannot be built anyway
        return {}
    return {t.name: int(t.value) for t in mjw.OverflowType if t.name not in _WARN_ONLY}


OVERFLOW_CHECKS: dict[str, int] = _overflow_checks()
"""Overflow name -> bit of ``d.overflow`` for every latched check (``mjwarp_overflow[NAME]``)."""


def healthy_range(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """``low < x < high`` with infinite bounds allowed."""
    ok = torch.ones_like(x, dtype=torch.bool)
    if not math.isinf(low):
        ok &= x > low
    if not math.isinf(high):
        ok &= x < high
    return ok
