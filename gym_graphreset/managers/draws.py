"""Counter-based draws of a task: named word ranges in one hash pass per key, and collision-free streams.

A task draws from three blocks, each one hash pass of :func:`~gym_graphreset.core.rng.counter_bits` per use:

- ``reset`` (stream ``rng_stream``), keyed by the row's episode index: every draw a new episode needs;
- ``step`` (stream ``rng_stream + 10``), keyed by (episode, step within the episode): per-step draws
  (:func:`~gym_graphreset.core.rng.step_bits`: every 64-bit episode and step has words of its own);
- ``startup`` (stream ``rng_stream + 20``), keyed by the world alone: per-world randomisation.

Inside a block, every term that draws gets its own range of words, allocated at construction in the
managers' order (reset block: reset events, commands, interval timers; step block: commands, interval
events, observation noise) and each term's declaration order. Word ``i`` of a block is a pure function of
(seed, global env index, key, stream, ``i``), so a term's draws do not depend on how many words other terms
take after it, on ``num_envs``, or on which rows reset. Terms that want draws of their own outside these
blocks ask :class:`~gym_graphreset.core.rng.StreamAllocator` for a stream: one per name, never shared.
"""

from __future__ import annotations

import torch

from gym_graphreset.core.rng import EpisodeKeys, bits_to_uniform, prefixed_bits, prefixed_step_bits

__all__ = ["DrawBlock", "span"]


def span(u: torch.Tensor, lo: float | torch.Tensor, hi: float | torch.Tensor) -> torch.Tensor:
    """``lo + (hi - lo) * u``: uniforms in ``[0, 1)`` mapped onto ``[lo, hi)``."""
    return lo + (hi - lo) * u


class DrawBlock:
    """Word ranges of one block, allocated by name; :meth:`draw` makes every word of the block in one pass."""

    def __init__(self, name: str, stream: int) -> None:
        self.name, self.stream = name, stream
        self.ranges: dict[str, slice] = {}
        self.size = 0
        self._frozen = False

    def allocate(self, owner: str, words: int) -> slice:
        """The next ``words`` words of the block for ``owner`` (a unique name, e.g. ``"events.push_robot"``)."""
        if self._frozen:
            raise RuntimeError(f"draw block {self.name!r} is frozen: allocate every range at construction")
        if owner in self.ranges:
            raise ValueError(f"draw block {self.name!r}: {owner!r} already has words {self.ranges[owner]}")
        if words < 0:
            raise ValueError(f"draw block {self.name!r}: {owner!r} asked for {words} words (must be >= 0)")
        self.ranges[owner] = slice(self.size, self.size + words)
        self.size += words
        return self.ranges[owner]

    def freeze(self) -> None:
        """No more ranges (the managers are built)."""
        self._frozen = True

    def draw(self, keys: EpisodeKeys, key: torch.Tensor, step: torch.Tensor | None = None) -> torch.Tensor:
        """Uniform ``[0, 1)`` words ``(num_envs, size)`` of every row (no host read).

        Keyed by ``key`` ``(num_envs,)`` alone (:func:`~gym_graphreset.core.rng.counter_bits`' words), or with
        ``step`` by (episode ``key``, ``step``) (:func:`~gym_graphreset.core.rng.step_bits`' words).
        """
        prefix = keys.prefix(self.stream)  # the seed, stream and env rounds, kept by ``keys``
        if step is None:
            bits = prefixed_bits(prefix, key, self.size)
        else:
            bits = prefixed_step_bits(prefix, key, step, self.size)
        return bits_to_uniform(bits)

    def layout(self) -> dict[str, tuple[int, int]]:
        """Owner -> ``(first word, end)``: which words each term reads (printed by ``env.describe()``)."""
        return {owner: (s.start, s.stop) for owner, s in self.ranges.items()}
