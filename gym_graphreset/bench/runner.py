"""Side-by-side measurement of the step modes on one env: ms/step, env-steps/s, host syncs/step.

Used by the CLI (``python -m gym_graphreset demo|bench``) and the pytest-benchmark suite. Modes are
measured in one process, one after another, on fresh envs built by the same factory, so their ratios
are comparable; absolute numbers depend on the machine. The results, their table and their JSON file are
:mod:`gym_graphreset.bench.results`'s (importable from here too).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

import gymnasium as gym
import torch
from tqdm.auto import tqdm

from gym_graphreset.bench.results import ModeResult
from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.config import PRESETS, PresetName, StepConfig
from gym_graphreset.core.terms import EpisodeStatistics

if TYPE_CHECKING:
    from gym_graphreset.envs.mjwarp import MJWarpVectorEnv

__all__ = [
    "DEFAULT_MODES",
    "MODES",
    "MODE_PRESETS",
    "PhysicsStates",
    "measure_bare_physics",
    "measure_mode",
    "measure_gymnasium_async",
    "measure_modes",
    "measure_non_physics",
    "sample_actions",
    "warmed_env",
]

MODE_PRESETS: dict[str, PresetName] = {  # display label -> preset; "bare physics" is added for MuJoCo Warp envs
    "selected": "selected",
    "masked": "masked",
    "masked+persistent": "masked_persistent",
    "reset graph": "reset_graph",
    "step graph": "step_graph",
}
"""Display label of each benchmarked mode -> its preset."""
MODES: dict[str, StepConfig] = {label: PRESETS[name] for label, name in MODE_PRESETS.items()} | {
    "step graph+compile": StepConfig.preset("step_graph", compile="inductor")
}
"""Display label -> configuration: the presets, and the whole-step graph of the ``torch.compile``-d step."""
DEFAULT_MODES = tuple(MODE_PRESETS)
"""The modes a plain ``demo``/``bench`` runs (``step graph+compile`` is asked for: it compiles first)."""
CUDA_ONLY = ("reset graph", "step graph", "step graph+compile")


def _finite_box(space: gym.spaces.Box) -> tuple[torch.Tensor, torch.Tensor]:
    """The box's bounds with each unbounded side at +-1, or 2 beyond the other bound when that is past +-1."""
    low = torch.as_tensor(space.low, dtype=torch.float32)
    high = torch.as_tensor(space.high, dtype=torch.float32)
    both = torch.isinf(low) & torch.isinf(high)
    low, high = torch.where(both, -1.0, low), torch.where(both, 1.0, high)
    high = torch.where(torch.isposinf(high), torch.where(low < 1.0, 1.0, low + 2.0), high)
    low = torch.where(torch.isneginf(low), torch.where(high > -1.0, -1.0, high - 2.0), low)
    return low, high


def sample_actions(space: gym.Space, device: torch.device, count: int, seed: int = 0) -> list[torch.Tensor]:
    """``count`` random batched actions for ``space`` made up front (making them is not timed).

    A Box's unbounded sides are cut at +-1 (an unbounded action is a policy's raw output, e.g. a
    joint-position offset the env scales; mjlab's peer runner samples [-1, 1] too).
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for _ in range(count):
        if isinstance(space, gym.spaces.Box):
            low, high = _finite_box(space)
            out.append((low + (high - low) * torch.rand(space.shape, generator=gen)).to(device))
        elif isinstance(space, gym.spaces.MultiDiscrete):
            nvec = torch.as_tensor(space.nvec)
            out.append((torch.rand(space.shape, generator=gen) * nvec).long().to(device))
        else:
            raise TypeError(f"cannot sample actions for {type(space).__name__}")
    return out


def warmed_env(
    make_inner: Callable[[], gym.vector.VectorEnv], mode: str, *, warmup: int, poll_interval: int
) -> tuple[FixedShapeAutoresetVectorEnv, list[torch.Tensor]]:
    """``mode``'s wrapper over ``make_inner()`` with episode statistics, reset and stepped ``warmup`` times.

    Returns the env and the pool of 64 random actions it steps with (``pool[i % 64]`` at step ``i``).
    """
    config = dataclasses.replace(MODES[mode], validation_poll_interval=poll_interval)
    env = FixedShapeAutoresetVectorEnv(make_inner(), config, reset_terms={"episode": EpisodeStatistics()})
    pool = sample_actions(env.action_space, env.device, 64)
    env.reset(seed=0)
    for i in range(warmup):
        env.step(pool[i % len(pool)])
    return env, pool


def measure_mode(
    make_inner: Callable[[], gym.vector.VectorEnv],
    mode: str,
    *,
    steps: int,
    warmup: int = 10,
    env_id: str = "",
    progress: tqdm | None = None,
) -> ModeResult:
    """Time ``steps`` wrapper steps of ``mode`` after ``warmup`` untimed ones (which include any capture)."""
    env, pool = warmed_env(make_inner, mode, warmup=warmup, poll_interval=32)
    device = env.device
    is_cuda = device.type == "cuda"
    if is_cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for i in range(steps):
        env.step(pool[i % len(pool)])
        if progress is not None and i % 16 == 15:
            progress.update(16)
    if is_cuda:
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    if progress is not None:
        progress.update(steps % 16)
    syncs: float | None = None
    if is_cuda:
        from gym_graphreset.testing import count_host_syncs

        # one whole validation-poll period (at least 8 steps), so that the deferred poll counts at its true rate
        probe = max(8, env.config.validation_poll_interval)
        n, _ = count_host_syncs(lambda: [env.step(pool[j % len(pool)]) for j in range(probe)])
        syncs = n / probe
    compiled = env.capture_report().state["compile"]
    env.close()
    ms = elapsed / steps * 1e3
    return ModeResult(
        mode=mode,
        env_id=env_id,
        num_envs=env.num_envs,
        device=str(device),
        steps=steps,
        ms_per_step=ms,
        env_steps_per_s=env.num_envs * steps / elapsed,
        host_syncs_per_step=syncs,
        peak_gpu_mem_mb=torch.cuda.max_memory_allocated(device) / 2**20 if is_cuda else None,
        extra={} if compiled is None else {"compile": compiled},
    )


PhysicsStates = Literal["step", "free"]
"""Which states the bare-physics floor is timed on (:func:`measure_bare_physics`)."""
PhysicsGraph = Literal["warp", "torch"]
"""How the bare-physics floor replays on CUDA (:func:`measure_bare_physics`)."""


def _torch_graph_physics(physics: MJWarpVectorEnv) -> Callable[[], None]:
    """The physics substeps captured into a torch CUDA graph, warp joined to it as in the step graph: its replay."""
    runtime = physics.runtime
    stream = runtime.cuda_stream
    assert stream is not None  # a CUDA env (checked by the caller)
    physics.run_physics()  # modules loaded and the solver's own graph made before the capture
    torch.cuda.synchronize(physics.device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream), runtime.capture_scope(stream, "thread_local"):
        physics.run_physics()
    return graph.replay


def measure_bare_physics(
    make_inner: Callable[[], gym.vector.VectorEnv],
    *,
    steps: int,
    warmup: int = 10,
    env_id: str = "",
    states: PhysicsStates = "step",
    graph: PhysicsGraph = "warp",
) -> ModeResult | None:
    """Time the inner env's physics alone (``frame_skip`` substeps, captured on CUDA): the floor for a step.

    The solver's cost depends on the state (contacts, iterations), so the floor is timed on the states a
    real step visits. ``states="step"`` (default): every timed physics call follows one untimed step of
    the masked path with the modes' random actions (resets, commands and pushes included), keeps the ctrl
    that step wrote, and is timed alone between two device synchronisations. ``"free"``: the worlds are
    driven by the random actions written straight to ctrl and never reset (quicker, but e.g. a fallen
    legged robot has fewer contacts than a walking one, so this floor can sit below the step's own
    physics). ``extra["states"]`` records which.

    Returns ``None`` for envs that are not MuJoCo Warp envs.
    """
    if states not in ("step", "free"):
        raise ValueError(f"`states` must be 'step' or 'free', got {states!r}")
    if graph not in ("warp", "torch"):
        raise ValueError(f"`graph` must be 'warp' or 'torch', got {graph!r}")
    inner = make_inner()
    physics = inner.unwrapped
    # An env of that class exists only once its module is loaded: looked up there, so that importing the
    # bench (the CLI) does not import MuJoCo Warp for a torch-only env.
    mjwarp = sys.modules.get("gym_graphreset.envs.mjwarp")
    if mjwarp is None or not isinstance(physics, mjwarp.MJWarpVectorEnv):
        inner.close()
        return None
    device = torch.device(physics.device)
    if graph == "torch" and device.type != "cuda":
        inner.close()
        raise ValueError(f"`graph='torch'` needs a CUDA env (a CUDA graph), got device {device}")
    pool = sample_actions(inner.action_space, device, 64)  # the same actions the modes get

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    if states == "free":
        inner.reset(seed=0)
        replay = _torch_graph_physics(physics) if graph == "torch" else None

        def drive(actions: torch.Tensor) -> None:
            if replay is None:
                physics.run_physics(actions)
            else:
                physics.ctrl.copy_(actions)
                replay()

        for i in range(warmup):
            drive(pool[i % len(pool)])
        sync()
        start = time.perf_counter()
        for i in range(steps):
            drive(pool[i % len(pool)])
        sync()
        elapsed = time.perf_counter() - start
    else:
        env = FixedShapeAutoresetVectorEnv(inner, "masked")
        env.reset(seed=0)
        run = _torch_graph_physics(physics) if graph == "torch" else physics.run_physics
        elapsed = 0.0
        for i in range(warmup + steps):
            env.step(pool[i % len(pool)])  # untimed: brings the worlds to a state a real step leaves
            sync()
            start = time.perf_counter()
            run()
            sync()
            if i >= warmup:
                elapsed += time.perf_counter() - start
    inner.close()
    return ModeResult(
        mode="bare physics",
        env_id=env_id,
        num_envs=inner.num_envs,
        device=str(device),
        steps=steps,
        ms_per_step=elapsed / steps * 1e3,
        env_steps_per_s=inner.num_envs * steps / elapsed,
        host_syncs_per_step=None,
        peak_gpu_mem_mb=None,
        extra={"states": states, "graph": graph},
    )


def measure_non_physics(
    make_inner: Callable[[], gym.vector.VectorEnv],
    *,
    steps: int,
    warmup: int = 10,
    env_id: str = "",
    mode: str = "step graph",
) -> ModeResult | None:
    """The whole-step graph (``mode``) with the physics substeps switched off: a step's non-physics cost alone.

    With ``measure_bare_physics`` it splits a step: whole-step graph vs bare physics + this is the
    cost of sequencing the two (nothing but device work is left when the ratio is ~1). CUDA MuJoCo Warp
    envs only (``None`` otherwise).
    """
    inner = make_inner()
    if not hasattr(inner, "physics_enabled") or torch.device(getattr(inner, "device", "cpu")).type != "cuda":
        inner.close()
        return None
    inner.physics_enabled = False
    result = measure_mode(lambda: inner, mode, steps=steps, warmup=warmup, env_id=env_id)
    result.mode = "non-physics" + mode.removeprefix("step graph")
    return result


def measure_gymnasium_async(
    gym_id: str, num_envs: int, *, steps: int, warmup: int = 10, context: str | None = None
) -> ModeResult:
    """What users run today: Gymnasium's own env (MuJoCo C on the CPU) in ``AsyncVectorEnv`` processes.

    Random actions, Gymnasium's autoreset; ``num_envs`` worker processes. The reference point for the
    GPU modes' env-steps/s, measured in the same run on the same machine.
    """
    env = gym.make_vec(gym_id, num_envs=num_envs, vectorization_mode="async", vector_kwargs={"context": context})
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(64)]
    env.reset(seed=0)
    for i in range(warmup):
        env.step(actions[i % len(actions)])
    start = time.perf_counter()
    for i in range(steps):
        env.step(actions[i % len(actions)])
    elapsed = time.perf_counter() - start
    env.close()
    return ModeResult.cpu_baseline(f"gymnasium async x{num_envs}", gym_id, num_envs, steps, elapsed, num_envs * steps)


def measure_modes(
    make_inner: Callable[[], gym.vector.VectorEnv],
    modes: Sequence[str],
    *,
    steps: int,
    warmup: int = 10,
    env_id: str = "",
    show_progress: bool = True,
    physics_states: PhysicsStates = "step",
    physics_graph: PhysicsGraph = "warp",
) -> list[ModeResult]:
    """Measure each mode in turn with one progress bar over all of them.

    MuJoCo Warp envs also get the bare-physics floor (on ``physics_states``, replayed as ``physics_graph``,
    see :func:`measure_bare_physics`) and the whole-step graph's non-physics part.
    """
    with tqdm(total=steps * len(modes), desc=f"{env_id or 'env'}", unit="step", disable=not show_progress) as bar:
        results = []
        bare = measure_bare_physics(
            make_inner, steps=steps, warmup=warmup, env_id=env_id, states=physics_states, graph=physics_graph
        )
        if bare is not None:
            results.append(bare)
            for graph_mode in (m for m in ("step graph", "step graph+compile") if m in modes):
                bar.set_postfix_str("non-physics" + graph_mode.removeprefix("step graph"))
                non_physics = measure_non_physics(
                    make_inner, steps=steps, warmup=warmup, env_id=env_id, mode=graph_mode
                )
                if non_physics is not None:
                    results.append(non_physics)
        for mode in modes:
            bar.set_postfix_str(mode)
            results.append(measure_mode(make_inner, mode, steps=steps, warmup=warmup, env_id=env_id, progress=bar))
    return results
