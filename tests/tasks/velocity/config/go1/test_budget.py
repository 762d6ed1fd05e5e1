"""The contact/constraint budget of a registered task: passed as ``make_vec`` keywords, bit for bit the same results
with a smaller budget that holds the task's contacts, and an overflow that is reported, never silent."""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import pytest
import torch

from gym_graphreset import DeferredValidationError, FixedShapeAutoresetVectorEnv
from gym_graphreset.tasks.velocity.config.go1 import Go1VelocityFlatEnv

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ENV_ID = "gym_graphreset/Go1-Velocity-Flat-v0"
N = 8
STEPS = 50
BUDGET = {"njmax": 64, "nconmax": 16}
"""What benchmarks/contact_budget.py suggests for this task (peak x 2, rounded up to 8); far below the task's
defaults (njmax 300, MuJoCo Warp's 48 contacts per world)."""


def _make(**kwargs: Any) -> Any:
    return gym.make_vec(ENV_ID, num_envs=N, vectorization_mode="vector_entry_point", device="cpu", **kwargs)


def _actions() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(N, 12, generator=gen) * 1.5 for _ in range(STEPS)]  # flailing: falls and body contacts


def _rollout(**budget: int) -> tuple[Any, list[tuple[torch.Tensor, ...]], dict[str, int]]:
    """Short episodes (time-outs every 12 steps, besides the falls), fixed seed, the same actions."""
    inner = _make(max_episode_steps=12, **budget)
    env = FixedShapeAutoresetVectorEnv(inner, "masked", validation_poll_interval=10)
    env.reset(seed=3)
    out, peak = [], {"rows": 0, "contacts": 0, "resets": 0}
    for a in _actions():
        obs, reward, terminated, truncated, _ = env.step(a)
        out.append(
            (obs["policy"], obs["critic"], reward, terminated, truncated, inner.qpos, inner.qvel)
        )  # fmt: skip
        out[-1] = tuple(t.clone() for t in out[-1])
        peak["rows"] = max(peak["rows"], int(inner.d.nefc.numpy().max()))
        peak["contacts"] = max(peak["contacts"], int(inner.d.nacon.numpy()[0]))
        peak["resets"] += int((terminated | truncated).sum())
    env.poll_finite_validation()  # neither run overflowed
    env.close()
    return inner, out, peak


def test_smaller_budget_gives_bit_identical_results() -> None:
    """The task with its shipped sizes and with a budget sized to its contacts: every output equal, bit for bit."""
    full, full_out, full_peak = _rollout()
    small, small_out, small_peak = _rollout(**BUDGET)
    assert (full.d.njmax, full.d.naconmax // N) == (300, 48)  # the shipped task, unchanged
    assert (small.d.njmax, small.d.naconmax) == (64, 16 * N)
    assert (small.cfg.njmax, small.cfg.nconmax) == (64, 16) and full.cfg.njmax == 300
    assert full_peak == small_peak
    assert full_peak["rows"] > 0 and full_peak["resets"] > N  # contacts and resets were exercised
    assert full_peak["rows"] <= 64 and full_peak["contacts"] <= 16 * N  # the smaller budget holds them
    names = ("policy obs", "critic obs", "reward", "terminated", "truncated", "qpos", "qvel")
    for step, (a, b) in enumerate(zip(full_out, small_out, strict=True)):
        for name, x, y in zip(names, a, b, strict=True):
            assert torch.equal(x, y), f"{name} differs at step {step}"


def _overflow_message(**budget: int) -> str:
    """What the poll raises after five steps of Go1 under ``budget`` (``njmax=`` / ``nconmax=``)."""
    env = FixedShapeAutoresetVectorEnv(_make(**budget), "masked", validation_poll_interval=1000)
    env.reset(seed=0)
    for a in _actions()[:5]:
        env.step(a)
    with pytest.raises(DeferredValidationError) as err:
        env.poll_finite_validation()
    return str(err.value)


def test_budget_too_small_for_the_rows_is_reported() -> None:
    """``njmax=4`` drops constraint rows: the poll names the check, the budget and the argument to raise."""
    text = _overflow_message(njmax=4)
    assert "mjwarp_overflow[NEFC]" in text
    assert "more constraint rows than njmax=4" in text and "pass a larger `njmax`" in text
    assert "benchmarks/contact_budget.py" in text
    assert re.search(r"\(first failed at step 0, row \d+ and \d+ more\)", text)  # from the first step, worlds named


def test_budget_too_small_for_the_contacts_is_reported() -> None:
    """``nconmax=1`` (8 slots for all worlds): the contact overflow names the pool and ``nconmax``."""
    text = _overflow_message(nconmax=1)
    assert "mjwarp_overflow[BROADPHASE]" in text
    assert "naconmax=8 slots (nconmax=1 per world x 8 worlds, one pool)" in text
    assert "pass a larger `nconmax`" in text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"njmax": 0}, "`njmax` must be None (MuJoCo Warp's default) or an int >= 1, got 0"),
        ({"nconmax": -3}, "`nconmax` must be None (MuJoCo Warp's default) or an int >= 1, got -3"),
        ({"njmax": 64.0}, "`njmax` must be None (MuJoCo Warp's default) or an int >= 1, got 64.0"),
        ({"nconmax": "16"}, "`nconmax` must be None (MuJoCo Warp's default) or an int >= 1, got '16'"),
        ({"njmax": True}, "`njmax` must be None (MuJoCo Warp's default) or an int >= 1, got True"),
    ],
)
def test_bad_budget_is_refused_by_name(kwargs: dict[str, Any], message: str) -> None:
    """Refused before anything is built, naming the argument, what is accepted and what came."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _make(**kwargs)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Go1VelocityFlatEnv(2, device="cpu", **kwargs)


def test_budget_through_the_env_class_and_none_is_mujoco_warps_default() -> None:
    """The task's env class takes the same keywords; ``None`` asks for MuJoCo Warp's own default."""
    env = Go1VelocityFlatEnv(2, device="cpu", njmax=None, nconmax=24)
    assert env.cfg.njmax is None and env.cfg.nconmax == 24
    assert env.d.naconmax == 24 * 2 and env.d.njmax not in (300, None)  # MuJoCo Warp's heuristic, not the task's
