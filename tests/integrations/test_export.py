"""Checkpoints to deployable policies: a tiny PPO run saves, resumes, loads as a deterministic policy equal to
the agent's mean action, plays through the CLI, and exports to TorchScript and ONNX with the same outputs."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from gym_graphreset.integrations.export import (
    PPO_CHECKPOINT_FORMAT,
    check_export,
    export_onnx,
    export_torchscript,
    load_policy,
)
from tests.conftest import PPO_ENV_ID as ENV_ID
from tests.conftest import ppo_args


def test_checkpoints_every_n_iterations_and_at_the_end(ppo_run: tuple[Any, Path]) -> None:
    """model_2.pt (every 2) and model_3.pt (the end), in the documented layout."""
    _, tmp_path = ppo_run
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("*.pt")) == ["model_2.pt", "model_3.pt"]
    ckpt = torch.load(tmp_path / "ckpt" / "model_3.pt", weights_only=False)
    assert ckpt["format"] == PPO_CHECKPOINT_FORMAT and ckpt["iteration"] == 3
    assert ckpt["global_step"] == 3 * 8 * 8 and ckpt["env_id"] == ENV_ID and ckpt["env_kwargs"] == {}
    assert {"norm.mean", "norm.var", "norm.count", "log_std", "actor.0.weight"} <= set(ckpt["agent"])
    assert ckpt["args"]["save_every"] == 2 and ckpt["optimizer"]["state"]


def test_tensorboard_scalars_are_written(ppo_run: tuple[Any, Path]) -> None:
    pytest.importorskip("tensorboard", reason="tensorboard is optional")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, tmp_path = ppo_run
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"Train/mean_reward", "Train/mean_episode_length", "Perf/total_fps"} <= tags
    assert len(events.Scalars("Train/mean_reward")) >= 1


def test_resume_continues_from_the_saved_state(ppo_run: tuple[Any, Path]) -> None:
    """Resuming model_2.pt restores the agent and Adam exactly, then runs only the remaining iteration."""
    ppo, tmp_path = ppo_run
    saved = torch.load(tmp_path / "ckpt" / "model_2.pt", weights_only=False)
    args = ppo_args(ppo, tmp_path / "resumed", "--resume", str(tmp_path / "ckpt" / "model_2.pt"))
    agent = ppo.Agent(4, 1, (16, 16)).to("cpu")
    optimizer = torch.optim.Adam(agent.parameters(), lr=1e-3, eps=1e-5)
    for p in agent.parameters():  # Adam's state exists before a resume (the update ran once in prepare())
        p.grad = torch.zeros_like(p)
    optimizer.step()
    ppo.load_checkpoint(Path(args.resume), agent, optimizer)
    for k, v in agent.state_dict().items():
        assert torch.equal(v, saved["agent"][k]), k
    state = optimizer.state_dict()["state"]
    for index, entry in saved["optimizer"]["state"].items():
        assert torch.equal(state[index]["exp_avg"], entry["exp_avg"])
    curve = ppo.train(args)
    assert curve["env_steps"] == [3 * 8 * 8]  # iteration 3 only
    assert sorted(p.name for p in (tmp_path / "resumed" / "ckpt").glob("*.pt")) == ["model_3.pt"]


def test_resume_refuses_another_agent(ppo_run: tuple[Any, Path]) -> None:
    ppo, tmp_path = ppo_run
    agent = ppo.Agent(4, 1, (8,))
    optimizer = torch.optim.Adam(agent.parameters())
    with pytest.raises(ValueError, match=re.escape("holds another agent")):
        ppo.load_checkpoint(tmp_path / "ckpt" / "model_2.pt", agent, optimizer)
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=re.escape(f"must be a checkpoint of format {PPO_CHECKPOINT_FORMAT!r}")):
        ppo.load_checkpoint(tmp_path / "other.pt", agent, optimizer)


def test_loaded_policy_is_the_agents_clamped_mean_action(ppo_run: tuple[Any, Path]) -> None:
    """Raw observations in, the normalised actor's mean action clamped to the action bounds out."""
    ppo, tmp_path = ppo_run
    ckpt = torch.load(tmp_path / "ckpt" / "model_3.pt", weights_only=False)
    agent = ppo.Agent(4, 1, (16, 16))
    agent.load_state_dict(ckpt["agent"])
    policy = load_policy(tmp_path / "ckpt" / "model_3.pt")
    assert policy.source.env_id == ENV_ID and policy.source.iteration == 3
    obs = 3.0 * torch.randn(64, 4)
    low, high = (torch.tensor(ckpt["policy"][k]) for k in ("action_low", "action_high"))
    with torch.no_grad():
        expected = agent.actor(agent.norm(obs)).clamp(low, high)
        torch.testing.assert_close(policy(obs), expected)


def test_torchscript_export_matches_the_policy(ppo_run: tuple[Any, Path]) -> None:
    _, tmp_path = ppo_run
    policy = load_policy(tmp_path / "ckpt" / "model_3.pt")
    path = export_torchscript(policy, tmp_path / "export" / "policy.pt")
    check = check_export(policy, path)
    assert check.runtime == "torch.jit" and check.max_abs_diff is not None and check.max_abs_diff < 1e-5


@pytest.mark.slow
def test_onnx_export_matches_the_policy(ppo_run: tuple[Any, Path]) -> None:
    pytest.importorskip("onnx", reason="onnx is the optional `export` extra")
    pytest.importorskip("onnxscript", reason="torch's ONNX exporter needs onnxscript")
    _, tmp_path = ppo_run
    policy = load_policy(tmp_path / "ckpt" / "model_3.pt")
    path = export_onnx(policy, tmp_path / "export" / "policy.onnx")
    check = check_export(policy, path)
    if importlib.util.find_spec("onnxruntime") is None:
        assert check.runtime == "onnx.checker"
    else:
        assert check.runtime == "onnxruntime" and check.max_abs_diff is not None and check.max_abs_diff < 1e-5


def test_check_export_fails_on_another_model(ppo_run: tuple[Any, Path]) -> None:
    """A file of other weights is caught: the check can fail."""
    _, tmp_path = ppo_run
    policy = load_policy(tmp_path / "ckpt" / "model_3.pt")
    path = export_torchscript(policy, tmp_path / "export" / "changed.pt")
    with torch.no_grad():
        policy.net.mlp[0].bias.add_(1.0)
    with pytest.raises(AssertionError, match="differs from the torch policy"):
        check_export(policy, path)


def test_load_policy_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=re.escape("`path` must be a checkpoint file")):
        load_policy(tmp_path / "missing.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=re.escape("must be a PPO example checkpoint")):
        load_policy(tmp_path / "bad.pt")


def _rsl_rl_actor(kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """An rsl_rl 5 actor of ``kind`` (its state dict) and its recorded actor config."""
    pytest.importorskip("rsl_rl", reason="rsl_rl is the optional `rsl_rl` extra")
    from rsl_rl.models import MLPModel, RNNModel
    from tensordict import TensorDict

    obs = TensorDict({"policy": torch.zeros(2, 5)}, batch_size=[2])
    gauss = {"class_name": "GaussianDistribution", "init_std": 1.0}
    cfgs: dict[str, tuple[type, dict[str, Any]]] = {
        "lstm": (RNNModel, {"rnn_type": "lstm", "rnn_hidden_dim": 8, "distribution_cfg": gauss}),
        "gru": (RNNModel, {"rnn_type": "gru", "rnn_hidden_dim": 8, "distribution_cfg": gauss}),
        "heteroscedastic": (
            MLPModel,
            {"distribution_cfg": {"class_name": "HeteroscedasticGaussianDistribution", "init_std": 1.0}},
        ),
        "beta": (MLPModel, {"distribution_cfg": {"class_name": "BetaDistribution"}}),
    }
    cls, kwargs = cfgs[kind]
    model = cls(obs, {"actor": ["policy"]}, "actor", 3, hidden_dims=[16], **kwargs)
    return model.state_dict(), {"class_name": cls.__name__, "hidden_dims": [16], **kwargs}


REFUSED = {
    "lstm": "the actor is an rsl_rl RNNModel",
    "gru": "the actor is an rsl_rl RNNModel",
    "heteroscedastic": "HeteroscedasticGaussianDistribution",
    "beta": "BetaDistribution",
}


@pytest.mark.parametrize("recorded", [True, False], ids=["with-config", "weights-only"])
@pytest.mark.parametrize("kind", list(REFUSED))
def test_an_actor_export_cannot_represent_is_refused_by_name(
    tmp_path: Path, kind: str, recorded: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recurrent (LSTM/GRU) actor, or a head with two values per action (heteroscedastic Gaussian, Beta), would be
    rebuilt as a plain MLP (its recurrent layer dropped, or twice the actions): load_policy refuses it by name, and
    `export` exits 2 having written nothing (with the config recorded or not)."""
    from gym_graphreset.cli import main

    weights, actor_cfg = _rsl_rl_actor(kind)
    infos = {"rl_cfg": {"actor": actor_cfg, "obs_groups": {"actor": ["policy"]}}} if recorded else None
    path = tmp_path / "model.pt"
    torch.save({"actor_state_dict": weights, "iter": 1, "infos": infos}, path)
    unnamed = "no state-independent std" if kind in ("heteroscedastic", "beta") else "RNNModel"
    with pytest.raises(ValueError, match=re.escape(REFUSED[kind] if recorded else unnamed)):
        load_policy(path)
    out = tmp_path / "exported"
    assert main(["export", str(path), "--out", str(out), "--formats", "torchscript"]) == 2
    captured = capsys.readouterr()
    assert "checked" not in captured.out and "not supported" in captured.err
    assert not out.exists() or not any(out.iterdir())
