"""``gym_graphreset/Go1-Velocity-Flat-v0`` and ``-Rough-v0``: Unitree Go1 velocity tracking at mjlab 1.6's spec.

The tasks are configs (:mod:`~gym_graphreset.tasks.velocity.config.go1.env_cfgs`; their envs
:class:`~gym_graphreset.tasks.velocity.velocity_env.Go1VelocityFlatEnv`, `...RoughEnv`) on the model of
:mod:`~gym_graphreset.assets.robots.go1.model`. Observations: ``policy`` (48, noisy; the joint positions carry a
per-env encoder bias) and ``critic`` (72, noise-free, plus foot height, air time, contact and force); the rough
task adds its 187-ray height scan to both. ``info["reward_terms"]`` is ``(num_envs, len(REWARD_NAMES))``.
"""

from gym_graphreset.tasks.velocity.config.go1.env_cfgs import (
    GO1,
    GO1_ROUGH_TERRAIN,
    REWARD_NAMES,
    go1_rough_xml,
    go1_velocity_flat_cfg,
    go1_velocity_rough_cfg,
)
from gym_graphreset.tasks.velocity.velocity_env import Go1VelocityFlatEnv, Go1VelocityRoughEnv

__all__ = [
    "GO1",
    "GO1_ROUGH_TERRAIN",
    "REWARD_NAMES",
    "Go1VelocityFlatEnv",
    "Go1VelocityRoughEnv",
    "go1_rough_xml",
    "go1_velocity_flat_cfg",
    "go1_velocity_rough_cfg",
]
