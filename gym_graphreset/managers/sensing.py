"""The task's sensors: built from the config, updated after the physics, re-read after a forward pass.

:class:`Sensors` is ``env.sensors``: a dict by name that refuses an unknown name listing the task's sensors,
checks what ``TaskCfg.forward_before_obs`` needs of each sensor, and knows its ray sensors that cast only for
observations (``cast="before_obs"``, which make the observation a cache phase of its own).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gym_graphreset.capture.compiling import opaque
from gym_graphreset.managers.protocols import ObservedSensor, SensorTerm

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["Sensors"]


class Sensors(dict[str, Any]):
    """The task's sensors by name: an unknown name is refused with the names there are (not a bare KeyError).

    Attributes:
        sensed_before_obs: The sensors with ``cast="before_obs"`` (``ObservedSensor``), by name.
    """

    def __init__(self, env: ManagerBasedEnv) -> None:
        super().__init__()
        cfg = env.cfg
        for n, s in cfg.sensors.items():
            self[n] = s.build(env)
            if cfg.forward_before_obs and not isinstance(self[n], SensorTerm):
                raise TypeError(
                    f"sensors[{n!r}]: {type(self[n]).__name__} is not a SensorTerm (update, refresh, reset); "
                    f"forward_before_obs=True calls its refresh() after the forward pass"
                )
        self.sensed_before_obs = {
            n: sensor
            for n, sensor in self.items()
            if isinstance(sensor, ObservedSensor) and sensor.cast == "before_obs"
        }
        self._cast_checked = False

    def __missing__(self, key: str) -> Any:
        raise KeyError(f"the task has no sensor {key!r} (TaskCfg.sensors); its sensors: {sorted(self)}")

    def refresh(self, names: Iterable[str]) -> None:
        """The sensors ``names`` re-read their instantaneous values (after a forward pass that covers them)."""
        for name in names:
            self[name].refresh()

    @opaque
    def cast_for_observation(self) -> None:
        """Cast every ``before_obs`` sensor an observation reads, before the observation terms run.

        The terms then read the phase's cached values. One declared boundary of a compiled step, outside the
        observation manager's loop over terms: a cast met inside that loop would make dynamo run the loop's
        frame as written and recompile the code after it once per term. The first observation (the
        constructor's) casts lazily, which tells the sensors no observation reads (:meth:`check_cast_once`);
        those are never cast here.
        """
        for sensor in self.sensed_before_obs.values():
            if sensor.has_cast:
                sensor.heights()

    def check_cast_once(self) -> None:
        """After the first observation, refuse ``before_obs`` ray sensors it did not cast (none reads them).

        Their readers would read rays never cast.
        """
        if self._cast_checked:
            return
        self._cast_checked = True
        if unread := [n for n, sensor in self.sensed_before_obs.items() if not sensor.has_cast]:
            raise ValueError(
                f"sensors {unread}: cast='before_obs' casts only for observations, and no observation "
                f"reads them, so the terms that do would read rays never cast; read them in an "
                f"observation or give them cast='each_phase'"
            )
