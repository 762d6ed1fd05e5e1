"""The MuJoCo Warp engine adapter: worlds as a torch ``VectorEnv`` with zero-copy views.

The env (:mod:`~gym_graphreset.envs.mjwarp.vector_env`), where its warp work runs and joins a torch capture
(:mod:`~gym_graphreset.envs.mjwarp.runtime`), its masked reset kernels (:mod:`~gym_graphreset.envs.mjwarp.reset`),
its overflow and finite-state checks (:mod:`~gym_graphreset.envs.mjwarp.checks`) and offscreen rendering
(:mod:`~gym_graphreset.envs.mjwarp.rendering`).
"""

from gym_graphreset.envs.mjwarp.checks import healthy_range
from gym_graphreset.envs.mjwarp.vector_env import OVERFLOW_CHECKS, MJWarpVectorEnv, default_device

__all__ = ["OVERFLOW_CHECKS", "MJWarpVectorEnv", "default_device", "healthy_range"]
