"""mjlab's reset-time ``Metrics/<command>/<key>`` and ``Curriculum/<term>/mean|max`` (``ResetMetricLog``): exact
values from fixed steps, and on the motion tracking task the metrics it reads are mjlab's keys, computed as
mjlab's ``MotionCommand._update_metrics`` does."""

from __future__ import annotations

import math
import re

import pytest
import torch

from gym_graphreset.integrations.common import ResetMetricLog
from gym_graphreset.testing.host_reads import assert_no_host_reads

KEYS = ("command/motion/a", "command/motion/b")
TAGS = ["Metrics/motion/a", "Metrics/motion/b", "Curriculum/terrain_levels/mean", "Curriculum/terrain_levels/max"]


def _log(levels: torch.Tensor) -> ResetMetricLog:
    return ResetMetricLog(KEYS, ("terrain_levels",), {"terrain_levels": levels}, 3, torch.device("cpu"))


def _step(
    log: ResetMetricLog, levels: torch.Tensor, a: list[float], b: list[float], done: list[bool], now: list[float]
) -> None:
    levels.copy_(torch.tensor(now))
    info = {"metrics": {KEYS[0]: torch.tensor(a), KEYS[1]: torch.tensor(b)}}
    log.add(info, torch.tensor(done))


def test_reset_rows_log_the_step_befores_metrics_and_every_envs_levels() -> None:
    """A reset step logs its reset rows' metrics of the step before and the levels over all envs after it; the
    entries are averaged over the steps with resets (steps without are not samples); no host read."""
    levels = torch.zeros(3)
    log = _log(levels)
    assert list(log.tags) == TAGS
    _step(log, levels, [1, 2, 3], [10, 20, 30], [False, False, False], [0, 1, 2])  # no reset: no sample
    _step(log, levels, [4, 5, 6], [40, 50, 60], [True, False, True], [1, 1, 3])  # rows 0, 2: a 2, b 20
    _step(log, levels, [7, 8, 9], [70, 80, 90], [False, False, False], [1, 1, 3])
    _step(log, levels, [0, 0, 0], [0, 0, 0], [False, True, False], [1, 0, 3])  # row 1: a 8, b 80
    info, done = {"metrics": {k: torch.zeros(3) for k in KEYS}}, torch.zeros(3, dtype=torch.bool)  # no reset

    def no_reset_step() -> None:
        log.add(info, done)
        log.means(clear=False)

    assert_no_host_reads(no_reset_step)
    means = {k: v.item() for k, v in log.means(clear=False).items()}
    assert list(means) == TAGS
    assert means["Metrics/motion/a"] == pytest.approx((2 + 8) / 2)
    assert means["Metrics/motion/b"] == pytest.approx((20 + 80) / 2)
    assert means["Curriculum/terrain_levels/mean"] == pytest.approx((5 / 3 + 4 / 3) / 2)
    assert means["Curriculum/terrain_levels/max"] == pytest.approx(3.0)
    assert all(v.shape == () for v in log.means().values())  # cleared
    assert all(math.isnan(v.item()) for v in log.means().values())  # no reset since


def test_a_non_finite_metric_of_a_row_that_does_not_end_stays_out_of_the_mean() -> None:
    """mjlab averages the reset rows alone: a NaN or inf in another row does not reach the logged mean."""
    levels = torch.zeros(3)
    log = _log(levels)
    _step(log, levels, [1, math.nan, 3], [10, math.inf, 30], [False, False, False], [0, 0, 0])
    _step(log, levels, [0, 0, 0], [0, 0, 0], [True, False, True], [0, 0, 0])  # rows 0, 2 end
    means = {k: v.item() for k, v in log.means().items()}
    assert means["Metrics/motion/a"] == pytest.approx(2.0) and means["Metrics/motion/b"] == pytest.approx(20.0)


def test_a_reset_at_the_first_step_logs_that_steps_values() -> None:
    """Before any step there is no step before: the first step's own values stand in."""
    levels = torch.tensor([2.0, 0.0, 1.0])
    log = _log(levels)
    _step(log, levels, [1, 2, 3], [10, 20, 30], [False, True, False], [2, 0, 1])
    means = log.means()
    assert means["Metrics/motion/a"].item() == pytest.approx(2.0)
    assert means["Metrics/motion/b"].item() == pytest.approx(20.0)
    assert means["Curriculum/terrain_levels/mean"].item() == pytest.approx(1.0)


def test_metrics_alone_and_bad_arguments() -> None:
    """A log of metrics alone has no curriculum entries; keys not shaped as info's command metrics, and curricula
    without their values, are refused by name."""
    log = ResetMetricLog(KEYS, (), None, 2, torch.device("cpu"))
    log.add({"metrics": {KEYS[0]: torch.tensor([1.0, 3.0]), KEYS[1]: torch.zeros(2)}}, torch.tensor([True, True]))
    assert {k: v.item() for k, v in log.means().items()} == {"Metrics/motion/a": 2.0, "Metrics/motion/b": 0.0}
    with pytest.raises(ValueError, match=re.escape("'command/<command>/<key>', got ['error_body_pos']")):
        ResetMetricLog(("error_body_pos",), (), None, 2, torch.device("cpu"))
    with pytest.raises(ValueError, match=re.escape("`values` (the curriculum values) is needed")):
        ResetMetricLog((), ("terrain_levels",), None, 2, torch.device("cpu"))


@pytest.mark.slow
def test_motion_tracking_logs_mjlabs_metrics_computed_as_mjlab() -> None:
    """On G1 tracking the log reads the motion command's 13 mjlab metrics; the anchor velocity errors added for
    mjlab's keys are the norms of the clip's minus the robot's anchor velocities (``_update_metrics``); a reset
    step logs each reset row's values of the step before."""
    from gym_graphreset import FixedShapeAutoresetVectorEnv
    from gym_graphreset.tasks.tracking.config.g1.flat_env_cfg import G1TrackingFlatEnv
    from gym_graphreset.tasks.tracking.motion_command import MotionCommand

    inner = G1TrackingFlatEnv(4, device="cpu", max_episode_steps=3)
    env = FixedShapeAutoresetVectorEnv(inner, "masked")
    log = ResetMetricLog.for_env(env)
    assert log is not None and log.curricula == ()
    assert log.metrics == tuple(f"command/motion/{k}" for k in MotionCommand.mjlab_metrics)
    env.reset(seed=0)
    motion = inner.motion
    actions = torch.zeros(4, len(inner.joint_names))
    infos = []
    for _ in range(3):  # the third step ends every episode (horizon 3)
        _, _, terminated, truncated, info = env.step(actions)
        log.add(info, terminated | truncated)
        infos.append(info)
        metrics = info["metrics"]
        assert sorted(k for k in metrics if k.startswith("command/")) == sorted(log.metrics)
    assert (terminated | truncated).all()
    before = infos[1]["metrics"]  # the step before the reset
    means = log.means()
    for key in MotionCommand.mjlab_metrics:
        assert means[f"Metrics/motion/{key}"].item() == pytest.approx(before[f"command/motion/{key}"].mean().item())
    # the anchor velocity errors of a fresh step, from the clip and the robot directly
    env.step(actions)
    metrics = motion.metrics()
    _, _, lin, ang = motion.robot_bodies()
    a = motion.anchor
    lin_error = (motion.motion_bodies("body_lin_vel_w")[:, a] - lin[:, a]).norm(dim=-1)
    ang_error = (motion.motion_bodies("body_ang_vel_w")[:, a] - ang[:, a]).norm(dim=-1)
    torch.testing.assert_close(metrics["error_anchor_lin_vel"], lin_error)
    torch.testing.assert_close(metrics["error_anchor_ang_vel"], ang_error)
    assert list(metrics) == list(MotionCommand.mjlab_metrics)
    env.close()
