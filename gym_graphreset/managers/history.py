"""Circular and delay buffers that restart through a reset mask: fixed shapes, no host read.

Both keep the last ``length`` values of a ``(num_envs, k)`` stream in a persistent ``(num_envs, length, k)``
tensor. A row marked by ``restart`` is refilled with its next pushed value in every slot (the first
value of a new episode stands in for the steps before it), as Isaac Lab's and mjlab's buffers do.
"""

from __future__ import annotations

import torch

__all__ = ["CircularBuffer", "DelayBuffer"]


class CircularBuffer:
    """The last ``length`` values of each row, oldest first."""

    def __init__(self, num_envs: int, length: int, width: int, device: torch.device, dtype: torch.dtype) -> None:
        if length < 1:
            raise ValueError(f"`length` must be >= 1, got {length}")
        self.length = length
        self.data = torch.zeros(num_envs, length, width, device=device, dtype=dtype)
        self.fresh = torch.ones(num_envs, dtype=torch.bool, device=device)

    def restart(self, rows: torch.Tensor) -> None:
        """The rows of ``rows`` start over: their next :meth:`push` fills every slot."""
        self.fresh.logical_or_(rows)

    def push(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Append ``x`` ``(num_envs, k)`` and return the buffer ``(num_envs, length, k)``.

        ``rows`` (a reset's mask): only those rows take ``x`` (they restart, so it fills every slot); the
        others keep their buffer, so observing at a reset does not advance the rows that did not reset.
        """
        refill = x.unsqueeze(1).expand_as(self.data)
        if rows is None:
            shifted = torch.cat((self.data[:, 1:], x.unsqueeze(1)), dim=1)
            self.data.copy_(torch.where(self.fresh.view(-1, 1, 1), refill, shifted))
            self.fresh.zero_()
        else:
            take = rows & self.fresh
            self.data.copy_(torch.where(take.view(-1, 1, 1), refill, self.data))
            self.fresh.logical_and_(~take)
        return self.data


class DelayBuffer(CircularBuffer):
    """``x`` as it was ``delay`` pushes ago (``delay == 0``: ``x`` itself)."""

    def __init__(self, num_envs: int, delay: int, width: int, device: torch.device, dtype: torch.dtype) -> None:
        if delay < 0:
            raise ValueError(f"`delay` must be >= 0, got {delay}")
        super().__init__(num_envs, delay + 1, width, device, dtype)
        self.delay = delay

    def delayed(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Push ``x`` (see :meth:`CircularBuffer.push`) and return the value of ``delay`` steps ago."""
        if self.delay == 0:
            return x
        return self.push(x, rows)[:, 0]
