"""benchmarks/op_count.py: its argument checks, and a count of Go1 flat's step on the CPU that adds up."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
GO1 = "gym_graphreset/Go1-Velocity-Flat-v0"


@pytest.fixture(scope="module")
def oc() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "op_count.py")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--steps", "0"], "--steps must be >= 1, got 0"),
        (["--num-envs", "-2"], "--num-envs must be >= 1, got -2"),
        (["--env-id", "Go1"], "--env-id must be a registered env id"),
    ],
)
def test_bad_arguments_are_refused_before_any_env_is_built(
    oc: ModuleType, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        oc.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_go1_step_is_counted_by_function_and_operator(
    oc: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both tables add up to the total; the functions are the library's (the contact sensor's time count among
    them) and the operators aten's; the JSON holds what was printed."""
    out = tmp_path / "ops.json"
    assert oc.main(["--env-id", GO1, "--num-envs", "2", "--steps", "1", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["per_step"] > 100
    assert sum(record["by_function"].values()) == record["per_step"] == sum(record["by_operator"].values())
    assert "mdp/sensors.py:_count" in record["by_function"]
    assert record["by_operator"]["masked_fill_"] >= 2  # the contact sensor's reset: one fill per buffer
    assert f"{GO1} x2: {record['per_step']:.0f} torch operators per env step" in capsys.readouterr().out


def test_an_env_with_discrete_actions_is_counted(oc: ModuleType) -> None:
    """The zero action takes the action space's dtype: CartPole's integer actions step."""
    result = oc.count_ops("gym_graphreset/CartPole-v1", num_envs=2, steps=1, warmup=1)
    assert result.per_step > 0 and result.env_id == "gym_graphreset/CartPole-v1"
