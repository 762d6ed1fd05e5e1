"""Benchmarks: every step mode timed against the bare physics, CPU baselines, peers, tables and plots.

The measuring functions live in :mod:`~gym_graphreset.bench.runner`, a run's records in
:mod:`~gym_graphreset.bench.results`; both are importable from here.
"""

from gym_graphreset.bench.results import ModeResult, env_versions, save_json, table
from gym_graphreset.bench.runner import (
    DEFAULT_MODES,
    MODE_PRESETS,
    MODES,
    PhysicsStates,
    measure_bare_physics,
    measure_gymnasium_async,
    measure_mode,
    measure_modes,
    measure_non_physics,
    sample_actions,
)

__all__ = [
    "DEFAULT_MODES",
    "MODES",
    "MODE_PRESETS",
    "ModeResult",
    "PhysicsStates",
    "env_versions",
    "measure_bare_physics",
    "measure_gymnasium_async",
    "measure_mode",
    "measure_modes",
    "measure_non_physics",
    "sample_actions",
    "save_json",
    "table",
]
