"""``MJWarpVectorEnv``: MuJoCo Warp worlds as a Gymnasium ``VectorEnv`` of torch tensors, zero copy.

One MJCF model, ``num_envs`` worlds (``nworld`` at the MuJoCo Warp boundary). State is read and written
through torch views of the warp arrays (``wp.to_torch``); torch and warp launch on one stream. On CUDA the
``frame_skip`` physics substeps and the masked reset are each a captured warp graph when run eagerly,
and plain launches when the wrapper is capturing its own torch graph (warp joins it through external
capture). On the CPU warp's CPU backend runs the same code.

The masked reset reads no host data: ``mujoco_warp.reset_data`` with a preallocated ``wp.array`` mask,
masked writes of counter-based initial-state draws, then the position/velocity kinematics that
observations read. Task subclasses (:mod:`gym_graphreset.envs.gym_mujoco.tasks`) define observation, reward,
termination and reset noise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, SupportsIndex

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

import gym_graphreset.envs.mjwarp.checks as mjwarp_checks
from gym_graphreset.core.inputs import check_device, check_env_counts, check_positive_int, inner_actions
from gym_graphreset.core.protocols import CheckSink
from gym_graphreset.core.rng import EpisodeKeys, StreamAllocator, bits_to_normal, bits_to_uniform, counter_bits
from gym_graphreset.core.selection import options_reset_mask, resolve_reset_mask
from gym_graphreset.envs.mjwarp.checks import WorldChecks
from gym_graphreset.envs.mjwarp.constants import SET_CONST_FIELDS
from gym_graphreset.envs.mjwarp.frames import WorldFrames, WorldRenderer, check_render_args
from gym_graphreset.envs.mjwarp.runtime import WarpRuntime

if TYPE_CHECKING:
    from gym_graphreset.envs.mjwarp.substeps import SubstepRecord

__all__ = ["OVERFLOW_CHECKS", "InitialStateDraws", "MJWarpVectorEnv", "check_contact_limits", "default_device"]

InitialStateDraws = Literal["engine", "task"]
"""Who draws a new episode's initial state: the engine's noise around ``init_qpos``, or the task's proposals."""

OVERFLOW_CHECKS: dict[str, int] = mjwarp_checks.OVERFLOW_CHECKS
"""Overflow name -> bit of ``d.overflow`` for every latched check (``mjwarp_overflow[NAME]``)."""


def default_device() -> torch.device:
    """CUDA when available, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def check_contact_limits(nconmax: int | None, njmax: int | None) -> None:
    """Refuse a ``nconmax``/``njmax`` that is not ``None`` or an int >= 1."""
    for name, value in (("nconmax", nconmax), ("njmax", njmax)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(
                f"`{name}` must be None (MuJoCo Warp's default) or an int >= 1, got {value!r}: a world "
                "without room for contacts/constraints would silently drop them"
            )


def _check_initial_state_draws(cls: type[MJWarpVectorEnv]) -> None:
    """Refuse an unknown ``initial_state_draws``, or own draws that the fused reset would ignore (``"engine"``)."""
    draws = cls.initial_state_draws
    if draws not in ("engine", "task"):
        raise ValueError(f"{cls.__name__}.initial_state_draws must be 'engine' or 'task', got {draws!r}")
    if draws == "engine" and cls._sample_initial_state is not MJWarpVectorEnv._sample_initial_state:
        raise ValueError(
            f"{cls.__name__} overrides _sample_initial_state but declares initial_state_draws='engine', so the "
            "fused reset would draw the engine's noise instead: declare initial_state_draws = 'task' on the class"
        )


class MJWarpVectorEnv(VectorEnv):
    """A batch of MuJoCo Warp worlds of one model, stepped and reset with no host read.

    Subclassing (a task of your own): implement :meth:`_observe` and :meth:`_reward_terminated`; override
    the other hooks as needed. The constructor runs, in this order:

    1. the argument checks, the device check first (``device``; nothing is allocated before it);
    2. the model: loaded, ``model_edits`` applied, put on the device with ``num_envs`` worlds, and the
       base state (``qpos``/``qvel``/``ctrl`` views, ``keys``, ``elapsed``, ``checks``, ``init_qpos``...);
    3. the action space, from the actuators' control ranges;
    4. :meth:`_setup_task` (no-op by default): allocate the task's buffers and constants here, not
       before ``super().__init__()`` (plain configuration attributes may be set before it). The model,
       the data and the base state exist; the worlds are not reset yet. It may replace the action space;
    5. :meth:`_progress`'s buffer and the reset strategy;
    6. one :meth:`reset` (an overriding ``reset`` is the one called), whose observation gives the
       observation space: a ``(num_envs, d)`` tensor gives a ``Box``, a dict of them (observation groups)
       a ``Dict`` of boxes.

    Hooks: :meth:`_observe`, :meth:`_reward_terminated` (required); :meth:`_reset_task` (the task's own
    reset, with masked writes, between the physics reset and the observation); :meth:`_progress`;
    :meth:`_sample_initial_state` (own initial-state draws, with ``initial_state_draws = "task"``: the fused
    reset writes them, as it writes the engine's). A task
    that replaces whole phases fills :meth:`_apply_actions` (actions to actuators), :meth:`_task_step`
    (everything after the physics), :meth:`_before_reset` and :meth:`_after_reset` instead (the task
    layer's :class:`~gym_graphreset.managers.manager_based_env.ManagerBasedEnv` does). :meth:`reset` and :meth:`step`
    are a fixed template around them: the step records ``checks`` (overflow, finite state) after the physics,
    so no task can skip it. Every hook runs inside a step or reset that may be captured: masked writes, no
    host read, counter-based draws (:mod:`gym_graphreset.core.rng`, one stream per use: ``self.streams(name)``).

    Args:
        model: Path to an MJCF file, or the XML itself.
        num_envs: Number of worlds.
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (default: CUDA when available).
        frame_skip: Physics substeps per env step.
        nconmax: Contacts allocated per world (``None``: MuJoCo Warp's default).
        njmax: Constraint rows allocated per world (``None``: MuJoCo Warp's default).
        max_episode_steps: Truncation horizon.
        global_env_offset: Global index of world 0, for several processes splitting one population.
        model_edits: Called with the ``mujoco.MjModel`` before it goes to the device.
        kernel_reset: Reset worlds with one fused warp kernel, whatever ``initial_state_draws`` says (the
            engine's draws are bit-identical to :meth:`_sample_initial_state`'s default for uniform noise, to
            float32 rounding for normal noise; a task's proposals are copied); ``False`` runs the reference
            path (``reset_data`` + torch draws + masked writes). :meth:`reset_report` says which one runs.
        render_mode: ``None`` or ``"rgb_array"``: :meth:`render` then returns frames of the worlds
            (:class:`~gym_graphreset.envs.mjwarp.frames.WorldFrames`), for Gymnasium's ``RecordVideo``.
        render_worlds: The worlds :meth:`render` draws, in order; ``None`` (default): one frame per world,
            as Gymnasium's vector envs return, each drawn only when read.
        render_size: ``(width, height)`` of each frame in pixels.
        warp_verbose: Let warp log its module loads (quiet by default: only its warnings and errors).

    Attributes:
        m: The MuJoCo Warp model (``mujoco_warp.Model``); ``batched_model_fields`` have a leading ``nworld``.
        d: The MuJoCo Warp data (``mujoco_warp.Data``) of all worlds.
        qpos: ``(nworld, nq)`` float32, zero-copy torch view of ``d.qpos``.
        qvel: ``(nworld, nv)`` float32, view of ``d.qvel``.
        ctrl: ``(nworld, nu)`` float32, view of ``d.ctrl`` (the step writes the actions here).
        xpos: ``(nworld, nbody, 3)``; ``xipos``: ``(nworld, nbody, 3)``; ``site_xpos``: ``(nworld, nsite, 3)``.
        cinert: ``(nworld, nbody, 10)``; ``cvel``: ``(nworld, nbody, 6)``; ``cfrc_ext``: ``(nworld, nbody, 6)``.
        qfrc_actuator: ``(nworld, nv)``; ``qfrc_constraint``: ``(nworld, nv)``.
        overflow: ``(nworld,)`` int, view of ``d.overflow`` (MuJoCo Warp's sticky ``OverflowType`` bits).
        checks: The :class:`~gym_graphreset.envs.mjwarp.checks.WorldChecks` that
            the step records after the physics (``checks.record(qpos, qvel)``) and
            :meth:`add_checks` latches.
        overflow_seen: ``(nworld,)`` int, the bits ORed since the last check (``checks.seen``).
        state_finite: ``(nworld,)`` bool, whether each world's qpos and qvel were finite after the last
            step's physics (``checks.state_finite``; tasks' healthy tests read it too).
        elapsed: ``(nworld,)`` int64, steps in the current episode (truncation at ``max_episode_steps``).
        keys: The counter-RNG keys (:class:`~gym_graphreset.core.rng.EpisodeKeys`): ``seed`` ``()``, ``env_ids``
            ``(nworld,)`` (global index), ``episode`` ``(nworld,)`` (-1 before the first reset).
        streams: A :class:`~gym_graphreset.core.rng.StreamAllocator`: ``self.streams("goal")`` is a counter-RNG
            stream for a subclass's own draws, the same for the same name, never shared with another name or
            the engine's reset draws. Per-step draws key by episode and step with
            :func:`~gym_graphreset.core.rng.step_bits`.
        init_qpos: ``(nq,)`` float32 (``qpos0``); ``init_qvel``: ``(nv,)`` float32 zeros.
        reset_strategy: :class:`~gym_graphreset.envs.mjwarp.reset.KernelReset` (one fused kernel) or
            :class:`~gym_graphreset.envs.mjwarp.reset.ReferenceReset` (``reset_data`` + torch draws), chosen by
            ``kernel_reset`` alone.
        runtime: :class:`~gym_graphreset.envs.mjwarp.runtime.WarpRuntime`: the shared stream, cached warp graphs.
    """

    metadata = {"autoreset_mode": AutoresetMode.DISABLED, "render_modes": ["rgb_array"]}
    """Instances add ``render_fps``: one frame per env step, ``1 / dt``."""
    supports_reset_selection = True
    supports_step_capture = True
    batched_model_fields: tuple[str, ...] = ()
    """Model fields given one row per world (``put_model(batch_sizes=...)``), e.g. for domain randomisation."""
    initial_state_draws: InitialStateDraws = "engine"
    """Who draws a new episode's ``(qpos, qvel)``, an input of either reset path. ``"engine"``: ``init_qpos`` /
    ``init_qvel`` plus ``qpos_noise`` / ``qvel_noise`` noise of scale ``reset_noise_scale`` (drawn inside the
    fused kernel; :meth:`_sample_initial_state`'s default is their torch reference). ``"task"``: the class's own
    :meth:`_sample_initial_state`, whose full-width proposals the reset writes on the reset rows. A class that
    overrides :meth:`_sample_initial_state` must declare ``"task"`` (else it is refused at construction). The
    draws run before the physics reset of the rows, on their terminal state: only the returned proposals survive
    it (it clears controls, activations and applied forces); state to set after it belongs in
    :meth:`_reset_task`."""

    def __init__(
        self,
        model: str | Path,
        num_envs: int,
        *,
        device: torch.device | str | None = None,
        frame_skip: int = 5,
        nconmax: int | None = None,
        njmax: int | None = None,
        max_episode_steps: int = 1000,
        global_env_offset: int = 0,
        model_edits: Callable[[Any], None] | None = None,
        kernel_reset: bool = True,
        render_mode: Literal["rgb_array"] | None = None,
        render_worlds: Sequence[int] | None = None,
        render_size: tuple[int, int] = (320, 240),
        warp_verbose: bool = False,
    ) -> None:
        self.device = check_device(device if device is not None else default_device())
        if not isinstance(kernel_reset, bool):
            raise ValueError(f"`kernel_reset` must be a bool, got {kernel_reset!r}")
        _check_initial_state_draws(type(self))
        self.num_envs, self.max_episode_steps, global_env_offset = check_env_counts(
            num_envs, max_episode_steps, global_env_offset
        )
        self.frame_skip = check_positive_int("frame_skip", frame_skip)
        check_contact_limits(nconmax, njmax)
        self.render_mode, self.render_worlds, self.render_size = check_render_args(
            type(self).__name__, render_mode, render_worlds, render_size, self.num_envs
        )
        self._world_renderer: WorldRenderer | None = None
        self._load_model(model, model_edits)
        self._put_on_device(nconmax, njmax, warp_verbose)
        self._allocate_torch_state(global_env_offset)
        self._make_action_space()
        # named counter-RNG streams for a subclass's own draws, above the engine's reset draws (stream 0)
        self.streams = StreamAllocator(0)
        with self._on_stream():
            self._setup_task()
            self._progress_buf = self._progress().clone()  # its shape; the first reset fills it
        from gym_graphreset.envs.mjwarp.reset import KernelReset, ReferenceReset

        with self.runtime.quiet():
            self.reset_strategy: KernelReset | ReferenceReset = (
                KernelReset(self) if kernel_reset else ReferenceReset(self)
            )
        obs, _ = self.reset()
        self.single_observation_space = self._observation_space(obs)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)

    # ------------------------------------------------------------------ construction

    def _load_model(self, model: str | Path, model_edits: Callable[[Any], None] | None) -> None:
        """The MuJoCo model from an XML string or path, with ``model_edits`` applied."""
        import mujoco

        text = str(model)
        self.mjm = (
            mujoco.MjModel.from_xml_string(text)
            if text.lstrip().startswith("<")
            else mujoco.MjModel.from_xml_path(text)
        )
        if model_edits is not None:
            model_edits(self.mjm)
        self.dt = float(self.mjm.opt.timestep) * self.frame_skip
        self.metadata = {**type(self).metadata, "render_fps": round(1.0 / self.dt)}

    def _put_on_device(self, nconmax: int | None, njmax: int | None, warp_verbose: bool) -> None:
        """The warp model and data, and torch views of the fields the env reads and writes."""
        import mujoco_warp as mjw
        import warp as wp

        self.runtime = WarpRuntime(self.device, verbose=warp_verbose)
        self.wp_device, self.cuda_stream = self.runtime.wp_device, self.runtime.cuda_stream
        with self.runtime.on_stream(wait=False):
            batch = {name: self.num_envs for name in self.batched_model_fields}
            self.m: Any = mjw.put_model(self.mjm, batch_sizes=batch or None)
            self.m.opt.warn_overflow = 0  # device printf would repeat on every graph replay
            self.d = mjw.make_data(self.mjm, nworld=self.num_envs, nconmax=nconmax, njmax=njmax)
            self.reset_mask_wp = wp.zeros(self.num_envs, dtype=bool, device=self.wp_device)
        t = wp.to_torch
        d = self.d
        self.qpos, self.qvel, self.ctrl = t(d.qpos), t(d.qvel), t(d.ctrl)
        self.xpos, self.xipos, self.site_xpos = t(d.xpos), t(d.xipos), t(d.site_xpos)
        self.cinert, self.cvel, self.cfrc_ext = t(d.cinert), t(d.cvel), t(d.cfrc_ext)
        self.qfrc_actuator, self.qfrc_constraint = t(d.qfrc_actuator), t(d.qfrc_constraint)
        self.overflow = t(d.overflow)
        self._reset_mask = t(self.reset_mask_wp)

    def _allocate_torch_state(self, global_env_offset: int) -> None:
        """Per-world torch state: initial pose, elapsed steps, episode keys, overflow latch."""
        dev, num_envs = self.device, self.num_envs
        self.init_qpos = torch.as_tensor(self.mjm.qpos0, dtype=torch.float32, device=dev)
        self.init_qvel = torch.zeros(self.mjm.nv, dtype=torch.float32, device=dev)
        self.body_mass = torch.as_tensor(self.mjm.body_mass, dtype=torch.float32, device=dev)
        self.elapsed = torch.zeros(num_envs, dtype=torch.long, device=dev)
        self.keys = EpisodeKeys(num_envs, dev, global_env_offset)
        self.seed, self.env_ids, self.episode = self.keys.seed, self.keys.env_ids, self.keys.episode
        self.checks = WorldChecks(self.overflow, int(self.d.njmax), int(self.d.naconmax) // num_envs)
        self.overflow_seen, self.state_finite = self.checks.seen, self.checks.state_finite
        self._all = torch.ones(num_envs, dtype=torch.bool, device=dev)
        self.substep_records: list[SubstepRecord] = []
        self._physics_started = False

    def _make_action_space(self) -> None:
        """The action space from the actuators' control ranges (``_setup_task`` may replace it)."""
        ctrlrange = self.mjm.actuator_ctrlrange.astype(np.float32)
        self.single_action_space = spaces.Box(ctrlrange[:, 0], ctrlrange[:, 1], dtype=np.float32)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def _observation_space(self, obs: Any) -> spaces.Space[Any]:
        """The single observation space of the first reset's ``obs``: a ``Box``, or a ``Dict`` of groups."""

        def box(where: str, value: Any) -> spaces.Box:
            if not (isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[0] == self.num_envs):
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise TypeError(
                    f"{type(self).__name__}._observe() must return a (num_envs, d) = ({self.num_envs}, d) tensor "
                    f"or a dict of them (observation groups), got {got}{where}"
                )
            return spaces.Box(-np.inf, np.inf, (value.shape[1],), np.float32)

        if isinstance(obs, dict):
            return spaces.Dict({key: box(f" for group {key!r}", value) for key, value in obs.items()})
        return box("", obs)

    def _draw_world(self, qpos: torch.Tensor) -> np.ndarray:
        """One world's frame; the renderer is made on the first."""
        if self._world_renderer is None:
            self._world_renderer = WorldRenderer(self.mjm, *self.render_size)
        return self._world_renderer.frame(qpos)

    def _not_copyable(self) -> TypeError:
        return TypeError(
            f"{type(self).__name__} cannot be pickled or copied: its MuJoCo Warp model and data live in warp "
            f"arrays on {self.device} (with captured graphs and a stream). Build another env with the same "
            "arguments instead (e.g. gymnasium.make_vec(...)); to carry a state over, copy `env.state()` "
            "(qpos, qvel) and restore it with `env.set_state(qpos, qvel)`"
        )

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        """Refuse pickling and ``copy.copy`` by name (warp's device state cannot be serialised)."""
        raise self._not_copyable()

    def __deepcopy__(self, memo: dict[int, Any]) -> NoReturn:
        """Refuse ``copy.deepcopy`` by name."""
        raise self._not_copyable()

    qpos_noise: str = "uniform"
    qvel_noise: str = "uniform"
    reset_noise_scale: float = 0.1

    def _sample_initial_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Full-width initial (qpos, qvel) draws for every world's current episode index.

        One hash pass makes every word of the reset (a few dozen kernels, whatever nq and nv are).
        """
        s, nq, nv = self.reset_noise_scale, self.mjm.nq, self.mjm.nv
        widths = [nq * (2 if self.qpos_noise == "normal" else 1), nv * (2 if self.qvel_noise == "normal" else 1)]
        bits = counter_bits(self.seed, self.env_ids, self.episode, sum(widths))
        qpos_bits, qvel_bits = bits[:, : widths[0]], bits[:, widths[0] :]

        def draw(kind: str, b: torch.Tensor) -> torch.Tensor:
            return bits_to_normal(b, s) if kind == "normal" else bits_to_uniform(b, -s, s)

        return self.init_qpos + draw(self.qpos_noise, qpos_bits), self.init_qvel + draw(self.qvel_noise, qvel_bits)

    def record_substeps(self, cols: Sequence[int]) -> torch.Tensor:
        """A ``(num_envs, frame_skip, len(cols))`` view: ``sensordata[:, cols]`` after each substep of the last step.

        Ask while building (in :meth:`_setup_task` or a sensor's ``build``): the physics is captured at its
        first run, so columns asked for later would never be recorded, and are refused.

        Raises:
            RuntimeError: the physics has run already.
            ValueError: ``cols`` empty, not integers, or a column not in ``[0, nsensordata)``.
        """
        from gym_graphreset.envs.mjwarp.substeps import SubstepRecord

        if self._physics_started:
            raise RuntimeError("record_substeps: the physics has run already; ask while building the env")
        cols = list(cols)
        ints = all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in cols)
        if not cols or not ints or any(not 0 <= c < self.mjm.nsensordata for c in cols):
            raise ValueError(
                f"record_substeps: `cols` must be a non-empty sequence of sensordata columns in "
                f"[0, {self.mjm.nsensordata}), got {cols!r}"
            )
        record = SubstepRecord(self.d, cols, self.frame_skip, self.wp_device)
        self.substep_records.append(record)
        return record.values

    def recompute_constants(self) -> None:
        """``mujoco_warp.set_const`` on every world: constants derived at ``qpos0`` follow per-world model writes.

        After writing ``body_ipos``, ``body_mass``, ``body_inertia`` or ``dof_armature`` per world, their
        derived constants (inverse weights, which set contact and joint-limit softness, subtree masses, actuator
        accelerations: ``body_subtreemass``, ``dof_invweight0``, ``body_invweight0``, ``tendon_length0``,
        ``tendon_invweight0``, ``actuator_acc0``) are still the compiled model's until this runs. The derived
        state is then recomputed from the current ``qpos`` and ``qvel`` (kinematics, centres of mass, body
        velocities: ``set_const`` evaluates the model at ``qpos0``). Eager only: not part of a captured step.
        ``set_const`` also writes camera and light references, equality anchors and geom bounds; those that are
        not per-world take one world's values (a camera tracking the centre of mass follows one world's).

        Raises:
            ValueError: one of those fields is not per-world (``batched_model_fields``): every world would
                write one shared row.
        """
        import mujoco_warp as mjw

        missing = [f for f in SET_CONST_FIELDS if f not in self.batched_model_fields]
        if missing:
            raise ValueError(
                f"recompute_constants: {missing} must be per-world: set_const writes each world's derived "
                f"constants there. On a task, give a startup EventTerm recompute='set_const' (it makes them "
                f"per-world); on an MJWarpVectorEnv subclass, list them in `batched_model_fields`"
            )
        with self._on_stream():
            mjw.set_const(self.m, self.d)
            mjw.kinematics(self.m, self.d)
            mjw.com_pos(self.m, self.d)
            mjw.com_vel(self.m, self.d)

    # ------------------------------------------------------------------ task hooks

    def _setup_task(self) -> None:
        """Allocate the task's buffers and constants (no-op by default); see the class docstring for when.

        Runs once in the constructor, after the model, the data and the base state are on the device and
        before the first reset and observation, so :meth:`_reset_task` and :meth:`_observe` find what it
        made. Indices from ``mjm`` (the ``mujoco.MjModel``), torch views of further warp fields
        (``wp.to_torch(self.d.<field>)``) and per-world buffers belong here.
        """

    def _reset_task(self, mask: torch.Tensor) -> None:
        """Reset the task's own state on the worlds of ``mask`` (no-op by default).

        Called by :meth:`reset` after the physics reset of those worlds and before the observation.
        ``mask`` is a full-width bool ``(num_envs,)`` tensor: write with ``torch.where`` (or
        :func:`~gym_graphreset.fill_rows_` / :func:`~gym_graphreset.assign_rows_`), never index with it.
        """

    def _apply_actions(self, action: torch.Tensor) -> None:
        """Write this step's actions (float32, on the device) to the actuators (default: ``ctrl`` as they are)."""
        self.ctrl.copy_(action)

    def _task_step(
        self, before: torch.Tensor | None, action: torch.Tensor
    ) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Everything after the physics: ``(obs, reward, terminated, truncated, info)``.

        ``before`` is the progress position before the physics (``None`` unless ``tracks_progress``). The
        default observes, asks :meth:`_reward_terminated`, and truncates at ``max_episode_steps``.
        """
        assert before is not None
        after = self._progress()
        self._progress_buf.copy_(after)
        obs = self._observe()
        reward, terminated = self._reward_terminated(before, after, action)
        return obs, reward, terminated, self.elapsed >= self.max_episode_steps, {}

    def _before_reset(self, mask: torch.Tensor) -> None:
        """Runs before the worlds of ``mask`` are reset (e.g. curricula reading the terminal state); no-op here."""

    def _after_reset(self, mask: torch.Tensor, seeded: bool) -> Any:
        """The observation after the worlds of ``mask`` were reset (``seeded``: ``reset(seed=...)``).

        The default runs :meth:`_reset_task`, then one :meth:`_observe`.
        """
        self._reset_task(mask)
        return self._observe()

    tracks_progress: bool = True
    """Whether the step keeps the progress position (``_progress``) for :meth:`_reward_terminated`."""

    def _observe(self) -> Any:
        """Observation of every world: ``(num_envs, obs_dim)`` float32, or a dict of them (groups)."""
        raise NotImplementedError

    def _reward_terminated(
        self, before: torch.Tensor, after: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reward and termination of every world after the physics of one env step."""
        raise NotImplementedError

    def _progress(self) -> torch.Tensor:
        """The position whose change over a step is the forward velocity (default: root x)."""
        return self.qpos[:, :1].clone()

    # ------------------------------------------------------------------ streams and capture

    def _on_stream(self, wait: bool = True) -> contextlib.AbstractContextManager[None]:
        """Run torch and warp work on the env's stream (ordered after the caller's stream)."""
        return self.runtime.on_stream(wait)

    def graph_capture_scope(
        self, stream: torch.cuda.Stream, capture_mode: str
    ) -> contextlib.AbstractContextManager[Any]:
        """Warp's external capture joined to the torch capture on ``stream`` (the env's own)."""
        return self.runtime.capture_scope(stream, capture_mode)

    def capture_buffers(self) -> tuple[torch.Tensor, ...]:
        """Views of the warp state a captured graph holds (replacing ``m``/``d`` must recapture)."""
        t = self.runtime.wp.to_torch
        return tuple(t(a) for a in (self.d.qpos, self.d.qvel, self.d.ctrl, self.d.overflow, self.reset_mask_wp))

    # ------------------------------------------------------------------ physics

    needs_cfrc_ext: bool = False
    physics_enabled: bool = True
    """``False`` skips the substeps: benchmarks time everything else a step does (non-physics) alone."""

    def _physics_body(self) -> None:
        if not self.physics_enabled:
            return
        import mujoco_warp as mjw

        self._physics_started = True
        for k in range(self.frame_skip):
            mjw.step(self.m, self.d)
            for record in self.substep_records:
                record.record(self.d, k)
        if self.needs_cfrc_ext:  # Gymnasium calls mj_rnePostConstraint after mj_step
            mjw.rne_postconstraint(self.m, self.d)

    def run_physics(self, actions: torch.Tensor | None = None) -> None:
        """Only the ``frame_skip`` substeps (a captured warp graph on CUDA): the floor of a step's cost.

        ``actions`` (optional) are written to ctrl first, so that the physics is driven like a real step's
        (the solver's iteration count, hence its cost, depends on the state the actions lead to).
        """
        with self._on_stream():
            if actions is not None:
                self.ctrl.copy_(actions)
            self.runtime.run("physics", self._physics_body)

    refresh: str = "com"
    """Derived fields observations read after a reset: ``"none"``, ``"kinematics"`` or ``"com"``."""

    def _refresh_kinematics(self) -> None:
        import mujoco_warp as mjw

        if self.refresh == "none":
            return
        mjw.kinematics(self.m, self.d)
        if self.refresh == "com":
            mjw.com_pos(self.m, self.d)
            mjw.com_vel(self.m, self.d)

    # ------------------------------------------------------------------ Gymnasium API

    def _masked_reset(self, mask: torch.Tensor) -> None:
        """Reset the physics of the worlds of ``mask`` with no host read (it does not observe).

        Derived fields (kinematics, com) are refreshed for every world: they are pure functions of
        qpos/qvel, nothing reads them before the next physics step recomputes them, and a world's forward
        velocity reads ``_progress_buf``, which only the reset worlds update here.
        """
        self._reset_mask.copy_(mask)
        self.reset_strategy.reset(mask)
        self.runtime.run("kinematics", self._refresh_kinematics)
        self._update_progress(mask)

    def _update_progress(self, mask: torch.Tensor) -> None:
        """Take the current progress position on the worlds of ``mask`` (after a reset or ``set_state``)."""
        shape = (-1, *([1] * (self._progress_buf.dim() - 1)))
        self._progress_buf.copy_(torch.where(mask.view(shape), self._progress(), self._progress_buf))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset every world, or those of ``options["reset_mask"]`` (mask, ids or ResetSelection).

        The order is fixed: :meth:`_before_reset`, the masked physics reset (with
        :meth:`_sample_initial_state`'s draws), then :meth:`_after_reset` (by default the task's
        :meth:`_reset_task`, then one :meth:`_observe`).
        """
        self.keys.reseed(seed)
        mask = options_reset_mask(options, self._all)
        with self._on_stream():
            self._before_reset(mask)
            self._masked_reset(mask)
            obs = self._after_reset(mask, seed is not None)
        return obs, {}

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Write ``actions``, run ``frame_skip`` substeps, record the engine's checks, then the task's step.

        The order is fixed (subclasses fill :meth:`_apply_actions` and :meth:`_task_step`), so no task can
        skip the overflow and finite-state record that :meth:`add_checks` latches. ``actions``: a tensor, or a
        numpy array (copied to the env's device).
        """
        actions = inner_actions(actions, self.device)
        want = (self.num_envs, *(self.single_action_space.shape or ()))
        if tuple(actions.shape) != want:
            raise ValueError(f"actions must have shape {want}, got {tuple(actions.shape)}")
        with self._on_stream():
            action = actions.to(self.device, torch.float32)
            before = self._progress_buf.clone() if self.tracks_progress else None
            self._apply_actions(action)
            self.runtime.run("physics", self._physics_body)
            self.elapsed.add_(1)
            self.checks.record(self.qpos, self.qvel)
            return self._task_step(before, action)

    def reset_report(self) -> dict[str, str]:
        """Which physics reset runs and why (:class:`~gym_graphreset.core.protocols.ReportsReset`).

        ``reset``: ``"kernel"`` (one fused warp kernel, after ``reset_data`` for models with state it does not
        clear) or ``"reference"``; ``initial_state``: ``initial_state_draws``; ``why``: what chose the path.
        """
        strategy = self.reset_strategy
        if strategy.kind == "kernel":
            extra = ", after mujoco_warp.reset_data (the model has state the kernel does not clear)"
            why = "kernel_reset=True (the default)" + (extra if strategy.needs_reset_data else "")
        else:
            why = "kernel_reset=False (asked for at construction)"
        return {"reset": strategy.kind, "initial_state": self.initial_state_draws, "why": why}

    def add_checks(self, latch: CheckSink) -> None:
        """Latch the overflow bits and the finite state of the last step (before its reset); no host read."""
        self.checks.add_checks(latch)

    def set_state(self, qpos: torch.Tensor, qvel: torch.Tensor, env_ids: Any = None) -> None:
        """Set qpos/qvel of the given worlds (all by default) and refresh derived quantities."""
        mask = resolve_reset_mask(env_ids, self.num_envs, self.device)
        qpos = torch.as_tensor(qpos, dtype=torch.float32, device=self.device).expand_as(self.qpos)
        qvel = torch.as_tensor(qvel, dtype=torch.float32, device=self.device).expand_as(self.qvel)
        with self._on_stream():
            self.qpos.copy_(torch.where(mask.unsqueeze(1), qpos, self.qpos))
            self.qvel.copy_(torch.where(mask.unsqueeze(1), qvel, self.qvel))
            self.runtime.run("kinematics", self._refresh_kinematics)
            self._update_progress(mask)

    def state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of (qpos, qvel), ``(num_envs, nq)`` and ``(num_envs, nv)``."""
        return self.qpos.clone(), self.qvel.clone()

    def render(self) -> WorldFrames | None:  # type: ignore[override]  # a lazy Sequence, not a tuple
        """Frames of ``render_worlds`` (every world by default) as they are now; ``None`` without a render mode.

        The worlds' poses are copied on the device here; each frame is drawn when it is read (one host
        read of that world's pose and a CPU render), so Gymnasium's ``RecordVideo(...,
        record_first_only=True)`` draws world 0 alone. The renderer is made when the first frame is read,
        which raises :class:`~gym_graphreset.envs.mjwarp.frames.RenderUnavailable` if no OpenGL context
        can be made.
        """
        if self.render_mode is None:
            return None
        worlds = range(self.num_envs) if self.render_worlds is None else self.render_worlds
        return WorldFrames(self._draw_world, self.qpos, worlds)

    def close_extras(self, **kwargs: Any) -> None:
        """Free the renderer, if :meth:`render` made one."""
        if self._world_renderer is not None:
            self._world_renderer.close()
            self._world_renderer = None

    @property
    def nworld(self) -> int:
        """``num_envs`` as MuJoCo Warp calls it."""
        return self.num_envs

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, device={self.device})"
