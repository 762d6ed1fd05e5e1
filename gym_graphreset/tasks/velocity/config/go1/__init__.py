"""``gym_graphreset/Go1-Velocity-Flat-v0`` and ``-Rough-v0``: Unitree Go1 velocity tracking at mjlab 1.6's spec.

The env (:mod:`~gym_graphreset.tasks.velocity.config.go1.flat_env`), its configuration on the task layer
(:mod:`~gym_graphreset.tasks.velocity.config.go1.flat_env_cfg`; rough:
:mod:`~gym_graphreset.tasks.velocity.config.go1.rough_env_cfg`) and the model
(:mod:`~gym_graphreset.assets.robots.go1.model`).
"""

from gym_graphreset.tasks.velocity.config.go1.flat_env import Go1VelocityFlatEnv
from gym_graphreset.tasks.velocity.config.go1.flat_env_cfg import GO1, REWARD_NAMES, go1_velocity_flat_cfg
from gym_graphreset.tasks.velocity.config.go1.rough_env_cfg import Go1VelocityRoughEnv, go1_velocity_rough_cfg

__all__ = [
    "GO1",
    "REWARD_NAMES",
    "Go1VelocityFlatEnv",
    "Go1VelocityRoughEnv",
    "go1_velocity_flat_cfg",
    "go1_velocity_rough_cfg",
]
