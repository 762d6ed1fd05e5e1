"""Persistent stores and the publication ring: in-place writes, lifetimes, cycling addresses."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gym_graphreset.core.buffers import PublicationRing, TensorStore, copy_many_, tree_where


def _tree(v: float) -> tuple:
    return (torch.full((3, 2), v), {"a": torch.full((3,), v), "n": "meta"})


def test_store_writes_in_place() -> None:
    store = TensorStore()
    first = store.write(_tree(1.0))
    second = store.write(_tree(2.0))
    assert first[0] is second[0] and first[1]["a"] is second[1]["a"]
    assert second[0].eq(2.0).all() and second[1]["n"] == "meta" and store.allocations == 2


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_ring_lifetime_and_address_cycle(depth: int) -> None:
    """What step t published is unchanged through step t+depth-1, and addresses cycle through depth slots."""
    ring = PublicationRing(depth)
    outs, ptrs = [], []
    for t in range(4 * depth):
        out = ring.publish(_tree(float(t)))
        outs.append(out)
        ptrs.append(out[0].data_ptr())
        for back in range(depth):
            if t - back >= 0:
                assert outs[t - back][0].eq(float(t - back)).all()
        if t >= depth:
            assert outs[t - depth][0].eq(float(t)).all()  # its slot was reused now
    assert len(set(ptrs)) == depth
    assert ptrs == [ptrs[i % depth] for i in range(len(ptrs))]
    assert ring.allocations == 2 * depth


@pytest.mark.parametrize("depth", [0, -1, 1.5, True])
def test_ring_rejects_bad_depth(depth) -> None:
    with pytest.raises(ValueError, match="`published_buffer_depth` must be an int >= 1"):
        PublicationRing(depth)


def _copy_pairs(device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Pairs the multi-tensor copy takes (same dtype, contiguous) and pairs it must leave to ``copy_``."""
    gen = torch.Generator().manual_seed(0)
    src = {
        "f1": torch.randn(5, 3, generator=gen),
        "f2": torch.randn(5, generator=gen),
        "b": torch.rand(5, generator=gen) > 0.5,
        "b2": torch.rand(5, 2, generator=gen) > 0.5,
        "l": torch.randint(0, 9, (5,), generator=gen),  # alone in its dtype
        "strided": torch.randn(3, 5, generator=gen).t(),  # not contiguous
        "cast": torch.randn(5, generator=gen).double(),  # into a float32 buffer
        "broadcast": torch.randn(1, 4, generator=gen),  # into a (5, 4) buffer
    }
    dst_like = {"cast": torch.zeros(5), "broadcast": torch.zeros(5, 4), "strided": torch.zeros(5, 3)}
    return [(torch.zeros_like(dst_like.get(k, v), device=device), v.to(device)) for k, v in src.items()]


def test_copy_many_equals_one_copy_each(device: torch.device) -> None:
    """Grouped multi-tensor copies give what ``copy_`` one by one gives, whatever mix of pairs comes."""
    many, each = _copy_pairs(device), _copy_pairs(device)
    copy_many_(many)
    for dst, src in each:
        dst.copy_(src)
    for (got, _), (want, _) in zip(many, each, strict=True):
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_tree_where_out_writes_in_place() -> None:
    """``tree_where(..., out=)`` writes the given buffers (addresses a graph holds) and returns them."""
    mask = torch.tensor([True, False, True])
    a, b = _tree(1.0), _tree(2.0)
    out = (torch.empty(3, 2), {"a": torch.empty(3), "n": "meta"})
    got = tree_where(mask, (a[0], a[1]["a"]), (b[0], b[1]["a"]), (out[0], out[1]["a"]))
    assert got[0] is out[0] and got[1] is out[1]["a"]
    assert torch.equal(out[1]["a"], torch.tensor([1.0, 2.0, 1.0]))
    assert torch.equal(out[0][:, 0], torch.tensor([1.0, 2.0, 1.0]))


def test_tree_where_rows() -> None:
    mask = torch.tensor([True, False, True])
    out = tree_where(mask, {"x": torch.ones(3, 2)}, {"x": torch.zeros(3, 2)})
    assert out["x"].tolist() == [[1, 1], [0, 0], [1, 1]]
    with pytest.raises(TypeError, match="observations must be tensors"):
        tree_where(mask, 1.0, 2.0)


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("resets", [1, 2, 5])
def test_resets_between_steps_do_not_shorten_the_promise(depth: int, resets: int) -> None:
    """Reset publications between steps take slots of their own: every publication made after step t
    (step t's included) is unchanged through step t + depth - 1 (a reset's, unless ``depth`` more resets
    followed it before a step), and the ring stays bounded."""
    ring = PublicationRing(depth)
    held: list[tuple[int, Any, float, bool]] = []  # (step count when published, tree, value, a step's)
    value = 0.0
    for t in range(6 * depth):
        for is_step in [True] + [False] * (resets if t % 2 else 0):
            value += 1
            held.append((ring.steps + int(is_step), ring.publish(_tree(value), step=is_step), value, is_step))
        for i, (published_at, tree, v, is_step) in enumerate(held):
            later_resets = sum(1 for at, _, _, s in held[i + 1 :] if at == published_at and not s)
            if ring.steps < published_at + depth and (is_step or later_resets < depth):
                assert tree[0].eq(v).all(), f"a value published at step {published_at} changed at {ring.steps}"
    assert len(ring.slots) <= depth * (1 + min(resets, depth))  # a run of resets holds at most depth slots


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_resets_in_a_row_reuse_their_slots(depth: int) -> None:
    """Any number of resets with no step between cycle through ``depth`` slots: memory stays flat."""
    ring = PublicationRing(depth)
    ring.publish(_tree(0.0))
    held = [ring.publish(_tree(float(i)), step=False) for i in range(1, 200)]
    assert len(ring.slots) == 1 + depth and ring.allocations == 2 * (1 + depth)
    assert all(tree[0].eq(199 - i).all() for i, tree in enumerate(reversed(held[-depth:])))  # the last depth kept


_MODES = {
    "inference_mode": torch.inference_mode,
    "no_grad": torch.no_grad,
    "plain": torch.enable_grad,
}


@pytest.mark.parametrize(("first", "then"), [(a, b) for a in _MODES for b in _MODES if a != b], ids=lambda m: str(m))
def test_any_mix_of_grad_modes_steps_every_preset(preset: str, first: str, then: str) -> None:
    """Buffers made on a first reset/step under inference mode (rsl_rl's rollout) stay writable outside it."""
    from gym_graphreset import FixedShapeAutoresetVectorEnv
    from gym_graphreset.envs import CartPoleVectorEnv
    from tests.conftest import preset_device

    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4, max_episode_steps=3, device=preset_device(preset)), preset)
    actions = torch.ones(4, dtype=torch.long, device=env.device)
    with _MODES[first]():
        env.reset(seed=0)
        for _ in range(4):
            env.step(actions)
    with _MODES[then]():
        for _ in range(6):
            obs, *_ = env.step(actions)
        env.reset()
    assert obs.shape == (4, 4)


def test_owned_like_is_never_an_inference_tensor() -> None:
    from gym_graphreset.core.buffers import owned_like

    with torch.inference_mode():
        made = owned_like(torch.ones(3))
    assert not made.is_inference()
    made.copy_(torch.zeros(3))  # writable outside inference mode


@pytest.mark.parametrize("preset", ["masked_persistent", "selected"])
def test_consecutive_wrapper_resets_keep_memory_flat(preset: str) -> None:
    """``reset()`` after ``reset()`` (no step between) reuses the ring's slots instead of taking new ones."""
    from gym_graphreset import FixedShapeAutoresetVectorEnv, StepConfig
    from gym_graphreset.envs import CartPoleVectorEnv

    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4), StepConfig.preset(preset, persistent_buffers=True))
    env.reset(seed=0)
    env.step(torch.ones(4, dtype=torch.long))
    env.reset(seed=1)
    env.reset(seed=2)
    allocations, slots = env.ring.allocations, len(env.ring.slots)
    for seed in range(3, 40):
        obs, _ = env.reset(seed=seed)
    assert (env.ring.allocations, len(env.ring.slots)) == (allocations, slots)
    obs, *_ = env.step(torch.ones(4, dtype=torch.long))
    assert torch.isfinite(obs).all()
