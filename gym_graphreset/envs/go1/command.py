"""The Go1 task's velocity command term: mjlab's twist command with heading and standing rows.

Every row holds a body-frame command (x, y, yaw rate). On resample a row draws new ranges from the
curriculum stage, a share become forward-only, heading-steering or standing rows, and a new resample time;
every step heading rows steer toward their target and standing rows hold a zero command. All writes are
masked and the curriculum stage is looked up on the device, so nothing here reads the host.
"""

from __future__ import annotations

import torch

import gym_graphreset.envs.go1.terms as T
from gym_graphreset.envs.go1.cfg import Go1VelocityCfg

__all__ = ["VelocityCommand"]


def _span(u: torch.Tensor, lo: float | torch.Tensor, hi: float | torch.Tensor) -> torch.Tensor:
    return lo + (hi - lo) * u


class VelocityCommand:
    """The command state of ``num_envs`` rows and its resample and update rules (mjlab's numbers in ``cfg``).

    Attributes:
        command: ``(n, 3)`` the body-frame command (x, y, yaw rate) the policy sees.
        heading_target: ``(n,)`` the heading the heading rows steer to.
        is_heading, is_standing: ``(n,)`` bool, the row's command kind.
        time_left: ``(n,)`` seconds to the row's next resample.
    """

    def __init__(self, cfg: Go1VelocityCfg, num_envs: int, device: torch.device) -> None:
        self.cfg = cfg
        self.command = torch.zeros(num_envs, 3, device=device)
        self.heading_target = torch.zeros(num_envs, device=device)
        self.is_heading = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.is_standing = torch.zeros_like(self.is_heading)
        self.time_left = torch.zeros(num_envs, device=device)
        stages = cfg.velocity_stages
        self._stage_steps = torch.tensor([s[0] for s in stages], device=device)
        self._stage_ranges = torch.tensor([[*s[1], *s[2]] for s in stages], dtype=torch.float32, device=device)

    def ranges(self, common_step: torch.Tensor) -> torch.Tensor:
        """The curriculum stage's ``(x lo, x hi, wz lo, wz hi)`` at ``common_step``, on the device (no host read)."""
        stage = (common_step >= self._stage_steps).sum() - 1
        return self._stage_ranges.index_select(0, stage.view(1))[0]

    def resample(self, rows: torch.Tensor, u: torch.Tensor, common_step: torch.Tensor) -> None:
        """New commands on ``rows`` from the uniforms ``u`` ``(n, 8)`` (mjlab's resampling rules)."""
        c = self.cfg
        r = self.ranges(common_step)
        cmd = torch.stack((_span(u[:, 0], r[0], r[1]), _span(u[:, 1], *c.lin_vel_y), _span(u[:, 2], r[2], r[3])), dim=1)
        forward = u[:, 6] <= c.rel_forward_envs
        zero = torch.zeros_like(cmd[:, 0])
        fwd_cmd = torch.stack((cmd[:, 0].abs().clamp(min=c.forward_min_speed), zero, zero), dim=1)
        cmd = torch.where(forward.unsqueeze(1), fwd_cmd, cmd)
        self.command.copy_(torch.where(rows.unsqueeze(1), cmd, self.command))
        self.heading_target.copy_(torch.where(rows, _span(u[:, 3], *c.heading_range), self.heading_target))
        self.is_heading.copy_(torch.where(rows, u[:, 4] <= c.rel_heading_envs, self.is_heading))
        self.is_standing.copy_(torch.where(rows, u[:, 5] <= c.rel_standing_envs, self.is_standing))
        self.time_left.copy_(torch.where(rows, _span(u[:, 7], *c.resampling_time), self.time_left))

    def update(self, base_quat: torch.Tensor, common_step: torch.Tensor) -> None:
        """Heading rows steer toward their target (``base_quat``: the base orientation); standing rows get zero."""
        err = T.wrap_to_pi(self.heading_target - T.heading(base_quat))
        r = self.ranges(common_step)
        wz = torch.clamp(self.cfg.heading_stiffness * err, r[2], r[3])
        self.command[:, 2].copy_(torch.where(self.is_heading, wz, self.command[:, 2]))
        self.command.copy_(torch.where(self.is_standing.unsqueeze(1), 0.0, self.command))
