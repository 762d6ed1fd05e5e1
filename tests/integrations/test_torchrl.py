"""The TorchRL adapter: GymWrapper's rollout and Collector keep every step's tensors, on every preset."""

from __future__ import annotations

import math
import re

import pytest
import torch
from gymnasium.vector import VectorWrapper

torchrl_envs = pytest.importorskip("torchrl.envs", reason="torchrl is the optional `torchrl` extra")

from gym_graphreset import FixedShapeAutoresetVectorEnv  # noqa: E402
from gym_graphreset.core.terms import EpisodeStatistics  # noqa: E402
from gym_graphreset.envs import CartPoleVectorEnv  # noqa: E402
from gym_graphreset.integrations.torchrl import torchrl_env, torchrl_info  # noqa: E402
from tests.conftest import preset_device  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")
N, STEPS = 4, 12


def _cartpole(preset: str) -> FixedShapeAutoresetVectorEnv:
    inner = CartPoleVectorEnv(N, max_episode_steps=5, device=preset_device(preset))  # truncations happen
    return FixedShapeAutoresetVectorEnv(inner, preset)


def _action(t: int, device: torch.device) -> torch.Tensor:
    return (torch.arange(N, device=device) + t) % 2


class _Recorder(VectorWrapper):
    """Clones (obs, true next obs, truncated, reward) of each step as the env returns it; passes the originals on."""

    def __init__(self, env: FixedShapeAutoresetVectorEnv) -> None:
        super().__init__(env)
        self.records: list[tuple[torch.Tensor, ...]] = []
        self.current: torch.Tensor | None = None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.current = obs.clone()
        return obs, info

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        done = (terminated | truncated).view(-1, 1)
        true_next = torch.where(done, info["final_obs"], obs) if "final_obs" in info else obs
        self.records.append((self.current, true_next.clone(), truncated.clone(), reward.clone()))
        self.current = obs.clone()
        return obs, reward, terminated, truncated, info


def _recorded(preset: str) -> _Recorder:
    env = _cartpole(preset)
    env.reset(seed=0)
    return _Recorder(env)


class _Policy:
    def __init__(self) -> None:
        self.t = 0

    def __call__(self, td):
        td.set("action", _action(self.t, td.device))
        self.t += 1
        return td


def test_rollout_longer_than_the_ring_matches_the_env(preset: str) -> None:
    """12 steps through a depth-2 ring: observation, next observation and truncated as the env gave them."""
    recorder = _recorded(preset)
    rollout = torchrl_env(recorder).rollout(STEPS, policy=_Policy(), break_when_any_done=False)
    expected = recorder.records[-STEPS:]
    assert rollout["next", "done"].any()
    for t, (obs, nxt, truncated, reward) in enumerate(expected):
        torch.testing.assert_close(rollout["observation"][:, t], obs)
        torch.testing.assert_close(rollout["next", "observation"][:, t], nxt)
        assert torch.equal(rollout["next", "truncated"][:, t].squeeze(-1), truncated)
        torch.testing.assert_close(rollout["next", "reward"][:, t].squeeze(-1), reward)


def test_collector_batches_match_the_env(preset: str) -> None:
    from torchrl.collectors import Collector

    recorder = _recorded(preset)
    collector = Collector(torchrl_env(recorder), _Policy(), frames_per_batch=N * STEPS, total_frames=N * STEPS)
    batch = next(iter(collector))
    collector.shutdown()
    expected = recorder.records[-STEPS:]
    for t, (obs, nxt, truncated, _) in enumerate(expected):
        torch.testing.assert_close(batch["observation"][:, t], obs)
        torch.testing.assert_close(batch["next", "observation"][:, t], nxt)
        assert torch.equal(batch["next", "truncated"][:, t].squeeze(-1), truncated)


def test_done_rows_carry_the_true_last_state(preset: str) -> None:
    env = _cartpole(preset)
    env.reset(seed=0)
    rollout = torchrl_env(env).rollout(80, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)
    assert done.sum() > 0
    for env_i, t in done.nonzero().tolist():
        final = rollout["next", "observation"][env_i, t]
        terminal = final[0].abs() > 2.4 or final[2].abs() > 12 * 2 * math.pi / 360
        assert terminal or bool(rollout["next", "truncated"][env_i, t])  # the true last state, not the reset one
        if t + 1 < rollout.shape[1]:
            assert rollout["observation"][env_i, t + 1].abs().max() <= 0.05  # the next episode's first obs


class _StatsRecorder(VectorWrapper):
    """Clones each step's finished-episode returns and lengths as EpisodeStatistics published them."""

    def __init__(self, env: FixedShapeAutoresetVectorEnv) -> None:
        super().__init__(env)
        self.records: list[tuple[torch.Tensor, torch.Tensor]] = []

    def step(self, actions):
        out = self.env.step(actions)
        episode = out[-1]["episode"]
        self.records.append((episode["r"].clone(), episode["l"].clone()))
        return out


def test_episode_statistics_in_the_next_keys(preset: str) -> None:
    """An EpisodeStatistics term builds on every preset; its returns and lengths are in ("next", "episode_*")."""
    inner = CartPoleVectorEnv(N, max_episode_steps=7, device=preset_device(preset))
    env = FixedShapeAutoresetVectorEnv(inner, preset, reset_terms={"stats": EpisodeStatistics()})
    env.reset(seed=0)
    recorder = _StatsRecorder(env)
    rollout = torchrl_env(recorder).rollout(STEPS * 2, policy=_Policy(), break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)
    assert done.any()
    expected = recorder.records[-STEPS * 2 :]
    for t, (r, length) in enumerate(expected):
        torch.testing.assert_close(rollout["next", "episode_r"][:, t], r)
        torch.testing.assert_close(rollout["next", "episode_l"][:, t], length)
    lengths = rollout["next", "episode_l"]
    assert bool((lengths[done] > 0).all()) and bool((lengths[~done] == 0).all())  # a return on each done row only


def test_torchrl_info_flattens_and_refuses_a_name_clash() -> None:
    r = torch.zeros(2)
    assert set(torchrl_info({"a": {"b": {"c": r}}, "final_info": {"a": {"b": r}}})) == {"a_b_c", "final_info"}
    with pytest.raises(ValueError, match=re.escape("two info entries flatten to the same name 'episode_r'")):
        torchrl_info({"episode": {"r": r}, "episode_r": r})


def test_needs_same_step() -> None:
    with pytest.raises(ValueError, match=re.escape("torchrl_env needs a SAME_STEP vector env")):
        torchrl_env(CartPoleVectorEnv(2))


def _task_with_two_groups(preset: str) -> FixedShapeAutoresetVectorEnv:
    """The test biped's velocity task (``policy`` + ``critic`` groups): row 0 fails at its 3rd step, episodes time out
    at their 4th (never all rows at once: TorchRL then resets the whole env)."""
    pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")
    from gym_graphreset.tasks import ManagerBasedEnv, TerminationTerm, velocity_task
    from tests.tasks.test_layer import ROBOT

    def row0_fails(env: ManagerBasedEnv) -> torch.Tensor:
        return (env.elapsed == 3) & (torch.arange(env.num_envs, device=env.device) == 0)

    cfg = velocity_task(ROBOT).with_term("terminations", "row0_fails", TerminationTerm(row0_fails))
    inner = ManagerBasedEnv(cfg, 3, device="cpu", max_episode_steps=4)
    return FixedShapeAutoresetVectorEnv(inner, preset)


class _GroupRecorder(VectorWrapper):
    """Clones each step's observation groups, the true next ones (final on done rows) and the done mask."""

    def __init__(self, env: FixedShapeAutoresetVectorEnv) -> None:
        super().__init__(env)
        self.records: list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], torch.Tensor]] = []

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        done = terminated | truncated
        final = info.get("final_obs", obs)
        true_next = {g: torch.where(done.view(-1, 1), final[g], obs[g]) for g in obs}
        self.records.append(({g: v.clone() for g, v in obs.items()}, true_next, done.clone()))
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize("preset", ["selected", "masked_persistent"])
def test_done_rows_carry_every_group_s_final_observation(preset: str) -> None:
    """With observation groups, ("next", group) on a done row is that group's final observation (failure and
    time-out), and the next step's group is the new episode's first: every group, as for one array."""
    env = _task_with_two_groups(preset)
    env.reset(seed=0)
    recorder = _GroupRecorder(env)
    steps = 6
    rollout = torchrl_env(recorder).rollout(steps, break_when_any_done=False)
    expected = recorder.records[-steps:]
    assert {"policy", "critic"} <= set(expected[0][0])
    dones = torch.stack([done for _, _, done in expected])
    assert dones[2].tolist() == [True, False, False] and dones[3].tolist() == [False, True, True], "fails, time-outs"
    for t, (obs, true_next, _) in enumerate(expected):
        for group in obs:
            torch.testing.assert_close(rollout["next", group][:, t], true_next[group])
            if t + 1 < steps:
                torch.testing.assert_close(rollout[group][:, t + 1], obs[group])


def test_a_group_of_terms_is_refused_by_name() -> None:
    """A group with concatenate=False is a dict per row, which TorchRL's terminal reader cannot fill: refused."""
    pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")
    from dataclasses import replace

    from gym_graphreset.tasks import ManagerBasedEnv, velocity_task
    from tests.tasks.test_layer import ROBOT

    cfg = velocity_task(ROBOT)
    critic = replace(cfg.observations["critic"], concatenate=False)
    cfg = replace(cfg, observations={**cfg.observations, "critic": critic})
    env = FixedShapeAutoresetVectorEnv(ManagerBasedEnv(cfg, 2, device="cpu"), "masked")
    with pytest.raises(ValueError, match=re.escape("observation group(s) ['critic'] are dicts of terms")):
        torchrl_env(env)
