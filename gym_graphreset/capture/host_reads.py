"""A CPU-side detector of host reads: the torch calls that make the host wait for device data.

On CUDA each is a synchronisation, and inside a graph capture an error; on the CPU nothing waits, so
torch's sync debug mode sees nothing. It also flags host uploads, tensors made from Python or numpy data
(``torch.tensor([...], device=...)``): on CUDA each is a copy from pageable host memory every step, and in a
captured graph the data is frozen at its value during capture. Counting the calls themselves works on any
device, so an env author without a GPU can prove that a step reads nothing. The wrapper's
:meth:`~gym_graphreset.core.autoreset_env.FixedShapeAutoresetVectorEnv.capture_report` counts them over one
step when asked (``check_host_reads=True``); tests use
:func:`~gym_graphreset.testing.host_reads.assert_no_host_reads`.
"""

from __future__ import annotations

import gc
import os
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["HostReadCounter", "count_host_reads", "one_time_uploads"]

_ONE_TIME = threading.local()


@contextmanager
def one_time_uploads() -> Iterator[None]:
    """Uploads made inside are not counted: the block runs once per env (a cached constant), not per step."""
    depth = getattr(_ONE_TIME, "depth", 0)
    _ONE_TIME.depth = depth + 1
    try:
        yield
    finally:
        _ONE_TIME.depth = depth


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


_HOST_UPLOADS = frozenset({torch.tensor, torch.Tensor.new_tensor})
_UPLOADS_UNLESS_TENSOR = frozenset({torch.as_tensor, torch.asarray})


def _upload(func: Any, args: Any, kwargs: Any) -> bool:
    """Whether ``func(*args)`` makes a tensor from host data (a Python or numpy value)."""
    if func in _HOST_UPLOADS:
        return True
    if func in _UPLOADS_UNLESS_TENSOR:
        data = args[0] if args else (kwargs or {}).get("data", (kwargs or {}).get("obj"))
        return not isinstance(data, torch.Tensor)
    return False


def _bool_index(args: Any) -> bool:
    index = args[1] if len(args) > 1 else None
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


class HostReadCounter(TorchFunctionMode):
    """Records torch calls that make the host wait for the device's data (on CUDA: a sync), while entered.

    Host uploads (tensors made from Python or numpy data) are recorded too, marked ``(host upload)``.

    Python's cyclic garbage collector is run on entry and held off until exit: a collection inside the
    window would run finalizers of objects made before it (an unclosed env's ``__del__`` closing it, with
    the final poll's read), blaming the counted code for another object's read.

    Attributes:
        found: ``"file:line: call"`` of each host read or upload seen, at the innermost frame outside torch.
        entered: Whether the counter was entered at all (so "none found" can be told from "not run").
    """

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.entered = False
        self._gc_was_enabled = False

    def __enter__(self) -> HostReadCounter:
        self.entered = True
        gc.collect()  # finalizers of earlier garbage run now, uncounted
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        finally:
            if self._gc_was_enabled:
                gc.enable()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Run ``func``, recording it first when it is a host read."""
        read = func in _HOST_READS or (
            func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and _bool_index(args)
        )
        upload = not read and not getattr(_ONE_TIME, "depth", 0) and _upload(func, args, kwargs)
        if read or upload:
            frames = [f for f in traceback.extract_stack()[:-1] if f"{os.sep}torch{os.sep}" not in f.filename]
            where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
            self.found.append(f"{where}: {getattr(func, '__qualname__', func)}" + (" (host upload)" if upload else ""))
        return func(*args, **(kwargs or {}))


def count_host_reads(fn: Callable[[], Any]) -> tuple[int, list[str]]:
    """Run ``fn``, counting torch calls that read device data on the host; return the count and where.

    Works on any device, the CPU included, so an env author without a GPU can prove that a step makes no
    host read: ``bool(t)`` (an ``if`` on a tensor), ``.item()``, ``.tolist()``, ``.numpy()``, ``.cpu()``,
    ``int()``/``float()`` of a tensor, ``.nonzero()``, ``masked_select``, ``unique``, and indexing with a
    bool mask; and host uploads, ``torch.tensor`` / ``new_tensor`` and ``as_tensor`` / ``asarray`` of Python or
    numpy data. Make such constants once: under :func:`~gym_graphreset.capture.host_reads.one_time_uploads`
    (as the task layer's cached constants are) they are not counted. It sees torch calls only (warp's own syncs need
    :func:`~gym_graphreset.testing.host_syncs.assert_sync_free` on a GPU). Each location is the innermost
    frame outside torch.
    """
    counter = HostReadCounter()
    with counter:
        fn()
    return len(counter.found), counter.found
