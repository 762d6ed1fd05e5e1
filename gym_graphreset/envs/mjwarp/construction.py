"""The construction and plumbing of :class:`~gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv`, kept apart.

Its base class (private) loads and edits the model, puts it on the device, allocates the torch views,
per-world state and substep records of sensor columns, makes the action and observation spaces, draws one
world's frame and refuses copying.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space

from gym_graphreset.core.rng import EpisodeKeys, bits_to_normal, bits_to_uniform, counter_bits
from gym_graphreset.envs.mjwarp.checks import WorldChecks
from gym_graphreset.envs.mjwarp.frames import WorldRenderer
from gym_graphreset.envs.mjwarp.runtime import WarpRuntime

if TYPE_CHECKING:
    from gym_graphreset.envs.mjwarp.substeps import SubstepRecord


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


class _MJWarpEnvBase(VectorEnv):
    """Model loading, device state, spaces, frame drawing and copy refusal of ``MJWarpVectorEnv``."""

    device: torch.device
    frame_skip: int
    d: Any
    wp_device: Any
    _physics_started: bool
    batched_model_fields: tuple[str, ...]
    render_size: tuple[int, int]
    _world_renderer: WorldRenderer | None

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
        self.checks = WorldChecks(self.overflow)
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
