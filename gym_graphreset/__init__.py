"""gym_graphreset: same-step autoreset of GPU-batched Gymnasium vector envs with no host sync.

Importing registers the ``gym_graphreset/...`` env ids with Gymnasium and does nothing else (no warp
initialisation, no global config changes).
"""

from gym_graphreset import registration as _registration
from gym_graphreset.buffers import PublicationRing
from gym_graphreset.config import PRESETS, AutoresetConfig
from gym_graphreset.graph import AutoresetGraph, CaptureReport, StaleGraphError
from gym_graphreset.host_transitions import HostTransitions, host_transition
from gym_graphreset.protocols import (
    Bindable,
    CaptureParticipant,
    CheckProvider,
    CheckSink,
    EpisodePublisher,
    GeneratorOwner,
    InfoProvider,
    ResetTerm,
    Rows,
    StepData,
    StepObserver,
    StreamOwner,
    TorchVectorEnv,
)
from gym_graphreset.selection import (
    ResetSelection,
    ResetSelectionUnsupportedError,
    assign_rows_,
    fill_rows_,
    reset_selection_capable,
    resolve_reset_mask,
    supports_reset_selection,
)
from gym_graphreset.terms import EpisodeStatistics
from gym_graphreset.validation import DeferredValidationError
from gym_graphreset.wrapper import ClosedEnvironmentError, FixedShapeAutoresetVectorEnv, InterruptedStepError

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "AutoresetConfig",
    "AutoresetGraph",
    "Bindable",
    "CaptureParticipant",
    "CaptureReport",
    "CheckProvider",
    "CheckSink",
    "ClosedEnvironmentError",
    "DeferredValidationError",
    "EpisodePublisher",
    "EpisodeStatistics",
    "FixedShapeAutoresetVectorEnv",
    "InterruptedStepError",
    "GeneratorOwner",
    "HostTransitions",
    "InfoProvider",
    "PublicationRing",
    "ResetSelection",
    "ResetSelectionUnsupportedError",
    "ResetTerm",
    "Rows",
    "StaleGraphError",
    "StepData",
    "StepObserver",
    "StreamOwner",
    "TorchVectorEnv",
    "__version__",
    "assign_rows_",
    "fill_rows_",
    "host_transition",
    "reset_selection_capable",
    "resolve_reset_mask",
    "supports_reset_selection",
]

_registration.register_envs()
