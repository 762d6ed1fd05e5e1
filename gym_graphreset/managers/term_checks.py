"""Checks of a task as a whole: a time-out term (built), each term's NaN (every step), an unwrapped step.

:func:`check_time_out` refuses a task none of whose terminations is a time-out (its episodes would never end);
:func:`warn_if_unwrapped` warns once when a task env is stepped with no wrapper to reset its done rows.

The wrapper latches ``finite_obs`` and ``finite_reward`` for the env's outputs as a whole; the task layer knows
which columns each term wrote, so :class:`TermChecks` latches one verdict per term
(``finite_obs[<group>/<term>]``, ``finite_reward[<term>]``), per row, with no host read: a NaN is reported
naming the term that made it. A concatenated group costs three kernels whatever its number of terms (its
non-finite columns summed per term by one matrix product), the rewards two.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch

from gym_graphreset.core.participants import is_wrapped
from gym_graphreset.core.protocols import CheckSink

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv
    from gym_graphreset.managers.task_cfg import TaskCfg

__all__ = ["TermChecks", "UnwrappedStepWarning", "check_time_out", "warn_if_unwrapped"]


class UnwrappedStepWarning(UserWarning):
    """A task env stepped with no wrapper: nothing resets its done rows, so its episodes never end."""


def check_time_out(cfg: TaskCfg) -> None:
    """Refuse a task none of whose termination terms is a time-out: its episodes would never end."""
    if not any(t.time_out for t in cfg.terminations.values()):
        raise ValueError(
            f"TaskCfg.terminations: no term is a time-out (`time_out=True`), so episodes would never end at "
            f"`episode_length_s` ({cfg.episode_length_s:g} s); terms: {list(cfg.terminations)}. Add "
            "'time_out': TerminationTerm(mdp.time_out, time_out=True)"
        )


def warn_if_unwrapped(env: ManagerBasedEnv) -> None:
    """Warn (an :class:`UnwrappedStepWarning`) if no open wrapper steps ``env``: nothing resets its done rows."""
    if not is_wrapped(env):
        warnings.warn(
            f"{type(env).__name__} stepped with no wrapper: nothing resets the rows that end, so their episodes "
            "never end (terminated/truncated rows keep stepping). Wrap it, FixedShapeAutoresetVectorEnv(env), "
            "which resets done rows as Gymnasium's autoreset does, or reset them yourself with "
            "env.reset(options={'reset_mask': terminated | truncated})",
            UnwrappedStepWarning,
            stacklevel=3,
        )


def _message(what: str, func: object) -> str:
    return (
        f"{what} (function {getattr(func, '__name__', func)!r}) returned NaN or inf on these rows: fix the term "
        "(a division by zero, a sqrt or log of a negative value, an unclamped acos...)"
    )


class TermChecks:
    """Per-term finite checks of the last step's observations and weighted reward terms (see the module)."""

    def __init__(self, env: ManagerBasedEnv) -> None:
        self.env = env
        cfg = env.cfg
        self._groups: list[tuple[str, torch.Tensor | None, tuple[str, ...], tuple[str, ...]]] = []
        for group, cols in env.observation_layout.items():
            terms = cfg.observations[group].terms
            names = tuple(f"finite_obs[{group}/{t}]" for t in cols)
            messages = tuple(_message(f"observations[{group!r}][{t!r}]", terms[t].func) for t in cols)
            onehot = None
            if cfg.observations[group].concatenate:
                width = max(c.stop for c in cols.values())
                onehot = torch.zeros(width, len(cols), device=env.device)
                for i, c in enumerate(cols.values()):
                    onehot[c, i] = 1.0
            self._groups.append((group, onehot, names, messages))
        rewards = cfg.rewards
        self._reward_names = tuple(f"finite_reward[{t}]" for t in env.reward_manager.names)
        self._reward_messages = tuple(
            _message(f"rewards[{t!r}] (weighted)", rewards[t].func) for t in env.reward_manager.names
        )

    def add_checks(self, latch: CheckSink) -> None:
        """Latch every term's per-row verdict on the last step's values (no host read)."""
        env = self.env
        for group, onehot, names, messages in self._groups:
            value = env.last_obs[group]
            if onehot is not None:
                assert isinstance(value, torch.Tensor)
                ok = (((value * 0) != 0).to(onehot.dtype) @ onehot) == 0  # (n, terms): no non-finite column
            else:
                ok = torch.stack([((v * 0) == 0).all(dim=1) for v in value.values()], dim=1)
            latch.require_many(ok, names, messages)
        if self._reward_names:
            latch.require_many((env.reward_manager.last * 0) == 0, self._reward_names, self._reward_messages)
