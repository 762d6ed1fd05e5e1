"""Conformance tools for your own envs and terms: sync detectors, rollouts compared path against path.

Everything is defined in :mod:`~gym_graphreset.testing.harness` and the modules it names, and importable from here.
"""

from gym_graphreset.testing.harness import (
    EpisodeComparison,
    SyncCanaryResult,
    assert_capture_matches_eager,
    assert_compiled_matches_uncompiled,
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
    "assert_masked_matches_selected",
    "assert_no_host_reads",
    "assert_statistically_equivalent",
    "assert_sync_free",
    "count_host_reads",
    "count_host_syncs",
    "finished_episodes",
    "ks_statistic",
    "rollout",
]
