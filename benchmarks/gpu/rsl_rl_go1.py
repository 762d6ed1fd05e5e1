"""rsl_rl's OnPolicyRunner on Go1-Velocity-Flat-v0 with mjlab's Go1 PPO settings, for a wall-clock budget.

``--env-id`` also takes the G1 velocity task, the rough Go1 and G1 tasks (each row then holds the terrain
level, mean and highest over the envs: the curriculum's progress) and G1 motion tracking
(``G1-Tracking-Flat-v0``, with mjlab's tracking PPO config: entropy coefficient 0.005; ``--motion-file`` picks
the clip, default the package's).

    python benchmarks/gpu/rsl_rl_go1.py --budget-s 120 --out "$OUT" --model-xml /path/to/mjlab/go1.xml \
        --reference benchmarks/results/h200-mjlab-train-Go1-4096.json
    python benchmarks/gpu/rsl_rl_go1.py --device cpu --num-envs 8 --budget-s 20 --out /tmp/go1
    python benchmarks/gpu/rsl_rl_go1.py --algorithm finalobs --runner syncfree ...   # what the library adds

The learning side is mjlab's (the task's rl config in mjlab 1.6, e.g. ``tasks/velocity/config/go1/rl_cfg.py``,
copied in :func:`mjlab_go1_cfg`): 512-256-128 ELU actor and critic, normalised observations,
initial std 1, 24 steps per env, 5 epochs of 4 minibatches, lr 1e-3 with the adaptive KL schedule (target
0.01), entropy 0.01 (G1 tracking: 0.005), gamma 0.99, lambda 0.95, clip 0.2, max grad norm 1, random initial
episode lengths.
By default the learner is stock rsl_rl, as mjlab runs it: ``PPO`` (``--algorithm ppo``) and
``OnPolicyRunner`` (``--runner stock``, with its per-step NaN check). ``--algorithm finalobs`` picks
:class:`~gym_graphreset.integrations.rsl_rl.FinalObsPPO` (time-outs bootstrapped from the true final
observation), ``--runner syncfree`` :class:`~gym_graphreset.integrations.rsl_rl.SyncFreeOnPolicyRunner`.
The env side is the library's: the task under the whole-step CUDA graph (``--preset step_graph``), through
:class:`~gym_graphreset.integrations.rsl_rl.RslRlVecEnv`; ``--model-xml`` builds it on another Go1 MJCF
(mjlab's ``go1.xml``; default: the library's primitive-geom model), ``--keep-sensors`` keeps that file's own
sensors (mjlab computes them every substep; the task reads none of them, so by default they are removed) and
``--forward-before-obs`` runs MuJoCo Warp's forward before the observations as mjlab's step does in every task
(``full``: the whole forward, mjlab's work; ``declared``: only the passes the observations, commands and
recorders read, the same values with less work; ``off``, the default: none, the task's own setting, so the
observations and the commands' metrics read the bodies as the last physics substep left them).

The JSON (``<out>/<name>``, rewritten after every iteration) has the rows of ``benchmarks/gpu/mjlab_train.py``
(:func:`gym_graphreset.bench.plotting.load_training_curve`): ``wall_s`` since the training loop started (as for
mjlab, the env is built, its kernels compiled and its step captured before it: ``setup_s``), ``env_steps``,
``track_lin_vel`` / ``track_ang_vel``: mjlab's ``Episode_Reward/track_linear_velocity`` /
``track_angular_velocity`` computed as mjlab's env and rsl_rl's logger compute them (at each step with resets,
the mean over the reset rows of the weighted, dt-scaled episode sum over the configured episode length in
seconds; then the mean over the iteration's steps with resets; ``None`` when none reset), the same pooled
over the iteration's finished episodes (``track_lin_vel_episodes``, ``track_ang_vel_episodes``: the figure
this script reported before), ``episode_length`` and ``mean_reward`` (the mean length and raw return of
those episodes), ``episode_reward``: every term's ``Episode_Reward/<term>`` (the tracking task's
``motion_*`` terms have no ``track_*`` counterpart), ``metrics``: mjlab's ``Metrics/<command>/<key>`` and
``Curriculum/<term>/mean|max`` where the task has them, as mjlab's env and rsl_rl's logger compute them
(:class:`~gym_graphreset.integrations.common.ResetMetricLog`), some also as fields of their own
(:data:`MJLAB_FIELDS`: ``error_body_pos``... on motion tracking, ``terrain_levels`` on rough terrain), and
``terrain_level``: the mean and highest level over the envs after the iteration. The record names the
model (``model_xml``, its SHA-256), the clip (``motion_file``, its SHA-256; tracking), ``keep_sensors`` and
``forward_before_obs`` (the flags' values), the learner, the ``seed`` (also the config's, as mjlab's train
script sets it) and rsl-rl-lib's version (``rsl_rl_lib``; use mjlab's pin, 5.4.2, for a like-for-like run:
``benchmarks/gpu/like_for_like.sh``). It is first written before the training loop. With ``--reference``
(mjlab's JSON) a PNG of both curves against wall-clock time is written next to it.

Checkpoints are rsl_rl's own (``OnPolicyRunner.save``; ``infos`` holds the env id, its keywords (without the
package's own clip, the task's default: :func:`env_kwargs`) and this config, so ``python -m gym_graphreset
play``/``export`` can rebuild the policy and its env): ``--save-dir`` every
``--save-every`` iterations and at the end; ``--resume PATH`` loads one (``OnPolicyRunner.load``) and goes
on from its iteration. ``--log-dir`` is the runner's ``log_dir``: rsl_rl's logger writes TensorBoard
scalars there (``Episode_Reward/<term>`` included: mjlab's tags) and, every ``save_interval`` (= ``--save-every``)
iterations, its own ``model_<it>.pt``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import importlib.util
import json
import os
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from rsl_rl.runners import OnPolicyRunner
from tqdm.auto import tqdm

import gym_graphreset  # noqa: F401  (registers the tasks)
from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.assets.robots.g1.clip import G1_CLIP
from gym_graphreset.bench.plotting import plot_training_curves
from gym_graphreset.bench.results import env_versions
from gym_graphreset.core.config import PresetName
from gym_graphreset.integrations.rsl_rl import RslRlVecEnv, SyncFreeOnPolicyRunner
from gym_graphreset.integrations.rsl_rl_cfg import ALGORITHMS, MJLAB_TASKS, mjlab_ppo_cfg
from gym_graphreset.mdp.terrain_levels import terrain_state
from gym_graphreset.tasks import ManagerBasedEnv
from gym_graphreset.terrains.terrain_state import TerrainState

ENV_ID = "gym_graphreset/Go1-Velocity-Flat-v0"
TRACKING_ENV_ID = "gym_graphreset/G1-Tracking-Flat-v0"
ENV_IDS = MJLAB_TASKS
"""The tasks whose mjlab PPO config is :func:`mjlab_go1_cfg`."""


def _mjlab_tags() -> dict[str, str]:
    """``mjlab_train.py``'s ``TAGS`` (the script beside this one, imported by its path: scripts are no package)."""
    spec = importlib.util.spec_from_file_location("mjlab_train_tags", Path(__file__).with_name("mjlab_train.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the standard library only: mjlab is imported when it trains
    return dict(module.TAGS)


MJLAB_FIELDS = {field: tag for field, tag in _mjlab_tags().items() if not tag.startswith("Train/")}
"""Row field -> the mjlab tag it holds (``None`` where the task has none): mjlab's run records the same fields
from the same tags (``mjlab_train.py``'s ``TAGS``, its ``Train/`` tags apart)."""


RUNNERS = {"stock": OnPolicyRunner, "syncfree": SyncFreeOnPolicyRunner}
"""``--runner`` -> the runner class."""
FORWARD: dict[str, dict[str, Any]] = {
    "off": {},
    "declared": {"forward_before_obs": True, "forward_passes": "declared"},
    "full": {"forward_before_obs": True, "forward_passes": "full"},
}
"""``--forward-before-obs`` -> the env keywords it sets (``full``: mjlab's work)."""


def mjlab_go1_cfg(algorithm: str = "ppo", check_for_nan: bool = True, env_id: str = ENV_ID) -> dict[str, Any]:
    """mjlab 1.6's PPO config of ``env_id`` as an rsl_rl train config (the package's :func:`mjlab_ppo_cfg`).

    ``algorithm`` (a key of :data:`ALGORITHMS`): ``"ppo"``, rsl_rl's ``PPO`` (``V(s_t)`` time-out bootstrap) as
    mjlab, ``"finalobs"``, :class:`~gym_graphreset.integrations.rsl_rl.FinalObsPPO`, or ``"fast"``,
    :class:`~gym_graphreset.integrations.rsl_rl_fast.FastPPO`. ``check_for_nan``:
    rsl_rl's per-step NaN check (stock runner: on). ``env_id``: the task (G1 tracking: entropy 0.005).
    """
    cfg = mjlab_ppo_cfg(env_id, algorithm)  # type: ignore[arg-type]
    cfg.check_for_nan = check_for_nan
    out = cfg.to_dict()
    del out["max_iterations"]  # this script's budget is --budget-s / --max-iterations
    return out


def warm_up(env: FixedShapeAutoresetVectorEnv, seed: int, steps: int = 8) -> None:
    """Step random actions in [-1, 1], so that compilation and capture happen before the training clock starts.

    mjlab's env compiles its kernels and captures its physics graph when it is built, before its training
    loop; this puts the library's env in the same state. The task's step count (``common_step``) is then put
    back to its value before these steps, so that the warm-up counts for no curriculum: the training's first
    reset comes at the env's step 0, as mjlab's does, where the terrain curriculum leaves the levels as the
    env's first reset set them (a reset after the warm-up's steps would judge every row's few-step episode and
    lower nearly every level), and the command ranges' stages start at the same step as mjlab's.
    """
    env.reset(seed=seed)
    task = env.unwrapped
    # (the step count, its value now) on a task-layer env
    saved = (task.common_step, task.common_step.clone()) if isinstance(task, ManagerBasedEnv) else None
    for _ in range(steps):
        shape = tuple(env.single_action_space.shape or ())
        env.step(torch.rand(env.num_envs, *shape, device=env.device) * 2.0 - 1.0)
    if env.device.type == "cuda":
        torch.cuda.synchronize(env.device)
    if saved is not None:
        counter, before = saved
        counter.copy_(before)  # in place: the captured step graph holds the tensor


def training_env(
    env_id: str,
    num_envs: int,
    device: str,
    preset: PresetName,
    seed: int,
    kwargs: Mapping[str, Any],
    steps_per_env: int,
) -> tuple[FixedShapeAutoresetVectorEnv, RslRlVecEnv]:
    """The task (``make_vec`` with ``kwargs``) under the library's wrapper, warmed up (:func:`warm_up`), and rsl_rl's
    env over it.

    ``RslRlVecEnv`` makes the training's first reset (seeded with ``seed``), at the task's step 0. Its
    ``extras["log"]`` carries mjlab's ``Episode_Reward/<term>`` (and ``Metrics/...``, ``Curriculum/...``) once
    every ``steps_per_env`` steps: once per iteration. Returns the wrapped task and rsl_rl's env.
    """
    inner = gym.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point", device=device, **kwargs)
    wrapped = FixedShapeAutoresetVectorEnv(inner, preset, reset_terms={"episode": EpisodeStatistics()})
    warm_up(wrapped, seed)  # kernels compiled and the step graph captured before the clock starts
    return wrapped, RslRlVecEnv(wrapped, seed=seed, episode_reward_every=steps_per_env)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", choices=ENV_IDS, default=ENV_ID, help=f"the task (default: {ENV_ID})")
    p.add_argument("--budget-s", type=float, default=120.0, help="wall-clock budget of the training loop (s)")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--device", default="cuda")
    p.add_argument("--preset", default=None, help="the wrapper preset (default: step_graph on CUDA, else masked)")
    p.add_argument("--seed", type=int, default=42, help="mjlab's Go1 seed by default")
    p.add_argument("--max-episode-steps", type=int, default=None, help="the truncation horizon (default: 1000)")
    p.add_argument("--max-iterations", type=int, default=None, help="also stop after this many iterations")
    p.add_argument(
        "--algorithm",
        choices=sorted(ALGORITHMS),
        default="ppo",
        help="rsl_rl's PPO (default, as mjlab), FinalObsPPO (time-outs bootstrapped from the final observation) or "
        "FastPPO (FinalObsPPO with no host read per minibatch of the update)",
    )
    p.add_argument(
        "--runner",
        choices=sorted(RUNNERS),
        default="stock",
        help="rsl_rl's OnPolicyRunner (default, as mjlab) or SyncFreeOnPolicyRunner (no host read per rollout step)",
    )
    p.add_argument(
        "--motion-file",
        type=Path,
        default=None,
        help=f"the clip of {TRACKING_ENV_ID} (mjlab's npz at 50 Hz; default: the package's g1_sway.npz)",
    )
    p.add_argument(
        "--model-xml",
        type=Path,
        default=None,
        help="a Go1 MJCF with mjlab's names, e.g. mjlab's go1.xml (default: the library's primitive-geom model)",
    )
    p.add_argument(
        "--keep-sensors",
        action="store_true",
        help="keep the model file's own sensors (mjlab's go1.xml / g1.xml have some, which mjlab computes every "
        "substep; default: removed, the task reads none of them)",
    )
    p.add_argument(
        "--forward-before-obs",
        choices=list(FORWARD),
        default="off",
        help="MuJoCo Warp's forward before the observations, as mjlab's step runs it: full (the whole forward, "
        "mjlab's work), declared (only the passes the observations read: the same values, less work) or off "
        "(default: none, the task's own setting)",
    )
    p.add_argument("--save-dir", type=Path, default=None, help="rsl_rl checkpoints (model_<it>.pt) here")
    p.add_argument("--save-every", type=int, default=50, help="iterations between checkpoints (default: 50, mjlab's)")
    p.add_argument("--resume", type=Path, default=None, help="an rsl_rl checkpoint to continue from")
    p.add_argument("--log-dir", type=Path, default=None, help="the runner's log_dir: rsl_rl's TensorBoard scalars")
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


def _motion(path: Path | None) -> dict[str, Any]:
    """The clip tracked (default: the package's) and its SHA-256."""
    clip = path or G1_CLIP
    return {"motion_file": str(clip), "motion_sha256": _sha256(clip)}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _same_file(path: Path, other: Path) -> bool:
    """Whether ``path`` is the file ``other`` (through links and relative paths); False when either is missing."""
    try:
        return path.samefile(other)
    except OSError:
        return False


def mjlab_fields(log: Mapping[str, float | None]) -> dict[str, Any]:
    """A row's mjlab entries from one iteration's log (``{tag: value}``, NaN or ``None`` where nothing reset).

    Returns the :data:`MJLAB_FIELDS` fields, ``episode_reward`` (the ``Episode_Reward/<term>`` entries) and
    ``metrics`` (the ``Metrics/...`` and ``Curriculum/...`` entries), each ``None`` where the log has no value.
    """

    def value(x: float | None) -> float | None:
        return None if x is None or x != x else x  # NaN: no row reset in the iteration

    fields: dict[str, Any] = {field: value(log.get(tag)) for field, tag in MJLAB_FIELDS.items()}
    fields["episode_reward"] = {t: value(x) for t, x in log.items() if t.startswith("Episode_Reward/")}
    fields["metrics"] = {t: value(x) for t, x in log.items() if t.startswith(("Metrics/", "Curriculum/"))}
    return fields


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The ``make_vec`` keywords of the parsed arguments (recorded in the checkpoints' ``infos``).

    The package's own clip (``like_for_like.sh``'s default ``MOTION``) is left out: it is the task's default, so the
    checkpoint plays (``play``) on any machine with the package, where the training machine's path to it may not be.
    """
    kwargs: dict[str, Any] = {} if args.max_episode_steps is None else {"max_episode_steps": args.max_episode_steps}
    if args.model_xml is not None:
        kwargs["model_xml"] = str(args.model_xml)
    if args.motion_file is not None and not _same_file(args.motion_file, G1_CLIP):
        kwargs["motion_file"] = str(args.motion_file)
    if args.keep_sensors:
        kwargs["keep_sensors"] = True
    return kwargs | FORWARD[args.forward_before_obs]


def _model(path: Path | None, env_id: str) -> dict[str, Any]:
    """Which robot model: the MJCF path and its SHA-256, or the library's own."""
    if path is None:
        robot = "G1" if "G1-" in env_id else "Go1"
        assets = f"gym_graphreset/envs/{robot.lower()}/assets"
        return {"model_xml": None, "model": f"the library's primitive-geom {robot} ({assets})"}
    return {"model_xml": str(path), "model_sha256": _sha256(path)}


class Stop(Exception):
    """Raised from the runner's per-iteration log call once the budget or ``--max-iterations`` is spent."""


def _terrain_levels(env: Any) -> dict[str, float] | None:
    """The mean and the highest terrain level over the envs (one host read), or None on a task without terrain."""
    inner = env.unwrapped
    if not isinstance(inner, ManagerBasedEnv) or not isinstance(inner.sensors.get("terrain"), TerrainState):
        return None
    levels = terrain_state(inner).levels.to(torch.float32)
    return {"mean": levels.mean().item(), "max": levels.max().item()}


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
    if args.model_xml is not None and not args.model_xml.is_file():
        parser.error(f"--model-xml must be an MJCF file, got {args.model_xml}")
    if args.motion_file is not None and args.env_id != TRACKING_ENV_ID:
        parser.error(f"--motion-file is for {TRACKING_ENV_ID} (a clip to track), got --env-id {args.env_id}")
    if args.motion_file is not None and not args.motion_file.is_file():
        parser.error(f"--motion-file must be a clip (mjlab's npz), got {args.motion_file}")
    if args.resume is not None and not args.resume.is_file():
        parser.error(f"--resume must be an rsl_rl checkpoint file, got {args.resume}")
    if args.save_every < 1:
        parser.error(f"--save-every must be >= 1, got {args.save_every}")
    if args.log_dir is not None and importlib.util.find_spec("tensorboard") is None:
        print(f"tensorboard is not installed (pip install tensorboard): no rsl_rl log in {args.log_dir}")
        args.log_dir = None
    preset: PresetName = args.preset or ("step_graph" if args.device.startswith("cuda") else "masked_persistent")

    torch.manual_seed(args.seed)
    runner_class = RUNNERS[args.runner]
    cfg = mjlab_go1_cfg(args.algorithm, check_for_nan=args.runner == "stock", env_id=args.env_id)
    cfg["save_interval"] = args.save_every
    cfg["seed"] = args.seed  # as mjlab's train script sets agent.seed (rsl_rl itself does not read it)
    recorded_cfg = copy.deepcopy(cfg)  # rsl_rl 5.4 pops keys from the config it is given
    setup_start = time.perf_counter()
    kwargs = env_kwargs(args)
    wrapped, env = training_env(
        args.env_id, args.num_envs, args.device, preset, args.seed, kwargs, cfg["num_steps_per_env"]
    )
    terms = env.reward_terms
    assert terms is not None  # the Go1 task reports its reward terms
    log_dir = None if args.log_dir is None else str(args.log_dir)
    runner = runner_class(env, cfg, log_dir=log_dir, device=args.device)
    infos = {"env_id": args.env_id, "env_kwargs": kwargs, "rl_cfg": recorded_cfg}
    if args.resume is not None:
        runner.load(str(args.resume), map_location=args.device)
        print(f"resumed from {args.resume} (iteration {runner.current_learning_iteration})")
    first_it = runner.current_learning_iteration
    stats = wrapped.reset_terms["episode"]
    steps_per_iteration = recorded_cfg["num_steps_per_env"] * args.num_envs
    record: dict[str, Any] = {
        "trainer": f"rsl_rl {runner_class.__name__} + {recorded_cfg['algorithm']['class_name']} through "
        "gym_graphreset.integrations.rsl_rl (mjlab's PPO config of the task)",
        "task": args.env_id,
        **_model(args.model_xml, args.env_id),
        **(_motion(args.motion_file) if args.env_id == TRACKING_ENV_ID else {}),
        "keep_sensors": args.keep_sensors,
        "forward_before_obs": args.forward_before_obs,
        "algorithm": args.algorithm,
        "runner": args.runner,
        "rsl_rl_lib": _versions().get("rsl-rl-lib"),
        "num_envs": args.num_envs,
        "device": args.device,
        "preset": preset,
        "budget_s": args.budget_s,
        "seed": args.seed,
        "resumed_from": None if args.resume is None else str(args.resume),
        "versions": _versions(),
        "rl_cfg": recorded_cfg,
        "fields": {
            "wall_s": "seconds since the training loop started",
            "track_lin_vel": "Episode_Reward/track_linear_velocity, mjlab's definition: the mean over the iteration's "
            "steps with resets of the reset rows' mean (episode sum / configured episode length in s)",
            "track_ang_vel": "Episode_Reward/track_angular_velocity, the same definition",
            "track_lin_vel_episodes": "the same sums pooled over the iteration's finished episodes",
            "track_ang_vel_episodes": "the same sums pooled over the iteration's finished episodes",
            "episode_length": "mean length (steps) of the iteration's finished episodes",
            "mean_reward": "mean raw return of the iteration's finished episodes",
            "episode_reward": "every Episode_Reward/<term>, mjlab's definition",
            "metrics": "mjlab's Metrics/<command>/<key> (the mean over the iteration's steps with resets of the reset "
            "rows' mean of the value the step before) and Curriculum/<term>/mean|max (the mean over those steps "
            "of the mean and highest level over the envs)",
            **{field: tag for field, tag in MJLAB_FIELDS.items() if field not in ("track_lin_vel", "track_ang_vel")},
            "terrain_level": "rough tasks: the mean and the highest terrain level over the envs after the iteration",
        },
        "rows": [],
        "setup_s": time.perf_counter() - setup_start,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / args.name
    _write(path, record)  # before the first iteration: a run killed early still names its settings
    bar = tqdm(total=int(args.budget_s), desc=f"{'G1' if 'G1-' in args.env_id else 'Go1'} rsl_rl", unit="s")

    def save(it: int) -> None:
        if args.save_dir is not None:
            args.save_dir.mkdir(parents=True, exist_ok=True)
            runner.save(str(args.save_dir / f"model_{it}.pt"), infos=infos)

    log = runner.logger.log

    def log_and_record(*a: Any, **kw: Any) -> None:
        """rsl_rl's per-iteration log, then this script's row (one host read each summary)."""
        log(*a, **kw)
        it = kw["it"]
        summary = stats.summary()
        logged = env.mjlab_log  # set at the iteration's last step; one host read for all of it
        mjlab = dict(zip(logged, torch.stack(list(logged.values())).tolist(), strict=True)) if logged else {}
        pooled = terms.summary(over="episodes")
        wall = time.perf_counter() - start
        ended = summary["episodes"] > 0

        row = {
            "iteration": it,
            "wall_s": wall,
            "env_steps": (it + 1) * steps_per_iteration,
            **mjlab_fields(mjlab),  # track_* (velocity), error_* (tracking), terrain_levels (rough)...
            "track_lin_vel_episodes": pooled.get("track_linear_velocity"),
            "track_ang_vel_episodes": pooled.get("track_angular_velocity"),
            "episode_length": summary["mean_length"] if ended else None,
            "mean_reward": summary["mean_return"] if ended else None,
            "episodes": summary["episodes"],
            "terrain_level": _terrain_levels(wrapped),  # rough tasks: the levels after the iteration
        }
        record["rows"].append(row)
        _write(path, record)
        done = it + 1 - first_it
        bar.update(min(int(wall), int(args.budget_s)) - bar.n)
        bar.set_postfix(track_lin=row["track_lin_vel"], len=row["episode_length"], it=it + 1)
        if (it + 1) % args.save_every == 0:
            save(it)
        if wall >= args.budget_s or (args.max_iterations is not None and done >= args.max_iterations):
            record["stopped"] = "budget" if wall >= args.budget_s else "max_iterations"
            record["last_iteration"] = it
            raise Stop

    runner.logger.log = log_and_record
    start = time.perf_counter()
    with contextlib.suppress(Stop):
        runner.learn(args.max_iterations or 10**9, init_at_random_ep_len=True)
    bar.close()
    record.setdefault("stopped", "max_iterations")
    it = len(record["rows"])
    record["train_s"] = time.perf_counter() - start
    record["env_steps_per_s"] = it * steps_per_iteration / record["train_s"]
    _write(path, record)
    save(record.get("last_iteration", runner.current_learning_iteration))
    if runner.logger.writer is not None and hasattr(runner.logger.writer, "close"):
        runner.logger.writer.close()
    last = record["rows"][-1]
    print(
        f"rsl_rl {args.env_id} x{args.num_envs} ({preset}, forward before obs {args.forward_before_obs}, "
        f"{args.runner} runner, {args.algorithm}): {it} iterations, "
        f"{last['env_steps']:,} env steps in "
        f"{record['train_s']:.1f} s ({record['env_steps_per_s']:,.0f}/s, stopped: {record['stopped']}); "
        f"last {', '.join(f'{k} {last[k]}' for k in MJLAB_FIELDS if last[k] is not None) or 'mjlab metrics: none'}, "
        f"episode_length {last['episode_length']}; wrote {path}"
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
