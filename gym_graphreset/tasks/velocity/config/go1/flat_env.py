"""``gym_graphreset/Go1-Velocity-Flat-v0``: Unitree Go1 velocity tracking on flat ground, at mjlab 1.6's spec.

A quadruped follows a random twist command (forward, lateral, yaw rate; a share of rows steer to a
heading, a share stand still). The task is configuration
(:func:`~gym_graphreset.tasks.velocity.config.go1.flat_env_cfg.go1_velocity_flat_cfg`)
run by the task layer (:class:`~gym_graphreset.managers.manager_based_env.ManagerBasedEnv`): masked writes and
counter-based draws everywhere, so the step and the reset read no device data on the host and the selected-row and
masked paths are bit-identical on the CPU. The model: :mod:`gym_graphreset.assets.robots.go1.model`.

Observations are a dict of two groups: ``policy`` (48: noisy; the joint positions carry a per-env encoder
bias) and ``critic`` (72: noise-free, unbiased, plus foot height, air time, contact and contact force).
``info["reward_terms"]`` holds this step's weighted terms, ``(num_envs, len(REWARD_NAMES))``.
"""

from __future__ import annotations

from gym_graphreset.tasks.velocity.config.go1.flat_env_cfg import go1_velocity_flat_cfg
from gym_graphreset.tasks.velocity.velocity_env import VelocityEnv

__all__ = ["Go1VelocityFlatEnv"]


class Go1VelocityFlatEnv(VelocityEnv):
    """Go1 flat-ground velocity tracking (see the module docstring).

    Args as :class:`~gym_graphreset.tasks.velocity.velocity_env.VelocityEnv`: ``model_xml`` a Go1 MJCF with mjlab's
    names (``None``: this package's primitive-geom model); ``keep_sensors`` keeps its own sensors (mjlab's
    ``go1.xml`` has five); ``cfg`` default
    :func:`~gym_graphreset.tasks.velocity.config.go1.flat_env_cfg.go1_velocity_flat_cfg`.
    """

    make_cfg = staticmethod(go1_velocity_flat_cfg)
