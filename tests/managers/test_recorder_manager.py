"""Recorder terms: a device ring of per-frame values, finished episodes marked through the reset mask, exported.

On the biped of ``test_layer``: record the policy observation, the action and mjlab's motion fields over a
rollout with resets mid-way, export, reload, and check every frame against what the env reported.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset import PRESETS, FixedShapeAutoresetVectorEnv
from gym_graphreset.managers.recorder_manager import MOTION_FIELDS
from gym_graphreset.tasks import ManagerBasedEnv, RecorderTerm, TaskCfg, mdp
from gym_graphreset.testing import assert_masked_matches_selected, assert_no_host_reads
from tests.tasks.test_layer import user_task

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BODIES = ("base", "left", "right")
N, HORIZON = 3, 8


def recorded_task(frames: int | None = None) -> TaskCfg:
    recorders = {
        "policy": RecorderTerm(mdp.obs_group, {"group": "policy"}),
        "action": RecorderTerm(mdp.last_action),
        **mdp.motion_recorders(BODIES),
    }
    return replace(user_task(), recorders=recorders, refresh="com", recorder_frames=frames)


def _actions(steps: int, n: int = N) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return [torch.randn(n, 2, generator=gen) for _ in range(steps)]


def _frame(env: ManagerBasedEnv, obs: dict[str, Any], row: int) -> dict[str, np.ndarray]:
    """What the env reports of ``row`` now, by recorder name."""
    bodies = torch.tensor([env.body_id(b) for b in BODIES])
    xquat = env.runtime.wp.to_torch(env.d.xquat)
    return {
        "policy": obs["policy"][row].numpy().copy(),
        "action": env.action[row].numpy().copy(),
        "joint_pos": env.qpos[row, env.joint_qpos_ids].numpy().copy(),
        "joint_vel": env.qvel[row, env.joint_dof_ids].numpy().copy(),
        "body_pos_w": env.xpos[row, bodies].numpy().copy(),
        "body_quat_w": xquat[row, bodies].numpy().copy(),
    }


def test_a_rollout_with_mid_resets_exports_its_finished_episodes(tmp_path: Path) -> None:
    env = ManagerBasedEnv(recorded_task(frames=16), N, device="cpu", max_episode_steps=HORIZON)
    obs, _ = env.reset(seed=0)
    running: list[list[dict[str, np.ndarray]]] = [[_frame(env, obs, r)] for r in range(N)]
    finished: list[tuple[int, list[dict[str, np.ndarray]]]] = []
    resets = {2: [True, False, False], 4: [False, True, True], 5: [True, False, False]}
    for t, a in enumerate(_actions(7), start=1):
        obs, *_ = env.step(a)
        for r in range(N):
            running[r].append(_frame(env, obs, r))
        if t in resets:
            rows = torch.tensor(resets[t])
            obs, _ = env.reset(options={"reset_mask": rows})
            for r in range(N):
                if resets[t][r]:
                    finished.append((r, running[r]))
                    running[r] = [_frame(env, obs, r)]
    # the running episodes are not finished: not exported
    finished.sort(key=lambda e: e[0])  # the export orders by env, then by time (a stable sort keeps time)
    path = tmp_path / "rollout.npz"
    assert env.recorder_manager.export(path) == len(finished) == 4
    data = np.load(path)
    assert sorted(data.files) == sorted(
        ["policy", "action", *MOTION_FIELDS, "episode_lengths", "episode_env_ids", "fps"]
    )
    assert data["episode_lengths"].tolist() == [len(frames) for _, frames in finished] == [3, 4, 5, 5]
    assert data["episode_env_ids"].tolist() == [r for r, _ in finished] == [0, 0, 1, 2]
    assert data["fps"][0] == pytest.approx(1.0 / env.step_dt)
    total = sum(len(f) for _, f in finished)
    assert data["policy"].shape == (total, env.observation_layout["policy"]["noisy_height"].stop)
    assert data["body_pos_w"].shape == (total, len(BODIES), 3)
    assert data["body_quat_w"].shape == (total, len(BODIES), 4)
    expected = [frame for _, frames in finished for frame in frames]
    for name in expected[0]:
        np.testing.assert_array_equal(data[name], np.stack([f[name] for f in expected]), err_msg=name)
    assert (data["action"][0] == 0).all(), "a reset frame holds no action"
    np.testing.assert_array_equal(data["action"][1], _actions(1)[0][0].numpy())

    motion = tmp_path / "clip.npz"
    episode = env.recorder_manager.export_motion(motion, episode=1)
    clip = np.load(motion)
    assert sorted(clip.files) == sorted(["fps", *MOTION_FIELDS])
    assert episode.env_id == 0 and clip["joint_pos"].shape == (4, 2)
    assert clip["body_lin_vel_w"].shape == clip["body_ang_vel_w"].shape == (4, len(BODIES), 3)
    np.testing.assert_array_equal(clip["body_pos_w"], np.stack([f["body_pos_w"] for f in finished[1][1]]))
    env.close()


def _outgrown_ring() -> ManagerBasedEnv:
    """Two rows in a 4-frame ring: row 0 reset after 6 frames (outgrew it), then one step of its next episode."""
    env = ManagerBasedEnv(recorded_task(frames=4), 2, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=1)
    for a in _actions(5, 2):
        env.step(a)
    env.reset(options={"reset_mask": torch.tensor([True, False])})  # row 0: 6 frames in a 4-frame ring
    env.step(_actions(1, 2)[0])
    return env


def test_the_ring_keeps_only_whole_episodes() -> None:
    """A row whose episode outgrew the ring exports nothing of it; a short one that fits is kept."""
    env = _outgrown_ring()
    env.reset(options={"reset_mask": torch.tensor([True, True])})  # row 0: a 2-frame episode; row 1: too long
    episodes = env.recorder_manager.episodes()
    # ordinals count the row's resets: the constructor's (0, never stepped), reset(seed=1) (1), the mask's (2)
    assert [(e.env_id, e.length, e.ordinal) for e in episodes] == [(0, 2, 2)]
    env.close()


def test_body_velocities_are_those_of_the_body_origins() -> None:
    """After a state write (centre-of-mass refresh): the base's is its free joint's, a leg's the rigid motion."""
    env = ManagerBasedEnv(recorded_task(), 2, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=2)
    gen = torch.Generator().manual_seed(0)
    qvel = torch.randn(2, env.mjm.nv, generator=gen)
    qvel[:, 6:] = 0.0  # the legs move with the base
    env.set_state(env.qpos.clone(), qvel)
    lin = mdp.body_lin_vel_w(env, BODIES)
    ang = mdp.body_ang_vel_w(env, BODIES)
    w = mdp.math.quat_rotate(env.base_quat, qvel[:, 3:6])
    torch.testing.assert_close(lin[:, 0], qvel[:, 0:3])
    torch.testing.assert_close(ang[:, 0], w)
    arm = env.xpos[:, env.body_id("left")] - env.xpos[:, env.body_id("base")]
    torch.testing.assert_close(lin[:, 1], qvel[:, 0:3] + torch.linalg.cross(w, arm))
    env.close()


def test_recorders_need_the_refresh_their_reset_frame_reads() -> None:
    with pytest.raises(ValueError, match=r"body_lin_vel_w at a reset frame needs `TaskCfg.refresh` in \['com'\]"):
        ManagerBasedEnv(replace(recorded_task(), refresh="kinematics"), 2, device="cpu")
    with pytest.raises(ValueError, match=r"`fields` \['nope'\] are not recorder terms"):
        ManagerBasedEnv(recorded_task(), 2, device="cpu").recorder_manager.export("x.npz", fields=("nope",))


def _factory(inner: list[ManagerBasedEnv]) -> Any:
    def make(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        inner.append(ManagerBasedEnv(recorded_task(frames=30), 6, device="cpu", max_episode_steps=HORIZON))
        return FixedShapeAutoresetVectorEnv(inner[-1], **flags)

    return make


@pytest.mark.slow
def test_recording_is_masked_equal_to_selected() -> None:
    """Autoresets split episodes the same way on both paths: the rings are equal bit for bit."""
    actions = [2.0 * a for a in _actions(30, 6)]
    made: list[ManagerBasedEnv] = []
    assert_masked_matches_selected(_factory(made), actions, seed=5)
    rings = []
    for config in ("selected", "masked"):
        inner: list[ManagerBasedEnv] = []
        env = _factory(inner)({"config": PRESETS[config]})
        env.reset(seed=5)
        for a in actions:
            env.step(a)
        rec = inner[0].recorder_manager
        rings.append({**rec.buffers, "ordinal": rec.ordinal, "frame": rec.frame, "ends": rec.ends})
    for name in rings[0]:
        assert torch.equal(rings[0][name], rings[1][name]), name
    assert rings[0]["ends"].any(), "no episode ended: the test proves nothing"


def test_recording_steps_make_no_host_read() -> None:
    made: list[ManagerBasedEnv] = []
    env = _factory(made)({"config": "masked"})
    env.reset(seed=1)
    actions = [2.0 * a for a in _actions(20, 6)]
    assert_no_host_reads(lambda: [env.step(a) for a in actions])
    assert made[0].recorder_manager.ends.any()


def test_export_motion_writes_joints_and_bodies_in_model_order(tmp_path: Path) -> None:
    """Recorders naming bodies and joints in another order export a clip in the model's order (a clip's)."""
    recorders = mdp.motion_recorders(BODIES[::-1], joint_names=("right_hip", "left_hip"))
    cfg = replace(user_task(), recorders=recorders, refresh="com")
    env = ManagerBasedEnv(cfg, 2, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=0)
    for a in _actions(3, 2):
        env.step(a)
    env.reset(options={"reset_mask": torch.tensor([True, False])})
    path = tmp_path / "clip.npz"
    recorded = env.recorder_manager.export_motion(path)
    clip = np.load(path)
    for key in MOTION_FIELDS:  # both recorded reversed: the model's order is the reverse
        np.testing.assert_array_equal(clip[key], recorded.fields[key][:, ::-1], err_msg=key)
    assert clip["body_pos_w"][0, 0, 2] == pytest.approx(0.35, abs=0.05)  # body 0: the base at its spawn height
    env.close()


def test_export_says_how_many_finished_episodes_it_could_not_write(tmp_path: Path) -> None:
    """Episodes that outgrew the ring are named by count in a warning (they were dropped silently)."""
    env = _outgrown_ring()
    env.reset(options={"reset_mask": torch.tensor([True, True])})  # row 0: 2 frames (kept); row 1: 8 (dropped)
    with pytest.warns(UserWarning, match=r"2 finished episode\(s\) are not whole in the ring of 4 frames"):
        assert env.recorder_manager.export(tmp_path / "rollout.npz") == 1
    env.close()


@pytest.mark.parametrize("name", ["rollout", "rollout.data"])
def test_export_writes_exactly_the_path_asked(tmp_path: Path, name: str) -> None:
    """A path without ``.npz`` is written as given (numpy's savez would write ``<path>.npz``)."""
    env = ManagerBasedEnv(recorded_task(), 2, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=0)
    for a in _actions(2, 2):
        env.step(a)
    env.reset(options={"reset_mask": torch.tensor([True, True])})
    env.recorder_manager.export(tmp_path / name)
    env.recorder_manager.export_motion(tmp_path / f"{name}.motion")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, f"{name}.motion"])
    assert np.load(tmp_path / name)["episode_lengths"].tolist() == [3, 3]
    env.close()
