"""PPO for continuous control on gym_graphreset envs, in CleanRL's single-file style, torch-native.

    python examples/ppo_continuous.py --env-id gym_graphreset/Ant-v5 --num-envs 4096 --device cuda
    python examples/ppo_continuous.py --env-id gym_graphreset/InvertedPendulum-v5 --num-envs 64 \
        --total-timesteps 60000 --device cpu
    torchrun --nproc_per_node=2 examples/ppo_continuous.py --num-envs 4096   # 4096 envs per rank, DDP

What differs from CleanRL's ppo_continuous_action.py, and why:
- Rollout storage lives on the env's device and the env step has no host sync (masked autoreset, and on
  CUDA the whole step is one captured graph). The only host reads are one per iteration, for logging.
- Truncation is handled exactly: on a truncated (time-limit) row the target bootstraps from
  ``V(info["final_obs"])``, the true last observation; on a terminated row it does not bootstrap.
  CleanRL's scripts treat truncation as termination; rsl_rl bootstraps with V(s_t) instead of
  V(s_{t+1}); both bias the value target.
- Observations are normalised with running statistics updated from each rollout (on the device).
- Under ``torchrun`` every rank steps its own share of one population (``global_env_offset``), gradients
  are all-reduced by DDP, and the logged statistics by one collective per log line.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

import gym_graphreset  # noqa: F401  (registers the env ids)
from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.bench import import_pyplot
from gym_graphreset.distributed import init_distributed, rank_info


# ----------------------------------------------------------------------------------------- config
@dataclass
class Args:
    """Command-line configuration (every field is a ``--flag``)."""

    env_id: str = "gym_graphreset/Ant-v5"
    num_envs: int = 4096  # per rank under torchrun
    total_timesteps: int = 100_000_000
    time_limit_s: float = 0.0  # stop after this many seconds (0: no limit)
    device: str = "auto"
    seed: int = 1
    num_steps: int = 16  # rollout length per env
    learning_rate: float = 3e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 32
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 2.0
    max_grad_norm: float = 1.0
    hidden: int = 256
    cuda_graph: bool = True  # capture the whole env step when on CUDA
    out: str = "runs"
    log_every: int = 10


def parse_args(argv: list[str] | None = None) -> Args:
    """Build an argparse CLI from the dataclass fields."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            parser.add_argument(
                flag,
                type=lambda s: s.lower() in ("1", "true", "yes"),
                default=f.default,
                help=f"(default: {f.default})",
            )
        else:
            kind = {"int": int, "float": float, "str": str}[str(f.type)]
            parser.add_argument(flag, type=kind, default=f.default, help=f"(default: {f.default})")
    return Args(**vars(parser.parse_args(argv)))


# ----------------------------------------------------------------------------------------- agent
class RunningNorm(nn.Module):
    """Running mean/variance of observations (parallel-variance update, no host read)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(1e-4))

    def update(self, x: torch.Tensor) -> None:
        batch_mean, batch_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta, total = batch_mean - self.mean, self.count + n
        self.mean += delta * n / total
        self.var = (self.var * self.count + batch_var * n + delta**2 * self.count * n / total) / total
        self.count = total

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) / torch.sqrt(self.var + 1e-8)).clamp(-10, 10)


def layer(i: int, o: int, std: float = 2**0.5) -> nn.Linear:
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    """Separate actor and critic MLPs; a state-independent log-std."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int) -> None:
        super().__init__()
        self.norm = RunningNorm(obs_dim)
        self.critic = nn.Sequential(
            layer(obs_dim, hidden), nn.ELU(), layer(hidden, hidden), nn.ELU(), layer(hidden, 1, 1.0)
        )
        self.actor = nn.Sequential(
            layer(obs_dim, hidden), nn.ELU(), layer(hidden, hidden), nn.ELU(), layer(hidden, act_dim, 0.01)
        )
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.norm(obs)).squeeze(-1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The update's pass (through DDP when distributed)."""
        return self.act(obs, action)

    def act(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        x = self.norm(obs)
        dist = torch.distributions.Normal(self.actor(x), self.log_std.exp().expand(x.shape[0], -1))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.critic(x).squeeze(-1)


# ----------------------------------------------------------------------------------------- env
def make_env(args: Args, device: torch.device, global_env_offset: int = 0) -> FixedShapeAutoresetVectorEnv:
    inner = gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        vectorization_mode="vector_entry_point",
        device=device,
        global_env_offset=global_env_offset,
    )
    graph = device.type == "cuda" and args.cuda_graph
    return FixedShapeAutoresetVectorEnv(
        inner,
        masked_autoreset=True,
        defer_finite_validation=True,
        persistent_step_buffers=True,
        autoreset_cuda_graph=graph,
        cuda_graph_scope="step" if graph else "reset",
        reset_terms={"episode": EpisodeStatistics()},
    )


# ----------------------------------------------------------------------------------------- train
def train(args: Args) -> dict[str, list[float]]:
    """Run PPO; returns the logged curve (env steps, mean episode return)."""
    distributed = init_distributed()
    share = rank_info(args.num_envs, device=None if args.device == "auto" else args.device)
    device, is_main = share.device, share.rank == 0
    torch.manual_seed(args.seed)
    env = make_env(args, device, share.global_env_offset)
    obs_dim, act_dim = env.single_observation_space.shape[0], env.single_action_space.shape[0]
    low = torch.as_tensor(env.single_action_space.low, device=device)
    high = torch.as_tensor(env.single_action_space.high, device=device)
    agent = Agent(obs_dim, act_dim, args.hidden).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    learner: nn.Module = agent
    if distributed:
        from torch.nn.parallel import DistributedDataParallel

        learner = DistributedDataParallel(agent, device_ids=[device.index] if device.type == "cuda" else None)

    T, N = args.num_steps, args.num_envs
    obs_buf = torch.zeros(T, N, obs_dim, device=device)
    act_buf = torch.zeros(T, N, act_dim, device=device)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros(T, N, device=device) for _ in range(4))
    ep_return_sum = torch.zeros((), device=device)
    ep_count = torch.zeros((), device=device)

    obs, _ = env.reset(seed=args.seed)
    obs = obs.clone()
    iterations = max(1, args.total_timesteps // (T * N))
    batch = T * N
    minibatch = batch // args.num_minibatches
    curve: dict[str, list[float]] = {"env_steps": [], "mean_return": [], "seconds": []}
    start = time.perf_counter()
    bar = tqdm(range(1, iterations + 1), desc=args.env_id.split("/")[-1], unit="iter", disable=not is_main)
    for it in bar:
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (it - 1) / iterations)
        # ---- rollout: no host sync inside
        with torch.no_grad():
            for t in range(T):
                action, logp, _, value = agent.act(obs)
                obs_buf[t], act_buf[t], logp_buf[t], val_buf[t] = obs, action, logp, value
                next_obs, reward, terminated, truncated, info = env.step(torch.clamp(action, low, high))
                # exact truncation: bootstrap from the true last observation, never across termination
                bootstrap = truncated & ~terminated
                reward = reward + args.gamma * agent.value(info["final_obs"]) * bootstrap
                rew_buf[t], done_buf[t] = reward, (terminated | truncated).float()
                ep_return_sum += info["episode"]["r"].sum()
                ep_count += info["_episode"].sum()
                obs = next_obs.clone()  # the ring reuses its slots after published_buffer_depth steps
            next_value = agent.value(obs)
            advantages = torch.zeros_like(rew_buf)
            last = torch.zeros(N, device=device)
            for t in reversed(range(T)):
                nv = next_value if t == T - 1 else val_buf[t + 1]
                not_done = 1.0 - done_buf[t]
                delta = rew_buf[t] + args.gamma * nv * not_done - val_buf[t]
                last = delta + args.gamma * args.gae_lambda * not_done * last
                advantages[t] = last
            returns = advantages + val_buf
        agent.norm.update(obs_buf.reshape(-1, obs_dim))
        # ---- update
        b_obs, b_act = obs_buf.reshape(-1, obs_dim), act_buf.reshape(-1, act_dim)
        b_logp, b_adv, b_ret, b_val = (x.reshape(-1) for x in (logp_buf, advantages, returns, val_buf))
        for _ in range(args.update_epochs):
            perm = torch.randperm(batch, device=device)
            for s in range(0, batch, minibatch):
                idx = perm[s : s + minibatch]
                _, logp, entropy, value = learner(b_obs[idx], b_act[idx])
                ratio = (logp - b_logp[idx]).exp()
                adv = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_clipped = b_val[idx] + (value - b_val[idx]).clamp(-args.clip_coef, args.clip_coef)
                v_loss = 0.5 * torch.max((value - b_ret[idx]) ** 2, (v_clipped - b_ret[idx]) ** 2).mean()
                loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * entropy.mean()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        # ---- logging: one host read per `log_every` iterations
        if it % args.log_every == 0 or it == iterations:
            totals = torch.stack((ep_return_sum, ep_count))
            if distributed:
                import torch.distributed as dist

                dist.all_reduce(totals)  # one collective per log line
            total_return, count = totals.tolist()
            if count > 0:
                mean_return = total_return / count
                curve["env_steps"].append(it * batch * share.world_size)
                curve["mean_return"].append(mean_return)
                curve["seconds"].append(time.perf_counter() - start)
                bar.set_postfix(
                    mean_return=f"{mean_return:.1f}", sps=f"{it * batch / (time.perf_counter() - start):,.0f}"
                )
            ep_return_sum.zero_()
            ep_count.zero_()
        if args.time_limit_s and time.perf_counter() - start > args.time_limit_s:
            break  # under torchrun every rank must stop together: give all ranks the same limit
    env.close()
    if distributed:
        import torch.distributed as dist

        dist.destroy_process_group()
    curve["is_main"] = [float(is_main)]
    return curve


def save_curve(curve: dict[str, list[float]], args: Args) -> Path:
    """Episode-return curve as PNG (and the numbers as .npz) under ``args.out``; the .npz alone without matplotlib."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"ppo-{args.env_id.split('/')[-1]}-{args.num_envs}"
    np.savez(out / f"{stem}.npz", **{k: np.asarray(v) for k, v in curve.items()})
    plt = import_pyplot(out / f"{stem}.png")
    if plt is None:
        return out / f"{stem}.npz"
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(curve["env_steps"], curve["mean_return"])
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean episode return")
    ax.set_title(f"PPO on {args.env_id} ({args.num_envs} envs)")
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=120)
    plt.close(fig)
    return out / f"{stem}.png"


if __name__ == "__main__":
    cli_args = parse_args()
    result = train(cli_args)
    if result.pop("is_main") == [1.0]:
        final = result["mean_return"][-1] if result["mean_return"] else float("nan")
        print(f"wrote {save_curve(result, cli_args)}; final mean return {final:.1f}")
