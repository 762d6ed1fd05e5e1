"""``RobotModel``: calling it runs its builder on the file it names; a model variant is one edit of it; bad
fields are refused by name when the model is made."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gym_graphreset.assets.robot_model import RobotModel


def test_a_variant_is_one_edit_that_the_builder_reads() -> None:
    calls: list[tuple[str | Path | None, bool]] = []

    def build(model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> str:
        calls.append((model_xml, keep_sensors))
        return f"<mujoco model='{model_xml}'/>"

    model = RobotModel(build)
    variant = replace(model, model_xml="go1.xml", keep_sensors=True)
    assert model() == "<mujoco model='None'/>" and variant() == "<mujoco model='go1.xml'/>"
    assert calls == [(None, False), ("go1.xml", True)]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("keep_sensors", "yes", "`keep_sensors` must be a bool, got 'yes'"),
        ("model_xml", 3, "`model_xml` must be a path (str or Path) or None, got int"),
    ],
)
def test_bad_fields_are_refused_by_name(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        RobotModel(lambda model_xml=None, *, keep_sensors=False: "", **{field: value})
