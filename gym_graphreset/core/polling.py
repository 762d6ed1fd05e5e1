"""Reports of the validation latch's polls, and its polls across ranks.

:class:`FailedCheck` is one failed check as a poll reports it; :class:`DeferredValidationError` is raised
by a poll that found any. Across ranks (``ValidationLatch.poll(..., group)``), :class:`RankPoll` makes
each poll one collective: every rank's part carries a header (closing or failed, its step count, a
fingerprint of its poll settings) and its slots; problems with the ranks themselves raise
:class:`CrossRankError`, after which no more collectives are made.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from gym_graphreset.core.validation import ValidationLatch

__all__ = ["CrossRankError", "DeferredValidationError", "FailedCheck", "PollRequest", "RankPoll"]


@dataclass(frozen=True)
class FailedCheck:
    """One failed check as reported by a poll."""

    name: str
    message: str
    first_failed_step: int
    rank: int | None = None  # the process that failed, when polled across ranks
    first_row: int | None = None  # the first failing row at that step, when the check is per row
    failing_rows: int | None = None  # how many rows failed at that step

    def describe(self) -> str:
        """One line: name, rank, message, step and rows."""
        where = "" if self.rank is None else f" on rank {self.rank}"
        rows = ""
        if self.first_row is not None and self.failing_rows:
            more = f" and {self.failing_rows - 1} more" if self.failing_rows > 1 else ""
            rows = f", row {self.first_row}{more}"
        return f"{self.name}{where}: {self.message} (first failed at step {self.first_failed_step}{rows})"


class DeferredValidationError(RuntimeError):
    """A latched device-side check failed; raised at the poll that first saw it."""

    def __init__(self, failures: list[FailedCheck], window: tuple[int, int]) -> None:
        self.failures = failures
        self.window = window
        lines = [f"  - {f.describe()}" for f in failures]
        when = "before the first step" if window[1] < window[0] else f"between steps {window[0]} and {window[1]}"
        super().__init__(
            f"{len(failures)} deferred check(s) failed {when}:\n"
            + "\n".join(lines)
            + "\nThe env refuses to step until reset()."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by the constructor's arguments (a worker process's failure reaches its parent intact)."""
        return type(self), (self.failures, self.window)


_RANK_PROBLEMS = ("rank_failed", "rank_closed", "poll_settings", "poll_steps", "poll_collective")
"""Names of the :class:`FailedCheck` entries a poll across ranks reports about the ranks themselves."""


class CrossRankError(DeferredValidationError):
    """A poll across ranks found that polling cannot go on: a rank failed or closed, or the polls mis-pair.

    ``failures`` holds one entry per problem (``rank_failed``, ``rank_closed``, ``poll_settings``,
    ``poll_steps``, ``poll_collective``), each naming its rank where it has one, plus any latched check
    that failed at the same poll. The latch makes no more collectives after it.
    """

    def __init__(self, failures: list[FailedCheck], window: tuple[int, int]) -> None:
        self.failures = failures
        self.window = window
        lines = [
            f"  - {f.name}" + ("" if f.rank is None else f" on rank {f.rank}") + f": {f.message}"
            if f.name in _RANK_PROBLEMS
            else f"  - {f.describe()}"
            for f in failures
        ]
        RuntimeError.__init__(
            self,
            f"polls across ranks cannot go on (this rank polled after {window[1] + 1} steps):\n"
            + "\n".join(lines)
            + "\nEvery rank must step, reset and close its env together, with the same process_group and poll "
            "settings; this env makes no more collectives (close it on every rank).",
        )


@dataclass(frozen=True)
class PollRequest:
    """What one rank brings to a poll across ranks (see ``ValidationLatch.poll``)."""

    steps: int  # steps completed so far
    window: tuple[int, int]  # the steps the poll covers
    settings: dict[str, object]  # the poll settings every rank must share, with the group's description
    failure: str | None  # this rank failed (the message)
    closing: bool  # this is the rank's last poll (``close()``)
    names: tuple[str, ...]  # the latch's check names, in slot order
    messages: tuple[str, ...]  # their messages as reported


class RankPoll:
    """The polls across ranks of one latch: the first one compares settings; a :class:`CrossRankError` ends them."""

    def __init__(self) -> None:
        self.handshaken = False  # the first poll across ranks compares settings
        self.detached: CrossRankError | None = None  # polls across ranks stopped, and why

    def poll(self, latch: ValidationLatch, group: Any, request: PollRequest) -> list[FailedCheck]:
        """The collective poll: the latched failures of every rank, or :class:`CrossRankError`.

        ``group`` is a process group, or ``None`` for the default one.
        """
        import torch.distributed as dist

        steps, window, settings, closing = request.steps, request.window, request.settings, request.closing

        if self.detached is not None:  # polls across ranks stopped: no collective can pair any more
            if closing:
                return []
            raise CrossRankError(self.detached.failures, window)
        # the group's global ranks, in group order
        ranks = dist.get_process_group_ranks(dist.group.WORLD if group is None else group)
        me = ranks.index(dist.get_rank())
        settings["process_group"] = _describe_group(group, ranks)
        try:
            if not self.handshaken:
                self._handshake(group, ranks, request)
            return self._gather(latch, group, ranks, me, request)
        except CrossRankError as err:
            self.detached = err
            latch.clear()
            raise
        except RuntimeError as exc:  # gloo/NCCL: a peer exited, or polled another collective
            self.detached = CrossRankError(
                [
                    FailedCheck(
                        "poll_collective",
                        f"the poll's collective failed on rank {dist.get_rank()} at its step {steps} (a peer "
                        f"rank exited without close(), or is in another collective): {type(exc).__name__}: {exc}",
                        steps,
                    )
                ],
                window,
            )
            latch.clear()
            raise self.detached from exc

    def _handshake(self, group: Any, ranks: list[int], request: PollRequest) -> None:
        """The first poll: all-gather every rank's settings and group, and refuse any difference by name."""
        import torch.distributed as dist

        spans_world = len(ranks) == dist.get_world_size()
        where = None if spans_world else group  # one communicator every rank shares, where there is one
        order = list(range(dist.get_world_size())) if spans_world else ranks
        gathered: list[Any] = [None] * len(order)
        dist.all_gather_object(gathered, request.settings, group=where)
        self.handshaken = True
        if problems := _setting_problems(dict(zip(order, gathered, strict=True)), request.steps):
            raise CrossRankError(problems, request.window)

    def _gather(
        self, latch: ValidationLatch, group: Any, ranks: list[int], me: int, request: PollRequest
    ) -> list[FailedCheck]:
        """The one collective of a poll: header (state, step, settings fingerprint) and every slot."""
        import torch.distributed as dist

        steps, window, settings = request.steps, request.window, request.settings
        failure, closing = request.failure, request.closing
        cap, world = latch.capacity, len(ranks)
        failed = failure is not None and (closing or world > 1)  # alone, a failed rank may recover by reset()
        header = torch.tensor(
            [_CLOSING * closing | _FAILED * failed, steps, _fingerprint(tuple(sorted(settings.items())))],
            dtype=torch.long,
            device=latch.device,
        )
        packed = torch.cat((header, latch.first_failed, latch.rows.flatten()))  # rows ride along: one collective
        gathered = [torch.empty_like(packed) for _ in range(world)]
        dist.all_gather(gathered, packed, group=group)  # the one collective of a passing poll
        values_of = [t.tolist() for t in gathered]
        state, step_of, print_of = ([values[j] for values in values_of] for j in range(3))
        per_rank = [values[3 : 3 + cap] for values in values_of]
        latched = any(v >= 0 for values in per_rank for v in values)
        failed_ranks = [r for r in range(world) if state[r] & _FAILED]
        closing_ranks = [r for r in range(world) if state[r] & _CLOSING and not state[r] & _FAILED]
        open_ranks = [r for r in range(world) if not state[r] & _CLOSING]
        mismatch = len(set(print_of)) > 1
        mispaired = not (mismatch or failed_ranks) and len(open_ranks) == world and len(set(step_of)) > 1
        departed = bool(closing_ranks and open_ranks)
        if not (latched or failed_ranks or departed or mismatch or mispaired):
            return []
        # Something to report (every rank sees it): gather the check names (a rank may have registered checks
        # the others never made), the failure messages and the settings.
        labels: list[Any] = [None] * world
        dist.all_gather_object(labels, (list(request.names), list(request.messages), failure, settings), group=group)
        checks = [
            FailedCheck(
                labels[r][0][i],
                labels[r][1][i],
                v,
                ranks[r],
                *row_span(values_of[r][3 + cap + 2 * i : 5 + cap + 2 * i]),
            )
            for r, values in enumerate(per_rank)
            for i, v in enumerate(values[: len(labels[r][0])])
            if v >= 0
        ]
        problems = _setting_problems({ranks[r]: labels[r][3] for r in range(world)}, steps) if mismatch else []
        if mispaired:
            at = ", ".join(f"rank {ranks[r]}: {step_of[r]}" for r in range(world))
            problems.append(
                FailedCheck(
                    "poll_steps",
                    f"the ranks polled after different numbers of steps ({at}), so their polls are mis-paired "
                    "(a step, reset() or poll that only some ranks made)",
                    steps,
                )
            )
        for r in failed_ranks:
            how = "in close()" if state[r] & _CLOSING else "at its next poll"
            problems.append(
                FailedCheck(
                    "rank_failed", f"{labels[r][2]} (announced {how}, after step {step_of[r]})", step_of[r], ranks[r]
                )
            )
        if departed:
            still = ", ".join(str(ranks[r]) for r in open_ranks)
            problems += [
                FailedCheck(
                    "rank_closed",
                    f"closed its env after step {step_of[r]} while rank(s) {still} polled to go on",
                    step_of[r],
                    ranks[r],
                )
                for r in closing_ranks
            ]
        if not problems:
            return checks
        others_failed = any(r != me for r in failed_ranks)
        raise_here = bool(mismatch or mispaired or others_failed or checks or (not closing and problems))
        error = CrossRankError(problems + checks, window)
        if raise_here:
            raise error
        self.detached = error  # this rank is closing: it leaves quietly, the others were told
        return []


def row_span(pair: list[int]) -> tuple[int | None, int | None]:
    """A failed check's ``[first row, row count]`` as ``FailedCheck`` holds it (``None``, ``None``: no row)."""
    first, count = pair
    return (first, count) if count > 0 else (None, None)


_CLOSING, _FAILED = 1, 2
"""A rank's state in a poll header (bits): its last poll (``close()``); it failed."""


def _describe_group(group: Any, ranks: list[int]) -> str:
    """A process group as every rank names it: the default one, or a group's name, with its global ranks."""
    import torch.distributed as dist

    if group is None or group is dist.group.WORLD:
        return f"the default group (ranks {ranks})"
    return f"group {group.group_name!r} (ranks {ranks})"


@functools.lru_cache(maxsize=64)
def _fingerprint(settings: tuple[tuple[str, object], ...]) -> int:
    """A stable int63 of sorted ``settings`` items (the same on every rank for equal settings)."""
    digest = hashlib.blake2b(repr(settings).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _setting_problems(by_rank: dict[int, Mapping[str, object]], steps: int) -> list[FailedCheck]:
    """One ``poll_settings`` entry per setting that differs across ranks, naming each rank's value."""
    keys = list(dict.fromkeys(k for s in by_rank.values() for k in s))
    problems = []
    for key in keys:
        values = {rank: s.get(key, "(not set)") for rank, s in by_rank.items()}
        if len(set(map(repr, values.values()))) > 1:
            each = ", ".join(f"rank {rank}: {value}" for rank, value in values.items())
            problems.append(
                FailedCheck(
                    "poll_settings",
                    f"`{key}` differs across ranks ({each}); the polls are collectives, so every rank must make "
                    "them with the same value",
                    steps,
                )
            )
    return problems
