"""Gymnasium's MuJoCo v5 tasks on MuJoCo Warp, checked against Gymnasium's own envs (the oracle).

Tolerances: MuJoCo Warp runs in float32 (relative precision ~1.2e-7) where Gymnasium's MuJoCo runs in
float64; after ``frame_skip`` substeps of values up to ~1e2 the expected discrepancy is ~1e-5 absolute,
so one step is compared with ``atol=1e-3`` (obs and reward), which still catches any wrong term, index,
sign or weight. Ant is compared from contact-free states: with several active pyramidal-cone contacts
MuJoCo Warp's solver (tolerance clamped to 1e-6 in float32) lands up to ~10% away in constraint forces
in one step, so contact-rich behaviour is compared statistically (episode statistics) instead.
"""

from __future__ import annotations

import math
import re

import gymnasium as gym
import numpy as np
import pytest
import torch

import gym_graphreset  # noqa: F401  (registers the ids)
from gym_graphreset.envs.gym_mujoco.tasks import TASKS, AntEnv, HalfCheetahEnv, HopperEnv, HumanoidEnv, ReacherEnv

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

STEP_TASKS = list(TASKS)


@pytest.fixture(scope="module")
def envs() -> dict[str, object]:
    """One small CPU env per task, shared by the module (construction compiles warp kernels once)."""
    return {task: cls(4, device="cpu") for task, cls in TASKS.items()}


@pytest.mark.parametrize("task", STEP_TASKS)
def test_spaces_match_gymnasium(envs, task: str) -> None:
    ref = gym.make(task)
    env = envs[task]
    assert env.single_observation_space.shape == ref.observation_space.shape
    np.testing.assert_array_equal(env.single_action_space.low, ref.action_space.low)
    np.testing.assert_array_equal(env.single_action_space.high, ref.action_space.high)


# Humanoid, Swimmer and InvertedDoublePendulum take the longest to step on the CPU: `make test` runs them.
_SLOW_STEP_TASKS = {"Humanoid-v5", "Swimmer-v5", "InvertedDoublePendulum-v5"}


@pytest.mark.parametrize(
    "task", [pytest.param(t, marks=pytest.mark.slow) if t in _SLOW_STEP_TASKS else t for t in STEP_TASKS]
)
def test_one_step_matches_gymnasium(envs, task: str) -> None:
    """From an identical state and action: same observation, reward and termination."""
    env = envs[task]
    n, act_dim = env.num_envs, env.single_action_space.shape[0]
    rng = np.random.default_rng(0)
    env.reset(seed=3)
    warm_steps = 0 if task == "Ant-v5" else 5  # Ant: contact-free states (see the module docstring)
    for _ in range(warm_steps):
        env.step(torch.as_tensor(rng.uniform(-0.3, 0.3, (n, act_dim)), dtype=torch.float32))
    qpos, qvel = env.state()
    env.set_state(qpos, qvel)
    action = rng.uniform(-1, 1, (n, act_dim)).astype(np.float32)
    obs, reward, terminated, _, _ = env.step(torch.as_tensor(action))
    ref = gym.make(task).unwrapped
    ref.reset(seed=0)
    for i in range(n):
        ref.set_state(qpos[i].double().numpy(), qvel[i].double().numpy())
        ref_obs, ref_reward, ref_terminated, _, _ = ref.step(action[i])
        np.testing.assert_allclose(obs[i].numpy(), ref_obs, rtol=1e-4, atol=1e-3, err_msg=f"{task} world {i}")
        assert math.isclose(float(reward[i]), ref_reward, rel_tol=1e-4, abs_tol=1e-3), (task, i)
        assert bool(terminated[i]) == ref_terminated


@pytest.mark.parametrize(("cls", "qvel_kind"), [(HalfCheetahEnv, "normal"), (HopperEnv, "uniform")])
def test_reset_noise_distribution(cls, qvel_kind: str) -> None:
    """Reset noise has Gymnasium's distribution: uniform(+-scale) on qpos, uniform or normal(scale) on qvel."""
    env = cls(3000, device="cpu")
    env.reset(seed=11)
    scale = env.reset_noise_scale
    dq = env.qpos - env.init_qpos
    assert dq.abs().max() <= scale and dq.min() < -0.95 * scale and dq.max() > 0.95 * scale
    assert abs(dq.std().item() - scale / math.sqrt(3)) < 0.02 * scale
    if qvel_kind == "normal":
        assert abs(env.qvel.std().item() - scale) < 0.02 * scale and env.qvel.abs().max() > 3 * scale
    else:
        assert env.qvel.abs().max() <= scale and abs(env.qvel.std().item() - scale / math.sqrt(3)) < 0.02 * scale


def test_reacher_reset_matches_gymnasium_distribution() -> None:
    """Reacher's target: uniform in the disk of radius 0.2 like Gymnasium's rejection sampler (KS test on the
    radius and angle against Gymnasium's own resets); arm noise uniform(+-0.1), target velocity zero."""
    from gym_graphreset.testing import ks_statistic

    n = 2000
    env = ReacherEnv(n, device="cpu")
    env.reset(seed=2)
    ours = env.qpos[:, 2:].double()
    ref = gym.make("Reacher-v5").unwrapped
    theirs = []
    for i in range(n):
        ref.reset(seed=i)
        theirs.append(ref.data.qpos[2:].copy())
    theirs_t = torch.as_tensor(np.array(theirs))
    bound = 1.95 * math.sqrt(2 / n)  # KS critical value at alpha = 0.001
    for f in (lambda g: g.norm(dim=1), lambda g: torch.atan2(g[:, 1], g[:, 0])):
        assert ks_statistic(f(ours), f(theirs_t)) < bound
    assert ours.norm(dim=1).max() < 0.2
    dq = env.qpos[:, :2] - env.init_qpos[:2]
    assert dq.abs().max() <= 0.1 and dq.abs().max() > 0.099
    assert env.qvel[:, 2:].abs().max() == 0 and 0.0049 < env.qvel[:, :2].abs().max() <= 0.005


@pytest.mark.slow
def test_reacher_truncates_at_gymnasiums_horizon() -> None:
    env = gym.make_vec("gym_graphreset/Reacher-v5", num_envs=2, vectorization_mode="vector_entry_point", device="cpu")
    env.reset(seed=0)
    truncated = [bool(env.step(torch.zeros(2, 2))[3].all()) for _ in range(50)]
    assert truncated == [False] * 49 + [True] and env.max_episode_steps == gym.spec("Reacher-v5").max_episode_steps


def test_partial_reset_keeps_other_worlds_bitwise(envs) -> None:
    env = envs["Ant-v5"]
    env.reset(seed=0)
    env.step(torch.zeros(4, 8))
    before = env.state()
    env.reset(options={"reset_mask": torch.tensor([True, False, True, False])})
    after = env.state()
    for b, a in zip(before, after, strict=True):
        assert torch.equal(b[[1, 3]], a[[1, 3]]) and not torch.equal(b[[0, 2]], a[[0, 2]])
    assert env.episode.tolist() == [1, 0, 1, 0] and env.elapsed.tolist() == [0, 1, 0, 1]


def test_draws_do_not_depend_on_num_envs_or_offset() -> None:
    big = HopperEnv(6, device="cpu")
    small = HopperEnv(3, device="cpu", global_env_offset=3)
    assert torch.equal(big.reset(seed=5)[0][3:], small.reset(seed=5)[0])


def test_set_state_and_state_roundtrip(envs) -> None:
    env = envs["Hopper-v5"]
    env.reset(seed=0)
    qpos, qvel = env.state()
    new_qpos = qpos + 0.01
    env.set_state(new_qpos, qvel, env_ids=torch.tensor([1]))
    got, _ = env.state()
    assert torch.equal(got[1], new_qpos[1]) and torch.equal(got[0], qpos[0])


def test_truncates_at_max_episode_steps() -> None:
    env = HalfCheetahEnv(2, device="cpu", max_episode_steps=3)
    env.reset(seed=0)
    flags = [env.step(torch.zeros(2, 6))[3].tolist() for _ in range(3)]
    assert flags == [[False, False], [False, False], [True, True]]


def test_make_vec() -> None:
    env = gym.make_vec(
        "gym_graphreset/Hopper-v5",
        num_envs=3,
        vectorization_mode="vector_entry_point",
        device="cpu",
        ctrl_cost_weight=0.5,
    )
    assert isinstance(env, HopperEnv) and env.num_envs == 3 and env.ctrl_cost_weight == 0.5


def test_humanoid_runs_with_newton_solver() -> None:
    import mujoco

    env = HumanoidEnv(2, device="cpu")
    assert env.mjm.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"frame_skip": 0}, "`frame_skip` must be >= 1, got 0"),
        ({"device": "meta"}, "`device` must be 'cpu' or 'cuda[:N]', got meta"),
        ({"render_mode": "human"}, "HopperEnv: `render_mode` must be None or 'rgb_array', got 'human'"),
        ({"nconmax": 0}, "`nconmax` must be None (MuJoCo Warp's default) or an int >= 1, got 0"),
        ({"njmax": -1}, "`njmax` must be None (MuJoCo Warp's default) or an int >= 1, got -1"),
        ({"max_episode_steps": 0}, "`max_episode_steps` must be >= 1, got 0"),
    ],
)
def test_bad_arguments(kwargs, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        HopperEnv(2, **kwargs)


def _episode_stats(lengths: list[float], returns: list[float]) -> tuple[float, float, float, float]:
    lengths_a, returns_a = np.asarray(lengths), np.asarray(returns)
    n = len(lengths_a)
    return lengths_a.mean(), lengths_a.std(ddof=1) / n**0.5, returns_a.mean(), returns_a.std(ddof=1) / n**0.5


@pytest.mark.slow
@pytest.mark.parametrize("task", ["Hopper-v5", "Ant-v5"])
def test_episode_statistics_agree_with_gymnasium(task: str) -> None:
    """Random-action rollouts: episode length and return agree with Gymnasium within seed noise (z < 4)."""
    from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv

    n, steps = 64, 120 if task == "Hopper-v5" else 80
    env = FixedShapeAutoresetVectorEnv(
        TASKS[task](n, device="cpu", max_episode_steps=60), reset_terms={"ep": EpisodeStatistics()}
    )
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    act_dim = env.single_action_space.shape[0]
    lengths, returns = [], []
    for _ in range(steps):
        *_, info = env.step(torch.as_tensor(rng.uniform(-1, 1, (n, act_dim)), dtype=torch.float32))
        if "episode" in info:
            done = info["_episode"]
            lengths += info["episode"]["l"][done].tolist()
            returns += info["episode"]["r"][done].tolist()
    ref = gym.make(task, max_episode_steps=60)
    ref_lengths, ref_returns = [], []
    ref.reset(seed=0)
    ep_ret, ep_len = 0.0, 0
    while len(ref_lengths) < max(len(lengths), 100):
        _, r, te, tr, _ = ref.step(rng.uniform(-1, 1, act_dim))
        ep_ret, ep_len = ep_ret + r, ep_len + 1
        if te or tr:
            ref_lengths.append(ep_len)
            ref_returns.append(ep_ret)
            ep_ret, ep_len = 0.0, 0
            ref.reset()
    ours, theirs = _episode_stats(lengths, returns), _episode_stats(ref_lengths, ref_returns)
    for k in (0, 2):
        z = abs(ours[k] - theirs[k]) / math.hypot(ours[k + 1], theirs[k + 1])
        assert z < 4, f"{task}: ours {ours[k]:.3f}±{ours[k + 1]:.3f} vs Gymnasium {theirs[k]:.3f}±{theirs[k + 1]:.3f}"


@pytest.mark.parametrize(
    "task",
    [
        "InvertedPendulum-v5",  # the cheapest to step: the quick subset's case
        pytest.param("Hopper-v5", marks=pytest.mark.slow),
        pytest.param("Ant-v5", marks=pytest.mark.slow),
    ],
)
def test_selected_and_masked_paths_identical(task: str) -> None:
    """Through the wrapper, the selected-row and masked paths give bit-identical trajectories on the CPU.

    17 steps with an 8-step horizon: every row resets at least twice (truncated at steps 8 and 16, earlier
    where the task terminates), so the masked resets are compared, not only the steps between them.
    """
    from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
    from gym_graphreset.testing import assert_masked_matches_selected

    n = 8
    gen = torch.Generator().manual_seed(0)
    act_dim = TASKS[task](1, device="cpu").single_action_space.shape[0]
    actions = [torch.rand(n, act_dim, generator=gen) * 2 - 1 for _ in range(17)]

    def factory(kwargs):
        inner = TASKS[task](n, device="cpu", max_episode_steps=8)
        return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **kwargs)

    assert_masked_matches_selected(factory, actions)
    assert_masked_matches_selected(factory, actions, config="masked_persistent")


def test_overflow_is_latched_and_named() -> None:
    """A constraint buffer that is too small is reported at the poll by name, with no per-step host read."""
    from gym_graphreset import DeferredValidationError, FixedShapeAutoresetVectorEnv

    env = FixedShapeAutoresetVectorEnv(
        AntEnv(2, device="cpu", njmax=2),
        "masked",
        validation_poll_interval=4,
    )
    env.reset(seed=0)
    with pytest.raises(DeferredValidationError, match=r"mjwarp_overflow\[NEFC\]"):
        for _ in range(40):
            env.step(torch.zeros(2, 8))


def test_dropped_contacts_are_latched_with_their_worlds() -> None:
    """Too few contact slots: contacts are dropped, and the drop is latched per world, never silent."""
    from gym_graphreset import DeferredValidationError, FixedShapeAutoresetVectorEnv

    env = FixedShapeAutoresetVectorEnv(AntEnv(8, device="cpu", nconmax=1), "masked", validation_poll_interval=1000)
    env.reset(seed=0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        env.step(torch.rand(8, 8, generator=gen) * 2 - 1)
    with pytest.raises(
        DeferredValidationError, match=r"mjwarp_overflow\[BROADPHASE\].*\(first failed at step \d+, row \d+"
    ):
        env.poll_finite_validation()


@pytest.mark.slow
def test_env_physics_is_raw_mujoco_warp() -> None:
    """From the same contact-rich states, AntEnv's step equals raw mujoco_warp's bit for bit (the contact
    difference from MuJoCo C is MuJoCo Warp's own; benchmarks/contact_parity.py measures it)."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "contact_parity.py"
    spec = importlib.util.spec_from_file_location("contact_parity", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        assert module.main(["--states", "4", "--out", out]) == 0
        summary = json.loads((Path(out) / "contact-parity-Ant-v5-cpu.json").read_text())["summary"]
    assert summary["env_vs_warp"] == 0.0


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "copy", "wrapped deepcopy"])
def test_pickle_and_copy_refused_by_name(how: str) -> None:
    """Pickling or copying a MuJoCo Warp env (or a wrapper around it) names the env and what to do instead."""
    import copy
    import pickle

    from gym_graphreset import FixedShapeAutoresetVectorEnv
    from gym_graphreset.envs.gym_mujoco.tasks import InvertedPendulumEnv

    env = InvertedPendulumEnv(2, device="cpu")
    calls = {
        "pickle": lambda: pickle.dumps(env),
        "deepcopy": lambda: copy.deepcopy(env),
        "copy": lambda: copy.copy(env),
        "wrapped deepcopy": lambda: copy.deepcopy(FixedShapeAutoresetVectorEnv(env)),
    }
    with pytest.raises(TypeError, match=r"InvertedPendulumEnv cannot be pickled or copied: .*Build another env"):
        calls[how]()


def test_step_takes_a_numpy_action_and_refuses_a_list_by_name() -> None:
    """A MuJoCo Warp env steps on a numpy action (``action_space.sample()``) as on the same tensor; a list is
    refused, named."""
    from gym_graphreset.envs.gym_mujoco.tasks import InvertedPendulumEnv

    a, b = InvertedPendulumEnv(2, device="cpu"), InvertedPendulumEnv(2, device="cpu")
    a.reset(seed=3)
    b.reset(seed=3)
    actions = np.array([[0.5], [-1.0]], dtype=np.float32)
    for x, y in zip(a.step(actions)[:4], b.step(torch.as_tensor(actions))[:4], strict=True):
        assert torch.equal(x, y)
    with pytest.raises(ValueError, match="actions must be a torch.Tensor or a numpy array, got list"):
        a.step([[0.5], [-1.0]])  # type: ignore[arg-type]
