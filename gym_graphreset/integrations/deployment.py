"""What a robot deployment needs besides the network: joints, gains, default pose, action and observation layout.

A policy file alone does not run a robot: the controller on board must know which joint each action drives, how
an action becomes a joint target (``default + scale * action`` for position actions), the PD gains the policy
was trained with, and how each observation term was scaled, clipped and stacked. :func:`deployment_of` reads
them from a task-layer env; the ``train`` command stores them in every checkpoint (``infos["deployment"]``), and
:func:`~gym_graphreset.integrations.export.export_onnx` attaches them to the ONNX file as ``metadata_props``, with
mjlab's key names and list format (comma-separated, ``;`` within an entry), so deployment code written for
mjlab's exports reads ours.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from gym_graphreset.managers.terms import JointPositionAction

if TYPE_CHECKING:  # the env's module imports MuJoCo Warp: only its type is needed here
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["Deployment", "deployment_of", "metadata_value"]

ActionKind = Literal["joint_position", "joint_effort"]


@dataclass(frozen=True)
class Deployment:
    """A trained task's deployment data, every list in action order (joints) or the policy group's term order.

    For a joint-position action the target is ``action_offset + action_scale * clip(a)``; for a joint-effort
    action the torque is ``action_scale * clip(a)`` (its offset is 0), where ``a`` is the policy's action of
    ``action_delay`` steps before and ``clip`` clips it to ``action_clip``. (A term's ``subtract_encoder_bias``
    is not here: it simulates a robot's biased encoders in training; on the robot the bias is its own.)
    """

    step_dt: float
    """Seconds per policy step (the control period)."""
    joint_names: tuple[str, ...]
    """The joints the actions drive, in action order."""
    action_kinds: tuple[ActionKind, ...]
    """Per action: what it commands."""
    action_scale: tuple[float, ...]
    action_offset: tuple[float, ...]
    """Per action: the target at action 0 (the default pose for ``use_default_offset``; 0 for efforts)."""
    action_clip: tuple[tuple[float, float], ...]
    """Per action: ``(low, high)`` the action is clipped to before scaling, ``(-inf, inf)`` for none."""
    action_delay: tuple[int, ...]
    """Per action: policy steps between the action and the actuators (0: none)."""
    default_joint_pos: tuple[float, ...]
    """The robot's default pose at the action joints."""
    joint_stiffness: tuple[float, ...]
    """Per action joint: its actuator's proportional gain (``gainprm[0]``; 0 for a motor)."""
    joint_damping: tuple[float, ...]
    """Per action joint: its actuator's derivative gain (``-biasprm[2]``; 0 for a motor)."""
    command_names: tuple[str, ...]
    observation_groups: tuple[str, ...]
    """The observation groups the policy reads, concatenated in this order."""
    observation_names: tuple[str, ...]
    """The groups' terms, in the order they are concatenated."""
    observation_terms_scale: tuple[float | tuple[float, ...], ...]
    observation_terms_clip: tuple[tuple[float, float], ...]
    """Per term: ``(low, high)``, ``(-inf, inf)`` for none."""
    observation_terms_history_length: tuple[int, ...]
    observation_groups_clip: tuple[float, ...]
    """Per group: the clip of the whole group after its terms (``inf``: none)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain data (lists, floats, strings): what a checkpoint stores."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Deployment:
        """The inverse of :meth:`as_dict`; a missing or unknown key is refused by name."""
        names = {f.name for f in dataclasses.fields(cls)}
        missing, unknown = sorted(names - set(data)), sorted(set(data) - names)
        if missing or unknown:
            raise ValueError(
                f"deployment data: missing keys {missing}, unknown keys {unknown} (expected {sorted(names)})"
            )
        return cls(**{k: _frozen(v) for k, v in data.items()})

    def metadata(self) -> dict[str, str]:
        """ONNX ``metadata_props``: each field as text, lists in mjlab's format (:func:`metadata_value`)."""
        return {name: metadata_value(value) for name, value in self.as_dict().items()}


def metadata_value(value: Any) -> str:
    """A metadata entry's text: a list comma-separated, a list inside it ``;``-separated (mjlab's format).

    Floats are written with ``repr`` (every digit, so a gain reads back exactly; mjlab writes 3 decimals).
    """
    if isinstance(value, list | tuple):
        return ",".join(";".join(_scalar(v) for v in x) if isinstance(x, list | tuple) else _scalar(x) for x in value)
    return _scalar(value)


def _scalar(x: Any) -> str:
    return repr(float(x)) if isinstance(x, float) else str(x)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _frozen(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _floats(values: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def deployment_of(env: ManagerBasedEnv, groups: Sequence[str] = ("policy",)) -> Deployment:
    """The deployment data of a task-layer env (the unwrapped env), its policy reading observation ``groups``.

    Raises:
        ValueError: ``groups`` is empty or names a group the env does not have.
    """
    cfg = env.cfg
    if isinstance(groups, str) or not groups or set(groups) - set(cfg.observations):
        raise ValueError(
            f"`groups` must be a non-empty sequence of the env's observation groups {sorted(cfg.observations)}, "
            f"got {groups!r}"
        )
    mjm = env.mjm
    names: list[str] = []
    kinds: list[ActionKind] = []
    scale: list[float] = []
    offset: list[float] = []
    clip: list[tuple[float, float]] = []
    delay: list[int] = []
    stiffness: list[float] = []
    damping: list[float] = []
    joints: list[int] = []
    for slot in env.action_manager.terms:
        position = isinstance(slot.term, JointPositionAction)
        names += slot.term.joint_names
        kinds += ["joint_position" if position else "joint_effort"] * len(slot.term.joint_names)
        scale += _floats(slot.scale.tolist())
        offset += _floats(slot.offset.tolist())
        k = len(slot.term.joint_names)
        low, high = (-math.inf, math.inf) if slot.term.clip is None else slot.term.clip
        clip += [(float(low), float(high))] * k
        delay += [int(slot.term.delay)] * k
        joints += env.joint_index(slot.term.joint_names, "deployment")
        for a in slot.actuators.tolist():
            stiffness.append(float(mjm.actuator_gainprm[a, 0]) if position else 0.0)
            damping.append(float(-mjm.actuator_biasprm[a, 2]) if position else 0.0)
    terms = [(name, term) for g in groups for name, term in cfg.observations[g].terms.items()]
    clips = [(-math.inf, math.inf) if t.clip is None else (float(t.clip[0]), float(t.clip[1])) for _, t in terms]
    scales = [
        1.0 if t.scale is None else (_floats(t.scale) if isinstance(t.scale, tuple | list) else float(t.scale))
        for _, t in terms
    ]
    group_clips = [min(c for c in (cfg.observations[g].clip, cfg.obs_clip, math.inf) if c is not None) for g in groups]
    return Deployment(
        step_dt=float(env.step_dt),
        joint_names=tuple(names),
        action_kinds=tuple(kinds),
        action_scale=tuple(scale),
        action_offset=tuple(offset),
        action_clip=tuple(clip),
        action_delay=tuple(delay),
        default_joint_pos=_floats(env.default_joint_pos[joints].tolist()),
        joint_stiffness=tuple(stiffness),
        joint_damping=tuple(damping),
        command_names=tuple(cfg.commands),
        observation_groups=tuple(groups),
        observation_names=tuple(name for name, _ in terms),
        observation_terms_scale=tuple(scales),
        observation_terms_clip=tuple(clips),
        observation_terms_history_length=tuple(int(t.history_length) for _, t in terms),
        observation_groups_clip=_floats(group_clips),
    )
