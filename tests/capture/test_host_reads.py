"""The host-read detector: each read and each host upload is found and located; device-side work is not."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from gym_graphreset.capture.host_reads import count_host_reads

X = torch.arange(4.0)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: X.sum().item(), "item"),
        (lambda: bool(X.any()), "__bool__"),
        (lambda: X.nonzero(), "nonzero"),
        (lambda: X[X > 1], "__getitem__"),
        (lambda: X.tolist(), "tolist"),
    ],
)
def test_host_reads_are_found_where_they_are_made(call: Callable[[], object], name: str) -> None:
    n, where = count_host_reads(call)
    assert n == 1 and "test_host_reads.py" in where[0] and where[0].endswith(name) and "upload" not in where[0]


@pytest.mark.parametrize(
    "call",
    [
        lambda: X + torch.tensor([1.0, 2.0, 3.0, 4.0]),
        lambda: X * torch.tensor(0.5, device=X.device),
        lambda: X + torch.as_tensor(np.ones(4, dtype=np.float32)),
        lambda: X + torch.asarray([1.0, 1.0, 1.0, 1.0]),
        lambda: X + X.new_tensor([1.0, 1.0, 1.0, 1.0]),
    ],
)
def test_tensors_made_from_host_data_in_a_step_are_found_as_uploads(call: Callable[[], object]) -> None:
    """On CUDA each is a copy from pageable memory per step, and a captured graph freezes its value."""
    n, where = count_host_reads(call)
    assert n == 1 and where[0].endswith("(host upload)") and "test_host_reads.py" in where[0]


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.as_tensor(X) * 2,
        lambda: torch.where(X > 1, X, torch.zeros_like(X)),
        lambda: torch.full((4,), 0.5) + X,
        lambda: X.masked_fill(X > 2, 0.0),
    ],
)
def test_device_side_work_is_not_flagged(call: Callable[[], object]) -> None:
    assert count_host_reads(call) == (0, [])


def test_one_time_uploads_are_not_counted_but_reads_inside_them_are() -> None:
    """A cached constant's upload happens once per env; a read is a sync wherever it is made."""
    from gym_graphreset.capture.host_reads import one_time_uploads

    def step() -> None:
        with one_time_uploads():
            torch.tensor([1.0, 2.0])
            X.sum().item()
        torch.tensor([3.0])

    n, where = count_host_reads(step)
    assert n == 2 and where[0].endswith("item") and where[1].endswith("(host upload)")


class _ReadsWhenCollected:
    """Garbage in a reference cycle whose finalizer reads a tensor (as an unclosed env's close() polls)."""

    finalized = 0

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        X.tolist()
        type(self).finalized += 1


def test_a_collection_during_the_count_does_not_blame_the_counted_code() -> None:
    """Earlier garbage is finalized before the window; allocations inside it trigger no collection."""
    import gc

    _ReadsWhenCollected()  # unreachable from here on: only the cyclic collector frees it
    before = _ReadsWhenCollected.finalized
    enabled = gc.isenabled()
    assert count_host_reads(lambda: [[] for _ in range(20 * gc.get_threshold()[0])]) == (0, [])
    assert _ReadsWhenCollected.finalized == before + 1  # finalized, outside the count
    assert gc.isenabled() == enabled
