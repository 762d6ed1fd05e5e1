"""The Go1 model of the velocity task: mjlab 1.6's actuator, collision and solver settings on any Go1 MJCF.

The robot's geometry and inertia come from an MJCF: by default this package's own primitive-geom model
(``go1.xml`` beside this module, written from Go1's public facts), or any Go1 MJCF with the same joint, geom and site
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
    "DEFAULT_JOINT_POS",
    "EFFORT_LIMIT",
    "FOOT_NAMES",
    "GO1_XML",
    "INIT_BASE_HEIGHT",
    "JOINT_NAMES",
    "NJMAX",
    "PHYSICS_DT",
    "VELOCITY_LIMIT",
    "BODY_CONTACT_GROUPS",
    "add_body_contact_sensors",
    "body_contact_sensors",
    "build_go1_xml",
    "default_joint_pos",
    "joint_gains",
]

GO1_XML = Path(__file__).parent / "go1.xml"
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


_COLLISION = r".*_collision\d*$"
_FOOT = r"^[FR][LR]_foot_collision$"


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
    spec, path = load_spec(model_xml, GO1_XML)
    _check_names(spec, path)
    source = compile_spec(spec, path)
    check_robot_joints(source, path, "trunk", JOINT_NAMES, "the 12 leg hinges")
    check_joint_actuators(source, path, JOINT_NAMES, "the 12 leg joints", allow_none=True)
    own_floor = has_own_floor(source, path)

    set_solver(spec, SIM_OPTIONS, elliptic=True)
    set_collisions(
        spec,
        own_floor=own_floor,
        collision=_COLLISION,
        foot=_FOOT,
        foot_condim=6,
        foot_friction=FOOT_FRICTION,
        solref=COLLISION_SOLREF,
    )
    replace_actuators(spec, JOINT_NAMES, joint_gains, lambda j: EFFORT_LIMIT[_part(j)])
    contact_names = [f"{leg}_foot_contact" for leg in LEGS]
    replace_sensors(spec, path, keep=keep_sensors, names=contact_names)
    for leg, name in zip(LEGS, contact_names, strict=True):
        sensor = spec.add_sensor(name=name, type=mujoco.mjtSensor.mjSENS_CONTACT)
        sensor.objtype, sensor.objname = mujoco.mjtObj.mjOBJ_GEOM, f"{leg}_foot_collision"
        sensor.reftype, sensor.refname = mujoco.mjtObj.mjOBJ_GEOM, "floor"
        sensor.intprm[:3] = [3, 3, 1]  # data found|force, reduce netforce, one slot

    for key in list(spec.keys):
        spec.delete(key)
    check_joint_actuators(compile_spec(spec, path), path, JOINT_NAMES, "the 12 leg joints", allow_none=False)
    return spec.to_xml()


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


BODY_CONTACT_GROUPS = {
    "thigh_ground_touch": r"{leg}_thigh_collision\d*",
    "shank_ground_touch": r"{leg}_calf_collision\d*",
    "trunk_ground_touch": r"(trunk|head)_collision",
}
"""mjlab's per-body-group contact sensors of the rough task: one MuJoCo contact sensor per matching geom."""


def body_contact_sensors(xml: str) -> dict[str, tuple[str, ...]]:
    """Each group of :data:`BODY_CONTACT_GROUPS` -> its sensors' names (``<group>/<geom>``) in the model ``xml``.

    One per geom of the model that matches the group (``{leg}`` runs over the legs), in model order: mjlab's
    ``go1.xml`` has three thigh capsules a leg, this package's model one.
    """
    import mujoco

    names = [g.name for g in mujoco.MjSpec.from_string(xml).geoms if g.name]
    groups = {}
    for group, pattern in BODY_CONTACT_GROUPS.items():
        regex = re.compile("|".join(f"(?:{pattern.format(leg=leg)})" for leg in LEGS))
        groups[group] = tuple(f"{group}/{n}" for n in names if regex.fullmatch(n))
    return groups


def add_body_contact_sensors(spec: Any, xml: str, against: str) -> None:
    """Add the :func:`body_contact_sensors` of ``xml`` to ``spec``, and the trunk's ``self_collision``.

    Each group sensor reads its geom against the body ``against`` (the terrain), ``self_collision`` the trunk's
    subtree against itself; each keeps the first contact, found and force.
    """
    import mujoco

    def sensor(name: str, kind: Any, obj: str, ref: Any, ref_name: str) -> None:
        s = spec.add_sensor(name=name, type=mujoco.mjtSensor.mjSENS_CONTACT)
        s.objtype, s.objname, s.reftype, s.refname = kind, obj, ref, ref_name
        s.intprm[:3] = [3, 0, 1]  # found|force, no reduction, one slot: the first contact (mjlab's reduce="none")

    for names in body_contact_sensors(xml).values():
        for name in names:
            sensor(name, mujoco.mjtObj.mjOBJ_GEOM, name.partition("/")[2], mujoco.mjtObj.mjOBJ_BODY, against)
    subtree = mujoco.mjtObj.mjOBJ_XBODY
    sensor("self_collision", subtree, "trunk", subtree, "trunk")
