"""GPU soak: a long whole-step-graph run, checking that memory, ring addresses and throughput stay flat.

    python benchmarks/soak.py --env-id gym_graphreset/HalfCheetah-v5 --num-envs 4096 --steps 20000 --out results/

Every ``--window`` steps it records ms/step, torch allocator bytes, device-wide free bytes and the ring's
buffer addresses; after a reference window (from step ``--window``) each of them must equal the reference,
and every validation poll must be silent. Writes JSON (and a PNG when matplotlib is there).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import torch
from tqdm.auto import tqdm

import gym_graphreset  # noqa: F401  (registers the env ids)
from gym_graphreset import PRESETS, EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.bench.plotting import plot_soak
from gym_graphreset.bench.runner import sample_actions


def main(argv: list[str] | None = None) -> int:
    """Run the soak; exit status 1 if anything drifted."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="gym_graphreset/HalfCheetah-v5")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--window", type=int, default=1000)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = p.parse_args(argv)
    cuda = torch.cuda.is_available()  # on a CPU (a smoke run) the eager persistent mode stands in
    inner = gym.make_vec(
        args.env_id, num_envs=args.num_envs, vectorization_mode="vector_entry_point", device="cuda" if cuda else "cpu"
    )
    preset = PRESETS["step_graph" if cuda else "masked_persistent"]
    env = FixedShapeAutoresetVectorEnv(
        inner, preset, reset_terms={"ep": EpisodeStatistics()}, validation_poll_interval=args.window
    )
    pool = sample_actions(env.action_space, env.device, 64)
    env.reset(seed=0)
    windows = []
    start = time.perf_counter()
    for t in tqdm(range(1, args.steps + 1), desc="soak", mininterval=5):
        env.step(pool[t % len(pool)])  # polls every window: a failure raises here
        if t % args.window == 0:
            if cuda:
                torch.cuda.synchronize()
            now = time.perf_counter()
            free = torch.cuda.mem_get_info()[0] if cuda else 0
            ring = sorted(b.data_ptr() for slot in env.ring.slots for b in slot.buffers())
            windows.append(
                {
                    "step": t,
                    "ms_per_step": (now - start) * 1e3 / args.window,
                    "allocated": torch.cuda.memory_allocated() if cuda else 0,
                    "reserved": torch.cuda.memory_reserved() if cuda else 0,
                    "device_free": free,
                    "ring": ring,
                    "captures": env.graph.captures if env.graph else 0,
                }
            )
            start = time.perf_counter()
    env.close()
    ref = windows[0]
    keys = ("allocated", "reserved", "device_free", "ring", "captures")
    drift = {k: [w["step"] for w in windows[1:] if w[k] != ref[k]] for k in keys}
    ms = [w["ms_per_step"] for w in windows]
    summary = {
        "env_id": args.env_id,
        "num_envs": args.num_envs,
        "steps": args.steps,
        "env_steps": args.steps * args.num_envs,
        "drift_windows": drift,
        "ms_first_window": ms[0],
        "ms_last_window": ms[-1],
        "ms_min": min(ms),
        "ms_max": max(ms),
        "env_steps_per_s_first": args.num_envs / ms[0] * 1e3,
        "env_steps_per_s_last": args.num_envs / ms[-1] * 1e3,
        "latch": "silent (every poll passed)",
        "windows": [{k: v for k, v in w.items() if k != "ring"} for w in windows],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"soak-{args.env_id.split('/')[-1]}-{args.num_envs}"
    (args.out / f"{stem}.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if k != "windows"}, indent=2))
    plot_soak(windows, args.out / f"{stem}.png", f"soak: {args.env_id} x{args.num_envs}, step graph")
    return 1 if any(drift.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
