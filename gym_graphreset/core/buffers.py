"""Persistent step buffers and the publication ring.

:class:`TensorStore` keeps one persistent tensor per leaf of a step's output tree (obs, reward, flags,
info) and writes new values in place, so addresses never change and a graph can hold them.
:class:`PublicationRing` is such stores, used round-robin over ``depth`` slots by steps, so what a
consumer got at step ``t`` stays unchanged through step ``t + depth - 1``; a reset between steps takes a
slot of its own rather than shorten that promise, and consecutive resets cycle through at most ``depth``
such slots, so memory stays bounded however many resets come in a row.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = [
    "PublicationRing",
    "TensorStore",
    "copy_many_",
    "owned_like",
    "tree_copy_",
    "tree_leaves",
    "tree_map",
    "tree_where",
]

Path = tuple[Any, ...]


def tree_map(fn: Callable[[torch.Tensor], Any], tree: Any) -> Any:
    """Apply ``fn`` to every tensor leaf of nested dicts/tuples/lists; other leaves pass through."""
    if isinstance(tree, torch.Tensor):
        return fn(tree)
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map(fn, v) for v in tree)
    return tree


def tree_leaves(tree: Any, path: Path = ()) -> Iterator[tuple[Path, torch.Tensor]]:
    """Yield ``(path, tensor)`` for every tensor leaf, depth first, in insertion order."""
    if isinstance(tree, torch.Tensor):
        yield path, tree
    elif isinstance(tree, dict):
        for k, v in tree.items():
            yield from tree_leaves(v, (*path, k))
    elif isinstance(tree, (tuple, list)):
        for i, v in enumerate(tree):
            yield from tree_leaves(v, (*path, i))


def owned_like(t: torch.Tensor) -> torch.Tensor:
    """An uninitialised, contiguous buffer like ``t`` that is never an inference tensor.

    Persistent buffers outlive the mode they were made in: one allocated under ``torch.inference_mode()``
    (as rsl_rl's rollout runs) could not be written in place after it, so they are made outside it.
    Writing them with ``copy_`` then works in inference mode, ``no_grad`` and plain mode alike.
    """
    with torch.inference_mode(False):
        return torch.empty_like(t, memory_format=torch.contiguous_format)


def copy_many_(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """``dst.copy_(src)`` for every pair, in as few kernels as the pairs allow.

    Pairs of one dtype and device whose tensors are both contiguous and of one shape go through one
    ``torch._foreach_copy_`` (one multi-tensor kernel on CUDA where each ``copy_`` is one kernel: a
    captured step pays per kernel); the rest are copied one by one. The values are the same either way.
    """
    groups: dict[tuple[torch.dtype, torch.device], list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for dst, src in pairs:
        if dst.shape == src.shape and dst.dtype == src.dtype and dst.device == src.device and _dense(dst, src):
            groups.setdefault((dst.dtype, dst.device), []).append((dst, src))
        else:
            dst.copy_(src)
    for group in groups.values():
        if len(group) == 1:
            group[0][0].copy_(group[0][1])
        else:
            torch._foreach_copy_([d for d, _ in group], [s for _, s in group])


def _dense(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """Both contiguous and outside autograd: what the multi-tensor kernel takes."""
    return dst.is_contiguous() and src.is_contiguous() and not (dst.requires_grad or src.requires_grad)


class TensorStore:
    """Persistent tensors keyed by their path in a tree, written in place with ``copy_``."""

    def __init__(self) -> None:
        self._buffers: dict[Path, torch.Tensor] = {}
        self.allocations = 0

    def write(self, tree: Any) -> Any:
        """Copy every tensor leaf of ``tree`` into its persistent buffer; return the tree of buffers."""
        pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        out = self._write(tree, (), pairs)
        copy_many_(pairs)
        return out

    def _write(self, tree: Any, path: Path, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
        if isinstance(tree, torch.Tensor):
            buf = self._buffers.get(path)
            if buf is None or buf.shape != tree.shape or buf.dtype != tree.dtype or buf.device != tree.device:
                buf = self._buffers[path] = owned_like(tree)
                self.allocations += 1
            pairs.append((buf, tree))
            return buf
        if isinstance(tree, dict):
            return {k: self._write(v, (*path, k), pairs) for k, v in tree.items()}
        if isinstance(tree, (tuple, list)):
            return type(tree)(self._write(v, (*path, i), pairs) for i, v in enumerate(tree))
        return tree

    def buffers(self) -> list[torch.Tensor]:
        """Every persistent buffer, in insertion order."""
        return list(self._buffers.values())


class PublicationRing:
    """Slots of :class:`TensorStore` reused only once nothing published in them may still be held.

    The promise: what step ``t`` published stays unchanged through step ``t + depth - 1``, and so does
    what a ``reset()`` published after step ``t`` (resets count no step), unless ``depth`` more resets
    follow it before the next step. With steps only, the slots are ``depth`` used round-robin; a reset
    between steps takes a slot of its own (one more), so it never overwrites a step's values early;
    resets in a row (no step between) cycle through at most ``depth`` such slots, like steps do.

    Args:
        depth: Values published at step ``t`` are valid through ``t + depth - 1``.
    """

    def __init__(self, depth: int) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"`published_buffer_depth` must be an int >= 1, got {depth!r}")
        self.depth = depth
        self._queue: deque[tuple[int, TensorStore]] = deque()  # (free from step count, slot), oldest first
        self._dropped_allocations = 0
        self._resets: deque[TensorStore] = deque()  # the slots of the resets since the last step, oldest first
        self.published = 0
        self.steps = 0

    @property
    def slots(self) -> list[TensorStore]:
        """The slots, oldest publication first (made on first use: a deep ring costs nothing until it fills)."""
        return [store for _, store in self._queue]

    def publish(self, tree: Any, *, step: bool = True) -> Any:
        """Copy ``tree`` into a slot nobody may still hold and return that slot's tensors.

        Args:
            tree: The outputs to publish.
            step: ``True`` for a step's outputs (counts a step); ``False`` for a reset's.
        """
        self.steps += int(step)
        queue = self._queue
        if step:
            self._resets.clear()
        if not step and len(self._resets) == self.depth:  # resets in a row: reuse the oldest of this run's
            store = self._resets.popleft()  # (the run's slots all free up at the same step count: order holds)
            queue.remove(next(entry for entry in queue if entry[1] is store))
        elif queue and queue[0][0] <= self.steps:  # slots free up in the order they were written
            _, store = queue.popleft()
            while len(queue) > self.depth and queue[0][0] <= self.steps:  # spares left by a burst of resets
                self._dropped_allocations += queue.popleft()[1].allocations
        else:
            store = TensorStore()
        queue.append((self.steps + self.depth, store))
        if not step:
            self._resets.append(store)
        out = store.write(tree)
        self.published += 1
        return out

    @property
    def allocations(self) -> int:
        """Total tensors ever allocated by the ring (flat once every slot has been written)."""
        return self._dropped_allocations + sum(s.allocations for s in self.slots)


def tree_where(mask: torch.Tensor, a: Any, b: Any, out: Any = None) -> Any:
    """Row-wise ``where(mask, a, b)`` over matching trees of tensors (``mask`` is ``(num_envs,)``).

    ``out`` (a matching tree of tensors) is written in place and returned, one kernel per leaf.
    """
    if isinstance(a, torch.Tensor):
        rows = mask.view(-1, *([1] * (a.dim() - 1)))
        return torch.where(rows, a, b) if out is None else torch.where(rows, a, b, out=out)
    if isinstance(a, dict):
        return {k: tree_where(mask, v, b[k], None if out is None else out[k]) for k, v in a.items()}
    if isinstance(a, (tuple, list)):
        outs = [None] * len(a) if out is None else out
        return type(a)(tree_where(mask, x, y, o) for x, y, o in zip(a, b, outs, strict=True))
    raise TypeError(f"observations must be tensors or dicts/tuples of tensors, got {type(a).__name__}")


def tree_copy_(dst: Any, src: Any) -> None:
    """In-place ``dst.copy_(src)`` over matching trees (in as few kernels as :func:`copy_many_` allows)."""
    copy_many_([(d, s) for (_, d), (_, s) in zip(tree_leaves(dst), tree_leaves(src), strict=True)])
