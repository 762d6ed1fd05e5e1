"""dynamo's private records are read in one place, with a version check that degrades to a warning."""

from __future__ import annotations

import warnings

import pytest

import gym_graphreset.capture.dynamo_records as records


def test_snapshot_reads_counters_on_a_supported_torch() -> None:
    snap = records.snapshot()
    assert snap.graphs >= 0 and isinstance(snap.breaks, dict) and isinstance(snap.failures, dict)


def test_unsupported_torch_warns_once_and_counts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_torch_version", lambda: (99, 0))
    monkeypatch.setattr(records, "_warned", False)
    with pytest.warns(records.DynamoRecordsWarning, match="count no graph breaks"):
        assert records.snapshot() == records.Snapshot()
    with warnings.catch_warnings():
        warnings.simplefilter("error", records.DynamoRecordsWarning)  # once only
        assert records.snapshot() == records.Snapshot()


def test_declared_boundary_needs_every_part_declared() -> None:
    records.DECLARED.add("my_physics")
    at = "skip: torch.compiler.disable <function my_physics at 0x7f>"
    other = "skip: torch.compiler.disable <function not_declared at 0x7f>"
    assert records.declared_boundary(at) == "my_physics"
    assert records.declared_boundary(f"{at}\n{records._NESTED}\n{other}") is None
    assert records.declared_boundary("Data-dependent branching") is None


def test_summary_keeps_title_and_explanation() -> None:
    reason = "Unsupported call\n  Explanation: dynamo cannot trace it\n  Hint: use opaque"
    assert records.summary(reason) == "Unsupported call (dynamo cannot trace it)"
