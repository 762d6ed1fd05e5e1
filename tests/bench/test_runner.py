"""The bench's bare-physics floor: which states it is timed on, how it replays, and which envs have one."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gym_graphreset.bench.runner import measure_bare_physics
from gym_graphreset.envs.cartpole import CartPoleVectorEnv
from tests.conftest import needs_cuda


def _spied_pendulum(log: list[Any]) -> Any:
    """An InvertedPendulum of 2 worlds whose step and physics calls are logged (with the ctrl physics got)."""
    from gym_graphreset.envs.gym_mujoco.tasks import InvertedPendulumEnv

    env = InvertedPendulumEnv(2, device="cpu")
    step, run_physics = env.step, env.run_physics

    def logged_step(actions: torch.Tensor) -> Any:
        log.append(("step", None))
        return step(actions)

    def logged_physics(actions: torch.Tensor | None = None) -> None:
        log.append(("physics", None if actions is None else actions.clone()))
        run_physics(actions)

    env.step, env.run_physics = logged_step, logged_physics  # type: ignore[method-assign]
    return env


@pytest.mark.parametrize("states", [pytest.param("step", marks=pytest.mark.slow), "free"])
def test_bare_physics_is_timed_on_the_states_asked_for(states: str) -> None:
    """``step``: every physics call follows a real step and keeps its ctrl; ``free``: random ctrl, no steps."""
    log: list[Any] = []
    result = measure_bare_physics(lambda: _spied_pendulum(log), steps=3, warmup=2, states=states)  # type: ignore[arg-type]
    assert result is not None and result.mode == "bare physics"
    assert result.extra == {"states": states, "graph": "warp"}
    assert result.steps == 3 and result.ms_per_step > 0
    kinds = [kind for kind, _ in log]
    if states == "step":
        assert kinds == ["step", "physics"] * (2 + 3)
        assert all(actions is None for kind, actions in log if kind == "physics")  # the step's own ctrl
    else:
        assert kinds == ["physics"] * (2 + 3)
        assert all(isinstance(actions, torch.Tensor) for _, actions in log)


def test_bare_physics_is_none_for_envs_without_mujoco_warp_physics() -> None:
    assert measure_bare_physics(lambda: CartPoleVectorEnv(4), steps=2, warmup=0) is None


def test_an_unknown_physics_state_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="`states` must be 'step' or 'free', got 'idle'"):
        measure_bare_physics(lambda: CartPoleVectorEnv(4), steps=2, states="idle")  # type: ignore[arg-type]


def test_an_unknown_physics_graph_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="`graph` must be 'warp' or 'torch', got 'cuda'"):
        measure_bare_physics(lambda: CartPoleVectorEnv(4), steps=2, graph="cuda")  # type: ignore[arg-type]


def test_a_torch_graph_floor_needs_cuda() -> None:
    """On a CPU env the torch-graph floor is refused naming the device (there is no CUDA graph to capture)."""
    with pytest.raises(ValueError, match="`graph='torch'` needs a CUDA env .* device cpu"):
        measure_bare_physics(lambda: _spied_pendulum([]), steps=2, graph="torch")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("states", ["step", "free"])
def test_torch_graph_floor_replays_the_same_physics(states: str) -> None:
    """CUDA: the substeps captured into a torch graph (as the step graph embeds them) and MuJoCo Warp's own
    graph are both timed on the same kind of states, each recorded with its graph."""
    from gym_graphreset.envs.gym_mujoco.tasks import InvertedPendulumEnv

    results = {
        graph: measure_bare_physics(
            lambda: InvertedPendulumEnv(256, device="cuda"), steps=20, warmup=5, states=states, graph=graph
        )
        for graph in ("warp", "torch")
    }
    for graph, result in results.items():
        assert result is not None and result.extra == {"states": states, "graph": graph} and result.ms_per_step > 0
    print(f"\nbare physics ({states}): " + ", ".join(f"{g} {r.ms_per_step:.3f} ms" for g, r in results.items() if r))
