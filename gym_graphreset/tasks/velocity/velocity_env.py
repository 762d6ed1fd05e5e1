"""A legged robot's velocity-tracking env: one class for every robot declared with the velocity task.

:class:`VelocityEnv` runs a :class:`~gym_graphreset.managers.task_cfg.TaskCfg` made by its robot's factory
(:attr:`VelocityEnv.make_cfg`) and exposes the twist command, its timers and the foot contacts. Go1 and G1
subclass it with their config factories.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch

from gym_graphreset.managers.forward_passes import ForwardMode
from gym_graphreset.managers.manager_based_env import ManagerBasedEnv
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.mdp.commands import VelocityCommand
from gym_graphreset.terrains.terrain_generator import TerrainGeneratorCfg

__all__ = ["RobotTaskFactory", "RoughTaskFactory", "RoughVelocityEnv", "VelocityEnv"]


class RobotTaskFactory(Protocol):
    """A robot's task config from a model path (``None``: the package's own model) and ``keep_sensors``."""

    __name__: str

    def __call__(self, model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> TaskCfg:
        """The task on ``model_xml``."""
        ...


class RoughTaskFactory(Protocol):
    """A robot's rough-terrain task config: as :class:`RobotTaskFactory`, plus the terrain grid."""

    __name__: str

    def __call__(
        self, model_xml: str | Path | None = None, *, keep_sensors: bool = False, terrain: TerrainGeneratorCfg = ...
    ) -> TaskCfg:
        """The task on ``model_xml`` and ``terrain``."""
        ...


class VelocityEnv(ManagerBasedEnv):
    """A legged robot's velocity tracking task: the task of :attr:`make_cfg`, with its command and contacts at hand.

    A robot's env sets :attr:`make_cfg` (its ``TaskCfg`` from ``model_xml`` and ``keep_sensors``); the task
    names its twist command ``"twist"``, its feet contact sensor ``"feet_contact"`` and its push event
    ``"push_robot"``, as :func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.velocity_task` does.

    Args:
        num_envs: Worlds.
        model_xml: The robot's MJCF with the names its builder needs (``None``: this package's own model);
            the task's actuator, collision and solver settings are applied to it either way.
        keep_sensors: Keep the model's own sensors besides the task's. The task reads none of them, so by
            default they are removed: MuJoCo Warp computes every sensor each substep (an accelerometer adds a
            pass). Keep them to time like for like against mjlab.
        cfg: The task (default: :attr:`make_cfg` of ``model_xml`` and ``keep_sensors``).
        obs_clip: Clip every observation to ``[-obs_clip, obs_clip]`` (``None``: no clip, as mjlab).
        forward_before_obs: A forward pass before the observations, as mjlab's step
            (:attr:`~gym_graphreset.managers.task_cfg.TaskCfg.forward_before_obs`): with ``keep_sensors``, the same
            physics work per step as mjlab's.
        forward_passes: What that forward runs
            (:attr:`~gym_graphreset.managers.task_cfg.TaskCfg.forward_passes`): ``"declared"`` (the passes the
            task's observations, commands and sensors read: the same values with less work) or ``"full"``
            (MuJoCo Warp's whole forward, mjlab's work).
        max_episode_steps: Truncation horizon (default: ``episode_length_s / step dt`` = 1000).
        **kwargs: Passed to :class:`~gym_graphreset.managers.manager_based_env.ManagerBasedEnv` (``device``,
            ``nconmax``, ``njmax``, ``global_env_offset``...).
    """

    make_cfg: ClassVar[RobotTaskFactory]
    """The robot's task: ``make_cfg(model_xml, keep_sensors=...)`` (a static method on the subclass)."""

    def __init__(
        self,
        num_envs: int,
        *,
        model_xml: str | Path | None = None,
        cfg: TaskCfg | None = None,
        obs_clip: float | None = None,
        max_episode_steps: int | None = None,
        keep_sensors: bool = False,
        forward_before_obs: bool = False,
        forward_passes: ForwardMode = "declared",
        **kwargs: Any,
    ) -> None:
        if cfg is not None and model_xml is not None:
            raise ValueError("give `model_xml` or `cfg`, not both (a cfg names its own model)")
        if cfg is not None and keep_sensors:
            raise ValueError(
                "give `keep_sensors` or `cfg`, not both (a cfg names its own model: "
                f"use {self.make_cfg.__name__}(model_xml, keep_sensors=True))"
            )
        task = cfg if cfg is not None else self.make_cfg(model_xml, keep_sensors=keep_sensors)
        if obs_clip is not None:
            task = replace(task, obs_clip=obs_clip)
        if forward_before_obs is not False:  # TaskCfg refuses anything but a bool
            task = replace(task, forward_before_obs=forward_before_obs)
        if forward_passes != "declared":  # TaskCfg refuses anything but "declared" or "full"
            task = replace(task, forward_passes=forward_passes)
        self.model_xml, self.keep_sensors = model_xml, keep_sensors
        super().__init__(task, num_envs, max_episode_steps=max_episode_steps, **kwargs)

    @property
    def velocity_command(self) -> VelocityCommand:
        """The twist command term."""
        command = self.commands["twist"]
        assert isinstance(command, VelocityCommand)
        return command

    @property
    def command(self) -> torch.Tensor:
        """``(n, 3)`` the body-frame command (x, y, yaw rate) the policy sees."""
        return self.velocity_command.command

    def command_ranges(self) -> torch.Tensor:
        """The curriculum stage's ``(x lo, x hi, wz lo, wz hi)`` now, on the device (no host read)."""
        return self.velocity_command.ranges()

    @property
    def command_time_left(self) -> torch.Tensor:
        """``(n,)`` seconds to each row's next command resample."""
        return self.velocity_command.time_left

    @property
    def is_heading(self) -> torch.Tensor:
        """``(n,)`` bool, rows steering to a heading."""
        return self.velocity_command.is_heading

    @property
    def is_standing(self) -> torch.Tensor:
        """``(n,)`` bool, rows told to stand still."""
        return self.velocity_command.is_standing

    @property
    def push_time_left(self) -> torch.Tensor:
        """``(n,)`` seconds to each row's next push (the ``push_robot`` event's timer)."""
        return self.event_manager.timers["push_robot"]

    @property
    def in_contact(self) -> torch.Tensor:
        """``(n, feet)`` foot contact flags (1.0 / 0.0)."""
        return self.sensors["feet_contact"].in_contact


class RoughVelocityEnv(VelocityEnv):
    """A legged robot's velocity tracking on generated terrain: the task of :attr:`make_rough_cfg`.

    Args as :class:`VelocityEnv`, plus ``terrain`` (the grid; ``None``: the robot's default set).
    """

    make_rough_cfg: ClassVar[RoughTaskFactory]
    """The robot's rough task: ``make_rough_cfg(model_xml, keep_sensors=..., terrain=...)`` (a static method)."""

    def __init__(
        self,
        num_envs: int,
        *,
        model_xml: str | Path | None = None,
        cfg: TaskCfg | None = None,
        keep_sensors: bool = False,
        terrain: TerrainGeneratorCfg | None = None,
        **kwargs: Any,
    ) -> None:
        if cfg is not None and (model_xml is not None or keep_sensors or terrain is not None):
            raise ValueError("give `model_xml` / `keep_sensors` / `terrain` or `cfg`, not both (a cfg names its model)")
        if cfg is None:
            grid = {} if terrain is None else {"terrain": terrain}
            cfg = self.make_rough_cfg(model_xml, keep_sensors=keep_sensors, **grid)
        super().__init__(num_envs, cfg=cfg, **kwargs)
        self.model_xml, self.keep_sensors = model_xml, keep_sensors
