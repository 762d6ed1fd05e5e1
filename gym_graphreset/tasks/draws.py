"""Counter-based draws of a task: named word ranges in one hash pass per key, and collision-free streams.

A task draws from three blocks, each one hash pass of :func:`~gym_graphreset.core.rng.counter_bits` per use:

- ``reset`` (stream ``rng_stream``), keyed by the row's episode index: every draw a new episode needs;
- ``step`` (stream ``rng_stream + 10``), keyed by (episode, step within the episode): per-step draws
  (:func:`step_bits`: every 64-bit episode and step has words of its own);
- ``startup`` (stream ``rng_stream + 20``), keyed by the world alone: per-world randomisation.

Inside a block, every term that draws gets its own range of words, allocated at construction in the
managers' order (reset block: reset events, commands, interval timers; step block: commands, interval
events, observation noise) and each term's declaration order. Word ``i`` of a block is a pure function of
(seed, global env index, key, stream, ``i``), so a term's draws do not depend on how many words other terms
take after it, on ``num_envs``, or on which rows reset. Terms that want draws of their own outside these
blocks ask :class:`StreamAllocator` for a stream: one per name, never shared.
"""

from __future__ import annotations

import torch

from gym_graphreset.core.rng import (
    _K_ENV,
    _K_SEED,
    _MASK32,
    EpisodeKeys,
    _combine,
    _high_key,
    _mix32,
    bits_to_uniform,
    counter_bits,
)

__all__ = ["DrawBlock", "StreamAllocator", "step_bits"]

STEP_KEY_STRIDE = 65536
"""Below ``2**16`` episodes and steps, the step words are those of the 32-bit key ``episode * 65536 + step``."""

_LOW16 = 0xFFFF


def step_bits(
    seed: torch.Tensor, env_ids: torch.Tensor, episode: torch.Tensor, step: torch.Tensor, count: int, *, stream: int
) -> torch.Tensor:
    """``count`` 32-bit words per row, ``(n, count)`` int64, keyed by (episode, step): both full 64-bit.

    The hash chain of :func:`~gym_graphreset.core.rng.hash_keys` with the episode round taking the word
    ``(episode mod 2**16) * 2**16 + step mod 2**16``; when ``episode >> 16`` or ``step >> 16`` is not zero
    (a negative episode included), four more rounds take their two 32-bit words each. So no two
    (episode, step) pairs share their hash input, and every pair with ``0 <= episode, step < 2**16`` keeps
    the words of ``counter_bits(..., episode * 65536 + step, ...)`` (recorded rollouts still hold).
    """
    seed_key = _high_key(seed, _K_SEED)
    row_key = seed_key ^ _high_key(env_ids, _K_ENV)
    h = _mix32((seed & _MASK32) ^ _mix32((seed >> 32) & _MASK32) ^ stream)
    h = _combine(h.expand(env_ids.shape), env_ids, seed_key)
    h = _combine(h, ((episode & _LOW16) << 16) | (step & _LOW16), row_key)
    episode_high, step_high = episode >> 16, step >> 16  # arithmetic shifts: -1 stays -1 (not zero)
    wide = h
    for word in (episode_high, episode_high >> 32, step_high, step_high >> 32):
        wide = _combine(wide, word & _MASK32, row_key)
    h = torch.where((episode_high == 0) & (step_high == 0), h, wide)
    draws = torch.arange(count, device=env_ids.device)
    return _combine(h.unsqueeze(-1), draws.unsqueeze(0), row_key.unsqueeze(-1))


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

        Keyed by ``key`` ``(num_envs,)`` alone, or with ``step`` by (episode ``key``, ``step``) through
        :func:`step_bits`.
        """
        if step is None:
            bits = counter_bits(keys.seed, keys.env_ids, key, self.size, stream=self.stream)
        else:
            bits = step_bits(keys.seed, keys.env_ids, key, step, self.size, stream=self.stream)
        return bits_to_uniform(bits)

    def layout(self) -> dict[str, tuple[int, int]]:
        """Owner -> ``(first word, end)``: which words each term reads (printed by ``env.describe()``)."""
        return {owner: (s.start, s.stop) for owner, s in self.ranges.items()}


class StreamAllocator:
    """Hands out counter-RNG streams by name: the same name gets the same stream, two names never share one.

    Streams start above every block of the task (``base``: the task's highest block stream) and step by
    ``STRIDE``, so that neither a stream nor :func:`~gym_graphreset.core.rng.counter_normal`'s
    ``stream + 1000`` meets a block, a block's ``+ 1000`` or another allocation's. A stream of ``2**32`` or
    more folds onto a smaller one in the hash, so allocation stops (``RuntimeError``) before ``stream + 1000``
    reaches ``2**32``.
    """

    STRIDE = 2048
    NORMAL_OFFSET = 1000
    """:func:`~gym_graphreset.core.rng.counter_normal` draws from ``stream + NORMAL_OFFSET``."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.streams: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        """The stream of ``name`` (allocated on first use)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a stream name must be a non-empty str, got {name!r}")
        if name not in self.streams:
            stream = self.base + self.STRIDE * (len(self.streams) + 1)
            if stream + self.NORMAL_OFFSET >= 2**32:
                raise RuntimeError(
                    f"no stream left for {name!r}: {len(self.streams)} names hold the streams below 2**32 "
                    "(larger ones fold onto smaller ones in the hash)"
                )
            self.streams[name] = stream
        return self.streams[name]
