"""Term params and config fields are checked where they are declared, by name: no zero std becomes a NaN reward."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gym_graphreset.managers import binding
from gym_graphreset.managers.binding import bind, ensure, require
from gym_graphreset.tasks import (
    CurriculumTerm,
    EventTerm,
    GaussianNoise,
    JointEffortAction,
    JointPositionAction,
    MetricTerm,
    ObsGroup,
    ObsTerm,
    RewardTerm,
    TerminationTerm,
    mdp,
    velocity_task,
)
from tests.tasks.test_layer import ROBOT

TASK = velocity_task(ROBOT)
POSITIVE = "a finite number > 0"
PER_JOINT = "a finite number > 0, or a per-joint {regex: number} of them"


@pytest.mark.parametrize("std", [0.0, -0.5, math.nan, math.inf, "0.5", True])
@pytest.mark.parametrize("name", ["track_linear_velocity", "track_angular_velocity", "upright"])
def test_a_tracking_or_upright_std_must_be_finite_and_positive(name: str, std: Any) -> None:
    term = TASK.rewards[name]
    with pytest.raises(ValueError) as info:
        TASK.replace_term("rewards", name, params={**term.params, "std": std})
    message = str(info.value)
    assert f"{name!r} param `std` must be {POSITIVE}, got {std!r}" in message, message


@pytest.mark.parametrize("field", ["std_standing", "std_walking", "std_running"])
@pytest.mark.parametrize("std", [0.0, -0.1, {".*": 0.0}, {r".*_calf": 0.1, ".*": math.nan}, {}])
def test_posture_stds_must_be_positive_per_joint(field: str, std: Any) -> None:
    term = TASK.rewards["pose"]
    with pytest.raises(ValueError, match=re.escape(f"param `{field}` must be {PER_JOINT}, got {std!r}")):
        TASK.replace_term("rewards", "pose", params={**term.params, field: std})


def test_the_bound_term_is_checked_again_by_its_name() -> None:
    """``bind`` checks too (a params dict changed after the term was declared), naming the term."""
    with pytest.raises(ValueError, match=re.escape(f"rewards['upright']: 'upright' param `std` must be {POSITIVE}")):
        bind(None, mdp.upright, {"std": 0.0}, "rewards['upright']")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("rewards['swing']: 'FootSwingHeight' param `target_height`")):
        params = {**TASK.rewards["foot_swing_height"].params, "target_height": 0.0}
        bind(None, mdp.FootSwingHeight, params, "rewards['swing']")  # type: ignore[arg-type]


def _event(name: str, **params: Any) -> Callable[[], Any]:
    return lambda: TASK.replace_term("events", name, params={**TASK.events[name].params, **params})


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (
            lambda: TASK.replace_term(
                "rewards", "foot_clearance", params={**TASK.rewards["foot_clearance"].params, "command_threshold": -1.0}
            ),
            "'feet_clearance' param `command_threshold` must be a finite number >= 0, got -1.0",
        ),
        (
            _event("foot_friction", spin=(0.0, 0.02)),
            "'randomize_geom_friction' param `spin` must be a finite (low, high) with low <= high, both > 0",
        ),
        (
            _event("foot_friction", slide=(1.2, 0.3)),
            "param `slide` must be a finite (low, high) with low <= high, both >= 0, got (1.2, 0.3)",
        ),
        (_event("push_robot", linear=(0.5, 0.5)), "param `linear` must be a tuple of 3 finite numbers >= 0"),
        (_event("base_com", offset=(0.1, -0.1, 0.1)), "param `offset` must be a tuple of 3 finite numbers >= 0"),
        (_event("encoder_bias", bias=math.nan), "param `bias` must be a finite number >= 0, got nan"),
        (_event("reset_base", z=(0.05, 0.01)), "param `z` must be a finite (low, high) with low <= high"),
        (
            lambda: TerminationTerm(mdp.bad_orientation, {"limit_angle": math.nan}),
            "TerminationTerm('bad_orientation'): 'bad_orientation' param `limit_angle` must be a finite number >= 0",
        ),
        (
            lambda: CurriculumTerm(mdp.reward_weight_by_step, {"term": "upright", "stages": ((10, 1.0),)}),
            "param `stages` must be ((first env step, weight), ...) starting at step 0",
        ),
        (lambda: RewardTerm(mdp.upright, math.nan, {"std": 0.5}), "RewardTerm('upright'): `weight` must be a finite"),
    ],
    ids=[
        "threshold",
        "log-range",
        "range-order",
        "push-size",
        "com-sign",
        "bias-nan",
        "z-order",
        "angle",
        "stages",
        "weight",
    ],
)
def test_other_term_params_are_refused_by_term_and_name(declare: Callable[[], Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        declare()


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (
            lambda: replace(TASK, episode_length_s=0.0),
            "TaskCfg: `episode_length_s` must be a finite number > 0, got 0.0",
        ),
        (lambda: replace(TASK, obs_clip=0.0), "TaskCfg: `obs_clip` must be a finite number > 0, got 0.0"),
        (lambda: replace(TASK, obs_clip=math.nan), "TaskCfg: `obs_clip` must be a finite number > 0, got nan"),
        (lambda: replace(TASK, soft_joint_limit_factor="1"), "TaskCfg: `soft_joint_limit_factor` must be in (0, 1]"),
        (lambda: replace(TASK, init_base_height=math.inf), "TaskCfg: `init_base_height` must be a finite number"),
        (
            lambda: replace(TASK, default_joint_pos={"left_hip": math.nan}),
            "TaskCfg: `default_joint_pos['left_hip']` must be a finite number, got nan",
        ),
        (lambda: replace(TASK, njmax=0), "TaskCfg: `njmax` must be None or an int >= 1, got 0"),
        (lambda: replace(TASK, refresh="kinematic"), "TaskCfg: `refresh` must be 'none', 'kinematics' or 'com'"),
        (lambda: ObsGroup({"x": ObsTerm(mdp.joint_vel)}, clip=0.0), "ObsGroup: `clip` must be a finite number > 0"),
        (lambda: ObsTerm(mdp.joint_vel, scale=math.nan), "ObsTerm('joint_vel'): `scale` must be a finite number or"),
        (lambda: ObsTerm(mdp.joint_vel, clip=(1.0, -1.0)), "ObsTerm('joint_vel'): `clip` must be a finite (low, high)"),
        (lambda: GaussianNoise(std=-1.0), "GaussianNoise: `std` must be a finite number >= 0, got -1.0"),
        (
            lambda: EventTerm(mdp.randomize_encoder_bias, "startup", {"bias": 0.01}, draws=True),
            "EventTerm('randomize_encoder_bias'): `draws` must be an int >= 0, got True",
        ),
        (
            lambda: TASK.replace_term("events", "push_robot", interval_range_s=(0.0, 1.0)),
            "`interval_range_s` must be a finite (low, high) with low <= high, both > 0, got (0.0, 1.0)",
        ),
        (
            lambda: JointPositionAction(("a", "b"), scale=(1.0,)),
            "JointPositionAction: `scale` has 1 values for 2 joints ['a', 'b']",
        ),
        (lambda: JointPositionAction(("a",), delay=-1), "JointPositionAction: `delay` must be an int >= 0, got -1"),
        (lambda: JointEffortAction(("a",), scale=math.inf), "JointEffortAction: `scale` must be a finite number"),
        (lambda: JointEffortAction(()), "JointEffortAction: `joint_names` must be a non-empty tuple of joint names"),
        (
            lambda: mdp.VelocityCommandCfg(forward_min_speed=-0.1),
            "VelocityCommandCfg: `forward_min_speed` must be a finite number >= 0, got -0.1",
        ),
        (
            lambda: mdp.VelocityCommandCfg(heading_stiffness=math.nan),
            "VelocityCommandCfg: `heading_stiffness` must be a finite number >= 0, got nan",
        ),
        (
            lambda: mdp.VelocityCommandCfg(velocity_stages=((0, (1.0, -1.0), (-0.5, 0.5)),)),
            "`velocity_stages` at step 0: the lin_vel_x range must be a finite (low, high) with low <= high",
        ),
        (
            lambda: replace(ROBOT, action_scale=(0.5,)),
            "LeggedRobot: `action_scale` must be a tuple of 2 finite numbers",
        ),
        (lambda: replace(ROBOT, init_base_height=math.nan), "LeggedRobot: `init_base_height` must be a finite number"),
    ],
)
def test_config_fields_are_refused_by_name(declare: Callable[[], Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        declare()


def test_valid_values_still_pass() -> None:
    """The shipped task declares every term within its rules; zero weights and a zero bias stay allowed."""
    task = velocity_task(ROBOT)
    assert task.rewards["upright"].params["std"] > 0
    task.replace_term("events", "encoder_bias", params={"bias": 0.0})
    task.replace_term("rewards", "upright", weight=0.0)
    replace(task, obs_clip=5, njmax=100, default_joint_pos={"left_hip": 0})


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (
            lambda: ObsGroup({"x": ObsTerm(mdp.joint_vel)}, concatenate="False"),  # type: ignore[arg-type]
            "ObsGroup: `concatenate` must be a bool (True or False), got 'False'",
        ),
        (
            lambda: ObsGroup({"x": ObsTerm(mdp.joint_vel)}, enable_corruption=0),  # type: ignore[arg-type]
            "ObsGroup: `enable_corruption` must be a bool (True or False), got 0",
        ),
        (
            lambda: ObsGroup({"x": mdp.joint_vel}),  # type: ignore[dict-item]
            "ObsGroup: `terms['x']` must be an ObsTerm, got function",
        ),
        (
            lambda: JointPositionAction(("a",), use_default_offset="no"),  # type: ignore[arg-type]
            "JointPositionAction: `use_default_offset` must be a bool (True or False), got 'no'",
        ),
        (
            lambda: JointPositionAction(("a",), subtract_encoder_bias=1),  # type: ignore[arg-type]
            "JointPositionAction: `subtract_encoder_bias` must be a bool (True or False), got 1",
        ),
        (lambda: EventTerm("reset_joints", "reset"), "EventTerm('reset_joints'): `func` must be callable"),
        (lambda: CurriculumTerm(None), "CurriculumTerm(None): `func` must be callable"),  # type: ignore[arg-type]
        (lambda: MetricTerm(3), "MetricTerm(3): `func` must be callable"),  # type: ignore[arg-type]
        (
            lambda: mdp.VelocityCommandCfg(velocity_stages=((0, (-1.0, 1.0)),)),  # type: ignore[arg-type]
            "VelocityCommandCfg: `velocity_stages[0]` must be (first env step: int >= 0, lin_vel_x (lo, hi)",
        ),
        (
            lambda: mdp.VelocityCommandCfg(velocity_stages=(0, (-1.0, 1.0), (-0.5, 0.5))),  # type: ignore[arg-type]
            "VelocityCommandCfg: `velocity_stages[0]` must be (first env step",
        ),
        (
            lambda: mdp.VelocityCommandCfg(velocity_stages=(("0", (-1.0, 1.0), (-0.5, 0.5)),)),  # type: ignore[arg-type]
            "VelocityCommandCfg: `velocity_stages[0]` must be (first env step",
        ),
    ],
)
def test_config_type_holes_are_refused_by_field(declare: Callable[[], Any], message: str) -> None:
    """Truthy strings as flags, terms that are not callable, malformed velocity stages: refused by field."""
    with pytest.raises(ValueError, match=re.escape(message)):
        declare()


def test_require_names_the_field_the_rule_and_the_value() -> None:
    """The one check every config field goes through: passes what the rule accepts, else names all three."""
    require("MyTerm", "std", 0.5, binding.POSITIVE)
    with pytest.raises(ValueError, match=re.escape(f"MyTerm: `std` must be {POSITIVE}, got 0.0")):
        require("MyTerm", "std", 0.0, binding.POSITIVE)
    ensure(True, "MyTerm", "unused")
    with pytest.raises(ValueError, match="^MyTerm: a group needs at least one term$"):
        ensure(False, "MyTerm", "a group needs at least one term")


def test_sensors_read_names_the_declared_sensors_with_their_defaults() -> None:
    """``sensors_read``: each declared sensor param's name, the function's default where a param is not given, an
    optional sensor left ``None`` omitted; a param not declared a sensor is not listed."""

    @binding.reads_sensors(scan=object, contacts=object, optional=object)
    def term(env: Any, scan: str = "terrain_scan", contacts: str = "feet", optional: str | None = None) -> None:
        """A term reading up to three sensors."""

    assert binding.sensors_read(term, {}) == {"scan": "terrain_scan", "contacts": "feet"}
    assert binding.sensors_read(term, {"contacts": "hands", "optional": "extra", "weight": 2.0}) == {
        "scan": "terrain_scan",
        "contacts": "hands",
        "optional": "extra",
    }
    assert binding.sensors_read(lambda env: None, {"scan": "x"}) == {}  # nothing declared
