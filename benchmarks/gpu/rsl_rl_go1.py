"""rsl_rl's OnPolicyRunner on Go1-Velocity-Flat-v0 with mjlab's Go1 PPO settings, for a wall-clock budget.

    python benchmarks/gpu/rsl_rl_go1.py --budget-s 120 --out "$OUT" \
        --reference benchmarks/results/h200-mjlab-train-Go1-4096.json
    python benchmarks/gpu/rsl_rl_go1.py --device cpu --num-envs 8 --budget-s 20 --out /tmp/go1

The learning side is mjlab's (``Mjlab-Velocity-Flat-Unitree-Go1``'s ``tasks/velocity/config/go1/rl_cfg.py``
in mjlab 1.6, copied in :func:`mjlab_go1_cfg`): 512-256-128 ELU actor and critic, normalised observations,
initial std 1, 24 steps per env, 5 epochs of 4 minibatches, lr 1e-3 with the adaptive KL schedule (target
0.01), entropy 0.01, gamma 0.99, lambda 0.95, clip 0.2, max grad norm 1, random initial episode lengths.
The env side is the library's: the task under the whole-step CUDA graph (``--preset step_graph``), through
:class:`~gym_graphreset.integrations.rsl_rl.RslRlVecEnv`, trained by
:class:`~gym_graphreset.integrations.rsl_rl.SyncFreeOnPolicyRunner` with
:class:`~gym_graphreset.integrations.rsl_rl.FinalObsPPO` (``--stock``: rsl_rl's ``OnPolicyRunner`` and ``PPO``).

The JSON (``<out>/<name>``, rewritten after every iteration) has the rows of ``benchmarks/gpu/mjlab_train.py``
(:func:`gym_graphreset.bench.plotting.load_training_curve`): ``wall_s`` since the training loop started (as for
mjlab, the env is built, its kernels compiled and its step captured before it: ``setup_s``), ``env_steps``,
``track_lin_vel`` / ``track_ang_vel`` (mjlab's ``Episode_Reward/track_linear_velocity`` /
``track_angular_velocity``: the weighted, dt-scaled episode sum over the maximum episode length in seconds,
averaged over the episodes that ended in the iteration; ``None`` when none did), ``episode_length`` and
``mean_reward`` (the mean length and raw return of those episodes). With ``--reference`` (mjlab's JSON) a
PNG of both curves against wall-clock time is written next to it.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from rsl_rl.runners import OnPolicyRunner
from tqdm.auto import tqdm

import gym_graphreset  # noqa: F401  (registers the tasks)
from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.bench.plotting import plot_training_curves
from gym_graphreset.bench.runner import env_versions
from gym_graphreset.integrations.common import RewardTermLog
from gym_graphreset.integrations.rsl_rl import RslRlVecEnv, SyncFreeOnPolicyRunner

ENV_ID = "gym_graphreset/Go1-Velocity-Flat-v0"


def mjlab_go1_cfg(stock: bool = False) -> dict[str, Any]:
    """mjlab 1.6's Go1 velocity PPO config (``tasks/velocity/config/go1/rl_cfg.py``) as an rsl_rl train config.

    The observation groups are the task's: the actor reads ``policy`` (mjlab calls it ``actor``), the
    critic ``critic``. ``stock`` picks rsl_rl's ``PPO`` (``V(s_t)`` time-out bootstrap) and its per-step
    NaN check instead of :class:`~gym_graphreset.integrations.rsl_rl.FinalObsPPO` and none.
    """
    mlp = {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "activation": "elu", "obs_normalization": True}
    return {
        "seed": 42,
        "num_steps_per_env": 24,
        "save_interval": 50,
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "actor": {
            **mlp,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"},
        },
        "critic": mlp,
        "algorithm": {
            "class_name": "PPO" if stock else "gym_graphreset.integrations.rsl_rl:FinalObsPPO",
            "num_learning_epochs": 5,
            "num_mini_batches": 4,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "gamma": 0.99,
            "lam": 0.95,
            "entropy_coef": 0.01,
            "desired_kl": 0.01,
            "max_grad_norm": 1.0,
            "value_loss_coef": 1.0,
            "use_clipped_value_loss": True,
            "clip_param": 0.2,
            "normalize_advantage_per_mini_batch": False,
            "optimizer": "adam",
        },
        "check_for_nan": stock,
    }


class TermLoggingVecEnv(RslRlVecEnv):
    """:class:`RslRlVecEnv` that also sums the task's reward terms per episode (on the device)."""

    def __init__(self, env: FixedShapeAutoresetVectorEnv, *, seed: int | None = None) -> None:
        super().__init__(env, seed=seed)
        terms = RewardTermLog.for_env(env)
        if terms is None:
            raise ValueError(f"TermLoggingVecEnv needs the wrapped Go1 task ({ENV_ID}), got {env.env}")
        self.terms = terms

    def step(self, actions: torch.Tensor) -> Any:
        """Step as :class:`RslRlVecEnv`, adding the step's reward terms to :attr:`terms` (no host read)."""
        obs, rewards, dones, extras = super().step(actions)
        self.terms.add(self.info, dones)
        return obs, rewards, dones, extras


def warm_up(env: FixedShapeAutoresetVectorEnv, seed: int, steps: int = 8) -> None:
    """Step random actions in [-1, 1], so that compilation and capture happen before the training clock starts.

    mjlab's env compiles its kernels and captures its physics graph when it is built, before its training
    loop; this puts the library's env in the same state. The training then starts from a fresh reset.
    """
    env.reset(seed=seed)
    for _ in range(steps):
        env.step(torch.rand(env.num_envs, *env.single_action_space.shape, device=env.device) * 2.0 - 1.0)
    if env.device.type == "cuda":
        torch.cuda.synchronize(env.device)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget-s", type=float, default=120.0, help="wall-clock budget of the training loop (s)")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--device", default="cuda")
    p.add_argument("--preset", default=None, help="the wrapper preset (default: step_graph on CUDA, else masked)")
    p.add_argument("--seed", type=int, default=42, help="mjlab's Go1 seed by default")
    p.add_argument("--max-episode-steps", type=int, default=None, help="the truncation horizon (default: 1000)")
    p.add_argument("--max-iterations", type=int, default=None, help="also stop after this many iterations")
    p.add_argument("--stock", action="store_true", help="rsl_rl's OnPolicyRunner and PPO (V(s_t) bootstrap)")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")), help="output folder ($OUT)")
    p.add_argument("--name", default="rsl_rl_go1.json", help="JSON file name")
    p.add_argument("--reference", type=Path, default=None, help="mjlab's training-curve JSON, to plot against")
    return p


def _versions() -> dict[str, str]:
    """The bench's versions (python, torch, gymnasium, warp, mujoco, the GPU) and rsl_rl's."""
    versions = env_versions()
    with contextlib.suppress(metadata.PackageNotFoundError):
        versions["rsl-rl-lib"] = metadata.version("rsl-rl-lib")
    return versions


def _write(path: Path, record: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Train for ``--budget-s`` seconds, writing the JSON after every iteration; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.num_envs < 1:
        parser.error(f"--num-envs must be >= 1, got {args.num_envs}")
    if not args.budget_s > 0:
        parser.error(f"--budget-s must be > 0, got {args.budget_s}")
    if args.max_iterations is not None and args.max_iterations < 1:
        parser.error(f"--max-iterations must be >= 1, got {args.max_iterations}")
    if args.max_episode_steps is not None and args.max_episode_steps < 1:
        parser.error(f"--max-episode-steps must be >= 1, got {args.max_episode_steps}")
    if args.reference is not None and not args.reference.is_file():
        parser.error(f"--reference must be an existing training-curve JSON, got {args.reference}")
    preset = args.preset or ("step_graph" if args.device.startswith("cuda") else "masked_persistent")

    torch.manual_seed(args.seed)
    cfg = mjlab_go1_cfg(args.stock)
    recorded_cfg = copy.deepcopy(cfg)  # rsl_rl 5.4 pops keys from the config it is given
    setup_start = time.perf_counter()
    horizon = {} if args.max_episode_steps is None else {"max_episode_steps": args.max_episode_steps}
    inner = gym.make_vec(ENV_ID, args.num_envs, vectorization_mode="vector_entry_point", device=args.device, **horizon)
    wrapped = FixedShapeAutoresetVectorEnv(inner, preset, reset_terms={"episode": EpisodeStatistics()})
    warm_up(wrapped, args.seed)  # kernels compiled and the step graph captured before the clock starts
    env = TermLoggingVecEnv(wrapped, seed=args.seed)  # the training's first reset
    runner_class = OnPolicyRunner if args.stock else SyncFreeOnPolicyRunner
    runner = runner_class(env, cfg, log_dir=None, device=args.device)
    stats = wrapped.reset_terms["episode"]
    steps_per_iteration = cfg["num_steps_per_env"] * args.num_envs
    record: dict[str, Any] = {
        "trainer": f"rsl_rl {runner_class.__name__} through gym_graphreset.integrations.rsl_rl (mjlab's Go1 PPO)",
        "task": ENV_ID,
        "num_envs": args.num_envs,
        "device": args.device,
        "preset": preset,
        "budget_s": args.budget_s,
        "versions": _versions(),
        "rl_cfg": recorded_cfg,
        "fields": {
            "wall_s": "seconds since the training loop started",
            "track_lin_vel": "Episode_Reward/track_linear_velocity over the iteration's finished episodes",
            "track_ang_vel": "Episode_Reward/track_angular_velocity over the iteration's finished episodes",
            "episode_length": "mean length (steps) of the iteration's finished episodes",
            "mean_reward": "mean raw return of the iteration's finished episodes",
        },
        "rows": [],
        "setup_s": time.perf_counter() - setup_start,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / args.name
    bar = tqdm(total=int(args.budget_s), desc="Go1 rsl_rl", unit="s")
    start = time.perf_counter()
    it = 0
    while True:
        runner.learn(1, init_at_random_ep_len=it == 0)
        summary = stats.summary()  # one host read each
        terms = env.terms.summary()
        wall = time.perf_counter() - start
        ended = summary["episodes"] > 0
        row = {
            "iteration": it,
            "wall_s": wall,
            "env_steps": (it + 1) * steps_per_iteration,
            "track_lin_vel": terms["track_linear_velocity"],
            "track_ang_vel": terms["track_angular_velocity"],
            "episode_length": summary["mean_length"] if ended else None,
            "mean_reward": summary["mean_return"] if ended else None,
            "episodes": summary["episodes"],
        }
        record["rows"].append(row)
        _write(path, record)
        it += 1
        bar.update(min(int(wall), int(args.budget_s)) - bar.n)
        bar.set_postfix(track_lin=row["track_lin_vel"], len=row["episode_length"], it=it)
        if wall >= args.budget_s or (args.max_iterations is not None and it >= args.max_iterations):
            record["stopped"] = "budget" if wall >= args.budget_s else "max_iterations"
            break
    bar.close()
    record["train_s"] = time.perf_counter() - start
    record["env_steps_per_s"] = it * steps_per_iteration / record["train_s"]
    _write(path, record)
    last = record["rows"][-1]
    print(
        f"rsl_rl Go1 x{args.num_envs} ({preset}): {it} iterations, {last['env_steps']:,} env steps in "
        f"{record['train_s']:.1f} s ({record['env_steps_per_s']:,.0f}/s, stopped: {record['stopped']}); "
        f"last track_lin_vel {last['track_lin_vel']}, episode_length {last['episode_length']}; wrote {path}"
    )
    if args.reference is not None:
        png = path.with_suffix(".png")
        runs = {"mjlab": args.reference, "gym_graphreset + rsl_rl": path}
        title = f"Go1 flat velocity, {args.num_envs} envs: mjlab vs gym_graphreset, both rsl_rl PPO"
        if plot_training_curves(runs, png, title, reference="mjlab"):
            print(f"wrote {png}")
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
