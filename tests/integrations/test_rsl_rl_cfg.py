"""rsl_rl's runner configuration: mjlab's settings with each named algorithm, and an unknown name refused."""

from __future__ import annotations

import re

import pytest

from gym_graphreset.integrations.rsl_rl_cfg import ALGORITHMS, mjlab_ppo_cfg

GO1 = "gym_graphreset/Go1-Velocity-Flat-v0"


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_each_algorithm_name_selects_its_class_and_keeps_mjlab_settings(name: str) -> None:
    """Every short name gives its class and the same PPO settings otherwise (mjlab's)."""
    cfg = mjlab_ppo_cfg(GO1, name)  # type: ignore[arg-type]
    assert cfg.to_dict()["algorithm"]["class_name"] == ALGORITHMS[name]
    stock = mjlab_ppo_cfg(GO1).to_dict()
    assert {**cfg.to_dict(), "algorithm": {**cfg.to_dict()["algorithm"], "class_name": "PPO"}} == stock


def test_fast_name_is_an_importable_algorithm() -> None:
    """The ``fast`` class name resolves with rsl_rl's own resolver, as the runner does."""
    pytest.importorskip("rsl_rl", reason="rsl-rl-lib is the optional `rsl_rl` extra")
    from rsl_rl.utils import resolve_callable

    from gym_graphreset.integrations.rsl_rl_fast import FastPPO

    assert resolve_callable(ALGORITHMS["fast"]) is FastPPO


def test_unknown_algorithm_name_is_refused() -> None:
    """A name that is not one of ALGORITHMS is a ValueError listing them."""
    message = f"`algorithm` must be one of {sorted(ALGORITHMS)}, got 'turbo'"
    with pytest.raises(ValueError, match=re.escape(message)):
        mjlab_ppo_cfg(GO1, "turbo")  # type: ignore[arg-type]
