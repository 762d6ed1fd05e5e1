"""The contracts of a task's stateful parts: commands, sensors and terms with per-row state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["CommandCfg", "CommandTerm", "ObservedSensor", "SensorCfg", "SensorTerm", "StatefulTerm", "check_command"]


class CommandTerm(Protocol):
    """A stateful command (e.g. a velocity or motion command) built by a :class:`CommandCfg`.

    ``reset_draws`` / ``step_draws`` words per row are handed to :meth:`reset` and :meth:`step`.
    """

    reset_draws: int
    step_draws: int

    @property
    def command(self) -> torch.Tensor:
        """``(n, k)`` the command the policy sees."""

    def reset(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        """Resample on the rows of ``rows`` (masked writes) at the start of their episode."""

    def step(self, u: torch.Tensor) -> None:
        """Advance one env step: resample rows whose time ran out, steer, update."""

    def metrics(self) -> dict[str, torch.Tensor]:
        """This step's per-row debug values, published as ``info["metrics"]["command/<command>/<key>"]``.

        Device tensors (the env clones them); may be empty.
        """


COMMAND_MEMBERS = ("reset_draws", "step_draws", "command", "reset", "step", "metrics")
"""What :class:`CommandTerm` declares: every command object must have all of them."""


def check_command(where: str, command: object) -> None:
    """Refuse a built command lacking a member of :class:`CommandTerm`, or with draws that are not ints >= 0.

    Checked when the env is built, naming the command and the contract, instead of an ``AttributeError``
    at its first use.
    """
    contract = (
        "a command (the CommandTerm protocol) has `reset_draws` and `step_draws` (ints >= 0: the draw columns "
        "its reset(rows, u) and step(u) read; 0 if none), a `command` (num_envs, k) tensor, and the methods "
        "reset(rows, u), step(u) and metrics()"
    )
    missing = [m for m in COMMAND_MEMBERS if not hasattr(command, m)]
    if missing:
        raise TypeError(f"{where}: {type(command).__name__} has no {missing}; {contract}")
    for m in ("reset_draws", "step_draws"):
        value = getattr(command, m)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise TypeError(f"{where}: {type(command).__name__}.{m} is {value!r}, not an int >= 0; {contract}")


@runtime_checkable
class StatefulTerm(Protocol):
    """A term object with state per row, cleared at each reset through the mask.

    Every manager runs it: observation, reward, termination, metric and event term classes (an event's
    before that reset's events run), and sensors.
    """

    def reset(self, rows: torch.Tensor) -> None:
        """Clear the rows of ``rows`` (masked writes)."""


@runtime_checkable
class CommandCfg(Protocol):
    """Builds a :class:`CommandTerm` for an env (frozen dataclasses, e.g. ``VelocityCommandCfg``)."""

    def build(self, env: ManagerBasedEnv) -> CommandTerm:
        """The command's state for ``env``."""


@runtime_checkable
class SensorTerm(Protocol):
    """A stateful sensor updated after the physics of every step, before rewards and terminations."""

    def update(self) -> None:
        """Read the physics and update the sensor's tensors."""

    def refresh(self) -> None:
        """Re-read instantaneous values after a forward pass (``TaskCfg.forward_before_obs``); count nothing."""

    def reset(self, rows: torch.Tensor) -> None:
        """Clear the rows of ``rows`` (masked writes)."""


@runtime_checkable
class SensorCfg(Protocol):
    """Builds a :class:`SensorTerm` for an env (e.g. ``ContactSensorCfg``)."""

    def build(self, env: ManagerBasedEnv) -> SensorTerm:
        """The sensor's state for ``env``."""


@runtime_checkable
class ObservedSensor(Protocol):
    """A sensor that can sense for observations alone (a ray sensor with ``cast="before_obs"``).

    The env makes the observation a cache phase of its own for such sensors and, after the first observation,
    refuses one that no observation made sense (``has_cast`` still false): its readers would read nothing.
    """

    cast: str
    has_cast: bool

    def heights(self) -> torch.Tensor:
        """``(n, ...)`` the sensor's values for the observation (cast once per phase, then kept)."""
        ...
