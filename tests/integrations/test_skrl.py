"""The skrl adapter: skrl's env interface in torch, final observations, the final-obs PPO bootstrap with GAE's
last value from the continuing observation, no host reads in the step, save/load, and a short training run
that improves, on every CPU preset."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import pytest
import torch

pytest.importorskip("skrl", reason="skrl is the optional `skrl` extra")
from skrl.envs.wrappers.torch.base import Wrapper
from skrl.trainers.torch import SequentialTrainer

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.envs import CartPoleVectorEnv
from gym_graphreset.integrations.skrl import FinalObsPPO, SkrlEnv, ppo_agent
from gym_graphreset.testing.host_reads import count_host_reads
from tests.conftest import Recorder, ScriptedVectorEnv, preset_device, scripted_env

N = 8


def scripted(preset: str, terms: bool = False) -> FixedShapeAutoresetVectorEnv:
    reset_terms = {"ep": EpisodeStatistics()} if terms else None
    return FixedShapeAutoresetVectorEnv(
        scripted_env(N, 64, p_done=0.2, device=preset_device(preset)), preset, reset_terms=reset_terms
    )


def test_is_an_skrl_wrapper_in_torch(preset: str) -> None:
    env = SkrlEnv(scripted(preset), seed=0)
    assert isinstance(env, Wrapper) and env.num_envs == N and env.state_space is None
    assert env.observation_space.shape == (4,) and env.action_space.shape == (3,)
    obs, _ = env.reset()
    assert obs.shape == (N, 4) and obs.device == env.device
    obs, reward, terminated, truncated, infos = env.step(torch.zeros(N, 3, device=env.device))
    assert reward.shape == terminated.shape == truncated.shape == (N, 1)
    assert all(v.dim() == 0 for v in infos["log"].values())  # scalars, never full width
    assert torch.equal(env.reset()[0], obs)  # later resets continue from the current observations


def test_final_observations_match_the_env(preset: str) -> None:
    recorder = Recorder(scripted(preset))
    env = SkrlEnv(recorder, seed=0)
    env.reset()
    seen = False
    for _ in range(20):
        obs, _, terminated, truncated, infos = env.step(torch.full((N, 3), 0.1, device=env.device))
        rec_obs, _, rec_term, rec_trunc, final = recorder.steps[-1]
        done = (rec_term | rec_trunc).view(-1)
        assert torch.equal(terminated.view(-1), rec_term) and torch.equal(truncated.view(-1), rec_trunc)
        assert torch.equal(obs, rec_obs)
        assert torch.equal(infos["final_observations"][done], final[done])
        seen |= bool(rec_trunc.any())
    assert seen


def test_final_obs_ppo_bootstraps_from_final_and_gae_from_the_continuing_obs(preset: str) -> None:
    torch.manual_seed(0)
    recorder = Recorder(scripted(preset))
    env = SkrlEnv(recorder, seed=0)
    agent = ppo_agent(env, rollouts=6, learning_epochs=1, mini_batches=1)
    assert isinstance(agent, FinalObsPPO) and agent.cfg.time_limit_bootstrap
    agent.init()
    agent.enable_training_mode(True)
    obs, _ = env.reset()
    gamma = agent.cfg.discount_factor
    with torch.no_grad():
        for t in range(5):
            actions, _ = agent.act(obs, None, timestep=t, timesteps=6)
            nxt, reward, terminated, truncated, infos = env.step(actions)
            agent.record_transition(
                observations=obs, states=None, actions=actions, rewards=reward, next_observations=nxt,
                next_states=None, terminated=terminated, truncated=truncated, infos=infos, timestep=t, timesteps=6,
            )  # fmt: skip
            final = recorder.steps[-1][4]
            final_value, _ = agent.value.act({"observations": final, "states": None}, role="value")
            expected = reward + gamma * final_value * truncated
            torch.testing.assert_close(agent.memory.get_tensor_by_name("rewards")[t], expected)
            obs = nxt
    assert torch.equal(agent._current_next_observations, obs)  # GAE's last value: the continuing observation


def test_no_host_reads_in_the_adapter_step(preset: str) -> None:
    adapter, twin = SkrlEnv(scripted(preset, terms=True), seed=0), scripted(preset, terms=True)
    adapter.reset()
    twin.reset(seed=0)
    actions = torch.zeros(N, 3, device=adapter.device)
    for _ in range(3):
        adapter_reads, where = count_host_reads(lambda: adapter.step(actions))
        env_reads, _ = count_host_reads(lambda: twin.step(actions))
        assert adapter_reads == env_reads, where
        if preset != "selected":
            assert adapter_reads == 0, where


def test_discrete_actions_step() -> None:
    env = SkrlEnv(FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N), "masked"), seed=0)
    env.reset()
    obs, *_ = env.step(torch.ones(N, 1, dtype=torch.long))
    assert obs.shape == (N, 4)


@pytest.fixture(scope="module")
def pendulum_envs() -> dict[str, FixedShapeAutoresetVectorEnv]:
    """InvertedPendulum (MuJoCo Warp) per CPU preset, 16 rows, 40-step horizon so truncation happens."""
    envs = {}
    for preset in ("selected", "masked", "masked_persistent"):
        inner = gym.make_vec(
            "gym_graphreset/InvertedPendulum-v5", num_envs=16, vectorization_mode="vector_entry_point",
            max_episode_steps=40, device="cpu",
        )  # fmt: skip
        envs[preset] = FixedShapeAutoresetVectorEnv(inner, preset, reset_terms={"ep": EpisodeStatistics()})
    return envs


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["selected", "masked", "masked_persistent"])
def test_training_improves_and_saves_loads(preset: str, pendulum_envs, tmp_path: Path) -> None:
    """FinalObsPPO through SequentialTrainer on InvertedPendulum; the saved agent loads with the same policy."""
    torch.manual_seed(0)
    wrapped = pendulum_envs[preset]
    stats = wrapped.reset_terms["ep"]
    env = SkrlEnv(wrapped, seed=0)
    agent = ppo_agent(env, rollouts=16, learning_epochs=4, mini_batches=4, learning_rate=1e-3)
    cfg = {"timesteps": 32, "headless": True, "disable_progressbar": True, "close_environment_at_exit": False}
    trainer = SequentialTrainer(env=env, agents=agent, cfg=cfg)
    trainer.train()
    before = stats.summary()["mean_length"]
    for _ in range(3):
        trainer.train()
    after = stats.summary()["mean_length"]
    assert after > 1.5 * before, (before, after)

    agent.save(str(tmp_path / "agent.pt"))
    other = ppo_agent(env, rollouts=16)
    other.init()
    other.load(str(tmp_path / "agent.pt"))
    obs, _ = env.reset()
    with torch.no_grad():
        mine, _ = agent.policy.act({"observations": obs, "states": None}, role="policy")
        theirs, _ = other.policy.act({"observations": obs, "states": None}, role="policy")
    assert agent.policy.state_dict().keys() == other.policy.state_dict().keys()
    for key, value in agent.policy.state_dict().items():
        torch.testing.assert_close(other.policy.state_dict()[key], value)
    assert mine.shape == theirs.shape == (16, 1)


def test_refuses_what_it_cannot_run_by_name() -> None:
    with pytest.raises(ValueError, match=re.escape("SkrlEnv needs a SAME_STEP vector env")):
        SkrlEnv(scripted_env(N, 8))
    shallow = FixedShapeAutoresetVectorEnv(scripted_env(N, 8), "masked_persistent", published_buffer_depth=1)
    with pytest.raises(ValueError, match=re.escape("build it with published_buffer_depth>=2")):
        SkrlEnv(shallow)
    with pytest.raises(ValueError, match=re.escape("ppo_agent builds a Gaussian policy: it needs a Box")):
        ppo_agent(SkrlEnv(FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(N))))


def _record(agent: FinalObsPPO, env: SkrlEnv, obs: torch.Tensor, t: int) -> tuple[torch.Tensor, ...]:
    actions, _ = agent.act(obs, env.state(), timestep=t, timesteps=8)
    states = env.state()
    nxt, reward, terminated, truncated, infos = env.step(actions)
    agent.record_transition(
        observations=obs, states=states, actions=actions, rewards=reward, next_observations=nxt,
        next_states=env.state(), terminated=terminated, truncated=truncated, infos=infos, timestep=t, timesteps=8,
    )  # fmt: skip
    return nxt, reward, terminated, truncated, infos


def test_final_obs_ppo_bootstraps_only_time_outs_not_terminal_truncations() -> None:
    """A row both terminated and truncated ended in a terminal state: its reward gets no bootstrap."""
    steps = 4
    term = torch.zeros(steps, N, dtype=torch.bool)
    trunc = torch.zeros(steps, N, dtype=torch.bool)
    term[1, :4] = trunc[1, 2:6] = True  # rows 2, 3 both; rows 4, 5 time-outs; rows 0, 1 terminal
    env = SkrlEnv(FixedShapeAutoresetVectorEnv(ScriptedVectorEnv(N, term, trunc), "masked"), seed=0)
    torch.manual_seed(0)
    agent = ppo_agent(env, rollouts=steps, learning_epochs=1, mini_batches=1)
    agent.init()
    agent.enable_training_mode(True)
    obs, _ = env.reset()
    with torch.no_grad():
        for t in range(2):
            obs, reward, terminated, truncated, infos = _record(agent, env, obs, t)
        final_value, _ = agent.value.act({"observations": infos["final_observations"], "states": None}, role="value")
    time_outs = torch.tensor([False, False, False, False, True, True, False, False]).reshape(N, 1)
    assert torch.equal(truncated & ~terminated, time_outs)
    expected = reward + agent.cfg.discount_factor * final_value * time_outs
    torch.testing.assert_close(agent.memory.get_tensor_by_name("rewards")[1], expected)


def test_ppo_agent_feeds_the_critic_group_to_the_value_network() -> None:
    """With a ``critic`` observation group (Go1's privileged observation) the value MLP reads it."""
    from gymnasium import spaces

    from gym_graphreset.wrappers import TransformObservation

    inner = scripted_env(N, 16)
    groups = spaces.Dict(
        {"policy": inner.single_observation_space, "critic": spaces.Box(-float("inf"), float("inf"), (6,))}
    )
    asymmetric = TransformObservation(inner, lambda o: {"policy": o, "critic": torch.cat((o, o[:, :2] * 2), 1)}, groups)
    env = SkrlEnv(FixedShapeAutoresetVectorEnv(asymmetric, "masked"), seed=0)
    assert env.state_space is not None and env.state_space.shape == (6,)
    agent = ppo_agent(env)
    obs, states = torch.zeros(N, 4), torch.zeros(N, 6)
    with torch.no_grad():
        value = agent.value.act({"observations": obs, "states": states}, role="value")[0]
        other_states = agent.value.act({"observations": obs, "states": states + 1}, role="value")[0]
        other_obs = agent.value.act({"observations": obs + 1, "states": states}, role="value")[0]
    assert not torch.equal(value, other_states)  # the critic group moves the value
    assert torch.equal(value, other_obs)  # the policy group does not
    agent.init()
    agent.enable_training_mode(True)
    obs, _ = env.reset()
    with torch.no_grad():
        for t in range(3):
            obs, *_ = _record(agent, env, obs, t)


def test_ring_depth_is_checked_behind_pass_through_wrappers() -> None:
    shallow = FixedShapeAutoresetVectorEnv(scripted_env(N, 8), "masked_persistent", published_buffer_depth=1)
    with pytest.raises(ValueError, match=re.escape("the env (found under Recorder) publishes through a ring of")):
        SkrlEnv(Recorder(shallow))
