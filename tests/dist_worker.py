"""Worker for tests/test_distributed.py, run by ``torchrun`` (or plainly, as world size 1).

Steps CartPole with actions that depend only on (step, global env index), writes this rank's
trajectory, the all-reduced episode statistics, and (in ``fault`` mode) the error a poll raised.
``uneven`` gives rank 0 one row fewer and rank 1 one more; ``raises`` and ``settings`` run scenarios in
which one rank fails or polls with other settings, and record what each rank's env raised.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import torch

from gym_graphreset import DeferredValidationError, EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.distributed import RankInfo, init_distributed, make_rank_env, rank_info

MODES = ["traj", "fault", "uneven", "raises", "settings"]


def _actions(t: int, total: int, info: RankInfo) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1000 + t)
    all_actions = torch.randint(0, 2, (total,), generator=gen)
    return all_actions[info.global_env_offset : info.global_env_offset + info.num_envs].to(info.device)


def _scenario(info: RankInfo, name: str, group: Any) -> dict[str, str]:
    """Step until something raises (or 30 steps), then close; what step/reset and close raised."""
    last = info.rank == info.world_size - 1
    config, interval, process_group = "masked", 10, True
    if name == "refused":
        config = "selected"  # immediate validation: the bad action is refused on the host, no latch
    if name == "interval" and last:
        interval = 5
    if name == "group" and last:
        process_group = group
    env = FixedShapeAutoresetVectorEnv(
        make_rank_env("gym_graphreset/CartPole-v1", info.num_envs, max_episode_steps=25),
        config,
        validation_poll_interval=interval,
        process_group=process_group,
    )
    if name == "raises" and last:
        inner_step = env.env.step

        def broken_step(actions: torch.Tensor) -> Any:
            if env.host_step == 5:
                raise RuntimeError(f"rank {info.rank}'s physics broke on purpose")
            return inner_step(actions)

        env.env.step = broken_step
    error = close_error = ""
    try:
        env.reset(seed=7)
        for t in range(30):
            actions = _actions(t, info.num_envs * info.world_size, info)
            if name == "refused" and last and t == 5:
                actions = torch.full_like(actions, 7)  # out of Discrete(2): refused by name
            if name == "interval_later" and last and t == 3:
                env.validation_poll_interval = 5
            env.step(actions)
    except Exception as err:  # recorded for the test
        error = f"{type(err).__name__}: {err}"
    finally:
        try:
            env.close()
        except Exception as err:  # recorded for the test
            close_error = f"{type(err).__name__}: {err}"
    return {"error": error, "close_error": close_error}


def main() -> None:
    """Run one rank (or the only process)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--total-envs", type=int, default=8)
    parser.add_argument("--mode", choices=MODES, default="traj")
    args = parser.parse_args()

    distributed = init_distributed()
    world = int(os.environ.get("WORLD_SIZE", 1))
    share = args.total_envs // world
    if args.mode == "uneven":  # rank 0 holds one row fewer, rank 1 one more (3 + 5 of 8 on two ranks)
        rank = int(os.environ.get("RANK", 0))
        share = share - 1 if rank == 0 else share + 1 if rank == 1 else share
    info = rank_info(share)
    args.out.mkdir(parents=True, exist_ok=True)
    result_path = args.out / f"result_ws{world}_rank{info.rank}.json"
    if args.mode in ("raises", "settings"):
        import torch.distributed as dist

        group = dist.new_group(list(range(world)))  # another communicator over the same ranks
        names = ["raises", "refused"] if args.mode == "raises" else ["interval", "interval_later", "group"]
        result_path.write_text(json.dumps({name: _scenario(info, name, group) for name in names}))
        dist.destroy_process_group()
        return

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
        actions = _actions(t, args.total_envs, info)
        if args.mode == "fault" and t == 5 and info.rank == world - 1:
            env.require(torch.tensor(False), "injected_fault", f"rank {info.rank} broke on purpose")
        try:
            obs, *_ = env.step(actions)
        except DeferredValidationError as err:
            error = str(err)
            break
        trajectory.append(obs.cpu())
    summary = ep.summary(group=True if distributed else None)
    env.close()  # every rank closes together: the last poll passes (after a fault, no collective)
    torch.save(torch.stack(trajectory), args.out / f"traj_ws{world}_rank{info.rank}.pt")
    result = {"summary": summary, "error": error, "offset": info.global_env_offset, "total": info.total_envs}
    result_path.write_text(json.dumps(result))
    if distributed:
        import torch.distributed as dist

        dist.destroy_process_group()


if __name__ == "__main__":
    main()
