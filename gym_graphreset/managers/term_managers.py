"""The managers of a task: each turns one mapping of terms of a TaskCfg into full-width, capturable code.

Each is built once at construction from :class:`~gym_graphreset.managers.task_cfg.TaskCfg`.

Every manager's ``reset(rows)`` takes a full-width bool mask and writes through it; none reads device data on
the host, so the env's step and reset are the same code eagerly, on the masked path and inside a graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gym_graphreset.managers.binding import bind, is_run_after_reset_events
from gym_graphreset.managers.draws import DrawBlock, span
from gym_graphreset.managers.history import DelayBuffer
from gym_graphreset.managers.observation_manager import ObservationManager
from gym_graphreset.managers.protocols import StatefulTerm
from gym_graphreset.managers.terms import ActionCfg, EventTerm, JointEffortAction, JointPositionAction

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = [
    "ActionManager",
    "CurriculumManager",
    "EventManager",
    "MetricManager",
    "ObservationManager",
    "RewardManager",
    "TerminationManager",
]


def stateful_resets(calls: list[Any]) -> list[Callable[[torch.Tensor], None]]:
    """The ``reset(rows)`` of every bound term that is a :class:`~gym_graphreset.managers.protocols.StatefulTerm`.

    A term class is built once per env; its per-row state must start over with each episode, so every
    manager runs these at each reset, through the mask (no host read).
    """
    return [c.reset for c in calls if isinstance(c, StatefulTerm)]


def _term_output(value: Any, n: int, where: str, func: Any, *, flag: bool = False) -> torch.Tensor:
    """A reward/metric (real, cast to float32) or termination (bool) term's ``(n,)`` result, checked.

    Only the shape and dtype are read (no device read); an error names the term and what it must return.
    """
    want = f"a ({n},) {'bool' if flag else 'real'} tensor"
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{where}: {getattr(func, '__name__', func)!r} must return {want}, got {type(value).__name__}")
    if value.shape != (n,) or (value.dtype != torch.bool if flag else value.is_complex()):
        raise ValueError(
            f"{where}: {getattr(func, '__name__', func)!r} must return {want}, got {tuple(value.shape)} {value.dtype}"
        )
    return value if flag else value.float()


@dataclass(frozen=True)
class _ActionSlot:
    """One action term's columns of the raw action and what its apply step needs, built once."""

    name: str
    cols: slice
    term: ActionCfg
    actuators: torch.Tensor
    scale: torch.Tensor
    offset: torch.Tensor
    delay: DelayBuffer | None
    bias_cols: torch.Tensor | None
    """The term's joints among the action joints (``env.encoder_bias`` columns), when it subtracts the bias."""


def _check_actuator_kind(env: ManagerBasedEnv, name: str, term: ActionCfg, actuators: list[int]) -> None:
    """A position term needs position-servo actuators (affine bias), an effort term torque ones (no bias)."""
    import mujoco

    position = isinstance(term, JointPositionAction)
    want = mujoco.mjtBias.mjBIAS_AFFINE if position else mujoco.mjtBias.mjBIAS_NONE
    wrong = [
        mujoco.mj_id2name(env.mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or f"#{a}"
        for a in actuators
        if int(env.mjm.actuator_biastype[a]) != int(want)
    ]
    if wrong:
        needs = "position servos (`<position>`: affine bias)" if position else "torque motors (`<motor>`: no bias)"
        other = "JointEffortAction" if position else "JointPositionAction"
        raise ValueError(
            f"actions[{name!r}]: a {type(term).__name__} drives {needs}; actuators {wrong} are not "
            f"(use {other} for them)"
        )


class ActionManager:
    """Action terms in action order: the raw action, the previous one, and the actuator writes.

    Attributes:
        action: ``(n, dim)`` this step's raw action; ``prev_action``: the previous step's.
    """

    def __init__(self, env: ManagerBasedEnv) -> None:
        self.env = env
        self.terms: list[_ActionSlot] = []
        start = 0
        for name, term in env.cfg.actions.items():
            joints = env.joint_index(term.joint_names, f"actions[{name!r}]")
            actuator_list = env.actuator_ids(term.joint_names, f"actions[{name!r}]")
            _check_actuator_kind(env, name, term, actuator_list)
            actuators = torch.tensor(actuator_list, device=env.device)
            k = len(term.joint_names)
            scale = tuple(term.scale) if isinstance(term.scale, (tuple, list)) else (float(term.scale),) * k
            if len(scale) != k:
                raise ValueError(f"actions[{name!r}]: `scale` has {len(scale)} values for {k} joints")
            scale_t = torch.tensor(scale, dtype=torch.float32, device=env.device)
            offset = torch.zeros(k, device=env.device)
            if isinstance(term, JointPositionAction) and term.use_default_offset:
                offset = env.default_joint_pos[joints].clone()
            delay = DelayBuffer(env.num_envs, term.delay, k, env.device, torch.float32) if term.delay else None
            biased = isinstance(term, JointPositionAction) and term.subtract_encoder_bias
            bias_cols = torch.tensor(joints, device=env.device) if biased else None  # the joints' encoder columns
            self.terms.append(
                _ActionSlot(name, slice(start, start + k), term, actuators, scale_t, offset, delay, bias_cols)
            )
            start += k
        self.dim = start
        self.action = torch.zeros(env.num_envs, self.dim, device=env.device)
        self.prev_action = torch.zeros_like(self.action)
        self._identity = len(self.terms) == 1 and actuator_list == list(range(env.mjm.nu))  # ctrl written whole

    def apply(self, raw: torch.Tensor) -> None:
        """Keep ``raw`` as this step's action and write every term's actuator targets."""
        env = self.env
        self.prev_action.copy_(self.action)
        self.action.copy_(raw)
        for slot in self.terms:
            a = raw[:, slot.cols]
            if slot.delay is not None:
                a = slot.delay.delayed(a)
            if slot.term.clip is not None:
                a = a.clamp(*slot.term.clip)
            target = slot.offset + slot.scale * a
            if slot.bias_cols is not None:
                target = target - env.encoder_bias[:, slot.bias_cols]
            if self._identity:
                env.ctrl.copy_(target)
            else:
                env.ctrl[:, slot.actuators] = target

    def reset(self, rows: torch.Tensor) -> None:
        """Zero the actions of the rows of ``rows``; their delay buffers start over."""
        r1 = rows.unsqueeze(1)
        self.action.copy_(torch.where(r1, 0.0, self.action))
        self.prev_action.copy_(torch.where(r1, 0.0, self.prev_action))
        for slot in self.terms:
            if slot.delay is not None:
                slot.delay.restart(rows)

    @property
    def kinds(self) -> dict[str, str]:
        """Action term -> its kind."""
        return {
            slot.name: "joint_effort" if isinstance(slot.term, JointEffortAction) else "joint_position"
            for slot in self.terms
        }


class RewardManager:
    """Weighted reward terms (weight x step dt), their sum, and per-term episode sums.

    Every declared term is a column, a zero weight included: a zero weight is a value a curriculum may raise
    on the device (mjlab's and Isaac Lab's ramp from 0), so the term is computed and its column is exactly 0
    while its weight is 0 (even if the term returns NaN there).

    Attributes:
        names: Every term, in declaration order (the columns of ``terms``).
        weights: ``(k,)`` weight x dt of each (a curriculum may change them in place).
        episode_sums: ``(n, k)`` this episode's sum of each weighted term.
    """

    def __init__(self, env: ManagerBasedEnv) -> None:
        self.env = env
        terms = env.cfg.rewards
        self.names = tuple(terms)
        self._funcs = [t.func for t in terms.values()]
        self._calls = [bind(env, t.func, t.params, f"rewards[{name!r}]") for name, t in terms.items()]
        self._resets = stateful_resets(self._calls)
        dev = env.device
        self.weights = torch.tensor([t.weight for t in terms.values()], dtype=torch.float32, device=dev) * env.step_dt
        self.episode_sums = torch.zeros(env.num_envs, len(self.names), device=dev)
        self.last = torch.zeros_like(self.episode_sums)

    def compute(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(reward ``(n,)``, weighted terms ``(n, k)``) of this step; adds the terms to the episode sums."""
        if not self._calls:
            zero = torch.zeros(self.env.num_envs, device=self.env.device)
            return zero, self.last
        n = self.env.num_envs
        outs = [
            _term_output(c(), n, f"rewards[{name!r}]", f)
            for name, c, f in zip(self.names, self._calls, self._funcs, strict=True)
        ]
        terms = torch.where(self.weights != 0.0, torch.stack(outs, dim=1) * self.weights, 0.0)
        self.episode_sums.add_(terms)
        self.last.copy_(terms)
        return terms.sum(dim=1), terms

    def reset(self, rows: torch.Tensor) -> None:
        """Zero the episode sums of the rows of ``rows``; stateful terms forget them."""
        self.episode_sums.copy_(torch.where(rows.unsqueeze(1), 0.0, self.episode_sums))
        for reset in self._resets:
            reset(rows)

    def weight(self, name: str) -> torch.Tensor:
        """Term ``name``'s weight (without the dt), ``()`` on the device."""
        if name not in self.names:
            raise KeyError(f"no reward term {name!r}; terms: {list(self.names)}")
        i = self.names.index(name)
        return self.weights[i] / self.env.step_dt

    def set_weight(self, name: str, weight: torch.Tensor | float) -> None:
        """Set term ``name``'s weight (x dt) on the device (a curriculum's write; no host read)."""
        if name not in self.names:
            raise KeyError(f"no reward term {name!r}; terms: {list(self.names)}")
        i = self.names.index(name)
        self.weights[i : i + 1].copy_(torch.as_tensor(weight, device=self.env.device).reshape(1) * self.env.step_dt)


class TerminationManager:
    """Done conditions: ``terminated`` is the OR of failures, ``truncated`` the OR of time-outs.

    ``flags`` ``(n, k)`` holds each term's verdict of the last step (in declaration order, ``names``).
    """

    def __init__(self, env: ManagerBasedEnv) -> None:
        self.env = env
        self.names = tuple(env.cfg.terminations)
        self._calls = [bind(env, t.func, t.params, f"terminations[{n!r}]") for n, t in env.cfg.terminations.items()]
        self._funcs = [t.func for t in env.cfg.terminations.values()]
        self.time_out = torch.tensor(
            [t.time_out for t in env.cfg.terminations.values()], dtype=torch.bool, device=env.device
        )
        self.flags = torch.zeros(env.num_envs, len(self.names), dtype=torch.bool, device=env.device)
        self._resets = stateful_resets(self._calls)

    def compute(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(terminated, truncated) ``(n,)`` bool of this step."""
        n, dev = self.env.num_envs, self.env.device
        if not self._calls:
            none = torch.zeros(n, dtype=torch.bool, device=dev)
            return none, none.clone()
        flags = torch.stack(
            [
                _term_output(c(), n, f"terminations[{name!r}]", f, flag=True)
                for name, c, f in zip(self.names, self._calls, self._funcs, strict=True)
            ],
            dim=1,
        )
        self.flags.copy_(flags)
        terminated = (flags & ~self.time_out).any(dim=1)
        truncated = (flags & self.time_out).any(dim=1)
        return terminated, truncated

    def reset(self, rows: torch.Tensor) -> None:
        """Stateful term classes forget the rows of ``rows``."""
        for reset in self._resets:
            reset(rows)


class EventManager:
    """Startup, reset and interval events with their draw words and per-env interval timers.

    Reset events run in declaration order, except those declared with
    :func:`~gym_graphreset.managers.binding.runs_after_reset_events` (the terrain spawn): they run after every
    other, so that the pose they shift is the one the others drew whatever the order of ``TaskCfg.events``.
    Draw words are allocated in declaration order.
    """

    def __init__(self, env: ManagerBasedEnv, reset_block: DrawBlock, step_block: DrawBlock, startup_block: DrawBlock):
        self.env = env
        self._terms: dict[str, Any] = {}  # name -> the bound term (a class instance for event classes)
        by_mode: dict[str, list[tuple[str, EventTerm]]] = {"startup": [], "reset": [], "interval": []}
        for name, term in env.cfg.events.items():
            by_mode[term.mode].append((name, term))
        self._by_mode = by_mode
        self.startup = [
            (n, self._bind(t, n), startup_block.allocate(f"events.{n}", t.draws)) for n, t in by_mode["startup"]
        ]
        self.reset_events = [
            (n, self._bind(t, n), reset_block.allocate(f"events.{n}", t.draws)) for n, t in by_mode["reset"]
        ]
        self.reset_events.sort(key=lambda e: is_run_after_reset_events(env.cfg.events[e[0]].func))  # stable
        self._step_block, self._reset_block = step_block, reset_block
        self.interval: list[tuple[str, Callable[..., Any], EventTerm, torch.Tensor]] = []
        self.timers: dict[str, torch.Tensor] = {}
        self._resets = stateful_resets(list(self._terms.values()))

    def _bind(self, term: EventTerm, name: str) -> Callable[..., Any]:
        """The event's function bound to the env and its params; each call passes the rows and their draws.

        An ``IndexError`` from the call (an event reading more draw columns than its ``draws``) is raised
        again naming the event, the draws it declared and the fix; the event's own ``ValueError`` naming it.
        """
        call = bind(self.env, term.func, term.params, f"events[{name!r}]", call_args=2)
        self._terms[name] = call

        def run(rows: torch.Tensor, u: torch.Tensor) -> Any:
            try:
                return call(rows, u)
            except ValueError as e:  # the event's own refusal, named
                raise ValueError(f"events[{name!r}]: {e}") from e
            except IndexError as e:
                raise IndexError(
                    f"events[{name!r}]: {getattr(term.func, '__name__', term.func)!r} raised IndexError ({e}) with "
                    f"`u` of {u.shape[-1]} draw column(s) per row, as its EventTerm declares draws={term.draws}: "
                    "an event gets only the draws it declares; declare as many as it reads, "
                    "EventTerm(..., draws=k)"
                ) from e

        return run

    def allocate_step(self) -> None:
        """Step-block words of the interval events (after the commands': the block's order)."""
        for n, t in self._by_mode["interval"]:
            call = self._bind(t, n)
            timer = torch.zeros(self.env.num_envs, device=self.env.device)
            self.interval.append((n, call, t, timer))
            self._resets += stateful_resets([self._terms[n]])
            self.timers[n] = timer
            self._step_block.allocate(f"events.{n}", t.draws)
            self._step_block.allocate(f"events.{n}.timer", 1)

    def allocate_reset_timers(self) -> None:
        """Reset-block words of the interval timers (after the commands': the block's order)."""
        for n, _t in self._by_mode["interval"]:
            self._reset_block.allocate(f"events.{n}.timer", 1)

    def reset(self, rows: torch.Tensor) -> None:
        """Stateful event classes forget the rows of ``rows`` (before the reset events of their new episode)."""
        for reset in self._resets:
            reset(rows)

    def run_startup(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        """Every startup event on the worlds of ``rows``; then ``set_const`` if one of them asks for it."""
        for _name, call, words in self.startup:
            call(rows, u[:, words])
        if any(t.recompute == "set_const" for _n, t in self._by_mode["startup"]):
            self.env.recompute_constants()

    def run_reset(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        """Every reset event (they write ``env.initial_state``), on the terminal state, before the physics reset.

        The physics reset runs after the events: it writes the reset rows' ``qpos``/``qvel`` from
        ``env.initial_state`` and clears their controls and applied forces. An event that writes ``env.qpos``,
        ``env.qvel`` or ``env.ctrl`` in place is therefore refused by name (the tensors' version counters,
        metadata: no device read), since the write would be lost. The constructor's first reset runs every
        reset event, so this fails when the env is built, before any physics step; a compiled step (which
        cannot read version counters) skips the check.
        """
        env = self.env
        check = not torch.compiler.is_compiling()  # eager resets check (the constructor's first); dynamo can't
        for name, call, words in self.reset_events:
            if not check:
                call(rows, u[:, words])
                continue
            before = (env.qpos._version, env.qvel._version, env.ctrl._version)  # three ints: cheap every step
            call(rows, u[:, words])
            after = (env.qpos._version, env.qvel._version, env.ctrl._version)
            if after != before:
                written = [
                    k for k, b, a in zip(("env.qpos", "env.qvel", "env.ctrl"), before, after, strict=True) if a != b
                ]
                func = env.cfg.events[name].func
                raise ValueError(
                    f"events[{name!r}]: {getattr(func, '__name__', func)!r} wrote {' and '.join(written)}, which "
                    "the engine's physics reset overwrites on the reset rows after the reset events (state from "
                    "env.initial_state, controls zeroed): write the new episode's state to "
                    "env.initial_state.qpos / env.initial_state.qvel instead (full width; the engine writes the "
                    "reset rows only); a control is the action's, from the first step on"
                )

    def restart_timers(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        """Draw the interval timers of the rows starting an episode."""
        for name, _call, term, timer in self.interval:
            assert term.interval_range_s is not None
            w = self._reset_block.ranges[f"events.{name}.timer"]
            timer.copy_(torch.where(rows, span(u[:, w.start], *term.interval_range_s), timer))

    def run_interval(self, u: torch.Tensor) -> None:
        """Count every timer down; fire the events whose timer ran out and re-arm them."""
        dt = self.env.step_dt
        for name, call, term, timer in self.interval:
            assert term.interval_range_s is not None
            timer.sub_(dt)
            fire = timer <= 0.0
            call(fire, u[:, self._step_block.ranges[f"events.{name}"]])
            w = self._step_block.ranges[f"events.{name}.timer"].start
            timer.copy_(torch.where(fire, span(u[:, w], *term.interval_range_s), timer))


class CurriculumManager:
    """Curriculum terms run at each reset, before the reset rows' state is redrawn; their values are kept."""

    def __init__(self, env: ManagerBasedEnv) -> None:
        self.calls = {
            n: bind(env, t.func, t.params, f"curriculum[{n!r}]", call_args=1) for n, t in env.cfg.curriculum.items()
        }
        self.values: dict[str, torch.Tensor] = {}

    def reset(self, rows: torch.Tensor) -> None:
        """Run every term on the rows of ``rows``."""
        for name, call in self.calls.items():
            try:
                value = call(rows)
            except ValueError as e:  # a term's own refusal (the first reset is the constructor's), named
                raise ValueError(f"curriculum[{name!r}]: {e}") from e
            if isinstance(value, torch.Tensor):
                if name in self.values and self.values[name].shape == value.shape:
                    self.values[name].copy_(value)
                else:
                    self.values[name] = value.clone()


class MetricManager:
    """Per-step metrics averaged over each episode (``episode_means``, reset through the mask)."""

    def __init__(self, env: ManagerBasedEnv) -> None:
        self.env = env
        self.names = tuple(env.cfg.metrics)
        self._calls = [bind(env, t.func, t.params, f"metrics[{n!r}]") for n, t in env.cfg.metrics.items()]
        self._funcs = [t.func for t in env.cfg.metrics.values()]
        self.sums = torch.zeros(env.num_envs, len(self.names), device=env.device)
        self._resets = stateful_resets(self._calls)

    def compute(self) -> None:
        """Add this step's values."""
        if self._calls:
            n = self.env.num_envs
            outs = [
                _term_output(c(), n, f"metrics[{name!r}]", f)
                for name, c, f in zip(self.names, self._calls, self._funcs, strict=True)
            ]
            self.sums.add_(torch.stack(outs, dim=1))

    def episode_means(self) -> dict[str, torch.Tensor]:
        """Each metric's mean over the episode so far, per row."""
        steps = self.env.elapsed.clamp(min=1).unsqueeze(1).float()
        means = self.sums / steps
        return {n: means[:, i] for i, n in enumerate(self.names)}

    def reset(self, rows: torch.Tensor) -> None:
        """Zero the rows of ``rows``; stateful term classes forget them."""
        self.sums.copy_(torch.where(rows.unsqueeze(1), 0.0, self.sums))
        for reset in self._resets:
            reset(rows)
