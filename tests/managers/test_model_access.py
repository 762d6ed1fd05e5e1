"""Name lookups on the model: an unknown name is refused with its close matches first, then the model's names;
the phase cache: a value is read only in the phase that computed it."""

from __future__ import annotations

import re

import mujoco
import pytest
import torch

from gym_graphreset.managers.model_access import ModelAccess, PhaseCache

BOXES = "\n".join(f'<geom name="terrain_box_{k}" type="box" size="0.1 0.1 0.1" pos="{k} 0 0"/>' for k in range(300))
MODEL = f"""
<mujoco><worldbody>{BOXES}
  <body name="base"><freejoint/><geom name="left_foot" size="0.1"/><geom name="right_foot" size="0.1"/></body>
</worldbody></mujoco>
"""


class _Model(ModelAccess):
    def __init__(self) -> None:
        self.mjm = mujoco.MjModel.from_xml_string(MODEL)


def test_a_misspelled_geom_lists_close_matches_first_and_a_numbered_family_once() -> None:
    """The hint leads with the near names; 300 terrain boxes take one entry, not 300."""
    with pytest.raises(ValueError) as caught:
        _Model()._id(mujoco.mjtObj.mjOBJ_GEOM, "left_fot", "events['friction']")
    text = str(caught.value)
    expected = "events['friction']: the model has no geom 'left_fot'; close: ['left_foot']; "
    assert text.startswith(expected), text
    assert "terrain_box_0 ... terrain_box_299 (300 names)" in text and "terrain_box_17'" not in text
    assert len(text) < 400


def test_a_name_with_no_close_match_still_lists_the_model_s_names() -> None:
    message = "x: the model has no body 'trunk'; the model's bodies: ['world', 'base']"
    with pytest.raises(ValueError, match=re.escape(message)):
        _Model()._id(mujoco.mjtObj.mjOBJ_BODY, "trunk", "x")


def test_a_cached_value_is_read_only_in_the_phase_that_computed_it() -> None:
    """Within a phase ``compute`` runs once; a new phase (or ``invalidate``, which begins the current phase anew,
    keeping its rows) computes again; ``phase`` names the phase and an observation's rows."""
    env = _Model()
    env._cache = PhaseCache()
    calls: list[int] = []

    def compute() -> int:
        calls.append(len(calls))
        return len(calls)

    assert env.phase.name == "setup" and env.phase.rows is None
    assert env.cached("k", compute) == env.cached("k", compute) == 1
    rows = torch.tensor([True, False])
    env._cache.begin("observe", rows)
    assert (env.phase.name, env.phase.rows) == ("observe", rows)
    assert env.cached("k", compute) == env.cached("k", compute) == 2
    env.invalidate()
    assert (env.phase.name, env.phase.rows) == ("observe", rows)
    assert env.cached("k", compute) == 3
    env._cache.begin("observed")
    assert env.phase.rows is None and env.cached("k", compute) == 4
    assert calls == [0, 1, 2, 3]
