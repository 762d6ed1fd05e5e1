"""Modules of the flat layout still import from their old paths: the same module object, with a warning."""

from __future__ import annotations

import importlib
import sys

import pytest

from gym_graphreset._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_is_the_new_module(old: str) -> None:
    sys.modules.pop(f"gym_graphreset.{old}", None)
    with pytest.warns(DeprecationWarning, match=f"moved to `gym_graphreset.{MOVED[old]}`"):
        module = importlib.import_module(f"gym_graphreset.{old}")
    assert module is importlib.import_module(f"gym_graphreset.{MOVED[old]}")


def test_public_names_import_where_they_did() -> None:
    """The documented entry points keep their paths with no warning (packages re-export)."""
    from gym_graphreset.bench import ModeResult, measure_modes  # noqa: F401
    from gym_graphreset.envs.mjwarp import OVERFLOW_CHECKS, MJWarpVectorEnv, healthy_range  # noqa: F401
    from gym_graphreset.tasks.velocity.config.go1 import REWARD_NAMES, Go1VelocityFlatEnv  # noqa: F401
    from gym_graphreset.testing import assert_masked_matches_selected, assert_sync_free  # noqa: F401


def test_unknown_module_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("gym_graphreset.no_such_module")
