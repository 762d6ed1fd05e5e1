"""PPO for continuous control on gym_graphreset envs, in CleanRL's single-file style, torch-native.

    python examples/ppo_continuous.py --env-id gym_graphreset/Ant-v5 --num-envs 4096 --device cuda
    python examples/ppo_continuous.py --env-id gym_graphreset/InvertedPendulum-v5 --num-envs 64 \
        --total-timesteps 60000 --device cpu
    torchrun --nproc_per_node=2 examples/ppo_continuous.py --num-envs 4096   # 4096 envs per rank, DDP
    python examples/ppo_continuous.py --preset mjlab-go1 --num-envs 4096 --time-limit-s 150 --device cuda

What differs from CleanRL's ppo_continuous_action.py, and why:
- Rollout storage lives on the env's device and the env step has no host sync (masked autoreset, and on
  CUDA the whole step is one captured graph). The policy's Gaussian is written out (``torch.distributions``
  validates its arguments with a host read on every construction).
- The whole update of an iteration (GAE, the observation normaliser, every epoch and minibatch, the
  optimizer step included) is one function on fixed buffers. On CUDA it is captured once as a CUDA graph
  and replayed (``--update-graph``; Adam with ``capturable=True`` and a tensor learning rate), optionally
  compiled first (``--compile``), as LeanRL does. Host reads: one every ``--log-every`` iterations.
- Truncation is handled exactly: on a truncated (time-limit) row the target bootstraps from
  ``V(info["final_obs"])``, the true last observation; on a terminated row it does not bootstrap.
  CleanRL's scripts treat truncation as termination; rsl_rl bootstraps with V(s_t) instead of
  V(s_{t+1}); both bias the value target.
- Observations are normalised with running statistics updated from each rollout (on the device).
- Dict observations with ``policy`` and ``critic`` groups train an asymmetric actor-critic: the actor
  reads ``policy``, the critic ``critic`` (both normalised).
- ``--preset mjlab-go1`` sets mjlab's Go1 PPO settings (rsl_rl, ``config/go1/rl_cfg.py``): 24 steps per
  env, 5 epochs x 4 minibatches, lr 1e-3 with the adaptive KL schedule (target 0.01), entropy 0.01,
  512-256-128 ELU networks, random initial episode lengths. It logs the velocity-tracking rewards and the
  episode length against wall-clock time, as mjlab's logger computes them, to a JSON file.
  ``--preset mjlab-g1`` is the same on the G1 humanoid (mjlab's G1 PPO config has the same numbers).
- ``--render-gif PATH`` renders world 0 under the trained policy's mean action after training (MuJoCo
  Warp tasks; rendered on the CPU, headless through EGL). ``python -m gym_graphreset play CKPT`` films a
  saved checkpoint, ``python -m gym_graphreset export CKPT`` writes it as ONNX and TorchScript.
- ``--save-dir DIR`` writes a checkpoint (:func:`save_checkpoint`: agent, optimizer, normaliser, iteration,
  global step, args) every ``--save-every`` iterations and at the end; ``--resume PATH`` continues from one.
- ``--tensorboard-dir DIR`` also writes every log line as TensorBoard scalars (needs ``tensorboard``).
- ``--model-xml PATH`` hands ``model_xml`` to the env (Go1: mjlab's ``go1.xml`` instead of the library's
  primitive model); the JSON records it.
- Under ``torchrun`` every rank steps its own share of one population (``global_env_offset``), gradients
  are all-reduced by DDP, and the logged statistics by one collective per log line.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

import gym_graphreset  # noqa: F401  (registers the env ids)
from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.bench.plotting import plot_curves
from gym_graphreset.distributed import init_distributed, rank_info
from gym_graphreset.integrations.common import RewardTermLog


# ----------------------------------------------------------------------------------------- config
@dataclass
class Args:
    """Command-line configuration (every field is a ``--flag``)."""

    env_id: str = "gym_graphreset/Ant-v5"
    num_envs: int = 4096
    total_timesteps: int = 100_000_000
    time_limit_s: float = 0.0
    device: str = "auto"
    seed: int = 1
    num_steps: int = 16
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
    cuda_graph: bool = True
    update_graph: bool = True
    compile: bool = False
    out: str = "runs"
    log_every: int = 10
    preset: str = ""
    hidden_dims: str = ""
    desired_kl: float = 0.0
    random_initial_elapsed: bool = False
    max_episode_steps: int = 0
    render_gif: str = ""
    render_steps: int = 250
    model_xml: str = ""
    save_dir: str = ""
    save_every: int = 0
    resume: str = ""
    tensorboard_dir: str = ""


HELP: dict[str, str] = {
    "env_id": "a registered env id, or module:id (the module is imported first)",
    "num_envs": "envs stepped together (per rank under torchrun)",
    "total_timesteps": "env steps to train for, num_envs x num_steps per iteration (per rank under torchrun)",
    "time_limit_s": "stop after this many seconds (0: no limit)",
    "device": "cuda, cpu or auto",
    "seed": "seed of the env's reset and the policy's initialisation",
    "num_steps": "rollout length per env",
    "learning_rate": "Adam's learning rate",
    "anneal_lr": "decay the learning rate linearly to 0 over the run",
    "gamma": "discount factor",
    "gae_lambda": "GAE's lambda",
    "num_minibatches": "minibatches per epoch",
    "update_epochs": "epochs over each rollout",
    "clip_coef": "PPO's ratio clip",
    "ent_coef": "entropy bonus weight",
    "vf_coef": "value-loss weight",
    "max_grad_norm": "gradient-norm clip",
    "hidden": "width of the two hidden layers (see --hidden-dims)",
    "cuda_graph": "capture the whole env step when on CUDA",
    "update_graph": "capture the whole PPO update as one CUDA graph when on CUDA (not under torchrun)",
    "compile": "torch.compile the minibatch loss before capturing the update",
    "out": "folder of the learning-curve JSON and PNG",
    "log_every": "iterations between log lines",
    "preset": '"mjlab-go1" / "mjlab-g1": the settings below from mjlab\'s Go1 PPO config (explicit flags win)',
    "hidden_dims": 'e.g. "512,256,128" (default: two layers of --hidden)',
    "desired_kl": "> 0: rsl_rl's adaptive learning rate toward this KL (replaces --anneal-lr)",
    "random_initial_elapsed": "start episodes at random steps (rsl_rl's init_at_random_ep_len)",
    "max_episode_steps": "> 0: the env's truncation horizon (0: the task's own)",
    "render_gif": "after training, a GIF of world 0 under the policy's mean action (MuJoCo Warp tasks)",
    "render_steps": "env steps in that GIF",
    "model_xml": "the env's model_xml (Go1: an MJCF with mjlab's names; empty: the task's own model)",
    "save_dir": "checkpoints here (model_<iteration>.pt), every --save-every iterations and at the end",
    "save_every": "iterations between checkpoints (0: only the final one)",
    "resume": "a checkpoint of this script to continue from (agent, optimizer, normaliser, iteration)",
    "tensorboard_dir": "TensorBoard scalars here, one point per log line (empty: none)",
}
"""Each flag's help text (``--help``)."""


PRESETS: dict[str, dict[str, Any]] = {
    "mjlab-go1": {
        "env_id": "gym_graphreset/Go1-Velocity-Flat-v0",
        "num_steps": 24,
        "learning_rate": 1e-3,
        "anneal_lr": False,
        "desired_kl": 0.01,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "num_minibatches": 4,
        "update_epochs": 5,
        "clip_coef": 0.2,
        "ent_coef": 0.01,
        "vf_coef": 2.0,  # rsl_rl's value_loss_coef 1.0 on an un-halved squared error; this loss halves it
        "max_grad_norm": 1.0,
        "hidden_dims": "512,256,128",
        "random_initial_elapsed": True,
        "log_every": 5,
    }
}
"""Named sets of defaults for ``--preset``; flags given on the command line override them."""
PRESETS["mjlab-g1"] = {**PRESETS["mjlab-go1"], "env_id": "gym_graphreset/G1-Velocity-Flat-v0"}  # mjlab's G1 PPO


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
                help=f"{HELP[f.name]} (default: {f.default})",
            )
        else:
            kind = {"int": int, "float": float, "str": str}[str(f.type)]
            parser.add_argument(flag, type=kind, default=f.default, help=f"{HELP[f.name]} (default: {f.default})")
    preset = parser.parse_args(argv).preset
    if preset:
        if preset not in PRESETS:
            raise ValueError(f"`--preset` must be one of {sorted(PRESETS)}, got {preset!r}")
        parser.set_defaults(**PRESETS[preset])
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
        self.mean.add_(delta * n / total)  # in place: a captured update holds these buffers
        self.var.copy_((self.var * self.count + batch_var * n + delta**2 * self.count * n / total) / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) / torch.sqrt(self.var + 1e-8)).clamp(-10, 10)


HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def layer(i: int, o: int, std: float = 2**0.5) -> nn.Linear:
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


def mlp(i: int, hidden: tuple[int, ...], o: int, out_std: float) -> nn.Sequential:
    dims, mods = (i, *hidden), []
    for a, b in itertools.pairwise(dims):
        mods += [layer(a, b), nn.ELU()]
    return nn.Sequential(*mods, layer(dims[-1], o, out_std))


def flat_obs(obs: Any) -> torch.Tensor:
    """One tensor per row: a Box observation as it is, a ``policy``/``critic`` dict side by side."""
    return torch.cat((obs["policy"], obs["critic"]), dim=1) if isinstance(obs, dict) else obs


class Agent(nn.Module):
    """Separate actor and critic MLPs; a state-independent log-std.

    With ``actor_dim`` set (a dict observation flattened by :func:`flat_obs`), the actor reads the first
    ``actor_dim`` columns (``policy``) and the critic the rest (``critic``): an asymmetric actor-critic.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...], actor_dim: int | None = None) -> None:
        super().__init__()
        self.norm = RunningNorm(obs_dim)
        self.split = actor_dim
        self.critic = mlp(obs_dim - (actor_dim or 0), hidden, 1, 1.0)
        self.actor = mlp(actor_dim or obs_dim, hidden, act_dim, 0.01)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(actor input, critic input) of normalised observations."""
        return (x, x) if self.split is None else (x[:, : self.split], x[:, self.split :])

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self._heads(self.norm(obs))[1]).squeeze(-1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The update's pass (through DDP when distributed)."""
        return self.act(obs, action)

    def act(self, obs: torch.Tensor, action: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """Action (sampled when not given), its log-probability, the entropy and the value.

        The diagonal Gaussian is written out: ``torch.distributions.Normal`` checks its arguments with a
        host read each time it is built, which would sync every rollout step and break capture.
        """
        xa, xc = self._heads(self.norm(obs))
        mean, log_std = self.actor(xa), self.log_std.expand(xa.shape[0], -1)
        if action is None:
            action = mean + log_std.exp() * torch.randn_like(mean)
        logp = (-0.5 * ((action - mean) / log_std.exp()) ** 2 - log_std - HALF_LOG_2PI).sum(-1)
        entropy = (0.5 + HALF_LOG_2PI + log_std).sum(-1)
        return action, logp, entropy, self.critic(xc).squeeze(-1)


# ----------------------------------------------------------------------------------------- env
def env_kwargs(args: Args) -> dict[str, Any]:
    """The env constructor's keywords the arguments ask for beyond the defaults (recorded in checkpoints)."""
    return {"model_xml": args.model_xml} if args.model_xml else {}


def make_env(args: Args, device: torch.device, global_env_offset: int = 0) -> FixedShapeAutoresetVectorEnv:
    extra = env_kwargs(args)
    try:
        inner = gym.make_vec(
            args.env_id,
            num_envs=args.num_envs,
            vectorization_mode="vector_entry_point",
            device=device,
            global_env_offset=global_env_offset,
            **({"max_episode_steps": args.max_episode_steps} if args.max_episode_steps > 0 else {}),
            **extra,
        )
    except TypeError as exc:
        if not extra:
            raise
        raise ValueError(f"`--model-xml`: {args.env_id} does not take a model_xml ({exc})") from exc
    graph = device.type == "cuda" and args.cuda_graph
    return FixedShapeAutoresetVectorEnv(
        inner, "step_graph" if graph else "masked_persistent", reset_terms={"episode": EpisodeStatistics()}
    )


# ----------------------------------------------------------------------------------------- update
@dataclass
class Storage:
    """One rollout on the env's device, at fixed addresses (a captured update reads them in place)."""

    obs: torch.Tensor  # (T, N, obs_dim)
    actions: torch.Tensor  # (T, N, act_dim)
    logp: torch.Tensor  # (T, N)
    rewards: torch.Tensor  # (T, N): truncation bootstrap folded in
    dones: torch.Tensor  # (T, N)
    values: torch.Tensor  # (T, N)
    last_obs: torch.Tensor  # (N, obs_dim): the observation after the rollout, for the last value

    @classmethod
    def empty(cls, steps: int, num_envs: int, obs_dim: int, act_dim: int, device: torch.device) -> Storage:
        def z(*shape: int) -> torch.Tensor:
            return torch.zeros(*shape, device=device)

        n, t = num_envs, steps
        return cls(z(t, n, obs_dim), z(t, n, act_dim), z(t, n), z(t, n), z(t, n), z(t, n), z(n, obs_dim))


class PPOUpdate:
    """The whole update of one iteration on :class:`Storage`: GAE, the normaliser, epochs x minibatches.

    Eager, or (``capture=True``, CUDA) run once eagerly on a side stream (Adam's state is created
    there), then captured as one CUDA graph and replayed every iteration: thousands of small kernels
    become one launch. ``compile=True`` runs the minibatch loss through ``torch.compile`` first.
    """

    def __init__(
        self,
        agent: Agent,
        learner: nn.Module,
        optimizer: torch.optim.Optimizer,
        store: Storage,
        args: Args,
        *,
        capture: bool,
        compile: bool,
    ) -> None:
        self.agent, self.learner, self.optimizer, self.store, self.args = agent, learner, optimizer, store, args
        self.capture = capture
        self.loss = torch.compile(self._loss) if compile else self._loss
        self.graph: torch.cuda.CUDAGraph | None = None
        self.calls = 0
        self.kl = torch.zeros((), device=store.obs.device)

    def __call__(self) -> None:
        """Run the update (eagerly, or by replaying its graph)."""
        self.calls += 1
        if not self.capture:
            self._update()
        elif self.graph is None and self.calls == 1:  # warm-up: a real update, on a side stream
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._update()
            torch.cuda.current_stream().wait_stream(side)
        elif self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._update()
            self.graph.replay()  # capturing ran nothing: this iteration's update
        else:
            self.graph.replay()

    def prepare(self) -> float:
        """Compile and capture before training, on the storage as it is, then undo those updates; seconds.

        Parameters, normaliser and Adam's state are restored in place (a captured graph holds them), so
        training starts from the initial policy with nothing left to compile.
        """
        start = time.perf_counter()
        saved = {k: v.clone() for k, v in self.agent.state_dict().items()}
        lr = self.optimizer.param_groups[0]["lr"]
        saved_lr = lr.clone() if isinstance(lr, torch.Tensor) else None
        for _ in range(2 if self.capture else 1):
            self()
        with torch.no_grad():
            for k, v in self.agent.state_dict().items():
                v.copy_(saved[k])
            for state in self.optimizer.state.values():
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        value.zero_()
            if saved_lr is not None:
                lr.copy_(saved_lr)  # the adaptive schedule moved it
        if self.store.obs.is_cuda:
            torch.cuda.synchronize(self.store.obs.device)
        return time.perf_counter() - start

    def _loss(
        self,
        obs: torch.Tensor,
        act: torch.Tensor,
        logp_old: torch.Tensor,
        adv: torch.Tensor,
        ret: torch.Tensor,
        val_old: torch.Tensor,
    ) -> torch.Tensor:
        args = self.args
        _, logp, entropy, value = self.learner(obs, act)
        log_ratio = logp - logp_old
        ratio = log_ratio.exp()
        self.kl.copy_(((ratio - 1) - log_ratio).mean().detach())  # estimator of KL(old || new)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
        v_clipped = val_old + (value - val_old).clamp(-args.clip_coef, args.clip_coef)
        v_loss = 0.5 * torch.max((value - ret) ** 2, (v_clipped - ret) ** 2).mean()
        return pg_loss + args.vf_coef * v_loss - args.ent_coef * entropy.mean()

    def _update(self) -> None:
        args, agent, st = self.args, self.agent, self.store
        T, N = st.rewards.shape
        with torch.no_grad():  # GAE on the device
            next_value = agent.value(st.last_obs)
            advantages = torch.zeros_like(st.rewards)
            last = torch.zeros_like(next_value)
            for t in reversed(range(T)):
                nv = next_value if t == T - 1 else st.values[t + 1]
                not_done = 1.0 - st.dones[t]
                delta = st.rewards[t] + args.gamma * nv * not_done - st.values[t]
                last = delta + args.gamma * args.gae_lambda * not_done * last
                advantages[t] = last
            returns = advantages + st.values
            agent.norm.update(st.obs.reshape(-1, st.obs.shape[-1]))
        batch = T * N
        minibatch = batch // args.num_minibatches
        b_obs, b_act = st.obs.reshape(batch, -1), st.actions.reshape(batch, -1)
        b_logp, b_adv, b_ret, b_val = (x.reshape(-1) for x in (st.logp, advantages, returns, st.values))
        perms = torch.rand(args.update_epochs, batch, device=b_obs.device).argsort(dim=1)  # no host read
        for epoch in range(args.update_epochs):
            for s in range(0, batch - minibatch + 1, minibatch):
                idx = perms[epoch, s : s + minibatch]
                loss = self.loss(b_obs[idx], b_act[idx], b_logp[idx], b_adv[idx], b_ret[idx], b_val[idx])
                self.optimizer.zero_grad(set_to_none=False)  # in place: the graph holds the grads
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                if args.desired_kl > 0:  # rsl_rl's adaptive schedule, on the device
                    lr = self.optimizer.param_groups[0]["lr"]
                    kl, target = self.kl, args.desired_kl
                    scale = torch.where(kl > 2 * target, 1 / 1.5, torch.where(kl < target / 2, 1.5, 1.0))
                    lr.copy_((lr * scale).clamp(1e-5, 1e-2))
                self.optimizer.step()


# ----------------------------------------------------------------------------------------- checkpoints
def policy_meta(agent: Agent, act_dim: int, low: torch.Tensor, high: torch.Tensor) -> dict[str, Any]:
    """What rebuilding the deterministic actor needs, stored as a checkpoint's ``policy`` entry."""
    return {
        "obs_dim": agent.norm.mean.shape[0],
        "act_dim": act_dim,
        "actor_dim": agent.split,
        "activation": "elu",
        "norm_eps": 1e-8,
        "norm_clip": 10.0,
        "action_low": low.cpu().tolist(),
        "action_high": high.cpu().tolist(),
    }


def save_checkpoint(
    path: Path,
    agent: Agent,
    optimizer: torch.optim.Optimizer,
    args: Args,
    *,
    iteration: int,
    global_step: int,
    policy: dict[str, Any],
) -> Path:
    """Write a checkpoint: a dict that ``torch.load`` reads back, of this layout (``format`` names it).

    - ``format``: :data:`gym_graphreset.integrations.export.PPO_CHECKPOINT_FORMAT`;
    - ``agent``: :class:`Agent`'s ``state_dict`` (``norm.mean``, ``norm.var``, ``norm.count``: the
      observation normaliser; ``actor.<i>``/``critic.<i>`` Linear layers; ``log_std``);
    - ``optimizer``: Adam's ``state_dict`` (its learning rate included);
    - ``iteration``, ``global_step``: the last finished iteration and the env steps so far (all ranks);
    - ``args``: the run's :class:`Args` as a dict; ``env_id`` and ``env_kwargs``: the env it trained on;
    - ``policy``: :func:`policy_meta` (dimensions, activation, normaliser epsilon and clip, action bounds).
    """
    from gym_graphreset.integrations.export import PPO_CHECKPOINT_FORMAT

    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "format": PPO_CHECKPOINT_FORMAT,
        "agent": {k: v.detach().cpu().clone() for k, v in agent.state_dict().items()},
        "optimizer": optimizer.state_dict(),
        "iteration": iteration,
        "global_step": global_step,
        "args": dataclasses.asdict(args),
        "env_id": args.env_id,
        "env_kwargs": env_kwargs(args),
        "policy": policy,
    }
    tmp = path.with_suffix(".tmp")
    torch.save(record, tmp)
    tmp.replace(path)  # a killed run never leaves half a checkpoint
    return path


def load_checkpoint(path: Path, agent: Agent, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Copy a checkpoint's agent and optimizer state into ``agent`` and ``optimizer`` in place; the checkpoint.

    In place: a captured update holds the parameters, the normaliser's buffers and Adam's state, so they keep
    their addresses (Adam's state must exist already: call this after :meth:`PPOUpdate.prepare`).

    Raises:
        ValueError: the file is not this script's checkpoint, or its networks have other shapes.
    """
    from gym_graphreset.integrations.export import PPO_CHECKPOINT_FORMAT

    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(ckpt, dict) or ckpt.get("format") != PPO_CHECKPOINT_FORMAT:
        got = ckpt.get("format") if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ValueError(f"`--resume` must be a checkpoint of format {PPO_CHECKPOINT_FORMAT!r}, got {got!r}")
    own = agent.state_dict()
    shapes = {k: tuple(v.shape) for k, v in own.items()}
    theirs = {k: tuple(v.shape) for k, v in ckpt["agent"].items()}
    if shapes != theirs:
        diff = sorted(k for k in shapes.keys() | theirs.keys() if shapes.get(k) != theirs.get(k))
        raise ValueError(
            f"`--resume` {str(path)!r} holds another agent: {diff[0]} is {theirs.get(diff[0])} there and "
            f"{shapes.get(diff[0])} here (same --env-id and --hidden-dims as the run that saved it?)"
        )
    with torch.no_grad():
        for k, v in own.items():
            v.copy_(ckpt["agent"][k])
        saved = ckpt["optimizer"]
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for index, param in enumerate(params):
            for key, value in optimizer.state.get(param, {}).items():
                if isinstance(value, torch.Tensor) and key in saved["state"].get(index, {}):
                    value.copy_(saved["state"][index][key])
        for group, saved_group in zip(optimizer.param_groups, saved["param_groups"], strict=True):
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].copy_(torch.as_tensor(saved_group["lr"]))
            else:
                group["lr"] = float(saved_group["lr"])
    return ckpt


def tensorboard_writer(args: Args) -> Any:
    """A ``SummaryWriter`` on ``--tensorboard-dir``, or ``None`` (a one-line notice when tensorboard is missing)."""
    if not args.tensorboard_dir:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        print(f"tensorboard is not installed (pip install tensorboard): no scalars in {args.tensorboard_dir}")
        return None
    return SummaryWriter(log_dir=args.tensorboard_dir)


# ----------------------------------------------------------------------------------------- train
def warm_up(env: FixedShapeAutoresetVectorEnv, steps: int = 8) -> float:
    """Step random actions until kernels are compiled and the env step is captured; returns seconds."""
    start = time.perf_counter()
    env.reset(seed=0)
    low = torch.as_tensor(env.single_action_space.low, device=env.device).clamp(min=-1.0)  # unbounded: [-1, 1]
    high = torch.as_tensor(env.single_action_space.high, device=env.device).clamp(max=1.0)
    for _ in range(steps):
        env.step(low + (high - low) * torch.rand(env.num_envs, low.shape[0], device=env.device))
    if env.device.type == "cuda":
        torch.cuda.synchronize(env.device)
    return time.perf_counter() - start


class Split:
    """Where an iteration's time goes (rollout vs update), from CUDA events read at log points only."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.pending: list[tuple[Any, Any, Any]] = []
        self.rollout_ms: list[float] = []
        self.update_ms: list[float] = []

    def mark(self) -> Any:
        """A point in the stream's timeline (a CUDA event; ``perf_counter`` on the CPU)."""
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def add(self, start: Any, mid: Any, end: Any) -> None:
        self.pending.append((start, mid, end))

    def read(self) -> None:
        """Resolve the pending marks (the caller has just read the host, so the events are done)."""
        for start, mid, end in self.pending:
            if self.cuda:
                end.synchronize()
                self.rollout_ms.append(start.elapsed_time(mid))
                self.update_ms.append(mid.elapsed_time(end))
            else:
                self.rollout_ms.append((mid - start) * 1e3)
                self.update_ms.append((end - mid) * 1e3)
        self.pending.clear()

    def summary(self, skip: int = 1) -> dict[str, float]:
        """Median ms per iteration of each phase, skipping the first ``skip`` iterations."""
        r, u = self.rollout_ms[skip:] or self.rollout_ms, self.update_ms[skip:] or self.update_ms
        med = lambda xs: float(np.median(xs)) if xs else float("nan")  # noqa: E731
        return {"rollout_ms": med(r), "update_ms": med(u)}


def train(args: Args) -> dict[str, list[float]]:
    """Run PPO; returns the logged curve (env steps, mean episode return, seconds) and the time split."""
    distributed = init_distributed()
    share = rank_info(args.num_envs, device=None if args.device == "auto" else args.device)
    device, is_main = share.device, share.rank == 0
    torch.manual_seed(args.seed)
    env = make_env(args, device, share.global_env_offset)
    warmup_s = warm_up(env)  # kernel compilation and the env's capture: reported, not timed
    space = env.single_observation_space
    groups = isinstance(space, gym.spaces.Dict)
    actor_dim = space["policy"].shape[0] if groups else None
    obs_dim = space["policy"].shape[0] + space["critic"].shape[0] if groups else space.shape[0]
    act_dim = env.single_action_space.shape[0]
    low = torch.as_tensor(env.single_action_space.low, device=device)
    high = torch.as_tensor(env.single_action_space.high, device=device)
    hidden = tuple(int(h) for h in args.hidden_dims.split(",")) if args.hidden_dims else (args.hidden, args.hidden)
    agent = Agent(obs_dim, act_dim, hidden, actor_dim).to(device)
    capture = device.type == "cuda" and args.update_graph and not distributed
    if is_main and args.update_graph and device.type == "cuda" and distributed:
        print("--update-graph: not under torchrun (DDP's all-reduce is not captured); the update runs eagerly")
    tensor_lr = capture or args.desired_kl > 0
    lr = torch.tensor(args.learning_rate, device=device) if tensor_lr else args.learning_rate
    optimizer = torch.optim.Adam(
        agent.parameters(), lr=lr, eps=1e-5, capturable=capture, foreach=None if capture or not tensor_lr else False
    )
    learner: nn.Module = agent
    if distributed:
        from torch.nn.parallel import DistributedDataParallel

        learner = DistributedDataParallel(agent, device_ids=[device.index] if device.type == "cuda" else None)

    T, N = args.num_steps, args.num_envs
    store = Storage.empty(T, N, obs_dim, act_dim, device)
    update = PPOUpdate(agent, learner, optimizer, store, args, capture=capture, compile=args.compile)
    warmup_s += update.prepare()  # the update's compile and capture: reported, not timed
    meta = policy_meta(agent, act_dim, low, high)
    start_iteration = 0
    if args.resume:  # after prepare(): Adam's state exists, and is overwritten in place
        ckpt = load_checkpoint(Path(args.resume), agent, optimizer)
        start_iteration = int(ckpt["iteration"])
        if is_main:
            print(f"resumed from {args.resume} (iteration {start_iteration}, {ckpt['global_step']:,} env steps)")
    writer = tensorboard_writer(args) if is_main else None
    ep_return_sum = torch.zeros((), device=device)
    ep_count = torch.zeros((), device=device)
    ep_length_sum = torch.zeros((), device=device)
    terms = RewardTermLog.for_env(env) or RewardTermLog((), 1.0, env.num_envs, device)  # Go1: per-term sums
    split = Split(device)

    start = time.perf_counter()  # from the first reset (kernels already compiled by the warm-up)
    obs, _ = env.reset(seed=args.seed)
    obs = flat_obs(obs).clone()
    if args.random_initial_elapsed:  # stagger the first episodes across the horizon (rsl_rl does the same)
        inner = env.env
        gen = torch.Generator(device=device).manual_seed(args.seed)
        inner.elapsed.copy_(
            torch.randint(0, inner.max_episode_steps, inner.elapsed.shape, device=device, generator=gen)
        )
    iterations = max(1, args.total_timesteps // (T * N))
    batch = T * N
    curve: dict[str, list[float]] = {"env_steps": [], "mean_return": [], "seconds": [], "mean_episode_length": []}
    curve |= {name: [] for name in terms.names}
    bar = tqdm(
        range(start_iteration + 1, iterations + 1), desc=args.env_id.split("/")[-1], unit="iter", disable=not is_main
    )
    it = start_iteration

    def checkpoint(it: int) -> None:
        if is_main and args.save_dir:
            path = Path(args.save_dir) / f"model_{it}.pt"
            save_checkpoint(
                path, agent, optimizer, args, iteration=it, global_step=it * batch * share.world_size, policy=meta
            )

    for it in bar:
        if args.anneal_lr and not args.desired_kl > 0:  # the adaptive schedule owns the rate
            frac = 1.0 - (it - 1) / iterations
            group = optimizer.param_groups[0]
            if capture:
                group["lr"].fill_(args.learning_rate * frac)  # a kernel, no host read
            else:
                group["lr"] = args.learning_rate * frac
        t0 = split.mark()
        # ---- rollout: no host sync inside
        with torch.no_grad():
            for t in range(T):
                action, logp, _, value = agent.act(obs)
                store.obs[t], store.actions[t], store.logp[t], store.values[t] = obs, action, logp, value
                next_obs, reward, terminated, truncated, info = env.step(torch.clamp(action, low, high))
                # exact truncation: bootstrap from the true last observation, never across termination
                bootstrap = truncated & ~terminated
                reward = reward + args.gamma * agent.value(flat_obs(info["final_obs"])) * bootstrap
                store.rewards[t], store.dones[t] = reward, (terminated | truncated).float()
                ep_return_sum += info["episode"]["r"].sum()
                ep_length_sum += info["episode"]["l"].sum()
                ep_count += info["_episode"].sum()
                terms.add(info, store.dones[t])
                obs = flat_obs(next_obs).clone()  # the ring reuses its slots after published_buffer_depth steps
            store.last_obs.copy_(obs)
        t1 = split.mark()
        update()
        split.add(t0, t1, split.mark())
        # ---- logging: one host read per `log_every` iterations
        if it % args.log_every == 0 or it == iterations:
            totals = torch.cat(
                (torch.stack((ep_return_sum, ep_count, ep_length_sum, terms.reset_steps)), terms.step_means)
            )
            if distributed:
                import torch.distributed as dist

                dist.all_reduce(totals)  # one collective per log line
            total_return, count, total_length, reset_steps, *term_totals = totals.tolist()
            split.read()
            if count > 0:
                mean_return = total_return / count
                curve["env_steps"].append(it * batch * share.world_size)
                curve["mean_return"].append(mean_return)
                curve["mean_episode_length"].append(total_length / count)
                curve["seconds"].append(time.perf_counter() - start)
                for name, total in zip(terms.names, term_totals, strict=True):  # mjlab's Episode_Reward/<name>
                    curve[name].append(total / max(reset_steps, 1.0) / terms.episode_seconds)
                shown = {terms.names[0]: f"{curve[terms.names[0]][-1]:.3f}"} if terms.names else {}  # the first term
                bar.set_postfix(
                    mean_return=f"{mean_return:.1f}",
                    **shown,
                    sps=f"{(it - start_iteration) * batch / (time.perf_counter() - start):,.0f}",
                )
                if is_main:
                    save_json(curve, args)
                if writer is not None:
                    step = curve["env_steps"][-1]
                    writer.add_scalar("Train/mean_reward", mean_return, step)
                    writer.add_scalar("Train/mean_episode_length", curve["mean_episode_length"][-1], step)
                    writer.add_scalar(
                        "Perf/total_fps", (it - start_iteration) * batch / (time.perf_counter() - start), step
                    )
                    for name in terms.names:
                        writer.add_scalar(f"Episode_Reward/{name}", curve[name][-1], step)
            ep_return_sum.zero_()
            ep_count.zero_()
            ep_length_sum.zero_()
            for t in (terms.sums, terms.count, terms.step_means, terms.reset_steps):
                t.zero_()
        if args.save_every > 0 and it % args.save_every == 0 and it != iterations:
            checkpoint(it)
        if args.time_limit_s and time.perf_counter() - start > args.time_limit_s:
            break  # under torchrun every rank must stop together: give all ranks the same limit
    elapsed = time.perf_counter() - start
    checkpoint(it)
    if writer is not None:
        writer.close()
    if is_main and args.render_gif:
        render_policy(env, agent, low, high, args)
    env.close()
    if distributed:
        import torch.distributed as dist

        dist.barrier()  # every rank is done with gloo before any tears it down (an early exit can abort a peer)
        dist.destroy_process_group()
    parts = split.summary()
    curve["is_main"] = [float(is_main)]
    curve["split"] = [parts["rollout_ms"], parts["update_ms"]]
    curve["timing"] = [warmup_s, elapsed, (it - start_iteration) * batch * share.world_size / elapsed]
    if is_main:
        print(
            f"\n{args.env_id} x{args.num_envs}: update graph {capture}, compile {args.compile}: "
            f"{curve['timing'][2]:,.0f} env-steps/s over {elapsed:.1f} s from the first reset "
            f"(before it: kernel compilation, env and update capture{', update compile' if args.compile else ''}: "
            f"{warmup_s:.1f} s); per iteration "
            f"(median): rollout {parts['rollout_ms']:.1f} ms, update {parts['update_ms']:.1f} ms"
        )
    return curve


def render_policy(
    env: FixedShapeAutoresetVectorEnv, agent: Agent, low: torch.Tensor, high: torch.Tensor, args: Args
) -> None:
    """World 0 under the trained policy's mean action for ``--render-steps`` steps, as a real-time GIF.

    Rendered on the CPU by :mod:`gym_graphreset.envs.mjwarp.rendering`; a missing OpenGL backend or Pillow skips it with
    a one-line notice (the training's results are already saved).
    """
    from gym_graphreset.envs.mjwarp.frames import RenderUnavailable
    from gym_graphreset.envs.mjwarp.rendering import render_frames, save_gif

    def mean_action(obs: Any) -> torch.Tensor:
        return agent.actor(agent._heads(agent.norm(flat_obs(obs)))[0]).clamp(low, high)

    path = Path(args.render_gif)
    try:
        frames = render_frames(env, mean_action, args.render_steps, seed=args.seed + 1)
    except (RenderUnavailable, TypeError) as exc:
        print(f"--render-gif: {exc}: skipped {path}")
        return
    if save_gif(frames, path, fps=1.0 / env.unwrapped.dt):
        print(f"wrote {path} ({len(frames)} frames of world 0 under the policy's mean action)")


def _stem(args: Args) -> str:
    return f"ppo-{args.env_id.split('/')[-1]}-{args.num_envs}" + ("" if args.update_graph else "-eager-update")


def save_json(curve: dict[str, list[float]], args: Args) -> Path:
    """The curve so far and the run's settings as ``<out>/<stem>.json``; rewritten at every log line.

    ``"rows"`` is the training-curve format of :func:`gym_graphreset.bench.plotting.load_training_curve` (one row
    per log line: ``wall_s`` from the first reset, ``env_steps``, ``track_lin_vel``, ``track_ang_vel``,
    ``episode_length``, ``mean_return``; the tracking terms are ``null`` for tasks without them), so
    :func:`~gym_graphreset.bench.plotting.plot_training_curves` draws it next to mjlab's run; ``"curve"`` has the
    same values as lists, every reward term included.
    """
    import json

    def at(key: str, i: int) -> float | None:
        values = curve.get(key, [])
        return values[i] if i < len(values) else None

    rows = [
        {
            "wall_s": wall,
            "env_steps": at("env_steps", i),
            "track_lin_vel": at("track_linear_velocity", i),
            "track_ang_vel": at("track_angular_velocity", i),
            "episode_length": at("mean_episode_length", i),
            "mean_return": at("mean_return", i),
        }
        for i, wall in enumerate(curve.get("seconds", []))
    ]
    record = {
        "trainer": "examples/ppo_continuous.py",
        "task": args.env_id,
        "num_envs": args.num_envs,
        "budget_s": args.time_limit_s,
        "model_xml": args.model_xml or None,
        "metric": "track_* and the reward terms: mjlab's Episode_Reward/<term> (mean over the steps with resets "
        "of the reset rows' mean episode sum / configured episode length in seconds)",
        "args": dataclasses.asdict(args),
        "rows": rows,
        "curve": curve,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{_stem(args)}.json"
    path.write_text(json.dumps(record, indent=1))
    return path


def save_curve(curve: dict[str, list[float]], args: Args) -> Path:
    """Return vs env steps and vs wall time, PNG and .npz, under ``args.out`` (the .npz alone without matplotlib)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = _stem(args)
    save_json(curve, args)
    np.savez(out / f"{stem}.npz", **{k: np.asarray(v) for k, v in curve.items()})
    title = f"PPO on {args.env_id} ({args.num_envs} envs, update graph {args.update_graph})"
    label = "captured update" if args.update_graph else "eager update"
    if not plot_curves({label: curve}, out / f"{stem}.png", title):
        return out / f"{stem}.npz"
    return out / f"{stem}.png"


if __name__ == "__main__":
    cli_args = parse_args()
    result = train(cli_args)
    if result.pop("is_main") == [1.0]:
        final = result["mean_return"][-1] if result["mean_return"] else float("nan")
        print(f"wrote {save_curve(result, cli_args)}; final mean return {final:.1f}")
