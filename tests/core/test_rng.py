"""Counter-based draws: pure functions of (seed, env, episode, draw), well distributed."""

from __future__ import annotations

import pytest
import torch

from gym_graphreset.core.rng import counter_normal, counter_uniform, hash_keys

SEED = torch.tensor(1234)


def _ids(n: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(n, device=device), torch.zeros(n, dtype=torch.long, device=device)


@pytest.mark.parametrize("fn", [counter_uniform, counter_normal])
def test_draws_do_not_depend_on_the_batch(fn) -> None:
    """Row i's draws are the same whether drawn alone or among 1000 rows."""
    ids, ep = _ids(1000)
    full = fn(SEED, ids, ep, 5)
    some = fn(SEED, ids[[3, 500, 999]], ep[:3], 5)
    assert torch.equal(full[[3, 500, 999]], some)


def test_draws_change_with_every_key() -> None:
    ids, ep = _ids(64)
    base = counter_uniform(SEED, ids, ep, 4)
    assert not torch.equal(base, counter_uniform(SEED + 1, ids, ep, 4))
    assert not torch.equal(base, counter_uniform(SEED, ids, ep + 1, 4))
    assert not torch.equal(base, counter_uniform(SEED, ids + 64, ep, 4))
    assert not torch.equal(base, counter_uniform(SEED, ids, ep, 4, stream=1))
    assert torch.unique(base).numel() == base.numel()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_uniform_bounds_and_moments(dtype: torch.dtype) -> None:
    ids, ep = _ids(50_000)
    u = counter_uniform(SEED, ids, ep, 2, low=-0.1, high=0.1, dtype=dtype)
    assert u.dtype == dtype and u.min() >= -0.1 and u.max() < 0.1
    assert abs(u.mean().item()) < 0.002  # 5 sigma of the mean: 0.1/sqrt(3)/sqrt(1e5) * 5
    assert abs(u.std().item() - 0.2 / 12**0.5) < 0.002


def test_normal_moments_and_tails() -> None:
    ids, ep = _ids(100_000)
    n = counter_normal(SEED, ids, ep, 2, std=0.5)
    assert abs(n.mean().item()) < 0.01 and abs(n.std().item() - 0.5) < 0.01
    frac_beyond_2sd = (n.abs() > 1.0).float().mean().item()
    assert abs(frac_beyond_2sd - 0.0455) < 0.003
    assert torch.isfinite(n).all()


MASK = 0xFFFFFFFF


def _mix(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK
    return x ^ (x >> 16)


def _ref_hash(seed: int, env: int, episode: int, draw: int, stream: int) -> int:
    """lowbias32 keyed by (seed, stream, env, episode, draw), in Python's unbounded ints: the reference.

    The high words of the seed and the env index, and the stream (hashed), key the rounds (zero keys below
    ``2**32`` on stream 0).
    """

    def combine(h: int, v: int, key: int) -> int:
        return _mix((((h ^ (v & MASK)) + 0x9E3779B9) & MASK) ^ key)

    stream_key = _mix((stream * 0x1B873593) & MASK)
    seed_key = ((((seed >> 32) & MASK) * 0x5BD1E995) & MASK) ^ stream_key
    row_key = seed_key ^ ((((env >> 32) & MASK) * 0xCC9E2D51) & MASK)
    h = _mix((seed & MASK) ^ _mix((seed >> 32) & MASK))
    return combine(combine(combine(h, env, seed_key), episode, row_key), draw, row_key)


def _hash_below_2_32(seed: int, env: int, episode: int, draw: int) -> int:
    """The hash of stream 0 for a seed and env index below ``2**32`` (no keys): these values are pinned."""

    def combine(h: int, v: int) -> int:
        return _mix(((h ^ (v & MASK)) + 0x9E3779B9) & MASK)

    return combine(combine(combine(_mix(seed), env), episode), draw)


@pytest.mark.parametrize("seed", [0, 1234, 2**32 - 1, 2**40 + 7, 2**63 - 1, -(2**63)])
@pytest.mark.parametrize("stream", [0, 1000])
def test_hash_matches_the_reference_bit_for_bit(seed: int, stream: int) -> None:
    """The int64 tensor hash is lowbias32 exactly: any change to the arithmetic changes every draw; below
    ``2**32`` (seed and env index) stream 0 is the keyless chain, value for value."""
    env_ids = torch.tensor([0, 1, 4095, 2**31 + 5, 2**32, 2**62 + 3])
    episode = torch.tensor([-1, 0, 7, 2**33, 5, 1])  # -1: before the first reset
    got = hash_keys(torch.tensor(seed), env_ids, episode, torch.arange(3), stream)
    rows = list(zip(env_ids.tolist(), episode.tolist(), strict=True))
    assert got.tolist() == [[_ref_hash(seed % 2**64, e, p, d, stream) for d in range(3)] for e, p in rows]
    if 0 <= seed < 2**32 and stream == 0:
        small = [[_hash_below_2_32(seed, e, p, d) for d in range(3)] for e, p in rows if e < 2**32]
        assert got[: len(small)].tolist() == small


def test_high_words_never_replay_a_smaller_seed_or_env() -> None:
    """A seed or env index of ``2**32`` or more gives draws of its own, also where the low words were
    chosen to cancel the high ones: ``2**32 + mix(1)`` against seed 0, env ``2**32 + i`` against env
    ``i``, and the seeds ``2**63`` and ``2**64 + 1`` against 1 (whole-population draws over episodes)."""
    from gym_graphreset.core.rng import fold_seed

    ids, ep = _ids(4)
    draws = torch.arange(4)

    def bits(seed: int, env_ids: torch.Tensor, episodes: torch.Tensor = ep) -> torch.Tensor:
        return hash_keys(torch.tensor(fold_seed(seed)), env_ids, episodes, draws, 0)

    assert not torch.equal(bits(2**32 + _mix(1), ids), bits(0, ids))
    for seed in (2**32 + _mix(1), 2**32, 7):
        for episode in range(3):
            assert not torch.equal(bits(seed, ids + 2**32, ep + episode), bits(seed, ids, ep + episode))
    for seed in (2**63, 2**64 + 1, 2**64 + 2**63 + 1, 2**127 + 1):
        assert not torch.equal(bits(seed, ids), bits(1, ids)), seed
    assert fold_seed(2**64 - 1) == -1 and fold_seed(2**63) == -(2**63)  # every bit below 2**64 kept


@pytest.mark.parametrize("stream", [1, 2, 10, 20, 1000, 2048 + 20])
@pytest.mark.parametrize("seed", [0, 1, 1234, 2**31 + 7])
def test_seed_and_stream_are_independent(seed: int, stream: int) -> None:
    """Stream ``k`` of seed ``s`` is not stream 0 of seed ``s ^ k`` (nor of ``s + k``, ``s - k``), nor stream ``k'``
    of another seed with the same ``s ^ k``: a seed's reset draws are no other seed's draws of a named stream."""
    ids, ep = _ids(16)
    draws = torch.arange(4)

    def bits(s: int, k: int) -> torch.Tensor:
        return hash_keys(torch.tensor(s), ids, ep, draws, k)

    mine = bits(seed, stream)
    for other in {seed ^ stream, seed + stream, abs(seed - stream)}:
        assert not torch.equal(mine, bits(other, 0)), (seed, stream, other)
        assert not (mine.unsqueeze(-1) == bits(other, 0).flatten()).any(dim=-1).all(), "a shifted copy"
    assert not torch.equal(mine, bits(seed ^ stream ^ (stream + 1), stream + 1))  # the same seed ^ stream


def test_stream_zero_is_unchanged() -> None:
    """Stream 0 (the engine's reset draws, which recorded rollouts hold) keeps the keyless chain's values."""
    ids, ep = _ids(4)
    got = hash_keys(torch.tensor(1234), ids, ep, torch.arange(2), 0)
    assert got.tolist() == [[_hash_below_2_32(1234, e, 0, d) for d in range(2)] for e in range(4)]


def test_seed_above_32_bits_matters() -> None:
    ids, ep = _ids(8)
    assert not torch.equal(
        counter_uniform(torch.tensor(1), ids, ep, 2), counter_uniform(torch.tensor(1 + 2**40), ids, ep, 2)
    )


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")
def test_cpu_and_cuda_agree_bitwise() -> None:
    ids, ep = _ids(4096)
    cpu = counter_uniform(SEED, ids, ep, 3)
    gpu = counter_uniform(SEED.cuda(), ids.cuda(), ep.cuda(), 3)
    assert torch.equal(cpu, gpu.cpu())


@pytest.mark.parametrize("seed", [0, 2**40 + 7, -(2**63)])
@pytest.mark.parametrize("stream", [0, 2058])
def test_words_from_a_row_prefix_are_the_seeds_words(seed: int, stream: int) -> None:
    """``prefixed_bits`` / ``prefixed_step_bits`` from ``row_prefix(seed, rows, stream)`` give exactly the words of
    ``counter_bits`` / ``step_bits``, the high words of episodes and steps included."""
    from gym_graphreset.core.rng import counter_bits, prefixed_bits, prefixed_step_bits, row_prefix, step_bits

    s, env_ids = torch.tensor(seed), torch.tensor([0, 1, 2**32 + 9, 2**62 + 3])
    episode, step = torch.tensor([-1, 0, 70000, 2**33]), torch.tensor([0, 65536, 5, -3])
    prefix = row_prefix(s, env_ids, stream)
    assert torch.equal(prefixed_bits(prefix, episode, 5), counter_bits(s, env_ids, episode, 5, stream=stream))
    assert torch.equal(
        prefixed_step_bits(prefix, episode, step, 5), step_bits(s, env_ids, episode, step, 5, stream=stream)
    )
