"""``FixedShapeAutoresetVectorEnv``: same-step autoreset of done rows without host synchronisation.

The wrapper steps the inner env, then resets the rows whose episode ended, and returns Gymnasium
``AutoresetMode.SAME_STEP`` output: on a done row the observation is already the next episode's first,
``info["final_obs"]`` is the full-width observation before the reset and ``info["_final_obs"]`` the done
mask. The default (selected-row) path finds done rows with a host read, like every peer does; the
``masked_autoreset`` path resets with a full-width :class:`ResetSelection` every step, with no host
read, optionally captured once as a CUDA graph (see :mod:`gym_graphreset.graph`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gym_graphreset.buffers import PublicationRing, TensorStore, tree_copy_, tree_leaves, tree_map, tree_where
from gym_graphreset.graph import AutoresetGraph, CaptureReport, check_capture_mode, cuda_capture_reasons
from gym_graphreset.host_transitions import HostTransitions
from gym_graphreset.selection import (
    ResetSelection,
    ResetSelectionUnsupportedError,
    participant_name,
    resolve_reset_mask,
    supports_reset_selection,
)
from gym_graphreset.validation import DeferredValidationError, ValidationLatch, all_finite, finite_rows

__all__ = ["FixedShapeAutoresetVectorEnv"]


def _env_device(env: VectorEnv) -> torch.device:
    device = getattr(env, "device", None)
    device = torch.device(device if device is not None else "cpu")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _autoreset_mode(env: VectorEnv) -> AutoresetMode:
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return AutoresetMode(mode) if not isinstance(mode, AutoresetMode) else mode


def _check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be a bool, got {value!r}")
    return value


class FixedShapeAutoresetVectorEnv(VectorWrapper):
    """Wrap a torch ``VectorEnv`` (autoreset DISABLED or SAME_STEP) with a sync-free same-step autoreset.

    Args:
        env: The inner env. With ``AutoresetMode.DISABLED`` the wrapper resets done rows through
            ``env.reset(options={"reset_mask": ...})``; with ``SAME_STEP`` the inner env already did.
        masked_autoreset: Reset through a full-width mask every step (no host read); publish
            ``final_obs`` every step. Needs ``defer_finite_validation`` and a DISABLED inner env whose
            reset participants all take a :class:`ResetSelection`.
        defer_finite_validation: Latch checks on the device and poll them every
            ``validation_poll_interval`` steps (otherwise after every step).
        validation_poll_interval: Steps between polls in deferred mode.
        persistent_step_buffers: Keep obs/reward/flag carriers at fixed addresses, updated in place,
            and publish copies through a ring of ``published_buffer_depth`` slots.
        published_buffer_depth: What step ``t`` returned stays unchanged through step ``t + depth - 1``.
        autoreset_cuda_graph: Capture the masked reset body (``cuda_graph_scope="reset"``) or the whole
            step (``"step"``) as one CUDA graph after ``autoreset_graph_warmup`` eager steps.
        autoreset_graph_warmup: Eager steps before the capture.
        autoreset_graph_capture_mode: CUDA stream capture mode for torch and warp alike.
        cuda_graph_scope: ``"reset"`` or ``"step"``.
        reset_terms: ``{name: term}`` run in order after the inner env's reset (see :mod:`.terms`).
        process_group: With ``torch.distributed``: ``True`` (default group) or a group; every poll then
            all-gathers the verdicts of all ranks in one collective (none per step) and a failure on any
            rank is raised on every rank, naming it (see :mod:`gym_graphreset.distributed`).

    Example:
        >>> from gym_graphreset.envs import CartPoleVectorEnv
        >>> env = FixedShapeAutoresetVectorEnv(
        ...     CartPoleVectorEnv(8), masked_autoreset=True, defer_finite_validation=True)
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(torch.ones(8, dtype=torch.long))
        >>> sorted(k for k in info if "final_obs" in k)
        ['_final_obs', 'final_obs']
    """

    def __init__(
        self,
        env: VectorEnv,
        *,
        masked_autoreset: bool = False,
        defer_finite_validation: bool = False,
        validation_poll_interval: int = 32,
        persistent_step_buffers: bool = False,
        published_buffer_depth: int = 2,
        autoreset_cuda_graph: bool = False,
        autoreset_graph_warmup: int = 3,
        autoreset_graph_capture_mode: str = "thread_local",
        cuda_graph_scope: str = "reset",
        reset_terms: dict[str, Any] | None = None,
        process_group: Any = None,
    ) -> None:
        super().__init__(env)
        self.process_group = process_group
        self.masked_autoreset = _check_flag("masked_autoreset", masked_autoreset)
        self.defer_finite_validation = _check_flag("defer_finite_validation", defer_finite_validation)
        self.persistent_step_buffers = _check_flag("persistent_step_buffers", persistent_step_buffers)
        self.autoreset_cuda_graph = _check_flag("autoreset_cuda_graph", autoreset_cuda_graph)
        if (
            isinstance(validation_poll_interval, bool)
            or not isinstance(validation_poll_interval, int)
            or (validation_poll_interval < 1)
        ):
            raise ValueError(f"`validation_poll_interval` must be an int >= 1, got {validation_poll_interval!r}")
        self.validation_poll_interval = validation_poll_interval
        self.ring = PublicationRing(published_buffer_depth)
        if cuda_graph_scope not in ("reset", "step"):
            raise ValueError(f"`cuda_graph_scope` must be 'reset' or 'step', got {cuda_graph_scope!r}")
        self.cuda_graph_scope = cuda_graph_scope
        self.autoreset_graph_capture_mode = check_capture_mode(autoreset_graph_capture_mode)
        if (
            isinstance(autoreset_graph_warmup, bool)
            or not isinstance(autoreset_graph_warmup, int)
            or (autoreset_graph_warmup < 0)
        ):
            raise ValueError(f"`autoreset_graph_warmup` must be an int >= 0, got {autoreset_graph_warmup!r}")
        self.autoreset_graph_warmup = autoreset_graph_warmup

        if masked_autoreset and not defer_finite_validation:
            raise ValueError(
                "`masked_autoreset=True` requires `defer_finite_validation=True`: checking every step "
                "would read the host every step"
            )
        if autoreset_cuda_graph and not (masked_autoreset and persistent_step_buffers):
            raise ValueError(
                "`autoreset_cuda_graph=True` requires `masked_autoreset=True` and "
                f"`persistent_step_buffers=True`, got masked_autoreset={masked_autoreset}, "
                f"persistent_step_buffers={persistent_step_buffers}"
            )
        if cuda_graph_scope == "step" and not autoreset_cuda_graph:
            raise ValueError("`cuda_graph_scope='step'` requires `autoreset_cuda_graph=True`")

        self.inner_autoreset_mode = _autoreset_mode(env)
        if self.inner_autoreset_mode == AutoresetMode.NEXT_STEP:
            raise ValueError(
                f"the inner env {participant_name(env)} uses AutoresetMode.NEXT_STEP (or declares no "
                "metadata['autoreset_mode']); build it with autoreset_mode=AutoresetMode.DISABLED so that "
                "this wrapper resets done rows itself"
            )
        if masked_autoreset and self.inner_autoreset_mode != AutoresetMode.DISABLED:
            raise ValueError(
                f"`masked_autoreset=True` needs an inner env with AutoresetMode.DISABLED, got "
                f"{self.inner_autoreset_mode}"
            )

        self.device = _env_device(env)
        if autoreset_cuda_graph and self.device.type != "cuda":
            raise ValueError(f"`autoreset_cuda_graph=True` needs a CUDA env, but the env is on device {self.device}")
        if autoreset_cuda_graph and cuda_capture_reasons(self.device):
            raise ValueError(f"`autoreset_cuda_graph=True` but {CaptureReport('', cuda_capture_reasons(self.device))}")
        self.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}

        self.selection = ResetSelection(self.num_envs, self.device)
        self.latch = ValidationLatch(self.device)
        self.transitions = HostTransitions()
        self._carriers = TensorStore()
        self._c: dict[str, Any] | None = None  # carrier tree, fixed once written
        self._terms: dict[str, Any] = {}
        self.host_step = 0
        self._failed: DeferredValidationError | None = None
        self._needs_reset = True
        self._graph: AutoresetGraph[Any] | None = None
        self._static_actions: torch.Tensor | None = None
        for name, term in (reset_terms or {}).items():
            self._add_term(name, term)

        if masked_autoreset:
            blockers = self.reset_selection_blockers()
            if blockers:
                raise ResetSelectionUnsupportedError(
                    "`masked_autoreset=True` but these reset participants cannot take a ResetSelection: "
                    f"{', '.join(blockers)}. Declare `supports_reset_selection = True` (or use "
                    "@reset_selection_capable) on each after converting its reset to masked writes."
                )
        if autoreset_cuda_graph and cuda_graph_scope == "step":
            blockers = self.step_capture_blockers()
            if blockers:
                raise ValueError(
                    "`cuda_graph_scope='step'` captures the whole step, but these participants do not declare "
                    f"`supports_step_capture = True`: {', '.join(blockers)}; use cuda_graph_scope='reset'"
                )

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """``AutoresetMode.SAME_STEP``, as an attribute too (Gymnasium's vector envs and TorchRL read it)."""
        return AutoresetMode.SAME_STEP

    # ------------------------------------------------------------------ negotiation

    def _chain(self) -> Iterator[VectorEnv]:
        env: VectorEnv = self.env
        while isinstance(env, VectorWrapper):
            yield env
            env = env.env
        yield env

    def _reset_participants(self) -> Iterator[tuple[str, Any]]:
        for env in self._chain():
            if isinstance(env, VectorWrapper) and type(env).reset is VectorWrapper.reset:
                continue  # a pure forwarder: its inner env is the participant
            yield participant_name(env), env
        yield from self._terms.items()

    def reset_selection_blockers(self) -> list[str]:
        """Names of every reset participant that cannot take a :class:`ResetSelection`."""
        return [name for name, obj in self._reset_participants() if not supports_reset_selection(obj)]

    def step_capture_blockers(self) -> list[str]:
        """Names of the inner-env chain members that do not declare ``supports_step_capture = True``."""
        return [
            participant_name(env)
            for env in self._chain()
            if not getattr(env, "supports_step_capture", False)
            and not (isinstance(env, VectorWrapper) and type(env).step is VectorWrapper.step)
        ]

    def capture_report(self, scope: str | None = None) -> CaptureReport:
        """Why the reset body (``scope="reset"``) or the whole step (``"step"``) can or cannot be captured.

        Never a silent fallback: asking for capture when this report has reasons is a ``ValueError`` at
        construction; this method lets you ask before (and see what the graph did after).
        """
        scope = scope or self.cuda_graph_scope
        reasons = cuda_capture_reasons(self.device)
        missing = [f for f in ("masked_autoreset", "persistent_step_buffers") if not getattr(self, f)]
        if missing:
            reasons["flags"] = f"capture needs {' and '.join(f'`{f}=True`' for f in missing)}"
        blockers = self.reset_selection_blockers()
        if blockers:
            reasons["reset_selection_blockers"] = f"cannot take a ResetSelection: {', '.join(blockers)}"
        if scope == "step" and self.step_capture_blockers():
            reasons["step_capture_blockers"] = (
                f"do not declare supports_step_capture: {', '.join(self.step_capture_blockers())}"
            )
        graph = self._graph
        state = {
            "captured": bool(graph and graph.captured),
            "captures": graph.captures if graph else 0,
            "replays": graph.replays if graph else 0,
            "eager_calls": graph.eager_calls if graph else 0,
            "host_transitions": graph.transitions.names if graph else [],
        }
        return CaptureReport(scope, reasons, state)

    def add_reset_term(self, name: str, term: Any) -> None:
        """Add a reset term, run after the inner env's reset and the terms added before it."""
        if callable(getattr(term, "reset", None)) and self.masked_autoreset and not supports_reset_selection(term):
            raise ResetSelectionUnsupportedError(
                f"`masked_autoreset=True` but reset term {name!r} cannot take a ResetSelection"
            )
        self._add_term(name, term)

    def _add_term(self, name: str, term: Any) -> None:
        if not callable(getattr(term, "reset", None)):
            raise TypeError(f"reset term {name!r} must have a `reset(env_ids)` method, got {type(term).__name__}")
        if name in self._terms:
            raise ValueError(f"a reset term named {name!r} already exists; names: {list(self._terms)}")
        if callable(getattr(term, "bind", None)):
            term.bind(self)
        self._terms[name] = term
        if self._graph is not None:
            self._graph.invalidate()  # the captured body no longer matches

    @property
    def reset_terms(self) -> dict[str, Any]:
        """The reset terms, in run order (a copy)."""
        return dict(self._terms)

    @property
    def graph(self) -> AutoresetGraph[Any] | None:
        """The reset or step graph, once the first step made it (``None`` when not capturing)."""
        return self._graph

    # ------------------------------------------------------------------ validation

    def require(self, ok: torch.Tensor, name: str, message: str) -> None:
        """Latch a device-side verdict (no host read); a failure is raised at the next poll."""
        self.latch.require(ok, name, message)

    def require_many(self, ok: torch.Tensor, names: tuple[str, ...], messages: tuple[str, ...]) -> None:
        """Latch ``len(names)`` verdicts from a bool ``(k,)`` tensor in one vectorised write (no host read)."""
        self.latch.require_many(ok, names, messages)

    def poll_finite_validation(self) -> None:
        """One host read of every latched check; raise :class:`DeferredValidationError` on failure."""
        try:
            self.latch.poll(self.host_step, self.process_group)
        except DeferredValidationError as err:
            self._failed = err
            raise

    def _check_actions(self, actions: Any) -> torch.Tensor:
        expected = (self.num_envs, *(self.single_action_space.shape or ()))
        if not isinstance(actions, torch.Tensor):
            raise ValueError(f"actions must be a torch.Tensor on {self.device}, got {type(actions).__name__}")
        if tuple(actions.shape) != expected:
            raise ValueError(f"actions must have shape {expected}, got {tuple(actions.shape)}")
        space = self.single_action_space
        if isinstance(space, gym.spaces.Box):
            ok_dtype, accepted = actions.dtype.is_floating_point, "a floating dtype"
        elif isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            ok_dtype = not actions.dtype.is_floating_point and not actions.dtype.is_complex
            ok_dtype, accepted = ok_dtype and actions.dtype != torch.bool, "an integer dtype"
        else:
            ok_dtype, accepted = True, "any dtype"
        if not ok_dtype:
            raise ValueError(
                f"actions must have {accepted} for a {type(space).__name__} action space, got {actions.dtype}"
            )
        if actions.device != self.device:
            raise ValueError(f"actions must be on device {self.device}, got {actions.device}")
        if not self.defer_finite_validation and actions.dtype.is_floating_point:
            finite = torch.isfinite(actions).reshape(self.num_envs, -1).all(dim=1)
            if not bool(finite.all()):  # host read: this is the non-deferred mode
                rows = (~finite).nonzero().flatten().tolist()
                raise ValueError(f"actions must be finite; NaN or inf in rows {rows[:16]}")
        return actions

    # ------------------------------------------------------------------ reset

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the env (all rows, or ``options["reset_mask"]``) and every reset term.

        Pending latched checks are polled first: a failure found there is raised (and the env stays
        closed until the next ``reset()``).
        """
        pending, self._failed = self._failed, None
        if pending is None:
            try:
                self.latch.poll(self.host_step, self.process_group)
            except DeferredValidationError as err:
                self._failed = err
                raise
        self.latch.clear()
        inner_options = dict(options) if options else None  # never mutate the caller's dict
        obs, info = self.env.reset(seed=seed, options=inner_options)
        reset_mask = None if inner_options is None else inner_options.get("reset_mask")
        rows = None if reset_mask is None else resolve_reset_mask(reset_mask, self.num_envs, self.device)
        if self.masked_autoreset:
            self.selection.mask.copy_(rows if rows is not None else torch.ones_like(self.selection.mask))
            sel: Any = self.selection
        else:
            sel = rows
        for term in self._terms.values():
            term.reset(sel)
            if reset_mask is None and callable(getattr(term, "clear_published", None)):
                term.clear_published()
        self._needs_reset = False
        if self.persistent_step_buffers:
            obs = self._write_reset_carriers(obs)
            obs, info = self.ring.publish((obs, info))
        return obs, info

    def _write_reset_carriers(self, obs: Any) -> Any:
        if self._c is None:
            return obs  # carriers get allocated on the first step
        tree_copy_(self._c["obs"], obs)
        return self._c["obs"]

    # ------------------------------------------------------------------ step

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every row and reset the rows that finished (SAME_STEP output)."""
        if self._failed is not None:
            raise DeferredValidationError(self._failed.failures, self._failed.window)
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = self._check_actions(actions)
        if self._graph is not None and self.cuda_graph_scope == "step":
            assert self._static_actions is not None
            self._static_actions.copy_(actions)
            out = self._graph()
        elif self.autoreset_cuda_graph and self.cuda_graph_scope == "step":
            out = self._first_captured_step(actions)
        else:
            out = self._step_body(actions)
        self.host_step += 1
        if self.persistent_step_buffers:
            out = self.ring.publish(out)
        if not self.defer_finite_validation or self.host_step % self.validation_poll_interval == 0:
            self.poll_finite_validation()
        obs, reward, terminated, truncated, info = out
        return obs, reward, terminated, truncated, dict(info)

    def _first_captured_step(self, actions: torch.Tensor) -> Any:
        static = self._static_actions = actions.clone()
        self._graph = self._make_graph(lambda: self._step_body(static))
        return self._graph()

    def _make_graph(self, body: Callable[[], Any]) -> AutoresetGraph[Any]:
        stream = None
        scopes = []
        generators: list[torch.Generator] = []
        for obj in (*self._chain(), *self._terms.values()):
            stream = stream or getattr(obj, "cuda_stream", None)
            scope = getattr(obj, "graph_capture_scope", None)
            if callable(scope):
                scopes.append(scope)
            gens = getattr(obj, "torch_generators", None)
            if callable(gens):
                generators.extend(gens())
        return AutoresetGraph(
            body,
            device=self.device,
            warmup=self.autoreset_graph_warmup,
            capture_mode=self.autoreset_graph_capture_mode,
            stream=stream,
            generators=generators,
            capture_scopes=scopes,
            fingerprint=self._fingerprint,
            transitions=self.transitions,
        )

    def _fingerprint(self) -> Hashable:
        hooks = (getattr(obj, "capture_fingerprint", None) for obj in (*self._chain(), *self._terms.values()))
        inner = tuple(hook() for hook in hooks if callable(hook))
        actions = self._static_actions.data_ptr() if self._static_actions is not None else 0
        carriers = tuple(self._carriers.pointers().items())  # insertion order is fixed
        return (self.selection.mask.data_ptr(), actions, carriers, inner, tuple(self._terms))

    def _step_body(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        with self.latch.batch():  # every verdict of the step latched in one write, stamped with its index
            if self.defer_finite_validation and actions.dtype.is_floating_point:
                finite = (actions * 0) == 0  # isfinite in two kernels
                self.require(finite, "finite_actions", "actions contained NaN or inf (those entries were zeroed)")
                actions = torch.where(finite, actions, 0.0)
            obs, reward, terminated, truncated, info = self.env.step(actions)
            self._builtin_checks(obs, reward)
            for term in self._terms.values():
                if callable(getattr(term, "on_step", None)):
                    term.on_step(reward, terminated, truncated)
            done = terminated | truncated
            if self.masked_autoreset:
                out = self._masked_step(obs, reward, terminated, truncated, done, info)
            else:
                out = self._selected_step(obs, reward, terminated, truncated, done, info)
        self.latch.advance()
        return out

    def _builtin_checks(self, obs: Any, reward: torch.Tensor) -> None:
        for _, leaf in tree_leaves(obs):
            if leaf.dtype.is_floating_point:
                self.require(all_finite(leaf), "finite_obs", "the inner env returned NaN or inf observations")
        self.require(all_finite(reward), "finite_reward", "the inner env returned NaN or inf rewards")
        for env in self._chain():
            checks = getattr(env, "deferred_checks", None)
            if callable(checks):
                checks(self)  # backend checks call self.require / self.require_many

    def _term_infos(self, info: dict[str, Any]) -> None:
        for term in self._terms.values():
            if callable(getattr(term, "info", None)):
                info.update(term.info())

    def _selected_step(
        self,
        obs: Any,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        done: torch.Tensor,
        info: dict[str, Any],
    ) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        info = dict(info)
        same_step = self.inner_autoreset_mode == AutoresetMode.SAME_STEP
        if bool(done.any()):  # host read: the classic gate
            env_ids = done.nonzero().flatten()  # host read: the classic row ids
            if not same_step:
                final_obs = tree_where(done, obs, obs)  # a copy the inner reset cannot alias
                reset_obs, _ = self.env.reset(options={"reset_mask": done})
                obs = tree_where(done, reset_obs, final_obs)
                info["final_obs"], info["_final_obs"] = final_obs, done
            for term in self._terms.values():
                term.reset(env_ids)
            self._term_infos(info)
        if self.persistent_step_buffers:
            c = self._carriers.write({"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated})
            obs, reward, terminated, truncated = c["obs"], c["reward"], c["terminated"], c["truncated"]
        return obs, reward, terminated, truncated, info

    def _masked_step(
        self,
        obs: Any,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        done: torch.Tensor,
        info: dict[str, Any],
    ) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        info = dict(info)
        if self.persistent_step_buffers:
            c = self._carriers.write(
                {"final_obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated, "done": done}
            )
            if self._c is None:  # the post-reset obs carrier: written whole by the reset body, never copied in
                self._c = {"obs": tree_map(torch.empty_like, c["final_obs"])}
            c["obs"] = self._c["obs"]
            self._c = c
            if self.autoreset_cuda_graph and self.cuda_graph_scope == "reset":
                if self._graph is None:
                    self._graph = self._make_graph(self._reset_carriers_body)
                self._graph()
            else:
                self._reset_carriers_body()
            obs, final_obs = c["obs"], c["final_obs"]
            reward, terminated, truncated, done = c["reward"], c["terminated"], c["truncated"], c["done"]
        else:
            final_obs = tree_where(done, obs, obs)  # a copy the inner reset cannot alias
            obs = self._masked_reset(final_obs, done)
        info["final_obs"], info["_final_obs"] = final_obs, done
        self._term_infos(info)
        return obs, reward, terminated, truncated, info

    def _reset_carriers_body(self) -> None:
        assert self._c is not None
        tree_copy_(self._c["obs"], self._masked_reset(self._c["final_obs"], self._c["done"]))

    def _masked_reset(self, step_obs: Any, done: torch.Tensor) -> Any:
        """The masked reset body: inner env, then terms, over the full width (no host read)."""
        with self.latch.batch():  # latched inside this body (its own graph in the reset scope)
            self.selection.mask.copy_(done)
            reset_obs, _ = self.env.reset(options={"reset_mask": self.selection})
            for term in self._terms.values():
                term.reset(self.selection)
            for _, leaf in tree_leaves(reset_obs):
                if leaf.dtype.is_floating_point:
                    ok = finite_rows(leaf) | ~done
                    self.require(ok, "finite_reset_obs", "the masked reset produced NaN or inf observations")
            return tree_where(done, reset_obs, step_obs)

    def close(self, **kwargs: Any) -> None:
        """Poll pending checks (raising a failure), then close the inner env."""
        try:
            if self._failed is None and not self.closed:
                self.poll_finite_validation()
        finally:
            super().close(**kwargs)
