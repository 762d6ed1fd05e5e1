"""``ManagerBasedEnv``: a MuJoCo Warp task declared as a :class:`~gym_graphreset.managers.task_cfg.TaskCfg`.

The engine env (:class:`~gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv`) fixes ``step`` and ``reset``; this
class fills its task hooks with the managers of :mod:`~gym_graphreset.managers.term_managers`, so no task writes a
step of its own (or can forget the engine's checks). One env step:

1. actions: keep the raw action, write the actuator targets;
2. physics (``decimation`` substeps), the engine's overflow and finite-state record;
3. sensors; rewards (weighted, x dt, per-term episode sums); terminations (failures / time-outs);
4. one pass of step draws; commands (count down, resample, steer); interval events (per-env timers);
5. metrics; with ``forward_before_obs``, MuJoCo Warp's forward passes that the observations, recorders and
   commands declare (:mod:`~gym_graphreset.managers.forward_passes`) and the sensors' ``refresh``;
   observations (noise from the step draws, clip, scale, delay, history); recorders.

A reset of the rows of a mask: curriculum (on the terminal state), the engine's masked reset (reset events
write the initial state), startup events again when seeded, then every manager's ``reset(rows)`` and the
observation, and the recorders' reset frame. Everything is full width with masked writes and counter-based draws
(:mod:`~gym_graphreset.managers.draws`), so the step and the reset read nothing on the host, the selected-row
and masked paths agree bit for bit on the CPU, and the whole step can be captured in one CUDA graph.

``info`` of a step: ``reward_terms`` ``(n, k)`` this step's weighted terms (``reward_names``),
``episode_reward_sums`` ``(n, k)`` their sums over the episode so far (on a done row: the finished
episode's; mjlab logs ``mean(sum) / episode_length_s`` as ``Episode_Reward/<name>``), ``terminations``
``(n, K)`` each termination term's verdict (``termination_names``), and ``metrics``: each metric term's
episode mean by name, and every command's debug values of this step as ``command/<command>/<key>`` (e.g.
``command/twist/error_vel_xy``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from gym_graphreset.core.protocols import CheckSink
from gym_graphreset.core.rng import StreamAllocator
from gym_graphreset.envs.mjwarp.vector_env import MJWarpVectorEnv, check_contact_limits
from gym_graphreset.managers.draws import DrawBlock
from gym_graphreset.managers.forward_passes import plan_forward, task_readers
from gym_graphreset.managers.model_access import ModelAccess, PhaseCache
from gym_graphreset.managers.protocols import CommandTerm, check_command
from gym_graphreset.managers.recorder_manager import RecorderManager
from gym_graphreset.managers.sensing import Sensors
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.managers.term_checks import TermChecks, check_time_out, warn_if_unwrapped
from gym_graphreset.managers.term_managers import (
    ActionManager,
    CurriculumManager,
    EventManager,
    MetricManager,
    ObservationManager,
    RewardManager,
    TerminationManager,
)

__all__ = ["InitialState", "ManagerBasedEnv"]


@dataclass
class InitialState:
    """Full-width proposals of a new episode's state; the engine writes them on the reset rows only."""

    qpos: torch.Tensor
    qvel: torch.Tensor


def _check_model_fields(cfg: TaskCfg) -> None:
    """Refuse an event's ``model_fields`` entry that names no field of ``mujoco_warp.Model``, naming the event."""
    import difflib

    import mujoco_warp

    fields = {f.name for f in dataclasses.fields(mujoco_warp.Model)}
    for name, event in cfg.events.items():
        for unknown in [f for f in event.model_fields if f not in fields]:
            close = difflib.get_close_matches(unknown, sorted(fields), n=3)
            hint = f"; close: {close}" if close else ""
            raise ValueError(f"events[{name!r}]: `model_fields` has {unknown!r}, no field of mujoco_warp.Model{hint}")


class ManagerBasedEnv(ModelAccess, MJWarpVectorEnv):
    """A manager-based task on MuJoCo Warp (see the module docstring).

    Args:
        cfg: The task.
        num_envs: Worlds.
        max_episode_steps: Truncation horizon of the ``time_out`` term (default: ``ceil(episode_length_s / dt)``).
        **kwargs: Passed to :class:`~gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv` (``device``,
            ``global_env_offset``...). ``njmax`` / ``nconmax`` (the contact and constraint budget per world)
            replace the task's: ``cfg`` then says what is allocated (``None``: MuJoCo Warp's default).

    Attributes:
        cfg: The task configuration.
        step_dt: Seconds per env step (``decimation`` x the model's timestep).
        common_step: ``()`` int64, env steps taken since construction (curricula key on it; the terrain
            levels do not move at a reset while it is 0). Write it in place (``common_step.zero_()``: a
            captured step holds the tensor), e.g. to give back warm-up steps that should count for no
            curriculum, or to restore a resumed run's count.
        action, prev_action: ``(n, dim)`` this step's and the previous step's raw action.
        commands, sensors: Command and sensor objects by name.
        encoder_bias: ``(n, nj)`` per-world joint encoder bias (zero unless an event draws it).
        joint_names: The action joints, in action order; ``joint_qpos_ids`` / ``joint_dof_ids`` their
            ``qpos`` / ``qvel`` columns; ``default_joint_pos`` ``(nj,)`` (inside each joint's range);
            ``soft_joint_limits`` ``(nj, 2)`` (``-inf, inf`` for a joint without a range: never clamped).
        observation_layout: ``{group: {term: column slice}}`` of the concatenated groups.
        reward_names, termination_names: The columns of the step info's ``reward_terms`` / ``terminations``.
        streams: A :class:`~gym_graphreset.core.rng.StreamAllocator` for terms' own draws.
        last_obs: The last observation by group (the env returns the value alone for one group); recorders read it.
        recorder_manager: The recording ring of the task's ``recorders`` (``export`` after a rollout).
        forward_plan: What ``TaskCfg.forward_before_obs`` runs
            (:class:`~gym_graphreset.managers.forward_passes.ForwardPlan`; ``describe()["forward"]``).
    """

    tracks_progress = False

    def __init__(self, cfg: TaskCfg, num_envs: int, *, max_episode_steps: int | None = None, **kwargs: Any) -> None:
        if not isinstance(cfg, TaskCfg):
            raise TypeError(f"`cfg` must be a TaskCfg, got {type(cfg).__name__}")
        task_only = {f.name for f in dataclasses.fields(TaskCfg)} - {"njmax", "nconmax"}  # those two: env kwargs too
        if misplaced := sorted(task_only & kwargs.keys()):
            key = misplaced[0]
            raise TypeError(f"`{key}` is a field of the task, not an env argument: pass replace(cfg, {key}=...)")
        if max_episode_steps is not None and (
            isinstance(max_episode_steps, bool)
            or not isinstance(max_episode_steps, (int, np.integer))
            or max_episode_steps < 1
        ):
            raise ValueError(f"`max_episode_steps` must be None or an int >= 1, got {max_episode_steps!r}")
        if budget := {k: kwargs.pop(k) for k in ("njmax", "nconmax") if k in kwargs}:
            check_contact_limits(budget.get("nconmax"), budget.get("njmax"))
            cfg = dataclasses.replace(cfg, **budget)  # the cfg says what is allocated
        self.cfg = cfg
        self._horizon = None if max_episode_steps is None else int(max_episode_steps)
        check_time_out(cfg)
        _check_model_fields(cfg)
        self.batched_model_fields = tuple(dict.fromkeys(f for e in cfg.events.values() for f in e.batched_fields))
        self.refresh = cfg.refresh
        model = cfg.model() if callable(cfg.model) else cfg.model
        super().__init__(
            model,
            num_envs,
            frame_skip=cfg.decimation,
            max_episode_steps=self._horizon or 1,
            njmax=cfg.njmax,
            nconmax=cfg.nconmax,
            **kwargs,
        )

    # ------------------------------------------------------------------ construction

    def _setup_task(self) -> None:
        """Resolve names, allocate every manager's state and draw ranges (the model is on the device)."""
        import warp as wp

        cfg = self.cfg
        self.step_dt = self.dt
        self.max_episode_steps = self._horizon or math.ceil(cfg.episode_length_s / self.step_dt - 1e-9)
        self.subtree_com = wp.to_torch(self.d.subtree_com)
        self.sensordata = wp.to_torch(self.d.sensordata)
        self._cache = PhaseCache()
        self._constants: dict[Hashable, Any] = {}
        self._model_defaults: dict[str, torch.Tensor] = {}
        for name in self.batched_model_fields:
            self._model_defaults[name] = self.model_field(name)[0].clone()
        self.base_quat = self.qpos[:, 3:7]
        self.base_body_id = self.body_id(cfg.base_body) if cfg.base_body is not None else 1
        self.common_step = torch.zeros((), dtype=torch.long, device=self.device)
        self._setup_joints()

        stream = cfg.rng_stream
        self.reset_block = DrawBlock("reset", stream)
        self.step_block = DrawBlock("step", stream + 10)
        self.startup_block = DrawBlock("startup", stream + 20)
        self.streams = StreamAllocator(stream + 20)
        self.action_manager = ActionManager(self)
        self.action, self.prev_action = self.action_manager.action, self.action_manager.prev_action
        self.sensors = Sensors(self)
        self.commands: dict[str, CommandTerm] = {n: c.build(self) for n, c in cfg.commands.items()}
        for name, command in self.commands.items():
            check_command(f"commands[{name!r}]", command)
        self.event_manager = EventManager(self, self.reset_block, self.step_block, self.startup_block)
        # reset block: reset events (allocated above), commands, interval timers
        self._command_reset_words = {
            n: self.reset_block.allocate(f"commands.{n}", c.reset_draws) for n, c in self.commands.items()
        }
        self.event_manager.allocate_reset_timers()
        # step block: commands, interval events, observation noise
        self._command_step_words = {
            n: self.step_block.allocate(f"commands.{n}", c.step_draws) for n, c in self.commands.items()
        }
        self.event_manager.allocate_step()
        self.reward_manager = RewardManager(self)
        self.termination_manager = TerminationManager(self)
        self.curriculum_manager = CurriculumManager(self)
        self.metric_manager = MetricManager(self)
        self.initial_state = InitialState(self.init_qpos.expand(self.num_envs, -1).clone(), torch.zeros_like(self.qvel))
        self.single_action_space = spaces.Box(-np.inf, np.inf, (self.action_manager.dim,), np.float32)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.observation_manager = ObservationManager(self, self.step_block)  # probes each term's width
        for block in (self.reset_block, self.step_block, self.startup_block):
            block.freeze()
            self.keys.prefix(block.stream)  # kept from now on: made before any capture
        self._reset_u = torch.zeros(self.num_envs, self.reset_block.size, device=self.device)  # the frozen width
        self.observation_layout = self.observation_manager.layout
        self.last_obs: dict[str, Any] = {
            g: {t: torch.zeros(self.num_envs, c.stop - c.start, device=self.device) for t, c in cols.items()}
            if not cfg.observations[g].concatenate
            else torch.zeros(self.num_envs, max(c.stop for c in cols.values()), device=self.device)
            for g, cols in self.observation_layout.items()
        }
        self.recorder_manager = RecorderManager(self)
        self.forward_plan = plan_forward(task_readers(cfg, self.commands), self.sensors, cfg.forward_passes, self.m)
        self.term_checks = TermChecks(self)
        self.reward_names = self.reward_manager.names
        self.termination_names = self.termination_manager.names
        self.info_columns = {  # InfoColumns: a conformance report names the term whose column differs
            "reward_terms": self.reward_names,
            "episode_reward_sums": self.reward_names,
            "terminations": self.termination_names,
        }
        self._startup_done = False  # the constructor's reset runs the startup events

    def _setup_joints(self) -> None:
        """The action joints' columns, default pose and soft limits."""
        import mujoco

        mjm, cfg = self.mjm, self.cfg
        owner: dict[str, str] = {}
        for term, action in cfg.actions.items():
            for j in action.joint_names:
                if j in owner:
                    raise ValueError(
                        f"TaskCfg.actions[{term!r}]: joint {j!r} is already driven by action term {owner[j]!r} "
                        "(each joint takes one action column)"
                    )
                owner[j] = term
        names = tuple(owner)
        ids = [self._id(mujoco.mjtObj.mjOBJ_JOINT, j, "TaskCfg.actions") for j in names]
        unknown = sorted(set(cfg.default_joint_pos) - set(names))
        if unknown:
            raise ValueError(f"TaskCfg.default_joint_pos: {unknown} are not action joints ({list(names)})")
        self.joint_names = names
        dev = self.device
        f = lambda x: torch.tensor(x, dtype=torch.float32, device=dev)  # noqa: E731
        self.joint_qpos_ids = torch.tensor([int(mjm.jnt_qposadr[i]) for i in ids], device=dev)
        self.joint_dof_ids = torch.tensor([int(mjm.jnt_dofadr[i]) for i in ids], device=dev)
        qpos0 = [float(mjm.qpos0[int(mjm.jnt_qposadr[i])]) for i in ids]
        default = [cfg.default_joint_pos.get(j, q0) for j, q0 in zip(names, qpos0, strict=True)]
        limited = np.asarray(mjm.jnt_limited[ids], dtype=bool)
        rng = np.where(limited[:, None], mjm.jnt_range[ids], np.array([-np.inf, np.inf]))  # unlimited: no clamp
        for j, q, (lo, hi) in zip(names, default, rng, strict=True):
            if not lo <= q <= hi:
                source = f"TaskCfg.default_joint_pos[{j!r}]" if j in cfg.default_joint_pos else f"joint {j!r}'s qpos0"
                raise ValueError(
                    f"{source}: the default position {q:g} is outside the joint's range [{lo:g}, {hi:g}] (radians; "
                    'an MJCF without <compiler angle="radian"/> gives ranges in degrees)'
                )
        self.default_joint_pos = f(default)
        mid = np.where(limited[:, None], rng, 0.0).mean(axis=1)  # 0 for an unlimited joint (no inf - inf)
        half = 0.5 * (rng[:, 1] - rng[:, 0]) * cfg.soft_joint_limit_factor
        self.soft_joint_limits = f(np.stack((mid - half, mid + half), axis=1))
        self.encoder_bias = torch.zeros(self.num_envs, len(names), device=dev)

    def _observation_space(self, obs: Any) -> spaces.Space[Any]:
        """One group gives a ``Box`` (or a ``Dict`` of its terms), several a ``Dict``.

        A group's bounds are ``+-`` the smaller of its ``clip`` and the task's ``obs_clip`` (infinite if neither).
        """

        def group_space(group: str, v: Any) -> spaces.Space[Any]:
            clips = [c for c in (self.cfg.observations[group].clip, self.cfg.obs_clip) if c is not None]
            bound = float(min(clips)) if clips else np.inf

            def box(x: torch.Tensor) -> spaces.Box:
                return spaces.Box(-bound, bound, (x.shape[1],), np.float32)

            return spaces.Dict({k: box(t) for k, t in v.items()}) if isinstance(v, dict) else box(v)

        if len(self.last_obs) == 1:  # the env returns the one group's value (:meth:`_returned_obs`)
            return group_space(next(iter(self.last_obs)), obs)
        return spaces.Dict({k: group_space(k, v) for k, v in obs.items()})

    # ------------------------------------------------------------------ engine hooks

    _warned_alone: bool = False

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """The engine's step; the first one with no wrapper warns (once per env) that nothing resets done rows.

        A task env resets only when asked (``reset(options={"reset_mask": ...})``):
        :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` resets the rows that ended, as Gymnasium's
        autoreset does.
        """
        if not self._warned_alone and not torch.compiler.is_compiling():
            self._warned_alone = True
            warn_if_unwrapped(self)
        return super().step(actions)

    def _apply_actions(self, action: torch.Tensor) -> None:
        self.action_manager.apply(action)

    def _task_step(
        self, before: torch.Tensor | None, action: torch.Tensor
    ) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        self.common_step.add_(1)
        self._cache.begin("physics")
        for sensor in self.sensors.values():
            sensor.update()
        reward, terms = self.reward_manager.compute()
        terminated, truncated = self.termination_manager.compute()
        u = self.step_block.draw(self.keys, self.episode, self.elapsed)
        for name, command in self.commands.items():
            command.step(u[:, self._command_step_words[name]])
        self.event_manager.run_interval(u)
        self._cache.begin("events")
        self.metric_manager.compute()
        if self.cfg.forward_before_obs:  # mjlab's order: after metrics and events, before observations
            if self.forward_plan.passes:
                self.runtime.run("forward", self._forward)
            self.sensors.refresh(self.forward_plan.refreshed)
            self._cache.begin("forward")
        obs = self._observations(u)
        info: dict[str, Any] = {
            "reward_terms": terms,
            "episode_reward_sums": self.reward_manager.episode_sums.clone(),
            "terminations": self.termination_manager.flags.clone(),
        }
        metrics = {k: v.clone() for k, v in self.metric_manager.episode_means().items()}
        for name, command in self.commands.items():
            metrics.update({f"command/{name}/{k}": v.clone() for k, v in command.metrics().items()})
        if metrics:
            info["metrics"] = metrics
        self._keep_obs(obs)
        self.recorder_manager.record()
        return self._returned_obs(obs), reward, terminated, truncated, info

    @property
    def observed_rows(self) -> torch.Tensor | None:
        """The rows the observation in progress observes: ``phase.rows``.

        (:attr:`~gym_graphreset.managers.model_access.ModelAccess.phase`): the reset mask after a reset;
        ``None`` (every row) after a step, and outside the ``observe`` phase.
        """
        return self.phase.rows

    def _observations(self, u: torch.Tensor, rows: torch.Tensor | None = None) -> dict[str, Any]:
        """The observation manager's groups (``rows``: the rows observed, ``None`` for every row).

        Observing is a phase of its own (``observe``, then ``observed``): a ``cast="before_obs"`` ray sensor casts
        only in it, and values cached from its kept rays before it (a metric's) are not reused, nor observed
        ones after it. The first observation checks that each such sensor was cast (read by an observation),
        else rewards would read rays never cast.
        """
        apart = bool(self.sensors.sensed_before_obs)
        self._cache.begin("observe", rows)
        try:
            if apart:
                self.sensors.cast_for_observation()  # outside the terms' loop: one declared break
            obs = self.observation_manager.compute(u, rows)
        finally:
            self._cache.begin("observed")
        if apart:
            self.sensors.check_cast_once()
        return obs

    def _forward(self) -> None:
        """The forward passes of :attr:`forward_plan` on every world (``TaskCfg.forward_before_obs``)."""
        self.forward_plan.run(self.m, self.d)

    def _returned_obs(self, obs: dict[str, Any]) -> Any:
        """What the env returns: the group's value when there is one group (its space is that group's), else ``obs``."""
        return next(iter(obs.values())) if len(obs) == 1 else obs

    initial_state_draws = "task"  # the reset events' proposals (env.initial_state), written by the fused reset

    def _sample_initial_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The reset block's draws of every row's new episode; reset events write the state proposals.

        The engine runs it before the physics reset of the rows (either path), and its fused kernel writes the
        proposals on the reset rows.
        """
        u = self._reset_u
        u.copy_(self.reset_block.draw(self.keys, self.episode))  # in place: a graph may hold it
        state = self.initial_state
        state.qpos = self.init_qpos.expand(self.num_envs, -1).clone()
        state.qvel = torch.zeros_like(self.qvel)
        self.event_manager.run_reset(self._reset_mask_view(), u)
        return state.qpos, state.qvel

    def _reset_mask_view(self) -> torch.Tensor:
        """The mask of the reset in progress (the engine's persistent reset mask)."""
        return self._reset_mask

    def _before_reset(self, mask: torch.Tensor) -> None:
        self._cache.begin("reset")  # the terminal state: nothing in a reset reads a value cached before it
        self.curriculum_manager.reset(mask)
        self.event_manager.reset(mask)  # event classes start the new episode before its reset events run

    def _after_reset(self, mask: torch.Tensor, seeded: bool) -> Any:
        self._cache.begin("new_state")  # after the physics reset: no value cached on the terminal state
        self.recorder_manager.reset(mask)
        if seeded or not self._startup_done:
            self._startup_done = True
            u0 = self.startup_block.draw(self.keys, torch.zeros_like(self.episode))
            self.event_manager.run_startup(mask, u0)
        u = self._reset_u
        for name, command in self.commands.items():
            command.reset(mask, u[:, self._command_reset_words[name]])
        self.event_manager.restart_timers(mask, u)
        self.action_manager.reset(mask)
        for sensor in self.sensors.values():
            sensor.reset(mask)
        self.reward_manager.reset(mask)
        self.termination_manager.reset(mask)
        self.metric_manager.reset(mask)
        self._cache.begin("started")
        self.observation_manager.reset(mask)
        step_u = self.step_block.draw(self.keys, self.episode, self.elapsed)
        obs = self._observations(step_u, mask)
        self._keep_obs(obs)
        self.recorder_manager.record(mask)
        return self._returned_obs(obs)

    def _keep_obs(self, obs: Any) -> None:
        """Copy ``obs`` into :attr:`last_obs`'s buffers, allocated once, so that a graph holding them stays valid."""
        for group, value in obs.items():
            kept = self.last_obs[group]
            if isinstance(kept, dict):
                for term, tensor in value.items():
                    kept[term].copy_(tensor)
            else:
                kept.copy_(value)

    def _observe(self) -> Any:
        raise RuntimeError("ManagerBasedEnv observes through its observation manager")

    def add_checks(self, latch: CheckSink) -> None:
        """The engine's checks, then each observation and reward term's finite check, by name (no host read)."""
        super().add_checks(latch)
        self.term_checks.add_checks(latch)

    def describe(self) -> dict[str, Any]:
        """The task as built: terms of every manager, observation columns, every term's draw words and streams."""
        return {
            "actions": self.action_manager.kinds,
            "observations": {
                g: {t: (s.start, s.stop) for t, s in cols.items()} for g, cols in self.observation_layout.items()
            },
            "rewards": list(self.reward_names),
            "terminations": list(self.termination_names),
            "events": {
                m: [n for n, t in self.cfg.events.items() if t.mode == m] for m in ("startup", "reset", "interval")
            },
            "commands": list(self.commands),
            "sensors": list(self.sensors),
            "curriculum": list(self.curriculum_manager.calls),
            "metrics": list(self.metric_manager.names),
            "recorders": list(self.recorder_manager.names),
            "draws": {b.name: b.layout() for b in (self.reset_block, self.step_block, self.startup_block)},
            "streams": dict(self.streams.streams),
            "forward": self.forward_plan.describe() if self.cfg.forward_before_obs else None,
        }
