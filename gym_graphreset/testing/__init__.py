"""Conformance tools for your own envs and terms: sync detectors, rollouts compared path against path.

Everything is defined in :mod:`~gym_graphreset.testing.harness` and the modules it names, and
:mod:`~gym_graphreset.testing.checks` (:func:`check_env`, the two checks to run before training), and importable
from here.
"""

from gym_graphreset.testing.checks import check_env
from gym_graphreset.testing.harness import (
    EpisodeComparison,
    SyncCanaryResult,
    assert_capture_matches_eager,
    assert_compiled_matches_uncompiled,
    assert_declared_forward_matches_full,
    assert_masked_matches_selected,
    assert_no_host_reads,
    assert_statistically_equivalent,
    assert_sync_free,
    count_host_reads,
    count_host_syncs,
    finished_episodes,
    ks_statistic,
    rollout,
)

__all__ = [
    "EpisodeComparison",
    "SyncCanaryResult",
    "assert_capture_matches_eager",
    "assert_compiled_matches_uncompiled",
    "assert_declared_forward_matches_full",
    "assert_masked_matches_selected",
    "assert_no_host_reads",
    "assert_statistically_equivalent",
    "assert_sync_free",
    "check_env",
    "count_host_reads",
    "count_host_syncs",
    "finished_episodes",
    "ks_statistic",
    "rollout",
]
