"""One step's body and the two reset paths, as objects built once from the configuration.

:class:`StepBody` is what a step does, whatever runs it (eagerly or as a captured graph): latch the
action check, step the inner env, add the built-in and participants' checks, show the step to the
observers, then hand it to the reset path. The reset path resets the done rows and builds the SAME_STEP
output:

- :class:`SelectedRowPath` (the reference): finds done rows with a host read and resets them by id;
- :class:`MaskedPath`: resets through the full-width :class:`~gym_graphreset.ResetSelection` every step,
  with no host read; with persistent buffers it writes fixed carriers, and its reset body runs through
  a runner (eager, or a captured graph in the ``"reset"`` scope).

Both publish every term's info on every step (fixed keys), and Gymnasium's ``SAME_STEP`` keys
(``final_obs``/``_final_obs``, ``final_info``/``_final_info``, the reset's info merged on the reset rows:
``same_step_info``): every step on the masked path, and, as Gymnasium's ``SyncVectorEnv`` does, on
steps where a row ended on the selected-row path. What both paths share (the SAME_STEP info, term
infos, the explicit reset) is in :mod:`gym_graphreset.core.same_step`; the masked path is in
:mod:`gym_graphreset.core.reset_paths`; both are importable from here too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from gym_graphreset.capture.compiling import CompileBackend, CompiledStep
from gym_graphreset.core.buffers import tree_leaves, tree_where
from gym_graphreset.core.inputs import check_step_outputs, env_device
from gym_graphreset.core.reset_paths import MaskedPath, ResetCarriers
from gym_graphreset.core.participants import Participants
from gym_graphreset.core.protocols import Rows, StepData
from gym_graphreset.core.same_step import AutoresetPath, TermInfos, check_reset_obs, same_step_info
from gym_graphreset.core.same_step import StepOut as _StepOut
from gym_graphreset.core.selection import participant_name
from gym_graphreset.core.validation import PendingChecks, ValidationLatch, finite_rows

__all__ = ["MaskedPath", "ResetCarriers", "SelectedRowPath", "StepBody", "StepOut", "TermInfos", "check_reset_obs"]

StepOut = _StepOut
"""``(obs, reward, terminated, truncated, info)``, as Gymnasium returns a step (see ``same_step``)."""


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


@contextlib.contextmanager
def _on(stream: torch.cuda.Stream) -> Iterator[None]:
    """Run on ``stream``, ordered after the caller's stream and before its later work."""
    caller = torch.cuda.current_stream(stream.device)
    stream.wait_stream(caller)
    with torch.cuda.stream(stream):
        yield
    caller.wait_stream(stream)


class StepBody:
    """One step, whatever runs it: check actions, step the inner env, observe, check, reset done rows.

    The inner env's ``reward`` / ``terminated`` / ``truncated`` are checked on every step (shape
    ``(num_envs,)``, dtype, device: metadata only, no host read) before anything reads them, so a wrong
    output is refused naming the inner env and the output, not a term that tripped over it later.

    Args:
        env: The inner env.
        parts: The participants (check providers and observers run every step).
        latch: The validation latch.
        path: The reset path.
        defer: Deferred validation: non-finite float actions are latched and zeroed, out-of-range
            integer actions latched (``valid_actions``) and clamped into the space.
        action_bounds: Inclusive integer bounds of a Discrete / MultiDiscrete action space.
        compile_backend: Run the step's device work through ``torch.compile`` with this backend
            (:class:`~gym_graphreset.capture.compiling.CompiledStep`); ``None`` runs it as written.
    """

    def __init__(
        self,
        env: VectorEnv,
        parts: Participants,
        latch: ValidationLatch,
        path: SelectedRowPath | MaskedPath,
        defer: bool,
        action_bounds: tuple[torch.Tensor, torch.Tensor] | None = None,
        compile_backend: CompileBackend | None = None,
    ) -> None:
        self.env, self.parts, self.latch, self.path, self.defer = env, parts, latch, path, defer
        self.action_bounds = action_bounds
        self.env_name, self.num_envs, self.device = participant_name(env), env.num_envs, env_device(env)
        self.compiled = None if compile_backend is None else CompiledStep(self._run, compile_backend)
        self.run: Callable[[torch.Tensor, PendingChecks | None], StepOut] = self.compiled or self._run

    def __call__(self, actions: torch.Tensor) -> StepOut:
        """Run the step (no host read on the masked path); a step that raises latches nothing."""
        outer = self.latch.open_batch()  # every verdict of the step latched in one write, stamped with its index
        try:
            with self._compiled_stream():
                return self.run(actions, outer)
        except BaseException:
            self.latch.discard_batch(outer)
            raise

    def _compiled_stream(self) -> contextlib.AbstractContextManager[Any]:
        """A compiled step runs on the participants' stream (their own stream switch is not traced)."""
        stream = self.parts.stream() if self.compiled is not None else None
        if stream is None or torch.cuda.current_stream(stream.device) == stream:
            return contextlib.nullcontext()
        return _on(stream)

    def _run(self, actions: torch.Tensor, outer: PendingChecks | None) -> StepOut:
        """The step's device work, the part :class:`~gym_graphreset.capture.compiling.CompiledStep` compiles."""
        latch = self.latch
        if self.defer and actions.dtype.is_floating_point:
            finite = (actions * 0) == 0  # isfinite in two kernels
            latch.require(finite, "finite_actions", "actions contained NaN or inf (those entries were zeroed)")
            actions = torch.where(finite, actions, 0.0)
        if self.defer and self.action_bounds is not None:
            low, high = self.action_bounds
            ok = (actions >= low) & (actions <= high)
            latch.require(ok, "valid_actions", "actions outside the action space (those entries were clamped)")
            actions = torch.minimum(torch.maximum(actions, low), high)
        obs, reward, terminated, truncated, info = self.env.step(actions)
        check_step_outputs(self.env_name, self.num_envs, self.device, reward, terminated, truncated)
        for _, leaf in tree_leaves(obs):  # per row: a failure names the rows
            if leaf.dtype.is_floating_point:
                latch.require(finite_rows(leaf), "finite_obs", "the inner env returned NaN or inf observations")
        latch.require(finite_rows(reward), "finite_reward", "the inner env returned NaN or inf rewards")
        source = self.parts.raw_reward_source
        raw = reward if source is None else source.raw_reward
        step = StepData(actions, obs, reward, terminated, truncated, terminated | truncated, raw)
        for observer in self.parts.observers:
            observer(step)
        for provider in self.parts.check_providers:  # after the observers: checks see this step's state
            provider(latch)
        out = self.path.reset_done_rows(step, info)
        latch.close_batch(outer)
        latch.advance()
        return out
