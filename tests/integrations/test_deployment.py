"""Deployment data: read from a task-layer env as the env applies its actions and observations, kept through a
checkpoint's plain data, written as mjlab-format ONNX metadata; bad data refused before a file is written."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from gym_graphreset.integrations.deployment import Deployment, deployment_of, metadata_value
from gym_graphreset.integrations.export import DeterministicPolicy, PolicySource, export_onnx, onnx_metadata

pytest.importorskip("mujoco_warp", reason="the Go1 task runs on MuJoCo Warp (the `mjwarp` extra)")


@pytest.fixture(scope="module")
def go1() -> object:
    """Go1 flat, built (not stepped): everything deployment data reads is fixed at construction."""
    from gym_graphreset.tasks.velocity.config.go1 import Go1VelocityFlatEnv

    return Go1VelocityFlatEnv(2, device="cpu")


@pytest.fixture(scope="module")
def deployment(go1: object) -> Deployment:
    return deployment_of(go1)  # type: ignore[arg-type]


def test_joints_gains_and_pose_are_the_ones_the_env_applies(go1: object, deployment: Deployment) -> None:
    """Joint names in action order, each actuator's kp and kd from the model, the action's target at 0 equal to
    the default pose (``use_default_offset``), and one scale per joint."""
    env = go1
    slot = env.action_manager.terms[0]  # type: ignore[attr-defined]
    assert deployment.joint_names == slot.term.joint_names and len(deployment.joint_names) == 12
    actuators = slot.actuators.tolist()
    assert list(deployment.joint_stiffness) == [float(env.mjm.actuator_gainprm[a, 0]) for a in actuators]  # type: ignore[attr-defined]
    assert list(deployment.joint_damping) == [float(-env.mjm.actuator_biasprm[a, 2]) for a in actuators]  # type: ignore[attr-defined]
    assert all(k > 0 for k in deployment.joint_stiffness) and all(d > 0 for d in deployment.joint_damping)
    assert deployment.action_offset == deployment.default_joint_pos
    assert deployment.action_scale == tuple(slot.scale.tolist()) and set(deployment.action_kinds) == {"joint_position"}
    assert math.isclose(deployment.step_dt, 0.02)
    assert deployment.action_clip == ((-math.inf, math.inf),) * 12 and deployment.action_delay == (0,) * 12


def test_an_action_clip_and_delay_reach_the_deployment_data() -> None:
    """What the env does to an action before scaling it, clip and delay, is what a controller must do too."""
    from dataclasses import replace

    from gym_graphreset.tasks.velocity.config.go1 import Go1VelocityFlatEnv, go1_velocity_flat_cfg

    cfg = go1_velocity_flat_cfg()
    action = replace(cfg.actions["joint_pos"], clip=(-2.0, 2.0), delay=1)
    env = Go1VelocityFlatEnv(2, device="cpu", cfg=replace(cfg, actions={"joint_pos": action}))
    deployment = deployment_of(env)
    assert deployment.action_clip == ((-2.0, 2.0),) * 12 and deployment.action_delay == (1,) * 12
    assert deployment.metadata()["action_clip"].split(",")[0] == "-2.0;2.0"


def test_observation_terms_are_the_policy_groups_in_order(go1: object, deployment: Deployment) -> None:
    """The policy group's terms in concatenation order, each with its scale, clip (``±inf`` for none) and history."""
    terms = go1.cfg.observations["policy"].terms  # type: ignore[attr-defined]
    assert deployment.observation_groups == ("policy",) and deployment.observation_names == tuple(terms)
    assert len(deployment.observation_terms_clip) == len(terms) == len(deployment.observation_terms_history_length)
    for (low, high), term in zip(deployment.observation_terms_clip, terms.values(), strict=True):
        assert (low, high) == ((-math.inf, math.inf) if term.clip is None else tuple(term.clip))
    assert deployment.command_names == tuple(go1.cfg.commands)  # type: ignore[attr-defined]
    both = deployment_of(go1, ("policy", "critic"))  # type: ignore[arg-type]
    assert both.observation_names[: len(terms)] == tuple(terms) and len(both.observation_groups_clip) == 2


def test_plain_data_round_trips_and_metadata_reads_back_exactly(deployment: Deployment) -> None:
    """``as_dict`` -> ``from_dict`` is the identity; metadata lists are comma-separated with every digit."""
    assert Deployment.from_dict(deployment.as_dict()) == deployment
    meta = deployment.metadata()
    assert meta["joint_names"].split(",") == list(deployment.joint_names)
    assert tuple(float(v) for v in meta["joint_stiffness"].split(",")) == deployment.joint_stiffness
    assert metadata_value([(0.1, 2.0), (-math.inf, math.inf)]) == "0.1;2.0,-inf;inf"


@pytest.mark.parametrize("groups", [(), ("nope",), "policy"])
def test_unknown_groups_are_refused_by_name(go1: object, groups: object) -> None:
    with pytest.raises(ValueError, match="observation groups"):
        deployment_of(go1, groups)  # type: ignore[arg-type]


def _policy(deployment: dict[str, object] | None) -> DeterministicPolicy:
    mlp = nn.Sequential(nn.Linear(3, 2))
    source = PolicySource(kind="rsl_rl", env_id="gym_graphreset/Go1-Velocity-Flat-v0", deployment=deployment)
    inf = torch.full((2,), math.inf)
    return DeterministicPolicy(mlp, torch.zeros(3), torch.ones(3), math.inf, -inf, inf, source)


def test_onnx_metadata_names_the_policy_and_adds_deployment(deployment: Deployment) -> None:
    """Without deployment data the metadata still says what the policy is; with it, mjlab's keys are added."""
    bare = onnx_metadata(_policy(None))
    assert bare["obs_dim"] == "3" and bare["act_dim"] == "2" and "joint_names" not in bare
    full = onnx_metadata(_policy(deployment.as_dict()))
    assert full["observation_groups"] == "policy" and full["joint_names"] == ",".join(deployment.joint_names)


def test_bad_deployment_data_is_refused_before_the_file_is_written(tmp_path: Path) -> None:
    """A checkpoint's deployment data missing keys is named, and no ONNX file is left behind."""
    target = tmp_path / "policy.onnx"
    with pytest.raises(ValueError, match=r"missing keys \[.*'joint_names'"):
        export_onnx(_policy({"step_dt": 0.02}), target)
    assert not target.exists()
