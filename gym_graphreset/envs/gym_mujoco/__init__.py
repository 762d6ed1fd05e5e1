"""Gymnasium's MuJoCo v5 tasks on MuJoCo Warp (same observations, rewards, terminations and reset noise).

Shared locomotion code in :mod:`~gym_graphreset.envs.gym_mujoco.base`, the 3-D bodies (Ant, Humanoid) in
:mod:`~gym_graphreset.envs.gym_mujoco.bodies_3d`, every task in :mod:`~gym_graphreset.envs.gym_mujoco.tasks`,
and a reset-heavy HalfCheetah workload in :mod:`~gym_graphreset.envs.gym_mujoco.reset_heavy`.
"""
