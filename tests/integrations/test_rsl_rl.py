"""The rsl_rl adapter: VecEnv contract, time-outs and final observations, the final-obs PPO bootstrap, no host
reads in the step (and none per rollout step with the sync-free runner), random initial episode lengths,
save/load/export, and a short training run that improves, on every CPU preset."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch

pytest.importorskip("rsl_rl", reason="rsl-rl-lib is the optional `rsl_rl` extra")
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.integrations.rsl_rl import FinalObsPPO, RslRlVecEnv, SyncFreeOnPolicyRunner
from gym_graphreset.testing.host_reads import count_host_reads
from tests.conftest import Recorder, ScriptedVectorEnv, preset_device, scripted_env

N = 8


def train_cfg(num_steps: int = 8, final_obs: bool = True) -> dict[str, Any]:
    """A small rsl_rl 5.x runner config (MLP actor and critic)."""
    algorithm = "gym_graphreset.integrations.rsl_rl:FinalObsPPO" if final_obs else "PPO"
    return {
        "num_steps_per_env": num_steps,
        "save_interval": 1000,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {
            "class_name": algorithm,
            "num_learning_epochs": 4,
            "num_mini_batches": 4,
            "learning_rate": 1e-3,
            "entropy_coef": 0.0,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [32, 32],
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": [32, 32]},
    }


def scripted(preset: str, terms: bool = False) -> FixedShapeAutoresetVectorEnv:
    reset_terms = {"ep": EpisodeStatistics()} if terms else None
    return FixedShapeAutoresetVectorEnv(
        scripted_env(N, 64, p_done=0.2, device=preset_device(preset)), preset, reset_terms=reset_terms
    )


def test_is_an_rsl_rl_vecenv_with_policy_group(preset: str) -> None:
    env = RslRlVecEnv(scripted(preset), seed=0, max_episode_length=64)
    assert isinstance(env, VecEnv) and env.num_actions == 3 and env.max_episode_length == 64
    obs = env.get_observations()
    assert list(obs.keys()) == ["policy"] and obs["policy"].shape == (N, 4)
    obs, reward, dones, extras = env.step(torch.zeros(N, 3, device=env.device))
    assert reward.shape == (N,) and dones.shape == (N,) and extras["time_outs"].shape == (N,)
    assert all(v.dim() == 0 for v in extras["log"].values())  # scalars, never full width


def test_time_outs_and_final_obs_match_the_env(preset: str) -> None:
    recorder = Recorder(scripted(preset))
    env = RslRlVecEnv(recorder, seed=0, max_episode_length=64)
    seen_timeout = False
    for _ in range(20):
        _, _, dones, extras = env.step(torch.full((N, 3), 0.1, device=env.device))
        _, _, terminated, truncated, final = recorder.steps[-1]
        assert torch.equal(extras["time_outs"], truncated & ~terminated)
        assert torch.equal(dones, terminated | truncated)
        assert torch.equal(extras["final_obs"]["policy"][dones], final[dones])
        seen_timeout |= bool(extras["time_outs"].any())
    assert seen_timeout


def test_final_obs_ppo_bootstraps_time_outs_from_the_final_observation(preset: str) -> None:
    """The stored reward of a time-out row is r + gamma * V(final_obs); stock PPO's is r + gamma * V(s_t)."""
    for final_obs in (True, False):
        torch.manual_seed(0)
        recorder = Recorder(scripted(preset))
        env = RslRlVecEnv(recorder, seed=0, max_episode_length=64)
        runner = OnPolicyRunner(env, train_cfg(final_obs=final_obs), log_dir=None, device=str(env.device))
        alg = runner.alg
        assert isinstance(alg, FinalObsPPO) == final_obs
        obs = env.get_observations()
        with torch.inference_mode():
            for t in range(6):
                values = alg.critic(obs).reshape(-1)
                actions = alg.act(obs)
                obs, rewards, dones, extras = env.step(actions)
                alg.process_env_step(obs, rewards, dones, extras)
                _, reward, terminated, truncated, final = recorder.steps[-1]
                time_out = (truncated & ~terminated).float()
                bootstrap = alg.critic({"policy": final}).reshape(-1) if final_obs else values
                expected = reward + alg.gamma * bootstrap * time_out
                torch.testing.assert_close(alg.storage.rewards[t].reshape(-1), expected)


def test_no_host_reads_in_the_adapter_step(preset: str) -> None:
    """The adapter adds no host read to the env's own (which is 0 on the masked presets)."""
    adapter, twin = RslRlVecEnv(scripted(preset, terms=True), seed=0, max_episode_length=64), scripted(preset, True)
    twin.reset(seed=0)
    actions = torch.zeros(N, 3, device=adapter.device)
    for _ in range(3):
        adapter_reads, where = count_host_reads(lambda: adapter.step(actions))
        env_reads, _ = count_host_reads(lambda: twin.step(actions))
        assert adapter_reads == env_reads, where
        if preset != "selected":
            assert adapter_reads == 0, where


def _rollout_reads(runner_class: type, preset: str, num_steps: int, tmp_path: Path) -> int:
    env = RslRlVecEnv(scripted(preset, terms=True), seed=0, max_episode_length=64)
    env.env.validation_poll_interval = 10_000  # the wrapper's own poll is not the runner's
    cfg = train_cfg(num_steps)
    cfg["algorithm"]["schedule"] = "fixed"  # the adaptive learning rate's reads depend on the KL values
    runner = runner_class(env, cfg, log_dir=str(tmp_path / f"{runner_class.__name__}{num_steps}"), device="cpu")
    reads, _ = count_host_reads(lambda: runner.learn(1))
    return reads


@pytest.mark.parametrize("preset", ["masked_persistent"])
@pytest.mark.slow
def test_sync_free_runner_makes_no_host_read_per_rollout_step(preset: str, tmp_path: Path) -> None:
    """Doubling the rollout adds no host read with SyncFreeOnPolicyRunner; stock OnPolicyRunner reads every step."""
    ours = [_rollout_reads(SyncFreeOnPolicyRunner, preset, n, tmp_path) for n in (4, 8)]
    stock = [_rollout_reads(OnPolicyRunner, preset, n, tmp_path) for n in (4, 8)]
    assert ours[1] == ours[0]
    # per step: its NaN check (3 here: one group, rewards, dones), its logger (5), and at log time one read of the
    # step's extras["log"] (whether its means are NaN: such a step is left out, StepLog)
    assert stock[1] - stock[0] == 4 * 9


def test_episode_log_is_the_done_row_mean(preset: str) -> None:
    recorder = Recorder(scripted(preset, terms=True))
    env = RslRlVecEnv(recorder, seed=0, max_episode_length=64)
    stats = recorder.env.reset_terms["ep"]
    last = float("nan")
    for _ in range(12):
        _, _, dones, extras = env.step(torch.full((N, 3), 0.1, device=env.device))
        if dones.any():
            last = float(stats.episode_return[dones].mean())
        logged = float(extras["log"]["Episode/mean_return"])
        assert logged == pytest.approx(last, nan_ok=True)


@pytest.fixture(scope="module")
def pendulum_envs() -> dict[str, RslRlVecEnv]:
    """InvertedPendulum (MuJoCo Warp) per CPU preset, 16 rows, 40-step horizon so truncation happens."""
    envs = {}
    for preset in ("selected", "masked", "masked_persistent"):
        inner = gym.make_vec(
            "gym_graphreset/InvertedPendulum-v5", num_envs=16, vectorization_mode="vector_entry_point",
            max_episode_steps=40, device="cpu",
        )  # fmt: skip
        envs[preset] = RslRlVecEnv(FixedShapeAutoresetVectorEnv(inner, preset, reset_terms={"ep": EpisodeStatistics()}))
    return envs


@pytest.mark.parametrize("preset", ["selected", "masked", "masked_persistent"])
def test_random_initial_episode_lengths_are_written_to_the_env(preset: str, pendulum_envs) -> None:
    env = pendulum_envs[preset]
    env.env.reset(seed=1)
    env.episode_length_buf = torch.full((16,), env.max_episode_length - 1, dtype=torch.long)
    _, _, dones, extras = env.step(torch.zeros(16, 1))
    assert bool(dones.all())  # every row reached the horizon (or fell) on this very step
    assert bool(extras["time_outs"].any())
    assert int(env.episode_length_buf.max()) == 0  # the counters restarted with the new episodes
    with pytest.raises(ValueError, match=re.escape("`episode_length_buf` must be a tensor of shape (16,)")):
        env.episode_length_buf = torch.zeros(3, dtype=torch.long)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["selected", "masked", "masked_persistent"])
def test_training_improves_and_saves_loads_exports(preset: str, pendulum_envs, tmp_path: Path) -> None:
    """SyncFreeOnPolicyRunner + FinalObsPPO on InvertedPendulum; random initial lengths; save, load, export."""
    torch.manual_seed(0)
    env = pendulum_envs[preset]
    env.env.reset(seed=0)
    stats = env.env.reset_terms["ep"]
    runner = SyncFreeOnPolicyRunner(env, train_cfg(num_steps=16), log_dir=None, device="cpu")
    runner.learn(1, init_at_random_ep_len=True)
    stats.summary()  # forget the first iteration's (randomly shortened) episodes
    runner.learn(1)
    before = stats.summary()["mean_length"]
    runner.learn(4)
    after = stats.summary()["mean_length"]
    assert after > 1.5 * before, (before, after)

    runner.save(str(tmp_path / "model.pt"))
    other = SyncFreeOnPolicyRunner(env, train_cfg(num_steps=16), log_dir=None, device="cpu")
    other.load(str(tmp_path / "model.pt"))
    obs = env.get_observations()
    policy, loaded = runner.get_inference_policy(), other.get_inference_policy()
    runner.export_policy_to_jit(str(tmp_path), "policy.pt")
    jit = torch.jit.load(str(tmp_path / "policy.pt"))
    with torch.inference_mode():
        torch.testing.assert_close(loaded(copy.copy(obs)), policy(copy.copy(obs)))
        torch.testing.assert_close(jit(obs["policy"]), policy(obs))
    runner.export_policy_to_onnx(str(tmp_path), "policy.onnx")
    assert (tmp_path / "policy.onnx").stat().st_size > 0


def test_a_task_env_that_has_stepped_is_warned_about() -> None:
    """The reset at construction would end every row's episode of a task env that already stepped, and the
    terrain curriculum would judge them: warned, naming the fix; a fresh env or one put back to step 0 is not."""
    import warnings

    inner = gym.make_vec("gym_graphreset/Go1-Velocity-Flat-v0", num_envs=2, vectorization_mode="vector_entry_point")
    env = FixedShapeAutoresetVectorEnv(inner, "masked_persistent")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RslRlVecEnv(env, seed=0)  # fresh: no warning
    env.step(torch.zeros(env.action_space.shape))
    with pytest.warns(UserWarning, match=r"has stepped 1 times.*common_step.zero_\(\)"):
        RslRlVecEnv(env, seed=0)
    env.unwrapped.common_step.zero_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RslRlVecEnv(env, seed=0)
    env.close()


def test_refuses_what_it_cannot_run_by_name() -> None:
    from gym_graphreset.envs import CartPoleVectorEnv

    with pytest.raises(ValueError, match=re.escape("RslRlVecEnv needs a SAME_STEP vector env")):
        RslRlVecEnv(scripted_env(N, 8))
    with pytest.raises(ValueError, match=re.escape("RslRlVecEnv needs a Box action space")):
        RslRlVecEnv(FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N)))
    shallow = FixedShapeAutoresetVectorEnv(scripted_env(N, 8), "masked_persistent", published_buffer_depth=1)
    with pytest.raises(ValueError, match=re.escape("build it with published_buffer_depth>=2")):
        RslRlVecEnv(shallow, max_episode_length=8)
    with pytest.raises(ValueError, match=re.escape("RslRlVecEnv needs `max_episode_length`")):
        RslRlVecEnv(FixedShapeAutoresetVectorEnv(scripted_env(N, 8)))


class _EpisodeRecorder(gym.vector.VectorWrapper):
    """Keeps the raw return and length of every episode that ended (``info["episode"]`` on done rows)."""

    def __init__(self, env: FixedShapeAutoresetVectorEnv) -> None:
        super().__init__(env)
        self.returns: list[float] = []
        self.lengths: list[float] = []

    def step(self, actions):
        out = self.env.step(actions)
        done = out[2] | out[3]
        self.returns += out[4]["episode"]["r"][done].tolist()
        self.lengths += out[4]["episode"]["l"][done].tolist()
        return out


def test_sync_free_runner_logs_the_iteration_mean_over_episodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Episode/mean_return` is the mean over the iteration's episodes, each counted once (rsl_rl's stock
    logger, fed per-step means, weighs an episode by the steps until the next one ends)."""
    recorder = _EpisodeRecorder(scripted("masked", terms=True))
    env = RslRlVecEnv(recorder, seed=0, max_episode_length=64)
    runner = SyncFreeOnPolicyRunner(env, train_cfg(12), log_dir=str(tmp_path), device="cpu")
    from torch.utils.tensorboard import SummaryWriter

    logged: dict[str, list[float]] = {}
    record = lambda _, key, value, *args, **kwargs: logged.setdefault(key, []).append(float(value))  # noqa: E731
    monkeypatch.setattr(SummaryWriter, "add_scalar", record)
    runner.learn(1)
    assert len(recorder.returns) > 1
    assert logged["Episode/mean_return"] == [pytest.approx(sum(recorder.returns) / len(recorder.returns))]
    assert logged["Episode/mean_length"] == [pytest.approx(sum(recorder.lengths) / len(recorder.lengths))]
    assert not [tag for tag in logged if tag.startswith("/")]  # TensorBoard tags are paths without a leading slash


def test_learn_in_a_loop_continues_the_iteration_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``learn(1)`` three times logs iterations 0, 1, 2 (stock rsl_rl repeats iteration 0)."""
    env = RslRlVecEnv(scripted("masked", terms=True), seed=0, max_episode_length=64)
    runner = SyncFreeOnPolicyRunner(env, train_cfg(4), log_dir=str(tmp_path), device="cpu")
    from torch.utils.tensorboard import SummaryWriter

    steps: list[int] = []
    record = lambda _, key, value, step, *a, **k: steps.append(step) if key == "Loss/learning_rate" else None  # noqa: E731
    monkeypatch.setattr(SummaryWriter, "add_scalar", record)
    for _ in range(3):
        runner.learn(1)
    assert steps == [0, 1, 2] and runner.current_learning_iteration == 3
    runner.learn(0)
    assert runner.current_learning_iteration == 3


def test_episode_clock_is_checked_against_the_env(pendulum_envs) -> None:
    """`max_episode_length` must be the env's horizon; `episode_length_buf` holds integer counts in range."""
    inner = pendulum_envs["masked"].env  # truncates at max_episode_steps=40
    for bad, message in [
        (0, "`max_episode_length` must be an int >= 1, got 0"),
        (2.5, "`max_episode_length` must be an int >= 1, got 2.5"),
        (100, "`max_episode_length=100` but the env truncates at max_episode_steps=40 (its episode clock)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            RslRlVecEnv(inner, max_episode_length=bad)
    env = RslRlVecEnv(inner, seed=0, max_episode_length=40)
    before = env.episode_length_buf.clone()
    for value, message in [
        (
            torch.full((16,), -3, dtype=torch.long),
            "values must lie in [0, max_episode_length=40] (steps into the episode), got values in [-3, -3]",
        ),
        (torch.arange(16) * 4, "got values in [0, 60]"),
        (torch.full((16,), 2.7), "`episode_length_buf` must hold integer step counts, got dtype torch.float32"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            env.episode_length_buf = value
    assert torch.equal(env.episode_length_buf, before)  # nothing written by a refused value
    env.episode_length_buf = torch.arange(16) * 2  # in [0, 40]: accepted
    assert env.episode_length_buf.tolist() == list(range(0, 32, 2))


class _Opaque(gym.vector.VectorEnv):
    """A SAME_STEP vector env forwarding to ``self.env`` without being a gymnasium ``VectorWrapper``."""

    def __init__(self, env: FixedShapeAutoresetVectorEnv) -> None:
        self.env, self.metadata, self.num_envs = env, env.metadata, env.num_envs
        self.single_action_space, self.single_observation_space = env.single_action_space, env.single_observation_space


def test_ring_depth_is_checked_behind_pass_through_wrappers() -> None:
    """A depth-1 ring under any wrapper chain is refused (PPO would store obs(t+1) where obs(t) belongs)."""
    shallow = FixedShapeAutoresetVectorEnv(scripted_env(N, 8), "masked_persistent", published_buffer_depth=1)
    with pytest.raises(
        ValueError, match=re.escape("the env (found under Recorder -> Recorder) publishes through a ring of")
    ):
        RslRlVecEnv(Recorder(Recorder(shallow)), max_episode_length=8)
    with pytest.raises(ValueError, match=re.escape("RslRlVecEnv cannot see through _Opaque (a VectorEnv holding")):
        RslRlVecEnv(_Opaque(shallow), max_episode_length=8)
    deep = FixedShapeAutoresetVectorEnv(scripted_env(N, 8), "masked_persistent", published_buffer_depth=2)
    RslRlVecEnv(Recorder(deep), max_episode_length=8)


def test_load_policy_reads_rsl_rls_checkpoint_as_its_inference_policy(tmp_path: Path) -> None:
    """runner.save's file -> export.load_policy: the actor's deterministic output, normaliser folded in."""
    from gym_graphreset.integrations.export import check_export, export_torchscript, load_policy

    torch.manual_seed(0)
    env = RslRlVecEnv(scripted("masked_persistent"), seed=0, max_episode_length=64)
    cfg = train_cfg()
    cfg["actor"] |= {"obs_normalization": True, "activation": "tanh"}
    runner = OnPolicyRunner(env, copy.deepcopy(cfg), log_dir=None, device="cpu")
    runner.learn(2)  # moves the normaliser's statistics away from (0, 1)
    runner.save(str(tmp_path / "model.pt"), infos={"env_id": "scripted", "rl_cfg": cfg})
    policy = load_policy(tmp_path / "model.pt")
    assert policy.source.kind == "rsl_rl" and policy.source.env_id == "scripted"
    obs = env.get_observations()
    with torch.inference_mode():
        expected = runner.get_inference_policy()(copy.copy(obs))
    with torch.no_grad():
        torch.testing.assert_close(policy(obs["policy"]), expected)
    check = check_export(policy, export_torchscript(policy, tmp_path / "policy.pt"))
    assert check.max_abs_diff is not None and check.max_abs_diff < 1e-5
    with pytest.raises(ValueError, match=re.escape("`activation` must be one of")):
        load_policy(tmp_path / "model.pt", activation="swoosh")


def test_sync_free_runner_leaves_the_caller_s_config_unchanged() -> None:
    """SyncFreeOnPolicyRunner's check_for_nan=False default goes into a copy: a stock OnPolicyRunner built later
    from the same dict keeps rsl_rl's NaN check."""
    env = RslRlVecEnv(scripted("masked"), seed=0, max_episode_length=64)
    cfg = train_cfg()
    before = copy.deepcopy(cfg)
    runner = SyncFreeOnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    assert runner.cfg["check_for_nan"] is False
    assert "check_for_nan" not in cfg and cfg.keys() == before.keys()


@pytest.mark.slow
def test_stock_runner_logs_no_nan_before_the_first_episode_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the stock OnPolicyRunner an iteration in which no episode ended logs no episode means (NaN before), and
    one in which some ended logs finite ones; indexing extras["log"] still gives the step's value."""
    from torch.utils.tensorboard import SummaryWriter

    logged: list[tuple[str, float]] = []
    monkeypatch.setattr(
        SummaryWriter, "add_scalar", lambda self, tag, value, step=None, *a, **k: logged.append((tag, float(value)))
    )
    term = torch.zeros(40, N, dtype=torch.bool)
    term[6:, 0] = True  # the first episode ends at the 7th step: none in the first iteration (4 steps)
    inner = FixedShapeAutoresetVectorEnv(ScriptedVectorEnv(N, term, torch.zeros_like(term), "cpu"), "masked")
    env = RslRlVecEnv(inner, seed=0, max_episode_length=64)
    _, _, _, extras = env.step(torch.zeros(N, 3))
    assert "Episode/mean_return" not in extras["log"] and "Episode/mean_return" not in list(extras["log"])
    assert math.isnan(float(extras["log"]["Episode/mean_return"]))
    runner = OnPolicyRunner(env, train_cfg(num_steps=4), log_dir=str(tmp_path), device="cpu")
    runner.learn(3)
    episode = [(tag, value) for tag, value in logged if tag.startswith("Episode/")]
    assert all(math.isfinite(value) for _, value in logged), [e for e in logged if not math.isfinite(e[1])]
    assert {tag for tag, _ in episode} == {"Episode/mean_return", "Episode/mean_length"}
    assert len(episode) == 2 * 2  # iterations 2 and 3 (episodes ended), not iteration 1
