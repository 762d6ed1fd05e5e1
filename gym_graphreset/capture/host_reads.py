"""A CPU-side detector of host reads: the torch calls that make the host wait for device data.

On CUDA each is a synchronisation, and inside a graph capture an error; on the CPU nothing waits, so
torch's sync debug mode sees nothing. Counting the calls themselves works on any device, so an env
author without a GPU can prove that a step reads nothing. The wrapper's
:meth:`~gym_graphreset.core.autoreset_env.FixedShapeAutoresetVectorEnv.capture_report` counts them over one
step when asked (``check_host_reads=True``); tests use
:func:`~gym_graphreset.testing.host_reads.assert_no_host_reads`.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["HostReadCounter", "count_host_reads"]

_HOST_READS = frozenset(
    {
        torch.Tensor.__bool__,
        torch.Tensor.__int__,
        torch.Tensor.__float__,
        torch.Tensor.__index__,
        torch.Tensor.item,
        torch.Tensor.tolist,
        torch.Tensor.numpy,
        torch.Tensor.cpu,
        torch.Tensor.nonzero,
        torch.nonzero,
        torch.Tensor.masked_select,
        torch.masked_select,
        torch.Tensor.unique,
        torch.unique,
        torch.argwhere,
    }
)


def _bool_index(args: Any) -> bool:
    index = args[1] if len(args) > 1 else None
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


class HostReadCounter(TorchFunctionMode):
    """Records torch calls that make the host wait for the device's data (on CUDA: a sync), while entered.

    Attributes:
        found: ``"file:line: call"`` of each host read seen, at the innermost frame outside torch.
        entered: Whether the counter was entered at all (so "none found" can be told from "not run").
    """

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.entered = False

    def __enter__(self) -> HostReadCounter:
        self.entered = True
        super().__enter__()
        return self

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Run ``func``, recording it first when it is a host read."""
        read = func in _HOST_READS or (
            func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and _bool_index(args)
        )
        if read:
            frames = [f for f in traceback.extract_stack()[:-1] if f"{os.sep}torch{os.sep}" not in f.filename]
            where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
            self.found.append(f"{where}: {getattr(func, '__qualname__', func)}")
        return func(*args, **(kwargs or {}))


def count_host_reads(fn: Callable[[], Any]) -> tuple[int, list[str]]:
    """Run ``fn``, counting torch calls that read device data on the host; return the count and where.

    Works on any device, the CPU included, so an env author without a GPU can prove that a step makes no
    host read: ``bool(t)`` (an ``if`` on a tensor), ``.item()``, ``.tolist()``, ``.numpy()``, ``.cpu()``,
    ``int()``/``float()`` of a tensor, ``.nonzero()``, ``masked_select``, ``unique``, and indexing with a
    bool mask. It sees torch calls only (warp's own syncs need
    :func:`~gym_graphreset.testing.host_syncs.assert_sync_free` on a GPU). Each location is the innermost
    frame outside torch.
    """
    counter = HostReadCounter()
    with counter:
        fn()
    return len(counter.found), counter.found
