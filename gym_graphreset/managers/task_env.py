"""``TaskEnv``: the env of a registered task id as a class, built as ``gym.make_vec`` builds that id."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from gym_graphreset.assets.robot_model import RobotModel
from gym_graphreset.managers.manager_based_env import ManagerBasedEnv
from gym_graphreset.managers.registry import registered_task
from gym_graphreset.managers.task_cfg import TaskCfg

__all__ = ["TaskEnv"]


class TaskEnv(ManagerBasedEnv):
    """The env of the task registered as :attr:`env_id`: ``Cls(n, **kwargs)`` is ``gym.make_vec(env_id, n, **kwargs)``.

    The task's options (e.g. ``model_xml``, ``keep_sensors``), ``cfg=`` and the env arguments are taken and
    checked by the registered task (:class:`~gym_graphreset.managers.registry.RegisteredTask`), so a class
    and its id cannot disagree. Register the id with this class as its ``env_class``.
    """

    env_id: ClassVar[str]
    """The registered task id this class builds."""

    def __init__(self, num_envs: int = 1, *, cfg: TaskCfg | None = None, **kwargs: Any) -> None:
        entry = registered_task(self.env_id)
        if entry is None:
            raise ValueError(f"{type(self).__name__}: `env_id` {self.env_id!r} is not a task of register_task")
        task, rest = entry.split(cfg, kwargs)
        super().__init__(task, num_envs, **rest)

    @property
    def model_xml(self) -> str | Path | None:
        """The MJCF file of the task's robot model (``None``: the package's own, or a model given as text)."""
        model = self.cfg.model
        return model.model_xml if isinstance(model, RobotModel) else None

    @property
    def keep_sensors(self) -> bool:
        """Whether the robot model keeps its file's own sensors."""
        model = self.cfg.model
        return isinstance(model, RobotModel) and model.keep_sensors
