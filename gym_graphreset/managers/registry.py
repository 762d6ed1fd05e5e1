"""Register a task as a Gymnasium vector env id, so every trainer, script and CLI can make it by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from gym_graphreset.managers.task_cfg import TaskCfg

__all__ = ["make_task_env", "register_task"]

TaskFactory = Callable[[], TaskCfg]


def make_task_env(task: TaskCfg | TaskFactory, num_envs: int = 1, **kwargs: Any) -> Any:
    """A :class:`~gym_graphreset.managers.manager_based_env.ManagerBasedEnv` of ``task`` (a config or a factory)."""
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

    cfg = task() if callable(task) and not isinstance(task, TaskCfg) else task
    if not isinstance(cfg, TaskCfg):
        raise TypeError(f"the task must be a TaskCfg or a function returning one, got {type(cfg).__name__}")
    return ManagerBasedEnv(cfg, num_envs, **kwargs)


def register_task(env_id: str, task: TaskCfg | TaskFactory, *, replace: bool = False) -> None:
    """Register ``task`` as the vector env ``env_id`` (``gym.make_vec(env_id, n, vectorization_mode=...)``).

    A function is called at each ``make_vec``, so the model is built when the env is made, not at import.
    ``gym.make_vec(env_id, n, ..., cfg=other)`` builds ``other`` in place of the registered task, as the
    library's own task ids do (``play --motion`` rebuilds a task with recorders that way).
    An id registered from a module ``my_tasks`` can be made from any process as ``"my_tasks:<env_id>"``
    (Gymnasium imports the module first): ``examples/ppo_continuous.py --env-id my_tasks:MyLab/Walk-v0`` and
    ``python -m gym_graphreset play`` find it that way.

    Raises:
        ValueError: ``env_id`` is already registered (pass ``replace=True`` to re-register it on purpose).
        TypeError: ``task`` is neither a TaskCfg nor callable.
    """
    if not (isinstance(task, TaskCfg) or callable(task)):
        raise TypeError(f"`task` must be a TaskCfg or a function returning one, got {type(task).__name__}")
    if env_id in gym.registry and not replace:
        raise ValueError(f"`env_id` {env_id!r} is already registered (pass replace=True to re-register it)")

    def entry_point(num_envs: int = 1, *, cfg: TaskCfg | None = None, **kwargs: Any) -> Any:
        return make_task_env(task if cfg is None else cfg, num_envs, **kwargs)  # cfg=: the task replaced

    gym.registry.pop(env_id, None)  # replace=True: re-registered on purpose, without Gymnasium's warning
    gym.register(id=env_id, vector_entry_point=entry_point)
