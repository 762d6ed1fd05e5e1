"""The CleanRL recipe (docs/cleanrl.md) on every preset: CleanRL's PPO rollout and GAE with the recipe's changed
lines run on a batched env, and the logged returns are raw (InvertedPendulum: return == length, less the terminating
step's 0). test_cleanrl_script.py runs CleanRL's own script with the documented diff applied."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions.normal import Normal

from gym_graphreset.integrations.cleanrl import make_envs
from tests.conftest import preset_device, presets_quick


class Agent(nn.Module):
    def __init__(self, envs) -> None:
        super().__init__()
        n_obs, n_act = int(np.prod(envs.single_observation_space.shape)), int(np.prod(envs.single_action_space.shape))
        self.critic = nn.Sequential(nn.Linear(n_obs, 16), nn.Tanh(), nn.Linear(16, 1))
        self.actor_mean = nn.Sequential(nn.Linear(n_obs, 16), nn.Tanh(), nn.Linear(16, n_act))
        self.actor_logstd = nn.Parameter(torch.zeros(1, n_act))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = Normal(self.actor_mean(x), self.actor_logstd.expand_as(self.actor_mean(x)).exp())
        action = probs.sample() if action is None else action
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


@pytest.mark.parametrize("preset", presets_quick("masked"))
def test_cleanrl_rollout_runs_and_logs_raw_returns(preset: str) -> None:
    num_envs, num_steps, gamma, gae_lambda, seed = 16, 64, 0.99, 0.95, 1
    device = preset_device(preset)
    torch.manual_seed(seed)
    envs = make_envs("gym_graphreset/InvertedPendulum-v5", num_envs, device, gamma, mode=preset)
    agent = Agent(envs).to(device)
    obs = torch.zeros((num_steps, num_envs, *envs.single_observation_space.shape)).to(device)
    rewards = torch.zeros((num_steps, num_envs)).to(device)
    dones = torch.zeros((num_steps, num_envs)).to(device)
    values = torch.zeros((num_steps, num_envs)).to(device)
    logged: list[tuple[float, float, float]] = []

    next_obs, _ = envs.reset(seed=seed)
    next_done = torch.zeros(num_envs).to(device)
    for step in range(num_steps):
        obs[step] = next_obs
        dones[step] = next_done
        with torch.no_grad():
            action, _, _, value = agent.get_action_and_value(next_obs)
            values[step] = value.flatten()
        next_obs, reward, terminations, truncations, infos = envs.step(action)
        next_done = (terminations | truncations).float()
        rewards[step] = reward.view(-1)
        if "final_info" in infos:
            final, over = infos["final_info"], infos["final_info"]["_episode"]
            returns_over = final["episode"]["r"][over].tolist()
            lengths_over = final["episode"]["l"][over].tolist()
            rows = zip(returns_over, lengths_over, terminations[over].tolist(), strict=True)
            logged += [(float(r), float(n), float(e)) for r, n, e in rows]

    with torch.no_grad():  # the script's bootstrap: `1.0 - next_done` needs the float cast
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards).to(device)
        lastgaelam = 0
        for t in reversed(range(num_steps)):
            nextnonterminal = 1.0 - (next_done if t == num_steps - 1 else dones[t + 1])
            nextvalues = next_value if t == num_steps - 1 else values[t + 1]
            delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
    assert torch.isfinite(advantages).all()
    assert len(logged) >= 20, "too few episodes to check"
    # InvertedPendulum-v5 pays 1 per step while healthy and 0 on the terminating step: raw return = length - 1
    assert all(r == n - e for r, n, e in logged), f"logged returns are not raw: {logged[:5]}"
    assert not torch.allclose(rewards, torch.ones_like(rewards)), "the stack did not normalise rewards"
    envs.close()


def test_capture_video_films_world_0_outside_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clips: list
) -> None:
    """The script's --capture-video: RecordVideo around the library's env, world 0's frames, in videos/<run>."""
    from gymnasium.wrappers.vector import RecordVideo

    from gym_graphreset.envs.mjwarp.frames import RenderUnavailable

    monkeypatch.chdir(tmp_path)
    envs = make_envs("gym_graphreset/InvertedPendulum-v5", 4, "cpu", capture_video=True, run_name="r")
    assert isinstance(envs, RecordVideo) and envs.single_observation_space.shape == (4,)
    envs.reset(seed=1)
    try:
        for _ in range(6):
            envs.step(torch.zeros(4, 1))
    except RenderUnavailable as exc:
        pytest.skip(f"no OpenGL context on this machine: {exc}")
    envs.close()
    assert clips and clips[0][0].startswith(str(tmp_path / "videos" / "r"))
    assert all(f.ndim == 3 and f.shape[2] == 3 for f in clips[0][1])  # one world's frames


def test_capture_video_without_moviepy_runs_without_videos(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "moviepy", None)  # import fails: Gymnasium's DependencyNotInstalled
    with pytest.warns(UserWarning, match="capture_video: no video is recorded"):
        envs = make_envs("gym_graphreset/InvertedPendulum-v5", 2, "cpu", capture_video=True, run_name="r")
    assert capsys.readouterr().out == ""
    envs.reset(seed=0)
    envs.step(torch.zeros(2, 1))
    envs.close()


def test_capture_video_of_an_env_that_cannot_render_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="capture_video: gym_graphreset/CartPole-v1 cannot render"):
        make_envs("gym_graphreset/CartPole-v1", 2, "cpu", capture_video=True)
