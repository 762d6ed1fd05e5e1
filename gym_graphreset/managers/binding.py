"""Binding a term function (or class) to its env and params once, refusing params it does not take.

A term function declares what its numeric params accept with :func:`accepts` (e.g. a reward's ``std`` must
be a finite number > 0); :func:`check_params` refuses other values when the term is declared and again when
it is bound, naming the term, the param, the value and what is accepted, so no zero ``std`` becomes a NaN
reward.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = [
    "FINITE",
    "NON_NEGATIVE",
    "POSITIVE",
    "Accepts",
    "accepts",
    "bind",
    "check_params",
    "checked_by",
    "ensure",
    "interval",
    "number",
    "reads_sensors",
    "require",
    "runs_after_reset_events",
    "sensors_read",
    "time_out_term",
]

F = TypeVar("F", bound=Callable[..., Any])
_RULES = "__term_param_rules__"
_SENSORS = "__term_sensor_kinds__"
_CHECK = "__term_env_check__"
_TIME_OUT = "__term_is_time_out__"
_LAST = "__term_runs_after_reset_events__"


@dataclass(frozen=True)
class Accepts:
    """What one param accepts: ``ok(value)`` and the words an error message uses for it."""

    text: str
    ok: Callable[[Any], bool]


def ensure(ok: bool, where: str, message: str) -> None:
    """Refuse (``ValueError``, ``"<where>: <message>"``) unless ``ok``: the checks of the term and task configs."""
    if not ok:
        raise ValueError(f"{where}: {message}")


def require(where: str, name: str, value: Any, rule: Accepts) -> None:
    """Refuse ``value`` of field ``name`` unless ``rule`` accepts it, naming the field and what is accepted."""
    ensure(rule.ok(value), where, f"`{name}` must be {rule.text}, got {value!r}")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _above(x: Any, low: float | None, strict: bool) -> bool:
    if not _is_number(x) or not math.isfinite(x):
        return False
    return low is None or (x > low if strict else x >= low)


def _bound_text(low: float | None, strict: bool) -> str:
    return "" if low is None else f" {'>' if strict else '>='} {low:g}"


def number(
    low: float | None = None, *, strict: bool = False, size: int | None = None, per_joint: bool = False
) -> Accepts:
    """A finite number above ``low``; or a tuple of ``size`` of them; or (``per_joint``) a ``{regex: number}``."""
    bound = _bound_text(low, strict)

    def ok(value: Any) -> bool:
        if size is not None:
            values = list(value) if isinstance(value, (tuple, list)) and len(value) == size else None
        elif per_joint and isinstance(value, Mapping):
            values = list(value.values()) or None
        else:
            values = [value]
        return values is not None and all(_above(v, low, strict) for v in values)

    if size is not None:
        return Accepts(f"a tuple of {size} finite numbers{bound}", ok)
    if per_joint:
        return Accepts(f"a finite number{bound}, or a per-joint {{regex: number}} of them", ok)
    return Accepts(f"a finite number{bound}", ok)


def interval(low: float | None = None, *, strict: bool = False) -> Accepts:
    """A ``(low, high)`` pair of finite numbers with ``low <= high`` (both above ``low`` when given)."""

    def ok(value: Any) -> bool:
        return (
            isinstance(value, (tuple, list))
            and len(value) == 2
            and all(_above(v, low, strict) for v in value)
            and value[0] <= value[1]
        )

    both = "" if low is None else f", both{_bound_text(low, strict)}"
    return Accepts(f"a finite (low, high) with low <= high{both}", ok)


POSITIVE = number(0.0, strict=True)
"""A finite number > 0: a width divided by (a reward's ``std``, a target height)."""
NON_NEGATIVE = number(0.0)
"""A finite number >= 0: a magnitude or a threshold."""
FINITE = number()
"""Any finite number."""


def accepts(**rules: Accepts) -> Callable[[F], F]:
    """Declare what a term function's (or class's) params accept; :func:`check_params` enforces it."""

    def mark(func: F) -> F:
        setattr(func, _RULES, {**getattr(func, _RULES, {}), **rules})
        return func

    return mark


def reads_sensors(**kinds: type) -> Callable[[F], F]:
    """Declare which params name a sensor of the task (``TaskCfg.sensors``) and the sensor class each needs.

    :func:`bind` checks them when the env is built, naming the term: an unknown sensor (the task's listed) or
    one of another kind fails there, not at the first step that reads it. A ``None`` value (an optional
    sensor) is not checked.
    """

    def mark(func: F) -> F:
        setattr(func, _SENSORS, {**getattr(func, _SENSORS, {}), **kinds})
        return func

    return mark


def checked_by(check: Callable[..., None]) -> Callable[[F], F]:
    """Declare a check of a term's params against the built env: ``check(env, **params)`` raises ``ValueError``.

    :func:`bind` runs it when the env is built (the commands and sensors exist then), and raises its error
    again naming the term, so a param that names something the task does not have (a body the command does
    not track) fails there, before any physics, not at the first step that reads it.
    """

    def mark(func: F) -> F:
        setattr(func, _CHECK, check)
        return func

    return mark


def _default(func: Any, param: str) -> Any:
    """``func``'s default for ``param`` (``None`` if it has none or no signature)."""
    try:
        p = inspect.signature(func).parameters.get(param)
    except (TypeError, ValueError):
        return None
    return None if p is None or p.default is inspect.Parameter.empty else p.default


def time_out_term(func: F) -> F:
    """Declare a termination function a time-out (the episode was cut, not failed).

    A :class:`~gym_graphreset.managers.terms.TerminationTerm` of it must say ``time_out=True``; one that does not
    is refused when declared, as every time-out would otherwise be reported as a failure (``terminated``) and
    no trainer would bootstrap it.
    """
    setattr(func, _TIME_OUT, True)
    return func


def is_time_out_term(func: Any) -> bool:
    """Whether ``func`` was declared with :func:`time_out_term`."""
    return bool(getattr(func, _TIME_OUT, False))


def runs_after_reset_events(func: F) -> F:
    """Declare a reset event that shifts the proposed initial state the other reset events wrote.

    The event manager runs such events after every other reset event, whatever their order in
    ``TaskCfg.events`` (e.g. the terrain spawn shifts the pose a root-reset event drew onto the env's cell).
    """
    setattr(func, _LAST, True)
    return func


def is_run_after_reset_events(func: Any) -> bool:
    """Whether ``func`` was declared with :func:`runs_after_reset_events`."""
    return bool(getattr(func, _LAST, False))


def sensors_read(func: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    """The sensors a term reads, as declared by :func:`reads_sensors`: ``{param: sensor name}``.

    A param not given takes ``func``'s default; one that is ``None`` (an optional sensor left out) is omitted.
    """
    named = {p: params[p] if p in params else _default(func, p) for p in getattr(func, _SENSORS, {})}
    return {p: key for p, key in named.items() if key is not None}


def _check_sensors(env: ManagerBasedEnv, func: Any, params: Mapping[str, Any], what: str) -> None:
    name = getattr(func, "__name__", func)
    kinds = getattr(func, _SENSORS, {})
    for param, key in sensors_read(func, params).items():
        kind = kinds[param]
        if key not in env.sensors:
            raise ValueError(
                f"{what}: {name!r} param `{param}`: the task has no sensor {key!r}; its sensors: {sorted(env.sensors)}"
            )
        sensor = env.sensors[key]
        if not isinstance(sensor, kind):
            raise TypeError(
                f"{what}: {name!r} param `{param}` names sensor {key!r}, a {type(sensor).__name__}; "
                f"it needs a {kind.__name__}"
            )


def check_params(func: Any, params: Mapping[str, Any], what: str) -> None:
    """Refuse a param value that ``func``'s :func:`accepts` rules do not accept, naming ``what`` and the param."""
    for name, rule in getattr(func, _RULES, {}).items():
        if name in params and not rule.ok(params[name]):
            raise ValueError(
                f"{what}: {getattr(func, '__name__', func)!r} param `{name}` must be {rule.text}, got {params[name]!r}"
            )


def bind(
    env: ManagerBasedEnv, func: Callable[..., Any], params: Mapping[str, Any], what: str, call_args: int = 0
) -> Callable[..., Any]:
    """``func`` with ``env`` and ``params`` bound; a class is built once as ``func(env, **params)``.

    ``call_args``: the positional arguments the manager passes at each call (events: the rows and their draws;
    a curriculum term: the rows). Refuses a ``func`` that is not callable or takes fewer positional arguments
    than each call passes, params the function does not take, required ones missing, values its
    :func:`accepts` rules refuse, and a ``command_name`` param that names no command of the task, naming the
    term; a term class's own ``ValueError`` is raised again with the term's name, and so is one of the term's
    :func:`checked_by` check. Sensor params left at their default are checked too.
    """
    if not callable(func):
        raise TypeError(f"{what}: the term's function must be callable, got {type(func).__name__} {func!r}")
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
        named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        skip = 1 + (0 if inspect.isclass(func) else call_args)  # env, then what each call passes
        missing = [
            p.name
            for p in list(accepted.values())[skip:]
            if p.kind in named and p.default is inspect.Parameter.empty and p.name not in params
        ]
        if missing:
            raise TypeError(f"{what}: {getattr(func, '__name__', func)!r} needs parameter(s) {missing} in its params")
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        slots = [p.name for p in accepted.values() if p.kind in positional]
        varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in accepted.values())
        needed = 1 + (0 if inspect.isclass(func) else call_args)
        passed = ", ".join(("env", "rows", "u")[:needed]) if needed <= 3 else f"env and {needed - 1} more"
        fix = f"make ({passed}) its first parameter(s), before its params"
        if len(slots) < needed and not varargs:
            raise TypeError(
                f"{what}: {getattr(func, '__name__', func)!r} is called as func({passed}, **params) and takes "
                f"{len(slots)} positional argument(s): {fix}"
            )
        if taken := [p for p in slots[:needed] if p in params]:
            raise TypeError(
                f"{what}: {getattr(func, '__name__', func)!r} is called as func({passed}, **params), but its "
                f"param(s) {taken} stand where the call passes ({passed}): {fix}"
            )
    check_params(func, params, what)
    _check_sensors(env, func, params, what)
    command = params.get("command_name")
    if isinstance(command, str) and command not in env.commands:
        raise ValueError(
            f"{what}: {getattr(func, '__name__', func)!r} param `command_name`: the task has no command "
            f"{command!r}; its commands: {sorted(env.commands)}"
        )
    if (check := getattr(func, _CHECK, None)) is not None:
        try:
            check(env, **params)
        except ValueError as e:
            raise ValueError(f"{what}: {getattr(func, '__name__', func)!r}: {e}") from e
    if inspect.isclass(func):
        try:
            built: Callable[..., Any] = func(env, **params)  # type: ignore[call-arg,assignment]
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from e
        return built
    return lambda *args: func(env, *args, **params)
