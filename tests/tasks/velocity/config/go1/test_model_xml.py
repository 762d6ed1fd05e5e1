"""Go1 ``model_xml``: the structure check (joints, order, limits, actuators), errors that name the file and the
cause (malformed file, XML text, the model's own floor), and ``keep_sensors`` (the model's own sensors)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from gym_graphreset.assets.robots.go1.model import GO1_XML, JOINT_NAMES, build_go1_xml
from gym_graphreset.bench.peers.compare import parse_variant
from gym_graphreset.tasks.velocity.config.go1 import Go1VelocityFlatEnv

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SRC = GO1_XML.read_text()
"""This package's own Go1 MJCF; the fixtures below are edits of its text."""

MJLAB_SENSORS = """
  <sensor>
    <gyro name="gyro" site="imu"/>
    <velocimeter name="local_linvel" site="imu"/>
    <accelerometer name="accelerometer" site="imu"/>
    <framezaxis name="upvector" objtype="site" objname="imu"/>
    <framequat name="orientation" objtype="site" objname="imu"/>
  </sensor>
"""
"""Five IMU sensors, as mjlab's ``go1.xml`` has."""


def _edit(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return edit


def _legs_swapped(text: str) -> str:
    """The right-front and left-front legs' bodies in the other order (FL's joints come first)."""
    start, mid, end = (text.index(f"<!-- {leg} -->") for leg in ("right front", "left front", "right hind"))
    return text[:start] + text[mid:end] + text[start:mid] + text[end:]


def _write(tmp_path: Path, text: str, name: str = "go1.xml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


TAIL = '<body name="tail" pos="-0.2 0 0"><joint name="tail_joint" axis="0 1 0" range="-1 1"/><geom size=".02"/></body>'
LEG_ACTUATORS = "".join(f'<position name="{j}_act" joint="{j}" kp="10"/>' for j in JOINT_NAMES)

DEFECTS = {
    "no_free_base_joint": (
        _edit('<freejoint name="floating_base_joint"/>', ""),
        "joint 0 must be the free joint of body 'trunk' (qpos[0:7]), got 'FR_hip_joint' (hinge) on body 'FR_hip'",
    ),
    "other_free_body_first": (
        _edit(
            '<body name="trunk"',
            '<body name="crate" pos="1 0 0.1"><freejoint name="crate_free"/><geom type="box" size=".05 .05 .05"/>'
            '</body><body name="trunk"',
        ),
        "joint 0 must be the free joint of body 'trunk' (qpos[0:7]), got 'crate_free' (free) on body 'crate'",
    ),
    "slide_leg_joint": (
        _edit(
            '<joint name="FR_thigh_joint" class="hipjoint"/>',
            '<joint name="FR_thigh_joint" class="hipjoint" type="slide"/>',
        ),
        "joint 'FR_thigh_joint' must be a hinge, got slide",
    ),
    "ball_leg_joint": (
        _edit('<joint name="RL_calf_joint" class="knee"/>', '<joint name="RL_calf_joint" type="ball" range="0 1"/>'),
        "joint 'RL_calf_joint' must be a hinge, got ball",
    ),
    "unlimited_leg_joint": (
        _edit(
            '<joint name="FR_calf_joint" class="knee"/>', '<joint name="FR_calf_joint" class="knee" limited="false"/>'
        ),
        "joint 'FR_calf_joint' must be limited (a range), got an unlimited hinge",
    ),
    "thirteenth_actuated_joint": (
        lambda t: _edit("</worldbody>", '</worldbody><actuator><motor name="tail" joint="tail_joint"/></actuator>')(
            _edit("<!-- left hind -->", TAIL)(t)
        ),
        "expected 13 joints (the trunk's free joint and the 12 leg hinges), got 14; "
        "extra: 'tail_joint' (hinge) on body 'tail'",
    ),
    "legs_out_of_order": (
        _legs_swapped,
        f"the joints must come in the order {list(JOINT_NAMES)}, got ['FL_hip_joint'",
    ),
    "thirteenth_actuator": (
        _edit(
            "</worldbody>",
            f'</worldbody><actuator>{LEG_ACTUATORS}<motor name="extra" joint="FR_hip_joint"/></actuator>',
        ),
        "expected one actuator per joint, got actuator 'extra' driving 'FR_hip_joint' as well as actuator "
        "'FR_hip_joint_act'",
    ),
    "actuator_off_the_legs": (
        _edit("</worldbody>", '</worldbody><actuator><motor name="thrust" site="imu" gear="0 0 1 0 0 0"/></actuator>'),
        "actuator 'thrust' must drive one of the 12 leg joints, got transmission mjTRN_SITE",
    ),
}


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_model_structure_is_checked(tmp_path: Path, defect: str) -> None:
    """Each defect that compiled and stepped with wrong physics is refused, naming the file and the element."""
    edit, message = DEFECTS[defect]
    path = _write(tmp_path, edit(SRC))
    with pytest.raises(ValueError, match=re.escape(f"`model_xml` {str(path)!r}: {message}")):
        build_go1_xml(path)


def test_go1_structure_is_accepted(tmp_path: Path) -> None:
    """Controls: the package's model, and one with its own 12 leg actuators (replaced by the task's PD)."""
    import mujoco

    m = mujoco.MjModel.from_xml_string(build_go1_xml())
    assert m.njnt == 13 and m.nu == 12 and m.nsensor == 4
    path = _write(tmp_path, _edit("</worldbody>", f"</worldbody><actuator>{LEG_ACTUATORS}</actuator>")(SRC))
    own = mujoco.MjModel.from_xml_string(build_go1_xml(path))
    assert np.array_equal(own.actuator_gainprm, m.actuator_gainprm)
    assert [mujoco.mj_id2name(own, mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in range(own.nu)] == list(JOINT_NAMES)


def test_malformed_file_and_xml_text_are_named(tmp_path: Path) -> None:
    """A file that does not parse names its path; XML text passed as ``model_xml`` is told to be a path."""
    path = _write(tmp_path, SRC[:200], "broken.xml")
    with pytest.raises(ValueError, match=re.escape(f"`model_xml` {str(path)!r} is not a valid MJCF file: XML parse")):
        build_go1_xml(path)
    for text in (SRC, "<mujoco/>"):
        with pytest.raises(ValueError, match=r"`model_xml` must be the path of an MJCF file, got XML text \('<"):
            build_go1_xml(text)


def test_models_own_floor_is_used(tmp_path: Path) -> None:
    """A world geom ``floor`` is the ground (no second one is added; the contact sensors read it)."""
    import mujoco

    floor = '<geom name="floor" type="plane" size="5 5 0.1" friction="0.7 0.005 0.0001" contype="0"/>'
    m = mujoco.MjModel.from_xml_string(
        build_go1_xml(_write(tmp_path, _edit("<worldbody>", f"<worldbody>{floor}")(SRC)))
    )
    gid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    planes = np.flatnonzero(m.geom_type == mujoco.mjtGeom.mjGEOM_PLANE)
    assert planes.tolist() == [gid] and np.allclose(m.geom_size[gid], [5, 5, 0.1])
    assert np.allclose(m.geom_friction[gid], [0.7, 0.005, 0.0001]) and m.geom_contype[gid] == 1
    assert (m.sensor_refid == gid).all()
    box = '<geom name="floor" type="box" size=".1 .1 .01"/>'
    on_trunk = _write(tmp_path, _edit('<site name="imu"', f'{box}<site name="imu"')(SRC), "trunk_floor.xml")
    with pytest.raises(
        ValueError, match=re.escape(f"`model_xml` {str(on_trunk)!r}: geom 'floor' must be on the world body")
    ):
        build_go1_xml(on_trunk)


def test_keep_sensors_keeps_the_models_own_sensors(tmp_path: Path) -> None:
    """Default: only the 4 foot contact sensors; ``keep_sensors``: the model's 5 too, and the env steps."""
    import mujoco

    path = _write(tmp_path, _edit("</mujoco>", f"{MJLAB_SENSORS}</mujoco>")(SRC))
    stripped = mujoco.MjModel.from_xml_string(build_go1_xml(path))
    kept = mujoco.MjModel.from_xml_string(build_go1_xml(path, keep_sensors=True))
    own = ["gyro", "local_linvel", "accelerometer", "upvector", "orientation"]
    assert stripped.nsensor == 4 and all(mujoco.mj_name2id(stripped, mujoco.mjtObj.mjOBJ_SENSOR, s) < 0 for s in own)
    assert kept.nsensor == 9 and all(mujoco.mj_name2id(kept, mujoco.mjtObj.mjOBJ_SENSOR, s) >= 0 for s in own)
    assert mujoco.MjModel.from_xml_string(build_go1_xml(keep_sensors=True)).nsensor == 4  # own model: none

    # the bench's `--variant LABEL:model_xml=...,keep_sensors=true` reaches the env through gym.make_vec
    variant = parse_variant(f"mjlab-go1-sensors:model_xml={path},keep_sensors=true")
    assert variant.kwargs == {"model_xml": str(path), "keep_sensors": True}
    env = gym.make_vec(
        "gym_graphreset/Go1-Velocity-Flat-v0",
        num_envs=2,
        vectorization_mode="vector_entry_point",
        device="cpu",
        **variant.kwargs,
    )
    assert isinstance(env, Go1VelocityFlatEnv) and env.keep_sensors and env.mjm.nsensor == 9
    env.reset(seed=0)
    for _ in range(5):
        env.step(torch.zeros(2, 12))
    adr = int(env.mjm.sensor_adr[mujoco.mj_name2id(env.mjm, mujoco.mjtObj.mjOBJ_SENSOR, "accelerometer")])
    accel = env.sensordata[:, adr : adr + 3]
    assert torch.isfinite(env.qpos).all() and (accel.norm(dim=1) > 5.0).all()  # gravity's reaction, computed
    assert (env.in_contact == 1).all()  # the foot contact columns are still the feet's


def test_keep_sensors_errors(tmp_path: Path) -> None:
    """A kept sensor under a foot contact sensor's name, a non-bool flag, or a cfg with the flag: named errors."""
    clash = _write(
        tmp_path, _edit("</mujoco>", '<sensor><touch name="FR_foot_contact" site="FR"/></sensor></mujoco>')(SRC)
    )
    with pytest.raises(
        ValueError, match=re.escape(f"`model_xml` {str(clash)!r} has sensors named ['FR_foot_contact']")
    ):
        build_go1_xml(clash, keep_sensors=True)
    build_go1_xml(clash)  # stripped: no clash
    with pytest.raises(ValueError, match=re.escape("`keep_sensors` must be a bool, got 'yes'")):
        build_go1_xml(keep_sensors="yes")  # type: ignore[arg-type]
    from gym_graphreset.tasks.velocity.config.go1 import go1_velocity_flat_cfg

    with pytest.raises(ValueError, match=re.escape("give `keep_sensors` or `cfg`, not both")):
        Go1VelocityFlatEnv(1, device="cpu", cfg=go1_velocity_flat_cfg(), keep_sensors=True)
