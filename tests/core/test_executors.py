"""The capture fingerprint covers every buffer a graph may hold: replacing any one changes it (CPU), and
on a GPU the next step recaptures and reads the new buffer (it never replays stale pointers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.envs import CartPoleVectorEnv
from gym_graphreset.wrappers import NormalizeObservation
from tests.conftest import GRAPH_MODES, MODES, needs_cuda


def _env(device: str = "cpu", **flags: Any) -> FixedShapeAutoresetVectorEnv:
    inner = NormalizeObservation(CartPoleVectorEnv(16, device=device))
    flags = flags or {**MODES["masked_persistent"], "validation_poll_interval": 1000}
    return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)


def _replace(attr: str) -> Callable[[FixedShapeAutoresetVectorEnv], None]:
    owner, name = attr.split(".")

    def replace(env: FixedShapeAutoresetVectorEnv) -> None:
        obj = {
            "stats": env.reset_terms["ep"],
            "norm": env.env,
            "cartpole": env.env.env,
            "latch": env.latch,
        }[owner]
        setattr(obj, name, getattr(obj, name).clone())

    return replace


REPLACEMENTS = {
    "EpisodeStatistics.running_return": _replace("stats.running_return"),
    "EpisodeStatistics.episode_return": _replace("stats.episode_return"),
    "NormalizeObservation.mean (loading statistics)": _replace("norm.mean"),
    "NormalizeObservation.var": _replace("norm.var"),
    "CartPole state": _replace("cartpole.state"),
    "latch slots": _replace("latch.first_failed"),
    "latch step counter": _replace("latch.step"),
    "selection mask": lambda env: setattr(env.selection, "mask", env.selection.mask.clone()),
}


def _steps(env: FixedShapeAutoresetVectorEnv, n: int) -> None:
    for _ in range(n):
        env.step(torch.ones(env.num_envs, dtype=torch.long, device=env.device))


def _fingerprint(env: FixedShapeAutoresetVectorEnv) -> Any:
    """What a held graph's pointer guard compares before each replay."""
    return env._graph_factory.watch()


def test_fingerprint_stable_over_steps() -> None:
    """Steps that replace nothing leave it unchanged: no spurious recapture on every replay."""
    env = _env()
    env.reset(seed=0)
    _steps(env, 3)
    before = _fingerprint(env)
    _steps(env, 20)
    assert _fingerprint(env) == before


@pytest.mark.parametrize("replace", list(REPLACEMENTS))
def test_replacing_any_buffer_changes_the_fingerprint(replace: str) -> None:
    env = _env()
    env.reset(seed=0)
    _steps(env, 3)
    before = _fingerprint(env)
    REPLACEMENTS[replace](env)
    assert _fingerprint(env) != before, f"replacing {replace} went unnoticed"


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("replace", list(REPLACEMENTS))
@pytest.mark.parametrize("mode", list(GRAPH_MODES))
def test_replaced_buffer_recaptures_on_cuda(mode: str, replace: str) -> None:
    """After a replacement the graph is captured again and the step matches an eager env's."""
    flags = {**GRAPH_MODES[mode], "validation_poll_interval": 1000}
    graph_env, eager_env = _env("cuda", **flags), _env("cuda")
    for env in (graph_env, eager_env):
        env.reset(seed=0)
        _steps(env, 6)
        REPLACEMENTS[replace](env)
    assert graph_env.graph is not None and graph_env.graph.captures == 1
    _steps(graph_env, 1)
    _steps(eager_env, 1)
    assert graph_env.graph.captures == 2
    for env in (graph_env, eager_env):
        env.env.mean.fill_(0.5)  # written in place: both read it (the graph through its held pointer)
    a = torch.ones(16, dtype=torch.long, device="cuda")
    got, want = graph_env.step(a), eager_env.step(a)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[4]["episode"]["r"], want[4]["episode"]["r"])
