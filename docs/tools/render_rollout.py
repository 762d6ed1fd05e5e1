"""A GIF of one world of a MuJoCo Warp task under zero actions, rendered offscreen on the CPU.

    python docs/tools/render_rollout.py [--env-id gym_graphreset/Go1-Velocity-Flat-v0] [--steps 150]
        [--every 2] [--out docs/img/go1-default-pose.gif]

For Go1 zero actions are the default joint pose as position targets: the robot stands, is pushed and
reset by the task's events. A trained policy's rollout comes from the PPO example's ``--render-gif``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gymnasium as gym
import torch
from tqdm.auto import tqdm

import gym_graphreset  # noqa: F401  (registers the env ids)
from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.envs.mjwarp.rendering import render_frames, save_gif


def main() -> None:
    """Parse the arguments, render, write the GIF."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="gym_graphreset/Go1-Velocity-Flat-v0")
    parser.add_argument("--steps", type=int, default=150, help="env steps (default: 150)")
    parser.add_argument("--every", type=int, default=2, help="keep every n-th frame (default: 2)")
    parser.add_argument("--out", type=Path, default=Path("docs/img/go1-default-pose.gif"))
    args = parser.parse_args()
    inner = gym.make_vec(args.env_id, num_envs=2, vectorization_mode="vector_entry_point", device="cpu")
    env = FixedShapeAutoresetVectorEnv(inner, "masked")
    zeros = torch.zeros(env.num_envs, env.single_action_space.shape[0])
    bar = tqdm(total=args.steps, desc="rendering", unit="step")

    def policy(obs: object) -> torch.Tensor:
        bar.update()
        return zeros

    frames = render_frames(env, policy, args.steps)[:: args.every]
    bar.close()
    if save_gif(frames, args.out, fps=1.0 / env.unwrapped.dt / args.every):
        print(f"wrote {args.out} ({len(frames)} frames)")


if __name__ == "__main__":
    main()
