"""The CPU engines users pick instead, measured on the same task: EnvPool (C++ threads, MuJoCo C).

EnvPool is the fastest CPU engine for Gymnasium's MuJoCo tasks. :func:`measure_envpool` times one
configuration in its asynchronous mode (``send``/``recv`` of ``batch_size`` rows while the others step);
:func:`best_envpool` sweeps ``num_envs`` x ``batch_size`` x threads and reports the best, which is the
baseline a fair comparison uses. Gymnasium's own ``AsyncVectorEnv`` is
:func:`gym_graphreset.bench.runner.measure_gymnasium_async`.

EnvPool is the optional extra ``envpool`` (``envpool`` and ``envpool-assets``, its MuJoCo XMLs); importing
it loads every registry it ships, so install it whole.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from gym_graphreset.bench.results import ModeResult

__all__ = ["DEFAULT_SWEEP", "best_envpool", "envpool_task", "measure_envpool"]

DEFAULT_SWEEP: dict[str, tuple[int, ...]] = {"num_envs": (64, 256, 512), "batch_size_fraction": (2, 1)}
"""The sweep of :func:`best_envpool`: ``num_envs``, and ``batch_size = num_envs // fraction``."""


def envpool_task(env_id: str) -> str:
    """EnvPool's id of one of our tasks: ``gym_graphreset/Ant-v5`` -> ``Ant-v5`` (the same task)."""
    return env_id.split("/")[-1]


def measure_envpool(
    task: str,
    num_envs: int,
    batch_size: int,
    num_threads: int,
    *,
    steps: int = 500,
    warmup: int = 20,
    seed: int = 0,
) -> ModeResult:
    """Env-steps/s of EnvPool on ``task`` with random actions, asynchronous ``send``/``recv``.

    Args:
        task: EnvPool's id (``"Ant-v5"``, Gymnasium's v5 tasks, MuJoCo C).
        num_envs: Envs in the pool.
        batch_size: Rows returned by each ``recv`` (``num_envs`` makes it synchronous).
        num_threads: C++ worker threads.
        steps: Timed ``recv``/``send`` rounds (each steps ``batch_size`` envs).
        warmup: Untimed rounds first.
        seed: Seed of the pool and of the actions.

    Raises:
        ValueError: ``batch_size`` is not in ``[1, num_envs]``.
        ImportError: EnvPool is not installed (the ``envpool`` extra).
    """
    if not 1 <= batch_size <= num_envs:
        raise ValueError(f"`batch_size` must be in [1, num_envs={num_envs}], got {batch_size}")
    import envpool

    env = envpool.make(
        task, env_type="gymnasium", num_envs=num_envs, batch_size=batch_size, num_threads=num_threads, seed=seed
    )
    pool = _action_pool(env.action_space, batch_size, seed)
    env.async_reset()
    transitions, start = 0, 0.0
    for i in range(warmup + steps):
        if i == warmup:
            transitions, start = 0, time.perf_counter()
        *_, info = env.recv()
        ids = info["env_id"]
        env.send(pool[i % len(pool)][: len(ids)], ids)
        transitions += len(ids)
    elapsed = time.perf_counter() - start
    env.close()
    mode = f"envpool x{num_envs} b{batch_size} t{num_threads}"
    return ModeResult.cpu_baseline(
        mode,
        task,
        num_envs,
        steps,
        elapsed,
        transitions,
        engine="envpool",
        batch_size=batch_size,
        num_threads=num_threads,
    )


def _action_pool(space: gym.Space, batch_size: int, seed: int, count: int = 16) -> list[np.ndarray]:
    """Random actions for ``batch_size`` rows of a Box or Discrete space (Gymnasium spaces, from EnvPool)."""
    rng = np.random.default_rng(seed)
    if isinstance(space, gym.spaces.Discrete):
        return [rng.integers(int(space.start), int(space.start + space.n), batch_size) for _ in range(count)]
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"the EnvPool baseline samples Box or Discrete actions, got {space}")
    low, high = np.asarray(space.low), np.asarray(space.high)
    return [rng.uniform(low, high, (batch_size, *low.shape)).astype(low.dtype) for _ in range(count)]


def best_envpool(
    task: str,
    *,
    num_envs: Sequence[int] = DEFAULT_SWEEP["num_envs"],
    batch_size_fraction: Sequence[int] = DEFAULT_SWEEP["batch_size_fraction"],
    num_threads: int | None = None,
    steps: int = 300,
) -> tuple[ModeResult, list[ModeResult]]:
    """EnvPool's best env-steps/s over a sweep, and every configuration measured.

    ``num_threads`` defaults to the machine's cores; ``batch_size`` is ``num_envs // fraction``
    (fraction 1: synchronous; 2: half the pool steps while the other half is returned).
    """
    threads = num_threads or os.cpu_count() or 1
    results = [
        measure_envpool(task, n, max(1, n // fraction), threads, steps=steps)
        for n, fraction in itertools.product(num_envs, batch_size_fraction)
    ]
    return max(results, key=lambda r: r.env_steps_per_s), results
