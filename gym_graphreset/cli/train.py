"""``train``: rsl_rl's PPO on a registered task, with its config as flags, a run folder, a budget, resume and ONNX.

``gym-graphreset train <task> [flags]`` trains with rsl_rl's ``OnPolicyRunner`` on the task in
:class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` (the whole-step CUDA graph on CUDA, the masked path on the
CPU), through :class:`~gym_graphreset.integrations.rsl_rl.RslRlVecEnv`. The learner's settings are the task's
(:func:`~gym_graphreset.integrations.rsl_rl_cfg.mjlab_ppo_cfg`: mjlab's for the shipped legged tasks). Every field of
the run (:class:`TrainCfg`), of the learner (``--agent.*``) and, for a task-layer task, of its
:class:`~gym_graphreset.managers.task_cfg.TaskCfg` (``--env.*``) is a flag, parsed by `tyro <https://brentyi.github.io/tyro/>`_.

The run folder (``--run-dir``, default ``runs/<task>/<date>_<time>``) holds ``config.json`` (the resolved
settings), rsl_rl's checkpoints ``model_<iteration>.pt`` (every ``--agent.save-interval`` iterations and at the
end, each written once; their ``infos`` name the task, so ``play`` and ``export`` rebuild the policy), the ONNX
export of the last one (``policy.onnx``, when ``onnx`` is installed) and rsl_rl's TensorBoard scalars.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import importlib.util
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gym_graphreset.cli.args import resolve_device, unregistered_env, usage_error
from gym_graphreset.integrations.rsl_rl_cfg import ALGORITHMS, RslRlRunnerCfg, mjlab_ppo_cfg
from gym_graphreset.managers.task_cfg import TaskCfg

HELP = "train rsl_rl's PPO on a registered task (mjlab's settings for the legged tasks); every setting a flag"

CONFIG_FILE = "config.json"
"""The resolved settings of a run, in its folder."""


@dataclass(kw_only=True)
class TrainCfg:
    """``gym-graphreset train <task>``: the run's settings; ``--agent.*`` the learner's."""

    agent: RslRlRunnerCfg
    """rsl_rl's runner, networks and PPO settings (``--agent.max-iterations``: the iteration budget)."""
    num_envs: int = 4096
    """Worlds stepped in parallel."""
    device: str = "auto"
    """``cuda``, ``cuda:N``, ``cpu`` or ``auto`` (CUDA when there is one)."""
    preset: Literal["selected", "masked", "masked_persistent", "reset_graph", "step_graph"] | None = None
    """The wrapper's preset (default: ``step_graph`` on CUDA, ``masked_persistent`` on the CPU)."""
    max_time: float | None = None
    """A wall-clock budget in seconds: the run stops after the first iteration that ends past it."""
    run_dir: Path | None = None
    """The run folder (default: ``runs/<task>/<date>_<time>``); one with checkpoints is refused."""
    resume: Path | None = None
    """A checkpoint, or a run folder (its last checkpoint), to go on from; the iterations count on from it."""
    runner: Literal["stock", "syncfree"] = "stock"
    """rsl_rl's ``OnPolicyRunner`` (as mjlab) or the library's ``SyncFreeOnPolicyRunner`` (no host read per step)."""
    learner: Literal["stock", "fast"] = "stock"
    """``stock``: the algorithm of ``--agent.algorithm.class-name`` (rsl_rl's ``PPO``, as mjlab). ``fast``: ``FastPPO``,
    rsl_rl's PPO loss and settings with the final-observation bootstrap and an update that makes no host read per
    minibatch (a CUDA graph of the minibatch step on CUDA); it replaces ``PPO`` or ``FinalObsPPO``."""
    onnx: bool = True
    """Write ``policy.onnx`` (the last checkpoint's deterministic policy) at every save, when ``onnx`` is installed."""
    max_episode_steps: int | None = None
    """The truncation horizon (default: the task's)."""


@dataclass(kw_only=True)
class TaskTrainCfg(TrainCfg):
    """``gym-graphreset train <task>`` of a task-layer task: also its task config as ``--env.*``."""

    env: TaskCfg
    """The task: every term, weight and setting (``--env.episode-length-s 10``, ``--env.rewards.<term>.weight``)."""


class _Stop(Exception):
    """Raised after the last iteration's log: the run's budget is spent."""


def task_id(name: str) -> str:
    """``name``, or ``gym_graphreset/<name>`` when only that is registered (``Go1-Velocity-Flat-v0`` works)."""
    import gymnasium as gym

    if name not in gym.registry and ":" not in name and f"gym_graphreset/{name}" in gym.registry:
        return f"gym_graphreset/{name}"
    return name


def main(argv: Sequence[str]) -> int:
    """``gym-graphreset train <task> [flags]``; returns the exit status."""
    argv = list(argv)
    if not argv or argv[0].startswith("-"):
        usage = "usage: gym-graphreset train <task> [flags]  (gym-graphreset train <task> --help lists the flags)"
        if argv and argv[0] in ("-h", "--help"):
            print(f"{usage}\n\n{HELP}.\n<task>: a registered env id, e.g. Go1-Velocity-Flat-v0.")
            return 0
        return usage_error(f"train needs a task first, e.g. Go1-Velocity-Flat-v0\n{usage}")
    task = task_id(argv[0])
    if problem := unregistered_env(task):
        return usage_error(problem.replace("--env-id", "the task", 1))
    try:
        import tyro
    except ImportError:
        return usage_error("train needs tyro and rsl-rl-lib: pip install 'gym_graphreset[rsl_rl]'")
    from gym_graphreset.registration import task_cfg

    agent = mjlab_ppo_cfg(task)
    env_cfg = task_cfg(task)
    default: TrainCfg = TrainCfg(agent=agent) if env_cfg is None else TaskTrainCfg(agent=agent, env=env_cfg)
    cfg = tyro.cli(
        type(default), default=default, args=argv[1:], prog=f"gym-graphreset train {argv[0]}", description=HELP
    )
    return train(task, cfg)


def _latest_checkpoint(folder: Path) -> Path | None:
    """The checkpoint of the highest iteration in ``folder`` (``model_<it>.pt``), or ``None``."""
    found = [(int(p.stem[6:]), p) for p in folder.glob("model_*.pt") if p.stem[6:].isdigit()]
    return max(found)[1] if found else None


def checkpoint_path(path: Path) -> Path | str:
    """``path`` itself (a file), the last checkpoint of a run folder, or why neither."""
    if path.is_dir():
        latest = _latest_checkpoint(path)
        return latest if latest is not None else f"{str(path)!r} holds no checkpoint (model_<iteration>.pt)"
    if not path.is_file():
        return f"{str(path)!r} is neither a checkpoint file nor a run folder"
    return path


def with_learner(agent: RslRlRunnerCfg, learner: str) -> RslRlRunnerCfg | str:
    """``agent`` with the algorithm that ``--learner`` selects, or why it cannot be selected.

    ``stock`` keeps ``agent``; ``fast`` puts ``FastPPO`` in place of rsl_rl's ``PPO`` or ``FinalObsPPO``.
    """
    if learner == "stock":
        return agent
    if learner != "fast":
        return f"--learner must be 'stock' or 'fast', got {learner!r}"
    name = agent.algorithm.class_name
    if name not in (ALGORITHMS["ppo"], ALGORITHMS["finalobs"], ALGORITHMS["fast"]):
        return (
            f"--learner fast replaces rsl_rl's PPO or FinalObsPPO with FastPPO, but --agent.algorithm.class-name is "
            f"{name!r}: leave one of them out"
        )
    algorithm = dataclasses.replace(agent.algorithm, class_name=ALGORITHMS["fast"])
    return dataclasses.replace(agent, algorithm=algorithm)


def _problem(cfg: TrainCfg) -> str | None:
    """What is wrong with the settings (before anything is built), or ``None``."""
    agent = cfg.agent
    checks = {
        "--num-envs": cfg.num_envs,
        "--agent.max-iterations": agent.max_iterations,
        "--agent.num-steps-per-env": agent.num_steps_per_env,
        "--agent.save-interval": agent.save_interval,
        "--agent.algorithm.num-mini-batches": agent.algorithm.num_mini_batches,
        "--agent.algorithm.num-learning-epochs": agent.algorithm.num_learning_epochs,
    }
    for flag, value in checks.items():
        if value < 1:
            return f"{flag} must be >= 1, got {value}"
    if cfg.max_episode_steps is not None and cfg.max_episode_steps < 1:
        return f"--max-episode-steps must be >= 1, got {cfg.max_episode_steps}"
    if cfg.max_time is not None and not (math.isfinite(cfg.max_time) and cfg.max_time > 0):
        return f"--max-time must be a finite number of seconds > 0, got {cfg.max_time}"
    if not (math.isfinite(agent.algorithm.learning_rate) and agent.algorithm.learning_rate > 0):
        return f"--agent.algorithm.learning-rate must be a finite number > 0, got {agent.algorithm.learning_rate}"
    if isinstance(problem := with_learner(agent, cfg.learner), str):
        return problem
    if cfg.run_dir is not None:
        if cfg.run_dir.exists() and not cfg.run_dir.is_dir():
            return f"--run-dir {str(cfg.run_dir)!r} is a file"
        if cfg.run_dir.is_dir() and _latest_checkpoint(cfg.run_dir) is not None:
            return f"--run-dir {str(cfg.run_dir)!r} already holds checkpoints: give a new folder (--resume reads it)"
    return None


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: dataclasses and mappings as objects, sequences as lists, anything else its repr."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def train(task: str, cfg: TrainCfg) -> int:
    """Train ``task`` with ``cfg``: the run folder written, the exit status returned."""
    if problem := _problem(cfg):
        return usage_error(problem)
    device = resolve_device(cfg.device)
    if isinstance(device, str):
        return usage_error(device)
    resume = None if cfg.resume is None else checkpoint_path(cfg.resume)
    if isinstance(resume, str):
        return usage_error(f"--resume {resume}")
    try:
        import gymnasium as gym
        import torch
        from rsl_rl.runners import OnPolicyRunner

        from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
        from gym_graphreset.core.terms import EpisodeStatistics
        from gym_graphreset.integrations.common import RewardTermLog
        from gym_graphreset.integrations.deployment import deployment_of
        from gym_graphreset.integrations.rsl_rl import RslRlVecEnv, SyncFreeOnPolicyRunner
        from gym_graphreset.managers.manager_based_env import ManagerBasedEnv
    except ImportError as exc:
        return usage_error(f"train needs rsl-rl-lib ({exc}): pip install 'gym_graphreset[rsl_rl]'")

    agent = with_learner(cfg.agent, cfg.learner)
    if isinstance(agent, str):  # _problem said so already
        return usage_error(agent)
    preset = cfg.preset or ("step_graph" if device.type == "cuda" else "masked_persistent")
    env_kwargs: dict[str, Any] = {}
    if cfg.max_episode_steps is not None:
        env_kwargs["max_episode_steps"] = cfg.max_episode_steps
    task_kwargs: dict[str, Any] = {"cfg": cfg.env} if isinstance(cfg, TaskTrainCfg) else {}
    torch.manual_seed(agent.seed)
    inner = gym.make_vec(
        task, cfg.num_envs, vectorization_mode="vector_entry_point", device=device, **env_kwargs, **task_kwargs
    )
    wrapped = FixedShapeAutoresetVectorEnv(inner, preset, reset_terms={"episode": EpisodeStatistics()})
    terms = RewardTermLog.for_env(wrapped) is not None  # mjlab's Episode_Reward/<term> in the log
    env = RslRlVecEnv(wrapped, seed=agent.seed, episode_reward_every=agent.num_steps_per_env if terms else None)
    groups = set(env.get_observations().keys())
    for network, wanted in agent.obs_groups.items():
        if missing := sorted(set(wanted) - groups):
            env.close()
            return usage_error(
                f"--agent.obs-groups: the {network} reads {missing}, which {task} does not observe "
                f"(its groups: {sorted(groups)})"
            )

    run_dir = cfg.run_dir or Path("runs") / task.split("/")[-1] / datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    rl_cfg = agent.to_dict()
    infos = {"env_id": task, "env_kwargs": env_kwargs, "rl_cfg": rl_cfg}
    if isinstance(inner.unwrapped, ManagerBasedEnv):  # what a robot deployment needs, in every checkpoint
        infos["deployment"] = deployment_of(inner.unwrapped, agent.obs_groups.get("actor", ["policy"])).as_dict()
    settings = {
        f.name: jsonable(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in ("agent", "env")
    }
    record = {
        "task": task,
        "train": {**settings, "device": str(device), "preset": preset},
        "agent": rl_cfg,
        "env": jsonable(cfg.env) if isinstance(cfg, TaskTrainCfg) else None,
        "env_kwargs": env_kwargs,
        "resumed_from": None if resume is None else str(resume),
    }
    (run_dir / CONFIG_FILE).write_text(json.dumps(record, indent=1))
    onnx = cfg.onnx and _onnx_available()

    base = SyncFreeOnPolicyRunner if cfg.runner == "syncfree" else OnPolicyRunner

    class Runner(base):  # type: ignore[valid-type,misc]
        """The runner, saving the task's ``infos`` in every checkpoint and the ONNX policy beside it."""

        def save(self, path: str, infos: dict | None = None) -> None:
            super().save(path, infos={**infos_of_run, **(infos or {})})
            if onnx:
                from gym_graphreset.integrations.export import export_onnx, load_policy

                export_onnx(load_policy(path), run_dir / "policy.onnx")

    infos_of_run = infos
    runner = Runner(env, copy.deepcopy(rl_cfg), log_dir=str(run_dir), device=str(device))
    if resume is not None:
        try:
            runner.load(str(resume), map_location=str(device))
        except (RuntimeError, KeyError) as exc:
            env.close()
            return usage_error(f"--resume {str(resume)!r} does not fit this task and network: {exc}")
        runner.current_learning_iteration += 1  # the saved iteration was done: go on with the next
        print(f"resumed from {resume}: iterations count on from {runner.current_learning_iteration}")
    first = runner.current_learning_iteration
    iterations = agent.max_iterations
    log = runner.logger.log
    start = time.perf_counter()

    def log_and_stop(**kwargs: Any) -> None:
        """rsl_rl's log, its total the budget's; then stop once the budget is spent."""
        it = kwargs["it"]
        done = it + 1 - first
        elapsed = time.perf_counter() - start
        out_of_time = cfg.max_time is not None and elapsed >= cfg.max_time
        stop = done >= iterations or out_of_time
        if cfg.max_time is not None:  # rsl_rl's "iteration i/total" and ETA: the iterations the time leaves
            left = 0 if stop else math.ceil((cfg.max_time - elapsed) / (elapsed / done))
            kwargs["total_it"] = min(first + iterations, it + 1 + left)
        log(**kwargs)
        if stop:
            raise _Stop

    runner.logger.log = log_and_stop
    with contextlib.suppress(_Stop):
        runner.learn(iterations, init_at_random_ep_len=True)
    last = run_dir / f"model_{runner.current_learning_iteration}.pt"
    runner.save(str(last))  # rsl_rl's own periodic and final saves are skipped at the stop: written once
    runner.logger.stop_logging_writer()
    writer = runner.logger.writer
    if writer is not None and hasattr(writer, "close"):
        writer.close()
    env.close()
    done = runner.current_learning_iteration + 1 - first
    print(f"trained {task} for {done} iteration(s) in {time.perf_counter() - start:.1f} s; wrote {last}")
    print(f"play it: gym-graphreset play --checkpoint {run_dir}")
    return 0


def _onnx_available() -> bool:
    """Whether ONNX export can run (``onnx`` and ``onnxscript``); a notice when it cannot."""
    if importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxscript") is None:
        print("onnx is not installed (pip install 'gym_graphreset[export]'): no policy.onnx written")
        return False
    return True


def task_of_run(checkpoint: Path) -> str | None:
    """The task recorded in the run folder of ``checkpoint`` (its ``config.json``), or ``None``."""
    config = checkpoint.parent / CONFIG_FILE
    if not config.is_file():
        return None
    with contextlib.suppress(ValueError, OSError):
        task = json.loads(config.read_text()).get("task")
        return task if isinstance(task, str) else None
    return None
