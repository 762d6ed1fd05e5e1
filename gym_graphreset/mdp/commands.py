"""Commands: the velocity command of legged locomotion (mjlab's ``UniformVelocityCommand``).

Every row holds a body-frame command (x, y, yaw rate). On resample a row draws new values from the
curriculum stage's ranges; a share become forward-only, heading-steering or standing rows; and the row draws
its next resample time. Every step, heading rows steer toward their target and standing rows hold a zero
command. All writes are masked and the curriculum stage is looked up on the device (from the env's step
counter), so nothing here reads the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from gym_graphreset.managers.binding import NON_NEGATIVE, interval, number
from gym_graphreset.managers.draws import span
from gym_graphreset.mdp import math as mdp_math
from gym_graphreset.mdp.observations import base_lin_vel

if TYPE_CHECKING:
    from gym_graphreset.managers.forward_passes import ForwardPass
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["VelocityCommand", "VelocityCommandCfg"]


@dataclass(frozen=True)
class VelocityCommandCfg:
    """The numbers of a velocity command (mjlab's ``UniformVelocityCommandCfg`` and its curriculum).

    ``velocity_stages`` are (first env step, ``lin_vel_x`` range, ``ang_vel_z`` range): the ranges widen as the
    env's step counter passes each stage (mjlab's ``commands_vel`` curriculum).
    """

    velocity_stages: tuple[tuple[int, tuple[float, float], tuple[float, float]], ...] = ((0, (-1.0, 1.0), (-0.5, 0.5)),)
    lin_vel_y: tuple[float, float] = (-1.0, 1.0)
    heading_range: tuple[float, float] = (-math.pi, math.pi)
    resampling_time: tuple[float, float] = (3.0, 8.0)
    rel_standing_envs: float = 0.1
    rel_heading_envs: float = 0.3
    rel_forward_envs: float = 0.0
    forward_min_speed: float = 0.3
    heading_stiffness: float = 0.5

    def __post_init__(self) -> None:
        stages = self.velocity_stages
        shape = "a non-empty tuple of (first env step: int >= 0, lin_vel_x (lo, hi), ang_vel_z (lo, hi)) stages"
        if not (isinstance(stages, (tuple, list)) and stages):
            raise ValueError(f"VelocityCommandCfg: `velocity_stages` must be {shape}, got {stages!r}")
        for k, stage in enumerate(stages):
            step = stage[0] if isinstance(stage, (tuple, list)) and len(stage) == 3 else None
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise ValueError(
                    f"VelocityCommandCfg: `velocity_stages[{k}]` must be (first env step: int >= 0, lin_vel_x "
                    f"(lo, hi), ang_vel_z (lo, hi)), got {stage!r}"
                )
        steps = [stage[0] for stage in stages]
        if not steps or steps[0] != 0 or steps != sorted(steps):
            raise ValueError(
                "VelocityCommandCfg: `velocity_stages` must start at env step 0 and be sorted by step, "
                f"got steps {steps}"
            )
        for name in ("lin_vel_y", "heading_range", "resampling_time"):
            if not interval().ok(getattr(self, name)):
                raise ValueError(f"VelocityCommandCfg: `{name}` must be {interval().text}, got {getattr(self, name)!r}")
        if self.resampling_time[0] <= 0:
            raise ValueError(f"VelocityCommandCfg: `resampling_time` must be > 0, got {self.resampling_time!r}")
        for step, lin_x, ang_z in self.velocity_stages:
            for name, r in (("lin_vel_x", lin_x), ("ang_vel_z", ang_z)):
                if not interval().ok(r):
                    raise ValueError(
                        f"VelocityCommandCfg: `velocity_stages` at step {step}: the {name} range must be "
                        f"{interval().text}, got {r!r}"
                    )
        for name in ("rel_standing_envs", "rel_heading_envs", "rel_forward_envs"):
            value = getattr(self, name)
            if not (number().ok(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"VelocityCommandCfg: `{name}` must be in [0, 1], got {value!r}")
        for name in ("forward_min_speed", "heading_stiffness"):
            if not NON_NEGATIVE.ok(getattr(self, name)):
                raise ValueError(
                    f"VelocityCommandCfg: `{name}` must be {NON_NEGATIVE.text}, got {getattr(self, name)!r}"
                )

    def build(self, env: ManagerBasedEnv) -> VelocityCommand:
        """The command state of ``env``'s rows."""
        return VelocityCommand(self, env)


class VelocityCommand:
    """The command state of every row and its resample and steering rules.

    Attributes:
        command: ``(n, 3)`` the body-frame command (x, y, yaw rate) the policy sees.
        heading_target: ``(n,)`` the heading the heading rows steer to.
        is_heading, is_standing: ``(n,)`` bool, the row's command kind.
        time_left: ``(n,)`` seconds to the row's next resample.
    """

    forward_passes: ClassVar[frozenset[ForwardPass]] = frozenset()
    """What ``command`` and :meth:`metrics` read after a forward pass: nothing it computes (``qpos``, ``qvel``)."""

    reset_draws = 8
    step_draws = 8

    def __init__(self, cfg: VelocityCommandCfg, env: ManagerBasedEnv) -> None:
        n, device = env.num_envs, env.device
        self.cfg, self.env = cfg, env
        self.command = torch.zeros(n, 3, device=device)
        self.heading_target = torch.zeros(n, device=device)
        self.is_heading = torch.zeros(n, dtype=torch.bool, device=device)
        self.is_standing = torch.zeros_like(self.is_heading)
        self.time_left = torch.zeros(n, device=device)
        stages = cfg.velocity_stages
        self._stage_steps = torch.tensor([s[0] for s in stages], device=device)
        self._stage_ranges = torch.tensor([[*s[1], *s[2]] for s in stages], dtype=torch.float32, device=device)

    def ranges(self) -> torch.Tensor:
        """The curriculum stage's ``(x lo, x hi, wz lo, wz hi)`` at the env's step counter (no host read)."""
        stage = (self.env.common_step >= self._stage_steps).sum() - 1
        return self._stage_ranges.index_select(0, stage.view(1))[0]

    def resample(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        """New commands on ``rows`` from the uniforms ``u`` ``(n, 8)``."""
        c = self.cfg
        r = self.ranges()
        cmd = torch.stack((span(u[:, 0], r[0], r[1]), span(u[:, 1], *c.lin_vel_y), span(u[:, 2], r[2], r[3])), dim=1)
        forward = u[:, 6] <= c.rel_forward_envs
        zero = torch.zeros_like(cmd[:, 0])
        fwd_cmd = torch.stack((cmd[:, 0].abs().clamp(min=c.forward_min_speed), zero, zero), dim=1)
        cmd = torch.where(forward.unsqueeze(1), fwd_cmd, cmd)
        self.command.copy_(torch.where(rows.unsqueeze(1), cmd, self.command))
        self.heading_target.copy_(torch.where(rows, span(u[:, 3], *c.heading_range), self.heading_target))
        self.is_heading.copy_(torch.where(rows, u[:, 4] <= c.rel_heading_envs, self.is_heading))
        self.is_standing.copy_(torch.where(rows, u[:, 5] <= c.rel_standing_envs, self.is_standing))
        self.time_left.copy_(torch.where(rows, span(u[:, 7], *c.resampling_time), self.time_left))

    def update(self) -> None:
        """Heading rows steer toward their target; standing rows get a zero command."""
        err = mdp_math.wrap_to_pi(self.heading_target - mdp_math.heading(self.env.base_quat))
        r = self.ranges()
        wz = torch.clamp(self.cfg.heading_stiffness * err, r[2], r[3])
        self.command[:, 2].copy_(torch.where(self.is_heading, wz, self.command[:, 2]))
        self.command.copy_(torch.where(self.is_standing.unsqueeze(1), 0.0, self.command))

    def reset(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        """A new command on the rows starting an episode."""
        self.resample(rows, u)
        self.update()

    def step(self, u: torch.Tensor) -> None:
        """Count down, resample the rows whose time ran out, steer."""
        self.time_left.sub_(self.env.step_dt)
        self.resample(self.time_left <= 0.0, u)
        self.update()

    def metrics(self) -> dict[str, torch.Tensor]:
        """This step's debug values per row: the command, its kind and the tracking errors (mjlab's).

        ``error_vel_xy``: ``|command_xy - base_lin_vel_xy|`` and ``error_vel_yaw``: ``|command_z - base yaw
        rate|``, both in the base frame; the env publishes them as ``info["metrics"]["command/<name>/<key>"]``.
        """
        env = self.env
        return {
            "command": self.command,
            "is_heading": self.is_heading,
            "is_standing": self.is_standing,
            "error_vel_xy": torch.linalg.vector_norm(self.command[:, :2] - base_lin_vel(env)[:, :2], dim=1),
            "error_vel_yaw": (self.command[:, 2] - env.qvel[:, 5]).abs(),
        }
