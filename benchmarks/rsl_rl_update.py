"""One rsl_rl PPO update, stock against FastPPO, on the same rollout: median wall-clock of several repeats.

    python benchmarks/rsl_rl_update.py --device cuda --out results/rsl_rl_update.json
    python benchmarks/rsl_rl_update.py --small   # a CPU-sized run: 256 envs

The learners are built by rsl_rl's own ``PPO.construct_algorithm`` from mjlab's Go1 PPO settings
(:func:`~gym_graphreset.integrations.rsl_rl_cfg.mjlab_ppo_cfg`: 512-256-128 ELU networks, normalised observations,
adaptive learning rate, 4 minibatches, 5 epochs), with Go1's observation widths (45 actor, 48 critic) and 12 actions.
The rollout is filled once with random data through ``act`` and ``process_env_step``; each timed repeat runs
``update()`` on it (``update`` only rewinds the storage's cursor, so the data stay), the learners in turn, round
after round, so that a change in the machine's load hits them alike. Learners: ``stock``
(``FinalObsPPO``, rsl_rl's update), ``fast`` (``FastPPO``: a CUDA graph on CUDA, eager on the CPU) and, on CUDA,
``fast-eager`` (``FastPPO`` with ``cuda_graph=False``). Warm-up repeats (the graph's warm-up and capture among them)
are not timed. Prints a table; ``--out`` writes it as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from rsl_rl.algorithms import PPO
from tensordict import TensorDict

from gym_graphreset.integrations.rsl_rl_cfg import mjlab_ppo_cfg

GO1 = "gym_graphreset/Go1-Velocity-Flat-v0"
WIDTHS = {"policy": 45, "critic": 48}
ACTIONS = 12


def build(algorithm: str, args: argparse.Namespace, cuda_graph: bool = True) -> Any:
    """A learner of mjlab's Go1 settings (``algorithm``: ``finalobs`` or ``fast``), its storage filled."""
    torch.manual_seed(0)
    cfg = mjlab_ppo_cfg(GO1, algorithm).to_dict()  # type: ignore[arg-type]
    cfg["num_steps_per_env"] = args.steps
    cfg["algorithm"] |= {"num_mini_batches": args.mini_batches, "num_learning_epochs": args.epochs}
    if algorithm == "fast":
        cfg["algorithm"]["cuda_graph"] = cuda_graph
    cfg["multi_gpu"] = None
    device = args.device
    obs = TensorDict({k: torch.zeros(args.envs, w) for k, w in WIDTHS.items()}, batch_size=[args.envs]).to(device)
    env = SimpleNamespace(num_envs=args.envs, num_actions=ACTIONS)
    with contextlib.redirect_stdout(io.StringIO()):  # construct_algorithm prints the networks
        alg = PPO.construct_algorithm(obs, env, cfg, device)  # type: ignore[arg-type]
    gen = torch.Generator().manual_seed(1)

    def groups() -> TensorDict:
        data = {k: torch.randn(args.envs, w, generator=gen) for k, w in WIDTHS.items()}
        return TensorDict(data, batch_size=[args.envs]).to(device)

    alg.train_mode()
    with torch.inference_mode():
        for _ in range(args.steps):
            alg.act(obs)
            obs = groups()
            done = torch.rand(args.envs, generator=gen) < 0.02
            extras = {"time_outs": (done & (torch.rand(args.envs, generator=gen) < 0.5)).to(device), "final_obs": obs}
            alg.process_env_step(obs, torch.randn(args.envs, generator=gen).to(device), done.to(device), extras)
        alg.compute_returns(obs)
    return alg


def time_update(alg: Any, cuda: bool) -> float:
    """Seconds of one ``update()`` (the device synchronised before and after on CUDA)."""
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    alg.update()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Time the learners; print the table; write ``--out``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    p.add_argument("--envs", type=int, default=4096, help="environments (mjlab's Go1: 4096)")
    p.add_argument("--steps", type=int, default=24, help="steps per env per rollout (mjlab: 24)")
    p.add_argument("--mini-batches", type=int, default=4, help="minibatches per epoch (mjlab: 4)")
    p.add_argument("--epochs", type=int, default=5, help="epochs per update (mjlab: 5)")
    p.add_argument("--repeats", type=int, default=7, help="timed updates per learner (the median is reported)")
    p.add_argument("--warmup", type=int, default=2, help="untimed updates first (CUDA graph warm-up and capture)")
    p.add_argument("--small", action="store_true", help="a CPU-sized run: sets --envs 256")
    p.add_argument("--threads", type=int, help="torch's CPU threads (default: torch's own)")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    args = p.parse_args(argv)
    for flag in ("envs", "steps", "mini_batches", "epochs", "repeats"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    if args.threads is not None and args.threads < 1:
        p.error(f"--threads must be >= 1, got {args.threads}")
    if args.warmup < 0:
        p.error(f"--warmup must be >= 0, got {args.warmup}")
    if args.small:
        args.envs = 256
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda asked for, but CUDA is not available")
    learners = {"stock": ("finalobs", True), "fast": ("fast", True)}
    if device.type == "cuda":
        learners["fast-eager"] = ("fast", False)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    algs = {name: build(algorithm, args, cuda_graph) for name, (algorithm, cuda_graph) in learners.items()}
    seconds: dict[str, list[float]] = {name: [] for name in algs}
    for i in range(args.warmup + args.repeats):  # rounds: each learner in turn, so drifts in load hit all alike
        for name, alg in algs.items():
            took = time_update(alg, device.type == "cuda")
            if i >= args.warmup:
                seconds[name].append(took)
    rows = [
        {
            "learner": name,
            "path": getattr(alg, "update_path", "stock"),
            "median_ms": 1e3 * statistics.median(seconds[name]),
            "seconds": seconds[name],
        }
        for name, alg in algs.items()
    ]
    stock_ms = rows[0]["median_ms"]
    samples = args.envs * args.steps
    print(f"PPO update: {args.envs} envs x {args.steps} steps = {samples} samples, {args.mini_batches} minibatches")
    print(f"x {args.epochs} epochs, mjlab's Go1 networks, on {args.device} (median of {args.repeats} rounds)")
    print(f"{'learner':<12} {'path':<8} {'median ms':>10} {'vs stock':>9}")
    for row in rows:
        row["speedup"] = stock_ms / row["median_ms"]
        print(f"{row['learner']:<12} {row['path']:<8} {row['median_ms']:>10.2f} {row['speedup']:>8.2f}x")
    if args.out is not None:
        record = {
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "results": rows,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
