"""Inner envs shipped with gym_graphreset."""

from gym_graphreset.envs.cartpole import CartPoleVectorEnv

__all__ = ["CartPoleVectorEnv"]
