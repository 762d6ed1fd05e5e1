"""Contact sensors with a substep history (``ContactSensorCfg.history_length``): what the physics records after
each substep is what a task stepped one substep at a time reads; bad settings are refused by name."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal

import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset.tasks import ManagerBasedEnv, TaskCfg, mdp, velocity_task
from tests.tasks.test_layer import ROBOT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

N, STEPS = 4, 8


def _task(decimation: int, history_length: int, air_time: Literal["substep", "step"] = "substep") -> TaskCfg:
    """The biped's velocity task without interval pushes (so that the two decimations see the same physics)."""
    cfg = velocity_task(ROBOT)
    feet = mdp.ContactSensorCfg(ROBOT.foot_contact_sensors, history_length=history_length, air_time=air_time)
    events = {k: e for k, e in cfg.events.items() if e.mode != "interval"}
    return replace(cfg, decimation=decimation, events=events).with_term("sensors", "feet_contact", feet)


@pytest.mark.slow
def test_history_holds_each_substep_s_force() -> None:
    """A step of 4 substeps keeps the force after each; the same task at decimation 1, stepped 4 times with the
    same action, reads those forces one by one (bit for bit on the CPU), and the sensor's ``force`` is the last."""
    env = ManagerBasedEnv(_task(4, 4), N, device="cpu", max_episode_steps=100)
    twin = ManagerBasedEnv(_task(1, 0), N, device="cpu", max_episode_steps=400)
    env.reset(seed=3)
    twin.reset(seed=3)
    assert torch.equal(env.qpos, twin.qpos)
    gen = torch.Generator().manual_seed(0)
    touched = 0.0
    for _ in range(STEPS):
        action = 0.3 * torch.randn(N, 2, generator=gen)
        env.step(action)
        feet = env.sensors["feet_contact"]
        assert feet.force_history is not None and feet.force_history.shape == (N, 2, 4, 3)
        for k in range(4):
            twin.step(action)
            assert torch.equal(feet.force_history[:, :, k], twin.sensors["feet_contact"].force), f"substep {k}"
        assert torch.equal(feet.force_history[:, :, -1], feet.force)
        touched = max(touched, float(feet.force_history.norm(dim=-1).max()))
    assert touched > 1.0  # the feet reached the floor: the comparison saw contact forces


TIMES = ("air_time", "contact_time", "last_air_time", "last_contact_time")


@pytest.mark.slow
def test_air_time_by_substep_is_what_a_task_stepped_one_substep_at_a_time_counts() -> None:
    """mjlab's air-time bookkeeping: the times after a 4-substep step equal those of the same task at decimation 1
    stepped 4 times (bit for bit on the CPU), and a first contact is a contact that began within the step."""
    env = ManagerBasedEnv(_task(4, 0), N, device="cpu", max_episode_steps=100)
    twin = ManagerBasedEnv(_task(1, 0, "step"), N, device="cpu", max_episode_steps=400)
    env.reset(seed=5)
    twin.reset(seed=5)
    gen = torch.Generator().manual_seed(1)
    landings = lifts = 0
    for _ in range(2 * STEPS):
        action = 0.6 * torch.randn(N, 2, generator=gen)
        env.step(action)
        for _ in range(4):
            twin.step(action)
        feet, ref = env.sensors["feet_contact"], twin.sensors["feet_contact"]
        for name in TIMES:
            assert torch.equal(getattr(feet, name), getattr(ref, name)), name
        began = (ref.contact_time > 0) & (ref.contact_time < 4 * twin.step_dt + 1e-6)
        assert torch.equal(feet.first_contact, began.float())
        landings += int(feet.first_contact.sum())
        lifts += int(((feet.air_time > 0) & (feet.air_time < env.step_dt)).sum())
    assert landings > 0 and lifts > 0  # the comparison saw feet land and lift off within a step


def test_air_time_by_substep_counts_a_landing_inside_the_step() -> None:
    """Flags after the 4 substeps (contact, air, contact, contact): 2 substeps of contact, an air phase ended, a
    first contact; counted by step, the same step is a contact continued from before."""
    env = ManagerBasedEnv(_task(4, 0), N, device="cpu", max_episode_steps=100)
    coarse = ManagerBasedEnv(_task(4, 0, "step"), N, device="cpu", max_episode_steps=100)
    dt = float(env.mjm.opt.timestep)
    record = env.sensors["feet_contact"]._substeps.view(N, 4, 2, 4)  # what the physics wrote after each substep
    record[..., 0] = torch.tensor([1.0, 0.0, 1.0, 1.0]).view(1, 4, 1)
    for e in (env, coarse):
        feet = e.sensors["feet_contact"]
        e.sensordata[:, feet._cols] = 0.0
        e.sensordata[:, feet._cols][:, ::4] = 1.0  # the last substep's flags (found, then the force's 3)
        feet.contact_time.fill_(e.step_dt)  # in contact through the step before
        feet.update()
    feet, by_step = env.sensors["feet_contact"], coarse.sensors["feet_contact"]
    torch.testing.assert_close(feet.contact_time, torch.full((N, 2), 2 * dt))
    # a phase's length counts the substep that ended it (mjlab's and Isaac Lab's rule)
    torch.testing.assert_close(feet.last_air_time, torch.full((N, 2), 2 * dt))
    torch.testing.assert_close(feet.last_contact_time, torch.full((N, 2), env.step_dt + 2 * dt))
    assert feet.first_contact.all() and feet.air_time.eq(0).all()
    torch.testing.assert_close(by_step.contact_time, torch.full((N, 2), 2 * env.step_dt))
    assert not by_step.first_contact.any() and by_step.last_air_time.eq(0).all()


def test_a_shorter_history_keeps_the_last_substeps_and_resets_clear_it() -> None:
    env = ManagerBasedEnv(_task(4, 4), N, device="cpu", max_episode_steps=100)
    short = ManagerBasedEnv(_task(4, 2), N, device="cpu", max_episode_steps=100)
    for e in (env, short):
        e.reset(seed=1)
        for _ in range(STEPS):
            e.step(torch.full((N, 2), 0.2))
    full, last2 = env.sensors["feet_contact"].force_history, short.sensors["feet_contact"].force_history
    assert full is not None and last2 is not None
    assert torch.equal(last2, full[:, :, 2:])
    short.reset(options={"reset_mask": torch.tensor([True, False, False, True])})
    assert last2[[0, 3]].abs().sum() == 0 and torch.equal(last2[[1, 2]], full[[1, 2], :, 2:])


@pytest.mark.parametrize(
    ("history_length", "message"),
    [(-1, "`history_length` must be an int >= 0, got -1"), (1.5, "`history_length` must be an int >= 0, got 1.5")],
)
def test_bad_history_length_is_refused(history_length: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        mdp.ContactSensorCfg(("left_contact",), history_length=history_length)  # type: ignore[arg-type]


@pytest.mark.parametrize("names", [(), "left_contact", ("left_contact", "")])
def test_bad_sensor_names_are_refused(names: object) -> None:
    """An empty tuple, a bare string (not iterated letter by letter) or an empty name."""
    with pytest.raises(ValueError, match=re.escape("`sensor_names` must be a non-empty tuple of sensor names")):
        mdp.ContactSensorCfg(names)  # type: ignore[arg-type]


def test_bad_air_time_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("`air_time` must be 'substep' or 'step', got 'frame'")):
        mdp.ContactSensorCfg(("left_contact",), air_time="frame")  # type: ignore[arg-type]


def test_history_longer_than_a_step_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("`history_length` 5 exceeds the task's decimation 4")):
        ManagerBasedEnv(_task(4, 5), N, device="cpu", max_episode_steps=10)


def test_record_substeps_is_refused_after_the_physics_ran() -> None:
    """Columns asked for once the physics ran would never be recorded (its graph is captured then)."""
    env = ManagerBasedEnv(_task(4, 0), N, device="cpu", max_episode_steps=10)
    with pytest.raises(ValueError, match=re.escape(f"in [0, {env.mjm.nsensordata}), got [{env.mjm.nsensordata}]")):
        env.record_substeps([env.mjm.nsensordata])
    with pytest.raises(ValueError, match=re.escape("a non-empty sequence of sensordata columns in")):
        env.record_substeps([0.5])  # type: ignore[list-item]  # not truncated to column 0
    env.step(torch.zeros(N, 2))
    with pytest.raises(RuntimeError, match="the physics has run already"):
        env.record_substeps([0])


@pytest.mark.parametrize(
    ("sensor", "message"),
    [
        ('<framequat name="q" objtype="body" objname="base"/>', "sensor 'q' is a mjSENS_FRAMEQUAT sensor"),
        (
            '<contact name="q" geom1="left_foot" data="found normal"/>',
            "contact sensor 'q' gives data ['found', 'normal']; it must give exactly [\"found\", \"force\"]",
        ),
    ],
    ids=["quaternion", "other-data"],
)
def test_a_four_value_sensor_that_is_not_found_force_is_refused(sensor: str, message: str) -> None:
    """Any sensor with 4 values was read as (found, force): a quaternion, a contact sensor's normal."""
    cfg = _task(4, 0)
    model = str(cfg.model).replace("</sensor>", f"{sensor}</sensor>")
    cfg = replace(cfg, model=model).with_term("sensors", "feet_contact", mdp.ContactSensorCfg(("q",)))
    with pytest.raises(ValueError, match=re.escape(message)):
        ManagerBasedEnv(cfg, N, device="cpu", max_episode_steps=10)
