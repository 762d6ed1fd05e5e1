"""The task layer: manager-based MuJoCo Warp tasks declared as frozen dataclass configs (mjlab's way).

A task is a :class:`TaskCfg` of named terms (observation groups, actions, rewards, terminations, events,
commands, sensors, curricula, metrics, recorders); :class:`ManagerBasedEnv` runs it full width, masked, with
counter-based draws, capturable in the step graph and with no host read. Term functions live in
:mod:`gym_graphreset.tasks.mdp`; :func:`~gym_graphreset.tasks.velocity.velocity_task` is legged velocity
tracking for any robot.
"""

from gym_graphreset.tasks import mdp, terrain
from gym_graphreset.tasks.cfg import TaskCfg
from gym_graphreset.tasks.env import ManagerBasedEnv
from gym_graphreset.tasks.registry import register_task
from gym_graphreset.tasks.term_checks import UnwrappedStepWarning
from gym_graphreset.tasks.terms import (
    CurriculumTerm,
    EventTerm,
    GaussianNoise,
    JointEffortAction,
    JointPositionAction,
    MetricTerm,
    ObsGroup,
    ObsTerm,
    RecorderTerm,
    RewardTerm,
    TerminationTerm,
    UniformNoise,
)
from gym_graphreset.tasks.velocity import LeggedRobot, velocity_task

__all__ = [
    "CurriculumTerm",
    "EventTerm",
    "GaussianNoise",
    "JointEffortAction",
    "JointPositionAction",
    "LeggedRobot",
    "ManagerBasedEnv",
    "MetricTerm",
    "ObsGroup",
    "ObsTerm",
    "RecorderTerm",
    "RewardTerm",
    "TaskCfg",
    "TerminationTerm",
    "UniformNoise",
    "UnwrappedStepWarning",
    "mdp",
    "terrain",
    "register_task",
    "velocity_task",
]
