"""rsl_rl's OnPolicyRunner on Ant-v5 through the library's rsl_rl adapter, for a fixed wall-clock budget.

    python benchmarks/gpu/rsl_rl_ant.py --seconds 200 --out $OUT/rsl_rl_ant.json
    python benchmarks/gpu/rsl_rl_ant.py --device cpu --preset masked_persistent --num-envs 64 --seconds 30

The env (4096 rows by default) runs under the whole-step CUDA graph (``--preset step_graph``); the runner is
:class:`~gym_graphreset.integrations.rsl_rl.SyncFreeOnPolicyRunner` with
:class:`~gym_graphreset.integrations.rsl_rl.FinalObsPPO` (``--stock`` for rsl_rl's ``OnPolicyRunner`` and
``PPO``). After every iteration the JSON at ``--out`` is rewritten with the curve so far: env steps, seconds
since training started, the mean raw return of the episodes that ended in the iteration, and the end-to-end
env-steps/s (collection and update). Time spent before the first reset (construction, kernel compilation)
is reported apart, as is the first iteration (it captures the step graph).

The curve keys (``env_steps``, ``seconds``, ``mean_return``) are those of ``examples/ppo_continuous.py``'s
JSON, so both runs go on one figure of return against wall-clock:

    python benchmarks/gpu/rsl_rl_ant.py --plot rsl_rl_ant.json ppo-Ant-v5-4096.json --png ant_return.png
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from rsl_rl.runners import OnPolicyRunner
from tqdm.auto import tqdm

import gym_graphreset  # noqa: F401  (registers the tasks)
from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.bench.plotting import import_pyplot, save_figure
from gym_graphreset.integrations.rsl_rl import RslRlVecEnv, SyncFreeOnPolicyRunner


def train_cfg(num_steps: int, stock: bool) -> dict[str, Any]:
    """A locomotion-style rsl_rl config (as Isaac Lab's and mjlab's tasks use), normalised observations."""
    mlp = {"class_name": "MLPModel", "hidden_dims": [256, 128, 64], "activation": "elu", "obs_normalization": True}
    return {
        "num_steps_per_env": num_steps,
        "save_interval": 10_000,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {
            "class_name": "PPO" if stock else "gym_graphreset.integrations.rsl_rl:FinalObsPPO",
            "num_learning_epochs": 5,
            "num_mini_batches": 4,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "desired_kl": 0.01,
            "gamma": 0.99,
            "lam": 0.95,
            "entropy_coef": 0.005,
            "clip_param": 0.2,
            "max_grad_norm": 1.0,
        },
        "actor": {**mlp, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": mlp,
        "check_for_nan": stock,
    }


def _label(record: dict[str, Any], path: Path) -> str:
    if "runner" in record:
        return f"rsl_rl {record['runner']} + {record['algorithm']}"
    if "args" in record:
        return "examples/ppo_continuous.py"
    return path.stem


def plot(paths: list[Path], png: Path) -> bool:
    """Mean return against wall-clock seconds, one line per JSON (this script's or the PPO example's)."""
    runs = {}
    for path in paths:
        record = json.loads(path.read_text())
        curve = record.get("curve") if isinstance(record, dict) else None
        if not isinstance(curve, dict) or not {"seconds", "mean_return"} <= set(curve):
            raise ValueError(f"{path}: expected a JSON object whose 'curve' has 'seconds' and 'mean_return'")
        runs[_label(record, path)] = [
            (t, r) for t, r in zip(curve["seconds"], curve["mean_return"], strict=True) if r is not None
        ]
    plt = import_pyplot(png)
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, points in runs.items():
        if points:
            ax.plot(*zip(*points, strict=True), label=label)
    ax.set_xlabel("wall-clock seconds since training started")
    ax.set_ylabel("mean episode return")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=9)
    return save_figure(plt, fig, png, dpi=100)


def main() -> None:
    """Train for ``--seconds`` of wall-clock and write the curve as JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=200.0, help="wall-clock budget from the first reset")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--num-steps-per-env", type=int, default=24)
    p.add_argument("--device", default="cuda")
    p.add_argument("--preset", default="step_graph")
    p.add_argument("--env-id", default="gym_graphreset/Ant-v5")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stock", action="store_true", help="rsl_rl's OnPolicyRunner and PPO (V(s_t) bootstrap)")
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "rsl_rl_ant.json"))
    p.add_argument("--plot", nargs="+", type=Path, help="only plot these curve JSONs (to --png) and exit")
    p.add_argument("--png", type=Path, default=Path("ant_return_vs_time.png"))
    args = p.parse_args()
    if args.plot:
        if plot(args.plot, args.png):
            print(f"wrote {args.png}")
        return

    torch.manual_seed(args.seed)
    built = time.perf_counter()
    inner = gym.make_vec(args.env_id, args.num_envs, vectorization_mode="vector_entry_point", device=args.device)
    wrapped = FixedShapeAutoresetVectorEnv(inner, args.preset, reset_terms={"episode": EpisodeStatistics()})
    env = RslRlVecEnv(wrapped, seed=args.seed)  # the first reset
    runner_class = OnPolicyRunner if args.stock else SyncFreeOnPolicyRunner
    runner = runner_class(env, train_cfg(args.num_steps_per_env, args.stock), log_dir=None, device=args.device)
    stats = wrapped.reset_terms["episode"]
    start = time.perf_counter()
    result: dict[str, Any] = {
        "env_id": args.env_id,
        "num_envs": args.num_envs,
        "num_steps_per_env": args.num_steps_per_env,
        "preset": args.preset,
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device,
        "runner": runner_class.__name__,
        "algorithm": "PPO" if args.stock else "FinalObsPPO",
        "budget_s": args.seconds,
        "setup_s": start - built,
        "curve": {"env_steps": [], "seconds": [], "mean_return": [], "mean_length": [], "episodes": []},
    }
    curve = result["curve"]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    steps_per_it = args.num_envs * args.num_steps_per_env
    bar = tqdm(total=int(args.seconds), desc=args.env_id.split("/")[-1], unit="s")
    it = 0
    while (elapsed := time.perf_counter() - start) < args.seconds:
        runner.learn(1)
        it += 1
        summary = {k: (None if v != v else v) for k, v in stats.summary().items()}  # one host read; NaN -> null
        elapsed = time.perf_counter() - start
        if it == 1:
            result["first_iteration_s"] = elapsed
        curve["env_steps"].append(it * steps_per_it)
        curve["seconds"].append(elapsed)
        curve["mean_return"].append(summary["mean_return"])
        curve["mean_length"].append(summary["mean_length"])
        curve["episodes"].append(summary["episodes"])
        result["env_steps_per_s"] = it * steps_per_it / elapsed
        result["iterations"] = it
        out.write_text(json.dumps(result, indent=1))
        bar.update(min(int(elapsed), int(args.seconds)) - bar.n)
        bar.set_postfix(ret=summary["mean_return"], sps=f"{result['env_steps_per_s']:,.0f}")
    bar.close()
    print(
        f"{it} iterations, {it * steps_per_it:,} env steps in {elapsed:.1f} s: {result['env_steps_per_s']:,.0f} "
        f"env-steps/s end to end; last mean return {curve['mean_return'][-1]}; wrote {out}"
    )


if __name__ == "__main__":
    main()
