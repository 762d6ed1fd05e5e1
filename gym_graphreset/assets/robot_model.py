"""A robot's model as a task holds it: its builder, the MJCF file it reads, whether the file's sensors stay.

A task built on a :class:`RobotModel` runs on another file of the same robot (mjlab's ``go1.xml`` with its
meshes, say) by one edit of that model, ``replace(model, model_xml=path, keep_sensors=True)``; the
builder applies the task's actuator, collision and solver settings to whichever file it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["MODEL_OPTIONS", "ModelBuilder", "RobotModel"]

MODEL_OPTIONS = ("model_xml", "keep_sensors")
"""The fields of :class:`RobotModel` a model variant sets (``gym.make_vec(..., model_xml=..., keep_sensors=...)``)."""


class ModelBuilder(Protocol):
    """Builds a robot's task model (MJCF text) from an MJCF file of it (``None``: the package's own)."""

    def __call__(self, model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> str:
        """The MJCF text of ``model_xml`` with the task's settings; its own sensors kept with ``keep_sensors``."""
        ...


@dataclass(frozen=True)
class RobotModel:
    """A robot's model: ``build(model_xml, keep_sensors=keep_sensors)`` when called (a ``TaskCfg.model``).

    Args:
        build: The robot's builder (e.g. :func:`~gym_graphreset.assets.robots.go1.model.build_go1_xml`).
        model_xml: The MJCF file it reads (``None``: the package's own model of the robot).
        keep_sensors: Keep the file's own sensors besides the task's. The tasks read none of them, so by
            default they are removed: MuJoCo Warp computes every sensor each substep (an accelerometer adds a
            pass). Keep them to time like for like against mjlab.
    """

    build: ModelBuilder
    model_xml: str | Path | None = None
    keep_sensors: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.keep_sensors, bool):
            raise ValueError(f"`keep_sensors` must be a bool, got {self.keep_sensors!r}")
        if self.model_xml is not None and not isinstance(self.model_xml, (str, Path)):
            raise ValueError(f"`model_xml` must be a path (str or Path) or None, got {type(self.model_xml).__name__}")

    def __call__(self) -> str:
        """The model's MJCF text."""
        return self.build(self.model_xml, keep_sensors=self.keep_sensors)
