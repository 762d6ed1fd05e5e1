"""``FixedShapeAutoresetVectorEnv``: same-step autoreset of done rows without host synchronisation.

The wrapper steps the inner env, then resets the rows whose episode ended, and returns Gymnasium
``AutoresetMode.SAME_STEP`` output: on a done row the observation is already the next episode's first,
``info["final_obs"]`` is the full-width observation before the reset and ``info["_final_obs"]`` the done
mask. The default (selected-row) path finds done rows with a host read, like every peer does; the
``reset_path="masked"`` resets with a full-width :class:`ResetSelection` every step, with no host
read, optionally captured once as a CUDA graph (see :mod:`gym_graphreset.capture.graph`).

How it is built: the configuration is a :class:`~gym_graphreset.core.config.StepConfig`; the inner env
chain and the reset terms are sorted by protocol role once (:mod:`gym_graphreset.core.participants`); the
reset path and the executor are objects chosen from the configuration at construction
(:mod:`gym_graphreset.core.stepping`, :mod:`gym_graphreset.core.executors`).
:meth:`FixedShapeAutoresetVectorEnv.step` only checks the actions, runs the executor, publishes and polls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Literal, Never

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gym_graphreset.capture.graph import AutoresetGraph, CaptureReport
from gym_graphreset.capture.host_transitions import HostTransitions
from gym_graphreset.core.buffers import PublicationRing
from gym_graphreset.core.capture_reporting import build_capture_report
from gym_graphreset.core.config import PresetName, StepConfig
from gym_graphreset.core.executors import GraphFactory, Runner, StepInputs
from gym_graphreset.core.failures import (
    CallGuard,
    ClosedEnvironmentError,
    ConcurrentCallError,
    InterruptedStepError,
    interruption,
)
from gym_graphreset.core.inputs import (
    action_bounds,
    check_actions,
    check_fixed_shape_spaces,
    check_process_group,
    check_reset_options,
    check_reset_terms,
    check_seed,
    env_device,
)
from gym_graphreset.core.participants import (
    Participants,
    claim_inner_env,
    claim_terms,
    record_inner_env,
    record_terms,
    release_inner_env,
    release_terms,
)
from gym_graphreset.core.polling import DeferredValidationError
from gym_graphreset.core.protocols import hook
from gym_graphreset.core.reset_paths import MaskedPath, SelectedRowPath
from gym_graphreset.core.same_step import StepOut
from gym_graphreset.core.selection import ResetSelection
from gym_graphreset.core.stepping import StepBody
from gym_graphreset.core.validation import ValidationLatch
from gym_graphreset.core.wrapper_checks import (
    check_inner_env,
    negotiate,
    partial_reset_refusal,
    poll_settings,
    raised,
    resolve_config,
)

__all__ = ["ClosedEnvironmentError", "ConcurrentCallError", "FixedShapeAutoresetVectorEnv", "InterruptedStepError"]


class FixedShapeAutoresetVectorEnv(VectorWrapper):
    """Wrap a torch ``VectorEnv`` (autoreset DISABLED or SAME_STEP) with a sync-free same-step autoreset.

    Args:
        env: The inner env (:class:`~gym_graphreset.core.protocols.TorchVectorEnv`: torch tensors, a ``device``).
            With ``AutoresetMode.DISABLED`` the wrapper resets done rows through
            ``env.reset(options={"reset_mask": ...})``; with ``SAME_STEP`` the inner env already did.
        config: A preset name (``"selected"``, ``"masked"``, ``"masked_persistent"``, ``"reset_graph"``,
            ``"step_graph"``) or a :class:`~gym_graphreset.core.config.StepConfig`; default: selected.
        reset_terms: ``{name: term}`` run in order after the inner env's reset
            (:class:`~gym_graphreset.core.protocols.ResetTerm` and its optional roles).
        process_group: With ``torch.distributed`` initialised: ``True`` (default group) or a group; every
            poll then all-gathers the verdicts of all ranks in one collective and a failure on any rank
            is raised on every rank, naming it (see :mod:`gym_graphreset.distributed`).
        published_buffer_depth: Applied over ``config`` when given (``StepConfig.published_buffer_depth``).
        validation_poll_interval: Applied over ``config`` when given (``StepConfig.validation_poll_interval``).

    Example:
        >>> from gym_graphreset.envs import CartPoleVectorEnv
        >>> env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8), "masked")
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(torch.ones(8, dtype=torch.long))
        >>> sorted(k for k in info if "final_obs" in k)
        ['_final_obs', 'final_obs']
    """

    def __init__(
        self,
        env: VectorEnv,
        config: StepConfig | PresetName | None = None,
        *,
        reset_terms: dict[str, Any] | None = None,
        process_group: Any = None,
        published_buffer_depth: int | None = None,
        validation_poll_interval: int | None = None,
        **unknown: Never,
    ) -> None:
        """Check the inner env and the configuration, then choose the reset path and the executor once.

        The arguments are described on the class. The reset terms are sorted by protocol role and bound
        here; nothing is stepped.

        Raises:
            TypeError: A keyword the wrapper does not take (named, with the accepted ones), or ``config`` of
                the wrong type.
            ValueError: The inner env uses ``AutoresetMode.NEXT_STEP``; ``reset_path="masked"`` with an inner
                env that autoresets itself; a ``graph`` off CUDA or where capture cannot work; the inner env
                (or a member of its chain) is already wrapped by another open wrapper (close that one first).
        """
        cfg = resolve_config(config, published_buffer_depth, validation_poll_interval, unknown)
        super().__init__(env)
        self._guard = CallGuard()
        self._closed = False
        claim_inner_env(self, env)  # one open wrapper per inner env (recorded once built)
        self.config = cfg
        terms = check_reset_terms(reset_terms)
        self.process_group = check_process_group(process_group)
        self.device = env_device(env)
        check_fixed_shape_spaces(env)
        self.inner_autoreset_mode = check_inner_env(env, cfg, self.device)
        self.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}
        self.selection = ResetSelection(self.num_envs, self.device)
        self.latch = ValidationLatch(self.device)
        self.transitions = HostTransitions()
        self.ring = PublicationRing(cfg.published_buffer_depth)
        self._action_bounds = action_bounds(self.single_action_space, self.device)
        self.host_step = 0
        self._failed: DeferredValidationError | None = None
        self._interrupted: str | None = None  # what raised part-way: the env fails closed until a full reset()
        self._raised: str | None = None  # what the last step()/reset() raised, if it raised
        self._needs_reset = True
        self._parts = Participants(env, {})
        self._add_terms(terms)
        self._build()
        record_terms(self, terms)
        record_inner_env(self, env)

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """``AutoresetMode.SAME_STEP``, as an attribute too (Gymnasium's vector envs and TorchRL read it)."""
        return AutoresetMode.SAME_STEP

    # ------------------------------------------------------------------ copies

    def __getstate__(self) -> dict[str, Any]:
        """The wrapper's state for ``copy.deepcopy`` and ``pickle`` (its call guard copies as a fresh one).

        Raises:
            RuntimeError: While a step or reset of this env runs (its state is half-way), or once a CUDA
                graph was captured (a graph cannot be copied; copy the env before its first step, or build
                another).
        """
        name = type(self).__name__
        if not self._guard.idle:
            raise RuntimeError(f"{name} cannot be copied or pickled from inside its own step() or reset()")
        if self.graph is not None:
            raise RuntimeError(
                f"{name} cannot be copied or pickled once it captured a CUDA graph (a graph is not copyable): "
                "copy it before its first step, or build another env"
            )
        return self.__dict__.copy()

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Take a copy's state; an open copy claims its inner env and terms as a new wrapper does.

        Raises:
            ValueError: A shallow copy (``copy.copy``): it would step the original's inner env.
        """
        self.__dict__.update(state)
        if self._closed:
            return
        try:
            claim_inner_env(self, self.env)
        except ValueError as err:
            raise ValueError(
                f"a shallow copy (copy.copy) of {type(self).__name__} would step the same inner env as the "
                "original; use copy.deepcopy (or pickle) for an independent copy"
            ) from err
        claim_terms(self, self._parts.terms)
        record_inner_env(self, self.env)
        record_terms(self, self._parts.terms)

    # ------------------------------------------------------------------ construction

    def _build(self) -> None:
        """Choose the reset path and the executor from the configuration (again when a term is added)."""
        cfg, parts = self.config, self._parts
        self._reset_runner: Runner[None] = Runner(None)
        path: SelectedRowPath | MaskedPath
        if cfg.reset_path == "masked":
            path = MaskedPath(
                self.env, parts, self.latch, self.selection, bool(cfg.persistent_buffers), self._reset_runner
            )
        else:
            inner_resets = self.inner_autoreset_mode == AutoresetMode.SAME_STEP
            path = SelectedRowPath(self.env, parts, self.latch, bool(cfg.persistent_buffers), inner_resets)
        self._inputs = StepInputs(static=cfg.graph == "step")
        holders = [self.selection, self.latch, path, self._inputs]  # every buffer holder of the wrapper's own
        factory = GraphFactory(self.device, cfg, parts, self.transitions, holders)
        self._reset_runner.factory = factory if cfg.graph == "reset" else None
        self._step_runner: Runner[StepOut] = Runner(factory if cfg.graph == "step" else None)
        self._body = StepBody(self.env, parts, self.latch, path, cfg.deferred, self._action_bounds, cfg.compile)
        self._path, self._graph_factory = path, factory

    def reset_selection_blockers(self) -> list[str]:
        """Names of every reset participant that cannot take a :class:`ResetSelection`."""
        return self._parts.reset_selection_blockers()

    def step_capture_blockers(self) -> list[str]:
        """Names of the inner-env chain members that do not declare ``supports_step_capture = True``."""
        return self._parts.step_capture_blockers()

    def capture_report(
        self,
        scope: Literal["reset", "step"] | None = None,
        *,
        check_host_reads: bool = False,
        actions: torch.Tensor | None = None,
    ) -> CaptureReport:
        """Why the reset body (``scope="reset"``) or the whole step (``"step"``) can or cannot be captured.

        Reasons are split into where the env runs (``device``, ``cuda_unavailable``, ``memory_pool``) and
        the env and terms themselves (``flags``, ``reset_selection_blockers``, ``step_capture_blockers``,
        ``host_reads``), so on a CPU the report still says whether the env would capture on a GPU
        (:attr:`CaptureReport.eligible_on_cuda`).

        A host read (``.item()``, ``if t.any():``...) in the inner env or a term is found only by running
        the body: with ``check_host_reads=True`` the report **takes one step** (with ``actions``, default
        :func:`~gym_graphreset.core.inputs.neutral_actions`; the env advances as by :meth:`step`, whose
        outputs are dropped) and counts the host reads of the scope's body on any device
        (:class:`~gym_graphreset.capture.host_reads.HostReadCounter`); each one is a reason. Without it
        (and before a graph of the scope captured, which is such a check) ``host_reads`` is ``None``
        and the report claims no eligibility. ``state["participants"]`` lists each participant's protocol
        roles; ``state["compile"]`` is the :class:`~gym_graphreset.capture.compiling.CompileReport` (as a
        dict) with ``config.compile``, else ``None``; the other ``state`` keys say what the graph did. Never
        a silent fallback: asking for capture when this report has reasons is a ``ValueError`` at
        construction.

        Raises:
            ValueError: An unknown ``scope``; ``actions`` without ``check_host_reads``; ``check_host_reads``
                with ``config.compile`` (its report, ``state["compile"]``, names every graph break: a
                host read is one).
            RuntimeError: ``check_host_reads`` before ``reset()`` (the check takes a step).
        """
        return build_capture_report(self, scope, check_host_reads, actions)

    def add_reset_term(self, name: str, term: Any) -> None:
        """Add a reset term, run after the inner env's reset and the terms added before it.

        A held graph is dropped (the next step captures again): the captured body no longer matches.
        """
        self._add_terms({name: term}, added=name)
        self._build()
        record_terms(self, {name: term})

    def _add_terms(self, terms: dict[str, Any], added: str | None = None) -> None:
        """Check ``terms`` (protocol, names, what the configuration needs of them), bind them, register them."""
        parts = self._parts
        for name, term in terms.items():
            parts = parts.with_term(name, term)  # checks the protocol and the name first
        negotiate(self.config, parts, added)
        claim_terms(self, terms, self._parts.terms)  # one term object, one env and one name (before bind)
        for bind in filter(None, (hook(term, "bind") for term in terms.values())):
            bind(self)
        parts.check_info_keys()
        self._parts = parts

    @property
    def validation_poll_interval(self) -> int:
        """Steps between polls with deferred validation (``config.validation_poll_interval``); settable."""
        return self.config.validation_poll_interval

    @validation_poll_interval.setter
    def validation_poll_interval(self, value: int) -> None:
        self.config = dataclasses.replace(self.config, validation_poll_interval=value)  # validated like at construction

    @property
    def reset_terms(self) -> dict[str, Any]:
        """The reset terms, in run order (a copy)."""
        return dict(self._parts.terms)

    @property
    def graph(self) -> AutoresetGraph[Any] | None:
        """The reset or step graph, once the first step made it (``None`` when not capturing)."""
        return self._reset_runner.graph or self._step_runner.graph

    # ------------------------------------------------------------------ validation

    def require(self, ok: torch.Tensor, name: str, message: str) -> None:
        """Latch a device-side verdict (no host read); a failure is raised at the next poll."""
        self.latch.require(ok, name, message)

    def require_many(self, ok: torch.Tensor, names: tuple[str, ...], messages: tuple[str, ...]) -> None:
        """Latch ``len(names)`` checks from a bool ``(k,)`` or per-row ``(rows, k)`` ``ok`` at once (no host read)."""
        self.latch.require_many(ok, names, messages)

    def poll_finite_validation(self) -> None:
        """One host read of every latched check; raise :class:`DeferredValidationError` on failure.

        With a ``process_group`` the poll is a collective: an env interrupted part-way announces it here
        (every rank raises :class:`~gym_graphreset.core.polling.CrossRankError` naming it).
        """
        self._poll()

    def _poll(self, closing: bool = False) -> None:
        """Poll the latch (across ranks: with this rank's settings, failure and whether it is closing)."""
        settings = poll_settings(self.config)
        failure = self._interrupted or (self._raised if closing else None)
        try:
            self.latch.poll(self.host_step, self.process_group, settings=settings, failure=failure, closing=closing)
        except DeferredValidationError as err:
            self._failed = err
            raise

    # ------------------------------------------------------------------ reset and step

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the env (all rows, or ``options["reset_mask"]``) and every reset term.

        Arguments are checked before anything changes: a refused reset leaves the env as it was. Pending
        latched checks are polled first: a failure found there is raised (and the env stays closed until
        the next ``reset()``). The first reset, and the one after an interrupted step or reset, must cover
        every row (a ``reset_mask`` that leaves rows out is refused). A reset that raises part-way leaves
        the env refusing to step until a full reset succeeds. A ``reset()`` called while a step or reset
        of this env runs (from a term, or another thread) is refused with :class:`ConcurrentCallError`.
        """
        with self._guarded("reset()", "reset"):
            return self._guarded_reset(seed, options)

    @contextmanager
    def _guarded(self, call: str, kind: Literal["reset", "step"]) -> Iterator[None]:
        """Run a step or reset inside the call guard (entered as ``call``), recording what it raised.

        ``close()`` tells the other ranks what the last call raised (``_raised``), named as ``reset()`` or
        ``step() <n>`` (the step number when it raised).

        Raises:
            ConcurrentCallError: A step or reset of this env runs already.
        """
        with self._guard.enter(call):
            try:
                yield
            except BaseException as exc:
                self._raised = raised("reset()" if kind == "reset" else f"step() {self.host_step + 1}", exc)
                raise
            self._raised = None

    def _check_open(self, call: str) -> None:
        """Refuse ``call`` on a closed env.

        Raises:
            ClosedEnvironmentError: The env was closed.
        """
        if self._closed:
            raise ClosedEnvironmentError(f"{call}() was called after close(); make a new env")

    def _refuse_step(self) -> None:
        """Refuse a step of an env that is closed, failed a poll, was interrupted part-way or was never reset.

        Raises:
            ClosedEnvironmentError: The env was closed.
            DeferredValidationError: A poll failed (raised again, as a new error of the same type).
            InterruptedStepError: A step or reset raised part-way, and no full ``reset()`` followed.
            RuntimeError: The env was not reset yet.
        """
        self._check_open("step")
        if self._failed is not None:
            raise type(self._failed)(self._failed.failures, self._failed.window)
        if self._interrupted is not None:
            raise InterruptedStepError(
                f"{self._interrupted}, so the inner env and the reset terms may disagree about some rows; "
                "the env refuses to step until a full reset() (without reset_mask)"
            )
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")

    def _guarded_reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        self._check_open("reset")
        seed = check_seed(seed)
        mask = check_reset_options(options, self.num_envs, self.device)
        if mask is not None and self._needs_reset and not bool(mask.all()):  # host read: reset() may read
            raise ValueError(partial_reset_refusal(self._interrupted))
        if self._failed is None:
            self.poll_finite_validation()
        try:
            return self._reset(seed, options, mask)
        except BaseException as exc:
            self._fail_closed("reset()", exc)
            raise

    def _fail_closed(self, call: str, exc: BaseException) -> None:
        """A step or reset raised part-way: refuse to step until a full reset() (a poll's failure is latched)."""
        if exc is not self._failed:
            self._interrupted = interruption(call, exc, self._parts)
            self._needs_reset = True

    def _reset(
        self, seed: int | None, options: dict[str, Any] | None, mask: torch.Tensor | None
    ) -> tuple[Any, dict[str, Any]]:
        self._failed = None
        self._interrupted = None
        self.latch.clear()
        inner_options = None if options is None else {**options, **({} if mask is None else {"reset_mask": mask})}
        obs, info = self._path.reset(seed, inner_options, mask)
        self._needs_reset = False
        if not self.config.deferred:
            self.poll_finite_validation()
        if self.config.persistent_buffers:
            obs, info = self.ring.publish((obs, info), step=False)  # a reset counts no step: the promise holds
        return obs, info

    def step(self, actions: torch.Tensor | np.ndarray) -> StepOut:
        """Step every row and reset the rows that finished (SAME_STEP output).

        ``actions`` is a tensor on the env's device (the fast path) or a numpy array, such as
        ``env.action_space.sample()``: it is copied to the device first (a memcpy on the CPU; on CUDA a
        host-to-device copy that makes the host wait, every step; see
        :func:`~gym_graphreset.core.inputs.check_actions`).

        A step that raises part-way (in the inner env, a term, a graph's capture or replay, or a
        ``KeyboardInterrupt``) fails closed: later steps raise :class:`InterruptedStepError`, naming what
        was interrupted, until a full ``reset()``. A ``step()`` called while a step or reset of this env runs
        (re-entered from a term or the inner env, or from a second thread) is refused with
        :class:`ConcurrentCallError`, changing nothing; the running call goes on.
        """
        call = f"step() {self.host_step + 1}" if self._guard.idle else "step()"
        with self._guarded(call, "step"):
            return self._guarded_step(actions)

    def _guarded_step(self, actions: torch.Tensor | np.ndarray) -> StepOut:
        self._refuse_step()
        space, read_values = self.single_action_space, not self.config.deferred
        actions = check_actions(actions, space, self.num_envs, self.device, read_values=read_values)
        index = self.host_step + 1
        try:
            static = self._inputs.take(actions)  # the step graph's static input (as given without one)
            out = self._step_runner(partial(self._body, static))
            self.host_step += 1
            if self.config.persistent_buffers:
                out = self.ring.publish(out)
            if read_values or self.host_step % self.config.validation_poll_interval == 0:
                self.poll_finite_validation()
        except BaseException as exc:
            self._fail_closed(f"step() {index}", exc)
            raise
        obs, reward, terminated, truncated, info = out
        return obs, reward, terminated, truncated, dict(info)

    def close(self, **kwargs: Any) -> None:
        """Poll pending checks (raising a failure), then close the inner env; later calls are refused.

        With a ``process_group`` this poll is the rank's last collective: it tells the other ranks it is
        leaving, and why if its last step or reset raised (they raise
        :class:`~gym_graphreset.core.polling.CrossRankError` naming it). Refused
        (:class:`ConcurrentCallError`) while a step or reset of this env runs.
        """
        with self._guard.enter("close()"):
            self._guarded_close(**kwargs)

    def _guarded_close(self, **kwargs: Any) -> None:
        try:
            if self._failed is None and not self._closed:
                self._poll(closing=True)  # across ranks: the last collective, telling the others
        finally:
            self._closed = True
            release_terms(self, self._parts.terms)  # a closed env's terms may serve another env
            release_inner_env(self, self.env)  # and its inner env another wrapper
            super().close(**kwargs)
