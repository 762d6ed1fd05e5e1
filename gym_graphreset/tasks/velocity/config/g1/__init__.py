"""``gym_graphreset/G1-Velocity-Flat-v0`` and ``-Rough-v0``: Unitree G1 humanoid velocity tracking at mjlab 1.6's spec.

The env (:mod:`~gym_graphreset.tasks.velocity.config.g1.flat_env`), its configuration on the task layer
(:mod:`~gym_graphreset.tasks.velocity.config.g1.flat_env_cfg`; rough:
:mod:`~gym_graphreset.tasks.velocity.config.g1.rough_env_cfg`) and the model
(:mod:`~gym_graphreset.assets.robots.g1.model`).
"""

from gym_graphreset.tasks.velocity.config.g1.flat_env import G1VelocityFlatEnv
from gym_graphreset.tasks.velocity.config.g1.flat_env_cfg import REWARD_NAMES, g1_robot, g1_velocity_flat_cfg
from gym_graphreset.tasks.velocity.config.g1.rough_env_cfg import G1VelocityRoughEnv, g1_velocity_rough_cfg

__all__ = [
    "REWARD_NAMES",
    "G1VelocityFlatEnv",
    "G1VelocityRoughEnv",
    "g1_robot",
    "g1_velocity_flat_cfg",
    "g1_velocity_rough_cfg",
]
