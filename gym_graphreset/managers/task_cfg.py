"""The declarative task configuration: one frozen dataclass naming a task's terms, as mjlab and Isaac Lab write them.

A task is a :class:`TaskCfg`: the model, the sim settings, and one mapping of named terms per manager
(actions, observation groups, rewards, terminations, events, commands, sensors, curricula, metrics,
recorders). The
term configs are in :mod:`gym_graphreset.managers.terms` (with the signature each term function has), the
contracts of commands and sensors in :mod:`gym_graphreset.managers.protocols`. Nothing here touches torch or
MuJoCo: :class:`~gym_graphreset.managers.manager_based_env.ManagerBasedEnv` turns a ``TaskCfg`` into device tensors
once, at construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from gym_graphreset.managers.binding import FINITE, POSITIVE, ensure, require
from gym_graphreset.managers.forward_passes import ForwardMode
from gym_graphreset.managers.protocols import CommandCfg, SensorCfg
from gym_graphreset.managers.terms import (
    ActionCfg,
    CurriculumTerm,
    EventTerm,
    JointEffortAction,
    JointPositionAction,
    MetricTerm,
    ObsGroup,
    ObsTerm,
    RecorderTerm,
    RewardTerm,
    TerminationTerm,
)

__all__ = ["TaskCfg"]


@dataclass(frozen=True)
class TaskCfg:
    """A whole task: the model, the sim settings and every manager's terms (see the module docstring).

    Attributes:
        model: An MJCF path or the XML text, or a callable returning either (built at construction).
        decimation: Physics substeps per env step.
        episode_length_s: Episode length in seconds (the horizon is ``ceil(episode_length_s / step dt)``).
        actions: The action terms in action order (their widths concatenate).
        observations: Observation groups by name; one group gives a Box space, several a Dict space.
        rewards, terminations, events, commands, sensors, curriculum, metrics, recorders: The terms of each
            manager.
        default_joint_pos: The robot's default pose, by joint name (joints not named default to ``qpos0``).
        soft_joint_limit_factor: Share of each joint's range kept as its soft limits (centred).
        base_body: The floating base body (velocities and orientation are read at its free joint).
        init_base_height: Spawn height of the base (reset events add their offsets).
        rng_stream: First counter-RNG stream of the task: its reset, step and startup draws use this
            stream, ``+10`` and ``+20`` (see :mod:`~gym_graphreset.managers.draws`).
        refresh: Derived fields recomputed after a reset (``"kinematics"`` when observations read sites).
        forward_before_obs: Run MuJoCo Warp's ``forward`` on every world after the step's rewards,
            terminations and events and before its observations, as mjlab's step does: sites, contacts and
            sensors the observations read are the state's own instead of the last substep's (one substep
            stale). It does not change the physics (the next step recomputes everything) and costs about one
            substep of physics per step. Contact sensors re-read their flags and forces after it (their air
            and contact times stay counted by the physics' substeps). Rows reset in the step observe their
            new episode after the reset's ``refresh`` (sites current) with their contact sensors cleared, as
            without it; mjlab's forward runs after its resets, so there a row spawned touching the ground
            reads that contact in its first observation.
        forward_passes: What that forward runs. ``"declared"``: only the passes that what is read after it
            declares (observation and recorder terms, commands, sensors' refresh; see
            :mod:`~gym_graphreset.managers.forward_passes`), which give the same values bit for bit with less
            work; the whole forward when one of them declares nothing (``env.describe()["forward"]`` says
            which). ``"full"``: MuJoCo Warp's whole forward, mjlab's work.
        njmax, nconmax: Constraint rows and contacts per world (``None``: MuJoCo Warp's default).
        obs_clip: Clip every observation to ``[-obs_clip, obs_clip]`` (``None``: no clip).
        recorder_frames: Frames each env's recording ring keeps (``None``: one whole episode,
            ``max_episode_steps + 1``, the reset frame included); older frames are overwritten.
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
    recorders: Mapping[str, RecorderTerm] = field(default_factory=dict)
    default_joint_pos: Mapping[str, float] = field(default_factory=dict)
    soft_joint_limit_factor: float = 1.0
    base_body: str | None = None
    init_base_height: float = 0.0
    rng_stream: int = 700
    refresh: Literal["none", "kinematics", "com"] = "kinematics"
    forward_before_obs: bool = False
    forward_passes: ForwardMode = "declared"
    njmax: int | None = None
    nconmax: int | None = None
    obs_clip: float | None = None
    recorder_frames: int | None = None

    def __post_init__(self) -> None:
        where = "TaskCfg"
        ensure(
            isinstance(self.decimation, int) and not isinstance(self.decimation, bool) and self.decimation >= 1,
            where,
            f"`decimation` must be an int >= 1, got {self.decimation!r}",
        )
        require(where, "episode_length_s", self.episode_length_s, POSITIVE)
        ensure(len(self.actions) > 0, where, "`actions` needs at least one action term")
        ensure(len(self.observations) > 0, where, "`observations` needs at least one group")
        ensure(
            POSITIVE.ok(self.soft_joint_limit_factor) and self.soft_joint_limit_factor <= 1.0,
            where,
            f"`soft_joint_limit_factor` must be in (0, 1], got {self.soft_joint_limit_factor!r}",
        )
        require(where, "init_base_height", self.init_base_height, FINITE)
        for joint, q in self.default_joint_pos.items():
            require(where, f"default_joint_pos[{joint!r}]", q, FINITE)
        for name in ("njmax", "nconmax", "recorder_frames"):
            value = getattr(self, name)
            ensure(
                value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1),
                where,
                f"`{name}` must be None or an int >= 1, got {value!r}",
            )
        ensure(
            self.refresh in ("none", "kinematics", "com"),
            where,
            f"`refresh` must be 'none', 'kinematics' or 'com', got {self.refresh!r}",
        )
        ensure(
            isinstance(self.forward_before_obs, bool),
            where,
            f"`forward_before_obs` must be a bool, got {self.forward_before_obs!r}",
        )
        ensure(
            self.forward_passes in ("declared", "full"),
            where,
            f"`forward_passes` must be 'declared' or 'full', got {self.forward_passes!r}",
        )
        ensure(
            isinstance(self.rng_stream, int) and 0 <= self.rng_stream < 2**31,
            where,
            f"`rng_stream` must be an int in [0, 2**31), got {self.rng_stream!r}",
        )
        if self.obs_clip is not None:
            require(where, "obs_clip", self.obs_clip, POSITIVE)
        kinds = {
            "observations": (self.observations, ObsGroup),
            "rewards": (self.rewards, RewardTerm),
            "terminations": (self.terminations, TerminationTerm),
            "events": (self.events, EventTerm),
            "curriculum": (self.curriculum, CurriculumTerm),
            "metrics": (self.metrics, MetricTerm),
            "recorders": (self.recorders, RecorderTerm),
        }
        for kind, (terms, cls) in kinds.items():
            for name, term in terms.items():
                ensure(
                    isinstance(term, cls),
                    where,
                    f"`{kind}[{name!r}]` must be a {cls.__name__}, got {type(term).__name__}",
                )
        for name, action in self.actions.items():
            ensure(
                isinstance(action, (JointPositionAction, JointEffortAction)),
                where,
                f"`actions[{name!r}]` must be a JointPositionAction or JointEffortAction, got {type(action).__name__}",
            )
        for kind, terms, proto in (("commands", self.commands, CommandCfg), ("sensors", self.sensors, SensorCfg)):
            for name, term in terms.items():
                ensure(
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
        "recorders",
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
