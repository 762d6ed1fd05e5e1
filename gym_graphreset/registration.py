"""Registration of the ``gym_graphreset/<Task>`` ids with Gymnasium (vector entry points only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import gymnasium as gym

from gym_graphreset.assets.robot_model import MODEL_OPTIONS
from gym_graphreset.managers import registry

if TYPE_CHECKING:
    from gym_graphreset.managers.task_cfg import TaskCfg

__all__ = ["MUJOCO_TASKS", "TASK_LAYER", "LayerTask", "register_envs", "task_cfg"]


def _make_cartpole(num_envs: int = 1, **kwargs: Any) -> Any:
    from gym_graphreset.envs.cartpole import CartPoleVectorEnv

    return CartPoleVectorEnv(num_envs, **kwargs)


def _make_task(task: str) -> Any:
    def make(num_envs: int = 1, **kwargs: Any) -> Any:
        from gym_graphreset.envs.gym_mujoco.tasks import TASKS

        return TASKS[task](num_envs, **kwargs)

    make.__name__ = f"make_{task.replace('-', '_')}"
    return make


MUJOCO_TASKS = (
    "InvertedPendulum-v5",
    "InvertedDoublePendulum-v5",
    "HalfCheetah-v5",
    "Hopper-v5",
    "Walker2d-v5",
    "Swimmer-v5",
    "Reacher-v5",
    "Ant-v5",
    "Humanoid-v5",
)
"""The Gymnasium MuJoCo v5 ids registered as ``gym_graphreset/<id>`` (vector entry points, MuJoCo Warp)."""


def _make_reset_heavy(num_envs: int = 1, **kwargs: Any) -> Any:
    from gym_graphreset.envs.gym_mujoco.reset_heavy import ResetHeavyHalfCheetahEnv

    return ResetHeavyHalfCheetahEnv(num_envs, **kwargs)


class LayerTask(NamedTuple):
    """A task-layer id's registration: :func:`~gym_graphreset.managers.registry.register_task`'s arguments."""

    task: str
    env_class: str
    options: tuple[str, ...]
    max_episode_steps: int


_CFGS = "gym_graphreset.tasks.velocity.config"
_ENVS = "gym_graphreset.tasks.velocity.velocity_env"
_TRACKING = "gym_graphreset.tasks.tracking.config.g1.flat_env_cfg"
_MODEL = (*MODEL_OPTIONS, "obs_clip", "forward_before_obs", "forward_passes")
TASK_LAYER = {
    "gym_graphreset/Go1-Velocity-Flat-v0": LayerTask(
        f"{_CFGS}.go1.env_cfgs:go1_velocity_flat_cfg", f"{_ENVS}:Go1VelocityFlatEnv", _MODEL, 1000
    ),
    "gym_graphreset/Go1-Velocity-Rough-v0": LayerTask(
        f"{_CFGS}.go1.env_cfgs:go1_velocity_rough_cfg", f"{_ENVS}:Go1VelocityRoughEnv", (*_MODEL, "terrain"), 1000
    ),
    "gym_graphreset/G1-Velocity-Flat-v0": LayerTask(
        f"{_CFGS}.g1.env_cfgs:g1_velocity_flat_cfg", f"{_ENVS}:G1VelocityFlatEnv", _MODEL, 1000
    ),
    "gym_graphreset/G1-Velocity-Rough-v0": LayerTask(
        f"{_CFGS}.g1.env_cfgs:g1_velocity_rough_cfg", f"{_ENVS}:G1VelocityRoughEnv", (*_MODEL, "terrain"), 1000
    ),
    "gym_graphreset/G1-Tracking-Flat-v0": LayerTask(
        f"{_TRACKING}:g1_tracking_flat_cfg", f"{_TRACKING}:G1TrackingFlatEnv", ("motion_file", *_MODEL), 500
    ),
}
"""The library's task-layer ids, registered with :func:`~gym_graphreset.managers.registry.register_task` as a user's
task is: the task and its env class named lazily (imported when an env is made), the ``make_vec`` options."""


def task_cfg(env_id: str) -> TaskCfg | None:
    """The :class:`~gym_graphreset.managers.task_cfg.TaskCfg` a registered task id builds by default (its ``cfg=``).

    ``None`` for an id that takes no task config (the Gymnasium MuJoCo tasks, CartPole, ids registered elsewhere).
    Answered from the one registry (:func:`~gym_graphreset.managers.registry.task_cfg`).
    """
    return registry.task_cfg(env_id)


def register_envs() -> None:
    """Register every env id once (idempotent); MuJoCo Warp is imported only when an env is made."""
    if "gym_graphreset/ResetHeavyHalfCheetah-v0" not in gym.registry:
        gym.register(id="gym_graphreset/ResetHeavyHalfCheetah-v0", vector_entry_point=_make_reset_heavy)
    for env_id, (task, env_class, options, steps) in TASK_LAYER.items():
        if env_id not in gym.registry:  # a user's task registers the same way (docs/tasks.md)
            registry.register_task(env_id, task, env_class=env_class, options=options, max_episode_steps=steps)
    for task in MUJOCO_TASKS:
        if f"gym_graphreset/{task}" not in gym.registry:
            horizon = gym.spec(task).max_episode_steps  # Gymnasium's own registration (Reacher: 50)
            gym.register(id=f"gym_graphreset/{task}", vector_entry_point=_make_task(task), max_episode_steps=horizon)
    if "gym_graphreset/CartPole-v1" not in gym.registry:
        gym.register(
            id="gym_graphreset/CartPole-v1",
            vector_entry_point=_make_cartpole,
            max_episode_steps=500,
            reward_threshold=475.0,
        )
