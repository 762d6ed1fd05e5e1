"""The two reset paths: each resets a step's done rows and builds the SAME_STEP output.

- :class:`MaskedPath` resets through the persistent :class:`~gym_graphreset.ResetSelection` whatever
  rows ended, so a step needs no host read; with persistent buffers it reads and writes only fixed
  carriers (:class:`ResetCarriers`), and its reset body runs through a runner (eager, or a captured graph
  in the ``"reset"`` scope). It publishes the SAME_STEP keys on every step (fixed keys).
- :class:`SelectedRowPath` (the reference) finds done rows with a host read and resets them by id; it
  publishes ``final_obs``/``_final_obs`` as Gymnasium's ``SyncVectorEnv`` does, on steps where a row ended.

Both publish every term's info on every step, and the reset's info merged on the reset rows
(``same_step_info``). What both share (the SAME_STEP info, term infos, the explicit reset) is in
:mod:`gym_graphreset.core.same_step`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from gym_graphreset.core.buffers import TensorStore, owned_like, tree_copy_, tree_map, tree_where
from gym_graphreset.core.executors import Runner
from gym_graphreset.core.participants import Participants
from gym_graphreset.core.protocols import Rows, StepData
from gym_graphreset.core.same_step import AutoresetPath, StepOut, check_reset_obs, same_step_info
from gym_graphreset.core.selection import ResetSelection
from gym_graphreset.core.validation import ValidationLatch

__all__ = ["MaskedPath", "ResetCarriers", "SelectedRowPath"]


@dataclass
class ResetCarriers:
    """What the masked reset body reads and writes with persistent buffers: fixed tensors, every step.

    Attributes:
        final_obs: The step's observations (the carrier the step wrote), read on done rows.
        done: The done mask (its carrier).
        obs: Written whole: the reset observations on done rows, ``final_obs`` elsewhere.
        reset_info: The inner reset's info, in a store the body rewrites in place.
    """

    final_obs: Any
    done: torch.Tensor
    obs: Any
    reset_info: dict[str, Any] = field(default_factory=dict)


class MaskedPath(AutoresetPath):
    """Reset through the full-width selection every step, with no host read.

    Args:
        env: The inner env (``AutoresetMode.DISABLED``, selection-capable).
        parts: The participants.
        latch: Where the reset body latches its observation check.
        selection: The persistent selection handed to the env and every term.
        persistent: Write fixed carriers in place (a graph can hold them).
        run_reset: Runs the reset body (eager, or a graph with ``graph="reset"``). With persistent
            carriers the body reads and writes only them (:class:`ResetCarriers`), so a graph of it
            replays correctly. A body run inline latches its checks with the step's (one write per step);
            a graph of it latches them inside itself.
    """

    def __init__(
        self,
        env: VectorEnv,
        parts: Participants,
        latch: ValidationLatch,
        selection: ResetSelection,
        persistent: bool,
        run_reset: Runner[None],
    ) -> None:
        super().__init__(env, parts, latch, persistent)
        self.selection = selection
        self.run_reset = run_reset
        self.reset_info_store = TensorStore()
        self.io: ResetCarriers | None = None  # made on the first step: the carriers' shapes are the step's

    def capture_buffers(self) -> list[torch.Tensor]:
        """The carriers, and the reset-info store the reset body rewrites in place."""
        return [*super().capture_buffers(), *self.reset_info_store.buffers()]

    def rows_for_terms(self, mask: torch.Tensor | None) -> Rows:
        """What terms get on an explicit ``reset()``: the selection (all-True for a full reset)."""
        self.selection.mask.copy_(mask if mask is not None else torch.ones_like(self.selection.mask))
        return self.selection

    def reset_done_rows(self, step: StepData, info: dict[str, Any]) -> StepOut:
        """Reset the done rows through the mask (no host read) and build the SAME_STEP output."""
        info = dict(info)
        final = self.final_term_infos()
        if self.carriers is not None:
            c = self.carriers.write(
                {
                    "final_obs": step.obs,
                    "reward": step.reward,
                    "terminated": step.terminated,
                    "truncated": step.truncated,
                    "done": step.done,
                }
            )
            if self.io is None:
                self.obs_carrier = tree_map(owned_like, c["final_obs"])  # written whole by the reset body
                self.io = ResetCarriers(c["final_obs"], c["done"], self.obs_carrier)
            self.run_reset(self._reset_into_carriers)
            io = self.io
            obs, final_obs, reset_info = io.obs, io.final_obs, io.reset_info
            reward, terminated, truncated, done = c["reward"], c["terminated"], c["truncated"], c["done"]
        else:
            reward, terminated, truncated, done = step.reward, step.terminated, step.truncated, step.done
            final_obs = tree_where(done, step.obs, step.obs)  # a copy the inner reset cannot alias
            obs, reset_info = self.masked_reset(final_obs, done)
        info = same_step_info(info, reset_info, done)  # every step: fixed keys
        info["final_obs"], info["_final_obs"] = final_obs, done
        self.term_infos(info, final)
        return obs, reward, terminated, truncated, info

    def write_reset_obs(self, obs: Any) -> Any:
        """After an explicit ``reset()``: the obs, in the carrier once one exists."""
        if self.obs_carrier is None:
            return obs
        tree_copy_(self.obs_carrier, obs)
        return self.obs_carrier

    def _reset_into_carriers(self) -> None:
        """The reset body on persistent carriers only: what a ``"reset"`` graph captures."""
        io = self.io
        assert io is not None
        _, reset_info = self.masked_reset(io.final_obs, io.done, out=io.obs)
        if reset_info:
            io.reset_info = self.reset_info_store.write(reset_info)  # held: a graph rewrites it in place

    def masked_reset(self, step_obs: Any, done: torch.Tensor, out: Any = None) -> tuple[Any, dict[str, Any]]:
        """The masked reset body: inner env, then terms, over the full width (no host read).

        Returns the observations (the reset ones on ``done`` rows, ``step_obs`` elsewhere; written into
        ``out`` when given) and the inner reset's info.
        """
        # A body that is its own graph latches inside it (its own region); inline, its checks join the step's.
        own_region = self.run_reset.captures or not self.latch.batching
        outer = self.latch.open_batch() if own_region else None
        self.selection.mask.copy_(done)
        reset_obs, reset_info = self.env.reset(options={"reset_mask": self.selection})
        self.terms_reset(self.selection)
        check_reset_obs(self.latch, reset_obs, done)
        if own_region:  # no `with`: a compiled step cannot resume inside one (StepBody cleans up)
            self.latch.close_batch(outer)
        return tree_where(done, reset_obs, step_obs, out), reset_info


class SelectedRowPath(AutoresetPath):
    """Reset done rows by id after a host read (``done.any()``, ``done.nonzero()``): the reference path.

    Terms get row ids (a long tensor); the inner env gets the done mask in ``options["reset_mask"]``.
    ``final_obs`` is published, as by Gymnasium's ``SyncVectorEnv``, on steps where some row ended;
    term infos on every step.
    With an inner env in ``SAME_STEP`` mode the env already reset its rows: only terms are reset here.
    """

    def __init__(
        self, env: VectorEnv, parts: Participants, latch: ValidationLatch, persistent: bool, inner_resets: bool
    ) -> None:
        super().__init__(env, parts, latch, persistent)
        self.inner_resets = inner_resets

    def rows_for_terms(self, mask: torch.Tensor | None) -> Rows:
        """What terms get on an explicit ``reset()``: ``None`` (all rows) or the row ids."""
        return None if mask is None else mask.nonzero().flatten()  # host read: the selected path

    def reset_done_rows(self, step: StepData, info: dict[str, Any]) -> StepOut:
        """Reset the done rows (if any: a host read) by id and build the SAME_STEP output."""
        info = dict(info)
        obs, done = step.obs, step.done
        final = None
        if bool(done.any()):  # host read: the classic gate
            env_ids = done.nonzero().flatten()  # host read: the classic row ids
            final = self.final_term_infos()
            if not self.inner_resets:
                final_obs = tree_where(done, obs, obs)  # a copy the inner reset cannot alias
                reset_obs, reset_info = self.env.reset(options={"reset_mask": done})
                check_reset_obs(self.latch, reset_obs, done)
                obs = tree_where(done, reset_obs, final_obs)
                info = same_step_info(info, reset_info, done)
                info["final_obs"], info["_final_obs"] = final_obs, done  # Gymnasium: only when a row ended
            self.terms_reset(env_ids)
        self.term_infos(info, final if "final_info" in info else None)  # every step, like the masked path
        reward, terminated, truncated = step.reward, step.terminated, step.truncated
        if self.carriers is not None:
            c = self.carriers.write({"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated})
            obs, reward, terminated, truncated = c["obs"], c["reward"], c["terminated"], c["truncated"]
        return obs, reward, terminated, truncated, info
