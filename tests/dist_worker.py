"""Worker for tests/test_distributed.py, run by ``torchrun`` (or plainly, as world size 1).

Steps CartPole with actions that depend only on (step, global env index), writes this rank's
trajectory, the all-reduced episode statistics, and (in ``fault`` mode) the error a poll raised.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from gym_graphreset import DeferredValidationError, EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.distributed import init_distributed, make_rank_env, rank_info


def main() -> None:
    """Run one rank (or the only process)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--total-envs", type=int, default=8)
    parser.add_argument("--mode", choices=["traj", "fault"], default="traj")
    args = parser.parse_args()

    distributed = init_distributed()
    world = int(os.environ.get("WORLD_SIZE", 1))
    info = rank_info(args.total_envs // world)
    ep = EpisodeStatistics()
    env = FixedShapeAutoresetVectorEnv(
        make_rank_env("gym_graphreset/CartPole-v1", info.num_envs, max_episode_steps=25),
        "masked",
        validation_poll_interval=10,
        reset_terms={"episode": ep},
        process_group=True if distributed else None,
    )
    obs, _ = env.reset(seed=7)
    trajectory = [obs.cpu()]
    error = ""
    for t in range(60):
        gen = torch.Generator().manual_seed(1000 + t)
        all_actions = torch.randint(0, 2, (args.total_envs,), generator=gen)
        actions = all_actions[info.global_env_offset : info.global_env_offset + info.num_envs].to(info.device)
        if args.mode == "fault" and t == 5 and info.rank == world - 1:
            env.require(torch.tensor(False), "injected_fault", f"rank {info.rank} broke on purpose")
        try:
            obs, *_ = env.step(actions)
        except DeferredValidationError as err:
            error = str(err)
            break
        trajectory.append(obs.cpu())
    summary = ep.summary(group=True if distributed else None)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(torch.stack(trajectory), args.out / f"traj_ws{world}_rank{info.rank}.pt")
    (args.out / f"result_ws{world}_rank{info.rank}.json").write_text(json.dumps({"summary": summary, "error": error}))
    if distributed:
        import torch.distributed as dist

        dist.destroy_process_group()


if __name__ == "__main__":
    main()
