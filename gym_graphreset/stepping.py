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
steps where a row ended on the selected-row path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from gym_graphreset.buffers import TensorStore, owned_like, tree_copy_, tree_leaves, tree_map, tree_where
from gym_graphreset.compiling import CompileBackend, CompiledStep
from gym_graphreset.participants import Participants
from gym_graphreset.protocols import Rows, StepData
from gym_graphreset.selection import ResetSelection, participant_name
from gym_graphreset.validation import PendingChecks, ValidationLatch, finite_rows

__all__ = ["MaskedPath", "SelectedRowPath", "StepBody", "StepOut", "check_reset_obs"]

StepOut = tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]
"""``(obs, reward, terminated, truncated, info)``, as Gymnasium returns a step."""
Runner = Callable[[Callable[[], None]], None]


def run_eagerly(fn: Callable[[], None]) -> None:
    """The eager runner of a reset body."""
    fn()


def check_reset_obs(latch: ValidationLatch, reset_obs: Any, rows: torch.Tensor | None) -> None:
    """Latch ``finite_reset_obs``: the reset rows' (``None``: every row's) new observations are finite."""
    for _, leaf in tree_leaves(reset_obs):
        if leaf.dtype.is_floating_point:
            ok = finite_rows(leaf) if rows is None else finite_rows(leaf) | ~rows
            latch.require(ok, "finite_reset_obs", "a reset produced NaN or inf observations")


def same_step_info(step_info: dict[str, Any], reset_info: dict[str, Any], done: torch.Tensor) -> dict[str, Any]:
    """Gymnasium's ``SAME_STEP`` info of a step whose ``done`` rows were just reset (fixed shapes, no host read).

    - ``final_info`` is the step's own info (what the finished episodes' last step said), each key masked
      to the done rows (``final_info["_k"]``), and ``_final_info`` the done mask;
    - the reset's info is merged in on the reset rows: a key ``k`` it returned (on the rows of its mask
      ``_k``, or every reset row) replaces the step's value there, and ``_k`` says which rows hold a value;
    - a step key that comes with a mask ``_k`` (Gymnasium-style per-env infos) is cleared from the reset
      rows' mask, as Gymnasium's ``SyncVectorEnv`` reports only the reset's info for them. Keys without a
      mask (a torch env's full-width values) keep the step's values.
    """
    info = dict(step_info)
    for key in step_info:
        mask_key = f"_{key}"
        if not key.startswith("_") and isinstance(step_info.get(mask_key), torch.Tensor):
            info[mask_key] = step_info[mask_key] & ~done
    for key, value in reset_info.items():
        if key.startswith("_"):
            continue
        given = reset_info.get(f"_{key}")
        rows = done if not isinstance(given, torch.Tensor) else given & done
        if key in info and _same_layout(info[key], value):
            info[key] = tree_where(rows, value, info[key])
            if isinstance(info.get(f"_{key}"), torch.Tensor):
                info[f"_{key}"] = info[f"_{key}"] | rows
        else:
            info[key], info[f"_{key}"] = value, rows
    info["final_info"], info["_final_info"] = _on_rows(step_info, done), done
    return info


def _on_rows(info: dict[str, Any], rows: torch.Tensor) -> dict[str, Any]:
    """``info`` valid on ``rows`` only: every key ``k`` gets (or narrows) its mask ``_k``; nested dicts too."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if key.startswith("_"):
            continue
        out[key] = _on_rows(value, rows) if isinstance(value, dict) else value
        given = info.get(f"_{key}")
        out[f"_{key}"] = given & rows if isinstance(given, torch.Tensor) else rows
    return out


def _same_layout(a: Any, b: Any) -> bool:
    la, lb = list(tree_leaves(a)), list(tree_leaves(b))
    return len(la) == len(lb) > 0 and all(
        pa == pb and ta.shape == tb.shape and ta.dtype == tb.dtype for (pa, ta), (pb, tb) in zip(la, lb, strict=True)
    )


def _fresh(tree: Any) -> Any:
    return tree_map(torch.clone, tree)


class _Path:
    """What both reset paths share: the env, the participants, and the term infos."""

    obs_carrier: Any = None

    def __init__(self, env: VectorEnv, parts: Participants, persistent: bool) -> None:
        self.env = env
        self.parts = parts
        self.carriers = TensorStore() if persistent else None

    def capture_buffers(self) -> list[torch.Tensor]:
        """The carriers a graph writes (declared: they sit in a store, deeper than attributes)."""
        carriers = [] if self.carriers is None else list(self.carriers.buffers())
        return carriers + [leaf for _, leaf in tree_leaves(self.obs_carrier)]

    def term_infos(self, info: dict[str, Any]) -> None:
        # Published copies: in place, the ring copies; otherwise a fresh copy, so a kept reference
        # is not overwritten by the next step (Gymnasium hands out fresh arrays too).
        for provider in self.parts.info_providers:
            entries = provider.info()
            if clash := [k for k in entries if k in info]:  # host-side key check: no device read
                raise ValueError(
                    f"the reset term {participant_name(provider)} publishes info key(s) {clash} that the step's "
                    "info already holds (from the inner env or its reset): one would silently replace the other"
                )
            entries = entries if self.carriers is not None else _fresh(entries)
            info.update(entries)
            if "final_info" in info:  # what the finished episodes' last step said, as Gymnasium's per-env wrappers
                info["final_info"].update(_on_rows(entries, info["_final_info"]))

    def terms_reset(self, rows: Rows) -> None:
        for term in self.parts.terms.values():
            term.reset(rows)


class SelectedRowPath(_Path):
    """Reset done rows by id after a host read (``done.any()``, ``done.nonzero()``): the reference path.

    Terms get row ids (a long tensor); the inner env gets the done mask in ``options["reset_mask"]``.
    ``final_obs`` is published, as by Gymnasium's ``SyncVectorEnv``, on steps where some row ended;
    term infos on every step.
    With an inner env in ``SAME_STEP`` mode the env already reset its rows: only terms are reset here.
    """

    def __init__(
        self, env: VectorEnv, parts: Participants, latch: ValidationLatch, persistent: bool, inner_resets: bool
    ) -> None:
        super().__init__(env, parts, persistent)
        self.latch = latch
        self.inner_resets = inner_resets

    def rows_for_terms(self, mask: torch.Tensor | None) -> Rows:
        """What terms get on an explicit ``reset()``: ``None`` (all rows) or the row ids."""
        return None if mask is None else mask.nonzero().flatten()  # host read: the selected path

    def after_step(self, step: StepData, info: dict[str, Any]) -> StepOut:
        """Reset the done rows (if any) and build the SAME_STEP output."""
        info = dict(info)
        obs, done = step.obs, step.done
        if bool(done.any()):  # host read: the classic gate
            env_ids = done.nonzero().flatten()  # host read: the classic row ids
            if not self.inner_resets:
                final_obs = tree_where(done, obs, obs)  # a copy the inner reset cannot alias
                reset_obs, reset_info = self.env.reset(options={"reset_mask": done})
                check_reset_obs(self.latch, reset_obs, done)
                obs = tree_where(done, reset_obs, final_obs)
                info = same_step_info(info, reset_info, done)
                info["final_obs"], info["_final_obs"] = final_obs, done  # Gymnasium: only when a row ended
            self.terms_reset(env_ids)
        self.term_infos(info)  # every step, like the masked path
        reward, terminated, truncated = step.reward, step.terminated, step.truncated
        if self.carriers is not None:
            c = self.carriers.write({"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated})
            obs, reward, terminated, truncated = c["obs"], c["reward"], c["terminated"], c["truncated"]
        return obs, reward, terminated, truncated, info


class MaskedPath(_Path):
    """Reset through the full-width selection every step, with no host read.

    Args:
        env: The inner env (``AutoresetMode.DISABLED``, selection-capable).
        parts: The participants.
        latch: Where the reset body latches its observation check.
        selection: The persistent selection handed to the env and every term.
        persistent: Write fixed carriers in place (a graph can hold them).
        run_reset: Runs the reset body: ``run_eagerly``, or a captured graph's runner.
    """

    def __init__(
        self,
        env: VectorEnv,
        parts: Participants,
        latch: ValidationLatch,
        selection: ResetSelection,
        persistent: bool,
        run_reset: Runner = run_eagerly,
    ) -> None:
        super().__init__(env, parts, persistent)
        self.latch = latch
        self.selection = selection
        self.run_reset = run_reset  # obs_carrier: written whole by the reset body, never copied in
        self.reset_info_store = TensorStore()
        self._c: dict[str, Any] = {}

    def capture_buffers(self) -> list[torch.Tensor]:
        """The carriers, and the reset-info store the reset body rewrites in place."""
        return [*super().capture_buffers(), *self.reset_info_store.buffers()]

    def rows_for_terms(self, mask: torch.Tensor | None) -> Rows:
        """What terms get on an explicit ``reset()``: the selection (all-True for a full reset)."""
        self.selection.mask.copy_(mask if mask is not None else torch.ones_like(self.selection.mask))
        return self.selection

    def after_step(self, step: StepData, info: dict[str, Any]) -> StepOut:
        """Reset the done rows through the mask and build the SAME_STEP output."""
        info = dict(info)
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
            if self.obs_carrier is None:
                self.obs_carrier = tree_map(owned_like, c["final_obs"])
            c["obs"] = self._c["obs"] = self.obs_carrier
            self._c.update(c)
            self.run_reset(self._reset_carriers)
            obs, final_obs, reset_info = c["obs"], c["final_obs"], self._c.get("reset_info", {})
            reward, terminated, truncated, done = c["reward"], c["terminated"], c["truncated"], c["done"]
        else:
            reward, terminated, truncated, done = step.reward, step.terminated, step.truncated, step.done
            final_obs = tree_where(done, step.obs, step.obs)  # a copy the inner reset cannot alias
            obs, reset_info = self.masked_reset(final_obs, done)
        info = same_step_info(info, reset_info, done)  # every step: fixed keys
        info["final_obs"], info["_final_obs"] = final_obs, done
        self.term_infos(info)
        return obs, reward, terminated, truncated, info

    def write_reset_obs(self, obs: Any) -> Any:
        """After an explicit ``reset()``: the obs, in the carrier once one exists."""
        if self.obs_carrier is None:
            return obs
        tree_copy_(self.obs_carrier, obs)
        return self.obs_carrier

    def _reset_carriers(self) -> None:
        obs, reset_info = self.masked_reset(self._c["final_obs"], self._c["done"])
        tree_copy_(self._c["obs"], obs)
        if reset_info:
            self._c["reset_info"] = self.reset_info_store.write(reset_info)  # held: a graph rewrites it in place

    def masked_reset(self, step_obs: Any, done: torch.Tensor) -> tuple[Any, dict[str, Any]]:
        """The masked reset body: inner env, then terms, over the full width (no host read)."""
        outer = self.latch.open_batch()  # latched inside this body (its own graph in the reset scope)
        self.selection.mask.copy_(done)
        reset_obs, reset_info = self.env.reset(options={"reset_mask": self.selection})
        self.terms_reset(self.selection)
        check_reset_obs(self.latch, reset_obs, done)
        self.latch.close_batch(outer)  # no `with`: a compiled step cannot resume inside one (StepBody cleans up)
        return tree_where(done, reset_obs, step_obs), reset_info


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

    Args:
        env: The inner env.
        parts: The participants (check providers and observers run every step).
        latch: The validation latch.
        path: The reset path.
        defer: Deferred validation: non-finite float actions are latched and zeroed, out-of-range
            integer actions latched (``valid_actions``) and clamped into the space.
        action_bounds: Inclusive integer bounds of a Discrete / MultiDiscrete action space.
        compile_backend: Run the step's device work through ``torch.compile`` with this backend
            (:class:`~gym_graphreset.compiling.CompiledStep`); ``None`` runs it as written.
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
        """The step's device work, the part :class:`~gym_graphreset.compiling.CompiledStep` compiles."""
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
        for _, leaf in tree_leaves(obs):  # per row: a failure names the rows
            if leaf.dtype.is_floating_point:
                latch.require(finite_rows(leaf), "finite_obs", "the inner env returned NaN or inf observations")
        latch.require(finite_rows(reward), "finite_reward", "the inner env returned NaN or inf rewards")
        source = self.parts.raw_reward_source
        raw = reward if source is None else source.raw_reward
        step = StepData(actions, obs, reward, terminated, truncated, terminated | truncated, raw)
        for observer in self.parts.observers:
            observer.on_step(step)
        for provider in self.parts.check_providers:  # after the observers: checks see this step's state
            provider.add_checks(latch)
        out = self.path.after_step(step, info)
        latch.close_batch(outer)
        latch.advance()
        return out
