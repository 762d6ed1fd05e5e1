"""The Go1 task on the task layer reproduces the recorded rollout (CPU, masked path): observations and flags bit for
bit, rewards to float32 rounding."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco_warp", reason="the Go1 task needs the `mjwarp` extra")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HERE = Path(__file__).parent


def _recorder():
    spec = importlib.util.spec_from_file_location("record_reference", HERE / "record_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Rewards pass through exp and norms whose last bit differs between CPUs (vector width, libm); nothing feeds them
# back into the state, so they are compared to float32 rounding. The state and the flags are compared bit for bit.
ROUNDED = {"reward", "reward_terms"}


@pytest.mark.slow
def test_rollout_is_bit_identical_to_the_recording() -> None:
    recorder = _recorder()
    want = np.load(recorder.PATH)
    got = recorder.rollout()
    assert want["terminated"].sum() > 0 and want["truncated"].sum() > 0, "the recording must cover both resets"
    for key in want.files:
        if key in ROUNDED:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-6, atol=1e-9, err_msg=key)
            continue
        diff = np.argwhere(want[key] != got[key])
        at = tuple(diff[0]) if diff.size else ()
        assert diff.size == 0, f"{key} differs first at (step, row, ...) {at}: {want[key][at]} vs {got[key][at]}"
