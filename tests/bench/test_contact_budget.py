"""benchmarks/contact_budget.py: its arithmetic, its argument checks, and a short probe of Go1 flat on the CPU."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import load_script

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ROOT = Path(__file__).resolve().parents[2]
GO1 = "gym_graphreset/Go1-Velocity-Flat-v0"


@pytest.fixture(scope="module")
def cb() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "contact_budget.py")


def test_suggestion_is_peak_times_margin_rounded_up_to_8(cb: ModuleType) -> None:
    assert cb.suggest(30, 8, 2.0) == {"njmax": 64, "nconmax": 16}
    assert cb.suggest(33, 9, 2.0) == {"njmax": 72, "nconmax": 24}
    assert cb.suggest(30, 8, 1.0) == {"njmax": 32, "nconmax": 8}
    assert cb.suggest(3, 0, 2.0) == {"njmax": 16, "nconmax": 8}  # njmax never below the solver's tile
    assert cb.round_up(16.0) == 16 and cb.round_up(16.5) == 24 and cb.round_up(0) == 8


def test_percentile_of_a_histogram(cb: ModuleType) -> None:
    hist = [0] * 10
    hist[3], hist[7] = 999, 1  # 1000 samples: 999 at 3, one at 7
    assert cb.percentile(hist, 0.999) == 3 and cb.percentile(hist, 1.0) == 7
    assert cb.percentile([0, 0], 0.999) == 0


def test_overflow_names_split_budgets_from_convergence(cb: ModuleType) -> None:
    import mujoco_warp as mjw

    T = mjw.OverflowType
    assert cb.overflow_names(int(T.NEFC | T.ITERATIONS | T.BROADPHASE)) == (["NEFC", "BROADPHASE"], ["ITERATIONS"])
    assert cb.overflow_names(0) == ([], [])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--margin", "0.5"], "argument --margin: must be a number >= 1"),
        (["--margin", "nan"], "argument --margin: must be a number >= 1"),
        (["--num-envs", "0"], "argument --num-envs: must be an int >= 1, got '0'"),
        (["--steps", "ten"], "argument --steps: must be an int >= 1, got 'ten'"),
        (["--env-kwargs", "njmax"], "--env-kwargs: items must be key=value with a non-empty key, got 'njmax'"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    cb: ModuleType, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cb.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_env_kwargs_are_typed_like_bench_variants(cb: ModuleType) -> None:
    kwargs = cb._env_kwargs(["njmax=64,nconmax=16", "keep_sensors=true", "model_xml=/x/go1.xml"])
    assert kwargs == {"njmax": 64, "nconmax": 16, "keep_sensors": True, "model_xml": "/x/go1.xml"}


def test_an_env_without_mujoco_warp_is_refused(cb: ModuleType) -> None:
    with pytest.raises(ValueError, match="builds a CartPoleVectorEnv, not a MuJoCo Warp env"):
        cb.probe("gym_graphreset/CartPole-v1", 2, 2, device="cpu", show_progress=False)


def test_probe_of_go1_flat(cb: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped allocation: no overflow, a clean latch, peaks within it and a suggestion covering them."""
    assert cb.main(["--env-id", GO1, "--num-envs", "4", "--steps", "12", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "suggested (peak x 2, rounded up to 8)" in out
    result = json.loads((tmp_path / "contact_budget_Go1-Velocity-Flat-v0_4_cpu.json").read_text())
    assert result["allocation"] == {"njmax": 300, "njmax_pad": 304, "nconmax": 48, "naconmax": 192, "nworld": 4}
    rows, contacts = result["constraint_rows_per_world"], result["contacts_per_world"]
    assert 0 < rows["p99.9"] <= rows["peak"] < 300 and 0 < contacts["p99.9"] <= contacts["peak"] < 48
    assert result["overflow"] == {"bits": 0, "names": [], "worlds": 0} and result["latch"] == "clean"
    s = result["suggested"]
    assert s["njmax"] >= 2 * rows["peak"] and s["njmax"] % 8 == 0
    pool = result["pool"]
    assert pool["peak_per_world"] == -(-max(pool["peak_candidate_pairs"], pool["peak_contacts"]) // 4)
    assert s["nconmax"] >= 2 * pool["peak_per_world"] and s["nconmax"] % 8 == 0
    assert len(result["per_step"]["max_constraint_rows"]) == 12 and max(result["per_step"]["contacts"]) > 0


def test_probe_under_a_too_small_budget_reports_the_overflow(cb: ModuleType) -> None:
    """``njmax=8``: the rows a world asked for are still counted past it, and the overflow is reported twice
    (the recorded bits and the env's latch)."""
    result = cb.probe(GO1, 4, 4, device="cpu", env_kwargs={"njmax": 8}, show_progress=False)
    assert result["allocation"]["njmax"] == 8
    assert result["constraint_rows_per_world"]["peak"] > 8  # the demand, not the allocation
    assert "NEFC" in result["overflow"]["names"] and result["overflow"]["worlds"] == 4
    assert "mjwarp_overflow[NEFC]" in result["latch"] and result["latched_overflow_checks"] == ["NEFC"]
    assert result["suggested"]["njmax"] >= 2 * result["constraint_rows_per_world"]["peak"]
