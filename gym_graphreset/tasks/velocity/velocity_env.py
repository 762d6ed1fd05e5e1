"""A legged robot's velocity-tracking env: the task layer's env with the twist command and foot contacts at hand.

:class:`VelocityEnv` runs any task of :func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.velocity_task`. The
library's velocity ids build it through their classes here (``Go1VelocityFlatEnv(n, ...)`` is
``gym.make_vec("gym_graphreset/Go1-Velocity-Flat-v0", n, ...)``); their tasks are the robots' configs
(:mod:`~gym_graphreset.tasks.velocity.config.go1.env_cfgs`, :mod:`~gym_graphreset.tasks.velocity.config.g1.env_cfgs`).
"""

from __future__ import annotations

import torch

from gym_graphreset.managers.manager_based_env import ManagerBasedEnv
from gym_graphreset.managers.task_env import TaskEnv
from gym_graphreset.mdp.commands import VelocityCommand

__all__ = [
    "G1VelocityFlatEnv",
    "G1VelocityRoughEnv",
    "Go1VelocityFlatEnv",
    "Go1VelocityRoughEnv",
    "VelocityEnv",
]


class VelocityEnv(ManagerBasedEnv):
    """A legged robot's velocity tracking task, with its command and contacts at hand.

    The task names its twist command ``"twist"``, its feet contact sensor ``"feet_contact"`` and its push event
    ``"push_robot"``, as :func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.velocity_task` does. Built as
    :class:`~gym_graphreset.managers.manager_based_env.ManagerBasedEnv` (``VelocityEnv(cfg, num_envs, ...)``).
    """

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


class Go1VelocityFlatEnv(TaskEnv, VelocityEnv):
    """``gym_graphreset/Go1-Velocity-Flat-v0``: ``Go1VelocityFlatEnv(n, model_xml=..., keep_sensors=..., cfg=...)``."""

    env_id = "gym_graphreset/Go1-Velocity-Flat-v0"


class Go1VelocityRoughEnv(TaskEnv, VelocityEnv):
    """``gym_graphreset/Go1-Velocity-Rough-v0``: as :class:`Go1VelocityFlatEnv`, plus ``terrain=`` (the grid)."""

    env_id = "gym_graphreset/Go1-Velocity-Rough-v0"


class G1VelocityFlatEnv(TaskEnv, VelocityEnv):
    """``gym_graphreset/G1-Velocity-Flat-v0``: ``G1VelocityFlatEnv(n, model_xml=..., keep_sensors=..., cfg=...)``."""

    env_id = "gym_graphreset/G1-Velocity-Flat-v0"


class G1VelocityRoughEnv(TaskEnv, VelocityEnv):
    """``gym_graphreset/G1-Velocity-Rough-v0``: as :class:`G1VelocityFlatEnv`, plus ``terrain=`` (the grid)."""

    env_id = "gym_graphreset/G1-Velocity-Rough-v0"
