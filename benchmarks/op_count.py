"""How many torch operators a task's env step issues, and which library functions issue them.

Outside a compiled step each torch operator is one kernel launch on a GPU, and one node of a captured step graph
(a few microseconds of replay each, however small its tensor): the count is the launch floor of the step's
non-physics part. This counts them on any device, the CPU included (the library's torch code is the same
there; counted on a GPU, a few may differ where a kernel path does): a registered
task (``--env-id``) under the autoreset wrapper, stepped ``--steps`` times with zero actions after a warm-up,
every operator that computes (views and metadata-only operators left out) attributed to the innermost
``gym_graphreset`` function on the Python stack. Warp's kernels (the physics, the ray casts) are not torch
operators and are not counted. Prints the total per step and the top functions and operators; ``--out`` writes
JSON.

    python benchmarks/op_count.py --env-id gym_graphreset/Go1-Velocity-Rough-v0
    python benchmarks/op_count.py --env-id gym_graphreset/G1-Tracking-Flat-v0 --top 30 --out runs/ops.json
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import gym_graphreset  # noqa: F401  (registers the env ids)
from gym_graphreset import FixedShapeAutoresetVectorEnv

METADATA = frozenset({"empty", "empty_like", "empty_strided", "lift_fresh", "_local_scalar_dense", "is_nonzero"})
"""Operators that allocate or read metadata without computing (not launches)."""


@dataclass(frozen=True)
class OpCount:
    """Torch operators per env step of one task.

    Attributes:
        env_id: The task.
        num_envs: Its worlds.
        per_step: Operators per step.
        by_function: ``"module.py:function"`` (under ``gym_graphreset/``) -> operators per step, most first.
        by_operator: Operator name -> per step, most first.
    """

    env_id: str
    num_envs: int
    per_step: float
    by_function: dict[str, float]
    by_operator: dict[str, float]


class _Counting(TorchDispatchMode):
    """Counts each computing operator by the innermost library function that issued it."""

    def __init__(self) -> None:
        super().__init__()
        self.by_function: Counter[str] = Counter()
        self.by_operator: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if not (func.is_view or name in METADATA):
            frames = [f for f in traceback.extract_stack() if "/gym_graphreset/" in f.filename]
            where = f"{frames[-1].filename.split('/gym_graphreset/')[-1]}:{frames[-1].name}" if frames else "(other)"
            self.by_function[where] += 1
            self.by_operator[name] += 1
        return func(*args, **(kwargs or {}))


def count_ops(env_id: str, num_envs: int = 16, steps: int = 2, warmup: int = 3, device: str = "cpu") -> OpCount:
    """The torch operators of ``steps`` env steps of ``env_id`` (after ``warmup`` steps), per step."""
    env = FixedShapeAutoresetVectorEnv(
        gym.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point", device=device), "masked_persistent"
    )
    try:
        env.reset(seed=0)
        space = env.action_space
        action = torch.as_tensor(np.zeros(space.shape, dtype=space.dtype), device=device)  # any space's dtype
        for _ in range(warmup):
            env.step(action)
        counting = _Counting()
        with counting:
            for _ in range(steps):
                env.step(action)
    finally:
        env.close()
    total = sum(counting.by_function.values())
    return OpCount(
        env_id=env_id,
        num_envs=num_envs,
        per_step=total / steps,
        by_function={k: v / steps for k, v in counting.by_function.most_common()},
        by_operator={k: v / steps for k, v in counting.by_operator.most_common()},
    )


def main(argv: list[str] | None = None) -> int:
    """Count, print the top ``--top`` functions and operators, write ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="gym_graphreset/Go1-Velocity-Rough-v0", help="a registered task")
    parser.add_argument("--num-envs", type=int, default=16, help="worlds (default: 16)")
    parser.add_argument("--steps", type=int, default=2, help="counted steps (default: 2)")
    parser.add_argument("--top", type=int, default=20, help="functions and operators printed (default: 20)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--out", type=Path, default=None, help="a JSON file to write")
    args = parser.parse_args(argv)
    for flag, value in (("--num-envs", args.num_envs), ("--steps", args.steps), ("--top", args.top)):
        if value < 1:
            parser.error(f"{flag} must be >= 1, got {value}")
    if args.env_id not in gym.registry:
        parser.error(
            f"--env-id must be a registered env id (e.g. gym_graphreset/Go1-Velocity-Rough-v0), got {args.env_id!r}"
        )
    result = count_ops(args.env_id, args.num_envs, args.steps, device=args.device)
    print(f"{result.env_id} x{result.num_envs}: {result.per_step:.0f} torch operators per env step")
    for title, table in (("function", result.by_function), ("operator", result.by_operator)):
        print(f"\n| {title} | per step |\n| --- | ---: |")
        for key, value in list(table.items())[: args.top]:
            print(f"| {key} | {value:g} |")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(asdict(result), indent=1))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
