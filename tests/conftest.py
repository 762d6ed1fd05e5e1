"""Shared fixtures: devices, a scripted torch env whose terminations tests control, factories."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from gym_graphreset import (
    PRESETS,
    EpisodeStatistics,
    FixedShapeAutoresetVectorEnv,
    ResetSelection,
    StepConfig,
    resolve_reset_mask,
)
from gym_graphreset.core.rng import counter_normal
from gym_graphreset.envs import CartPoleVectorEnv

CUDA = torch.cuda.is_available()
# Vendored third-party scripts are data that tests run, not test modules (--doctest-modules would import them).
collect_ignore_glob = ["integrations/data/*"]
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # one xdist worker per core: torch's threads share them
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_script(path: Path) -> ModuleType:
    """Import the script at ``path`` as a module named after its file (scripts are not a package), once."""
    name = path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py``."""
    return load_script(EXAMPLES / f"{name}.py")


needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (run on the GPU machine)")

MODES: dict[str, dict[str, Any]] = {
    name: {"config": PRESETS[name]}
    for name in ("selected", "masked", "masked_persistent")  # type: ignore[index]
} | {
    "masked_persistent_depth1": {"config": StepConfig.preset("masked_persistent", published_buffer_depth=1)},
    "masked_persistent_depth4": {"config": StepConfig.preset("masked_persistent", published_buffer_depth=4)},
}
"""Mode name -> the wrapper's keywords, {"config": StepConfig}: `FixedShapeAutoresetVectorEnv(env, **MODES[m])`."""
GRAPH_MODES: dict[str, dict[str, Any]] = {
    name: {"config": StepConfig.preset(name, graph_warmup=2)}
    for name in ("reset_graph", "step_graph")  # type: ignore[arg-type]
}


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, needs_cuda])])
def device(request: pytest.FixtureRequest) -> torch.device:
    """Every device test runs on the CPU and, where there is one, on CUDA."""
    return torch.device(request.param)


class ScriptedVectorEnv(VectorEnv):
    """A torch env whose terminations/truncations follow a script, for driving reset sequences.

    obs = (position (3,), episode index); position moves by the (Box) action; reset draws position from
    the counter-based normal, so every reset path gives identical values.
    """

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}
    supports_reset_selection = True
    supports_step_capture = True

    def __init__(self, num_envs: int, terminated: torch.Tensor, truncated: torch.Tensor, device: Any = "cpu") -> None:
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.single_observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.single_action_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.term_script = terminated.to(self.device)
        self.trunc_script = truncated.to(self.device)
        self.t = torch.zeros(1, dtype=torch.long, device=self.device)
        self.pos = torch.zeros(num_envs, 3, device=self.device)
        self.episode = torch.full((num_envs,), -1, dtype=torch.long, device=self.device)
        self.env_ids = torch.arange(num_envs, device=self.device)
        self.seed = torch.zeros((), dtype=torch.long, device=self.device)
        self.reset_calls = 0

    def _obs(self) -> torch.Tensor:
        return torch.cat([self.pos, self.episode.unsqueeze(1).float()], dim=1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[torch.Tensor, dict]:
        self.reset_calls += 1
        if seed is not None:
            self.seed.fill_(seed)
            self.episode.fill_(-1)
            self.t.zero_()
        m = (options or {}).get("reset_mask")
        mask = m.mask if isinstance(m, ResetSelection) else resolve_reset_mask(m, self.num_envs, self.device)
        self.episode.copy_(torch.where(mask, self.episode + 1, self.episode))
        draws = counter_normal(self.seed, self.env_ids, self.episode, 3)
        self.pos.copy_(torch.where(mask.unsqueeze(1), draws, self.pos))
        return self._obs(), {}

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        self.pos.add_(actions)
        reward = self.pos.sum(dim=1)
        idx = self.t.clamp(max=self.term_script.shape[0] - 1)
        terminated = self.term_script.index_select(0, idx).squeeze(0)
        truncated = self.trunc_script.index_select(0, idx).squeeze(0)
        self.t.add_(1)
        return self._obs(), reward, terminated, truncated, {"pos_norm": self.pos.norm(dim=1)}


def scripted_env(
    num_envs: int, steps: int, p_done: float = 0.1, seed: int = 0, device: Any = "cpu"
) -> ScriptedVectorEnv:
    """A scripted env with Bernoulli(p_done) terminations and rarer truncations."""
    gen = torch.Generator().manual_seed(seed)
    term = torch.rand(steps, num_envs, generator=gen) < p_done
    trunc = torch.rand(steps, num_envs, generator=gen) < p_done / 3
    return ScriptedVectorEnv(num_envs, term, trunc, device)


@pytest.fixture
def cartpole_factory():
    """Build a wrapped CartPole for a mode."""

    def make(num_envs: int = 8, device: Any = "cpu", **kwargs: Any) -> FixedShapeAutoresetVectorEnv:
        return FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(num_envs, device=device), **kwargs)

    return make


CPU_PRESETS = ("selected", "masked", "masked_persistent")
"""The presets that run on the CPU: every adapter's tests run on each."""


@pytest.fixture(params=[*CPU_PRESETS, pytest.param("step_graph", marks=[pytest.mark.cuda, needs_cuda])])
def preset(request: pytest.FixtureRequest) -> str:
    """Every CPU preset, and the whole-step graph where there is a GPU (adapters' tests)."""
    return request.param


def presets_quick(*quick: str) -> list[Any]:
    """The ``preset`` fixture's values with every CPU preset but ``quick`` marked slow, for a test that takes
    seconds per preset: ``@pytest.mark.parametrize("preset", presets_quick("masked"))`` keeps one in the
    quick subset and all in ``make test``."""
    unknown = set(quick) - set(CPU_PRESETS)
    if unknown:
        raise ValueError(f"presets_quick takes CPU presets {CPU_PRESETS}, got {sorted(unknown)}")
    cpu = [p if p in quick else pytest.param(p, marks=pytest.mark.slow) for p in CPU_PRESETS]
    return [*cpu, pytest.param("step_graph", marks=[pytest.mark.cuda, needs_cuda])]


def preset_device(preset: str) -> torch.device:
    """Where an env for ``preset`` runs: CUDA for the graph presets, else the CPU."""
    return torch.device("cuda" if preset in ("reset_graph", "step_graph") else "cpu")


class Recorder(VectorWrapper):
    """Keeps a copy of every step's outputs as the wrapper returned them (for comparing the adapter's)."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.steps: list[tuple[Any, ...]] = []

    def step(self, actions):
        out = self.env.step(actions)
        obs, reward, terminated, truncated, info = out
        final = info.get("final_obs", obs)
        self.steps.append((obs.clone(), reward.clone(), terminated.clone(), truncated.clone(), final.clone()))
        return out


PPO_ENV_ID = "gym_graphreset/InvertedPendulum-v5"


def ppo_args(ppo: ModuleType, folder: Path, *extra: str) -> Any:
    """A tiny PPO example run on InvertedPendulum (8 envs x 8 steps, 3 iterations), checkpoints in ``folder/ckpt``."""
    argv = ["--env-id", PPO_ENV_ID, "--num-envs", "8", "--num-steps", "8", "--total-timesteps", str(8 * 8 * 3)]
    argv += ["--device", "cpu", "--num-minibatches", "2", "--update-epochs", "1", "--log-every", "1"]
    argv += ["--hidden-dims", "16,16", "--out", str(folder / "out"), "--save-dir", str(folder / "ckpt")]
    return ppo.parse_args([*argv, *extra])


@pytest.fixture(scope="session")
def ppo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, Path]:
    """Three PPO example iterations on the CPU, a checkpoint every 2 and at the end (and TensorBoard scalars)."""
    ppo = load_example("ppo_continuous")
    folder = tmp_path_factory.mktemp("ppo")
    ppo.train(ppo_args(ppo, folder, "--save-every", "2", "--tensorboard-dir", str(folder / "tb")))
    return ppo, folder


class _Clip:
    """moviepy's ImageSequenceClip as RecordVideo calls it: keeps the frames instead of encoding them."""

    written: list[tuple[str, list[np.ndarray], float]] = []

    def __init__(self, frames: list[np.ndarray], fps: float) -> None:
        self.frames, self.fps = list(frames), fps

    def write_videofile(self, path: str, logger: Any = None) -> None:
        _Clip.written.append((path, self.frames, self.fps))


@pytest.fixture
def clips(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[np.ndarray], float]]:
    """RecordVideo's encoder replaced (moviepy is not a dependency); everything else is Gymnasium's own."""
    import sys
    import types

    for name in ("moviepy", "moviepy.video", "moviepy.video.io"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(
        sys.modules, "moviepy.video.io.ImageSequenceClip", types.SimpleNamespace(ImageSequenceClip=_Clip)
    )
    _Clip.written = []
    return _Clip.written


def step_graph_canary(inner: VectorEnv, config: StepConfig, width: int) -> tuple[FixedShapeAutoresetVectorEnv, Any]:
    """CUDA: ``inner`` under ``config`` (a step graph), six zero-action steps to capture, then the sleep canary over
    four more; returns the env (open, for its reports) and the canary's result."""
    from gym_graphreset.testing import assert_sync_free

    env = FixedShapeAutoresetVectorEnv(
        inner, reset_terms={"ep": EpisodeStatistics()}, config=config, validation_poll_interval=10_000
    )
    env.reset(seed=0)
    a = torch.zeros(inner.num_envs, width, device="cuda")
    for _ in range(6):
        env.step(a)
    return env, assert_sync_free(lambda: env.step(a), device="cuda", steps=4)
