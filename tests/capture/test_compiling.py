"""``compile_step``: the step's torch code through ``torch.compile``, checked against the same step as written.

What it checks: opaque calls are declared boundaries, not reported breaks; an undeclared graph break and
a recompile are reported by name and warned about; the first call runs as written; the compiled step
returns what the uncompiled one returns (bitwise with the tracing backends, to float tolerance with
Inductor), on a user's torch env, CartPole and MuJoCo Warp (the reset-heavy workload included); invalid
combinations are refused. On CUDA: the compiled step graph is sync-free and matches its uncompiled twin.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
import torch

import gym_graphreset  # noqa: F401  (registers the env ids)
from gym_graphreset import PRESETS, EpisodeStatistics, FixedShapeAutoresetVectorEnv, StepConfig
from gym_graphreset.capture.compiling import CompiledStep, CompileWarning, declared_boundaries, opaque
from gym_graphreset.envs import CartPoleVectorEnv
from gym_graphreset.testing import assert_compiled_matches_uncompiled
from tests.conftest import load_example, needs_cuda


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    """Each test compiles from scratch (dynamo's caches and counters are process-wide)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@opaque
def _simulator(state: torch.Tensor) -> None:
    state.add_(1.0)  # stands for a non-torch call (warp, C++): never traced


def test_opaque_call_is_a_declared_boundary() -> None:
    """A break at an @opaque call is counted under its name; the report stays ok; results are the eager ones."""
    state = torch.zeros(4)

    def step(x: torch.Tensor) -> torch.Tensor:
        y = x * 2 + 1
        _simulator(state)
        return y + state

    compiled = CompiledStep(step, "eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        outs = [compiled(torch.ones(4)) for _ in range(3)]
    assert "_simulator" in declared_boundaries()
    assert [o.tolist() for o in outs] == [[4.0] * 4, [5.0] * 4, [6.0] * 4]
    report = compiled.report
    assert report.ok and report.calls == 2  # the first call ran as written
    # one break at the call (two where `opaque` deferred the disable: at the call and in its wrapper's frame)
    assert set(report.declared_breaks) == {"_simulator"} and report.graph_breaks == []
    assert report.graphs >= 2 and report.compile_seconds is not None


def test_undeclared_graph_break_is_reported_and_warned() -> None:
    """A host read inside the step splits it: reported by reason, warned once, not ok."""

    def step(x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):  # a data-dependent branch: dynamo must break here
            return x + 1
        return x - 1

    compiled = CompiledStep(step, "eager")
    compiled(torch.ones(3))
    with pytest.warns(CompileWarning, match="graph break"):
        compiled(torch.ones(3))
    assert not compiled.report.ok
    assert compiled.report.graph_breaks and "graph break" in compiled.report.graph_breaks[0]
    assert compiled.report.as_dict()["ok"] is False


@contextlib.contextmanager
def _scope() -> Iterator[None]:
    yield  # a generator context manager: dynamo cannot resume inside one after a graph break


def test_boundary_inside_a_generator_context_manager_is_reported() -> None:
    """An opaque call inside ``@contextmanager`` makes dynamo give up on the whole frame: a problem, named."""

    def step(x: torch.Tensor) -> torch.Tensor:
        with _scope():
            y = x + 1
            _simulator(y)
        return y * 2

    compiled = CompiledStep(step, "eager")
    compiled(torch.ones(2))
    with pytest.warns(CompileWarning, match="graph break"):
        out = compiled(torch.ones(2))
    assert out.tolist() == [6.0, 6.0]  # still correct, run as written
    assert not compiled.report.ok and any("context manager" in b for b in compiled.report.graph_breaks)


def _breaking_step(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    _ = y.tolist()  # a host read: a graph break in the user's code
    return y + 1


def test_graph_break_names_the_users_file_and_line() -> None:
    compiled = CompiledStep(_breaking_step, "eager")
    compiled(torch.ones(2))
    with pytest.warns(CompileWarning, match=r"graph break at test_compiling\.py:\d+"):
        compiled(torch.ones(2))


def test_reused_code_is_reported_as_reused_with_the_earlier_verdict() -> None:
    """A second compiled step that runs code compiled before compiled nothing: it says so, and inherits the
    earlier compile's breaks (nothing was checked for it), so its report is not ok."""
    first = CompiledStep(_breaking_step, "eager")
    with pytest.warns(CompileWarning):
        for _ in range(3):
            first(torch.ones(2))
    assert not first.report.ok and not first.report.reused
    second = CompiledStep(_breaking_step, "eager")
    with pytest.warns(CompileWarning, match="earlier compile: graph break"):
        for _ in range(3):
            second(torch.ones(2))
    report = second.report.as_dict()
    assert report["graphs"] == 0 and report["reused"] and not report["ok"]


class _Counter:
    def __init__(self) -> None:
        self.calls = 0


def test_recompile_is_reported_with_the_failed_guard() -> None:
    """Python state read by the traced code that changes each call recompiles: named with its guard."""
    counter = _Counter()

    def step(x: torch.Tensor) -> torch.Tensor:
        counter.calls += 1
        return x * counter.calls  # the int is baked into the graph: a new value recompiles

    compiled = CompiledStep(step, "eager")
    compiled(torch.ones(2))
    compiled(torch.ones(2))
    with pytest.warns(CompileWarning, match="recompiled"):
        out = compiled(torch.ones(2))
    assert out.tolist() == [3.0, 3.0]
    assert compiled.report.recompiles and "step" in compiled.report.recompiles[0]
    assert not compiled.report.ok


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"compile": "inductor"}, "needs `reset_path='masked'`"),
        ({"graph": "reset", "compile": "inductor"}, "use graph='step'"),
        ({"reset_path": "masked", "compile": "tvm"}, "`compile` must be one of"),
        ({"graph": "step", "compile": "inductor", "graph_warmup": 1}, "graph_warmup >= 2"),
    ],
)
def test_invalid_compile_configurations_are_refused(fields: dict[str, Any], match: str) -> None:
    """Combinations that cannot work are a ValueError naming the field, at construction."""
    with pytest.raises(ValueError, match=match):
        StepConfig(**fields)


def _actions(space: gym.Space, steps: int, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [torch.randint(0, int(space.nvec[0]), space.shape, generator=gen) for _ in range(steps)]
    low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
    return [low + (high - low) * torch.rand(space.shape, generator=gen) for _ in range(steps)]


def _point_mass(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
    example = load_example("point_mass")
    return FixedShapeAutoresetVectorEnv(
        example.PointMassVectorEnv(32, max_episode_steps=20),
        reset_terms={"history": example.ActionHistory(), "episode": EpisodeStatistics()},
        **flags,
    )


def _cartpole(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
    return FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(32), reset_terms={"ep": EpisodeStatistics()}, **flags)


def _registered(env_id: str, num_envs: int) -> Any:
    def make(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        inner = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", device="cpu")
        return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)

    return make


@pytest.mark.parametrize(
    ("factory", "steps"),
    [
        pytest.param(_point_mass, 60, id="user-torch-env"),  # the quick subset's case
        pytest.param(_cartpole, 60, id="cartpole", marks=pytest.mark.slow),
        pytest.param(_registered("gym_graphreset/InvertedPendulum-v5", 16), 40, id="mjwarp", marks=pytest.mark.slow),
        pytest.param(
            _registered("gym_graphreset/ResetHeavyHalfCheetah-v0", 16), 30, id="reset-heavy", marks=pytest.mark.slow
        ),
    ],
)
@pytest.mark.parametrize("preset", ["masked", pytest.param("masked_persistent", marks=pytest.mark.slow)])
def test_traced_step_matches_the_step_as_written(factory: Any, steps: int, preset: str) -> None:
    """With a tracing backend the compiled step is the same computation: every output bitwise equal, no
    break, no recompile.

    Breaks only at declared boundaries (warp calls, host transitions; a host read would be another
    break): what dynamo sees of a user's torch env, CartPole, MuJoCo Warp and the 13-term reset-heavy
    workload.
    """
    config = PRESETS[preset]  # type: ignore[index]
    actions = _actions(factory({"config": config}).action_space, steps)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        report = assert_compiled_matches_uncompiled(factory, actions, config=config, backend="aot_eager")
    assert report["calls"] == steps - 1  # every step but the first ran compiled
    assert set(report["declared_breaks"]) <= declared_boundaries()


@pytest.mark.slow
def test_a_second_env_compiles_its_own_step_without_a_reported_recompile() -> None:
    """Dynamo's cache is process-wide: a second env's first compile replaces the first env's entry, once."""
    flags = {"config": StepConfig.preset("masked", compile="eager")}
    actions = _actions(_cartpole({}).action_space, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for _ in range(2):
            env = _cartpole(flags)
            env.reset(seed=0)
            for a in actions:
                env.step(a)
            assert env.capture_report().state["compile"]["ok"]


@pytest.mark.slow  # Inductor compiles C++ for each graph of the step
def test_inductor_on_the_cpu_matches_to_float_tolerance() -> None:
    """Inductor's fused CPU kernels give the step as written to float tolerance, resets included."""
    actions = _actions(_point_mass({}).action_space, 50)
    report = assert_compiled_matches_uncompiled(_point_mass, actions, config="masked_persistent", atol=1e-5)
    assert report["backend"] == "inductor" and report["compile_seconds"] > 0


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("env_id", ["gym_graphreset/ResetHeavyHalfCheetah-v0", "gym_graphreset/Ant-v5"])
def test_compiled_step_graph_is_sync_free_and_matches_uncompiled(env_id: str) -> None:
    """CUDA: Inductor's step captured whole is sync-free, breaks only at declared boundaries, and its
    episodes are distributed like the uncompiled step graph's (GPU physics is not bitwise deterministic)."""
    from gym_graphreset.testing import assert_statistically_equivalent, assert_sync_free

    def factory(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        inner = gym.make_vec(env_id, num_envs=1024, vectorization_mode="vector_entry_point", device="cuda")
        if flags["config"] == PRESETS["selected"]:  # the reference: the uncompiled step graph
            flags = {"config": PRESETS["step_graph"]}
        return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)

    compiled = StepConfig.preset("step_graph", compile="inductor")
    env = factory({"config": compiled, "validation_poll_interval": 10_000})
    pool = [a.cuda() for a in _actions(env.action_space, 8)]  # on the device: a host copy would wait for the GPU
    env.reset(seed=0)
    for a in pool:
        env.step(a)
    canary = assert_sync_free(lambda: env.step(pool[0]), device="cuda", steps=4)
    report = env.capture_report().state["compile"]
    print(f"\n{env_id} compiled step graph canary: {canary}; compile report: {report}")
    assert report["ok"] and env.graph is not None and env.graph.captured and env.graph.captures == 1
    gen = torch.Generator(device="cuda").manual_seed(0)
    low = torch.as_tensor(env.single_action_space.low, device="cuda")
    high = torch.as_tensor(env.single_action_space.high, device="cuda")
    actions = [low + (high - low) * torch.rand(1024, low.shape[0], device="cuda", generator=gen) for _ in range(300)]
    stats = assert_statistically_equivalent(factory, actions, config=compiled)
    print(f"{env_id} compiled vs uncompiled step graph: {stats}")
