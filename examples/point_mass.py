"""Bring your own env: a batched torch env and a reset term, written against the library's protocols.

``PointMassVectorEnv`` is a 2-D point mass pushed towards a goal, every world stepped at once in torch.
It meets :class:`~gym_graphreset.core.protocols.TorchVectorEnv`; it takes a ``ResetSelection``
(``supports_reset_selection``), steps without host reads (``supports_step_capture``), draws its resets
with the counter-based :mod:`gym_graphreset.core.rng` (so masked and selected-row paths agree bit for bit),
and adds its own device-side check (``add_checks`` with a :class:`~gym_graphreset.CheckSink`).

``ActionHistory`` is a reset term (a :class:`~gym_graphreset.ResetTerm`) that sees every step's actions
(``on_step``), publishes them every step (``info``) and checks them (``add_checks``).

    python examples/point_mass.py --mode step_graph --num-envs 4096 --steps 500   # on a GPU
    python examples/point_mass.py --mode masked                                    # anywhere
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gym_graphreset import (
    PRESETS,
    CheckSink,
    EpisodeKeys,
    EpisodeStatistics,
    FixedShapeAutoresetVectorEnv,
    ResetTerm,
    Rows,
    StepData,
    counter_uniform,
    fill_rows_,
    options_reset_mask,
    reset_selection_capable,
)


class PointMassVectorEnv(VectorEnv):
    """``num_envs`` point masses on a plane, each pushed towards its own goal.

    obs = (position (2,), velocity (2,), goal - position (2,)); action = force in [-1, 1]^2;
    reward = -distance - 0.01 |force|^2; terminated when within 0.05 of the goal or 4 away from the
    origin; truncated after ``max_episode_steps``.
    """

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}
    supports_reset_selection = True  # reset() takes a ResetSelection: masked writes only
    supports_step_capture = True  # step() reads no host data and allocates nothing that must persist

    def __init__(self, num_envs: int, *, device: str | torch.device = "cpu", max_episode_steps: int = 200) -> None:
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.max_episode_steps = max_episode_steps
        self.dt = 0.05
        self.single_observation_space = spaces.Box(-np.inf, np.inf, (6,), np.float32)
        self.single_action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.pos = torch.zeros(num_envs, 2, device=self.device)
        self.vel = torch.zeros(num_envs, 2, device=self.device)
        self.goal = torch.zeros(num_envs, 2, device=self.device)
        self.elapsed = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.keys = EpisodeKeys(num_envs, self.device)  # (seed, env index, episode index) per row
        self._all = torch.ones(num_envs, dtype=torch.bool, device=self.device)

    def _obs(self) -> torch.Tensor:
        return torch.cat((self.pos, self.vel, self.goal - self.pos), dim=1)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every row, or those of ``options["reset_mask"]`` (a bool mask or a ResetSelection)."""
        self.keys.reseed(seed)
        mask = options_reset_mask(options, self._all)  # the selection's mask, never row ids
        self.keys.advance_(mask)  # the reset rows start a new episode
        k = self.keys
        draws = counter_uniform(k.seed, k.env_ids, k.episode, 4, low=-2.0, high=2.0)  # per (seed, row, episode)
        rows = mask.unsqueeze(1)
        self.pos.copy_(torch.where(rows, draws[:, :2], self.pos))
        self.goal.copy_(torch.where(rows, draws[:, 2:], self.goal))
        self.vel.masked_fill_(rows, 0.0)
        self.elapsed.masked_fill_(mask, 0)
        return self._obs(), {}

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Integrate one step of every row (no host read)."""
        force = actions.clamp(-1.0, 1.0)
        self.vel.mul_(0.95).add_(force * self.dt)
        self.pos.add_(self.vel * self.dt)
        self.elapsed.add_(1)
        distance = (self.goal - self.pos).norm(dim=1)
        reward = -distance - 0.01 * force.square().sum(dim=1)
        terminated = (distance < 0.05) | (self.pos.norm(dim=1) > 4.0)
        truncated = self.elapsed >= self.max_episode_steps
        return self._obs(), reward, terminated, truncated, {}

    def add_checks(self, latch: CheckSink) -> None:
        """The env's own check, latched on the device every step (a failure is raised at the next poll)."""
        latch.require(self.vel.abs() < 100.0, "point_mass_speed", "a point mass moves faster than 100 units/s")


@reset_selection_capable
class ActionHistory(ResetTerm):
    """The last ``length`` actions of every row, published as ``info["action_history"]`` every step.

    Args:
        length: Actions kept per row (newest first).
    """

    def __init__(self, length: int = 3) -> None:
        self.length = length
        self.history = torch.zeros(0)

    def bind(self, env: Any) -> None:
        """Allocate for the env's batch, action size and device (once, when the term is added)."""
        shape = (env.num_envs, self.length, *env.single_action_space.shape)
        self.history = torch.zeros(shape, device=env.device)

    def on_step(self, step: StepData) -> None:
        """Push this step's actions (every step, before done rows are reset)."""
        self.history.copy_(torch.cat((step.actions.unsqueeze(1), self.history[:, :-1]), dim=1))

    def reset(self, env_ids: Rows) -> None:
        """Forget the reset rows' history: ids, a ResetSelection or None, all through ``fill_rows_``."""
        fill_rows_(self.history, env_ids, 0.0)

    def info(self) -> dict[str, Any]:
        """Published every step, on every path."""
        return {"action_history": self.history}

    def add_checks(self, latch: CheckSink) -> None:
        """A term's own check: the actions it saw lie in the action space."""
        latch.require(self.history.abs() <= 1.0, "action_history_in_space", "an action outside [-1, 1] was stepped")


def make_env(num_envs: int, mode: str, device: str | torch.device = "cpu") -> FixedShapeAutoresetVectorEnv:
    """The wrapped env in one of the five modes (``PRESETS``), with the history and episode statistics."""
    return FixedShapeAutoresetVectorEnv(
        PointMassVectorEnv(num_envs, device=device),
        PRESETS[mode],  # type: ignore[index]
        reset_terms={"history": ActionHistory(), "episode": EpisodeStatistics()},
    )


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Step random actions through one mode; print the episode summary and the capture report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="masked", choices=list(PRESETS), help="step mode (default: masked)")
    parser.add_argument("--num-envs", type=int, default=256, help="worlds (default: 256)")
    parser.add_argument("--steps", type=int, default=300, help="steps (default: 300)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="torch device")
    args = parser.parse_args(argv)
    env = make_env(args.num_envs, args.mode, args.device)
    env.reset(seed=0)
    episodes = env.reset_terms["episode"]
    gen = torch.Generator(device=args.device).manual_seed(0)
    for _ in range(args.steps):
        env.step(torch.rand(args.num_envs, 2, generator=gen, device=args.device) * 2 - 1)
    summary = episodes.summary()
    print(f"{args.mode}: {summary['episodes']:.0f} episodes, mean return {summary['mean_return']:.2f}")
    print(env.capture_report())
    env.close()
    return summary


if __name__ == "__main__":
    main()
