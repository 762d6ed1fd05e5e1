"""The forward before the observations: MuJoCo Warp's whole forward against the passes the task declares.

Builds a velocity or tracking task with ``forward_before_obs=True`` twice, ``forward_passes="full"`` (mjlab's
work) and ``"declared"``, and times on the same device: the forward alone (each plan's ``run``, a captured warp
graph on CUDA), and the whole env step (eager, random actions) of each. Prints ms per call and the ratio, the
passes the declared plan runs, and writes JSON. On a CPU the numbers are warp's CPU backend's (use a small
``--num-envs``); on a GPU they are the ones to quote.

    python benchmarks/forward_passes.py --task go1 --num-envs 64 --steps 20
    python benchmarks/forward_passes.py --task go1 --model-xml /path/to/mjlab/go1.xml --num-envs 4096 --device cuda
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gym_graphreset.managers.manager_based_env import ManagerBasedEnv


def _env(task: str, mode: str, num_envs: int, device: str, model_xml: str | None) -> ManagerBasedEnv:
    kwargs: dict[str, Any] = {"device": device, "forward_before_obs": True, "forward_passes": mode}
    if task == "tracking":
        from dataclasses import replace

        from gym_graphreset.tasks.tracking.config.g1.flat_env_cfg import G1TrackingFlatEnv, g1_tracking_flat_cfg

        task_cfg = g1_tracking_flat_cfg(model_xml=model_xml, keep_sensors=True)
        cfg = replace(task_cfg, forward_before_obs=True, forward_passes=mode)  # type: ignore[arg-type]
        return G1TrackingFlatEnv(num_envs, cfg=cfg, device=device)
    if task == "g1":
        from gym_graphreset.tasks.velocity.config.g1 import G1VelocityFlatEnv

        return G1VelocityFlatEnv(num_envs, model_xml=model_xml, keep_sensors=True, **kwargs)
    from gym_graphreset.tasks.velocity.config.go1 import Go1VelocityFlatEnv

    return Go1VelocityFlatEnv(num_envs, model_xml=model_xml, keep_sensors=True, **kwargs)


def _time(fn: Callable[[], Any], calls: int, device: str) -> float:
    """Milliseconds per call of ``fn`` after two warm-up calls (synchronised on CUDA)."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(2):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return 1e3 * (time.perf_counter() - start) / calls


def main(argv: list[str] | None = None) -> int:
    """Time both forwards and both steps; print and write JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=("go1", "g1", "tracking"), default="go1")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=20, help="timed calls of each (default: 20)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--model-xml", default=None, help="the robot's MJCF (e.g. mjlab's go1.xml with its sensors)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = p.parse_args(argv)
    gen = torch.Generator().manual_seed(0)
    result: dict[str, Any] = {"task": args.task, "num_envs": args.num_envs, "device": args.device}
    for mode in ("full", "declared"):
        env = _env(args.task, mode, args.num_envs, args.device, args.model_xml)
        env.reset(seed=0)
        actions = [0.5 * torch.randn(env.action_space.shape, generator=gen).to(env.device) for _ in range(4)]
        env.step(actions[0])  # a state after physics, with contacts
        plan = env.forward_plan

        def forward(env: ManagerBasedEnv = env) -> None:
            env.runtime.run("forward", env._forward)

        def step(env: ManagerBasedEnv = env, actions: list[torch.Tensor] = actions) -> None:
            for a in actions:
                env.step(a)

        result[mode] = {
            "passes": list(plan.passes) if not plan.full else ["full"],
            "forward_ms": _time(forward, args.steps, args.device),
            "step_ms": _time(step, max(1, args.steps // 4), args.device) / len(actions),
        }
        env.close()
    full, declared = result["full"], result["declared"]
    result["forward_ratio"] = declared["forward_ms"] / full["forward_ms"]
    result["step_ratio"] = declared["step_ms"] / full["step_ms"]
    print(f"{args.task}, {args.num_envs} envs on {args.device}; declared passes: {declared['passes']}")
    for key in ("forward_ms", "step_ms"):
        ratio = declared[key] / full[key]
        print(f"  {key[:-3]:8s} full {full[key]:9.3f} ms   declared {declared[key]:9.3f} ms   ({ratio:.3f}x)")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"forward_passes_{args.task}_{args.num_envs}_{args.device.split(':')[0]}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
