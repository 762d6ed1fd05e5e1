"""The term configs of a task: observations, rewards, terminations, events, curricula, metrics, recorders, actions.

Term functions take the env first and keyword params after; what each kind returns:

============== ======================================================= ==========================
term           signature                                               returns (full width)
============== ======================================================= ==========================
observation    ``func(env, **params)``                                 ``(num_envs, k)`` float
reward         ``func(env, **params)``                                 ``(num_envs,)`` float
termination    ``func(env, **params)``                                 ``(num_envs,)`` bool
event          ``func(env, rows, u, **params)``                        nothing (masked writes)
curriculum     ``func(env, rows, **params)``                           ``()`` or ``(num_envs,)``
metric         ``func(env, **params)``                                 ``(num_envs,)`` float
recorder       ``func(env, **params)``                                 ``(num_envs, ...)``
============== ======================================================= ==========================

``rows`` is a full-width bool mask (never an index list), ``u`` the term's ``(num_envs, draws)`` uniform
``[0, 1)`` counter-based draws. No term may read device data on the host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gym_graphreset.envs.mjwarp.constants import SET_CONST_FIELDS
from gym_graphreset.managers.binding import (
    FINITE,
    NON_NEGATIVE,
    POSITIVE,
    Accepts,
    check_params,
    ensure,
    interval,
    is_time_out_term,
    number,
    require,
)

__all__ = [
    "ActionCfg",
    "CurriculumTerm",
    "EventMode",
    "EventTerm",
    "GaussianNoise",
    "JointEffortAction",
    "JointPositionAction",
    "MetricTerm",
    "Noise",
    "ObsGroup",
    "ObsTerm",
    "RecorderTerm",
    "RewardTerm",
    "TerminationTerm",
    "UniformNoise",
]

Func = Callable[..., Any]
EventMode = Literal["startup", "reset", "interval"]
"""When an event runs: once per world, at every new episode, or on per-env timers."""

Recompute = Literal["none", "set_const"]
"""What an event's model writes need recomputed: nothing, or MuJoCo Warp's ``set_const`` (derived constants)."""


def _where(kind: str, func: Any) -> str:
    return f"{kind}({getattr(func, '__name__', func)!r})"


def _int_at_least(where: str, name: str, value: Any, low: int) -> None:
    ensure(
        isinstance(value, int) and not isinstance(value, bool) and value >= low,
        where,
        f"`{name}` must be an int >= {low}, got {value!r}",
    )


def _check_callable(where: str, func: Any) -> None:
    ensure(callable(func), where, f"`func` must be callable, got {func!r}")


def _check_bool(where: str, name: str, value: Any) -> None:
    """Refuse a flag that is not a bool (a truthy string such as ``"False"`` would read as on)."""
    ensure(isinstance(value, bool), where, f"`{name}` must be a bool (True or False), got {value!r}")


def _scale_ok(value: Any) -> bool:
    sequence = isinstance(value, (tuple, list)) and len(value) > 0
    return number().ok(value) or (sequence and number(size=len(value)).ok(value))


_SCALE = Accepts("a finite number or a non-empty tuple of finite numbers", _scale_ok)


@dataclass(frozen=True)
class UniformNoise:
    """Additive noise uniform in ``[low, high)`` (one draw word per element)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        require("UniformNoise", "(low, high)", (self.low, self.high), interval())

    words_per_element = 1


@dataclass(frozen=True)
class GaussianNoise:
    """Additive noise ``N(mean, std**2)`` (Box-Muller: two draw words per element)."""

    std: float
    mean: float = 0.0

    def __post_init__(self) -> None:
        require("GaussianNoise", "std", self.std, NON_NEGATIVE)
        require("GaussianNoise", "mean", self.mean, FINITE)

    words_per_element = 2


Noise = UniformNoise | GaussianNoise
"""An observation term's additive noise."""


@dataclass(frozen=True)
class ObsTerm:
    """One observation term: ``func(env, **params)`` -> ``(num_envs, k)``, then noise, clip, scale, delay, history.

    Applied in that order (Isaac Lab's): noise (when the group's corruption is on), clip, scale; the
    delay buffer returns the value of ``delay`` steps ago; ``history_length > 0`` returns the last
    ``history_length`` values, oldest first, flattened. Both buffers restart at a reset from the first
    value of the new episode (through the mask).
    """

    func: Func
    params: Mapping[str, Any] = field(default_factory=dict)
    noise: Noise | None = None
    clip: tuple[float, float] | None = None
    scale: float | tuple[float, ...] | None = None
    delay: int = 0
    history_length: int = 0

    def __post_init__(self) -> None:
        where = _where("ObsTerm", self.func)
        _check_callable(where, self.func)
        if self.clip is not None:
            require(where, "clip", self.clip, interval())
        if self.scale is not None:
            require(where, "scale", self.scale, _SCALE)
        for name in ("delay", "history_length"):
            _int_at_least(where, name, getattr(self, name), 0)
        check_params(self.func, self.params, where)


@dataclass(frozen=True)
class ObsGroup:
    """An ordered group of observation terms (``policy``, ``critic``...), concatenated by default."""

    terms: Mapping[str, ObsTerm]
    enable_corruption: bool = True
    concatenate: bool = True
    clip: float | None = None
    """Clip the whole group to ``[-clip, clip]`` after the terms (``None``: no clip)."""

    def __post_init__(self) -> None:
        ensure(isinstance(self.terms, Mapping) and len(self.terms) > 0, "ObsGroup", "a group needs at least one term")
        for name, term in self.terms.items():
            got = type(term).__name__
            ensure(isinstance(term, ObsTerm), "ObsGroup", f"`terms[{name!r}]` must be an ObsTerm, got {got}")
        _check_bool("ObsGroup", "enable_corruption", self.enable_corruption)
        _check_bool("ObsGroup", "concatenate", self.concatenate)
        if self.clip is not None:
            require("ObsGroup", "clip", self.clip, POSITIVE)


@dataclass(frozen=True)
class RewardTerm:
    """A weighted reward term; the env multiplies ``weight`` by the step dt (mjlab's convention).

    A term with ``weight == 0`` is still computed, its column exactly 0 until a curriculum raises the weight
    (a zero weight is a value, not an absence). ``func`` may be a class: it is built once with
    ``func(env, **params)`` and called as ``term()`` every step; its ``reset(rows)`` (if any) runs at resets.
    """

    func: Func
    weight: float
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = _where("RewardTerm", self.func)
        _check_callable(where, self.func)
        require(where, "weight", self.weight, FINITE)
        check_params(self.func, self.params, where)


@dataclass(frozen=True)
class TerminationTerm:
    """A done condition; ``time_out=True`` makes it a truncation (the episode was cut, not failed).

    A function declared a time-out (:func:`~gym_graphreset.managers.binding.time_out_term`, e.g.
    ``mdp.time_out``) is refused without ``time_out=True``: its episodes would end as failures.
    """

    func: Func
    params: Mapping[str, Any] = field(default_factory=dict)
    time_out: bool = False

    def __post_init__(self) -> None:
        where = _where("TerminationTerm", self.func)
        _check_callable(where, self.func)
        ensure(isinstance(self.time_out, bool), where, f"`time_out` must be a bool, got {self.time_out!r}")
        ensure(
            self.time_out or not is_time_out_term(self.func),
            where,
            "this function ends episodes at their horizon, a time-out: declare it with `time_out=True` (without "
            "it every time-out is reported as a failure, `terminated`, and no trainer bootstraps it)",
        )
        check_params(self.func, self.params, where)


@dataclass(frozen=True)
class EventTerm:
    """An event of mode ``startup``, ``reset`` or ``interval``, with its draws and the model fields it writes.

    ``startup``: once per world, and again on the reset rows of ``reset(seed=...)``; ``reset``: every new
    episode, before the physics state is written; ``interval``: per-env timers drawn from
    ``interval_range_s``, restarted with each episode.

    ``draws`` uniform words per row are handed to ``func`` as ``u``. A reset event may write the initial
    physics state through ``env.initial_state`` (``qpos``, ``qvel``: full-width proposals that the engine
    writes on the reset rows only). ``model_fields`` names the MuJoCo Warp model fields the event writes per
    world (e.g. ``("geom_friction",)``): they get one row per world.

    ``recompute="set_const"`` (a startup event's) runs ``mujoco_warp.set_const`` over every world once the
    startup events ran, as mjlab does after writing ``body_ipos``, ``body_mass``, ``body_inertia`` or
    ``dof_armature``: the constants derived from them at ``qpos0`` (inverse weights, which set how soft
    contacts and joint limits are; subtree masses) follow the new values, each world its own
    (:meth:`~gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv.recompute_constants`). It is not run inside a
    step (it costs about a forward pass of every world), so reset and interval events cannot ask for it.
    """

    func: Func
    mode: EventMode
    params: Mapping[str, Any] = field(default_factory=dict)
    draws: int = 0
    interval_range_s: tuple[float, float] | None = None
    model_fields: tuple[str, ...] = ()
    recompute: Recompute = "none"

    def __post_init__(self) -> None:
        where = _where("EventTerm", self.func)
        _check_callable(where, self.func)
        ensure(
            self.mode in ("startup", "reset", "interval"),
            where,
            f"`mode` must be 'startup', 'reset' or 'interval', got {self.mode!r}",
        )
        _int_at_least(where, "draws", self.draws, 0)
        if self.mode == "interval":
            ensure(self.interval_range_s is not None, where, "an 'interval' event needs `interval_range_s`")
            require(where, "interval_range_s", self.interval_range_s, interval(0.0, strict=True))
        else:
            ensure(
                self.interval_range_s is None, where, f"`interval_range_s` is for 'interval' events, not {self.mode!r}"
            )
        ensure(
            self.recompute in ("none", "set_const"),
            where,
            f"`recompute` must be 'none' or 'set_const', got {self.recompute!r}",
        )
        ensure(
            self.recompute == "none" or self.mode == "startup",
            where,
            f"`recompute='set_const'` runs after startup events only (set_const costs about a forward pass of "
            f"every world, too much for every step); got mode {self.mode!r}: make the event a 'startup' one",
        )
        check_params(self.func, self.params, where)

    @property
    def batched_fields(self) -> tuple[str, ...]:
        """``model_fields``, and the fields ``set_const`` writes when the event asks for it."""
        derived = SET_CONST_FIELDS if self.recompute == "set_const" else ()
        return tuple(dict.fromkeys((*self.model_fields, *derived)))


@dataclass(frozen=True)
class CurriculumTerm:
    """``func(env, rows, **params)`` at every reset, before the reset rows' state is redrawn (mjlab's order).

    What it returns is kept in ``env.curriculum_manager.values[name]``.
    """

    func: Func
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = _where("CurriculumTerm", self.func)
        _check_callable(where, self.func)
        check_params(self.func, self.params, where)


@dataclass(frozen=True)
class MetricTerm:
    """A per-step value averaged over each episode and published as ``info["metrics"][name]``."""

    func: Func
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = _where("MetricTerm", self.func)
        _check_callable(where, self.func)
        check_params(self.func, self.params, where)


@dataclass(frozen=True)
class RecorderTerm:
    """A per-frame value kept in the env's recording ring (``(num_envs, ...)`` of a fixed shape and dtype).

    Recorded after every reset (frame 0 of the new episode, on the reset rows) and after every step (all
    rows); :class:`~gym_graphreset.managers.recorder_manager.RecorderManager` exports the finished episodes.
    """

    func: Func
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = _where("RecorderTerm", self.func)
        _check_callable(where, self.func)
        check_params(self.func, self.params, where)


@dataclass(frozen=True)
class JointPositionAction:
    """Joint-position targets: ``target = offset + scale * action`` written to the joints' position actuators.

    ``scale`` is one number or one per joint; ``use_default_offset`` takes the offset from the robot's
    default pose. ``subtract_encoder_bias`` subtracts the per-world encoder bias (``env.encoder_bias``, a
    startup event's) from the target, as a real robot's controller sees biased encoders.
    """

    joint_names: tuple[str, ...]
    scale: float | tuple[float, ...] = 1.0
    use_default_offset: bool = True
    clip: tuple[float, float] | None = None
    subtract_encoder_bias: bool = False
    delay: int = 0
    """Steps between the policy's action and the actuators (a delay buffer restarted at each reset)."""

    def __post_init__(self) -> None:
        _check_action("JointPositionAction", self)


@dataclass(frozen=True)
class JointEffortAction:
    """Joint torques: ``effort = scale * action`` written to the joints' motor actuators."""

    joint_names: tuple[str, ...]
    scale: float | tuple[float, ...] = 1.0
    clip: tuple[float, float] | None = None
    delay: int = 0

    def __post_init__(self) -> None:
        _check_action("JointEffortAction", self)


def _check_action(where: str, action: JointPositionAction | JointEffortAction) -> None:
    """The fields both action terms share: joints, scale (one, or one per joint), clip and delay; the flags."""
    if isinstance(action, JointPositionAction):
        _check_bool(where, "use_default_offset", action.use_default_offset)
        _check_bool(where, "subtract_encoder_bias", action.subtract_encoder_bias)
    names = action.joint_names
    ensure(
        isinstance(names, (tuple, list)) and len(names) > 0 and all(isinstance(j, str) for j in names),
        where,
        f"`joint_names` must be a non-empty tuple of joint names, got {names!r}",
    )
    require(where, "scale", action.scale, _SCALE)
    if isinstance(action.scale, (tuple, list)):
        ensure(
            len(action.scale) == len(names),
            where,
            f"`scale` has {len(action.scale)} values for {len(names)} joints {list(names)}",
        )
    if action.clip is not None:
        require(where, "clip", action.clip, interval())
    _int_at_least(where, "delay", action.delay, 0)


ActionCfg = JointPositionAction | JointEffortAction
"""An action term."""
