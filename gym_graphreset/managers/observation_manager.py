"""The observation manager: ordered groups of terms, each with noise, clip, scale, delay and history.

Noise comes from the step block of the task's draws; delay and history buffers restart through the reset
mask, and an observation made at a reset fills only the reset rows' buffers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from gym_graphreset.managers.binding import bind
from gym_graphreset.managers.draws import DrawBlock
from gym_graphreset.managers.history import CircularBuffer, DelayBuffer
from gym_graphreset.managers.protocols import StatefulTerm
from gym_graphreset.managers.terms import GaussianNoise, ObsGroup, ObsTerm, UniformNoise

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["ObservationManager"]


class _ObsTermState:
    """One observation term, bound, with its noise words, delay and history buffers."""

    def __init__(self, env: ManagerBasedEnv, group: str, name: str, term: ObsTerm, corrupt: bool, block: DrawBlock):
        self.name, self.term = name, term
        self.call = bind(env, term.func, term.params, f"observations[{group!r}][{name!r}]")
        self.term_reset = self.call.reset if isinstance(self.call, StatefulTerm) else None
        sample = self.call()
        if not isinstance(sample, torch.Tensor) or sample.dim() != 2 or sample.shape[0] != env.num_envs:
            got = tuple(sample.shape) if isinstance(sample, torch.Tensor) else type(sample).__name__
            raise ValueError(
                f"observations[{group!r}][{name!r}]: {getattr(term.func, '__name__', term.func)!r} must return "
                f"a ({env.num_envs}, k) tensor, got {got}"
            )
        if sample.is_complex():
            raise ValueError(
                f"observations[{group!r}][{name!r}]: {getattr(term.func, '__name__', term.func)!r} returned "
                f"{sample.dtype}; an observation is real (floating, integer or bool; the group is float32)"
            )
        self.width = int(sample.shape[1])
        scales = term.scale
        if isinstance(scales, tuple) and len(scales) not in (1, self.width):
            raise ValueError(
                f"observations[{group!r}][{name!r}]: `scale` has {len(scales)} entries; the term is "
                f"{self.width} wide (give one scale, or one per column)"
            )
        self.noise = term.noise if corrupt else None
        self.words: slice | None = None
        if self.noise is not None:
            self.words = block.allocate(f"observations.{group}.{name}", self.width * self.noise.words_per_element)
        dev = env.device
        self.scale = None if term.scale is None else torch.tensor(term.scale, dtype=torch.float32, device=dev)
        self.delay = DelayBuffer(env.num_envs, term.delay, self.width, dev, torch.float32) if term.delay else None
        self.history = (
            CircularBuffer(env.num_envs, term.history_length, self.width, dev, torch.float32)
            if term.history_length
            else None
        )
        self.out_width = self.width * max(1, term.history_length)

    def __call__(self, u: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        x = self.call().float()  # the space's dtype (a no-op on float32)
        noise, words = self.noise, self.words
        if isinstance(noise, UniformNoise) and words is not None:
            half, centre = 0.5 * (noise.high - noise.low), 0.5 * (noise.high + noise.low)
            x = x + (2.0 * u[:, words] - 1.0) * half
            if centre != 0.0:
                x = x + centre
        elif isinstance(noise, GaussianNoise) and words is not None:
            w = u[:, words]
            u1, u2 = w[:, : self.width] + 2.0**-25, w[:, self.width :]
            x = x + (noise.mean + noise.std * torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * torch.pi * u2))
        if self.term.clip is not None:
            x = x.clamp(*self.term.clip)
        if self.scale is not None:
            x = x * self.scale
        if self.delay is not None:
            x = self.delay.delayed(x, rows)
        if self.history is not None:
            x = self.history.push(x, rows).flatten(1)
        return x

    def restart(self, rows: torch.Tensor) -> None:
        if self.term_reset is not None:
            self.term_reset(rows)
        for buf in (self.delay, self.history):
            if buf is not None:
                buf.restart(rows)


class ObservationManager:
    """Observation groups: ordered terms, noise from the step block, clip, scale, delay and history.

    ``layout[group][term]`` is the term's column slice in its group's concatenated output.
    """

    def __init__(self, env: ManagerBasedEnv, block: DrawBlock) -> None:
        self.env = env
        self.groups: dict[str, tuple[ObsGroup, list[_ObsTermState]]] = {}
        self.layout: dict[str, dict[str, slice]] = {}
        for gname, group in env.cfg.observations.items():
            states = [
                _ObsTermState(env, gname, tname, term, group.enable_corruption, block)
                for tname, term in group.terms.items()
            ]
            self.groups[gname] = (group, states)
            cols, start = {}, 0
            for s in states:
                cols[s.name] = slice(start, start + s.out_width)
                start += s.out_width
            self.layout[gname] = cols

    def compute(self, u: torch.Tensor, rows: torch.Tensor | None = None) -> dict[str, Any]:
        """Every group's observation (``u``: the step-block draws), in tensors of its own.

        ``rows``: the mask of a reset: only those rows' delay and history buffers take this observation.
        A returned tensor is never a buffer the env or a term writes later (the action, a view of the
        state, a command, a history or delay ring): a concatenated group is a new tensor, and so is each
        term of a group of terms (a copy when no clip made one), so what a step returned stays valid.
        """
        clip = self.env.cfg.obs_clip
        out: dict[str, Any] = {}
        for gname, (group, states) in self.groups.items():
            parts = [s(u, rows) for s in states]
            if group.concatenate:
                value: Any = torch.cat(parts, dim=1)
                for c in (group.clip, clip):
                    if c is not None:
                        value = value.clamp(-c, c)
            else:
                value = {s.name: p for s, p in zip(states, parts, strict=True)}
                clips = [c for c in (group.clip, clip) if c is not None]
                for c in clips:
                    value = {k: v.clamp(-c, c) for k, v in value.items()}
                if not clips:  # a term may hand out a live buffer (the action, a view of qvel, a ring): copy it
                    value = {k: v.clone() for k, v in value.items()}
            out[gname] = value
        return out

    def reset(self, rows: torch.Tensor) -> None:
        """The delay and history buffers of the rows of ``rows`` start over; stateful term classes forget them."""
        for _, states in self.groups.values():
            for s in states:
                s.restart(rows)
