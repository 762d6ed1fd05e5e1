"""Registration of the ``gym_graphreset/<Task>`` ids with Gymnasium (vector entry points only)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["MUJOCO_TASKS", "register_envs", "task_cfg"]


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


def _make_go1(num_envs: int = 1, **kwargs: Any) -> Any:
    from gym_graphreset.tasks.velocity.config.go1 import Go1VelocityFlatEnv

    return Go1VelocityFlatEnv(num_envs, **kwargs)


def _make_go1_rough(num_envs: int = 1, **kwargs: Any) -> Any:
    from gym_graphreset.tasks.velocity.config.go1.rough_env_cfg import Go1VelocityRoughEnv

    return Go1VelocityRoughEnv(num_envs, **kwargs)


def _make_g1(num_envs: int = 1, **kwargs: Any) -> Any:
    from gym_graphreset.tasks.velocity.config.g1 import G1VelocityFlatEnv

    return G1VelocityFlatEnv(num_envs, **kwargs)


def _make_g1_rough(num_envs: int = 1, **kwargs: Any) -> Any:
    from gym_graphreset.tasks.velocity.config.g1.rough_env_cfg import G1VelocityRoughEnv

    return G1VelocityRoughEnv(num_envs, **kwargs)


def _make_g1_tracking(num_envs: int = 1, **kwargs: Any) -> Any:
    from gym_graphreset.tasks.tracking.config.g1.flat_env_cfg import G1TrackingFlatEnv

    return G1TrackingFlatEnv(num_envs, **kwargs)


def task_cfg(env_id: str) -> Any:
    """The :class:`~gym_graphreset.managers.task_cfg.TaskCfg` a shipped task-layer id builds by default (its ``cfg=``).

    ``None`` for an id that takes no task config (the Gymnasium MuJoCo tasks, CartPole, ids registered elsewhere).
    """
    if env_id == "gym_graphreset/Go1-Velocity-Flat-v0":
        from gym_graphreset.tasks.velocity.config.go1 import go1_velocity_flat_cfg

        return go1_velocity_flat_cfg()
    if env_id == "gym_graphreset/Go1-Velocity-Rough-v0":
        from gym_graphreset.tasks.velocity.config.go1.rough_env_cfg import go1_velocity_rough_cfg

        return go1_velocity_rough_cfg()
    if env_id == "gym_graphreset/G1-Velocity-Flat-v0":
        from gym_graphreset.tasks.velocity.config.g1 import g1_velocity_flat_cfg

        return g1_velocity_flat_cfg()
    if env_id == "gym_graphreset/G1-Velocity-Rough-v0":
        from gym_graphreset.tasks.velocity.config.g1.rough_env_cfg import g1_velocity_rough_cfg

        return g1_velocity_rough_cfg()
    if env_id == "gym_graphreset/G1-Tracking-Flat-v0":
        from gym_graphreset.tasks.tracking.config.g1.flat_env_cfg import g1_tracking_flat_cfg

        return g1_tracking_flat_cfg()
    return None


def register_envs() -> None:
    """Register every env id once (idempotent); MuJoCo Warp is imported only when an env is made."""
    if "gym_graphreset/ResetHeavyHalfCheetah-v0" not in gym.registry:
        gym.register(id="gym_graphreset/ResetHeavyHalfCheetah-v0", vector_entry_point=_make_reset_heavy)
    if "gym_graphreset/Go1-Velocity-Flat-v0" not in gym.registry:
        gym.register(id="gym_graphreset/Go1-Velocity-Flat-v0", vector_entry_point=_make_go1, max_episode_steps=1000)
    if "gym_graphreset/Go1-Velocity-Rough-v0" not in gym.registry:
        gym.register(
            id="gym_graphreset/Go1-Velocity-Rough-v0", vector_entry_point=_make_go1_rough, max_episode_steps=1000
        )
    if "gym_graphreset/G1-Velocity-Flat-v0" not in gym.registry:
        gym.register(id="gym_graphreset/G1-Velocity-Flat-v0", vector_entry_point=_make_g1, max_episode_steps=1000)
    if "gym_graphreset/G1-Velocity-Rough-v0" not in gym.registry:
        gym.register(
            id="gym_graphreset/G1-Velocity-Rough-v0", vector_entry_point=_make_g1_rough, max_episode_steps=1000
        )
    if "gym_graphreset/G1-Tracking-Flat-v0" not in gym.registry:
        gym.register(
            id="gym_graphreset/G1-Tracking-Flat-v0", vector_entry_point=_make_g1_tracking, max_episode_steps=500
        )
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
