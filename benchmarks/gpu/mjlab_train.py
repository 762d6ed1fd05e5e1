"""mjlab's own PPO training of a task for a fixed wall-clock budget, logged as JSON (run in mjlab's interpreter).

The reference curve for "how fast does a policy learn": an mjlab task (default ``Mjlab-Velocity-Flat-Unitree-Go1``;
also the G1 velocity, rough terrain and G1 tracking tasks) trained exactly as ``mjlab.scripts.train`` does it (its
env config, its rsl_rl PPO config, e.g. ``tasks/velocity/config/go1/rl_cfg.py``, its runner class, random initial
episode lengths, and its seeding:
``--seed`` (default: the rl config's, 42) goes to both ``rl_cfg.seed`` and ``env_cfg.seed``, as the train script
sets ``cfg.agent.seed = cfg.env.seed = seed`` on one GPU; the env seeds Python, NumPy, Warp and torch), with two
changes that do not touch the learning: rsl_rl's log writer is replaced by one that records each
iteration's scalars, and training stops at the first iteration that ends past ``--budget-s``
(checkpoints are not written). A tracking task (``Mjlab-Tracking-Flat-Unitree-G1``) needs ``--motion-file``,
the clip its ``motion`` command tracks (mjlab's npz, as ``mjlab.scripts.train`` takes from its registry).

Each row of the JSON (rewritten after every iteration, so a killed run keeps its curve):

- ``wall_s``: seconds since the training loop started (env built and kernels compiled before it);
- ``env_steps``: env steps collected so far (iterations x ``num_steps_per_env`` x ``num_envs``);
- ``track_lin_vel``: mjlab's ``Episode_Reward/track_linear_velocity``, the weighted, dt-scaled episode sum
  of the linear-velocity tracking term divided by the episode's maximum length in seconds, averaged over
  the rows that reset at a step, then (rsl_rl's logger) over the iteration's steps with resets (``None``
  when none reset);
- ``track_ang_vel``: the same for ``track_angular_velocity``;
- ``terrain_levels``, ``terrain_levels_max`` (rough terrain): ``Curriculum/terrain_levels/mean`` and ``/max``,
  the mean and highest level over the envs after each step's resets, averaged over the iteration's steps
  with resets;
- ``error_body_pos``, ``error_body_rot``, ``error_anchor_pos``, ``error_anchor_rot``, ``error_joint_pos``,
  ``error_joint_vel`` (tracking): ``Metrics/motion/<key>``, at each step with resets the reset rows' mean of the
  motion command's metric as its last update left it, averaged over the iteration's steps with resets;
- ``episode_reward`` and ``metrics``: every ``Episode_Reward/...``, and every ``Metrics/...`` and
  ``Curriculum/...`` scalar of the iteration;
- ``episode_length``: rsl_rl's mean length (steps) of the last 100 finished episodes (``None`` before one ends);
- ``mean_reward``, ``collect_s``, ``learn_s``, ``iteration``.

Each field is ``None`` where the task has no such entry or nothing reset in the iteration. The record also
holds ``seed``, ``versions`` (mjlab, mujoco, mujoco-warp, rsl-rl-lib, torch, the GPU), ``rsl_rl_lib``
(rsl-rl-lib's version, as ``benchmarks/gpu/rsl_rl_go1.py`` records it) and, for tracking, ``motion_file``
and ``motion_sha256``.

Usage (imports only the standard library, torch, mjlab and rsl_rl)::

    python benchmarks/gpu/mjlab_train.py --budget-s 300 --num-envs 4096 --seed 42 --out "$OUT"
    python benchmarks/gpu/mjlab_train.py --task Mjlab-Tracking-Flat-Unitree-G1 --motion-file clip.npz ...
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

DEFAULT_TASK = "Mjlab-Velocity-Flat-Unitree-Go1"
TAGS = {
    "track_lin_vel": "Episode_Reward/track_linear_velocity",
    "track_ang_vel": "Episode_Reward/track_angular_velocity",
    "terrain_levels": "Curriculum/terrain_levels/mean",
    "terrain_levels_max": "Curriculum/terrain_levels/max",
    "error_body_pos": "Metrics/motion/error_body_pos",
    "error_body_rot": "Metrics/motion/error_body_rot",
    "error_anchor_pos": "Metrics/motion/error_anchor_pos",
    "error_anchor_rot": "Metrics/motion/error_anchor_rot",
    "error_joint_pos": "Metrics/motion/error_joint_pos",
    "error_joint_vel": "Metrics/motion/error_joint_vel",
    "episode_length": "Train/mean_episode_length",
    "mean_reward": "Train/mean_reward",
}
"""JSON row field -> the rsl_rl scalar tag it is read from (``rsl_rl_go1.py``'s ``MJLAB_FIELDS`` are these)."""


class BudgetSpent(Exception):
    """Raised after the iteration that ends past the wall-clock budget (its row is already written)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Train an mjlab task with its own PPO for a wall-clock budget.")
    parser.add_argument("--task", default=DEFAULT_TASK, help=f"a registered mjlab task id (default: {DEFAULT_TASK})")
    parser.add_argument("--num-envs", type=int, default=4096, help="number of envs (default: 4096)")
    parser.add_argument("--budget-s", type=float, default=300.0, help="wall-clock budget in seconds (default: 300)")
    parser.add_argument("--max-iterations", type=int, default=None, help="stop earlier (default: the rl config's)")
    parser.add_argument(
        "--seed", type=int, default=None, help="rl_cfg.seed and env_cfg.seed, as mjlab's train script (default: 42)"
    )
    parser.add_argument(
        "--motion-file", type=Path, default=None, help="a tracking task's clip (mjlab's npz; required there)"
    )
    parser.add_argument("--device", default="cuda:0", help="torch device (default: cuda:0)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")), help="output folder ($OUT)")
    parser.add_argument("--name", default="mjlab_train.json", help="JSON file name (default: mjlab_train.json)")
    return parser


def _versions(torch: Any) -> dict[str, str]:
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for dist in ("mjlab", "mujoco", "mujoco-warp", "warp-lang", "rsl-rl-lib"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    if torch.cuda.is_available():
        versions["gpu"] = torch.cuda.get_device_name()
    return versions


def _recording_writer(log_writer_base: type) -> type:
    """An rsl_rl ``LogWriter`` that keeps each iteration's scalars in memory (no TensorBoard, no W&B)."""

    class RecordingWriter(log_writer_base):
        def __init__(self, log_dir: str, **_: Any) -> None:
            self.log_dir = log_dir
            self.scalars: dict[int, dict[str, float]] = {}

        def add_scalar(self, tag: str, scalar_value: float, global_step: int) -> None:
            self.scalars.setdefault(int(global_step), {})[tag] = float(scalar_value)

    return RecordingWriter


def _budgeted_runner(base: type) -> type:
    """``base`` (mjlab's runner class for the task) calling ``on_iteration(it)`` after each iteration's log."""

    class BudgetedRunner(base):
        def __init__(self, *args: Any, on_iteration: Callable[[Any, int], None], **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            log = self.logger.log

            def log_then_record(**kw: Any) -> None:
                log(**kw)
                on_iteration(self, int(kw["it"]))

            self.logger.log = log_then_record

        def save(self, path: str, infos: Any = None) -> None:
            """No checkpoints: this run measures learning against wall-clock only."""

    return BudgetedRunner


def apply_seed(env_cfg: Any, rl_cfg: Any, seed: int | None) -> int:
    """Seed as ``mjlab.scripts.train`` does on one GPU (rank 0): ``rl_cfg.seed = env_cfg.seed = seed``.

    ``seed=None`` keeps the rl config's (42 for Go1). Returns the seed used.
    """
    if seed is not None:
        rl_cfg.seed = seed
    env_cfg.seed = rl_cfg.seed
    return int(rl_cfg.seed)


def set_motion_file(env_cfg: Any, task: str, motion_file: Path | None) -> dict[str, Any]:
    """Give a tracking task's ``motion`` command its clip, as ``mjlab_runner.py`` does; returns what to record.

    Raises:
        ValueError: a clip for a task without a motion command, or none for a task with one.
    """
    commands = env_cfg.commands if isinstance(env_cfg.commands, dict) else {}
    motion = commands.get("motion")
    if motion is None:
        if motion_file is not None:
            raise ValueError(f"--motion-file given, but {task} has no motion command (a tracking task has one)")
        return {}
    if motion_file is None:
        raise ValueError(f"{task} tracks a clip: give --motion-file (an npz in mjlab's format)")
    motion.motion_file = str(motion_file.resolve())
    return {"motion_file": motion.motion_file, "motion_sha256": hashlib.sha256(motion_file.read_bytes()).hexdigest()}


def row_from_scalars(it: int, wall: float, steps_per_iteration: int, scalars: dict[str, float]) -> dict[str, Any]:
    """One JSON row from an iteration's logged scalars (``{tag: value}``): the :data:`TAGS` fields and the rest."""
    row: dict[str, Any] = {"iteration": it, "wall_s": wall, "env_steps": (it + 1) * steps_per_iteration}
    row |= {field: scalars.get(tag) for field, tag in TAGS.items()}
    row["episode_reward"] = {t: v for t, v in scalars.items() if t.startswith("Episode_Reward/")}
    row["metrics"] = {t: v for t, v in scalars.items() if t.startswith(("Metrics/", "Curriculum/"))}
    return row | {"collect_s": scalars.get("Perf/collection_time"), "learn_s": scalars.get("Perf/learning_time")}


def _write(path: Path, record: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Train, writing the JSON after every iteration; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.num_envs < 1:
        parser.error(f"--num-envs must be >= 1, got {args.num_envs}")
    if args.budget_s <= 0:
        parser.error(f"--budget-s must be > 0, got {args.budget_s}")
    if args.max_iterations is not None and args.max_iterations < 1:
        parser.error(f"--max-iterations must be >= 1, got {args.max_iterations}")
    if args.motion_file is not None and not args.motion_file.is_file():
        parser.error(f"--motion-file must be a clip (mjlab's npz), got {args.motion_file}")

    import mjlab.tasks  # noqa: F401  (registers the tasks)
    import torch
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import MjlabOnPolicyRunner, RslRlVecEnvWrapper
    from mjlab.tasks.registry import load_env_cfg, load_rl_cfg, load_runner_cls
    from mjlab.utils.torch import configure_torch_backends
    from rsl_rl.utils.log_writer import LogWriter

    setup_start = time.perf_counter()
    configure_torch_backends()  # as mjlab's train script does
    env_cfg, rl_cfg = load_env_cfg(args.task), load_rl_cfg(args.task)
    env_cfg.scene.num_envs = args.num_envs
    try:
        motion = set_motion_file(env_cfg, args.task, args.motion_file)
    except ValueError as exc:
        parser.error(str(exc))
    apply_seed(env_cfg, rl_cfg, args.seed)
    iterations = args.max_iterations or rl_cfg.max_iterations
    agent_cfg = asdict(rl_cfg)
    versions = _versions(torch)
    record: dict[str, Any] = {
        "trainer": "mjlab + rsl_rl OnPolicyRunner (the task's own runner class and PPO config)",
        "task": args.task,
        "model": "the task's own (mjlab's asset_zoo/robots/unitree_<robot>/xmls/<robot>.xml)",
        **motion,
        "num_envs": args.num_envs,
        "device": args.device,
        "budget_s": args.budget_s,
        "max_iterations": iterations,
        "seed": rl_cfg.seed,
        "versions": versions,
        "rsl_rl_lib": versions.get("rsl-rl-lib"),
        "rl_cfg": json.loads(json.dumps(agent_cfg, default=str)),
        "logger": "an in-memory rsl_rl LogWriter replaces rl_cfg's logger; no checkpoints",
        "fields": {"wall_s": "seconds since the training loop started", **TAGS},
        "rows": [],
    }
    env = RslRlVecEnvWrapper(ManagerBasedRlEnv(env_cfg, device=args.device), clip_actions=rl_cfg.clip_actions)
    writer_cls = _recording_writer(LogWriter)
    agent_cfg["logger"] = {"class_name": writer_cls}
    runner_cls = _budgeted_runner(load_runner_cls(args.task) or MjlabOnPolicyRunner)
    steps_per_iteration = rl_cfg.num_steps_per_env * args.num_envs
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / args.name
    _write(path, record)  # before the first iteration: a run killed early still names its settings
    start = 0.0

    def on_iteration(runner: Any, it: int) -> None:
        wall = time.perf_counter() - start
        scalars = runner.logger.writer.scalars.pop(it, {})
        record["rows"].append(row_from_scalars(it, wall, steps_per_iteration, scalars))
        _write(path, record)
        if wall >= args.budget_s:
            raise BudgetSpent

    with tempfile.TemporaryDirectory(prefix="mjlab_train_") as log_dir:
        runner = runner_cls(env, agent_cfg, log_dir, args.device, on_iteration=on_iteration)
        record["setup_s"] = time.perf_counter() - setup_start
        start = time.perf_counter()
        try:
            runner.learn(num_learning_iterations=iterations, init_at_random_ep_len=True)
            record["stopped"] = "max_iterations"
        except BudgetSpent:
            record["stopped"] = "budget"
    record["train_s"] = time.perf_counter() - start
    _write(path, record)
    last = record["rows"][-1] if record["rows"] else {}
    print(
        f"mjlab {args.task} x{args.num_envs} seed {rl_cfg.seed}: {len(record['rows'])} iterations, "
        f"{last.get('env_steps', 0):,} env steps in {record['train_s']:.1f} s (stopped: {record['stopped']}); "
        f"last {', '.join(f'{k} {last[k]}' for k in TAGS if last.get(k) is not None) or 'scalars: none'}; "
        f"wrote {path}"
    )
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
