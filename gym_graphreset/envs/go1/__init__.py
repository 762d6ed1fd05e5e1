"""``gym_graphreset/Go1-Velocity-Flat-v0`` and ``-Rough-v0``: Unitree Go1 velocity tracking at mjlab 1.6's spec.

The env (:mod:`~gym_graphreset.envs.go1.env`), its configuration on the task layer
(:mod:`~gym_graphreset.envs.go1.cfg`; rough: :mod:`~gym_graphreset.envs.go1.rough`) and the model
(:mod:`~gym_graphreset.envs.go1.model`).
"""

from gym_graphreset.envs.go1.cfg import GO1, REWARD_NAMES, go1_velocity_flat_cfg
from gym_graphreset.envs.go1.env import Go1VelocityFlatEnv
from gym_graphreset.envs.go1.rough import Go1VelocityRoughEnv, go1_velocity_rough_cfg

__all__ = [
    "GO1",
    "REWARD_NAMES",
    "Go1VelocityFlatEnv",
    "Go1VelocityRoughEnv",
    "go1_velocity_flat_cfg",
    "go1_velocity_rough_cfg",
]
