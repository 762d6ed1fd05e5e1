"""The examples run through the public API: the PPO example learns InvertedPendulum on the CPU."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_ppo_cli_parses_flags() -> None:
    ppo = _load("ppo_continuous")
    args = ppo.parse_args(["--env-id", "gym_graphreset/Hopper-v5", "--num-envs", "8", "--cuda-graph", "false"])
    assert (args.env_id, args.num_envs, args.cuda_graph) == ("gym_graphreset/Hopper-v5", 8, False)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_ppo_learns_inverted_pendulum(tmp_path: Path) -> None:
    """~40k env steps on the CPU: the mean episode return rises far above a random policy's (~5-10)."""
    ppo = _load("ppo_continuous")
    args = ppo.parse_args(
        [
            "--env-id",
            "gym_graphreset/InvertedPendulum-v5",
            "--num-envs",
            "64",
            "--total-timesteps",
            "40000",
            "--device",
            "cpu",
            "--num-steps",
            "32",
            "--num-minibatches",
            "4",
            "--update-epochs",
            "5",
            "--log-every",
            "2",
            "--out",
            str(tmp_path),
        ]
    )
    curve = ppo.train(args)
    returns = curve["mean_return"]
    assert returns[0] < 20 and returns[-1] > 50 and returns[-1] > 4 * returns[0], returns
    assert ppo.save_curve(curve, args).stat().st_size > 1000


@pytest.mark.slow
def test_ppo_runs_under_torchrun_with_ddp(tmp_path: Path) -> None:
    """Two CPU ranks (gloo): each steps its share of the population; DDP all-reduces the gradients."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(EXAMPLES / "ppo_continuous.py"),
        "--env-id",
        "gym_graphreset/InvertedPendulum-v5",
        "--num-envs",
        "8",
        "--total-timesteps",
        "512",
        "--num-steps",
        "16",
        "--num-minibatches",
        "2",
        "--update-epochs",
        "1",
        "--log-every",
        "1",
        "--device",
        "cpu",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("final mean return") == 1  # rank 0 reports
    assert (tmp_path / "ppo-InvertedPendulum-v5-8.png").exists()
