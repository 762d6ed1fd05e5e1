"""The Go1 velocity task as configuration: mjlab 1.6's ``Mjlab-Velocity-Flat-Unitree-Go1`` on the task layer.

:func:`go1_velocity_flat_cfg` starts from the shared velocity task
(:func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.velocity_task`) with the Go1 robot (:data:`GO1`) and changes
what mjlab's Go1 config changes: the posture stds per joint and the feet's friction ranges.
Edit the result like any :class:`~gym_graphreset.managers.task_cfg.TaskCfg`:

    cfg = go1_velocity_flat_cfg().replace_term("rewards", "upright", weight=2.0)
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from gym_graphreset.assets.robots.go1.model import (
    ACTION_SCALE,
    FOOT_NAMES,
    INIT_BASE_HEIGHT,
    JOINT_NAMES,
    NJMAX,
    build_go1_xml,
    default_joint_pos,
)
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.tasks.velocity.velocity_env_cfg import LeggedRobot, velocity_task

__all__ = ["GO1", "REWARD_NAMES", "go1_robot", "go1_velocity_flat_cfg"]


def go1_robot(model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> LeggedRobot:
    """The Go1 (this package's MJCF, or ``model_xml`` with mjlab's names) as the velocity task sees it.

    ``keep_sensors``: keep the model's own sensors (see :func:`~gym_graphreset.assets.robots.go1.model.build_go1_xml`).
    """
    if not isinstance(keep_sensors, bool):
        raise ValueError(f"`keep_sensors` must be a bool, got {keep_sensors!r}")
    return LeggedRobot(
        model=partial(build_go1_xml, model_xml, keep_sensors=keep_sensors),
        joint_names=JOINT_NAMES,
        default_joint_pos={j: default_joint_pos(j) for j in JOINT_NAMES},
        action_scale=tuple(ACTION_SCALE[j] for j in JOINT_NAMES),
        base_body="trunk",
        init_base_height=INIT_BASE_HEIGHT,
        imu_site="imu",
        foot_sites=FOOT_NAMES,
        foot_geoms=tuple(f"{leg}_foot_collision" for leg in FOOT_NAMES),
        foot_contact_sensors=tuple(f"{leg}_foot_contact" for leg in FOOT_NAMES),
        com_body="trunk",
        njmax=NJMAX,
    )


GO1 = go1_robot()
"""The Go1 of this package's own MJCF."""


def go1_velocity_flat_cfg(model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> TaskCfg:
    """Mjlab's Go1 flat velocity task (on ``model_xml``: a Go1 MJCF with mjlab's names; default: this package's).

    ``keep_sensors``: keep the model's own sensors (unread by the task; for like-for-like timing against mjlab).
    """
    cfg = velocity_task(go1_robot(model_xml, keep_sensors=keep_sensors))
    calf = r".*_calf_joint"
    return cfg.replace_term(
        "rewards",
        "pose",
        params={
            **cfg.rewards["pose"].params,
            "std_standing": {calf: 0.1, ".*": 0.05},
            "std_walking": {calf: 0.6, ".*": 0.3},
            "std_running": {calf: 0.6, ".*": 0.3},
        },
    ).replace_term(
        "events",
        "foot_friction",
        params={**cfg.events["foot_friction"].params, "slide": (0.3, 1.5)},
    )


REWARD_NAMES = tuple(n for n, t in go1_velocity_flat_cfg().rewards.items() if t.weight != 0.0)
"""Reward terms in the order of ``info["reward_terms"]`` (mjlab's weight-0 terms are left out)."""
