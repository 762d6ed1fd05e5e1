"""The G1 model of the velocity task: mjlab 1.6's actuator, collision and solver settings on any G1 MJCF.

The robot's geometry and inertia come from an MJCF: by default this package's own primitive-geom model
(``g1.xml`` beside this module, written from the G1's public facts), or any 29-DoF G1 MJCF with the same joint, body,
geom and site names (e.g. mjlab's ``asset_zoo/robots/unitree_g1/xmls/g1.xml``). :func:`build_g1_xml` then
applies, with ``mujoco.MjSpec``, what mjlab's G1 config sets in Python, so both models run under identical
settings:

- actuators: a joint-position PD per joint (MuJoCo ``position``-style), no control limit, torque limited;
  gains from a 10 Hz natural frequency and damping ratio 2 on the reflected inertia of the joint's motor
  (Unitree's 5020, 7520-14, 7520-22 and 4010 motors through their two-stage planetary gears; the waist
  roll/pitch and ankles run two 5020s, doubling gains, torque and armature), which is also the armature;
- collisions: every ``*_collision`` geom collides; the seven sole capsules of each foot get priority 1,
  condim 3 and sliding friction 0.6, the rest condim 1; every other geom does not collide;
- solver: 5 ms step, implicitfast, Newton, pyramidal cones, 10 iterations, 20 line-search iterations,
  50 CCD iterations; a ground plane (or the model's own world-body geom ``floor``);
- sensors: per foot a MuJoCo contact sensor of the ankle-roll link's subtree against the floor (found, net
  force), a self-collision contact sensor (the pelvis subtree against itself: found, first contact's force)
  and the whole body's angular momentum (``subtreeangmom`` of the pelvis); the model's own sensors are
  removed unless ``keep_sensors=True``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from gym_graphreset.envs.mjwarp.mjcf import (
    check_joint_actuators,
    check_robot_joints,
    compile_spec,
    has_own_floor,
    load_spec,
    replace_actuators,
    replace_sensors,
    set_collisions,
    set_solver,
)

__all__ = [
    "ACTION_SCALE",
    "ANGMOM_SENSOR",
    "DEFAULT_JOINT_POS",
    "EFFORT_LIMIT",
    "FOOT_CONTACT_SENSORS",
    "FOOT_GEOMS",
    "FOOT_SITES",
    "G1_XML",
    "INIT_BASE_HEIGHT",
    "JOINT_NAMES",
    "NJMAX",
    "SELF_COLLISION_SENSOR",
    "build_g1_xml",
    "joint_gains",
]

G1_XML = Path(__file__).parent / "g1.xml"
"""This package's own G1 MJCF (primitive geoms)."""

_LEG = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
_ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
JOINT_NAMES = (
    *(f"{side}_{j}_joint" for side in ("left", "right") for j in _LEG),
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    *(f"{side}_{j}_joint" for side in ("left", "right") for j in _ARM),
)
"""The 29 actuated joints in action order (the model's joint order: left leg, right leg, waist, left arm, right arm)."""

FOOT_SITES = ("left_foot", "right_foot")
"""Foot site names, in the order of every per-foot quantity."""
FOOT_GEOMS = tuple(f"{side}_foot{i}_collision" for side in ("left", "right") for i in range(1, 8))
"""The sole capsules (seven per foot)."""
_ANKLES = ("left_ankle_roll_link", "right_ankle_roll_link")
FOOT_CONTACT_SENSORS = ("left_foot_contact", "right_foot_contact")
"""The foot contact sensors the builder adds (found, net force against the floor), in foot order."""
SELF_COLLISION_SENSOR = "self_collision"
"""The self-collision contact sensor the builder adds (found, the first contact's force)."""
ANGMOM_SENSOR = "root_angmom"
"""The whole-body angular momentum sensor (``subtreeangmom`` of the pelvis; a model's own one of that name is used)."""

# Unitree's motors: rotor inertias of the two-stage planetary gear's three stages and the stage ratios.
_MOTORS = {
    "5020": ((0.139e-4, 0.017e-4, 0.169e-4), (1.0 + 46 / 18, 1.0 + 56 / 16), 25.0, 37.0),
    "7520_14": ((0.489e-4, 0.098e-4, 0.533e-4), (4.5, 1.0 + 48 / 22), 88.0, 32.0),
    "7520_22": ((0.489e-4, 0.109e-4, 0.738e-4), (4.5, 5.0), 139.0, 20.0),
    "4010": ((0.068e-4, 0.0, 0.0), (5.0, 5.0), 5.0, 22.0),
}
# joint pattern -> (motor, how many drive the joint: gains, torque and armature scale with it)
_JOINT_MOTOR = (
    (r".*_(elbow|shoulder_pitch|shoulder_roll|shoulder_yaw|wrist_roll)_joint", "5020", 1.0),
    (r".*_(hip_pitch|hip_yaw)_joint|waist_yaw_joint", "7520_14", 1.0),
    (r".*_(hip_roll|knee)_joint", "7520_22", 1.0),
    (r".*_(wrist_pitch|wrist_yaw)_joint", "4010", 1.0),
    (r"waist_(pitch|roll)_joint|.*_ankle_(pitch|roll)_joint", "5020", 2.0),
)
NATURAL_FREQ = 10.0 * 2.0 * math.pi
DAMPING_RATIO = 2.0
INIT_BASE_HEIGHT = 0.76
"""Spawn height of the pelvis [m] (reset adds 0.01-0.05 m), knees bent."""
DEFAULT_JOINT_POS = {
    **{f"{s}_{j}": v for s in ("left", "right") for j, v in (("hip_pitch_joint", -0.312), ("knee_joint", 0.669))},
    **{f"{s}_ankle_pitch_joint": -0.363 for s in ("left", "right")},
    **{f"{s}_elbow_joint": 0.6 for s in ("left", "right")},
    "left_shoulder_roll_joint": 0.2,
    "right_shoulder_roll_joint": -0.2,
    "left_shoulder_pitch_joint": 0.2,
    "right_shoulder_pitch_joint": 0.2,
}
"""The knees-bent standing pose [rad] (joints not listed: 0)."""
NJMAX = 300
"""Constraint rows per world (mjlab's flat G1 setting)."""
SIM_OPTIONS = {"timestep": 0.005, "impratio": 1.0, "iterations": 10, "ls_iterations": 20, "ccd_iterations": 50}
FOOT_FRICTION = 0.6


def _motor(joint: str) -> tuple[str, float]:
    for pattern, motor, count in _JOINT_MOTOR:
        if re.fullmatch(pattern, joint):
            return motor, count
    raise KeyError(joint)


def joint_gains(joint: str) -> tuple[float, float, float]:
    """``(kp, kv, armature)`` of a joint: PD gains on its motor's reflected inertia (times the motor count)."""
    motor, count = _motor(joint)
    (r1, r2, r3), (g1, g2), _, _ = _MOTORS[motor]
    armature = (r1 * (g1 * g2) ** 2 + r2 * g2**2 + r3) * count
    return armature * NATURAL_FREQ**2, 2.0 * DAMPING_RATIO * armature * NATURAL_FREQ, armature


EFFORT_LIMIT = {j: _MOTORS[_motor(j)[0]][2] * _motor(j)[1] for j in JOINT_NAMES}
"""Torque limit per joint [N m]."""
ACTION_SCALE = {j: 0.25 * EFFORT_LIMIT[j] / joint_gains(j)[0] for j in JOINT_NAMES}
"""Action scale per joint: a unit action moves the target by a quarter of the torque limit's worth."""

_COLLISION = r".*_collision$"
_FOOT = r"^(left|right)_foot[1-7]_collision$"


def build_g1_xml(model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> str:
    """The task's model as an MJCF string: the robot of ``model_xml`` with the settings listed above.

    Args:
        model_xml: A 29-DoF G1 MJCF path with mjlab's names (the joints of :data:`JOINT_NAMES`, body
            ``pelvis`` with the free joint, ``torso_link``, the ankle-roll links, sites ``imu_in_pelvis`` and
            :data:`FOOT_SITES`, sole geoms :data:`FOOT_GEOMS`); ``None``: this package's own model. Its own
            actuators (none, or one per joint) are replaced; a world-body geom named ``floor`` is used as
            the ground instead of adding one.
        keep_sensors: Keep the model's own sensors next to the task's (mjlab's ``g1.xml`` has five: an IMU's
            gyro, velocimeter, accelerometer, up vector and the angular momentum). Off by default: the task
            reads the IMU from the base's state, and MuJoCo Warp computes every sensor each substep.

    Raises:
        FileNotFoundError: ``model_xml`` does not exist.
        ValueError: ``model_xml`` is XML text, does not parse or compile, lacks a name the task needs, or has
            another structure (joints, order, limits, actuators, floor, sensor names); the message names it.
    """
    if not isinstance(keep_sensors, bool):
        raise ValueError(f"`keep_sensors` must be a bool, got {keep_sensors!r}")
    spec, path = load_spec(model_xml, G1_XML)
    _check_names(spec, path)
    source = compile_spec(spec, path)
    check_robot_joints(source, path, "pelvis", JOINT_NAMES, "the 29 hinges")
    check_joint_actuators(source, path, JOINT_NAMES, "the 29 joints", allow_none=True)
    own_floor = has_own_floor(source, path)

    set_solver(spec, SIM_OPTIONS, elliptic=False)
    set_collisions(
        spec, own_floor=own_floor, collision=_COLLISION, foot=_FOOT, foot_condim=3, foot_friction=(FOOT_FRICTION,)
    )
    replace_actuators(spec, JOINT_NAMES, joint_gains, EFFORT_LIMIT.__getitem__)
    _add_sensors(spec, path, keep_sensors)
    for key in list(spec.keys):
        spec.delete(key)
    check_joint_actuators(compile_spec(spec, path), path, JOINT_NAMES, "the 29 joints", allow_none=False)
    return spec.to_xml()


def _add_sensors(spec: Any, path: Path, keep_sensors: bool) -> None:
    """The foot contact, self-collision and angular-momentum sensors (the model's own kept or removed)."""
    import mujoco

    names = [*FOOT_CONTACT_SENSORS, SELF_COLLISION_SENSOR, ANGMOM_SENSOR]
    own = {s.name: s for s in spec.sensors} if keep_sensors else {}
    angmom = own.get(ANGMOM_SENSOR)
    if angmom is not None:  # the model's own angular momentum sensor is used if it is the pelvis subtree's
        if not (angmom.type == mujoco.mjtSensor.mjSENS_SUBTREEANGMOM and angmom.objname == "pelvis"):
            raise ValueError(
                f"`model_xml` {str(path)!r} has a sensor {ANGMOM_SENSOR!r} that is not the pelvis subtree's "
                "angular momentum; with `keep_sensors=True` that name is the task's"
            )
        names.remove(ANGMOM_SENSOR)
    replace_sensors(spec, path, keep=keep_sensors, names=names)
    add = spec.add_sensor
    for ankle, name in zip(_ANKLES, FOOT_CONTACT_SENSORS, strict=True):
        s = add(name=name, type=mujoco.mjtSensor.mjSENS_CONTACT)
        s.objtype, s.objname = mujoco.mjtObj.mjOBJ_XBODY, ankle  # the subtree of the ankle-roll link
        s.reftype, s.refname = mujoco.mjtObj.mjOBJ_GEOM, "floor"
        s.intprm[:3] = [3, 3, 1]  # data found|force, reduce netforce, one slot
    s = add(name=SELF_COLLISION_SENSOR, type=mujoco.mjtSensor.mjSENS_CONTACT)
    s.objtype, s.objname = mujoco.mjtObj.mjOBJ_XBODY, "pelvis"
    s.reftype, s.refname = mujoco.mjtObj.mjOBJ_XBODY, "pelvis"
    s.intprm[:3] = [3, 0, 1]  # data found|force, no reduction, one slot
    if ANGMOM_SENSOR in names:
        s = add(name=ANGMOM_SENSOR, type=mujoco.mjtSensor.mjSENS_SUBTREEANGMOM)
        s.objtype, s.objname = mujoco.mjtObj.mjOBJ_BODY, "pelvis"


def _check_names(spec: object, path: Path) -> None:
    joints = {j.name for j in spec.joints}  # type: ignore[attr-defined]
    geoms = {g.name for g in spec.geoms}  # type: ignore[attr-defined]
    bodies = {b.name for b in spec.bodies}  # type: ignore[attr-defined]
    sites = {s.name for s in spec.sites}  # type: ignore[attr-defined]
    missing = [j for j in JOINT_NAMES if j not in joints]
    missing += [g for g in FOOT_GEOMS if g not in geoms]
    missing += [b for b in ("pelvis", "torso_link", *_ANKLES) if b not in bodies]
    missing += [s for s in ("imu_in_pelvis", *FOOT_SITES) if s not in sites]
    if missing:
        raise ValueError(
            f"`model_xml` {str(path)!r} must be a 29-DoF G1 MJCF with mjlab's names; it lacks {missing} "
            f"(joints {list(JOINT_NAMES)}, geoms '<side>_foot<1-7>_collision', bodies 'pelvis', 'torso_link' and "
            f"{list(_ANKLES)}, sites 'imu_in_pelvis' and {list(FOOT_SITES)})"
        )
