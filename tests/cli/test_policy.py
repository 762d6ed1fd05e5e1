"""``play``'s OpenGL backend on a machine without a display."""

from __future__ import annotations

import os
import sys

import pytest

from gym_graphreset.cli.policy import headless_gl


@pytest.mark.parametrize(
    ("env", "imported", "expected"),
    [
        ({}, False, "egl"),  # headless, nothing chosen: EGL, not GLFW (a GLFWError without a display)
        ({"DISPLAY": ":0"}, False, None),  # a display: MuJoCo's own default
        ({"WAYLAND_DISPLAY": "wayland-0"}, False, None),
        ({"MUJOCO_GL": "osmesa"}, False, "osmesa"),  # the user's choice stays
        ({}, True, None),  # MuJoCo already chose its backend at import: too late to set it
    ],
)
def test_headless_play_picks_egl_unless_told_otherwise(
    env: dict[str, str], imported: bool, expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a display and without ``MUJOCO_GL``, ``play`` sets ``MUJOCO_GL=egl`` before MuJoCo is imported."""
    # a copy of the environment, restored after the test (delenv of an unset name would not restore what is set)
    environ = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL")}
    monkeypatch.setattr(os, "environ", {**environ, **env})
    monkeypatch.setattr(sys, "platform", "linux")
    if imported:
        monkeypatch.setitem(sys.modules, "mujoco", sys.modules.get("mujoco") or object())  # type: ignore[arg-type]
    else:
        monkeypatch.delitem(sys.modules, "mujoco", raising=False)
    headless_gl()
    assert os.environ.get("MUJOCO_GL") == expected
