"""Subclassing MJWarpVectorEnv with a robot of one's own: the constructor's hook order, observation groups,
and a new user's whole pattern (own MJCF, own terms, per-step draws) masked == selected with no host read."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from gymnasium import spaces

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.core.rng import bits_to_uniform, counter_uniform, step_bits
from gym_graphreset.envs.mjwarp import MJWarpVectorEnv
from gym_graphreset.testing import assert_masked_matches_selected, assert_no_host_reads

TINY_HOPPER = """
<mujoco model="tiny_hopper">
  <option timestep="0.01"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="torso" pos="0 0 0.6">
      <joint name="rootx" type="slide" axis="1 0 0"/>
      <joint name="rootz" type="slide" axis="0 0 1"/>
      <geom type="capsule" fromto="-0.1 0 0 0.1 0 0" size="0.05" mass="1"/>
      <body name="thigh">
        <joint name="hip" type="hinge" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.04" mass="0.3"/>
        <body name="shin" pos="0 0 -0.25">
          <joint name="knee" type="hinge" axis="0 1 0" range="-1.5 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.03" mass="0.2"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hip" ctrlrange="-1 1" gear="20"/>
    <motor joint="knee" ctrlrange="-1 1" gear="20"/>
  </actuator>
</mujoco>
"""


class TinyHopper(MJWarpVectorEnv):
    """A user's own robot: a speed target drawn per episode, a random early stop drawn every step."""

    refresh = "none"  # the observations read qpos/qvel only

    def __init__(self, num_envs: int, *, stop_prob: float = 0.05, **kwargs: Any) -> None:
        self.stop_prob = stop_prob  # plain configuration may come before super().__init__()
        super().__init__(TINY_HOPPER, num_envs, frame_skip=4, max_episode_steps=30, nconmax=8, njmax=32, **kwargs)

    def _setup_task(self) -> None:
        import mujoco

        self.log = ["setup"]
        n, dev = self.num_envs, self.device
        hips = [mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_JOINT, j) for j in ("hip", "knee")]
        self.leg_qpos = torch.tensor([int(self.mjm.jnt_qposadr[j]) for j in hips], device=dev)
        self.target_speed = torch.zeros(n, device=dev)
        self.prev_action = torch.zeros(n, self.mjm.nu, device=dev)

    def _reset_task(self, mask: torch.Tensor) -> None:
        self.log.append("reset_task")
        target = counter_uniform(self.seed, self.env_ids, self.episode, 1, stream=self.streams("target"), high=1.5)
        target = target[:, 0]
        self.target_speed.copy_(torch.where(mask, target, self.target_speed))
        self.prev_action.copy_(torch.where(mask.unsqueeze(1), 0.0, self.prev_action))

    def _observe(self) -> Any:
        self.log.append("observe")
        legs = self.qpos[:, self.leg_qpos]
        policy = torch.cat((legs, self.qvel, self.prev_action, self.target_speed.unsqueeze(1)), dim=1)
        return {"policy": policy, "critic": torch.cat((self.qpos, self.qvel, self.target_speed.unsqueeze(1)), dim=1)}

    def _reward_terminated(
        self, before: torch.Tensor, after: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # a new key every step of every episode, on a stream of its own
        u = bits_to_uniform(
            step_bits(self.seed, self.env_ids, self.episode, self.elapsed, 2, stream=self.streams("step"))
        )
        speed = (after[:, 0] - before[:, 0]) / self.dt
        reward = -(speed - self.target_speed).square() - 0.01 * (action - self.prev_action).square().sum(dim=1)
        reward = reward + 0.01 * (u[:, 0] - 0.5)  # a noisy reward term
        self.prev_action.copy_(action)
        fell = self.qpos[:, 1] < -0.45
        return reward, fell | (u[:, 1] < self.stop_prob)


def _actions(num_envs: int, steps: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return [torch.rand(num_envs, 2, generator=gen) * 2 - 1 for _ in range(steps)]


def test_constructor_runs_the_hooks_in_order_and_builds_a_dict_space() -> None:
    """A dict of observation groups from ``_observe`` used to crash construction ('dict' has no 'shape')."""
    env = TinyHopper(4)
    assert env.log == ["setup", "reset_task", "observe"]  # setup before the first reset; one observation
    space = env.single_observation_space
    assert isinstance(space, spaces.Dict) and set(space.spaces) == {"policy", "critic"}
    assert space["policy"].shape == (2 + 4 + 2 + 1,) and space["critic"].shape == (4 + 4 + 1,)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains({k: v.numpy() for k, v in obs.items()})
    assert env.single_action_space.shape == (2,)


class _OwnReset(TinyHopper):
    """Overrides reset the documented way: physics reset, own state, one observation."""

    supports_reset_selection = True  # its reset takes a ResetSelection (masked writes only)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        from gym_graphreset.core.selection import options_reset_mask

        self.keys.reseed(seed)
        mask = options_reset_mask(options, self._all)
        with self._on_stream():  # torch and warp on the env's stream
            self._masked_reset(mask)
            self._reset_task(mask)
            obs = self._observe()
            return {**obs, "extra": self.target_speed.unsqueeze(1)}, {}


def test_constructor_calls_an_overridden_reset_once_and_observes_once() -> None:
    env = _OwnReset(4)
    assert env.log == ["setup", "reset_task", "observe"]
    assert set(env.single_observation_space.spaces) == {"policy", "critic", "extra"}


class _DeviceFirst(TinyHopper):
    def _setup_task(self) -> None:
        raise AssertionError("_setup_task ran before the device check")


def test_device_is_checked_before_any_hook() -> None:
    with pytest.raises(ValueError, match=re.escape("`device` must be 'cpu' or 'cuda[:N]', got tpu")):
        _DeviceFirst(4, device="tpu")


class _FlatObs(TinyHopper):
    def _observe(self) -> Any:
        return self.qpos[:, 0]


class _BadGroup(TinyHopper):
    def _observe(self) -> Any:
        return {"policy": self.qpos, "height": self.qpos[:, 1]}


def test_an_observation_of_the_wrong_shape_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=re.escape("_FlatObs._observe() must return a (num_envs, d) = (4, d) tensor")):
        _FlatObs(4)
    with pytest.raises(
        TypeError, match=re.escape("or a dict of them (observation groups), got (4,) for group 'height'")
    ):
        _BadGroup(4)


def _wrapped(kwargs: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
    return FixedShapeAutoresetVectorEnv(TinyHopper(8), reset_terms={"ep": EpisodeStatistics()}, **kwargs)


@pytest.mark.slow
def test_own_robot_masked_matches_selected_with_no_host_read() -> None:
    """The new user's pattern: own MJCF, own reward/obs terms, per-step draws, wrapped; masked == selected."""
    actions = _actions(8, 60)
    assert_masked_matches_selected(_wrapped, actions)
    env = _wrapped({"config": "masked_persistent", "validation_poll_interval": 1000})
    env.reset(seed=0)
    done = torch.zeros(8, dtype=torch.long)

    def run() -> None:
        for a in actions:
            _, _, terminated, truncated, _ = env.step(a)
            done.add_(terminated | truncated)

    assert_no_host_reads(run)
    assert int(done.sum()) > 8  # rows did reset (early stops and falls), so the reset paths were exercised
    report = env.capture_report("step", check_host_reads=True)
    assert report.host_reads == [] and report.eligible_on_cuda


def test_a_subclass_s_named_streams_stay_clear_of_the_engine_s_and_each_other() -> None:
    """``self.streams`` gives each name one stream, above the engine's reset stream 0 and its normal stream."""
    env = TinyHopper(2, device="cpu")
    try:
        target, step = env.streams("target"), env.streams("step")
        assert env.streams("target") == target and target != step
        used = {0, 1000}  # the engine's reset draws: stream 0 and counter_normal's 0 + 1000
        for s in (target, step):
            assert s not in used and s + 1000 not in used
            used |= {s, s + 1000}
    finally:
        env.close()
