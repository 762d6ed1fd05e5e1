"""Building a task's model from a robot MJCF with ``mujoco.MjSpec``: the steps every robot's builder shares.

A robot module (Go1, G1) loads a user's or its own MJCF (:func:`load_spec`), checks its structure on the
compiled model (:func:`compile_spec`, :func:`check_robot_joints`, :func:`check_joint_actuators`), then
writes the task's settings into the spec: a position actuator per joint (:func:`add_position_actuator`), a
floor unless the model has its own (:func:`has_own_floor`, :func:`add_floor`). Errors name the file and
the element, so a user's model that does not fit says why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "FLOOR_TEXTURE",
    "add_floor",
    "add_position_actuator",
    "replace_actuators",
    "replace_sensors",
    "set_collisions",
    "set_solver",
    "check_joint_actuators",
    "check_robot_joints",
    "compile_spec",
    "has_own_floor",
    "load_spec",
    "model_path",
    "oneline",
]

_JOINT_KINDS = ("free", "ball", "slide", "hinge")


def oneline(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split())


def model_path(model_xml: str | Path | None, default: Path) -> Path:
    """``model_xml`` as an existing file's path (``None``: ``default``); XML text and missing files refused."""
    if model_xml is None:
        return default
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


def load_spec(model_xml: str | Path | None, default: Path) -> tuple[Any, Path]:
    """The ``MjSpec`` of ``model_xml`` (``None``: ``default``) with its mesh and texture folders made absolute."""
    import mujoco

    path = model_path(model_xml, default)
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except ValueError as exc:
        raise ValueError(f"`model_xml` {str(path)!r} is not a valid MJCF file: {oneline(exc)}") from exc
    base = path.parent
    spec.meshdir = str((base / spec.meshdir).resolve()) if spec.meshdir else str(base.resolve())
    spec.texturedir = str((base / spec.texturedir).resolve()) if spec.texturedir else str(base.resolve())
    return spec, path


def compile_spec(spec: Any, path: Path) -> Any:
    """``spec.compile()``, its error naming the file."""
    try:
        return spec.compile()
    except ValueError as exc:
        raise ValueError(f"`model_xml` {str(path)!r} does not compile: {oneline(exc)}") from exc


def joint_text(m: Any, j: int) -> str:
    """A joint as the errors name it: ``'FR_hip_joint' (hinge) on body 'FR_hip'``."""
    import mujoco

    kind = _JOINT_KINDS[int(m.jnt_type[j])]
    body = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.jnt_bodyid[j]))
    return f"{mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)!r} ({kind}) on body {body!r}"


def check_robot_joints(m: Any, path: Path, base_body: str, joint_names: Sequence[str], what: str) -> None:
    """Joint 0: ``base_body``'s free joint at qpos[0:7]; then exactly the limited hinges ``joint_names``, in order.

    ``what`` names the hinges in messages (e.g. ``"the 12 leg hinges"``).
    """
    import mujoco

    where = f"`model_xml` {str(path)!r}"
    base = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, base_body)
    if m.njnt == 0 or not (
        m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE and m.jnt_qposadr[0] == 0 and m.jnt_bodyid[0] == base
    ):
        got = joint_text(m, 0) if m.njnt else "no joint"
        raise ValueError(f"{where}: joint 0 must be the free joint of body {base_body!r} (qpos[0:7]), got {got}")
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)]
    extra = [joint_text(m, j) for j in range(1, m.njnt) if names[j] not in joint_names]
    if extra:
        raise ValueError(
            f"{where}: expected {1 + len(joint_names)} joints (the {base_body}'s free joint and {what}), "
            f"got {m.njnt}; extra: {', '.join(extra)}"
        )
    if tuple(names[1:]) != tuple(joint_names):
        raise ValueError(f"{where}: the joints must come in the order {list(joint_names)}, got {names[1:]}")
    for j in range(1, m.njnt):
        if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            raise ValueError(f"{where}: joint {names[j]!r} must be a hinge, got {_JOINT_KINDS[int(m.jnt_type[j])]}")
        if not m.jnt_limited[j]:
            raise ValueError(f"{where}: joint {names[j]!r} must be limited (a range), got an unlimited hinge")


def check_joint_actuators(m: Any, path: Path, joint_names: Sequence[str], what: str, *, allow_none: bool) -> None:
    """Exactly one joint actuator per joint of ``joint_names``, in that order (``allow_none``: or none at all)."""
    import mujoco

    if allow_none and m.nu == 0:
        return
    where = f"`model_xml` {str(path)!r}"
    joints = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in joint_names]
    driven: dict[int, str] = {}
    for a in range(m.nu):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or f"#{a}"
        trn = mujoco.mjtTrn(int(m.actuator_trntype[a]))
        target = int(m.actuator_trnid[a, 0])
        if trn != mujoco.mjtTrn.mjTRN_JOINT or target not in joints:
            got = joint_text(m, target) if trn == mujoco.mjtTrn.mjTRN_JOINT else f"transmission {trn.name}"
            raise ValueError(f"{where}: actuator {name!r} must drive one of {what}, got {got}")
        if target in driven:
            joint = joint_names[joints.index(target)]
            raise ValueError(
                f"{where}: expected one actuator per joint, got actuator {name!r} driving "
                f"{joint!r} as well as actuator {driven[target]!r}"
            )
        driven[target] = name
    if m.nu != len(joint_names):
        missing = [j for j, i in zip(joint_names, joints, strict=True) if i not in driven]
        raise ValueError(
            f"{where}: expected {'no actuators or ' if allow_none else ''}{len(joint_names)}, one per joint, "
            f"got {m.nu}; none drives {missing}"
        )
    if not allow_none and list(driven) != joints:
        order = [joint_names[joints.index(i)] for i in driven]
        raise ValueError(f"{where}: the actuators must drive {list(joint_names)} in this order, got {order}")


def has_own_floor(m: Any, path: Path) -> bool:
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


FLOOR_TEXTURE = "groundplane"
"""The name of the floor's checker texture and material (mjlab's): a robot walking shows against its squares."""


def add_floor(spec: Any) -> None:
    """A colliding ground plane named ``floor`` on the world body, with a checker material and a sky (visual only).

    The squares (edges marked) make motion visible in a video; the material and the gradient sky (added unless
    the model has a skybox) change no physics.
    """
    import mujoco

    if spec.texture(FLOOR_TEXTURE) is None:
        spec.add_texture(
            name=FLOOR_TEXTURE,
            type=mujoco.mjtTexture.mjTEXTURE_2D,
            builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
            rgb1=[0.2, 0.3, 0.4],
            rgb2=[0.1, 0.2, 0.3],
            mark=mujoco.mjtMark.mjMARK_EDGE,
            markrgb=[0.8, 0.8, 0.8],
            width=300,
            height=300,
        )
        material = spec.add_material(name=FLOOR_TEXTURE, texrepeat=[5, 5], texuniform=True, reflectance=0.2)
        material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = FLOOR_TEXTURE
        if not any(t.type == mujoco.mjtTexture.mjTEXTURE_SKYBOX for t in spec.textures):
            spec.add_texture(
                name="skybox",
                type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
                builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
                rgb1=[0.3, 0.5, 0.7],
                rgb2=[0.0, 0.0, 0.0],
                width=512,
                height=3072,
            )
    floor = spec.worldbody.add_geom(
        name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05], material=FLOOR_TEXTURE
    )
    floor.contype, floor.conaffinity = 1, 1


def add_position_actuator(spec: Any, joint: str, kp: float, kv: float, effort: float, armature: float) -> None:
    """A joint-position PD on ``joint``: mjlab's builtin position actuator, no control limit.

    Gain ``kp``, bias ``-kp q - kv qdot``, torque within ``+-effort``; ``armature`` set on the joint.
    """
    import mujoco

    spec.joint(joint).armature = armature
    act = spec.add_actuator(name=joint, target=joint)
    act.trntype = mujoco.mjtTrn.mjTRN_JOINT
    act.dyntype = mujoco.mjtDyn.mjDYN_NONE
    act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
    act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
    act.gainprm[0] = kp
    act.biasprm[:3] = [0.0, -kp, -kv]
    act.inheritrange = 0.0
    act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
    act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.forcerange[:] = [-effort, effort]


def set_solver(spec: Any, options: Mapping[str, float], *, elliptic: bool) -> None:
    """``options`` (timestep, iterations...) on ``spec.option``, with implicitfast, Newton and the cone type."""
    import mujoco

    opt = spec.option
    for key, value in options.items():
        setattr(opt, key, value)
    opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC if elliptic else mujoco.mjtCone.mjCONE_PYRAMIDAL


def set_collisions(
    spec: Any,
    *,
    own_floor: bool,
    collision: str,
    foot: str,
    foot_condim: int,
    foot_friction: Sequence[float],
    solref: Sequence[float] | None = None,
) -> None:
    """Only ``collision`` geoms and the floor collide; every other geom is visual. A floor is added if missing.

    ``collision`` and ``foot`` are regular expressions matched from the start of a geom's name. Collision geoms
    get condim 1 and priority 0, or ``foot_condim``, priority 1 and ``foot_friction`` (its first components)
    for the ``foot`` ones; ``solref`` on all of them when given.
    """
    for geom in spec.geoms:
        if geom.name == "floor" and own_floor:
            geom.contype, geom.conaffinity = 1, 1  # the model's own ground: kept as it is, made to collide
        elif re.match(collision, geom.name or ""):
            geom.contype, geom.conaffinity = 1, 1
            if solref is not None:
                geom.solref[:] = solref
            is_foot = bool(re.match(foot, geom.name))
            geom.condim, geom.priority = (foot_condim, 1) if is_foot else (1, 0)
            if is_foot:
                geom.friction[: len(foot_friction)] = foot_friction
        else:
            geom.contype, geom.conaffinity = 0, 0
    if not own_floor:
        add_floor(spec)


def replace_actuators(
    spec: Any, joints: Sequence[str], gains: Callable[[str], tuple[float, float, float]], effort: Callable[[str], float]
) -> None:
    """The model's own actuators replaced by a position actuator per joint of ``joints``, in that order.

    ``gains(j)``: kp, kv and armature of joint ``j``; ``effort(j)``: its torque limit.
    """
    for actuator in list(spec.actuators):
        spec.delete(actuator)
    for joint in joints:
        kp, kv, armature = gains(joint)
        add_position_actuator(spec, joint, kp, kv, effort(joint), armature)


def replace_sensors(spec: Any, path: Path, *, keep: bool, names: Sequence[str]) -> None:
    """The model's own sensors removed, or (``keep``) kept with the task's sensor ``names`` checked to be free."""
    if keep:
        clash = [s.name for s in spec.sensors if s.name in names]
        if clash:
            raise ValueError(
                f"`model_xml` {str(path)!r} has sensors named {clash}; with `keep_sensors=True` the names "
                f"{list(names)} must be free (the task adds its sensors under them)"
            )
    else:
        for sensor in list(spec.sensors):
            spec.delete(sensor)
