"""Checks on the state of MuJoCo Warp worlds: what invalidates physics, and what ends a healthy episode.

:data:`OVERFLOW_CHECKS` names every overflow bit of ``d.overflow`` (MuJoCo Warp's public ``OverflowType``)
that invalidates a world's physics; :class:`WorldChecks` records them and the finite state after each
step's physics and latches them (``mjwarp_overflow[BROADPHASE]``..., ``mjwarp_finite_state``) for
:class:`~gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv`; :func:`overflow_message` says, per bit, which
budget ran out, its size, and the argument that raises it. :func:`healthy_range` is the bounds test the
locomotion tasks terminate on. ``OVERFLOW_CHECKS`` and ``healthy_range`` are re-exported by
:mod:`gym_graphreset.envs.mjwarp.vector_env`.
"""

from __future__ import annotations

import math

import torch

from gym_graphreset.core.protocols import CheckSink
from gym_graphreset.core.validation import finite_rows

__all__ = ["OVERFLOW_CHECKS", "WorldChecks", "healthy_range", "overflow_message"]

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


_PENETRATION = ", unless the world's bodies overlap (a robot that starts in penetration: check its spawn height)"
_PROBE = "benchmarks/contact_budget.py measures the peak a task needs"


def overflow_message(name: str, njmax: int, nconmax: int, nworld: int) -> str:
    """What the overflow bit ``name`` means for a world, naming the budget, its size and the argument to raise.

    ``njmax`` bounds each world's constraint rows; ``nconmax`` is contacts per world, but MuJoCo Warp keeps
    the contacts (and the broadphase's candidate pairs) of all worlds in one pool of ``naconmax = nconmax x
    nworld`` slots, so a contact overflow is raised in every world at once.
    """
    pool = f"naconmax={nconmax * nworld} slots (nconmax={nconmax} per world x {nworld} worlds, one pool)"
    budget = {
        "NEFC": f"a world needed more constraint rows than njmax={njmax} and the rows past it were dropped: pass "
        f"a larger `njmax` (rows per world; {_PROBE})",
        "NJMAX_NNZ": f"the constraint Jacobian's non-zeros (sized from njmax={njmax}) ran out: pass a larger "
        f"`njmax` ({_PROBE})",
        "BROADPHASE": f"the candidate geom pairs of all worlds exceeded {pool} and the pairs past it were "
        f"dropped: pass a larger `nconmax` ({_PROBE})",
        "NARROWPHASE": f"the contacts of all worlds exceeded {pool} and the contacts past it were dropped: pass "
        f"a larger `nconmax` ({_PROBE})",
        "CCD": f"the convex-collision (CCD) contacts exceeded their buffer, sized from {pool}: pass a larger "
        f"`nconmax` ({_PROBE})",
    }
    what = budget.get(name)
    if what is None:  # not a budget of make_data: a buffer the model's own options size
        where = f"mujoco_warp.OverflowType.{name}"
        return f"MuJoCo Warp {name} overflow in some world ({where}): its physics is wrong{_PENETRATION}"
    return f"MuJoCo Warp {name} overflow in some world: {what}{_PENETRATION}"


class WorldChecks:
    """What a step leaves to check in every world: the overflow bits it raised, and whether its state is finite.

    :meth:`record` runs right after each step's physics (a reset clears ``d.overflow``, so the bits are
    ORed into :attr:`seen` first); :meth:`add_checks` latches them with no host read.

    Args:
        overflow: ``(nworld,)`` int, the torch view of ``d.overflow``.
        njmax: Constraint rows allocated per world (``d.njmax``), named by the NEFC message.
        nconmax: Contacts allocated per world (``d.naconmax // nworld``), named by the contact messages.

    Attributes:
        seen: ``(nworld,)`` int, the overflow bits ORed since the last check.
        state_finite: ``(nworld,)`` bool, whether qpos and qvel were finite after the last recorded step.
        messages: Check name -> its message (:func:`overflow_message`).
    """

    def __init__(self, overflow: torch.Tensor, njmax: int, nconmax: int) -> None:
        n, dev = overflow.shape[0], overflow.device
        self.overflow = overflow
        self.seen = torch.zeros(n, dtype=overflow.dtype, device=dev)
        self.state_finite = torch.ones(n, dtype=torch.bool, device=dev)
        self._bits = torch.tensor(list(OVERFLOW_CHECKS.values()), dtype=overflow.dtype, device=dev)
        self._names = tuple(f"mjwarp_overflow[{n}]" for n in OVERFLOW_CHECKS)
        self._messages = tuple(overflow_message(name, njmax, nconmax, n) for name in OVERFLOW_CHECKS)
        self.messages = dict(zip(self._names, self._messages, strict=True))

    def record(self, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """After a step's physics: keep its overflow bits and whether each world's state is finite."""
        self.seen.bitwise_or_(self.overflow)
        torch.logical_and(finite_rows(qpos), finite_rows(qvel), out=self.state_finite)

    def add_checks(self, latch: CheckSink) -> None:
        """Latch every overflow bit (one per-row write, each under its own name) and the finite state."""
        clear = (self.seen.unsqueeze(1) & self._bits) == 0  # (worlds, bits): per row
        latch.require_many(clear, self._names, self._messages)
        latch.require(self.state_finite, "mjwarp_finite_state", "non-finite qpos/qvel in the physics state")
        self.seen.zero_()


def healthy_range(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """``low < x < high`` with infinite bounds allowed."""
    ok = torch.ones_like(x, dtype=torch.bool)
    if not math.isinf(low):
        ok &= x > low
    if not math.isinf(high):
        ok &= x < high
    return ok
