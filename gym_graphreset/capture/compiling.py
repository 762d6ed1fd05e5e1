"""``torch.compile`` of a step's torch code before it is captured: many small kernels become few.

A captured step replays every kernel its torch code launched. Manager-style terms (a reward term, an
observation term, a reset term each a few lines of torch) launch hundreds of tiny kernels, and the GPU
pays a few microseconds for each whatever the batch size, so they can cost as much as the physics.
With ``compile=<backend>`` (:class:`~gym_graphreset.core.config.StepConfig`) the step's device work
(:meth:`StepBody._run <gym_graphreset.core.stepping.StepBody>`: action checks, the inner env's step, checks,
observers, the masked reset and every reset term) runs through ``torch.compile``; Inductor fuses
elementwise chains, and the step graph then replays the fused kernels. The terms stay as written.

Calls that are not torch (a simulator step, warp launches, a host-side callback) are declared with
:func:`opaque`: dynamo ends its graph there, runs the call as written, and resumes after it. MuJoCo
Warp's calls (``WarpRuntime.run``) and :func:`~gym_graphreset.host_transition` are opaque.

Never silently slow: :class:`CompiledStep` records the first call's compile time, every graph break
that is not at a declared boundary (by its reason), and every recompile (by the guard that failed),
and warns (:class:`CompileWarning`) the first time each appears. ``capture_report().state["compile"]``
holds the :class:`CompileReport`. Under the step graph the compiled code runs only for the warm-up and
the capture; afterwards the graph replays its kernels and no Python (and no recompile) runs at all.
"""

from __future__ import annotations

import functools
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypeVar, cast

import torch

import gym_graphreset.capture.dynamo_records as dynamo_records

__all__ = [
    "CompileBackend",
    "CompileReport",
    "CompileWarning",
    "CompiledStep",
    "activate_boundaries",
    "declared_boundaries",
    "opaque",
]

CompileBackend = Literal["inductor", "aot_eager", "eager"]
"""``torch.compile`` backends: ``"inductor"`` fuses kernels (the point); ``"aot_eager"`` and ``"eager"``
trace without code generation (fast: for testing what dynamo sees)."""

F = TypeVar("F", bound=Callable[..., Any])
_LAZY: list[tuple[Callable[..., Any], list[Callable[..., Any]]]] = []
"""Each :func:`opaque` function declared before ``torch._dynamo`` was imported, and its disabled form once made."""
_VERDICTS: dict[tuple[Any, str], list[str]] = {}
"""Per compiled function and backend, every break and recompile its compiles in this process reported."""


class CompileWarning(UserWarning):
    """A compiled step hit a graph break outside a declared boundary, or recompiled."""


def opaque(fn: F) -> F:
    """Declare ``fn`` a boundary of compiled code: never traced, run as written, a graph break expected.

    For calls dynamo cannot or must not trace: a simulator step, warp or other non-torch launches,
    host-side bookkeeping. A break at a declared boundary is reported as declared, not as a problem.

    Example:
        >>> @opaque
        ... def physics(state):  # e.g. a warp/C++ simulator call
        ...     state.add_(1)
        >>> "physics" in declared_boundaries()
        True
    """
    dynamo_records.DECLARED.add(fn.__qualname__)
    if "torch._dynamo" in sys.modules:  # already imported: nothing to save
        return torch.compiler.disable(fn)
    disabled: list[Callable[..., Any]] = []

    @functools.wraps(fn)
    def boundary(*args: Any, **kwargs: Any) -> Any:
        if disabled:
            return disabled[0](*args, **kwargs)
        if "torch._dynamo" not in sys.modules:  # nothing can be compiling: run it as written
            return fn(*args, **kwargs)
        disabled.append(torch.compiler.disable(fn))
        return disabled[0](*args, **kwargs)

    _LAZY.append((fn, disabled))
    return cast(F, boundary)


def activate_boundaries() -> None:
    """Make every :func:`opaque` function declared before ``torch._dynamo`` was imported a compile boundary now.

    :func:`opaque` defers ``torch.compiler.disable`` (which imports ``torch._dynamo``, seconds) until something
    compiles, so that importing the package stays fast. :class:`CompiledStep` calls this before it compiles;
    code that calls ``torch.compile`` itself on code reaching an opaque function calls it first.
    """
    for fn, disabled in _LAZY:
        if not disabled:
            disabled.append(torch.compiler.disable(fn))


def declared_boundaries() -> frozenset[str]:
    """The qualified names of every function declared :func:`opaque`."""
    return frozenset(dynamo_records.DECLARED)


@dataclass
class CompileReport:
    """What compiling the step did, and whether anything makes it slower than it should be.

    Attributes:
        backend: The ``torch.compile`` backend.
        calls: Compiled calls so far (under the step graph: warm-up and capture only).
        compile_seconds: Wall time of the first compiled call: tracing, code generation and one run.
        graphs: Graphs dynamo compiled for this step (one more than the breaks that split it); 0 when
            the code compiled for an earlier env of this process passed its guards and was reused.
        reused: The first compiled call compiled nothing: it ran code an earlier env of this process
            compiled. Nothing was checked for this env then, so the earlier compiles' breaks and
            recompiles are carried over (``"earlier compile: ..."``) and decide ``ok`` too.
        declared_breaks: Breaks at :func:`opaque` boundaries, by name (expected).
        graph_breaks: Breaks anywhere else, by reason: each one splits fusion and runs Python; a frame
            dynamo gave up on (it then runs as written, unfused) is one too.
        recompiles: Each recompile, by the function and the guard that failed: any after the first
            compiled call, and in it any function compiled more than once (one compile there is this
            step's own, when another env's step was compiled first).
    """

    backend: CompileBackend
    calls: int = 0
    compile_seconds: float | None = None
    graphs: int = 0
    reused: bool = False
    declared_breaks: dict[str, int] = field(default_factory=dict)
    graph_breaks: list[str] = field(default_factory=list)
    recompiles: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No graph break outside a declared boundary and no recompile."""
        return not self.graph_breaks and not self.recompiles

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (for JSON and ``capture_report()``), with ``ok``."""
        return {**asdict(self), "ok": self.ok}


class CompiledStep:
    """``fn`` through ``torch.compile`` (static shapes), with a :class:`CompileReport` of every call.

    The first call runs ``fn`` as written: it makes what a step makes once (check slots, carriers),
    which would otherwise change the Python state dynamo guards on and recompile the second call. The
    second call compiles; from then on any recompile is a real one, and is reported.

    Args:
        fn: The step's device work (its Python must be traceable, except at :func:`opaque` calls).
        backend: The ``torch.compile`` backend.
    """

    def __init__(self, fn: Callable[..., Any], backend: CompileBackend) -> None:
        self.fn = fn
        self.report = CompileReport(backend)
        activate_boundaries()
        self._compiled = torch.compile(fn, backend=backend, dynamic=False)
        self._warned: set[str] = set()
        self._settled = False
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        self._verdicts = _VERDICTS.setdefault((code if code is not None else id(fn), backend), [])

    def __call__(self, *args: Any) -> Any:
        """Run the compiled step, recording what dynamo did during the call."""
        if not self._settled:
            self._settled = True
            return self.fn(*args)
        before = dynamo_records.snapshot()
        start = time.perf_counter()
        out = self._compiled(*args)
        first = self.report.compile_seconds is None
        if first:
            self.report.compile_seconds = time.perf_counter() - start
        self.report.calls += 1
        self._record(before, dynamo_records.snapshot(), first)
        return out

    def _record(self, before: dynamo_records.Snapshot, after: dynamo_records.Snapshot, first: bool) -> None:
        report = self.report
        report.graphs += after.graphs - before.graphs
        if first and after.graphs == before.graphs:  # ran code an earlier env compiled: carry its verdict over
            report.reused = True
            for issue in list(self._verdicts):
                into = report.recompiles if issue.startswith("recompiled") else report.graph_breaks
                self._flag(into, f"earlier compile: {issue}", remember=False)
        sites = dynamo_records.break_sites(before)
        flagged = False
        for reason, count in after.breaks.items():
            new = count - before.breaks.get(reason, 0)
            if new <= 0:
                continue
            boundary = dynamo_records.declared_boundary(reason)
            if boundary is not None:
                report.declared_breaks[boundary] = report.declared_breaks.get(boundary, 0) + new
            else:
                self._flag(report.graph_breaks, f"graph break{_at(sites, reason)}: {dynamo_records.summary(reason)}")
                flagged = True
        for reason, count in after.skipped.items():  # a frame dynamo gave up on runs as written: not fused
            fresh = count > before.skipped.get(reason, 0) and after.breaks.get(reason) == before.breaks.get(reason)
            if fresh and dynamo_records.declared_boundary(reason) is None:
                what = f"graph break, frame run as written{_at(sites, reason)}: {dynamo_records.summary(reason)}"
                self._flag(report.graph_breaks, what)
                flagged = True
        library: list[str] = []
        for code, reasons in after.failures.items():
            failed = reasons[len(before.failures.get(code, [])) :]
            if first and len(failed) <= 1:  # this step's own compile (another env's entry was cached first)
                continue
            for reason in failed:
                name = f"{code.co_name} ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})"
                what = f"recompiled {name}: {dynamo_records.first_line(str(reason))}"
                if dynamo_records.is_library_code(code.co_filename):
                    library.append(what)
                else:
                    self._flag(report.recompiles, what)
                    flagged = True
        for what in library if not flagged else ():  # the library's own, unless they follow the user's
            self._flag(report.recompiles, what)

    def _flag(self, into: list[str], what: str, remember: bool = True) -> None:
        into.append(what)
        if remember and what not in self._verdicts:
            self._verdicts.append(what)
        if what not in self._warned:
            self._warned.add(what)
            warnings.warn(f"compiled step: {what}", CompileWarning, stacklevel=4)


def _at(sites: dict[str, str], reason: str) -> str:
    """`` at file:line`` of the user's code where the break happened, when dynamo kept its stack."""
    site = sites.get(dynamo_records.first_line(reason))
    return f" at {site}" if site else ""
