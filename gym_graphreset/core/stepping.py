"""One step's body, built once from the configuration.

:class:`StepBody` is what a step does, whatever runs it (eagerly or as a captured graph): latch the
action check, step the inner env, add the built-in and participants' checks, show the step to the
observers, then hand it to the reset path (:mod:`gym_graphreset.core.reset_paths`), which resets the done
rows and builds the SAME_STEP output.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from gym_graphreset.capture.compiling import CompileBackend, CompiledStep
from gym_graphreset.core.buffers import tree_leaves
from gym_graphreset.core.inputs import check_step_outputs, env_device
from gym_graphreset.core.participants import Participants
from gym_graphreset.core.protocols import StepData
from gym_graphreset.core.reset_paths import MaskedPath, SelectedRowPath
from gym_graphreset.core.same_step import StepOut
from gym_graphreset.core.selection import participant_name
from gym_graphreset.core.validation import PendingChecks, ValidationLatch, finite_rows

__all__ = ["StepBody"]


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
