"""Binding a term function (or class) to its env and params once, refusing params it does not take."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gym_graphreset.tasks.env import ManagerBasedEnv

__all__ = ["bind"]


def bind(env: ManagerBasedEnv, func: Callable[..., Any], params: Mapping[str, Any], what: str) -> Callable[..., Any]:
    """``func`` with ``env`` and ``params`` bound; a class is built once as ``func(env, **params)``.

    Refuses params the function does not take, or required params not given, naming the term.
    """
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # builtins: take them as they are
        signature = None
    if signature is not None:
        accepted = signature.parameters
        takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
        unknown = [k for k in params if k not in accepted and not takes_kwargs]
        if unknown:
            raise TypeError(f"{what}: {getattr(func, '__name__', func)!r} takes no parameter(s) {unknown}")
    if inspect.isclass(func):
        built: Callable[..., Any] = func(env, **params)  # type: ignore[call-arg,assignment]
        return built
    return lambda *args: func(env, *args, **params)
