"""The one place that reads ``torch._dynamo``'s private records and parses its messages.

:class:`~gym_graphreset.capture.compiling.CompiledStep` reports graph breaks and recompiles by reading dynamo's
counters (``torch._dynamo.utils.counters``, ``guard_failures``) before and after a call, and by parsing the
text of a break's reason. Neither is a public API, so both live here, behind :func:`snapshot`, with a
version check: on a torch release this module was not written against, or where the records moved, the
report says so once (:class:`DynamoRecordsWarning`) and counts nothing instead of failing the step.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "DECLARED",
    "SUPPORTED_TORCH",
    "break_sites",
    "is_library_code",
    "DynamoRecordsWarning",
    "Snapshot",
    "declared_boundary",
    "first_line",
    "snapshot",
    "summary",
]

SUPPORTED_TORCH = ((2, 4), (2, 13))
"""The torch releases (inclusive, ``(major, minor)``) whose dynamo records this module reads."""
DECLARED: set[str] = set()
"""Qualified names of the functions declared :func:`~gym_graphreset.capture.compiling.opaque`."""
_FUNCTION = re.compile(r"<function ([\w.<>]+) at 0x")
_NESTED = "*** While handling this graph break, another graph break occurred: ***"
_warned = False


class DynamoRecordsWarning(UserWarning):
    """dynamo's private records are not readable on this torch: compile reports count nothing."""


@dataclass
class Snapshot:
    """dynamo's counters at one moment: graphs, break reasons, frames given up on, guard failures."""

    graphs: int = 0
    breaks: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # reasons dynamo gave up on a frame (run as written)
    failures: dict[Any, list[Any]] = field(default_factory=dict)
    sites: int = 0  # how many graph-break records (with their user stacks) dynamo kept so far


def _torch_version() -> tuple[int, int]:
    major, minor = (int("".join(c for c in p if c.isdigit()) or 0) for p in torch.__version__.split(".")[:2])
    return major, minor


def _unsupported(why: str) -> Snapshot:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            f"compile reports count no graph breaks or recompiles on torch {torch.__version__}: {why}",
            DynamoRecordsWarning,
            stacklevel=3,
        )
    return Snapshot()


def snapshot() -> Snapshot:
    """Dynamo's records now (an empty snapshot, warned once, where they cannot be read)."""
    low, high = SUPPORTED_TORCH
    if not low <= _torch_version() <= high:
        return _unsupported(f"written against torch {low[0]}.{low[1]}-{high[0]}.{high[1]}")
    try:
        from torch._dynamo.utils import counters, graph_break_reasons, guard_failures  # private: read only here
    except ImportError as err:
        return _unsupported(f"torch._dynamo.utils has no counters/guard_failures ({err})")
    return Snapshot(
        graphs=int(counters["stats"]["unique_graphs"]),
        breaks=dict(counters["graph_break"]),
        skipped=dict(counters["unimplemented"]),
        failures={code: list(reasons) for code, reasons in guard_failures.items()},
        sites=len(graph_break_reasons),
    )


_LIBRARY = str(Path(__file__).resolve().parents[1])  # the package root
_TORCH = str(Path(torch.__file__).resolve().parent)


def is_library_code(filename: str) -> bool:
    """Whether ``filename`` is this library's own code (or torch's), not the user's."""
    path = str(Path(filename).resolve())
    return path.startswith(_LIBRARY) or path.startswith(_TORCH)


def break_sites(before: Snapshot) -> dict[str, str]:
    """Each graph break since ``before``, by its reason's first line, at the user's ``file:line``.

    The innermost frame of the break's user stack that is not this library's or torch's; the innermost
    frame when every one is.
    """
    try:
        from torch._dynamo.utils import graph_break_reasons
    except ImportError:
        return {}
    sites: dict[str, str] = {}
    for record in graph_break_reasons[before.sites :]:
        stack = list(getattr(record, "user_stack", None) or [])
        if not stack:
            continue
        frame = next((f for f in reversed(stack) if not is_library_code(f.filename)), stack[-1])
        sites.setdefault(first_line(str(record.reason)), f"{Path(frame.filename).name}:{frame.lineno}")
    return sites


def _parts(reason: str) -> list[str]:
    return [p.strip() for p in reason.split(_NESTED)]


def declared_boundary(reason: str) -> str | None:
    """The opaque function a break is at, if every part of its reason is such a boundary."""
    names = []
    for part in _parts(reason):
        match = _FUNCTION.search(part)
        if "torch.compiler.disable" not in part or match is None or match.group(1) not in DECLARED:
            return None
        names.append(match.group(1))
    return names[0] if names else None


def first_line(text: str) -> str:
    """The first non-empty line of ``text``."""
    return text.strip().splitlines()[0] if text.strip() else text


def summary(reason: str) -> str:
    """A break's reason in one line per part: its title and dynamo's explanation."""
    out = []
    for part in _parts(reason):
        lines = [line.strip() for line in part.splitlines() if line.strip()]
        explanation = next((line for line in lines if line.startswith("Explanation:")), "")
        out.append(f"{lines[0] if lines else part} ({explanation.removeprefix('Explanation: ')})")
    return "; then ".join(out)
