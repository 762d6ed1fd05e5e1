"""``gym_graphreset/G1-Velocity-Flat-v0`` and ``-Rough-v0``: Unitree G1 humanoid velocity tracking at mjlab 1.6's spec.

The tasks are configs (:mod:`~gym_graphreset.tasks.velocity.config.g1.env_cfgs`; their envs
:class:`~gym_graphreset.tasks.velocity.velocity_env.G1VelocityFlatEnv`, `...RoughEnv`) on the 29-DoF model of
:mod:`~gym_graphreset.assets.robots.g1.model`. Observations: ``policy`` (99, noisy; the joint positions carry a
per-env encoder bias) and ``critic`` (113, noise-free, plus foot height, air time, contact and force); the rough
task adds its height scan to both. ``info["reward_terms"]`` is ``(num_envs, len(REWARD_NAMES))``.
"""

from gym_graphreset.tasks.velocity.config.g1.env_cfgs import (
    G1,
    G1_ROUGH_TERRAIN,
    REWARD_NAMES,
    g1_rough_xml,
    g1_velocity_flat_cfg,
    g1_velocity_rough_cfg,
)
from gym_graphreset.tasks.velocity.velocity_env import G1VelocityFlatEnv, G1VelocityRoughEnv

__all__ = [
    "G1",
    "G1_ROUGH_TERRAIN",
    "REWARD_NAMES",
    "G1VelocityFlatEnv",
    "G1VelocityRoughEnv",
    "g1_rough_xml",
    "g1_velocity_flat_cfg",
    "g1_velocity_rough_cfg",
]
