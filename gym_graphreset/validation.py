"""The deferred validation latch: named device-side verdicts, polled with one host read.

``require(ok, name, message)`` AND-s a verdict into a named slot on the device and records the first
step at which it failed; it never reads the host, so it is legal inside a captured graph. ``poll()``
reads every slot at once and raises :class:`DeferredValidationError` naming each failed check, its
message and the step window it covers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["DeferredValidationError", "FailedCheck", "ValidationLatch", "all_finite", "finite_rows"]


def finite_rows(x: torch.Tensor) -> torch.Tensor:
    """``isfinite(x)`` reduced over every dim but the first, as ``(x.shape[0],)`` bool.

    ``x * 0 == 0`` is two kernels where ``torch.isfinite`` is four (it is composite); NaN and inf give
    NaN, every finite value 0. Captured steps pay per kernel, so this counts.
    """
    ok = (x * 0) == 0
    return ok.reshape(x.shape[0], -1).all(dim=1) if x.dim() > 1 else ok


def all_finite(x: torch.Tensor) -> torch.Tensor:
    """Whether every element of ``x`` is finite, as a 0-dim bool tensor (no host read)."""
    return ((x * 0) == 0).all()


@dataclass(frozen=True)
class FailedCheck:
    """One failed check as reported by a poll."""

    name: str
    message: str
    first_failed_step: int
    rank: int | None = None  # the process that failed, when polled across ranks


class DeferredValidationError(RuntimeError):
    """A latched device-side check failed; raised at the poll that first saw it."""

    def __init__(self, failures: list[FailedCheck], window: tuple[int, int]) -> None:
        self.failures = failures
        self.window = window
        lines = [
            f"  - {f.name}{'' if f.rank is None else f' on rank {f.rank}'}: {f.message} "
            f"(first failed at step {f.first_failed_step})"
            for f in failures
        ]
        super().__init__(
            f"{len(failures)} deferred check(s) failed between steps {window[0]} and {window[1]}:\n"
            + "\n".join(lines)
            + "\nThe env refuses to step until reset()."
        )


class ValidationLatch:
    """Fixed-capacity named slots of ``first failed step`` (-1 = never failed), on the device.

    Slots are allocated once (``capacity``); registering a name only assigns a slot index on the host,
    so the device buffers keep their addresses and captured graphs stay valid.
    """

    def __init__(self, device: torch.device | str, capacity: int = 64) -> None:
        self.device = torch.device(device)
        self.capacity = capacity
        self.first_failed = torch.full((capacity,), -1, dtype=torch.long, device=self.device)
        self.step = torch.zeros((), dtype=torch.long, device=self.device)
        self._slots: dict[str, int] = {}
        self._messages: list[str] = []
        self._window_start = 0
        self._index_cache: dict[tuple[tuple[str, ...], tuple[str, ...]], torch.Tensor] = {}
        self._batch: dict[str, tuple[torch.Tensor, str]] | None = None

    def slot(self, name: str, message: str) -> int:
        """The slot index of ``name``, registering it (host-only) on first use."""
        index = self._slots.get(name)
        if index is None:
            if len(self._slots) == self.capacity:
                raise ValueError(f"validation latch is full ({self.capacity} named checks); names: {list(self._slots)}")
            index = self._slots[name] = len(self._slots)
            self._messages.append(message)
        return index

    @property
    def names(self) -> list[str]:
        """Registered check names, in registration order."""
        return list(self._slots)

    def require(self, ok: torch.Tensor, name: str, message: str) -> None:
        """Latch ``ok.all()`` under ``name``; record the current step if it is the first failure."""
        if not isinstance(ok, torch.Tensor):
            raise TypeError(f"`ok` must be a bool torch.Tensor, got {type(ok).__name__}")
        if ok.dtype != torch.bool:
            raise TypeError(f"`ok` must have dtype torch.bool, got {ok.dtype}")
        index = self.slot(name, message)
        verdict = ok.to(self.device).all()
        if self._batch is not None:
            self._defer(verdict, name, message)
            return
        slot = self.first_failed[index : index + 1]
        slot.copy_(torch.where(~verdict & (slot < 0), self.step, slot))

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Collect the ``require`` calls of a region and latch them in one vectorised write at its end.

        A step makes a handful of checks; one ``require_many`` at the end costs 7 kernels where each
        ``require`` costs 5. Regions do not merge: an inner region (a separately captured reset body)
        latches at its own end, inside its own graph.
        """
        outer, self._batch = self._batch, {}
        try:
            yield
        finally:
            pending, self._batch = self._batch, outer
            if pending:
                names = tuple(pending)
                messages = tuple(m for _, m in pending.values())
                self._latch_many(torch.stack([v for v, _ in pending.values()]), names, messages)

    def _defer(self, verdict: torch.Tensor, name: str, message: str) -> None:
        assert self._batch is not None
        earlier = self._batch.get(name)
        self._batch[name] = (verdict if earlier is None else earlier[0] & verdict, message)

    def require_many(self, ok: torch.Tensor, names: tuple[str, ...], messages: tuple[str, ...]) -> None:
        """Latch ``k`` verdicts at once (``ok`` is a bool ``(k,)``): a few kernels instead of ``k`` requires."""
        if ok.shape != (len(names),) or ok.dtype != torch.bool:
            raise ValueError(f"`ok` must be a bool tensor of shape ({len(names)},), got {ok.dtype} {tuple(ok.shape)}")
        if self._batch is not None:
            ok = ok.to(self.device)
            for i, (name, message) in enumerate(zip(names, messages, strict=True)):
                self.slot(name, message)
                self._defer(ok[i], name, message)
            return
        self._latch_many(ok, names, messages)

    def _latch_many(self, ok: torch.Tensor, names: tuple[str, ...], messages: tuple[str, ...]) -> None:
        key = (names, messages)
        index = self._index_cache.get(key)
        if index is None:
            slots = [self.slot(n, m) for n, m in zip(names, messages, strict=True)]
            index = self._index_cache[key] = torch.tensor(slots, dtype=torch.long, device=self.device)
        current = self.first_failed.index_select(0, index)
        self.first_failed.index_copy_(0, index, torch.where(~ok.to(self.device) & (current < 0), self.step, current))

    def capture_buffers(self) -> list[torch.Tensor]:
        """The slots, the step counter and the cached slot indices a captured graph holds."""
        return [self.first_failed, self.step, *self._index_cache.values()]

    def advance(self, steps: int = 1) -> None:
        """Count a step on the device (captured code calls this too)."""
        self.step.add_(steps)

    def poll(self, steps_done: int, group: Any = None) -> None:
        """One host read of every slot; raise on any failure (naming steps since the last poll).

        Args:
            steps_done: Steps completed so far; the window reported is ``[last poll, steps_done - 1]``.
            group: A ``torch.distributed`` process group (or ``True`` for the default one): the slots of
                every rank are all-gathered in one collective, so a failure on any rank is raised on every
                rank, naming the rank. Every rank must register the same checks in the same order.
        """
        window = (self._window_start, steps_done - 1)
        self._window_start = steps_done
        names, messages = list(self._slots), list(self._messages)
        if group is None or group is False:
            failures = [
                FailedCheck(names[i], messages[i], v)
                for i, v in enumerate(self.first_failed[: len(names)].tolist())
                if v >= 0
            ]
        else:
            failures = self._poll_ranks(None if group is True else group)
        if not failures:
            return
        self.clear()
        raise DeferredValidationError(failures, window)

    def _poll_ranks(self, group: Any) -> list[FailedCheck]:
        import torch.distributed as dist

        gathered = [torch.empty_like(self.first_failed) for _ in range(dist.get_world_size(group))]
        dist.all_gather(gathered, self.first_failed, group=group)  # the one collective of a passing poll
        per_rank = [t.tolist() for t in gathered]
        if all(v < 0 for values in per_rank for v in values):
            return []
        # Some rank failed (every rank sees it): gather the check names too, since a rank may have
        # registered checks the others never made.
        labels: list[Any] = [None] * len(gathered)
        dist.all_gather_object(labels, (list(self._slots), list(self._messages)), group=group)
        return [
            FailedCheck(labels[rank][0][i], labels[rank][1][i], v, rank)
            for rank, values in enumerate(per_rank)
            for i, v in enumerate(values[: len(labels[rank][0])])
            if v >= 0
        ]

    def clear(self) -> None:
        """Forget every verdict (in place)."""
        self.first_failed.fill_(-1)
