"""pytest-benchmark suite: one env step per mode (``make bench``; JSON under benchmarks/results/).

Each benchmark synchronises inside the timed function, and records ms/step, env-steps/s, host syncs
per step (CUDA), peak GPU memory, versions and device in ``extra_info``. Speed lives here, never in tests.
"""

from __future__ import annotations

import os

import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.bench.results import env_versions
from gym_graphreset.bench.runner import CUDA_ONLY, MODES, sample_actions
from gym_graphreset.envs import CartPoleVectorEnv

CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if CUDA else "cpu")
NUM_ENVS = [int(n) for n in os.environ.get("GGR_BENCH_ENVS", "512,4096").split(",")]
ENV_IDS = os.environ.get("GGR_BENCH_ENV_IDS", "cartpole" + (",gym_graphreset/Ant-v5" if CUDA else "")).split(",")


def _make(env_id: str, num_envs: int):
    if env_id == "cartpole":
        return CartPoleVectorEnv(num_envs, device=DEVICE)
    import gymnasium as gym

    return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", device=DEVICE)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("num_envs", NUM_ENVS)
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step(benchmark, env_id: str, num_envs: int, mode: str) -> None:
    if mode in CUDA_ONLY and not CUDA:
        pytest.skip("CUDA graph modes need a GPU")
    env = FixedShapeAutoresetVectorEnv(_make(env_id, num_envs), MODES[mode], reset_terms={"ep": EpisodeStatistics()})
    actions = sample_actions(env.action_space, env.device, 16)
    env.reset(seed=0)
    for i in range(10):  # warm-up and capture
        env.step(actions[i % 16])
    counter = {"i": 0}

    def one_step() -> None:
        env.step(actions[counter["i"] % 16])
        counter["i"] += 1
        if CUDA:
            torch.cuda.synchronize()

    if CUDA:
        torch.cuda.reset_peak_memory_stats()
    benchmark.pedantic(one_step, rounds=50, iterations=1, warmup_rounds=2)
    ms = benchmark.stats.stats.mean * 1e3
    syncs = None
    if CUDA:
        from gym_graphreset.testing import count_host_syncs

        syncs = count_host_syncs(lambda: [env.step(actions[j]) for j in range(8)])[0] / 8
    benchmark.extra_info.update(
        {
            "env_id": env_id,
            "mode": mode,
            "num_envs": num_envs,
            "device": str(env.device),
            "ms_per_step": ms,
            "env_steps_per_s": num_envs / (ms / 1e3),
            "host_syncs_per_step": syncs,
            "peak_gpu_mem_mb": torch.cuda.max_memory_allocated() / 2**20 if CUDA else None,
            "versions": env_versions(),
        }
    )
