"""``gym_graphreset/Go1-Velocity-Flat-v0``: Unitree Go1 velocity tracking at mjlab 1.6's spec.

The env (:mod:`~gym_graphreset.envs.go1.env`), its numbers (:mod:`~gym_graphreset.envs.go1.cfg`), the model
(:mod:`~gym_graphreset.envs.go1.model`), the command (:mod:`~gym_graphreset.envs.go1.command`) and its terms
(:mod:`~gym_graphreset.envs.go1.terms`).
"""

from gym_graphreset.envs.go1.cfg import REWARD_NAMES, Go1VelocityCfg
from gym_graphreset.envs.go1.env import (
    Go1VelocityFlatEnv,
)

__all__ = [
    "REWARD_NAMES",
    "Go1VelocityCfg",
    "Go1VelocityFlatEnv",
]
