"""The deferred validation latch: named device-side verdicts, polled with one host read.

``require(ok, name, message)`` AND-s a verdict into a named slot on the device and records the first
step at which it failed; it never reads the host, so it is legal inside a captured graph. ``poll()``
reads every slot at once and raises :class:`DeferredValidationError` naming each failed check, its
message and the step window it covers.

Across ranks (``poll(..., group)``) every poll is one collective that every rank of the group makes at
the same points. Each rank's part carries a header (closing or failed, its step count, a fingerprint of
its poll settings): a rank that failed says so at its next poll or in ``close()``, and settings that
differ are named at the first poll. Either raises :class:`CrossRankError` on the ranks that must stop,
naming the rank and what it reported; after it the latch makes no more collectives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from gym_graphreset.core.polling import (
    DeferredValidationError,
    FailedCheck,
    PollRequest,
    RankPoll,
    row_span,
)

__all__ = ["PendingChecks", "ValidationLatch", "finite_rows"]

PendingChecks = dict[str, tuple[torch.Tensor, torch.Tensor | None, str]]
"""A region's deferred checks: name -> (``ok``, its row summary or ``None``, message).

A bool ``(rows,)`` ``ok`` without a summary is per row: the region's end stacks every such column and
computes their verdicts and row summaries at once. Otherwise ``ok`` is one 0-dim verdict, with the
``(first bad row, count)`` summary it came with or none.
"""


def finite_rows(x: torch.Tensor) -> torch.Tensor:
    """``isfinite(x)`` reduced over every dim but the first, as ``(x.shape[0],)`` bool.

    ``x * 0 == 0`` is two kernels where ``torch.isfinite`` is four (it is composite); NaN and inf give
    NaN, every finite value 0. Captured steps pay per kernel, so this counts.
    """
    ok = (x * 0) == 0
    return ok.reshape(x.shape[0], -1).all(dim=1) if x.dim() > 1 else ok


class ValidationLatch:
    """Fixed-capacity named slots of ``first failed step`` (-1 = never failed) and rows, on the device.

    Slots are allocated once (``capacity``); registering a name only assigns a slot index on the host,
    so the device buffers keep their addresses and captured graphs stay valid. Each slot also keeps the
    first failing row and the number of failing rows at its first failure, read by the same poll.
    """

    def __init__(self, device: torch.device | str, capacity: int = 64) -> None:
        self.device = torch.device(device)
        self.capacity = capacity
        self.first_failed = torch.full((capacity,), -1, dtype=torch.long, device=self.device)
        self.rows = torch.full((capacity, 2), -1, dtype=torch.long, device=self.device)  # first bad row, count
        self.step = torch.zeros((), dtype=torch.long, device=self.device)
        self._no_rows = torch.full((2,), -1, dtype=torch.long, device=self.device)
        self._slots: dict[str, int] = {}
        self._messages: list[str] = []  # per slot: the latest message
        self._changes: list[int] = []  # per slot: how often its message changed since the last poll
        self._window_start = 0
        self._index_cache: dict[tuple[str, ...], torch.Tensor | slice] = {}  # by names: messages may change
        self._batch: PendingChecks | None = None
        self._ranks = RankPoll()  # the polls across ranks (see poll)

    def slot(self, name: str, message: str) -> int:
        """The slot index of ``name``, registering it (host-only) on first use; ``message`` becomes its message.

        A poll reports the message of the latest ``require`` of a name: a message that changes from step to
        step replaces the one before (one slot and one message per name, whatever the messages), and the
        report says how often it changed since the last poll.
        """
        index = self._slots.get(name)
        if index is None:
            if len(self._slots) == self.capacity:
                raise ValueError(f"validation latch is full ({self.capacity} named checks); names: {list(self._slots)}")
            index = self._slots[name] = len(self._slots)
            self._messages.append(message)
            self._changes.append(0)
        elif self._messages[index] != message:  # a constant message touches no state (compiled steps guard it)
            self._messages[index] = message
            self._changes[index] += 1
        return index

    def _reported_messages(self) -> list[str]:
        """Each slot's message for a report (noting a message that changed since the last poll)."""
        return [
            m if k == 0 else f"{m} (its message changed {k} time(s) since the last poll; this is the latest)"
            for m, k in zip(self._messages, self._changes, strict=True)
        ]

    @property
    def names(self) -> list[str]:
        """Registered check names, in registration order."""
        return list(self._slots)

    def require(self, ok: torch.Tensor, name: str, message: str) -> None:
        """Latch ``ok.all()`` under ``name``; record the current step (and rows) if it is the first failure.

        An ``ok`` of one or more dims is read per row (its first dim): a failure names the first failing
        row and how many failed. A 0-dim ``ok`` is one verdict with no rows.
        """
        if not isinstance(ok, torch.Tensor):
            raise TypeError(f"`ok` must be a bool torch.Tensor, got {type(ok).__name__}")
        if ok.dtype != torch.bool:
            raise TypeError(f"`ok` must have dtype torch.bool, got {ok.dtype}")
        self.slot(name, message)
        ok = ok.to(self.device)
        if ok.dim() > 1:
            ok = ok.reshape(ok.shape[0], -1).all(dim=1)
        if self._batch is not None:
            self._defer(ok, None, name, message)
            return
        self._latch_pending({name: (ok, None, message)})

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Collect the ``require`` calls of a region and latch them in one vectorised write at its end.

        A step makes a handful of checks; one write at the end costs a few kernels where each ``require``
        would cost as many. Regions do not merge: an inner region (a separately captured reset body)
        latches at its own end, inside its own graph. :meth:`open_batch` / :meth:`close_batch` are the
        same region as two calls, for code ``torch.compile`` traces (it cannot resume inside a
        generator context manager after a graph break).
        """
        outer = self.open_batch()
        try:
            yield
        finally:
            self.close_batch(outer)

    def open_batch(self) -> PendingChecks | None:
        """Start a region (see :meth:`batch`); returns the enclosing region, for :meth:`close_batch`."""
        outer, self._batch = self._batch, {}
        return outer

    def close_batch(self, outer: PendingChecks | None) -> None:
        """End the region :meth:`open_batch` started: latch its verdicts in one write, restore ``outer``."""
        pending, self._batch = self._batch, outer
        if pending:
            self._latch_pending(pending)

    def discard_batch(self, outer: PendingChecks | None) -> None:
        """Drop an unfinished region (its step raised) and restore ``outer``: nothing is latched."""
        self._batch = outer

    def _defer(self, ok: torch.Tensor, rows: torch.Tensor | None, name: str, message: str) -> None:
        assert self._batch is not None
        earlier = self._batch.get(name)
        if earlier is not None:  # a name repeated in one region: AND them, keep the first rows that failed
            if earlier[0].dim() == ok.dim() == 0 and earlier[1] is None and rows is None:
                ok = earlier[0] & ok  # two 0-dim verdicts without rows
            else:
                (v0, r0), (v1, r1) = _verdict(earlier[0], earlier[1], self._no_rows), _verdict(ok, rows, self._no_rows)
                ok, rows = v0 & v1, torch.where(v0, r1, r0)
        self._batch[name] = (ok, rows, message)

    def _latch_pending(self, pending: PendingChecks) -> None:
        """Latch a region's checks in one write.

        Checks go in slot order (so a region's slots are one run, updated through views). Per-row
        columns of one length are stacked and summarised together (a few kernels for all of them); 0-dim
        verdicts are stacked as they are.
        """
        order = sorted(pending, key=self._slots.__getitem__)
        names, messages = tuple(order), tuple([pending[n][2] for n in order])
        verdicts: list[torch.Tensor] = []
        summaries: list[torch.Tensor] = []
        columns: dict[int, list[int]] = {}  # rows -> positions of the per-row checks of that length
        for i, name in enumerate(order):
            ok, rows, _ = pending[name]
            verdicts.append(ok)
            summaries.append(self._no_rows if rows is None else rows)
            if ok.dim() == 1 and rows is None:
                columns.setdefault(ok.shape[0], []).append(i)
        if len(columns) == 1 and len(next(iter(columns.values()))) == len(order):  # every check is per row
            good = torch.stack(verdicts, dim=1)
            self._latch_many(good.all(dim=0), names, messages, _row_summary(~good))
            return
        for positions in columns.values():
            good = torch.stack([verdicts[i] for i in positions], dim=1)  # (rows, k)
            summary, verdict = _row_summary(~good), good.all(dim=0)
            for j, i in enumerate(positions):
                verdicts[i], summaries[i] = verdict[j], summary[j]
        self._latch_many(torch.stack(verdicts), names, messages, torch.stack(summaries))

    @property
    def batching(self) -> bool:
        """Whether a region is open (``require`` calls are collected for its end)."""
        return self._batch is not None

    def require_many(self, ok: torch.Tensor, names: tuple[str, ...], messages: tuple[str, ...]) -> None:
        """Latch ``k = len(names)`` checks at once: a few kernels instead of ``k`` requires.

        ``ok`` is bool ``(k,)`` (one verdict per check) or ``(rows, k)`` (per row: a failure names its
        first row and how many failed, as :meth:`require` does for a per-row ``ok``).
        """
        k = len(names)
        if not isinstance(ok, torch.Tensor):
            raise TypeError(f"`ok` must be a bool torch.Tensor of shape ({k},) or (rows, {k}), got {type(ok).__name__}")
        if ok.dtype != torch.bool or ok.dim() not in (1, 2) or ok.shape[-1] != k or len(messages) != k:
            raise ValueError(
                f"`ok` must be a bool tensor of shape ({k},) or (rows, {k}) with one message per name, got "
                f"{ok.dtype} {tuple(ok.shape)} and {len(messages)} message(s)"
            )
        ok = ok.to(self.device)
        summary = self._no_rows if ok.dim() == 1 else None  # a 0-dim verdict without rows, or a per-row column
        checks: PendingChecks = {
            n: (ok[..., i], summary, m) for i, (n, m) in enumerate(zip(names, messages, strict=True))
        }
        for name, (verdict, _, message) in checks.items():
            self.slot(name, message)
            if self._batch is not None:
                self._defer(verdict, summary, name, message)
        if self._batch is None:
            self._latch_pending(checks)

    def _latch_many(
        self, ok: torch.Tensor, names: tuple[str, ...], messages: tuple[str, ...], rows: torch.Tensor
    ) -> None:
        """Record the step (and rows) in the slots of ``names`` whose verdict in ``ok`` is a first failure.

        Slots that follow one another (the usual case: a region's checks were registered together) are
        updated through views, in place; others through an index.
        """
        ids = [self.slot(n, m) for n, m in zip(names, messages, strict=True)]  # host only: messages kept current
        slots = self._index_cache.get(names)
        if slots is None:
            run = ids == list(range(ids[0], ids[0] + len(ids)))
            slots = self._index_cache[names] = (
                slice(ids[0], ids[0] + len(ids)) if run else torch.tensor(ids, device=self.device)
            )
        if isinstance(slots, slice):
            current, held = self.first_failed[slots], self.rows[slots]
            newly = (current < 0) & ~ok
            torch.where(newly, self.step, current, out=current)
            torch.where(newly.unsqueeze(1), rows, held, out=held)
            return
        current = self.first_failed.index_select(0, slots)
        newly = ~ok & (current < 0)
        self.first_failed.index_copy_(0, slots, torch.where(newly, self.step, current))
        self.rows.index_copy_(0, slots, torch.where(newly.unsqueeze(1), rows, self.rows.index_select(0, slots)))

    def capture_buffers(self) -> list[torch.Tensor]:
        """The slots, the step counter and the cached slot indices a captured graph holds."""
        cached = [t for t in self._index_cache.values() if isinstance(t, torch.Tensor)]
        return [self.first_failed, self.rows, self.step, self._no_rows, *cached]

    def advance(self, steps: int = 1) -> None:
        """Count a step on the device (captured code calls this too)."""
        self.step.add_(steps)

    def poll(
        self,
        steps_done: int,
        group: Any = None,
        *,
        settings: Mapping[str, object] | None = None,
        failure: str | None = None,
        closing: bool = False,
    ) -> None:
        """One host read of every slot; raise on any failure (naming steps since the last poll).

        Args:
            steps_done: Steps completed so far; the window reported is ``[last poll, steps_done - 1]``.
            group: A ``torch.distributed`` process group (or ``True`` for the default one): the slots of
                every rank are all-gathered in one collective, so a failure on any rank is raised on every
                rank, naming the rank. Every rank of the group must poll at the same points (ranks may
                register different checks: their names are gathered when something failed).
            settings: With ``group``: the poll settings every rank must share (e.g. the poll interval).
                They, and the group's identity, are compared at the first poll (on the default group
                when ``group`` spans every rank, so a rank that passed another group is named too) and
                by fingerprint at every poll after.
            failure: With ``group``: this rank failed (the message); announced to every rank, which
                raise :class:`CrossRankError` naming it (this rank too, unless ``closing`` or alone).
            closing: With ``group``: this is the rank's last poll (``close()``); a rank still polling
                raises :class:`CrossRankError` naming it. A closing rank raises only for another rank's
                failure, for mismatched settings or for a failed check.
        """
        window = (self._window_start, steps_done - 1)
        self._window_start = steps_done
        names, messages = list(self._slots), self._reported_messages()
        if group is None or group is False:
            n = len(names)
            values = torch.cat((self.first_failed[:n], self.rows[:n].flatten())).tolist()  # the one host read
            failures = [
                FailedCheck(names[i], messages[i], v, None, *row_span(values[n + 2 * i : n + 2 * i + 2]))
                for i, v in enumerate(values[:n])
                if v >= 0
            ]
        else:
            request = PollRequest(
                steps_done, window, dict(settings or {}), failure, closing, tuple(names), tuple(messages)
            )
            failures = self._ranks.poll(self, None if group is True else group, request)
        self._changes = [0] * len(names)  # a new window
        if not failures:
            return
        self.clear()
        raise DeferredValidationError(failures, window)

    def clear(self) -> None:
        """Forget every verdict (in place)."""
        self.first_failed.fill_(-1)
        self.rows.fill_(-1)


def _verdict(ok: torch.Tensor, rows: torch.Tensor | None, no_rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One pending check as (0-dim verdict, row summary)."""
    if rows is not None or ok.dim() == 0:
        return ok, no_rows if rows is None else rows
    return ok.all(), _row_summary((~ok).unsqueeze(1))[0]


def _row_summary(bad: torch.Tensor) -> torch.Tensor:
    """Per column of a bool ``(rows, k)``: (first True row, number of True rows), as long ``(k, 2)``."""
    first = bad.to(torch.uint8).argmax(dim=0)
    return torch.stack((first, bad.sum(dim=0)), dim=1)
