"""The two checks to run on your own env before training: the masked path equals the reference, and reads nothing.

:func:`check_env` runs both on a factory of your inner env (a task-layer ``ManagerBasedEnv``, or any torch
``VectorEnv`` the wrapper accepts), on the CPU, and says what it checked; each failure names what differed
or the line that read.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import VectorEnv

from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.inputs import env_device
from gym_graphreset.testing.harness import assert_masked_matches_selected, assert_no_host_reads

__all__ = ["check_env"]


def _actions(space: spaces.Space, num_envs: int, steps: int, seed: int, device: torch.device) -> list[torch.Tensor]:
    """``steps`` batches of actions: standard normal for a ``Box`` (past its bounds too), else ``space``'s samples."""
    if isinstance(space, spaces.Box):
        gen = torch.Generator().manual_seed(seed)
        return [torch.randn(num_envs, *space.shape, generator=gen).to(device) for _ in range(steps)]
    space.seed(seed)
    return [torch.as_tensor(np.stack([space.sample() for _ in range(num_envs)]), device=device) for _ in range(steps)]


def check_env(make_inner: Callable[[], VectorEnv], *, steps: int = 60, host_read_steps: int = 20, seed: int = 1) -> str:
    """Assert that ``make_inner()``'s env is the same masked as selected, and reads nothing; a one-line summary.

    The masked path is compared with the selected-row reference bit for bit (same seed, same draws), then a
    few masked steps are counted for host reads.

    Args:
        make_inner: Builds a fresh inner env (called four times: a probe of its action space, the reference,
            the masked run, the count).
            Give it a short episode limit so that resets happen within ``steps``.
        steps: Steps compared, bit for bit (:func:`~gym_graphreset.testing.harness.assert_masked_matches_selected`).
        host_read_steps: Masked steps counted for host reads
            (:func:`~gym_graphreset.testing.host_reads.assert_no_host_reads`; the deferred checks' poll, the one
            read by design, falls after them).
        seed: The reset seed; the actions are drawn from it too.

    Raises:
        ValueError: ``steps`` or ``host_read_steps`` out of range.
        AssertionError: The runs differ (naming the step, key and rows) or a step read device data (naming
            the line).
    """
    if not (steps >= 1 and 1 <= host_read_steps <= steps):
        raise ValueError(f"need 1 <= host_read_steps <= steps, got steps={steps}, host_read_steps={host_read_steps}")
    probe = make_inner()
    num_envs, device = probe.num_envs, env_device(probe)
    actions = _actions(probe.single_action_space, num_envs, steps, seed, device)
    probe.close()

    def factory(flags: dict[str, object]) -> FixedShapeAutoresetVectorEnv:
        return FixedShapeAutoresetVectorEnv(make_inner(), **flags)  # type: ignore[arg-type]

    assert_masked_matches_selected(factory, actions, seed=seed)
    env = factory({"config": "masked", "validation_poll_interval": host_read_steps + 1})  # no poll in the count
    env.reset(seed=seed + 1)
    try:
        assert_no_host_reads(lambda: [env.step(a) for a in actions[:host_read_steps]])
    finally:
        env.close()
    return (
        f"masked == selected over {steps} steps x {num_envs} envs, bit for bit; no host read in {host_read_steps} steps"
    )
