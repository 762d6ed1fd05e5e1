"""Sensors: state read from the physics after every step, before rewards and terminations.

:class:`ContactSensorCfg` reads MuJoCo ``contact`` sensors (data ``found`` and ``force``, as the model
declares them) and keeps the contact bookkeeping that legged rewards need: contact flags, forces, air and
contact times, which feet touched down this step (mjlab's ``ContactSensor`` with ``track_air_time``), and,
with ``history_length``, the force after each of the step's substeps (recorded on the device by the physics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

import torch

if TYPE_CHECKING:
    from gym_graphreset.managers.forward_passes import ForwardPass
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["ContactSensor", "ContactSensorCfg"]

_CONTACT_DATA = ("found", "force", "torque", "dist", "pos", "normal", "tangent")
"""MuJoCo's contact sensor data fields, by bit of its ``data`` attribute (``sensor_intprm[:, 0]``)."""
_FOUND_FORCE = 0b11
"""``data="found force"``: the only fields :class:`ContactSensor` reads."""


@dataclass(frozen=True)
class ContactSensorCfg:
    """Contact sensors by name, each with 4 values per step: found (> 0 in contact) and a force (3).

    Each must be a MuJoCo ``contact`` sensor with ``data="found force"`` and one slot; any other sensor (a
    quaternion's 4 values, a contact sensor with other data fields) is refused by name when the env is built.

    The force is what the MuJoCo sensor's ``reduce`` declares: the net force of its contacts (``netforce``,
    the feet's), or its first contact's (no reduction and one slot, mjlab's collision sensors).

    Attributes:
        sensor_names: The MuJoCo ``contact`` sensors, in order.
        history_length: Substeps of force kept as ``force_history``: the step's last ``history_length``
            (at most the task's ``decimation``; mjlab's ``history_length``, which its collision terms read so
            that a contact opening and closing within one step counts). ``0``: none kept.
        air_time: How air and contact times are counted. ``"substep"`` (mjlab's and Isaac Lab's): from the
            contact flags after every substep, in substep timesteps, so a foot that lands at the step's second
            substep has 3 substeps of contact time and a touch-down between two lift-offs inside one step
            counts. ``"step"``: from the flags after the step's last substep only, in step lengths (no
            per-substep recording, fewer kernels: for sensors whose times no term reads).
    """

    sensor_names: tuple[str, ...]
    history_length: int = 0
    air_time: Literal["substep", "step"] = "substep"

    def __post_init__(self) -> None:
        names = self.sensor_names
        if not (isinstance(names, tuple) and names and all(isinstance(n, str) and n for n in names)):
            raise ValueError(
                f"ContactSensorCfg: `sensor_names` must be a non-empty tuple of sensor names, got {names!r}"
            )
        h = self.history_length
        if isinstance(h, bool) or not isinstance(h, int) or h < 0:
            raise ValueError(f"ContactSensorCfg: `history_length` must be an int >= 0, got {h!r}")
        if self.air_time not in ("substep", "step"):
            raise ValueError(f"ContactSensorCfg: `air_time` must be 'substep' or 'step', got {self.air_time!r}")

    def build(self, env: ManagerBasedEnv) -> ContactSensor:
        """The sensor's state for ``env``."""
        return ContactSensor(self, env)


class ContactSensor:
    """Contact flags and times of ``k`` bodies.

    Attributes:
        in_contact: ``(n, k)`` 1.0 / 0.0.
        force: ``(n, k, 3)`` the sensors' forces (see :class:`ContactSensorCfg`).
        air_time, contact_time: ``(n, k)`` seconds in the air / in contact so far (0 while in contact / in
            the air), counted as :attr:`ContactSensorCfg.air_time` says.
        last_air_time, last_contact_time: ``(n, k)`` the length of the last finished air / contact phase,
            counting the substep (or step) that ended it (mjlab's and Isaac Lab's rule).
        first_contact: ``(n, k)`` 1.0 where the body is in contact and touched down during this step
            (mjlab's ``compute_first_contact(step_dt)``).
        force_history: ``(n, k, history_length, 3)`` the force after each of the step's last
            ``history_length`` substeps, oldest first (``None`` without ``history_length``).
    """

    forward_passes: ClassVar[frozenset[ForwardPass]] = frozenset({"sensor_acc"})
    """What :meth:`refresh` reads after a forward pass: MuJoCo contact sensors with a force (acceleration stage)."""

    def __init__(self, cfg: ContactSensorCfg, env: ManagerBasedEnv) -> None:
        import mujoco

        mjm, n, device = env.mjm, env.num_envs, env.device
        cols: list[int] = []
        for name in cfg.sensor_names:
            sid = env._id(mujoco.mjtObj.mjOBJ_SENSOR, name, "ContactSensorCfg")  # lists the model's sensors
            kind = int(mjm.sensor_type[sid])
            if kind != mujoco.mjtSensor.mjSENS_CONTACT:
                raise ValueError(
                    f"ContactSensorCfg: sensor {name!r} is a {mujoco.mjtSensor(kind).name} sensor; it must be a "
                    f'MuJoCo contact sensor with data="found force" (<contact ... data="found force"/>)'
                )
            fields = int(mjm.sensor_intprm[sid, 0])
            if fields != _FOUND_FORCE:
                got = [n for bit, n in enumerate(_CONTACT_DATA) if fields >> bit & 1]
                raise ValueError(
                    f"ContactSensorCfg: contact sensor {name!r} gives data {got}; it must give exactly "
                    f'["found", "force"] (data="found force")'
                )
            if int(mjm.sensor_dim[sid]) != 4:
                raise ValueError(
                    f"ContactSensorCfg: sensor {name!r} must give 4 values (found, force xyz), "
                    f"got {int(mjm.sensor_dim[sid])}"
                )
            adr = int(mjm.sensor_adr[sid])
            cols += range(adr, adr + 4)
        self.env, self.k = env, len(cfg.sensor_names)
        contiguous = cols == list(range(cols[0], cols[0] + len(cols)))
        self._cols = slice(cols[0], cols[0] + len(cols)) if contiguous else torch.tensor(cols, device=device)
        z = lambda *s: torch.zeros(n, *s, device=device)  # noqa: E731
        # the (n, k) per-body values are views of one buffer, so that a reset clears them in one kernel and the
        # time count updates the air and contact pairs together
        self._per_body = z(6, self.k)
        self.in_contact, self.first_contact = self._per_body[:, 0], self._per_body[:, 5]
        self._phase, self._last_phase = self._per_body[:, 1:3], self._per_body[:, 3:5]  # (air, contact) times
        self.air_time, self.contact_time = self._per_body[:, 1], self._per_body[:, 2]
        self.last_air_time, self.last_contact_time = self._per_body[:, 3], self._per_body[:, 4]
        self.force = z(self.k, 3)
        self.history_length, self.by_substep = cfg.history_length, cfg.air_time == "substep"
        self.force_history: torch.Tensor | None = None
        if cfg.history_length > env.frame_skip:
            raise ValueError(
                f"ContactSensorCfg: `history_length` {cfg.history_length} exceeds the task's decimation "
                f"{env.frame_skip} (a step's substeps)"
            )
        if cfg.history_length or self.by_substep:
            self._substeps = env.record_substeps(cols)  # (n, decimation, 4k), filled by the physics
        if cfg.history_length:
            self.force_history = z(self.k, cfg.history_length, 3)
        self._substep_dt = float(env.mjm.opt.timestep)

    def update(self) -> None:
        """Read this step's contacts; count air and contact time; keep the substeps' forces (with history)."""
        env = self.env
        self.refresh()
        if self.by_substep:
            found = self._substeps.view(env.num_envs, env.frame_skip, self.k, 4)[..., 0] > 0
            for s in range(env.frame_skip):
                self._count(found[:, s], self._substep_dt)
        else:
            self._count(self.in_contact > 0, env.step_dt)
        ct = self.contact_time
        self.first_contact.copy_(((ct > 0) & (ct < env.step_dt + 1e-6)).float())
        if self.force_history is not None:
            h = self.history_length
            substeps = self._substeps[:, -h:].reshape(env.num_envs, h, self.k, 4)
            self.force_history.copy_(substeps[..., 1:4].transpose(1, 2))

    def refresh(self) -> None:
        """Re-read the contact flags and forces from the sensors (after a forward pass); times are not counted."""
        env = self.env
        data = env.sensordata[:, self._cols].view(env.num_envs, self.k, 4)
        self.in_contact.copy_((data[..., 0] > 0).float())
        self.force.copy_(data[..., 1:4])

    def _count(self, touching: torch.Tensor, dt: float) -> None:
        """Advance the air and contact times by ``dt`` with ``touching`` ``(n, k)`` (mjlab's update, in place).

        A phase that ends (air at touch-down, contact at lift-off) is kept as the last one, counting this ``dt``;
        the running one grows by ``dt``, the other is 0. The air and contact pairs update together.
        """
        ends = torch.stack((touching, ~touching), dim=1)  # (n, 2, k): where the air / the contact phase ends
        phase = self._phase
        grown = phase + dt
        self._last_phase.copy_(torch.where((phase > 0) & ends, grown, self._last_phase))
        phase.copy_(torch.where(ends, 0.0, grown))

    def reset(self, rows: torch.Tensor) -> None:
        """Clear the rows of ``rows`` (a masked fill of each buffer: no host read)."""
        self._per_body.masked_fill_(rows.view(-1, 1, 1), 0.0)
        self.force.masked_fill_(rows.view(-1, 1, 1), 0.0)
        if self.force_history is not None:
            self.force_history.masked_fill_(rows.view(-1, 1, 1, 1), 0.0)
