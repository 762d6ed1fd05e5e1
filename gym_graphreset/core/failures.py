"""How the wrapper fails closed: the errors it raises, and the message naming what was interrupted.

A step or reset that raises part-way (an exception or ``KeyboardInterrupt`` in the inner env, a term,
a graph's capture or replay) may leave the inner env and the terms disagreeing about some rows, so the
wrapper refuses to step until a full ``reset()``: :class:`InterruptedStepError`, with a message built by
:func:`interruption` (the call, the exception and the innermost participant it was raised in). A call
after ``close()`` is a :class:`ClosedEnvironmentError`. Both are importable from
:mod:`gym_graphreset.core.autoreset_env` and the package too.
"""

from __future__ import annotations

from gym_graphreset.core.participants import Participants

__all__ = ["ClosedEnvironmentError", "InterruptedStepError", "interruption"]


class ClosedEnvironmentError(RuntimeError):
    """``step()`` or ``reset()`` was called after ``close()``."""


class InterruptedStepError(RuntimeError):
    """``step()`` was called after a step or reset raised part-way (an exception or ``KeyboardInterrupt``).

    The inner env or some terms may have advanced or reset rows that the rest did not: the env fails
    closed, like after a latched validation failure, until a full ``reset()``.
    """


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
