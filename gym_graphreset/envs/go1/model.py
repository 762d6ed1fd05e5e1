"""The Go1 model of the velocity task: mjlab 1.6's actuator, collision and solver settings on any Go1 MJCF.

The robot's geometry and inertia come from an MJCF: by default this package's own primitive-geom model
(``assets/go1.xml``, written from Go1's public facts), or any Go1 MJCF with the same joint, geom and site
names (e.g. mjlab's ``asset_zoo/robots/unitree_go1/xmls/go1.xml``). :func:`build_go1_xml` then applies, with
``mujoco.MjSpec``, what mjlab's Go1 config sets in Python, so both models run under identical settings:

- actuators: a joint-position PD (MuJoCo ``position``-style: gain ``kp``, bias ``-kp q - kv qdot``), no
  control limit, torque limited; gains from a 10 Hz natural frequency and damping ratio 2 on the reflected
  rotor inertia (rotor 1.11842e-4 kg m^2 through gear 6 at hip/thigh, 9 at the knee), which is also the
  joint armature;
- collisions: every ``*_collision*`` geom collides (solref 0.01, 1); feet get priority 1, condim 6 and
  friction (1, 5e-3, 5e-4), the rest condim 1; every other geom (meshes for looks) does not collide;
- solver: 5 ms step, implicitfast, Newton, elliptic cones, impratio 10, 10 iterations, 20 line-search
  iterations, 50 CCD iterations; a ground plane (or the model's own world-body geom ``floor``);
- one MuJoCo contact sensor per foot against the floor (found, net force), as mjlab's feet contact sensor;
  the model's own sensors are removed unless ``keep_sensors=True``.

The model's structure is checked after it compiles: Go1's joints, types, order, limits and actuators.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

__all__ = [
    "ACTION_SCALE",
    "DEFAULT_JOINT_POS",
    "EFFORT_LIMIT",
    "FOOT_NAMES",
    "GO1_XML",
    "INIT_BASE_HEIGHT",
    "JOINT_NAMES",
    "NJMAX",
    "PHYSICS_DT",
    "VELOCITY_LIMIT",
    "build_go1_xml",
    "default_joint_pos",
    "joint_gains",
]

GO1_XML = Path(__file__).parent / "assets" / "go1.xml"
"""This package's own Go1 MJCF (primitive geoms)."""

LEGS = ("FR", "FL", "RR", "RL")
FOOT_NAMES = LEGS
"""Foot site names, in the order of every per-foot quantity (``<leg>_foot_collision`` are the geoms)."""
JOINT_NAMES = tuple(f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf"))
"""Actuated joints in action order (mjlab's order for Go1: leg by leg, hip, thigh, calf)."""

ROTOR_INERTIA = 0.000111842
GEAR = {"hip": 6.0, "thigh": 6.0, "calf": 9.0}
EFFORT_LIMIT = {"hip": 23.7, "thigh": 23.7, "calf": 35.55}
"""Torque limits [N m] by joint kind (the actuators' force range)."""
VELOCITY_LIMIT = {"hip": 30.1, "thigh": 30.1, "calf": 20.06}
"""Motor velocity limits [rad/s] (mjlab records them; its position actuator does not enforce them)."""
NATURAL_FREQ = 10.0 * 2.0 * math.pi
DAMPING_RATIO = 2.0
INIT_BASE_HEIGHT = 0.278
"""Spawn height of the trunk [m] (reset adds 0.01-0.05 m)."""
DEFAULT_JOINT_POS = {"hip_R": 0.1, "hip_L": -0.1, "thigh": 0.9, "calf": -1.8}
"""The standing pose [rad]: hips of the right legs 0.1, of the left legs -0.1, thighs 0.9, calves -1.8."""
FOOT_RADIUS = 0.023
FOOT_FRICTION = (1.0, 5e-3, 5e-4)
COLLISION_SOLREF = (0.01, 1.0)
NJMAX = 300
"""Constraint rows per world (mjlab's flat Go1 setting)."""
PHYSICS_DT = 0.005
"""Physics timestep [s]."""
SIM_OPTIONS = {
    "timestep": PHYSICS_DT,
    "impratio": 10.0,
    "iterations": 10,
    "ls_iterations": 20,
    "ccd_iterations": 50,
}


def _part(joint: str) -> str:
    return joint.split("_")[1]


def joint_gains(joint: str) -> tuple[float, float, float]:
    """``(kp, kv, armature)`` of a joint: PD gains on its reflected rotor inertia."""
    armature = ROTOR_INERTIA * GEAR[_part(joint)] ** 2
    return armature * NATURAL_FREQ**2, 2.0 * DAMPING_RATIO * armature * NATURAL_FREQ, armature


ACTION_SCALE = {j: 0.25 * EFFORT_LIMIT[_part(j)] / joint_gains(j)[0] for j in JOINT_NAMES}
"""Action scale per joint: a unit action moves the target by a quarter of the torque limit's worth."""


def default_joint_pos(joint: str) -> float:
    """The standing pose (mjlab's): hips 0.1 rad outward (R positive), thighs 0.9, calves -1.8."""
    part = _part(joint)
    if part == "hip":
        return DEFAULT_JOINT_POS["hip_R"] if joint[1] == "R" else DEFAULT_JOINT_POS["hip_L"]
    return DEFAULT_JOINT_POS[part]


_COLLISION = re.compile(r".*_collision\d*$")
_FOOT = re.compile(r"^[FR][LR]_foot_collision$")
_JOINT_KINDS = ("free", "ball", "slide", "hinge")


def build_go1_xml(model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> str:
    """The task's model as an MJCF string: the robot of ``model_xml`` with the settings listed above.

    Args:
        model_xml: A Go1 MJCF path with mjlab's names (joints ``FR_hip_joint``..., feet ``FR_foot_collision``...,
            trunk body ``trunk``, site ``imu``); ``None``: this package's own model. Mesh paths are made absolute.
            Its structure must be Go1's: joint 0 the free joint of ``trunk`` (qpos[0:7]), then exactly the 12
            limited hinges of :data:`JOINT_NAMES` in that order; its own actuators (none, or one per leg joint)
            are replaced. A world-body geom named ``floor`` is used as the ground instead of adding one.
        keep_sensors: Keep the model's own sensors (e.g. the five of mjlab's ``go1.xml``) next to the foot
            contact sensors. Off by default: the task reads none of them, and MuJoCo Warp computes every sensor
            at every substep (an accelerometer adds a pass), so they cost time for nothing.

    Raises:
        FileNotFoundError: ``model_xml`` does not exist.
        ValueError: ``model_xml`` is XML text rather than a path, does not parse or compile, lacks a joint, foot
            geom, body or site the task needs, or has another structure (joint types, order, limits, actuators,
            floor, sensor names); the message names the file and the element.
    """
    import mujoco

    if not isinstance(keep_sensors, bool):
        raise ValueError(f"`keep_sensors` must be a bool, got {keep_sensors!r}")
    path = _model_path(model_xml)
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except ValueError as exc:
        raise ValueError(f"`model_xml` {str(path)!r} is not a valid MJCF file: {_oneline(exc)}") from exc
    base = path.parent
    spec.meshdir = str((base / spec.meshdir).resolve()) if spec.meshdir else str(base.resolve())
    spec.texturedir = str((base / spec.texturedir).resolve()) if spec.texturedir else str(base.resolve())
    _check_names(spec, path)
    source = _compile(spec, path)
    _check_joints(source, path)
    _check_actuators(source, path, allow_none=True)
    own_floor = _own_floor(source, path)

    opt = spec.option
    for key, value in SIM_OPTIONS.items():
        setattr(opt, key, value)
    opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC

    for geom in spec.geoms:
        if geom.name == "floor" and own_floor:
            geom.contype, geom.conaffinity = 1, 1  # the model's own ground: kept as it is, made to collide
        elif _COLLISION.match(geom.name or ""):
            geom.contype, geom.conaffinity = 1, 1
            geom.solref[:] = COLLISION_SOLREF
            foot = bool(_FOOT.match(geom.name))
            geom.condim = 6 if foot else 1
            geom.priority = 1 if foot else 0
            if foot:
                geom.friction[:] = FOOT_FRICTION
        else:
            geom.contype, geom.conaffinity = 0, 0
    if not own_floor:
        floor = spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05])
        floor.contype, floor.conaffinity = 1, 1

    for actuator in list(spec.actuators):
        spec.delete(actuator)
    for name in JOINT_NAMES:
        kp, kv, armature = joint_gains(name)
        spec.joint(name).armature = armature
        act = spec.add_actuator(name=name, target=name)
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.dyntype = mujoco.mjtDyn.mjDYN_NONE
        act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        act.gainprm[0] = kp
        act.biasprm[:3] = [0.0, -kp, -kv]
        act.inheritrange = 0.0
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        effort = EFFORT_LIMIT[_part(name)]
        act.forcerange[:] = [-effort, effort]

    contact_names = [f"{leg}_foot_contact" for leg in LEGS]
    if keep_sensors:
        clash = [s.name for s in spec.sensors if s.name in contact_names]
        if clash:
            raise ValueError(
                f"`model_xml` {str(path)!r} has sensors named {clash}; with `keep_sensors=True` the names "
                f"{contact_names} must be free (the task adds its foot contact sensors under them)"
            )
    else:
        for sensor in list(spec.sensors):
            spec.delete(sensor)
    for leg, name in zip(LEGS, contact_names, strict=True):
        sensor = spec.add_sensor(name=name, type=mujoco.mjtSensor.mjSENS_CONTACT)
        sensor.objtype, sensor.objname = mujoco.mjtObj.mjOBJ_GEOM, f"{leg}_foot_collision"
        sensor.reftype, sensor.refname = mujoco.mjtObj.mjOBJ_GEOM, "floor"
        sensor.intprm[:3] = [3, 3, 1]  # data found|force, reduce netforce, one slot

    for key in list(spec.keys):
        spec.delete(key)
    _check_actuators(_compile(spec, path), path, allow_none=False)
    return spec.to_xml()


def _oneline(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _model_path(model_xml: str | Path | None) -> Path:
    """``model_xml`` as an existing file's path (``None``: this package's model)."""
    if model_xml is None:
        return GO1_XML
    if isinstance(model_xml, str) and model_xml.lstrip().startswith("<"):
        head = " ".join(model_xml.split())[:40]
        raise ValueError(
            f"`model_xml` must be the path of an MJCF file, got XML text ({head!r}..., {len(model_xml)} chars); "
            "write it to a file and pass that file's path"
        )
    path = Path(model_xml)
    if not path.is_file():
        raise FileNotFoundError(f"`model_xml` must be an MJCF file, got {str(model_xml)!r} (no such file)")
    return path


def _compile(spec: Any, path: Path) -> Any:
    try:
        return spec.compile()
    except ValueError as exc:
        raise ValueError(f"`model_xml` {str(path)!r} does not compile: {_oneline(exc)}") from exc


def _joint(m: Any, j: int) -> str:
    """A joint as the errors name it: ``'FR_hip_joint' (hinge) on body 'FR_hip'``."""
    import mujoco

    kind = _JOINT_KINDS[int(m.jnt_type[j])]
    body = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.jnt_bodyid[j]))
    return f"{mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)!r} ({kind}) on body {body!r}"


def _check_joints(m: Any, path: Path) -> None:
    """Joint 0: the trunk's free joint at qpos[0:7]; then exactly the 12 leg hinges, in order, each limited."""
    import mujoco

    where = f"`model_xml` {str(path)!r}"
    trunk = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "trunk")
    if m.njnt == 0 or not (
        m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE and m.jnt_qposadr[0] == 0 and m.jnt_bodyid[0] == trunk
    ):
        got = _joint(m, 0) if m.njnt else "no joint"
        raise ValueError(f"{where}: joint 0 must be the free joint of body 'trunk' (qpos[0:7]), got {got}")
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)]
    extra = [_joint(m, j) for j in range(1, m.njnt) if names[j] not in JOINT_NAMES]
    if extra:
        raise ValueError(
            f"{where}: expected {1 + len(JOINT_NAMES)} joints (the trunk's free joint and the 12 leg hinges), "
            f"got {m.njnt}; extra: {', '.join(extra)}"
        )
    if tuple(names[1:]) != JOINT_NAMES:
        raise ValueError(f"{where}: the leg joints must come in the order {list(JOINT_NAMES)}, got {names[1:]}")
    for j in range(1, m.njnt):
        if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            raise ValueError(f"{where}: joint {names[j]!r} must be a hinge, got {_JOINT_KINDS[int(m.jnt_type[j])]}")
        if not m.jnt_limited[j]:
            raise ValueError(f"{where}: joint {names[j]!r} must be limited (a range), got an unlimited hinge")


def _check_actuators(m: Any, path: Path, *, allow_none: bool) -> None:
    """Exactly one joint actuator per leg joint, in :data:`JOINT_NAMES` order (``allow_none``: or none)."""
    import mujoco

    if allow_none and m.nu == 0:
        return
    where = f"`model_xml` {str(path)!r}"
    legs = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in JOINT_NAMES]
    driven: dict[int, str] = {}
    for a in range(m.nu):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or f"#{a}"
        trn = mujoco.mjtTrn(int(m.actuator_trntype[a]))
        target = int(m.actuator_trnid[a, 0])
        if trn != mujoco.mjtTrn.mjTRN_JOINT or target not in legs:
            got = _joint(m, target) if trn == mujoco.mjtTrn.mjTRN_JOINT else f"transmission {trn.name}"
            raise ValueError(f"{where}: actuator {name!r} must drive one of the 12 leg joints, got {got}")
        if target in driven:
            raise ValueError(
                f"{where}: expected one actuator per leg joint, got actuator {name!r} driving "
                f"{JOINT_NAMES[legs.index(target)]!r} as well as actuator {driven[target]!r}"
            )
        driven[target] = name
    if m.nu != len(JOINT_NAMES):
        missing = [j for j, i in zip(JOINT_NAMES, legs, strict=True) if i not in driven]
        raise ValueError(
            f"{where}: expected {'no actuators or ' if allow_none else ''}12, one per leg joint, got {m.nu}; "
            f"none drives {missing}"
        )
    if not allow_none and list(driven) != legs:
        order = [JOINT_NAMES[legs.index(i)] for i in driven]
        raise ValueError(f"{where}: the actuators must drive {list(JOINT_NAMES)} in this order, got {order}")


def _own_floor(m: Any, path: Path) -> bool:
    """Whether the model has its own ``floor`` geom (on the world body, else refused)."""
    import mujoco

    gid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    if gid < 0:
        return False
    if m.geom_bodyid[gid] != 0:
        body = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.geom_bodyid[gid]))
        raise ValueError(
            f"`model_xml` {str(path)!r}: geom 'floor' must be on the world body (it is the ground the foot "
            f"contact sensors read), got it on body {body!r}"
        )
    return True


def _check_names(spec: object, path: Path) -> None:
    joints = {j.name for j in spec.joints}  # type: ignore[attr-defined]
    geoms = {g.name for g in spec.geoms}  # type: ignore[attr-defined]
    bodies = {b.name for b in spec.bodies}  # type: ignore[attr-defined]
    sites = {s.name for s in spec.sites}  # type: ignore[attr-defined]
    missing = [j for j in JOINT_NAMES if j not in joints]
    missing += [f"{leg}_foot_collision" for leg in LEGS if f"{leg}_foot_collision" not in geoms]
    missing += [name for name in ("trunk",) if name not in bodies]
    missing += [name for name in ("imu", *LEGS) if name not in sites]
    if missing:
        raise ValueError(
            f"`model_xml` {str(path)!r} must be a Go1 MJCF with mjlab's names; it lacks {missing} "
            f"(joints {list(JOINT_NAMES)}, geoms '<leg>_foot_collision', body 'trunk', sites 'imu' and {list(LEGS)})"
        )
