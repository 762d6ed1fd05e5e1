"""Counter-based reset draws: each value is a pure function of (seed, env, episode, draw).

Draws depend on neither ``num_envs`` nor on which other rows reset, so the selected-row and masked
reset paths produce bit-identical trajectories, and a captured graph needs no generator bookkeeping.
The hash is 32-bit integer arithmetic carried in int64 tensors (no overflow), so CPU and CUDA agree
bit for bit. The mixer is Chris Wellons' ``lowbias32`` (a well-tested 32-bit avalanche hash).

All 64 bits of the seed and of the env index count. The low words go through the hash chain; the high
words key its rounds (a key XOR-ed in after each round's add, zero when the high words are), so a seed
or an env index of ``2**32`` or more never replays a smaller one, and below ``2**32`` every value is
what it was without the keys.

The stream keys the rounds too, by a hash of its own (``lowbias32(stream * K)``, zero only for stream 0),
so seed and stream are independent: no seed's draws are another seed's draws of a stream (with the
stream XOR-ed into the seed word, ``(seed s, stream k)`` drew what ``(seed s ^ k, stream 0)`` drew), and
no two streams of seeds below ``2**32`` share a key. Stream 0 (the engine's reset draws) is unchanged.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import torch

_MASK64 = (1 << 64) - 1

__all__ = [
    "STEP_KEY_STRIDE",
    "StreamAllocator",
    "fold_seed",
    "step_bits",
    "EpisodeKeys",
    "bits_to_normal",
    "bits_to_uniform",
    "counter_bits",
    "counter_normal",
    "counter_uniform",
    "hash_keys",
    "prefixed_bits",
    "prefixed_step_bits",
    "row_prefix",
]

_MASK32 = 0xFFFFFFFF
_M1 = 0x7FEB352D
_M2 = 0x846CA68B
_GOLDEN = 0x9E3779B9
_K_SEED = 0x5BD1E995  # odd: multiplying by it mod 2**32 is a bijection with 0 -> 0
_K_ENV = 0xCC9E2D51
_K_STREAM = 0x1B873593  # odd: a bijection on streams mod 2**32, 0 -> 0


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``(x * c) mod 2**32`` for ``0 <= x, c < 2**32`` in int64, in two kernels.

    A ``c`` of ``2**31`` or more is taken as ``c - 2**32`` (the same residue mod ``2**32``): either way the
    product's magnitude stays below ``2**63``, and ``& 0xFFFFFFFF`` of the two's complement int64 is the
    residue.
    """
    return (x * (c if c < 2**31 else c - 2**32)) & _MASK32


def _mix32(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = _mul32(x, _M1)
    x = x ^ (x >> 15)
    x = _mul32(x, _M2)
    return x ^ (x >> 16)


def _combine(h: torch.Tensor, v: torch.Tensor | int, key: torch.Tensor) -> torch.Tensor:
    return _mix32((((h ^ (v & _MASK32)) + _GOLDEN) & _MASK32) ^ key)


def _high_key(x: torch.Tensor, k: int) -> torch.Tensor:
    """The high 32 bits of int64 ``x`` (two's complement) times the odd ``k``, mod ``2**32``: 0 iff they are 0."""
    return _mul32((x >> 32) & _MASK32, k)


def _stream_key(stream: int) -> int:
    """The round key of ``stream`` (a Python int: the same for every row): ``lowbias32(stream * K)``, 0 iff stream 0."""
    x = (int(stream) * _K_STREAM) & _MASK32
    x ^= x >> 16
    x = (x * _M1) & _MASK32
    x ^= x >> 15
    x = (x * _M2) & _MASK32
    return x ^ (x >> 16)


def _chain_start(seed: torch.Tensor, stream: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The chain's first value (from the seed's two words) and the seed-and-stream key of every round."""
    seed_key = _high_key(seed, _K_SEED) ^ _stream_key(stream)
    return _mix32((seed & _MASK32) ^ _mix32((seed >> 32) & _MASK32)), seed_key


def hash_keys(
    seed: torch.Tensor, env_ids: torch.Tensor, episode: torch.Tensor, draws: torch.Tensor, stream: int
) -> torch.Tensor:
    """32-bit hashes of shape ``(len(env_ids), len(draws))``, each in ``[0, 2**32)`` as int64.

    Args:
        seed: int64 scalar tensor (kept on the device so a captured graph sees seed changes).
        env_ids: int64 ``(n,)`` global env indices.
        episode: int64 ``(n,)`` episode index of each row (its low 32 bits count).
        draws: int64 ``(k,)`` draw indices within the episode.
        stream: an int separating independent uses (e.g. qpos noise vs qvel noise); it keys every round
            (its low 32 bits count), independently of the seed.
    """
    return _prefixed_hash(row_prefix(seed, env_ids, stream), episode, draws)


def row_prefix(seed: torch.Tensor, env_ids: torch.Tensor, stream: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's hash chain after the seed, stream and env rounds, and its round key: ``(h, row_key)``, ``(n,)``.

    Every draw of (``seed``, ``stream``) for these rows starts from it, whatever the episode, step or draw:
    :class:`EpisodeKeys` keeps it per stream (:meth:`EpisodeKeys.prefix`) so that a step does not redo it.
    """
    h, seed_key = _chain_start(seed, stream)  # the key: a high seed word or a stream is never undone by a low word
    row_key = seed_key ^ _high_key(env_ids, _K_ENV)
    return _combine(h.expand(env_ids.shape), env_ids, seed_key), row_key


def _prefixed_hash(
    prefix: tuple[torch.Tensor, torch.Tensor], episode: torch.Tensor, draws: torch.Tensor
) -> torch.Tensor:
    h, row_key = prefix
    h = _combine(h, episode, row_key)
    return _combine(h.unsqueeze(-1), draws.unsqueeze(0), row_key.unsqueeze(-1))


def prefixed_bits(prefix: tuple[torch.Tensor, torch.Tensor], episode: torch.Tensor, count: int) -> torch.Tensor:
    """:func:`counter_bits` from a :func:`row_prefix` of its seed, rows and stream (the same words)."""
    return _prefixed_hash(prefix, episode, torch.arange(count, device=episode.device))


def counter_bits(
    seed: torch.Tensor, env_ids: torch.Tensor, episode: torch.Tensor, count: int, *, stream: int = 0
) -> torch.Tensor:
    """``count`` independent 32-bit words per row, ``(n, count)`` int64: one hash pass for many draws."""
    return hash_keys(seed, env_ids, episode, torch.arange(count, device=env_ids.device), stream)


def bits_to_uniform(
    bits: torch.Tensor, low: float = 0.0, high: float = 1.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Uniform in ``[low, high)`` from 32-bit words (24 random bits each)."""
    u = (bits >> 8).to(dtype) * (1.0 / 16777216.0)
    return low + (high - low) * u


def bits_to_normal(bits: torch.Tensor, std: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Normal draws from pairs of 32-bit words (Box-Muller): ``bits[..., :k]`` and ``bits[..., k:]``."""
    k = bits.shape[-1] // 2
    u1 = ((bits[..., :k] >> 8).to(torch.float32) + 0.5) * (1.0 / 16777216.0)  # in (0, 1): no log(0)
    u2 = (bits[..., k : 2 * k] >> 8).to(torch.float32) * (1.0 / 16777216.0)
    return (std * torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * math.pi * u2)).to(dtype)


def counter_uniform(
    seed: torch.Tensor,
    env_ids: torch.Tensor,
    episode: torch.Tensor,
    size: int,
    *,
    stream: int = 0,
    low: float = 0.0,
    high: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Uniform draws in ``[low, high)`` of shape ``(n, size)``; 24 random bits (float32) or 53 (float64)."""
    if dtype == torch.float64:
        bits = counter_bits(seed, env_ids, episode, 2 * size, stream=stream)
        hi, lo = bits[:, :size] >> 5, bits[:, size:] >> 6
        u = (hi * 67108864 + lo).to(torch.float64) * (1.0 / 9007199254740992.0)
        return low + (high - low) * u
    return bits_to_uniform(counter_bits(seed, env_ids, episode, size, stream=stream), low, high, dtype)


def counter_normal(
    seed: torch.Tensor,
    env_ids: torch.Tensor,
    episode: torch.Tensor,
    size: int,
    *,
    stream: int = 0,
    std: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Normal draws ``N(0, std**2)`` of shape ``(n, size)`` (float32 Box-Muller: tails to ~5.9 sigma)."""
    return bits_to_normal(counter_bits(seed, env_ids, episode, 2 * size, stream=stream + 1000), std, dtype)


def fold_seed(seed: Any) -> int:
    """A non-negative int seed (any size, as Gymnasium accepts) as the 64-bit counter key, an int64 value.

    Seeds below ``2**64`` keep every bit (those of ``2**63`` or more as the int64 of the same bits, so
    every such seed has a key of its own); larger ones are hashed to 64 bits (BLAKE2b), so no seed is
    refused for its size and none maps onto another by a pattern of its bits.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"`seed` must be an int or None (non-negative, as in Gymnasium), got {seed!r}")
    key = int(seed)
    if key > _MASK64:
        digest = hashlib.blake2b(key.to_bytes((key.bit_length() + 7) // 8, "little"), digest_size=8).digest()
        key = int.from_bytes(digest, "little")
    return key - (1 << 64) if key >= 1 << 63 else key


class EpisodeKeys:
    """The per-row keys of counter-based reset draws, as persistent device tensors.

    ``seed`` (int64 scalar), ``env_ids`` (global env index of each row) and ``episode`` (episode index of
    each row, -1 before the first reset). Envs keep one and call :meth:`reseed` in ``reset(seed=...)``
    and :meth:`advance_` on the rows they reset; the tensors never move, so a graph can hold them.
    """

    def __init__(self, num_envs: int, device: torch.device | str, global_env_offset: int = 0) -> None:
        entropy = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
        self.seed = torch.tensor(entropy & 0x7FFFFFFFFFFFFFFF, device=device)
        self.env_ids = torch.arange(num_envs, dtype=torch.long, device=device) + int(global_env_offset)
        self.episode = torch.full((num_envs,), -1, dtype=torch.long, device=device)
        self._prefixes: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def reseed(self, seed: int | None) -> None:
        """Set the seed, refresh every kept :meth:`prefix` and restart episode numbering, all in place.

        ``None`` keeps the current stream.
        """
        if seed is None:
            return
        self.seed.fill_(fold_seed(seed))
        for stream, (h, row_key) in self._prefixes.items():
            fresh_h, fresh_key = row_prefix(self.seed, self.env_ids, stream)
            h.copy_(fresh_h)
            row_key.copy_(fresh_key)
        self.episode.fill_(-1)

    def prefix(self, stream: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows' :func:`row_prefix` of ``stream`` under the current seed, kept as persistent tensors.

        Made on the first call for a stream (outside a CUDA graph capture; during one it is made fresh and not
        kept, so no graph-pool tensor outlives the capture) and refreshed in place by :meth:`reseed`, so a graph
        that holds it draws from the new seed. A task env makes its draw blocks' prefixes at construction.
        """
        kept = self._prefixes.get(stream)
        if kept is not None:
            return kept
        made = row_prefix(self.seed, self.env_ids, stream)
        if self.seed.is_cuda and torch.cuda.is_current_stream_capturing():
            return made
        self._prefixes[stream] = made
        return made

    def advance_(self, mask: torch.Tensor) -> None:
        """Count a new episode on the rows of ``mask`` (no host read)."""
        self.episode.copy_(torch.where(mask, self.episode + 1, self.episode))


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
    return prefixed_step_bits(row_prefix(seed, env_ids, stream), episode, step, count)


def prefixed_step_bits(
    prefix: tuple[torch.Tensor, torch.Tensor], episode: torch.Tensor, step: torch.Tensor, count: int
) -> torch.Tensor:
    """:func:`step_bits` from a :func:`row_prefix` of its seed, rows and stream (the same words)."""
    h, row_key = prefix
    h = _combine(h, ((episode & _LOW16) << 16) | (step & _LOW16), row_key)
    episode_high, step_high = episode >> 16, step >> 16  # arithmetic shifts: -1 stays -1 (not zero)
    wide = h
    for word in (episode_high, episode_high >> 32, step_high, step_high >> 32):
        wide = _combine(wide, word & _MASK32, row_key)
    h = torch.where((episode_high == 0) & (step_high == 0), h, wide)
    draws = torch.arange(count, device=episode.device)
    return _combine(h.unsqueeze(-1), draws.unsqueeze(0), row_key.unsqueeze(-1))


class StreamAllocator:
    """Hands out counter-RNG streams by name: the same name gets the same stream, two names never share one.

    Streams start above ``base`` (the highest stream its owner draws from itself: the engine env's reset
    draws use stream 0, a task's blocks ``rng_stream`` to ``rng_stream + 20``) and step by ``STRIDE``, so
    that neither a stream nor :func:`counter_normal`'s ``stream + 1000`` meets the owner's streams, their
    ``+ 1000`` or another allocation's. A stream of ``2**32`` or more folds onto a smaller one in the hash,
    so allocation stops (``RuntimeError``) before ``stream + 1000`` reaches ``2**32``.
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
