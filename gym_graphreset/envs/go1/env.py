"""``gym_graphreset/Go1-Velocity-Flat-v0``: Unitree Go1 velocity tracking on flat ground, at mjlab 1.6's spec.

A quadruped follows a random twist command (forward, lateral, yaw rate; a share of rows steer to a
heading, a share stand still), written the way manager-based frameworks write it: command, event,
observation, reward and termination terms as batched torch (:mod:`gym_graphreset.envs.go1.terms`), all
with masked writes and counter-based draws, so the step and the reset read no device data on the host
and the selected-row and masked paths are bit-identical on the CPU. The numbers are mjlab's
(``Mjlab-Velocity-Flat-Unitree-Go1``): :class:`~gym_graphreset.envs.go1.cfg.Go1VelocityCfg` (importable from
here too, with ``REWARD_NAMES``). The model: :mod:`gym_graphreset.envs.go1.model`.

Observations are a dict of two groups: ``policy`` (48: noisy; the joint positions carry a per-env encoder
bias) and ``critic`` (72: noise-free, unbiased, plus foot height, air time, contact and contact force).
``info["reward_terms"]`` holds this step's weighted terms, ``(num_envs, len(REWARD_NAMES))``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

import gym_graphreset.envs.go1.terms as T
from gym_graphreset.core.rng import counter_uniform
from gym_graphreset.core.selection import options_reset_mask
from gym_graphreset.envs.go1.cfg import REWARD_NAMES, Go1VelocityCfg  # also imported from here
from gym_graphreset.envs.go1.command import VelocityCommand
from gym_graphreset.envs.go1.model import (
    ACTION_SCALE,
    FOOT_NAMES,
    INIT_BASE_HEIGHT,
    JOINT_NAMES,
    NJMAX,
    PHYSICS_DT,
    build_go1_xml,
    default_joint_pos,
)
from gym_graphreset.envs.mjwarp import MJWarpVectorEnv

__all__ = ["Go1VelocityFlatEnv"]

# Counter-RNG streams. One hash pass per use (a few dozen kernels each), its words split among the terms:
# reset (episode key): base pose 0-3, joints 4-15, command 16-23, push timer 24;
# step ((episode, step) key): command 0-7, push 8-14, observation noise 15-47; startup (world key).
_S_RESET, _S_STEP, _S_STARTUP = 700, 710, 720
_RESET_WORDS, _STEP_WORDS = 25, 48


class Go1VelocityFlatEnv(MJWarpVectorEnv):
    """Go1 flat-ground velocity tracking (see the module docstring).

    Args:
        num_envs: Worlds.
        model_xml: A Go1 MJCF with mjlab's names (``None``: this package's own primitive-geom model);
            mjlab's actuator, collision and solver settings are applied to it either way.
        cfg: The task's numbers (default: mjlab's).
        obs_clip: Clip every observation to ``[-obs_clip, obs_clip]`` (``None``: no clip, as mjlab).
        max_episode_steps: Truncation horizon (default: ``episode_length_s / (decimation * 5 ms)`` = 1000).
        njmax: Constraint rows per world (mjlab: 300).
        **kwargs: Passed to :class:`~gym_graphreset.envs.mjwarp.env.MJWarpVectorEnv` (``device``,
            ``nconmax``, ``global_env_offset``...).

    Attributes:
        velocity_command: The command term (:class:`~gym_graphreset.envs.go1.command.VelocityCommand`).
        command: ``(n, 3)`` the body-frame command (x, y, yaw rate) the policy sees; ``heading_target``,
            ``is_heading``, ``is_standing`` ``(n,)``: the heading target and the row's command kind (the
            command term's tensors).
        command_time_left: ``(n,)`` seconds to the next command resample; ``push_time_left``: to the next push.
        action: ``(n, 12)`` this step's raw action; ``prev_action``: the previous step's.
        in_contact: ``(n, 4)`` foot contact (1.0/0.0); ``air_time``, ``contact_time`` ``(n, 4)`` seconds;
            ``foot_force`` ``(n, 4, 3)`` net contact force of each foot.
        encoder_bias: ``(n, 12)`` per-world joint encoder bias (policy observation only).
        common_step: ``()`` env steps taken since construction (drives the command curriculum).
        default_joint_pos: ``(12,)``; ``action_scale`` ``(12,)``; ``soft_limits`` ``(12, 2)``.
    """

    supports_reset_selection = True  # reset is overridden below with masked writes: re-declared
    batched_model_fields = ("geom_friction", "body_ipos")
    refresh = "kinematics"  # the critic reads foot heights (site_xpos) after a reset
    reward_names = REWARD_NAMES
    reset_term_names = ("base_pose", "joints", "command", "push_timer", "actions", "contact_state")

    def __init__(
        self,
        num_envs: int,
        *,
        model_xml: str | Path | None = None,
        cfg: Go1VelocityCfg | None = None,
        obs_clip: float | None = None,
        max_episode_steps: int | None = None,
        njmax: int | None = NJMAX,
        **kwargs: Any,
    ) -> None:
        self.cfg = cfg or Go1VelocityCfg()
        if obs_clip is not None and not obs_clip > 0:
            raise ValueError(f"`obs_clip` must be None or a positive float, got {obs_clip!r}")
        self.obs_clip = obs_clip
        self.model_xml = model_xml
        step_dt = PHYSICS_DT * self.cfg.decimation
        horizon = max_episode_steps or math.ceil(self.cfg.episode_length_s / step_dt - 1e-9)
        super().__init__(
            build_go1_xml(model_xml),
            num_envs,
            frame_skip=self.cfg.decimation,
            max_episode_steps=horizon,
            njmax=njmax,
            **kwargs,
        )

    def _setup_task(self) -> None:
        """Views of the batched model fields and sensors, the command term, the buffers, the startup events."""
        import warp as wp

        self._setup_constants()
        self.subtree_com = wp.to_torch(self.d.subtree_com)
        self.sensordata = wp.to_torch(self.d.sensordata)
        self.geom_friction = wp.to_torch(self.m.geom_friction)  # (n, ngeom, 3): batched per world
        self.body_ipos = wp.to_torch(self.m.body_ipos)
        self.base_friction, self.base_ipos = self.geom_friction[0].clone(), self.body_ipos[0].clone()
        dev, n = self.device, self.num_envs
        z = lambda *s: torch.zeros(n, *s, device=dev)  # noqa: E731
        self.velocity_command = VelocityCommand(self.cfg, n, dev)
        vc = self.velocity_command  # its tensors, under the names the task's terms and users read
        self.command, self.heading_target, self.command_time_left = vc.command, vc.heading_target, vc.time_left
        self.is_heading, self.is_standing = vc.is_heading, vc.is_standing
        self.push_time_left = z()
        self.action, self.prev_action = z(12), z(12)
        self.air_time, self.contact_time, self.peak_height = z(4), z(4), z(4)
        self.in_contact, self.foot_force = z(4), z(4, 3)
        self.encoder_bias = z(12)
        self.single_action_space = spaces.Box(-np.inf, np.inf, (12,), np.float32)
        self.action_space = batch_space(self.single_action_space, n)
        self._startup_events()

    # ------------------------------------------------------------------ constants of the model

    def _setup_constants(self) -> None:
        """Indices and per-joint constants of the model."""
        import mujoco

        mjm, dev = self.mjm, self.device
        ids = [mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_JOINT, j) for j in JOINT_NAMES]
        self._qpos_ids = torch.tensor([int(mjm.jnt_qposadr[i]) for i in ids], device=dev)
        self._qvel_ids = torch.tensor([int(mjm.jnt_dofadr[i]) for i in ids], device=dev)
        f = lambda x: torch.tensor(x, dtype=torch.float32, device=dev)  # noqa: E731
        self.default_joint_pos = f([default_joint_pos(j) for j in JOINT_NAMES])
        self.action_scale = f([ACTION_SCALE[j] for j in JOINT_NAMES])
        rng = mjm.jnt_range[ids]
        mid, half = rng.mean(axis=1), 0.5 * (rng[:, 1] - rng[:, 0]) * self.cfg.soft_joint_limit_factor
        self.soft_limits = f(np.stack((mid - half, mid + half), axis=1))
        calf = [0.0 if j.endswith("calf_joint") else 1.0 for j in JOINT_NAMES]
        self.pose_std = f([[a if c else b for c in calf] for a, b in self.cfg.pose_std])
        self._trunk = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, "trunk")
        imu = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_SITE, "imu")
        self._imu_offset = f(mjm.site_pos[imu]).expand(self.num_envs, 3)  # trunk frame; imu frame = trunk's
        sites = [mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_SITE, s) for s in FOOT_NAMES]
        self._foot_sites = torch.tensor(sites, device=dev)
        self._foot_bodies = torch.tensor([int(mjm.site_bodyid[s]) for s in sites], device=dev)
        self._foot_geoms = torch.tensor(
            [mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_GEOM, f"{s}_foot_collision") for s in FOOT_NAMES], device=dev
        )
        self.weights = f([self.cfg.weights[k] for k in REWARD_NAMES]) * self.dt
        c = self.cfg
        self._push_scale = f([*c.push_lin, *c.push_ang])
        self.common_step = torch.zeros((), dtype=torch.long, device=dev)
        self._com_scale = f(c.base_com_offset)
        self._noise_scale = f(
            [c.noise_lin_vel] * 3 + [c.noise_ang_vel] * 3 + [c.noise_gravity] * 3 + [c.noise_joint_pos] * 12
            + [c.noise_joint_vel] * 12
        )  # fmt: skip

    # ------------------------------------------------------------------ draws

    def _reset_draw(self, stream: int, width: int) -> torch.Tensor:
        """Uniform ``[0, 1)`` draws of every row's current episode, ``(n, width)``."""
        return counter_uniform(self.seed, self.env_ids, self.episode, width, stream=stream)

    def _step_draw(self, stream: int, width: int) -> torch.Tensor:
        """Uniform ``[0, 1)`` draws keyed by (episode, step within the episode), ``(n, width)``."""
        key = self.episode * 65536 + self.elapsed
        return counter_uniform(self.seed, self.env_ids, key, width, stream=stream)

    @staticmethod
    def _span(u: torch.Tensor, lo: float | torch.Tensor, hi: float | torch.Tensor) -> torch.Tensor:
        return lo + (hi - lo) * u

    # ------------------------------------------------------------------ events

    def _startup_events(self) -> None:
        """Per-world foot friction, encoder bias and trunk COM offset (mjlab's "startup" events).

        Drawn once per world from ``(seed, global env index)``; a ``reset(seed=...)`` draws them again.
        """
        c, n = self.cfg, self.num_envs
        u = counter_uniform(self.seed, self.env_ids, torch.zeros_like(self.episode), 18, stream=_S_STARTUP)
        log = lambda x, r: torch.exp(self._span(x, math.log(r[0]), math.log(r[1])))  # noqa: E731
        mu = torch.stack(
            (self._span(u[:, 0], *c.foot_friction_slide), log(u[:, 1], c.foot_friction_spin),
             log(u[:, 2], c.foot_friction_roll)),
            dim=1,
        )  # fmt: skip
        friction = self.base_friction.expand(n, -1, -1).clone()
        friction[:, self._foot_geoms] = mu.unsqueeze(1)  # shared by the four feet
        self.geom_friction.copy_(friction)
        self.encoder_bias.copy_(self._span(u[:, 3:15], -c.encoder_bias, c.encoder_bias))
        ipos = self.base_ipos.expand(n, -1, -1).clone()
        ipos[:, self._trunk] += (2.0 * u[:, 15:18] - 1.0) * self._com_scale
        self.body_ipos.copy_(ipos)

    def _sample_initial_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Base pose uniform around the spawn point (yaw over the circle), joints at default plus offset."""
        c = self.cfg
        u = self._reset_draw(_S_RESET, _RESET_WORDS)
        self._reset_u = u  # the reset terms use the rest of the words
        qpos = self.init_qpos.expand(self.num_envs, -1).clone()
        qpos[:, 0] = self._span(u[:, 0], -c.reset_xy, c.reset_xy)
        qpos[:, 1] = self._span(u[:, 1], -c.reset_xy, c.reset_xy)
        qpos[:, 2] = INIT_BASE_HEIGHT + self._span(u[:, 2], *c.reset_z)
        qpos[:, 3:7] = T.yaw_quat(self._span(u[:, 3], -c.reset_yaw, c.reset_yaw))
        joints = self.default_joint_pos + self._span(u[:, 4:16], *c.joint_position_range)
        qpos[:, self._qpos_ids] = torch.maximum(torch.minimum(joints, self.soft_limits[:, 1]), self.soft_limits[:, 0])
        return qpos, torch.zeros_like(self.qvel)

    def command_ranges(self) -> torch.Tensor:
        """The curriculum stage's ``(x lo, x hi, wz lo, wz hi)`` at ``common_step``, on the device (no host read)."""
        return self.velocity_command.ranges(self.common_step)

    def _reset_terms(self, mask: torch.Tensor) -> None:
        """Command, push timer, actions and contact bookkeeping of the rows of ``mask`` (masked writes)."""
        c = self.cfg
        u = self._reset_u  # drawn by _sample_initial_state for the episodes that start now
        self.velocity_command.resample(mask, u[:, 16:24], self.common_step)
        timer = self._span(u[:, 24], *c.push_interval)
        self.push_time_left.copy_(torch.where(mask, timer, self.push_time_left))
        m1 = mask.unsqueeze(1)
        for buf in (self.action, self.prev_action, self.air_time, self.contact_time, self.peak_height, self.in_contact):
            buf.copy_(torch.where(m1, 0.0, buf))
        self.foot_force.copy_(torch.where(mask.view(-1, 1, 1), 0.0, self.foot_force))
        self.velocity_command.update(self.qpos[:, 3:7], self.common_step)

    def _push(self, u: torch.Tensor) -> None:
        """Add a random base velocity (world frame) on rows whose push timer ran out; re-arm their timer."""
        c = self.cfg
        self.push_time_left.sub_(self.dt)
        push = self.push_time_left <= 0.0
        kick = (2.0 * u[:, 0:6] - 1.0) * self._push_scale  # world linear, world angular
        lin, ang_w = kick[:, :3], kick[:, 3:]
        ang_b = T.quat_rotate_inverse(self.qpos[:, 3:7], ang_w)  # free-joint angular qvel is in the body frame
        p1 = push.unsqueeze(1)
        self.qvel[:, 0:3].add_(torch.where(p1, lin, 0.0))
        self.qvel[:, 3:6].add_(torch.where(p1, ang_b, 0.0))
        self.push_time_left.copy_(torch.where(push, self._span(u[:, 6], *c.push_interval), self.push_time_left))

    # ------------------------------------------------------------------ Gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the physics of the selected worlds (all by default), then every reset term on the same rows."""
        self.keys.reseed(seed)
        mask = options_reset_mask(options, self._all)
        with self._on_stream():
            self._masked_reset(mask)  # the parent's reset without its observation (ours follows the terms)
            if seed is not None:
                self._startup_events()
            self._reset_terms(mask)
            return self._observe(), {}

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Position targets from the actions, 4 physics substeps, rewards, terminations, command and push."""
        if actions.shape != (self.num_envs, 12):
            raise ValueError(f"actions must have shape {(self.num_envs, 12)}, got {tuple(actions.shape)}")
        with self._on_stream():
            raw = actions.to(self.device, torch.float32)
            self.prev_action.copy_(self.action)
            self.action.copy_(raw)
            target = self.default_joint_pos + self.action_scale * raw
            self.ctrl.copy_(target)  # actuators are added in JOINT_NAMES order
            self.runtime.run("physics", self._physics_body)
            self.elapsed.add_(1)
            self.common_step.add_(1)
            self.checks.record(self.qpos, self.qvel)
            terms = self._reward_terms()
            reward = terms.sum(dim=1)
            gravity = T.projected_gravity(self.qpos[:, 3:7])
            terminated = torch.acos((-gravity[:, 2]).clamp(-1.0, 1.0)) > self.cfg.fall_angle
            truncated = self.elapsed >= self.max_episode_steps
            self.command_time_left.sub_(self.dt)
            u = self._step_draw(_S_STEP, _STEP_WORDS)
            self.velocity_command.resample(self.command_time_left <= 0.0, u[:, 0:8], self.common_step)
            self.velocity_command.update(self.qpos[:, 3:7], self.common_step)
            self._push(u[:, 8:15])
            return self._observe(u), reward, terminated, truncated, {"reward_terms": terms}

    # ------------------------------------------------------------------ terms

    def _base_velocity(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(trunk origin linear velocity, IMU linear velocity, angular velocity), all in the body frame."""
        q = self.qpos[:, 3:7]
        lin_b = T.quat_rotate_inverse(q, self.qvel[:, 0:3])
        ang_b = self.qvel[:, 3:6]
        return lin_b, lin_b + torch.linalg.cross(ang_b, self._imu_offset), ang_b

    def _feet(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Foot site heights above the floor ``(n, 4)`` and world velocities ``(n, 4, 3)``."""
        pos = self.site_xpos[:, self._foot_sites]
        vel = T.point_velocity(self.cvel[:, self._foot_bodies], self.subtree_com[:, self._trunk].unsqueeze(1), pos)
        return pos[..., 2], vel

    def _reward_terms(self) -> torch.Tensor:
        """Every weighted reward term (weight x step dt, as mjlab), ``(n, len(REWARD_NAMES))``."""
        c = self.cfg
        contact = self.sensordata.view(self.num_envs, 4, 4)
        self.in_contact.copy_((contact[..., 0] > 0).float())
        self.foot_force.copy_(contact[..., 1:4])
        touching = self.in_contact > 0
        self.air_time.copy_(torch.where(touching, 0.0, self.air_time + self.dt))
        self.contact_time.copy_(torch.where(touching, self.contact_time + self.dt, 0.0))
        first = (touching & (self.contact_time < self.dt + 1e-6)).float()
        height, foot_vel = self._feet()
        self.peak_height.copy_(torch.where(touching, self.peak_height, torch.maximum(self.peak_height, height)))
        swing = ((self.peak_height / c.foot_target_height - 1.0).square() * first).sum(dim=1)
        self.peak_height.copy_(torch.where(first > 0, 0.0, self.peak_height))

        lin_b, _, ang_b = self._base_velocity()
        joint_pos = self.qpos[:, self._qpos_ids]
        active = T.active_command(self.command, c.foot_command_threshold)
        raw = torch.stack(
            (
                T.track_linear_velocity(self.command, lin_b, c.std_linear),
                T.track_angular_velocity(self.command, ang_b, c.std_angular),
                T.upright(T.projected_gravity(self.qpos[:, 3:7]), c.std_upright),
                T.variable_posture(
                    joint_pos - self.default_joint_pos, self.command, self.pose_std, c.walking_threshold,
                    c.running_threshold,
                ),
                T.joint_pos_limits(joint_pos, self.soft_limits),
                (self.action - self.prev_action).square().sum(dim=1),
                T.feet_clearance(height, foot_vel, c.foot_target_height) * active,
                swing * active,
                T.feet_slip(self.in_contact, foot_vel) * active,
                T.soft_landing(self.foot_force, first) * active,
            ),
            dim=1,
        )  # fmt: skip
        return raw * self.weights

    def _observe(self, u: torch.Tensor | None = None) -> Any:
        """``{"policy": (n, 48), "critic": (n, 72)}``.

        ``u``: this step's draws (words 15-47 are the noise), made here when not given.
        """
        _, imu_lin, ang = self._base_velocity()
        gravity = T.projected_gravity(self.qpos[:, 3:7])
        joint_pos = self.qpos[:, self._qpos_ids] - self.default_joint_pos
        joint_vel = self.qvel[:, self._qvel_ids]
        clean = (imu_lin, ang, gravity, joint_pos, joint_vel, self.action, self.command)
        u = 2.0 * (self._step_draw(_S_STEP, _STEP_WORDS) if u is None else u)[:, 15:] - 1.0
        noisy = torch.cat((imu_lin, ang, gravity, joint_pos + self.encoder_bias, joint_vel), dim=1)
        noisy = noisy + u * self._noise_scale
        policy = torch.cat((noisy, self.action, self.command), dim=1)
        height = self.site_xpos[:, self._foot_sites, 2]
        force = self.foot_force.flatten(1)
        critic = torch.cat(
            (*clean, height, self.air_time, self.in_contact, torch.sign(force) * torch.log1p(force.abs())), dim=1
        )
        if self.obs_clip is not None:
            policy, critic = policy.clamp(-self.obs_clip, self.obs_clip), critic.clamp(-self.obs_clip, self.obs_clip)
        return {"policy": policy, "critic": critic}
