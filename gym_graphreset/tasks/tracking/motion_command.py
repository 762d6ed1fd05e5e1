"""Motion tracking (BeyondMimic, as mjlab 1.6's ``tasks/tracking``): the motion command and its terms.

:class:`MotionCommandCfg` names a clip (:mod:`gym_graphreset.tasks.tracking.motion_clips`), the anchor body and the
tracked bodies. The command keeps each row's frame index; the reset event :func:`reset_to_motion_frame` draws a
start frame per reset row and writes the clip's state there (with pose, velocity and joint noise). Start frames
are drawn by **adaptive sampling**: the clip is cut into 1 s bins, episodes that end in failure count against
the bin they failed in (an exponential average, updated every step on the device), and a start bin is drawn
from a mix of that failure distribution (smoothed by a causal kernel) and a uniform share. The draw is an
inverse-CDF lookup of one counter-based uniform per row, so it is full width and fixed shape: no
``multinomial``, ``nonzero`` or host read; the top-1 statistics use ``amax``, not indexing by ``argmax``.

The observation, reward and termination terms that compare the robot with the clip are in
:mod:`gym_graphreset.tasks.tracking.tracking_terms`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import torch

from gym_graphreset.managers.binding import POSITIVE, interval
from gym_graphreset.managers.draws import span
from gym_graphreset.mdp.math import (
    quat_conjugate,
    quat_error_magnitude,
    quat_from_euler_xyz,
    quat_mul,
    quat_rotate,
    quat_rotate_inverse,
    yaw_of,
    yaw_quat,
)
from gym_graphreset.mdp.recorders import body_ang_vel_w, body_lin_vel_w
from gym_graphreset.tasks.tracking.motion_clips import MotionClip, load_motion

if TYPE_CHECKING:
    from gym_graphreset.managers.forward_passes import ForwardPass
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["MotionCommand", "MotionCommandCfg", "motion_command", "reset_draws", "reset_to_motion_frame"]

Range = tuple[float, float]
_ZERO6: tuple[Range, ...] = ((0.0, 0.0),) * 6


@dataclass(frozen=True)
class MotionCommandCfg:
    """The motion command: a clip and the bodies to track (mjlab's ``MotionCommandCfg``).

    Attributes:
        motion_file: The clip, an ``.npz`` in mjlab's format at the task's step rate.
        anchor_body: The body whose pose anchors the relative terms (e.g. ``"torso_link"``); in ``body_names``.
        body_names: The tracked bodies.
        pose_range: Start-pose noise ``(lo, hi)`` for x, y, z [m], roll, pitch, yaw [rad].
        velocity_range: Start-velocity noise for x, y, z [m/s], roll, pitch, yaw rates [rad/s] (world frame).
        joint_position_range: Start joint-position noise [rad] (clipped to the soft limits).
        sampling_mode: ``"adaptive"`` (failure-weighted bins), ``"uniform"`` frames or ``"start"`` (frame 0).
        adaptive_kernel_size, adaptive_lambda: The smoothing kernel ``lambda**i`` over the next bins.
        adaptive_uniform_ratio: The uniform share mixed into the failure distribution (> 0: every bin can
            be drawn, before any failure too).
        adaptive_alpha: The weight of this step's failures in the per-bin average.

    Every range is finite and every number a real number (a bool or a string is refused, naming the field).
    """

    motion_file: str | Path
    anchor_body: str
    body_names: tuple[str, ...]
    pose_range: tuple[Range, ...] = _ZERO6
    velocity_range: tuple[Range, ...] = _ZERO6
    joint_position_range: Range = (-0.1, 0.1)
    sampling_mode: Literal["adaptive", "uniform", "start"] = "adaptive"
    adaptive_kernel_size: int = 1
    adaptive_lambda: float = 0.8
    adaptive_uniform_ratio: float = 0.1
    adaptive_alpha: float = 0.001

    def __post_init__(self) -> None:
        where = "MotionCommandCfg"

        def refuse(name: str, text: str) -> None:
            raise ValueError(f"{where}: `{name}` must be {text}, got {getattr(self, name)!r}")

        if not isinstance(self.motion_file, (str, Path)):
            refuse("motion_file", "a path (str or pathlib.Path) to an .npz clip")
        names = self.body_names
        if not (isinstance(names, tuple) and names and all(isinstance(b, str) for b in names)):
            refuse("body_names", "a non-empty tuple of body names")
        if not (isinstance(self.anchor_body, str) and self.anchor_body in names):
            raise ValueError(f"{where}: `anchor_body` {self.anchor_body!r} must be one of `body_names` {names}")
        pair = interval()
        for name in ("pose_range", "velocity_range"):
            value = getattr(self, name)
            if not (isinstance(value, (tuple, list)) and len(value) == 6 and all(pair.ok(r) for r in value)):
                refuse(name, "6 (lo, hi) pairs of finite numbers with lo <= hi")
        if not pair.ok(self.joint_position_range):
            refuse("joint_position_range", "a (lo, hi) pair of finite numbers with lo <= hi")
        if self.sampling_mode not in ("adaptive", "uniform", "start"):
            refuse("sampling_mode", "'adaptive', 'uniform' or 'start'")
        k = self.adaptive_kernel_size
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            refuse("adaptive_kernel_size", "an int >= 1")
        for name in ("adaptive_lambda", "adaptive_alpha"):
            if not (POSITIVE.ok(getattr(self, name)) and getattr(self, name) <= 1.0):
                refuse(name, "a finite number in (0, 1]")
        if not POSITIVE.ok(self.adaptive_uniform_ratio):
            refuse("adaptive_uniform_ratio", "a finite number > 0 (with 0, no bin can be drawn before a failure)")

    def build(self, env: ManagerBasedEnv) -> MotionCommand:
        """The command's state for ``env``."""
        return MotionCommand(self, env)


def reset_draws(num_joints: int) -> int:
    """Uniform draws :func:`reset_to_motion_frame` takes per row for a robot of that many hinge joints."""
    return 2 + 6 + 6 + num_joints


class MotionCommand:
    """Per-row frame indices into the clip, the adaptive sampler's bins, and the clip's and robot's bodies."""

    forward_passes: ClassVar[frozenset[ForwardPass]] = frozenset({"kinematics", "com_vel"})
    """What :meth:`metrics` reads after a forward pass: the tracked bodies' poses and velocities."""

    reset_draws = 0  # the reset event (reset_to_motion_frame) draws the start frames
    mjlab_metrics: ClassVar[tuple[str, ...]] = (
        "error_anchor_pos",
        "error_anchor_rot",
        "error_anchor_lin_vel",
        "error_anchor_ang_vel",
        "error_body_pos",
        "error_body_rot",
        "error_body_lin_vel",
        "error_body_ang_vel",
        "error_joint_pos",
        "error_joint_vel",
        "sampling_entropy",
        "sampling_top1_prob",
        "sampling_top1_bin",
    )
    """The keys of :meth:`metrics`: mjlab's, which its env logs at a reset as ``Metrics/<command>/<key>`` (each as
    its last update left it; :class:`~gym_graphreset.integrations.common.ResetMetricLog` logs them the same way)."""
    step_draws = 0

    def __init__(self, cfg: MotionCommandCfg, env: ManagerBasedEnv) -> None:
        import mujoco

        self.cfg, self.env = cfg, env
        mjm, dev, n = env.mjm, env.device, env.num_envs
        hinges = list(range(1, mjm.njnt))
        if mjm.njnt < 2 or int(mjm.jnt_type[0]) != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError("MotionCommand: the model's joint 0 must be the robot's free joint")
        names = tuple(mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j) for j in hinges)
        if names != env.joint_names:
            raise ValueError(
                f"MotionCommand: the action joints must be the robot's joints in model order (a clip's columns), "
                f"got {list(env.joint_names)} for {list(names)}"
            )
        if not any(t.func is reset_to_motion_frame for t in env.cfg.events.values()):
            raise ValueError(
                "MotionCommand: the task needs a reset event `reset_to_motion_frame` (it draws the start frames)"
            )
        self.clip: MotionClip = load_motion(
            cfg.motion_file, num_joints=len(hinges), num_bodies=mjm.nbody - 1, fps=1.0 / env.step_dt, device=dev
        )
        self.body_ids = torch.tensor([env.body_id(b) for b in cfg.body_names], device=dev)
        self.anchor = cfg.body_names.index(cfg.anchor_body)
        self.time_steps = torch.zeros(n, dtype=torch.long, device=dev)
        frames = self.clip.num_frames
        self.bin_count = int(frames // (1.0 / env.step_dt)) + 1
        self.bin_failed_count = torch.zeros(self.bin_count, device=dev)
        self.current_bin_failed = torch.zeros(self.bin_count, device=dev)
        k = torch.tensor([cfg.adaptive_lambda**i for i in range(cfg.adaptive_kernel_size)], device=dev)
        self.kernel = k / k.sum()
        self._pose = torch.tensor(cfg.pose_range, device=dev)
        self._vel = torch.tensor(cfg.velocity_range, device=dev)

    # ------------------------------------------------------------------ the clip at each row's frame

    def _frame(self, field: torch.Tensor) -> torch.Tensor:
        return field[self.time_steps]

    @property
    def command(self) -> torch.Tensor:
        """``(n, 2 joints)``: the frame's joint positions and velocities (the policy's command)."""
        return torch.cat((self._frame(self.clip.joint_pos), self._frame(self.clip.joint_vel)), dim=1)

    def motion_bodies(self, field: str) -> torch.Tensor:
        """The tracked bodies' ``body_pos_w`` / ``body_quat_w`` / ... of each row's frame, ``(n, k, 3 or 4)``."""
        return self._frame(getattr(self.clip, field))[:, self.body_ids - 1]

    def robot_bodies(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The tracked bodies' world position, orientation, linear and angular velocity on the robot."""
        env = self.env

        def compute() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
            xquat = env.constant("xquat", lambda: env.runtime.wp.to_torch(env.d.xquat))
            ids = self.body_ids
            return (
                env.xpos[:, ids],
                xquat[:, ids],
                body_lin_vel_w(env, self.cfg.body_names),
                body_ang_vel_w(env, self.cfg.body_names),
            )

        return env.cached(("motion_robot_bodies", id(self)), compute)

    def relative_bodies(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The clip's body positions and orientations moved onto the robot's anchor (its x, y and heading)."""

        def compute() -> tuple[torch.Tensor, torch.Tensor]:
            pos, quat = self.motion_bodies("body_pos_w"), self.motion_bodies("body_quat_w")
            a_pos, a_quat = pos[:, self.anchor : self.anchor + 1], quat[:, self.anchor : self.anchor + 1]
            r_pos, r_quat = (x[:, self.anchor : self.anchor + 1] for x in self.robot_bodies()[:2])
            delta_pos = torch.cat((r_pos[..., :2], a_pos[..., 2:]), dim=-1)
            delta_ori = yaw_quat(yaw_of(quat_mul(r_quat, quat_conjugate(a_quat)))).expand_as(quat)
            return delta_pos + quat_rotate(delta_ori, pos - a_pos), quat_mul(delta_ori, quat)

        return self.env.cached(("motion_relative_bodies", id(self)), compute)

    # ------------------------------------------------------------------ sampling

    def sampling_probabilities(self) -> torch.Tensor:
        """``(bins,)`` the start-bin distribution: failures (smoothed) plus the uniform share, normalised."""
        cfg = self.cfg
        p = self.bin_failed_count + cfg.adaptive_uniform_ratio / float(self.bin_count)
        p = torch.nn.functional.pad(p.view(1, 1, -1), (0, cfg.adaptive_kernel_size - 1), mode="replicate")
        p = torch.nn.functional.conv1d(p, self.kernel.view(1, 1, -1)).view(-1)
        return p / p.sum()

    def current_bins(self) -> torch.Tensor:
        """``(n,)`` the bin of each row's frame."""
        return ((self.time_steps * self.bin_count) // max(self.clip.num_frames, 1)).clamp(0, self.bin_count - 1)

    def start(self, rows: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Count the failed episodes of ``rows``, draw their start frames (masked writes); the frames, ``(n,)``.

        An episode counts once: a row reset again before its next step (its ``elapsed`` is 0, the termination
        flags still those of the episode already counted) adds no failure.
        """
        tm = self.env.termination_manager
        failed = rows & (self.env.elapsed > 0) & (tm.flags & ~tm.time_out).any(dim=1)
        self.current_bin_failed.index_add_(0, self.current_bins(), failed.to(self.current_bin_failed.dtype))
        frames, mode = self.clip.num_frames, self.cfg.sampling_mode
        if mode == "adaptive":
            cdf = torch.cumsum(self.sampling_probabilities(), dim=0)
            bins = torch.searchsorted(cdf, (u[:, 0] * cdf[-1]).unsqueeze(1), right=True).squeeze(1)
            bins = bins.clamp(max=self.bin_count - 1)
            new = ((bins + u[:, 1]) / self.bin_count * (frames - 1)).long()
        elif mode == "uniform":
            new = (u[:, 0] * frames).long().clamp(max=frames - 1)
        else:
            new = torch.zeros_like(self.time_steps)
        self.time_steps.copy_(torch.where(rows, new, self.time_steps))
        return new

    # ------------------------------------------------------------------ the CommandTerm protocol

    def reset(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        """Nothing: :func:`reset_to_motion_frame` drew the rows' frames before the physics reset."""

    def step(self, u: torch.Tensor) -> None:
        """Advance every row one frame and fold this step's failures into the per-bin average.

        A row is held at the clip's last frame: :func:`~gym_graphreset.tasks.tracking.tracking_terms.motion_end` ends
        its episode there.
        """
        alpha = self.cfg.adaptive_alpha
        self.bin_failed_count.copy_(alpha * self.current_bin_failed + (1.0 - alpha) * self.bin_failed_count)
        self.current_bin_failed.zero_()
        self.time_steps.copy_((self.time_steps + 1).clamp(max=self.clip.num_frames - 1))

    def metrics(self) -> dict[str, torch.Tensor]:
        """Tracking errors per row and the sampler's entropy and top-1 bin (mjlab's command metrics).

        The keys are :attr:`mjlab_metrics`, each computed as mjlab's ``MotionCommand._update_metrics`` does: the
        anchor's world position, orientation and velocities against the clip's, the tracked bodies' mean errors
        (positions and orientations against the clip moved onto the robot's anchor, velocities in the world
        frame), the joints' error norms.
        """
        pos, quat, lin, ang = self.robot_bodies()
        rel_pos, rel_quat = self.relative_bodies()
        a = self.anchor
        env, n = self.env, self.env.num_envs
        joints = env.qpos[:, env.joint_qpos_ids], env.qvel[:, env.joint_dof_ids]
        p = self.sampling_probabilities()
        entropy = -(p * (p + 1e-12).log()).sum() / (math.log(self.bin_count) if self.bin_count > 1 else 1.0)
        top = p.amax()
        top_bin = torch.argmax(p).to(p.dtype) / self.bin_count  # a value, never an index: no host read
        return {
            "error_anchor_pos": (self.motion_bodies("body_pos_w")[:, a] - pos[:, a]).norm(dim=-1),
            "error_anchor_rot": quat_error_magnitude(self.motion_bodies("body_quat_w")[:, a], quat[:, a]),
            "error_anchor_lin_vel": (self.motion_bodies("body_lin_vel_w")[:, a] - lin[:, a]).norm(dim=-1),
            "error_anchor_ang_vel": (self.motion_bodies("body_ang_vel_w")[:, a] - ang[:, a]).norm(dim=-1),
            "error_body_pos": (rel_pos - pos).norm(dim=-1).mean(dim=-1),
            "error_body_rot": quat_error_magnitude(rel_quat, quat).mean(dim=-1),
            "error_body_lin_vel": (self.motion_bodies("body_lin_vel_w") - lin).norm(dim=-1).mean(dim=-1),
            "error_body_ang_vel": (self.motion_bodies("body_ang_vel_w") - ang).norm(dim=-1).mean(dim=-1),
            "error_joint_pos": (self._frame(self.clip.joint_pos) - joints[0]).norm(dim=-1),
            "error_joint_vel": (self._frame(self.clip.joint_vel) - joints[1]).norm(dim=-1),
            "sampling_entropy": entropy.expand(n),
            "sampling_top1_prob": top.expand(n),
            "sampling_top1_bin": top_bin.expand(n),
        }


def motion_command(env: ManagerBasedEnv, command_name: str) -> MotionCommand:
    """The env's command ``command_name``, which must be a :class:`MotionCommand`."""
    command = env.commands[command_name]
    if not isinstance(command, MotionCommand):
        raise ValueError(f"command {command_name!r} must be a MotionCommand, got {type(command).__name__}")
    return command


def reset_to_motion_frame(env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor, command_name: str) -> None:
    """Reset event: draw each reset row's start frame and start it in the clip's state there, with noise.

    Needs ``draws=reset_draws(joints)`` (frame: 2, pose: 6, velocity: 6, one per joint). The root pose and
    velocity are those of the robot's root body in the clip, moved by the command's pose and velocity noise;
    the joints those of the frame plus the joint noise, clipped to the soft limits.
    """
    command = motion_command(env, command_name)
    clip, cfg = command.clip, command.cfg
    nj = len(env.joint_names)
    if u.shape[1] < reset_draws(nj):
        raise ValueError(f"reset_to_motion_frame: the event needs draws={reset_draws(nj)}, got {u.shape[1]}")
    frame = command.start(rows, u)
    pose = span(u[:, 2:8], command._pose[:, 0], command._pose[:, 1])
    vel = span(u[:, 8:14], command._vel[:, 0], command._vel[:, 1])
    root_quat = quat_mul(quat_from_euler_xyz(pose[:, 3], pose[:, 4], pose[:, 5]), clip.body_quat_w[frame, 0])
    limits = env.soft_joint_limits
    joints = clip.joint_pos[frame] + span(u[:, 14 : 14 + nj], *cfg.joint_position_range)
    state = env.initial_state
    state.qpos[:, 0:3] = clip.body_pos_w[frame, 0] + pose[:, 0:3]
    state.qpos[:, 3:7] = root_quat
    state.qpos[:, env.joint_qpos_ids] = torch.maximum(torch.minimum(joints, limits[:, 1]), limits[:, 0])
    state.qvel[:, 0:3] = clip.body_lin_vel_w[frame, 0] + vel[:, 0:3]
    state.qvel[:, 3:6] = quat_rotate_inverse(root_quat, clip.body_ang_vel_w[frame, 0] + vel[:, 3:6])
    state.qvel[:, env.joint_dof_ids] = clip.joint_vel[frame]
