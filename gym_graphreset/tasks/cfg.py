"""The declarative task configuration: frozen dataclasses naming a task's terms, as mjlab and Isaac Lab write them.

A task is a :class:`TaskCfg`: the model, the sim settings, and one mapping of named terms per manager
(actions, observation groups, rewards, terminations, events, commands, sensors, curricula, metrics). A term
is a plain function with its ``params`` (or, for commands and sensors, a small config that builds a stateful
object). Nothing here touches torch or MuJoCo: :class:`~gym_graphreset.tasks.env.ManagerBasedEnv` turns a
``TaskCfg`` into device tensors once, at construction.

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
============== ======================================================= ==========================

``rows`` is a full-width bool mask (never an index list), ``u`` the term's ``(num_envs, draws)`` uniform
``[0, 1)`` counter-based draws. No term may read device data on the host.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from gym_graphreset.tasks.env import ManagerBasedEnv

__all__ = [
    "ActionCfg",
    "CommandCfg",
    "CommandTerm",
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
    "RewardTerm",
    "SensorCfg",
    "SensorTerm",
    "StatefulTerm",
    "TaskCfg",
    "TerminationTerm",
    "UniformNoise",
]

Func = Callable[..., Any]
EventMode = Literal["startup", "reset", "interval"]
"""When an event runs: once per world, at every new episode, or on per-env timers."""


def _check(ok: bool, where: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{where}: {message}")


def _finite_range(where: str, name: str, value: tuple[float, float]) -> None:
    _check(
        len(value) == 2 and all(math.isfinite(v) for v in value) and value[0] <= value[1],
        where,
        f"`{name}` must be a finite (low, high) with low <= high, got {value!r}",
    )


@dataclass(frozen=True)
class UniformNoise:
    """Additive noise uniform in ``[low, high)`` (one draw word per element)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        _finite_range("UniformNoise", "(low, high)", (self.low, self.high))

    words_per_element = 1


@dataclass(frozen=True)
class GaussianNoise:
    """Additive noise ``N(mean, std**2)`` (Box-Muller: two draw words per element)."""

    std: float
    mean: float = 0.0

    def __post_init__(self) -> None:
        _check(math.isfinite(self.std) and self.std >= 0, "GaussianNoise", f"`std` must be >= 0, got {self.std!r}")
        _check(math.isfinite(self.mean), "GaussianNoise", f"`mean` must be finite, got {self.mean!r}")

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
        where = f"ObsTerm({getattr(self.func, '__name__', self.func)!r})"
        _check(callable(self.func), where, f"`func` must be callable, got {self.func!r}")
        if self.clip is not None:
            _check(
                len(self.clip) == 2 and self.clip[0] <= self.clip[1],
                where,
                f"`clip` must be (low, high), got {self.clip!r}",
            )
        for name in ("delay", "history_length"):
            value = getattr(self, name)
            _check(
                isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                where,
                f"`{name}` must be an int >= 0, got {value!r}",
            )


@dataclass(frozen=True)
class ObsGroup:
    """An ordered group of observation terms (``policy``, ``critic``...), concatenated by default."""

    terms: Mapping[str, ObsTerm]
    enable_corruption: bool = True
    concatenate: bool = True
    clip: float | None = None
    """Clip the whole group to ``[-clip, clip]`` after the terms (``None``: no clip)."""

    def __post_init__(self) -> None:
        _check(len(self.terms) > 0, "ObsGroup", "a group needs at least one term")
        if self.clip is not None:
            _check(self.clip > 0, "ObsGroup", f"`clip` must be None or > 0, got {self.clip!r}")


@dataclass(frozen=True)
class RewardTerm:
    """A weighted reward term; the env multiplies ``weight`` by the step dt (mjlab's convention).

    A term with ``weight == 0`` is skipped (never computed). ``func`` may be a class: it is built once with
    ``func(env, **params)`` and called as ``term()`` every step; its ``reset(rows)`` (if any) runs at resets.
    """

    func: Func
    weight: float
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(
            math.isfinite(self.weight), f"RewardTerm({self.func!r})", f"`weight` must be finite, got {self.weight!r}"
        )


@dataclass(frozen=True)
class TerminationTerm:
    """A done condition; ``time_out=True`` makes it a truncation (the episode was cut, not failed)."""

    func: Func
    params: Mapping[str, Any] = field(default_factory=dict)
    time_out: bool = False


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
    """

    func: Func
    mode: EventMode
    params: Mapping[str, Any] = field(default_factory=dict)
    draws: int = 0
    interval_range_s: tuple[float, float] | None = None
    model_fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"EventTerm({getattr(self.func, '__name__', self.func)!r})"
        _check(
            self.mode in ("startup", "reset", "interval"),
            where,
            f"`mode` must be 'startup', 'reset' or 'interval', got {self.mode!r}",
        )
        _check(
            isinstance(self.draws, int) and self.draws >= 0, where, f"`draws` must be an int >= 0, got {self.draws!r}"
        )
        if self.mode == "interval":
            _check(self.interval_range_s is not None, where, "an 'interval' event needs `interval_range_s`")
            assert self.interval_range_s is not None
            _finite_range(where, "interval_range_s", self.interval_range_s)
            _check(
                self.interval_range_s[0] > 0, where, f"`interval_range_s` must be > 0, got {self.interval_range_s!r}"
            )
        else:
            _check(
                self.interval_range_s is None, where, f"`interval_range_s` is for 'interval' events, not {self.mode!r}"
            )


@dataclass(frozen=True)
class CurriculumTerm:
    """``func(env, rows, **params)`` at every reset, before the reset rows' state is redrawn (mjlab's order).

    What it returns is kept in ``env.curriculum_manager.values[name]``.
    """

    func: Func
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricTerm:
    """A per-step value averaged over each episode and published as ``info["metrics"][name]``."""

    func: Func
    params: Mapping[str, Any] = field(default_factory=dict)


class CommandTerm(Protocol):
    """A stateful command (e.g. a velocity or motion command) built by a :class:`CommandCfg`.

    ``reset_draws`` / ``step_draws`` words per row are handed to :meth:`reset` and :meth:`step`.
    """

    command: torch.Tensor
    reset_draws: int
    step_draws: int

    def reset(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        """Resample on the rows of ``rows`` (masked writes) at the start of their episode."""

    def step(self, u: torch.Tensor) -> None:
        """Advance one env step: resample rows whose time ran out, steer, update."""

    def metrics(self) -> dict[str, torch.Tensor]:
        """Per-row debug values published as ``info["commands"][name]`` (may be empty)."""


@runtime_checkable
class StatefulTerm(Protocol):
    """A term object (reward, sensor...) with state per row, cleared at each reset through the mask."""

    def reset(self, rows: torch.Tensor) -> None:
        """Clear the rows of ``rows`` (masked writes)."""


@runtime_checkable
class CommandCfg(Protocol):
    """Builds a :class:`CommandTerm` for an env (frozen dataclasses, e.g. ``VelocityCommandCfg``)."""

    def build(self, env: ManagerBasedEnv) -> CommandTerm:
        """The command's state for ``env``."""


class SensorTerm(Protocol):
    """A stateful sensor updated after the physics of every step, before rewards and terminations."""

    def update(self) -> None:
        """Read the physics and update the sensor's tensors."""

    def reset(self, rows: torch.Tensor) -> None:
        """Clear the rows of ``rows`` (masked writes)."""


@runtime_checkable
class SensorCfg(Protocol):
    """Builds a :class:`SensorTerm` for an env (e.g. ``ContactSensorCfg``)."""

    def build(self, env: ManagerBasedEnv) -> SensorTerm:
        """The sensor's state for ``env``."""


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


@dataclass(frozen=True)
class JointEffortAction:
    """Joint torques: ``effort = scale * action`` written to the joints' motor actuators."""

    joint_names: tuple[str, ...]
    scale: float | tuple[float, ...] = 1.0
    clip: tuple[float, float] | None = None
    delay: int = 0


ActionCfg = JointPositionAction | JointEffortAction
"""An action term."""


@dataclass(frozen=True)
class TaskCfg:
    """A whole task: the model, the sim settings and every manager's terms (see the module docstring).

    Attributes:
        model: An MJCF path or the XML text, or a callable returning either (built at construction).
        decimation: Physics substeps per env step.
        episode_length_s: Episode length in seconds (the horizon is ``ceil(episode_length_s / step dt)``).
        actions: The action terms in action order (their widths concatenate).
        observations: Observation groups by name; one group gives a Box space, several a Dict space.
        rewards, terminations, events, commands, sensors, curriculum, metrics: The terms of each manager.
        default_joint_pos: The robot's default pose, by joint name (joints not named default to ``qpos0``).
        soft_joint_limit_factor: Share of each joint's range kept as its soft limits (centred).
        base_body: The floating base body (velocities and orientation are read at its free joint).
        init_base_height: Spawn height of the base (reset events add their offsets).
        rng_stream: First counter-RNG stream of the task: its reset, step and startup draws use this
            stream, ``+10`` and ``+20`` (see :mod:`~gym_graphreset.tasks.draws`).
        refresh: Derived fields recomputed after a reset (``"kinematics"`` when observations read sites).
        njmax, nconmax: Constraint rows and contacts per world (``None``: MuJoCo Warp's default).
        obs_clip: Clip every observation to ``[-obs_clip, obs_clip]`` (``None``: no clip).
    """

    model: str | Callable[[], str]
    decimation: int
    episode_length_s: float
    actions: Mapping[str, ActionCfg]
    observations: Mapping[str, ObsGroup]
    rewards: Mapping[str, RewardTerm] = field(default_factory=dict)
    terminations: Mapping[str, TerminationTerm] = field(default_factory=dict)
    events: Mapping[str, EventTerm] = field(default_factory=dict)
    commands: Mapping[str, CommandCfg] = field(default_factory=dict)
    sensors: Mapping[str, SensorCfg] = field(default_factory=dict)
    curriculum: Mapping[str, CurriculumTerm] = field(default_factory=dict)
    metrics: Mapping[str, MetricTerm] = field(default_factory=dict)
    default_joint_pos: Mapping[str, float] = field(default_factory=dict)
    soft_joint_limit_factor: float = 1.0
    base_body: str | None = None
    init_base_height: float = 0.0
    rng_stream: int = 700
    refresh: Literal["none", "kinematics", "com"] = "kinematics"
    njmax: int | None = None
    nconmax: int | None = None
    obs_clip: float | None = None

    def __post_init__(self) -> None:
        where = "TaskCfg"
        _check(
            isinstance(self.decimation, int) and not isinstance(self.decimation, bool) and self.decimation >= 1,
            where,
            f"`decimation` must be an int >= 1, got {self.decimation!r}",
        )
        _check(
            isinstance(self.episode_length_s, (int, float))
            and math.isfinite(self.episode_length_s)
            and self.episode_length_s > 0,
            where,
            f"`episode_length_s` must be a finite number > 0, got {self.episode_length_s!r}",
        )
        _check(len(self.actions) > 0, where, "`actions` needs at least one action term")
        _check(len(self.observations) > 0, where, "`observations` needs at least one group")
        _check(
            0.0 < self.soft_joint_limit_factor <= 1.0,
            where,
            f"`soft_joint_limit_factor` must be in (0, 1], got {self.soft_joint_limit_factor!r}",
        )
        _check(
            isinstance(self.rng_stream, int) and 0 <= self.rng_stream < 2**31,
            where,
            f"`rng_stream` must be an int in [0, 2**31), got {self.rng_stream!r}",
        )
        if self.obs_clip is not None:
            _check(self.obs_clip > 0, where, f"`obs_clip` must be None or > 0, got {self.obs_clip!r}")
        kinds = {
            "observations": (self.observations, ObsGroup),
            "rewards": (self.rewards, RewardTerm),
            "terminations": (self.terminations, TerminationTerm),
            "events": (self.events, EventTerm),
            "curriculum": (self.curriculum, CurriculumTerm),
            "metrics": (self.metrics, MetricTerm),
        }
        for kind, (terms, cls) in kinds.items():
            for name, term in terms.items():
                _check(
                    isinstance(term, cls),
                    where,
                    f"`{kind}[{name!r}]` must be a {cls.__name__}, got {type(term).__name__}",
                )
        for name, action in self.actions.items():
            _check(
                isinstance(action, (JointPositionAction, JointEffortAction)),
                where,
                f"`actions[{name!r}]` must be a JointPositionAction or JointEffortAction, got {type(action).__name__}",
            )
        for kind, terms, proto in (("commands", self.commands, CommandCfg), ("sensors", self.sensors, SensorCfg)):
            for name, term in terms.items():
                _check(
                    isinstance(term, proto),
                    where,
                    f"`{kind}[{name!r}]` must be a {proto.__name__} (a `build(env)` method), got {type(term).__name__}",
                )

    # ------------------------------------------------------------------ editing (a new frozen config each time)

    _KINDS: ClassVar[tuple[str, ...]] = (
        "actions",
        "rewards",
        "terminations",
        "events",
        "commands",
        "sensors",
        "curriculum",
        "metrics",
    )

    def _terms(self, kind: str) -> Mapping[str, Any]:
        if kind not in self._KINDS:
            raise ValueError(
                f"`kind` must be one of {list(self._KINDS)} (observations: use with_obs/replace_obs), got {kind!r}"
            )
        return getattr(self, kind)

    def with_term(self, kind: str, name: str, term: Any) -> TaskCfg:
        """This task with term ``name`` of manager ``kind`` added or replaced.

        E.g. ``cfg.with_term("rewards", "alive", RewardTerm(mdp.is_alive, weight=0.5))``.
        """
        changes: dict[str, Any] = {kind: {**self._terms(kind), name: term}}
        return replace(self, **changes)

    def without_term(self, kind: str, name: str) -> TaskCfg:
        """This task without term ``name`` of manager ``kind``."""
        terms = self._terms(kind)
        if name not in terms:
            raise KeyError(f"{kind} has no term {name!r}; terms: {list(terms)}")
        changes: dict[str, Any] = {kind: {k: v for k, v in terms.items() if k != name}}
        return replace(self, **changes)

    def replace_term(self, kind: str, name: str, **changes: Any) -> TaskCfg:
        """This task with fields of term ``name`` changed, e.g. ``replace_term("rewards", "upright", weight=2.0)``."""
        terms = self._terms(kind)
        if name not in terms:
            raise KeyError(f"{kind} has no term {name!r}; terms: {list(terms)}")
        return self.with_term(kind, name, replace(terms[name], **changes))

    def with_obs(self, group: str, name: str, term: ObsTerm) -> TaskCfg:
        """This task with observation term ``name`` appended to (or replaced in) ``group``."""
        if group not in self.observations:
            raise KeyError(f"no observation group {group!r}; groups: {list(self.observations)}")
        g = self.observations[group]
        return replace(self, observations={**self.observations, group: replace(g, terms={**g.terms, name: term})})

    def replace_obs(self, group: str, name: str, **changes: Any) -> TaskCfg:
        """This task with fields of observation term ``group/name`` changed."""
        if group not in self.observations or name not in self.observations[group].terms:
            known = {g: list(v.terms) for g, v in self.observations.items()}
            raise KeyError(f"no observation term {group}/{name}; terms: {known}")
        return self.with_obs(group, name, replace(self.observations[group].terms[name], **changes))
