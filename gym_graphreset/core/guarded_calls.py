"""How :class:`~gym_graphreset.core.autoreset_env.FixedShapeAutoresetVectorEnv` runs and refuses its calls.

A ``step()`` or ``reset()`` runs inside the wrapper's :class:`~gym_graphreset.core.failures.CallGuard`
(:func:`guarded_call`), which records what it raised for ``close()`` to tell the other ranks; a call after
``close()`` (:func:`check_open`), and a step after a failure, an interruption or before ``reset()``
(:func:`refuse_step`), is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from gym_graphreset.core.failures import ClosedEnvironmentError, InterruptedStepError
from gym_graphreset.core.wrapper_checks import raised

if TYPE_CHECKING:
    from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv

__all__ = ["check_open", "guarded_call", "refuse_step"]

T = TypeVar("T")


def guarded_call(env: FixedShapeAutoresetVectorEnv, call: str, name: Callable[[], str], body: Callable[[], T]) -> T:
    """Run ``body`` inside ``env``'s call guard entered as ``call``, recording what it raised as ``name()``.

    Raises:
        gym_graphreset.core.failures.ConcurrentCallError: A step or reset of ``env`` runs already.
    """
    with env._guard.enter(call):
        try:
            out = body()
        except BaseException as exc:
            env._raised = raised(name(), exc)  # close() tells the other ranks
            raise
        env._raised = None
        return out


def check_open(env: FixedShapeAutoresetVectorEnv, call: str) -> None:
    """Refuse ``call`` on a closed ``env``.

    Raises:
        gym_graphreset.core.failures.ClosedEnvironmentError: ``env`` was closed.
    """
    if env._closed:
        raise ClosedEnvironmentError(f"{call}() was called after close(); make a new env")


def refuse_step(env: FixedShapeAutoresetVectorEnv) -> None:
    """Refuse a step of ``env`` that is closed, failed a poll, was interrupted part-way or was never reset.

    Raises:
        gym_graphreset.core.failures.ClosedEnvironmentError: ``env`` was closed.
        DeferredValidationError: A poll failed (raised again, as a new error of the same type).
        gym_graphreset.core.failures.InterruptedStepError: A step or reset raised part-way, and no full
            ``reset()`` followed.
        RuntimeError: ``env`` was not reset yet.
    """
    check_open(env, "step")
    if env._failed is not None:
        raise type(env._failed)(env._failed.failures, env._failed.window)
    if env._interrupted is not None:
        raise InterruptedStepError(
            f"{env._interrupted}, so the inner env and the reset terms may disagree about some rows; "
            "the env refuses to step until a full reset() (without reset_mask)"
        )
    if env._needs_reset:
        raise RuntimeError("call reset() before step()")
