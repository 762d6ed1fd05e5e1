"""``LeggedRobot.with_model``: a robot on another file of its model is one edit of its ``RobotModel``; a robot
whose model is a path or text is refused by name."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from gym_graphreset.assets.robot_model import RobotModel
from gym_graphreset.assets.robots.go1.model import build_go1_xml
from gym_graphreset.tasks.velocity.config.go1 import GO1


def test_with_model_edits_only_the_robot_model() -> None:
    variant = GO1.with_model("mjlab/go1.xml", keep_sensors=True)
    assert variant.model == RobotModel(build_go1_xml, "mjlab/go1.xml", keep_sensors=True)
    assert replace(variant, model=GO1.model) == GO1  # nothing else changed
    assert GO1.with_model() == GO1


def test_with_model_refuses_a_model_given_as_a_path() -> None:
    with pytest.raises(ValueError, match=re.escape("LeggedRobot: `model` is a str, not a RobotModel")):
        replace(GO1, model="robot.xml").with_model("other.xml")
