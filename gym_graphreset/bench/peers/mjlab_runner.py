"""Time one mjlab task at one size and print the measurement as one JSON line (run in mjlab's interpreter).

mjlab pins its own mujoco / mujoco-warp, so it cannot share a process with this library: the ``bench``
CLI runs this file by path with mjlab's Python (``--peer-python``) and reads the last JSON line it
prints. It imports only the standard library, torch and mjlab (never ``gym_graphreset``).

What it measures, on ``--num-envs`` envs driven by uniform random actions in [-1, 1]:

- ``ms_per_step``: ``env.step`` after ``--warmup`` untimed steps, between two ``torch.cuda.synchronize``;
- ``physics_ms``: mjlab's own physics alone, ``env.sim.step()`` called ``cfg.decimation`` times per env step,
  on the states its step visits (``--physics-states step``, default: each timed call follows one untimed
  ``env.step`` and is timed alone between two synchronisations) or continued from the last step's state
  with its ctrl and no resets (``free``), as ``gym_graphreset``'s ``bench --physics-states`` times its own;
- ``host_syncs_per_step``: torch's synchronising calls per step, counted as the warnings of
  ``torch.cuda.set_sync_debug_mode("warn")`` over a few probe steps (warp's own syncs are not seen);
- ``env_steps_per_s``: ``num_envs`` x timed steps / seconds.

Exit status: 0 with a result line; 3 with an ``{"error": "missing"}`` line when mjlab (or torch) cannot be
imported; 2 on bad arguments.

A tracking task (``Mjlab-Tracking-Flat-Unitree-G1``) needs ``--motion-file``: a clip in mjlab's ``npz`` format
(the one ``gym_graphreset``'s ``G1-Tracking-Flat-v0`` reads, so both sides track the same clip).

Usage: ``python mjlab_runner.py --num-envs 4096 --steps 100 --warmup 20 [--task ...] [--device cuda:0]
[--physics-states step|free] [--motion-file clip.npz]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import re
import sys
import time
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

DEFAULT_TASK = "Mjlab-Velocity-Flat-Unitree-Go1"
PEER = "mjlab"
EXIT_MISSING = 3
SYNC_PROBE_STEPS = 8


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Time one mjlab task; prints one JSON line.")
    parser.add_argument("--task", default=DEFAULT_TASK, help=f"a registered mjlab task id (default: {DEFAULT_TASK})")
    parser.add_argument("--num-envs", type=int, required=True, help="number of envs (> 0)")
    parser.add_argument("--steps", type=int, default=100, help="timed env steps (> 0, default: 100)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed env steps first (>= 0, default: 20)")
    parser.add_argument("--device", default="cuda:0", help="torch device for mjlab (default: cuda:0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the env and of the actions (default: 0)")
    parser.add_argument(
        "--physics-states",
        choices=("step", "free"),
        default="step",
        help="states its physics is timed on: those its step leaves, or free-running (default: step)",
    )
    parser.add_argument(
        "--motion-file", default=None, help="the clip (mjlab's npz) of a tracking task's motion command"
    )
    return parser


def _emit(record: dict[str, Any]) -> None:
    """Print the one JSON line the parent reads (flushed: mjlab prints a lot before it)."""
    print(json.dumps({"peer": PEER, **record}), flush=True)


def _versions(torch: Any) -> dict[str, str]:
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for dist in ("mjlab", "mujoco", "mujoco-warp", "warp-lang", "rsl-rl-lib"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    if torch.cuda.is_available():
        versions["gpu"] = torch.cuda.get_device_name()
    return versions


def _count_sync_warnings(torch: Any, fn: Any) -> int:
    """Torch's synchronising calls made by ``fn()``: warnings of ``set_sync_debug_mode("warn")``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum("synchroniz" in str(w.message) for w in caught)


def measure(
    task: str,
    num_envs: int,
    steps: int,
    warmup: int,
    device: str,
    seed: int,
    physics_states: str = "step",
    motion_file: str | None = None,
) -> dict[str, Any]:
    """Build ``task`` at ``num_envs`` and time its step, its bare physics and its host syncs.

    ``motion_file`` sets the clip of the task's ``motion`` command (a tracking task); a task without one
    refuses it, and a tracking task needs it.
    """
    import mjlab.tasks
    import torch
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.tasks.registry import load_env_cfg

    is_cuda = torch.device(device).type == "cuda"

    def sync() -> None:
        if is_cuda:
            torch.cuda.synchronize(device)

    cfg = load_env_cfg(task)
    motion = cfg.commands.get("motion") if isinstance(cfg.commands, dict) else None
    if motion_file is not None:
        if motion is None:
            raise ValueError(f"--motion-file given, but {task} has no motion command (a tracking task has one)")
        motion.motion_file = str(Path(motion_file).resolve())
    elif motion is not None and not getattr(motion, "motion_file", ""):
        raise ValueError(f"{task} tracks a clip: give --motion-file (an npz in mjlab's format)")
    cfg.scene.num_envs = num_envs
    cfg.seed = seed
    built = time.perf_counter()
    env = ManagerBasedRlEnv(cfg, device=device)
    env.reset()
    build_s = time.perf_counter() - built
    gen = torch.Generator(device=device).manual_seed(seed)
    width = env.action_manager.total_action_dim
    pool = [torch.rand((num_envs, width), generator=gen, device=device) * 2 - 1 for _ in range(16)]

    for i in range(warmup):
        env.step(pool[i % len(pool)])
    sync()
    if is_cuda:
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for i in range(steps):
        env.step(pool[i % len(pool)])
    sync()
    step_s = (time.perf_counter() - start) / steps

    syncs: float | None = None
    if is_cuda:
        probe = min(SYNC_PROBE_STEPS, max(steps, 1))
        syncs = _count_sync_warnings(torch, lambda: [env.step(pool[j % len(pool)]) for j in range(probe)]) / probe
        sync()

    decimation = int(cfg.decimation)
    if physics_states == "free":
        for _ in range(min(warmup, 5) * decimation):
            env.sim.step()
        sync()
        start = time.perf_counter()
        for _ in range(steps * decimation):
            env.sim.step()
        sync()
        physics_s = (time.perf_counter() - start) / steps
    else:
        physics_s = 0.0
        for i in range(min(warmup, 5) + steps):
            env.step(pool[i % len(pool)])  # untimed: a state its step leaves
            sync()
            start = time.perf_counter()
            for _ in range(decimation):
                env.sim.step()
            sync()
            if i >= min(warmup, 5):
                physics_s += time.perf_counter() - start
        physics_s /= steps
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if is_cuda else None
    close = getattr(env, "close", None)
    if callable(close):
        close()

    import mjlab

    robot = re.search(r"Unitree-(Go1|G1)$", task)
    zoo = Path(mjlab.__file__).parent / "asset_zoo" / "robots"
    model_xml = zoo / f"unitree_{robot.group(1).lower()}" / "xmls" / f"{robot.group(1).lower()}.xml" if robot else None
    return {
        "task": task,
        "num_envs": num_envs,
        "device": device,
        "steps": steps,
        "warmup": warmup,
        "decimation": decimation,
        "ms_per_step": step_s * 1e3,
        "physics_ms": physics_s * 1e3,
        "physics_states": physics_states,
        "step_over_physics": step_s / physics_s,
        "host_syncs_per_step": syncs,
        "env_steps_per_s": num_envs / step_s,
        "peak_gpu_mem_mb": peak,
        "build_s": build_s,
        "model_xml": str(model_xml) if model_xml is not None and model_xml.exists() else None,
        "motion_file": motion_file,
        "versions": _versions(torch),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, measure, print the JSON line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    for name, value, low in (
        ("--num-envs", args.num_envs, 1),
        ("--steps", args.steps, 1),
        ("--warmup", args.warmup, 0),
    ):
        if value < low:
            parser.error(f"{name} must be >= {low}, got {value}")
    if args.motion_file is not None and not Path(args.motion_file).is_file():
        parser.error(f"--motion-file: no such file {args.motion_file!r} (a clip in mjlab's npz format)")
    try:
        import mjlab  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        _emit({"error": "missing", "detail": f"{type(exc).__name__}: {exc}", "python": sys.executable})
        return EXIT_MISSING
    record = measure(
        args.task, args.num_envs, args.steps, args.warmup, args.device, args.seed, args.physics_states, args.motion_file
    )
    _emit(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
