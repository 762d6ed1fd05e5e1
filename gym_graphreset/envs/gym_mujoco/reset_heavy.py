"""A reset-heavy locomotion workload built the way manager-based frameworks build tasks.

HalfCheetah-v5 physics (Euler, 5 substeps) plus, as real features, 13 reset terms (per-world domain
randomisation of friction, body mass and actuator gains through MuJoCo Warp's batched model fields;
observation-history and action-delay buffers; target-velocity and target-pitch commands; push
perturbations on an interval; a curriculum whose update stamp is a host transition; per-term reward
logging; the previous action; observation-noise scales; random early resets), 9 reward terms and two
observation groups (``policy``: noisy, with history; ``critic``: privileged) computed every step.

One definition serves every mode. The only difference between the selected-row baseline and the masked
path is how each term gets its rows: given a bool mask (the selected-row path), every term derives its
own row ids with ``nonzero()`` — a host sync per term, as Isaac Lab / mjlab managers do; given a
:class:`~gym_graphreset.ResetSelection` (masked path) it uses the mask. Every other line is shared, and
the draws are counter-based, so both paths give bit-identical trajectories on the CPU.
"""

from __future__ import annotations

from typing import Any

import torch

from gym_graphreset.capture.host_transitions import host_transition
from gym_graphreset.core.inputs import check_real, inner_actions
from gym_graphreset.core.rng import counter_uniform
from gym_graphreset.core.selection import ResetSelection, assign_rows_, fill_rows_, options_reset_mask
from gym_graphreset.envs.gym_mujoco.tasks import HalfCheetahEnv

__all__ = ["ResetHeavyHalfCheetahEnv"]

HISTORY = 3
MAX_DELAY = 2


class ResetHeavyHalfCheetahEnv(HalfCheetahEnv):
    """HalfCheetah with manager-style reset, reward and observation terms (see the module docstring).

    Args:
        num_envs: Worlds.
        max_episode_steps: Truncation horizon (short by default: resets are the point).
        early_reset_prob: Per-step probability of a random early termination.
        **kwargs: Passed to :class:`HalfCheetahEnv` (``device``, ``global_env_offset``...).
    """

    supports_reset_selection = True  # reset is overridden below with masked writes: re-declared
    batched_model_fields = ("geom_friction", "body_mass", "actuator_gainprm")
    reset_term_names = (
        "friction",
        "mass",
        "actuator_gain",
        "obs_history",
        "action_delay",
        "velocity_command",
        "pitch_command",
        "push_timer",
        "curriculum",
        "reward_log",
        "previous_action",
        "obs_noise",
        "early_reset",
    )

    def __init__(
        self, num_envs: int, *, max_episode_steps: int = 200, early_reset_prob: float = 0.02, **kwargs: Any
    ) -> None:
        self.early_reset_prob = check_real("early_reset_prob", early_reset_prob, low=0.0, high=1.0)
        super().__init__(num_envs, max_episode_steps=max_episode_steps, **kwargs)

    def _setup_task(self) -> None:
        """Views of the batched model fields and every term's buffer (before the first reset)."""
        import warp as wp

        super()._setup_task()
        dev, n, nu = self.device, self.num_envs, self.mjm.nu
        self.friction = wp.to_torch(self.m.geom_friction)  # (n, ngeom, 3) views of batched model fields
        self.mass = wp.to_torch(self.m.body_mass)
        self.gain = wp.to_torch(self.m.actuator_gainprm)
        self.base_friction, self.base_mass, self.base_gain = (
            t[0].clone() for t in (self.friction, self.mass, self.gain)
        )
        obs_dim = super()._observe().shape[1]
        self.history = torch.zeros(n, HISTORY, obs_dim, device=dev)
        self.delay_buf = torch.zeros(n, MAX_DELAY + 1, nu, device=dev)
        self.delay = torch.zeros(n, dtype=torch.long, device=dev)
        self.target_vel = torch.zeros(n, device=dev)
        self.target_pitch = torch.zeros(n, device=dev)
        self.push_timer = torch.zeros(n, dtype=torch.long, device=dev)
        self.level = torch.zeros(n, device=dev)
        self.reward_log = torch.zeros(n, 9, device=dev)
        self.prev_action = torch.zeros(n, nu, device=dev)
        self.noise_scale = torch.zeros(n, device=dev)
        self.episode_return = torch.zeros(n, device=dev)
        self.curriculum_updates = 0  # host-side: advanced by a host transition
        self._ids = torch.arange(MAX_DELAY + 1, device=dev)
        self._all_sel = ResetSelection(n, dev)
        self._all_sel.mask.fill_(True)

    # ------------------------------------------------------------------ draws

    def _draw(self, stream: int, width: int, low: float, high: float) -> torch.Tensor:
        """Counter-based uniform draws for this episode of every row, ``(n, width)``."""
        return counter_uniform(self.seed, self.env_ids, self.episode, width, stream=100 + stream, low=low, high=high)

    def _step_key(self) -> torch.Tensor:
        """A counter per (episode, step within the episode), for draws made every step."""
        return self.episode * 65536 + self.elapsed

    def _step_draw(self, stream: int) -> torch.Tensor:
        """One uniform per row, keyed by (episode, step within the episode)."""
        return counter_uniform(self.seed, self.env_ids, self._step_key(), 1, stream=200 + stream)[:, 0]

    # ------------------------------------------------------------------ reset terms

    def _rows(self, selection: Any) -> Any:
        """What each term is given: the selection itself, or row ids derived from the mask (a host sync)."""
        if isinstance(selection, ResetSelection):
            return selection
        return selection.nonzero().flatten()  # the manager-style per-term id derivation

    def _reset_terms(self, selection: Any) -> None:
        n = self.num_envs
        ng, nb, na = self.friction.shape[1], self.mass.shape[1], self.gain.shape[1]
        scale = torch.ones(n, ng, 3, device=self.device)
        scale[:, :, 0] = self._draw(0, ng, 0.5, 1.25)  # sliding friction only
        assign_rows_(self.friction, self._rows(selection), self.base_friction * scale)
        assign_rows_(self.mass, self._rows(selection), self.base_mass * self._draw(1, nb, 0.8, 1.2))
        gain = self.base_gain.expand(n, na, -1).clone()
        gain[:, :, 0] = gain[:, :, 0] * self._draw(2, na, 0.9, 1.1)
        assign_rows_(self.gain, self._rows(selection), gain)
        fill_rows_(self.history, self._rows(selection), 0.0)
        fill_rows_(self.delay_buf, self._rows(selection), 0.0)
        assign_rows_(self.delay, self._rows(selection), (self._draw(3, 1, 0, MAX_DELAY + 1)[:, 0]).long())
        assign_rows_(self.target_vel, self._rows(selection), self._draw(4, 1, 0.0, 3.0)[:, 0] * (0.5 + self.level))
        assign_rows_(self.target_pitch, self._rows(selection), self._draw(5, 1, -0.2, 0.2)[:, 0])
        assign_rows_(self.push_timer, self._rows(selection), self._draw(6, 1, 20, 60)[:, 0].long())
        rows = self._rows(selection)
        promoted = (self.episode_return > 100 * (1 + self.level)).float()
        assign_rows_(self.level, rows, (self.level + 0.1 * promoted).clamp(max=1.0))
        assign_rows_(self.episode_return, rows, torch.zeros_like(self.episode_return))
        host_transition(self._count_curriculum_update, name="curriculum_update")
        fill_rows_(self.reward_log, self._rows(selection), 0.0)
        fill_rows_(self.prev_action, self._rows(selection), 0.0)
        assign_rows_(self.noise_scale, self._rows(selection), self._draw(7, 1, 0.0, 0.05)[:, 0])

    def _count_curriculum_update(self) -> None:
        self.curriculum_updates += 1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the physics of the selected worlds, then every reset term on the same rows, then observe."""
        self.keys.reseed(seed)
        mask = options_reset_mask(options, self._all)
        reset_mask = (options or {}).get("reset_mask")
        with self._on_stream():
            self._masked_reset(mask)
            if reset_mask is None:
                self._reset_terms(self._all_sel)
            elif isinstance(reset_mask, ResetSelection):
                self._reset_terms(reset_mask)
            else:
                self._reset_terms(mask)  # a bool mask: each term derives its row ids (the selected path)
            return self._observe(), {}

    # ------------------------------------------------------------------ step

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Delay the action, push on the interval, step the physics, compute the reward terms."""
        actions = inner_actions(actions, self.device)
        with self._on_stream():
            self.delay_buf.copy_(
                torch.cat((actions.to(self.device, torch.float32).unsqueeze(1), self.delay_buf[:, :-1]), dim=1)
            )
            pick = (self._ids.unsqueeze(0) == self.delay.unsqueeze(1)).float().unsqueeze(-1)
            delayed = (self.delay_buf * pick).sum(dim=1)
            self.push_timer.sub_(1)
            push = self.push_timer <= 0
            self.qvel[:, 0].add_(torch.where(push, (self._step_draw(0) - 0.5) * 2.0, 0.0))
            self.push_timer.copy_(torch.where(push, 40, self.push_timer))
        _, _, _, truncated, info = super().step(delayed)
        with self._on_stream():
            rewards = self._reward_terms(delayed)
            reward = rewards.sum(dim=1)
            self.reward_log.add_(rewards)
            self.episode_return.add_(reward)
            self.prev_action.copy_(delayed)
            pitch = self.qpos[:, 2]
            terminated = (pitch.abs() > 1.2) | (self._step_draw(1) < self.early_reset_prob)
            self.history.copy_(torch.cat((super()._observe().unsqueeze(1), self.history[:, :-1]), dim=1))
            return self._observe(), reward, terminated, truncated, info

    def _reward_terms(self, action: torch.Tensor) -> torch.Tensor:
        vel = self.qvel[:, 0]
        terms = (
            torch.exp(-(vel - self.target_vel).square()),  # velocity tracking
            0.5 * torch.exp(-(self.qpos[:, 2] - self.target_pitch).square() / 0.05),  # pitch tracking
            -0.1 * action.square().sum(dim=1),  # control cost
            -0.01 * (action - self.prev_action).square().sum(dim=1),  # action rate
            -0.05 * self.qvel[:, 1].square(),  # vertical velocity
            -1e-3 * self.qvel[:, 3:].square().sum(dim=1),  # joint velocities
            -1e-2 * self.qvel[:, 2].square(),  # pitch rate
            0.1 * torch.ones_like(vel),  # alive
            -0.1 * (self.qpos[:, 1] - self.init_qpos[1]).abs(),  # height deviation
        )
        return torch.stack(terms, dim=1)

    def _observe(self) -> Any:
        base = super()._observe()
        noise = counter_uniform(
            self.seed, self.env_ids, self._step_key(), base.shape[1], stream=300, low=-1.0, high=1.0
        )
        commands = torch.stack((self.target_vel, self.target_pitch), dim=1)
        policy = torch.cat((base + noise * self.noise_scale.unsqueeze(1), self.history.flatten(1), commands), dim=1)
        privileged = torch.stack((self.friction[:, 0, 0], self.mass[:, 1], self.gain[:, 0, 0]), dim=1)
        return {"policy": policy, "critic": torch.cat((base, commands, privileged), dim=1)}
