"""gym_graphreset: same-step autoreset of GPU-batched Gymnasium vector envs with no host sync.

Importing registers the ``gym_graphreset/...`` env ids with Gymnasium and does nothing else (no warp
initialisation, no global config changes).
"""

from gym_graphreset import registration as _registration
from gym_graphreset.capture.graph import AutoresetGraph, CaptureReport, StaleGraphError
from gym_graphreset.capture.host_transitions import HostTransitions, host_transition
from gym_graphreset.core.autoreset_env import (
    ClosedEnvironmentError,
    ConcurrentCallError,
    FixedShapeAutoresetVectorEnv,
    InterruptedStepError,
)
from gym_graphreset.core.buffers import PublicationRing
from gym_graphreset.core.config import PRESETS, StepConfig
from gym_graphreset.core.polling import CrossRankError, DeferredValidationError
from gym_graphreset.core.protocols import CheckSink, GraphParticipant, ResetTerm, Rows, StepData, TorchVectorEnv
from gym_graphreset.core.rng import EpisodeKeys, counter_uniform
from gym_graphreset.core.selection import (
    ResetSelection,
    ResetSelectionUnsupportedError,
    assign_rows_,
    fill_rows_,
    options_reset_mask,
    reset_selection_capable,
    resolve_reset_mask,
    supports_reset_selection,
)
from gym_graphreset.core.terms import EpisodeStatistics

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "AutoresetGraph",
    "CaptureReport",
    "CheckSink",
    "ClosedEnvironmentError",
    "ConcurrentCallError",
    "CrossRankError",
    "DeferredValidationError",
    "EpisodeKeys",
    "EpisodeStatistics",
    "FixedShapeAutoresetVectorEnv",
    "GraphParticipant",
    "InterruptedStepError",
    "HostTransitions",
    "PublicationRing",
    "ResetSelection",
    "ResetSelectionUnsupportedError",
    "ResetTerm",
    "Rows",
    "StaleGraphError",
    "StepConfig",
    "StepData",
    "TorchVectorEnv",
    "__version__",
    "assign_rows_",
    "counter_uniform",
    "fill_rows_",
    "host_transition",
    "options_reset_mask",
    "reset_selection_capable",
    "resolve_reset_mask",
    "supports_reset_selection",
]

_registration.register_envs()
