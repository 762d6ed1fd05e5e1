"""The forward pass before the observations, reduced to the passes its readers declare.

``TaskCfg.forward_before_obs`` runs MuJoCo Warp's forward after a step's physics and before its observations,
as mjlab does. The next physics step recomputes every derived quantity from ``qpos``/``qvel``, so the forward
matters only for what is read between it and that step: the observation terms, the recorder terms, the
commands (their ``command`` and ``metrics()``, published in the info) and the sensors' ``refresh``. Each of
them declares the passes whose results it reads (:data:`ForwardPass`): a function with
:func:`reads_forward`, a class (a term class, a command, a sensor) with a ``forward_passes`` class attribute
(:class:`ForwardReader`). The env runs the union of the declared passes and what each needs first, in
forward's order, with mujoco_warp's public functions, so every value a declared reader reads is, bit for bit,
the one the full forward gives. A reader that declares nothing makes the env run the full forward, and
:meth:`ForwardPlan.describe` names it.

A sensor's ``forward_passes`` are what its ``refresh`` reads: it refreshes when the run covers them, and keeps
its values of the physics step otherwise (a term reading its refreshed values declares those passes).

The passes and the ``mujoco_warp.Data`` fields each makes current (with those of the passes it needs):

================ ====================================================================== =====================
pass             makes current                                                          needs
================ ====================================================================== =====================
``kinematics``   ``xpos xquat xmat xipos ximat xanchor xaxis geom_xpos geom_xmat        --
                 site_xpos site_xmat``
``com_pos``      ``subtree_com cinert cdof``                                            ``kinematics``
``com_vel``      ``cvel cdof_dot``                                                      ``com_pos``
``collision``    the contacts (``contact``, ``nacon``), without forces                  ``kinematics``
``sensor_pos``   position-stage ``sensordata``                                          the position stage
``sensor_vel``   velocity-stage ``sensordata``                                          the velocity stage
``acceleration`` ``qacc``, ``efc`` forces (contact forces), actuator forces             velocity stage
``sensor_acc``   acceleration-stage ``sensordata`` (contact sensors with a force)       ``acceleration``
``full``         everything ``mujoco_warp.forward`` computes (``energy`` too)           --
================ ====================================================================== =====================

``sensordata`` is zeroed before a run that computes a sensor stage (as forward does), so the stages not run
read zero until the next physics step. The full forward runs instead of a reduced one when a reader asks for
``full`` or for every sensor stage (the same work), and for a model with sleeping islands or the discrete
integrator (their forward has steps of its own).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, get_args, runtime_checkable

if TYPE_CHECKING:
    from gym_graphreset.managers.task_cfg import TaskCfg

__all__ = [
    "FORWARD_PASSES",
    "ForwardMode",
    "ForwardPass",
    "ForwardPlan",
    "ForwardReader",
    "declared_passes",
    "plan_forward",
    "reads_forward",
    "task_readers",
]

ForwardPass = Literal[
    "kinematics", "com_pos", "com_vel", "collision", "sensor_pos", "sensor_vel", "acceleration", "sensor_acc", "full"
]
"""A pass of MuJoCo Warp's forward whose results a reader reads (see the module docstring)."""
FORWARD_PASSES: tuple[ForwardPass, ...] = get_args(ForwardPass)
"""Every pass, in forward's order."""

ForwardMode = Literal["declared", "full"]
"""What ``TaskCfg.forward_before_obs`` runs: the passes the readers declare, or MuJoCo Warp's whole forward."""

_NEEDS: dict[ForwardPass, tuple[ForwardPass, ...]] = {
    "kinematics": (),
    "com_pos": ("kinematics",),
    "com_vel": ("com_pos",),
    "collision": ("kinematics",),
    "sensor_pos": ("com_pos", "collision"),
    "sensor_vel": ("com_vel", "collision"),
    "acceleration": ("com_vel", "collision"),
    "sensor_acc": ("acceleration",),
    "full": (),
}
"""The passes each pass's inputs come from (the closure is taken)."""
_SENSOR_STAGES: frozenset[ForwardPass] = frozenset({"sensor_pos", "sensor_vel", "sensor_acc"})
_DEEP: frozenset[ForwardPass] = _SENSOR_STAGES | {"acceleration"}
"""Passes that need MuJoCo Warp's whole position stage (``fwd_position``)."""

F = TypeVar("F", bound=Callable[..., Any])


@runtime_checkable
class ForwardReader(Protocol):
    """Something read after the forward pass that declares the passes whose results it reads.

    A term function gets the attribute from :func:`reads_forward`; a class (term class, command, sensor)
    declares it as a class attribute, e.g. ``forward_passes = frozenset({"kinematics"})``. An empty set: it
    reads nothing the forward computes (``qpos``, ``qvel``, the action, its own state).
    """

    forward_passes: frozenset[ForwardPass]


def _checked(passes: Any, where: str) -> frozenset[ForwardPass]:
    """``passes`` as a frozenset of known passes; anything else is refused naming ``where`` and the passes."""
    if isinstance(passes, str) or not isinstance(passes, (frozenset, set, tuple, list)):
        raise TypeError(
            f"{where}: `forward_passes` must be a frozenset of passes {list(FORWARD_PASSES)}, got {passes!r}"
        )
    if unknown := [p for p in passes if p not in FORWARD_PASSES]:
        raise ValueError(f"{where}: {unknown} are not forward passes; the passes: {list(FORWARD_PASSES)}")
    return frozenset(passes)


def reads_forward(*passes: ForwardPass) -> Callable[[F], F]:
    """Declare the forward passes whose results a term function reads (none: it reads none of them).

    E.g. ``@reads_forward("kinematics")`` on a term that reads ``site_xpos``. The env then runs only what its
    readers declare (:func:`plan_forward`); ``gym_graphreset.testing.assert_declared_forward_matches_full``
    checks a declaration against the full forward.
    """
    declared = _checked(passes, "reads_forward")

    def mark(func: F) -> F:
        func.forward_passes = declared  # type: ignore[attr-defined]
        return func

    return mark


def declared_passes(reader: object, where: str) -> frozenset[ForwardPass] | None:
    """The passes ``reader`` declares (:class:`ForwardReader`), or ``None`` when it declares nothing."""
    if not isinstance(reader, ForwardReader):
        return None
    return _checked(reader.forward_passes, where)


def _closure(passes: frozenset[ForwardPass]) -> frozenset[ForwardPass]:
    out: set[ForwardPass] = set()
    todo = list(passes)
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += _NEEDS[p]
    return frozenset(out)


@dataclass(frozen=True)
class ForwardPlan:
    """What the forward before the observations runs, and why.

    Attributes:
        passes: The passes run (their closure), in forward's order; every pass when ``full``.
        full: Whether MuJoCo Warp's whole ``forward`` runs.
        reasons: Why the full forward runs (the readers that declare nothing, ``full``, the model); empty if not.
        refreshed: The sensors whose ``refresh`` runs after it (those whose declared passes it covers, and
            every sensor when ``full``).
    """

    passes: tuple[ForwardPass, ...]
    full: bool
    reasons: tuple[str, ...]
    refreshed: tuple[str, ...]

    def run(self, m: Any, d: Any) -> None:
        """Run the plan's passes on every world (``mujoco_warp`` functions in forward's order)."""
        import mujoco_warp as mjw

        if self.full:
            mjw.forward(m, d)
            return
        p = set(self.passes)
        if p & _DEEP:
            self._run_deep(mjw, m, d, p)
            return
        if "collision" in p:
            mjw.fwd_kinematics(m, d)  # kinematics, com_pos, camlight, flex (the flex vertices collide), tendon
            if m.opt.run_collision_detection:
                mjw.collision(m, d)
        elif "kinematics" in p:
            mjw.kinematics(m, d)
            if "com_pos" in p:
                mjw.com_pos(m, d)
        if "com_vel" in p:
            mjw.com_vel(m, d)

    @staticmethod
    def _run_deep(mjw: Any, m: Any, d: Any, p: set[ForwardPass]) -> None:
        """``mujoco_warp.forward`` (no sleep, no discrete integrator) without the stages not in ``p``."""
        mjw.fwd_position(m, d, factorize=False)
        if p & _SENSOR_STAGES:
            d.sensordata.zero_()
        if "sensor_pos" in p:
            mjw.sensor_pos(m, d)
        if p & {"sensor_vel", "acceleration"}:
            mjw.fwd_velocity(m, d)
        elif "com_vel" in p:
            mjw.com_vel(m, d)
        if "sensor_vel" in p:
            mjw.sensor_vel(m, d)
        if "acceleration" not in p:
            return
        if not (m.opt.disableflags & mjw.DisableBit.ACTUATION) and m.callback.control:
            m.callback.control(m, d)
        mjw.fwd_actuation(m, d)
        mjw.fwd_acceleration(m, d, factorize=True)
        mjw.solve(m, d)
        sensors = "sensor_acc" in p and not (m.opt.disableflags & mjw.DisableBit.SENSOR)
        if m.opt.run_rne_postconstraint or (sensors and m.sensor_rne_postconstraint):
            mjw.rne_postconstraint(m, d)
        if "sensor_acc" in p:
            mjw.sensor_acc(m, d, skip_rne_postconstraint=True)

    def describe(self) -> dict[str, Any]:
        """The plan as plain values (``ManagerBasedEnv.describe()["forward"]``)."""
        return {
            "passes": list(self.passes),
            "full": self.full,
            "reasons": list(self.reasons),
            "refreshed_sensors": list(self.refreshed),
        }


def _model_reasons(m: Any) -> list[str]:
    """Why this model needs MuJoCo Warp's whole forward whatever the readers declare."""
    import mujoco_warp as mjw

    reasons = []
    if m.opt.enableflags & mjw.EnableBit.SLEEP and not m.opt.disableflags & mjw.DisableBit.ISLAND:
        reasons.append("the model enables sleeping islands")
    if m.opt.integrator == mjw.IntegratorType.DISCRETE:
        reasons.append("the model uses the discrete integrator")
    return reasons


def task_readers(cfg: TaskCfg, commands: Mapping[str, object]) -> dict[str, object]:
    """What a task reads after the forward, by name: observation and recorder terms, and the built commands."""
    readers: dict[str, object] = {}
    for g, group in cfg.observations.items():
        readers.update({f"observations[{g!r}][{t!r}]": term.func for t, term in group.terms.items()})
    readers.update({f"recorders[{n!r}]": r.func for n, r in cfg.recorders.items()})
    readers.update({f"commands[{n!r}]": c for n, c in commands.items()})
    return readers


def plan_forward(
    readers: Mapping[str, object], sensors: Mapping[str, object], mode: ForwardMode, m: Any
) -> ForwardPlan:
    """The plan of the forward before the observations.

    Args:
        readers: What is read after the forward, by a name for the report (``observations['critic']['x']``):
            term functions or classes, built commands.
        sensors: The built sensors by name (their ``refresh`` reads what they declare).
        mode: ``"declared"``: the union of the declared passes; ``"full"``: MuJoCo Warp's forward.
        m: The ``mujoco_warp.Model``.
    """
    needed: set[ForwardPass] = set()
    reasons: list[str] = [] if mode == "declared" else ["TaskCfg.forward_passes='full'"]
    for name, reader in readers.items():
        passes = declared_passes(reader, name)
        if passes is None:
            reasons.append(f"{name} declares no forward passes")
        else:
            needed |= passes
    sensed: dict[str, frozenset[ForwardPass]] = {}
    for name, sensor in sensors.items():
        passes = declared_passes(sensor, f"sensors[{name!r}]")
        if passes is None:
            reasons.append(f"sensors[{name!r}] declares no forward passes for its refresh")
        else:
            sensed[name] = passes
    if "full" in needed:
        reasons.append("a reader declares 'full'")
    if needed >= _SENSOR_STAGES:
        reasons.append("every sensor stage is read (the same work)")
    reasons += _model_reasons(m)
    full = bool(reasons)
    run = frozenset(FORWARD_PASSES) if full else _closure(frozenset(needed))
    return ForwardPlan(
        passes=tuple(p for p in FORWARD_PASSES if p in run),
        full=full,
        reasons=tuple(reasons),
        refreshed=tuple(n for n in sensors if full or (n in sensed and _closure(sensed[n]) <= run)),
    )
