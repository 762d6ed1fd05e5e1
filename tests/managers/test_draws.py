"""The task's draws: step words keyed by the full 64-bit (episode, step), drawn from the kept per-stream prefix;
named streams never collide."""

from __future__ import annotations

import itertools

import pytest
import torch

from gym_graphreset.core.rng import EpisodeKeys, StreamAllocator, bits_to_uniform, counter_bits, step_bits
from gym_graphreset.managers.draws import DrawBlock

N, WORDS, STREAM = 3, 8, 710


def _keys(seed: int = 7) -> EpisodeKeys:
    keys = EpisodeKeys(N, "cpu")
    keys.reseed(seed)
    return keys


def _block() -> DrawBlock:
    block = DrawBlock("step", STREAM)
    block.allocate("term", WORDS)
    block.freeze()
    return block


def _full(value: int) -> torch.Tensor:
    return torch.full((N,), value, dtype=torch.long)


def _step_words(episode: int, step: int, keys: EpisodeKeys | None = None) -> torch.Tensor:
    return _block().draw(keys or _keys(), _full(episode), _full(step))


def test_step_words_of_episode_and_step_past_2_16_do_not_replay_smaller_ones() -> None:
    """The 32-bit key ``episode * 65536 + step`` made (65536, 0) replay (0, 0) and (0, 65536) replay (1, 0)."""
    pairs = [
        (0, 0),
        (65536, 0),
        (0, 65536),
        (1, 0),
        (-1, 0),  # rows outside a seeded partial reset (episode -1) vs. episode 65535
        (65535, 0),
        (-1, 65535),
        (65535, 65535),
        (2**32, 0),
        (0, 2**32),
        (2**48, 0),
        (0, 2**48),
        (2**62, 3),
    ]
    words = {p: _step_words(*p) for p in pairs}
    for a, b in itertools.combinations(pairs, 2):
        assert (words[a] != words[b]).any(dim=1).all(), f"(episode, step) {a} and {b} draw the same words"


@pytest.mark.parametrize(("episode", "step"), [(0, 0), (1, 5), (3, 65535), (65535, 0), (65535, 65535)])
def test_step_words_below_2_16_are_those_of_the_recorded_key(episode: int, step: int) -> None:
    """Below 2**16 episodes and steps the words are unchanged, so the pinned Go1 recording still holds."""
    keys = _keys(seed=2**40 + 3)
    recorded_key = _full(episode * 65536 + step)
    want = bits_to_uniform(counter_bits(keys.seed, keys.env_ids, recorded_key, WORDS, stream=STREAM))
    assert torch.equal(_step_words(episode, step, keys), want)


def test_a_row_s_step_words_do_not_depend_on_the_other_rows_keys() -> None:
    keys = _keys()
    episode, step = torch.tensor([0, 70000, -1]), torch.tensor([65536, 3, 12])
    mixed = _block().draw(keys, episode, step)
    for row in range(N):
        alone = _step_words(int(episode[row]), int(step[row]), keys)
        assert torch.equal(mixed[row], alone[row])


def test_the_same_name_gets_the_same_stream() -> None:
    streams = StreamAllocator(base=720)
    first = [streams(f"term{i}") for i in range(20)]
    assert [streams(f"term{i}") for i in reversed(range(20))] == first[::-1]
    assert streams.streams == {f"term{i}": s for i, s in enumerate(first)}


def test_no_two_names_share_a_stream_or_a_normal_stream() -> None:
    """Neither a stream nor counter_normal's ``stream + 1000`` of one name is another name's."""
    streams = StreamAllocator(base=720)
    got = [streams(f"term{i}") for i in range(200)]
    used = got + [s + StreamAllocator.NORMAL_OFFSET for s in got]
    assert len(set(used)) == len(used)
    assert min(got) > 720 + StreamAllocator.NORMAL_OFFSET  # above the blocks and their normal streams


def test_stream_names_and_exhaustion_are_refused_by_name() -> None:
    streams = StreamAllocator(base=2**32 - 5000)
    streams("first")
    with pytest.raises(RuntimeError, match="no stream left for 'second'"):
        streams("second")
    for bad in ("", 3, None):
        with pytest.raises(ValueError, match="a stream name must be a non-empty str"):
            streams(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("step", [None, 3, 70000])
def test_a_block_draws_counter_and_step_bits_words_from_the_kept_prefix(step: int | None) -> None:
    """A block's words (drawn from the keys' kept prefix of its stream) are the words of ``counter_bits`` /
    ``step_bits`` made from the seed; reseeding refreshes the kept prefix in place (the tensors a captured graph
    holds), so the block then draws the new seed's words, not the old one's."""
    keys = _keys(seed=11)
    episode = torch.tensor([0, 70000, -1])

    def want() -> torch.Tensor:
        if step is None:
            return bits_to_uniform(counter_bits(keys.seed, keys.env_ids, episode, WORDS, stream=STREAM))
        return bits_to_uniform(step_bits(keys.seed, keys.env_ids, episode, _full(step), WORDS, stream=STREAM))

    def draw() -> torch.Tensor:
        return _block().draw(keys, episode, None if step is None else _full(step))

    first = draw()
    assert torch.equal(first, want())
    kept = keys.prefix(STREAM)
    assert all(a is b for a, b in zip(kept, keys.prefix(STREAM), strict=True))  # made once, then kept
    pointers = [t.data_ptr() for t in kept]
    keys.reseed(2**40 + 1)
    assert [t.data_ptr() for t in keys.prefix(STREAM)] == pointers  # refreshed in place
    second = draw()
    assert torch.equal(second, want()) and not torch.equal(second, first)
