"""FastPPO: on a fixed rollout it computes stock rsl_rl's update (parameters, normalisers, optimiser state, losses,
learning rate and random draws, bitwise on the CPU), keeps the final-observation bootstrap, falls back to the stock
update by name where it cannot run fast, writes stock-loadable checkpoints, trains through a runner; on CUDA its
captured and eager updates match stock and synchronise a fixed number of times per update."""

from __future__ import annotations

import re
import warnings
from importlib.metadata import version
from typing import Any

import pytest
import torch

pytest.importorskip("rsl_rl", reason="rsl-rl-lib is the optional `rsl_rl` extra")
from rsl_rl.models import MLPModel
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.storage import RolloutStorage
from tensordict import TensorDict

from gym_graphreset.integrations.rsl_rl import FinalObsPPO, RslRlVecEnv, SyncFreeOnPolicyRunner
from gym_graphreset.integrations.rsl_rl_fast import FastPPO
from tests.conftest import needs_cuda
from tests.integrations.test_rsl_rl import scripted, train_cfg

ENVS, STEPS, ACTIONS = 16, 6, 3
WIDTHS = {"policy": 5, "critic": 7}
FAST = "gym_graphreset.integrations.rsl_rl_fast:FastPPO"
RSL_RL_5_5 = tuple(int(p) for p in version("rsl-rl-lib").split(".")[:2]) >= (5, 5)


def make_alg(cls: type, device: str = "cpu", seed: int = 0, **kwargs: Any) -> Any:
    """A small asymmetric actor-critic (normalised observations) with rsl_rl's storage, from ``seed``."""
    torch.manual_seed(seed)
    obs = TensorDict({k: torch.zeros(ENVS, w) for k, w in WIDTHS.items()}, batch_size=[ENVS]).to(device)
    groups = {"actor": ["policy"], "critic": ["critic"]}
    dist = {"class_name": "GaussianDistribution", "init_std": 1.0}
    actor = MLPModel(obs, groups, "actor", ACTIONS, [16, 16], obs_normalization=True, distribution_cfg=dist)
    critic = MLPModel(obs, groups, "critic", 1, [16, 16], obs_normalization=True)
    storage = RolloutStorage("rl", ENVS, STEPS, obs, [ACTIONS], device)
    settings = {"num_learning_epochs": 3, "num_mini_batches": 4, "learning_rate": 1e-3, "desired_kl": 0.002}
    return cls(actor.to(device), critic.to(device), storage, device=device, **{**settings, **kwargs})


def rollout_data(iteration: int, device: str) -> list[tuple[TensorDict, dict[str, Any]]]:
    """A fixed rollout (its own generator: the algorithms' draws do not change it): per step obs and step data."""
    gen = torch.Generator().manual_seed(100 + iteration)

    def groups() -> TensorDict:
        data = {k: 2.0 * torch.randn(ENVS, w, generator=gen) + 1.0 for k, w in WIDTHS.items()}
        return TensorDict(data, batch_size=[ENVS]).to(device)

    steps = []
    for _ in range(STEPS + 1):
        done = torch.rand(ENVS, generator=gen) < 0.25
        step = {
            "rewards": torch.randn(ENVS, generator=gen).to(device),
            "dones": done.to(device),
            "time_outs": (done & (torch.rand(ENVS, generator=gen) < 0.5)).to(device),
            "final_obs": groups(),
        }
        steps.append((groups(), step))
    return steps


def fill(alg: Any, iteration: int) -> None:
    """One rollout of fixed data through ``act`` and ``process_env_step``, then the returns."""
    steps = rollout_data(iteration, str(alg.device))
    obs = steps[0][0]
    with torch.inference_mode():
        for next_obs, step in steps[1:]:
            alg.act(obs)
            extras = {"time_outs": step["time_outs"], "final_obs": step["final_obs"]}
            alg.process_env_step(next_obs, step["rewards"], step["dones"], extras)
            obs = next_obs
        alg.compute_returns(obs)


def iterate(alg: Any, iteration: int) -> dict[str, float]:
    """:func:`fill`, then one ``update``: its logged losses."""
    fill(alg, iteration)
    return alg.update()


def state(alg: Any) -> dict[str, torch.Tensor]:
    """Parameters, normaliser statistics and the optimiser's moments, by name."""
    out = {f"actor.{k}": v for k, v in alg.actor.state_dict().items()}
    out |= {f"critic.{k}": v for k, v in alg.critic.state_dict().items()}
    for i, s in enumerate(alg.optimizer.state.values()):
        out |= {f"opt{i}.{k}": v.reshape(-1).float() for k, v in s.items() if k != "step"}
    return out


# One combination in the quick subset (each takes seconds); `make test` runs all eight.
@pytest.mark.parametrize("schedule", ["fixed", pytest.param("adaptive", marks=pytest.mark.slow)])
@pytest.mark.parametrize("clipped_value", [True, pytest.param(False, marks=pytest.mark.slow)])
@pytest.mark.parametrize("per_mini_batch", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_update_is_stock_bitwise_on_the_cpu(schedule: str, clipped_value: bool, per_mini_batch: bool) -> None:
    """Two iterations of FastPPO and of stock (FinalObsPPO: rsl_rl's ``update``) on the same rollouts: the same
    parameters, normalisers, Adam moments, logged losses, learning rate and RNG state afterwards, bitwise (the same
    float operations in the same order). The adaptive schedule moved the learning rate (the test can see it)."""
    kwargs = {
        "schedule": schedule,
        "use_clipped_value_loss": clipped_value,
        "normalize_advantage_per_mini_batch": per_mini_batch,
    }
    stock, fast = make_alg(FinalObsPPO, **kwargs), make_alg(FastPPO, **kwargs)
    assert fast.update_path == "eager" and fast.fallback_reason is None
    for it in range(2):
        torch.manual_seed(10 + it)
        stock_losses = iterate(stock, it)
        stock_rng = torch.get_rng_state()
        torch.manual_seed(10 + it)
        fast_losses = iterate(fast, it)
        assert torch.equal(torch.get_rng_state(), stock_rng)  # the same draws: the permutation and the samples
        assert fast_losses == stock_losses
        assert isinstance(fast.learning_rate, float) and fast.learning_rate == stock.learning_rate
        ours, theirs = state(fast), state(stock)
        assert ours.keys() == theirs.keys()
        for name, value in theirs.items():
            assert torch.equal(ours[name], value), name
    assert (stock.learning_rate != 1e-3) == (schedule == "adaptive")


def test_keeps_the_final_observation_bootstrap() -> None:
    """A time-out row stores r + gamma * V(final_obs), as FinalObsPPO does (stock PPO uses V(s_t))."""
    fast, final_obs = make_alg(FastPPO), make_alg(FinalObsPPO)
    for alg in (fast, final_obs):
        torch.manual_seed(2)
        fill(alg, 0)
    assert torch.equal(fast.storage.rewards, final_obs.storage.rewards)
    time_outs = torch.stack([s["time_outs"] for _, s in rollout_data(0, "cpu")[1:]])
    rewards = torch.stack([s["rewards"] for _, s in rollout_data(0, "cpu")[1:]])
    assert time_outs.any() and not torch.equal(fast.storage.rewards.squeeze(-1)[time_outs], rewards[time_outs])


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"optimizer": "sgd"}, "the optimiser SGD takes no device learning rate (Adam and AdamW do)"),
        ({"optimizer": "rmsprop"}, "the optimiser RMSprop takes no device learning rate (Adam and AdamW do)"),
        pytest.param(
            {"use_mixed_precision": True},
            "mixed precision (use_mixed_precision) is not supported",
            marks=pytest.mark.skipif(not RSL_RL_5_5, reason="use_mixed_precision is new in rsl-rl-lib 5.5"),
        ),
    ],
)
def test_what_it_cannot_run_fast_runs_stock_and_says_so(kwargs: dict[str, Any], reason: str) -> None:
    """An unsupported setting is warned about by name; the update is then rsl_rl's own, bitwise."""
    with pytest.warns(UserWarning, match=re.escape(f"FastPPO runs rsl_rl's stock update: {reason}")):
        fast = make_alg(FastPPO, **kwargs)
    stock = make_alg(FinalObsPPO, **kwargs)
    assert fast.update_path == "stock" and fast.fallback_reason == reason
    torch.manual_seed(1)
    expected = iterate(stock, 0)
    torch.manual_seed(1)
    assert iterate(fast, 0) == expected
    assert all(torch.equal(a, b) for a, b in zip(state(fast).values(), state(stock).values(), strict=True))


def test_refuses_a_bad_cuda_graph_setting() -> None:
    """``cuda_graph`` must be a bool (a config string such as "no" would otherwise read as true)."""
    with pytest.raises(ValueError, match=re.escape("`cuda_graph` must be True or False, got 'no'")):
        make_alg(FastPPO, cuda_graph="no")


@pytest.mark.slow
def test_checkpoint_holds_a_float_learning_rate_that_stock_loads() -> None:
    """``save`` writes the learning rate as a float (stock's format); stock PPO and FastPPO load it, and a loaded
    FastPPO goes on exactly as one that was not saved."""
    fast, twin = make_alg(FastPPO, seed=3), make_alg(FastPPO, seed=3)
    for alg in (fast, twin):
        torch.manual_seed(5)
        iterate(alg, 0)
    saved = fast.save()
    assert {type(g["lr"]) for g in saved["optimizer_state_dict"]["param_groups"]} == {float}
    stock = make_alg(FinalObsPPO, seed=4)
    stock.load(saved, None, strict=True)
    assert stock.learning_rate == fast.learning_rate
    restored = make_alg(FastPPO, seed=4)
    restored.load(saved, None, strict=True)
    assert isinstance(restored.learning_rate, float)
    losses = []
    for alg in (restored, twin):
        torch.manual_seed(6)
        losses.append(iterate(alg, 1))
    assert losses[0] == losses[1]
    assert all(torch.equal(a, b) for a, b in zip(state(restored).values(), state(twin).values(), strict=True))


@pytest.mark.parametrize("runner_class", [pytest.param(OnPolicyRunner, marks=pytest.mark.slow), SyncFreeOnPolicyRunner])
def test_trains_through_a_runner_selected_by_class_name(runner_class: type) -> None:
    """``cfg["algorithm"]["class_name"]`` selects FastPPO in either runner; it learns and logs float losses."""
    env = RslRlVecEnv(scripted("masked_persistent"), seed=0, max_episode_length=64)
    cfg = train_cfg()
    cfg["algorithm"]["class_name"] = FAST
    runner = runner_class(env, cfg, log_dir=None, device="cpu")
    assert isinstance(runner.alg, FastPPO) and runner.alg.update_path == "eager"
    before = [p.clone() for p in runner.alg.actor.parameters()]
    runner.learn(2)
    assert isinstance(runner.alg.learning_rate, float)
    assert any(not torch.equal(a, b) for a, b in zip(before, runner.alg.actor.parameters(), strict=True))


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("cuda_graph", [True, False])
def test_cuda_update_matches_stock_without_syncs_per_minibatch(cuda_graph: bool) -> None:
    """On CUDA, three iterations of FastPPO (captured graph, or eager) against stock on the same rollouts: the same
    parameters, losses and learning rate up to float32 rounding (capturable Adam computes its bias correction on the
    device in float32, stock on the host in float64: relative differences of order 1e-6); the graph stays captured;
    an update synchronises as often whatever the number of epochs (its one host read, and the normalisers' update
    once), stock at least four times per minibatch (adaptive schedule). Not run where there is no GPU."""
    stock = make_alg(FinalObsPPO, "cuda", schedule="adaptive")
    fast = make_alg(FastPPO, "cuda", schedule="adaptive", cuda_graph=cuda_graph)
    assert fast.update_path == ("graph" if cuda_graph else "eager")
    for it in range(3):  # the first update warms up and captures the graph, the later ones replay it
        torch.manual_seed(10 + it)
        expected = iterate(stock, it)
        torch.manual_seed(10 + it)
        losses = iterate(fast, it)
        assert losses == pytest.approx(expected, rel=1e-4, abs=1e-6)
        assert fast.learning_rate == pytest.approx(stock.learning_rate, rel=1e-6)
        for name, value in state(stock).items():
            torch.testing.assert_close(state(fast)[name], value, rtol=1e-4, atol=1e-5, msg=name)
    assert fast.update_path == ("graph" if cuda_graph else "eager") and (fast._graph is not None) == cuda_graph

    def syncs(alg: Any, epochs: int) -> int:
        """The CUDA synchronisations of one update of ``epochs`` epochs (torch's sync debug mode warns at each)."""
        alg.num_learning_epochs = epochs  # the minibatch size stays: the graph is not captured again
        fill(alg, 0)
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                alg.update()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return sum("synchronizing" in str(w.message) for w in seen)

    # per update: the read of the losses and learning rate, and what rsl_rl's normaliser update does once (a first
    # update may add one-time syncs: it is not counted)
    syncs(fast, 2)
    assert syncs(fast, 4) <= syncs(fast, 2) <= 3
    assert syncs(stock, 4) >= syncs(stock, 2) + 2 * 4 * 4  # stock: at least 4 per minibatch (4 per epoch here)
