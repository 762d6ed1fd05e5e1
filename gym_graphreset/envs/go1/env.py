"""``gym_graphreset/Go1-Velocity-Flat-v0``: Unitree Go1 velocity tracking on flat ground, at mjlab 1.6's spec.

A quadruped follows a random twist command (forward, lateral, yaw rate; a share of rows steer to a
heading, a share stand still). The task is configuration (:func:`~gym_graphreset.envs.go1.cfg.go1_velocity_flat_cfg`)
run by the task layer (:class:`~gym_graphreset.tasks.env.ManagerBasedEnv`): masked writes and counter-based
draws everywhere, so the step and the reset read no device data on the host and the selected-row and
masked paths are bit-identical on the CPU. The model: :mod:`gym_graphreset.envs.go1.model`.

Observations are a dict of two groups: ``policy`` (48: noisy; the joint positions carry a per-env encoder
bias) and ``critic`` (72: noise-free, unbiased, plus foot height, air time, contact and contact force).
``info["reward_terms"]`` holds this step's weighted terms, ``(num_envs, len(REWARD_NAMES))``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gym_graphreset.envs.go1.cfg import go1_velocity_flat_cfg
from gym_graphreset.tasks.cfg import TaskCfg
from gym_graphreset.tasks.env import ManagerBasedEnv
from gym_graphreset.tasks.mdp.commands import VelocityCommand

__all__ = ["Go1VelocityFlatEnv"]


class Go1VelocityFlatEnv(ManagerBasedEnv):
    """Go1 flat-ground velocity tracking (see the module docstring).

    Args:
        num_envs: Worlds.
        model_xml: A Go1 MJCF with mjlab's names (``None``: this package's own primitive-geom model);
            mjlab's actuator, collision and solver settings are applied to it either way.
        keep_sensors: Keep the model's own sensors (mjlab's ``go1.xml`` has five) besides the foot contact
            sensors. The task reads none of them, so by default they are removed: MuJoCo Warp computes every
            sensor each substep (an accelerometer adds a pass). Keep them to time like for like against mjlab.
        cfg: The task (default: :func:`~gym_graphreset.envs.go1.cfg.go1_velocity_flat_cfg` of ``model_xml``).
        obs_clip: Clip every observation to ``[-obs_clip, obs_clip]`` (``None``: no clip, as mjlab).
        max_episode_steps: Truncation horizon (default: ``episode_length_s / step dt`` = 1000).
        **kwargs: Passed to :class:`~gym_graphreset.tasks.env.ManagerBasedEnv` (``device``, ``nconmax``,
            ``njmax``, ``global_env_offset``...).
    """

    def __init__(
        self,
        num_envs: int,
        *,
        model_xml: str | Path | None = None,
        cfg: TaskCfg | None = None,
        obs_clip: float | None = None,
        max_episode_steps: int | None = None,
        keep_sensors: bool = False,
        **kwargs: Any,
    ) -> None:
        if cfg is not None and model_xml is not None:
            raise ValueError("give `model_xml` or `cfg`, not both (a cfg names its own model)")
        if cfg is not None and keep_sensors:
            raise ValueError(
                "give `keep_sensors` or `cfg`, not both (a cfg names its own model: "
                "use go1_velocity_flat_cfg(model_xml, keep_sensors=True))"
            )
        task = cfg if cfg is not None else go1_velocity_flat_cfg(model_xml, keep_sensors=keep_sensors)
        if obs_clip is not None:
            from dataclasses import replace

            task = replace(task, obs_clip=obs_clip)
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
        """``(n, 4)`` foot contact flags (1.0 / 0.0)."""
        return self.sensors["feet_contact"].in_contact
