"""One population split over ranks (torchrun, gloo on the CPU): the same trajectories as one process
(with even or uneven shares), all-reduced statistics equal to the single-process ones, a fault on one
rank raised on every rank, a rank that raised or closed named on the others, and poll settings that
differ across ranks named at the first poll (none of it hangs: each run has a deadline)."""

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


def _run(out: Path, nproc: int, mode: str = "traj", timeout: int = 150) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on the CPU, even on a GPU machine
    if nproc == 1:
        cmd = [sys.executable, str(WORKER)]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", str(WORKER)]
    done = subprocess.run(
        [*cmd, "--out", str(out), "--mode", mode], env=env, capture_output=True, text=True, timeout=timeout
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


@pytest.mark.slow
def test_uneven_shares_get_distinct_global_env_ids(runs: Path, tmp_path: Path) -> None:
    """3 rows on rank 0 and 5 on rank 1: offsets are the prefix sums, trajectories those of one process."""
    _run(tmp_path, 2, mode="uneven", timeout=60)
    assert [(_result(tmp_path, 2, r)["offset"], _result(tmp_path, 2, r)["total"]) for r in range(2)] == [(0, 8), (3, 8)]
    split = torch.cat([torch.load(tmp_path / f"traj_ws2_rank{r}.pt") for r in range(2)], dim=1)
    assert torch.equal(split, torch.load(runs / "traj_ws1_rank0.pt"))


@pytest.mark.slow
def test_a_rank_that_raised_is_named_on_its_peer(tmp_path: Path) -> None:
    """An inner env raising in step, and a refused action, on rank 1: rank 0's poll names rank 1 and why."""
    _run(tmp_path, 2, mode="raises", timeout=60)
    peer, failing = _result(tmp_path, 2, 0), _result(tmp_path, 2, 1)
    raised = peer["raises"]["error"]
    assert raised.startswith("CrossRankError: ") and "rank_failed on rank 1: step() 6 was interrupted" in raised, raised
    assert "RuntimeError: rank 1's physics broke on purpose (announced in close(), after step 5)" in raised
    assert failing["raises"]["error"].startswith("RuntimeError: rank 1's physics broke")
    refused = peer["refused"]["error"]
    assert "rank_failed on rank 1: step() 6 raised ValueError: " in refused, refused
    assert failing["refused"]["error"].startswith("ValueError: ")
    for rank in (peer, failing):  # the failing rank closes quietly; the peer made no collective after raising
        assert rank["raises"]["close_error"] == rank["refused"]["close_error"] == ""


@pytest.mark.slow
def test_poll_settings_that_differ_across_ranks_are_named(tmp_path: Path) -> None:
    """Another poll interval (at construction or changed later) or process group on rank 1 is named on both."""
    _run(tmp_path, 2, mode="settings", timeout=60)
    for rank in range(2):
        result = _result(tmp_path, 2, rank)
        first = result["interval"]["error"]
        assert "`validation_poll_interval` differs across ranks (rank 0: 10, rank 1: 5)" in first, first
        assert "this rank polled after 0 steps" in first  # the first poll: reset(), before any step
        later = result["interval_later"]["error"]
        assert "`validation_poll_interval` differs across ranks (rank 0: 10, rank 1: 5)" in later, later
        group = result["group"]["error"]
        assert "`process_group` differs across ranks (rank 0: the default group (ranks [0, 1]), rank 1: group " in group
        assert all(result[name]["close_error"] == "" for name in ("interval", "interval_later", "group"))


def test_rank_info_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    info = rank_info(1024, device="cpu")
    assert (info.global_env_offset, info.total_envs, info.local_rank) == (3072, 4096, 1)  # no group: even shares
    assert info.envs_per_rank == (1024,) * 4
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match=r"RANK must be in \[0, WORLD_SIZE=4\), got 4"):
        rank_info(8, device="cpu")
