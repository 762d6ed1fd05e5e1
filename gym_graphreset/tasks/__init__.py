"""The task layer: manager-based MuJoCo Warp tasks declared as frozen dataclass configs (mjlab's way).

A task is a :class:`TaskCfg` of named terms (observation groups, actions, rewards, terminations, events,
commands, sensors, curricula, metrics, recorders); :class:`ManagerBasedEnv` runs it full width, masked, with
counter-based draws, capturable in the step graph and with no host read. Term functions live in
:mod:`gym_graphreset.mdp`; :func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.velocity_task` is legged velocity
tracking for any robot.
"""

from gym_graphreset import mdp
from gym_graphreset.managers.manager_based_env import ManagerBasedEnv
from gym_graphreset.managers.registry import register_task
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.managers.term_checks import UnwrappedStepWarning
from gym_graphreset.managers.terms import (
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
from gym_graphreset.tasks.velocity.velocity_env_cfg import LeggedRobot, velocity_task

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
    "register_task",
    "velocity_task",
]
