"""The Go1 task on the task layer reproduces the recorded rollout bit for bit (CPU, masked path)."""

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


@pytest.mark.slow
def test_rollout_is_bit_identical_to_the_recording() -> None:
    recorder = _recorder()
    want = np.load(recorder.PATH)
    got = recorder.rollout()
    assert want["terminated"].sum() > 0 and want["truncated"].sum() > 0, "the recording must cover both resets"
    for key in want.files:
        diff = np.argwhere(want[key] != got[key])
        at = tuple(diff[0]) if diff.size else ()
        assert diff.size == 0, f"{key} differs first at (step, row, ...) {at}: {want[key][at]} vs {got[key][at]}"
