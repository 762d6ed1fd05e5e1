"""How the wrapper fails closed: the errors it raises, and the message naming what was interrupted.

A step or reset that raises part-way (an exception or ``KeyboardInterrupt`` in the inner env, a term,
a graph's capture or replay) may leave the inner env and the terms disagreeing about some rows, so the
wrapper refuses to step until a full ``reset()``: :class:`InterruptedStepError`, with a message built by
:func:`interruption` (the call, the exception and the innermost participant it was raised in). A call
after ``close()`` is a :class:`ClosedEnvironmentError`. Both are importable from
:mod:`gym_graphreset.core.autoreset_env` and the package too. :class:`CallGuard` refuses a ``step()``,
``reset()`` or ``close()`` that starts while another is running (re-entered from a term or the inner
env, or from a second thread) with a :class:`ConcurrentCallError`, before it changes anything.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gym_graphreset.core.participants import Participants

__all__ = ["CallGuard", "ClosedEnvironmentError", "ConcurrentCallError", "InterruptedStepError", "interruption"]


class ClosedEnvironmentError(RuntimeError):
    """``step()`` or ``reset()`` was called after ``close()``."""


class InterruptedStepError(RuntimeError):
    """``step()`` was called after a step or reset raised part-way (an exception or ``KeyboardInterrupt``).

    The inner env or some terms may have advanced or reset rows that the rest did not: the env fails
    closed, like after a latched validation failure, until a full ``reset()``.
    """


class ConcurrentCallError(RuntimeError):
    """``step()``, ``reset()`` or ``close()`` was called while another of them was running on the same env.

    From the same thread it was re-entered (a reset term or the inner env called back into the env);
    from another thread, the env was shared between threads. The refused call changes nothing; the
    running one goes on.
    """


class CallGuard:
    """One ``step()``/``reset()``/``close()`` at a time on an env: a second one is refused, naming both.

    A non-blocking lock: taking it costs no host read of device data, and a refused call never waits.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: str | None = None
        self._thread: tuple[int, str] | None = None  # (ident, name) of the thread inside the running call

    @property
    def idle(self) -> bool:
        """No call is running."""
        return self._running is None

    def __getstate__(self) -> dict[str, Any]:
        """Nothing: a copy (``copy.deepcopy``, ``pickle``) gets a fresh, idle guard with a lock of its own."""
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    @contextmanager
    def enter(self, call: str) -> Iterator[None]:
        """Run ``call`` (``"step() 4"``, ``"reset()"``...) alone, or raise :class:`ConcurrentCallError`."""
        if not self._lock.acquire(blocking=False):
            raise ConcurrentCallError(self._refusal(call))
        here = threading.current_thread()
        self._running, self._thread = call, (threading.get_ident(), here.name)
        try:
            yield
        finally:
            self._running = self._thread = None
            self._lock.release()

    def _refusal(self, call: str) -> str:
        running, owner = self._running or "another call", self._thread or (None, "another thread")
        here = threading.current_thread().name
        if owner[0] == threading.get_ident():
            return (
                f"{call} was called from inside {running} (re-entrant: a reset term or the inner env called "
                "back into the env it belongs to); the env steps and resets itself, so a term must not call "
                "its env's step(), reset() or close()"
            )
        return (
            f"{call} was called from thread {here!r} while thread {owner[1]!r} is inside {running}: the env is "
            "not thread-safe (one env, one thread); the call was refused and changed nothing"
        )


def interruption(call: str, exc: BaseException, parts: Participants) -> str:
    """What was interrupted, by what and where (the innermost participant in the traceback), for the refusal."""
    labels = {id(t): f"reset term {n!r}" for n, t in parts.terms.items()}
    labels.update((id(e), n) for n, e in parts.chain)
    where, last, tb = "", None, exc.__traceback__
    while tb is not None:  # the innermost participant, at the method the caller entered it by
        owner = tb.tb_frame.f_locals.get("self")
        if id(owner) in labels and owner is not last:
            where, last = f" in {labels[id(owner)]}.{tb.tb_frame.f_code.co_name}()", owner
        tb = tb.tb_next
    detail = f": {exc}" if str(exc) else ""
    return f"{call} was interrupted{where} by {type(exc).__name__}{detail}"
