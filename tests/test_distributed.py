"""One population split over ranks (torchrun, gloo on the CPU): the same trajectories as one process,
all-reduced statistics equal to the single-process ones, a fault on one rank raised on every rank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gym_graphreset.distributed import rank_info

WORKER = Path(__file__).with_name("dist_worker.py")


def _run(out: Path, nproc: int, mode: str = "traj") -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on the CPU, even on a GPU machine
    if nproc == 1:
        cmd = [sys.executable, str(WORKER)]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", str(WORKER)]
    done = subprocess.run(
        [*cmd, "--out", str(out), "--mode", mode], env=env, capture_output=True, text=True, timeout=150
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _result(out: Path, world: int, rank: int) -> dict:
    return json.loads((out / f"result_ws{world}_rank{rank}.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(out, 1)
    _run(out, 2)
    return out


@pytest.mark.slow
def test_global_env_trajectories_do_not_depend_on_world_size(runs: Path) -> None:
    single = torch.load(runs / "traj_ws1_rank0.pt")
    split = torch.cat([torch.load(runs / f"traj_ws2_rank{r}.pt") for r in range(2)], dim=1)
    assert single.shape == split.shape == (61, 8, 4)
    assert torch.equal(single, split)


@pytest.mark.slow
def test_all_reduced_statistics_equal_single_process(runs: Path) -> None:
    single = _result(runs, 1, 0)["summary"]
    assert single["episodes"] > 0
    for rank in range(2):
        assert _result(runs, 2, rank)["summary"] == single


@pytest.mark.slow
def test_fault_on_one_rank_is_raised_on_every_rank(tmp_path: Path) -> None:
    _run(tmp_path, 2, mode="fault")
    for rank in range(2):
        error = _result(tmp_path, 2, rank)["error"]
        assert "injected_fault on rank 1: rank 1 broke on purpose" in error, error
        assert "between steps 0 and 9" in error


def test_rank_info_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    info = rank_info(1024, device="cpu")
    assert (info.global_env_offset, info.total_envs, info.local_rank) == (3072, 4096, 1)
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match=r"RANK must be in \[0, WORLD_SIZE=4\), got 4"):
        rank_info(8, device="cpu")
