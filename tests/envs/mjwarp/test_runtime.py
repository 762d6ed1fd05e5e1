"""The warp runtime: quiet by default (no per-module load lines on construction and first steps), verbose on request."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("mujoco_warp", reason="MuJoCo Warp is the optional `mjwarp` extra")

SCRIPT = """
import sys, torch, gymnasium as gym
import gym_graphreset
env = gym.make_vec("gym_graphreset/InvertedPendulum-v5", num_envs=2, vectorization_mode="vector_entry_point",
                   device="cpu", warp_verbose=sys.argv[1] == "1")
env.reset(seed=0)
env.step(torch.zeros(2, 1))
"""


def _module_lines(verbose: bool) -> int:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, "1" if verbose else "0"], capture_output=True, text=True, check=True
    )
    return sum("Module " in line and " load on device" in line for line in (out.stdout + out.stderr).splitlines())


@pytest.mark.slow
def test_module_loads_are_quiet_by_default_and_shown_on_request() -> None:
    assert _module_lines(verbose=False) == 0
    assert _module_lines(verbose=True) > 0
