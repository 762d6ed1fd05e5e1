"""``profile``: where a step's time goes at each batch size (physics, warp, copies, torch), as a table, JSON, PNG."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import gymnasium as gym

from gym_graphreset.bench.runner import MODES
from gym_graphreset.cli.args import int_at_least, resolve_device, sizes, unregistered_env, usage_error


def add_parser(sub: Any) -> None:
    """The ``profile`` subcommand's arguments."""
    help_text = "profile a mode's step at each batch size and group its time into physics, warp, copies, torch"
    p = sub.add_parser("profile", help=help_text, description=help_text)
    p.add_argument("--env-id", default="gym_graphreset/Ant-v5", help="a registered vector env id (default: Ant-v5)")
    p.add_argument("--num-envs", type=sizes, default="4096", help="comma-separated batch sizes (default: 4096)")
    p.add_argument(
        "--mode",
        default=None,
        help=f"one of {list(MODES)} (default: step graph on CUDA, masked+persistent on the CPU)",
    )
    p.add_argument("--steps", type=int_at_least(1), default=20, help="profiled steps per size (default: 20)")
    p.add_argument("--warmup", type=int_at_least(0), default=10, help="untimed steps first (default: 10)")
    p.add_argument("--device", default="auto", help="cuda, cuda:N, cpu or auto (default: auto)")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("runs") / "profile",
        help="output folder for JSON and PNG (default: runs/profile in the current folder)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    """The ``profile`` subcommand: the table printed, the JSON and the plot written."""
    from gym_graphreset.bench.profile import plot_profiles, profile_sweep, profile_table, save_profiles

    if problem := unregistered_env(args.env_id):
        return usage_error(problem)
    device = resolve_device(args.device)
    if isinstance(device, str):
        return usage_error(device)
    if args.mode is None:
        args.mode = "step graph" if device.type == "cuda" else "masked+persistent"
    if args.mode not in MODES:
        return usage_error(f"--mode must be one of {list(MODES)}, got {args.mode!r}")
    if device.type != "cuda" and MODES[args.mode].graph is not None:
        return usage_error(f"--mode {args.mode!r} captures a CUDA graph; the device is {device}")

    def make_inner(n: int) -> gym.vector.VectorEnv:
        return gym.make_vec(args.env_id, num_envs=n, vectorization_mode="vector_entry_point", device=device)

    profiles = profile_sweep(
        make_inner,
        args.num_envs,
        args.mode,
        steps=args.steps,
        warmup=args.warmup,
        env_id=args.env_id,
        show_progress=not args.no_progress,
    )
    print(profile_table(profiles))
    if device.type == "cpu":
        print("on the CPU the profiler sees torch's operators only: warp's CPU kernels (the physics) are not timed")
    stem = f"profile-{args.env_id.split('/')[-1]}-{device.type}"
    path = save_profiles(profiles, args.out / f"{stem}.json")
    plotted = False
    if len(profiles) > 1:  # the plot is time per env step against batch size: one size draws no band
        plotted = plot_profiles(profiles, args.out / f"{stem}.png", f"{args.env_id}, {args.mode}, on {device}")
    else:
        print("one batch size: no plot (give several, e.g. --num-envs 1024,4096, to see what grows with the batch)")
    print(f"wrote {path}" + (f" and {args.out / (stem + '.png')}" if plotted else ""))
    return 0
