"""The contracts of a task's stateful parts: commands, sensors and terms with per-row state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from gym_graphreset.tasks.env import ManagerBasedEnv

__all__ = ["CommandCfg", "CommandTerm", "SensorCfg", "SensorTerm", "StatefulTerm"]


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
