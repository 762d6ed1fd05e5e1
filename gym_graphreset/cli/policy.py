"""``play`` and ``export``: run a trained checkpoint's deterministic policy and film it, or export it."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

from gym_graphreset.cli.args import int_at_least, positive, resolve_device, unregistered_env, usage_error


def add_play_parser(sub: Any) -> None:
    """The ``play`` subcommand's arguments."""
    help_text = "run a checkpoint's deterministic policy on a registered task and film some of its worlds"
    p = sub.add_parser("play", help=help_text, description=help_text)
    p.add_argument(
        "target",
        nargs="?",
        default=None,
        help="the task (a registered env id; default: the checkpoint's or its run folder's), or the checkpoint itself "
        "when --checkpoint is not given",
    )
    p.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="a checkpoint of gym-graphreset train (rsl_rl), of rsl_rl's runner or of examples/ppo_continuous.py, "
        "or a run folder (its last checkpoint)",
    )
    p.add_argument("--env-id", default=None, help="a registered vector env id (default: the checkpoint's task)")
    p.add_argument("--num-envs", type=int, default=4, help="worlds stepped (default: 4)")
    p.add_argument("--steps", type=int, default=250, help="env steps (default: 250)")
    p.add_argument("--worlds", default="0", help="comma-separated worlds in the video, left to right (default: 0)")
    p.add_argument(
        "--video", type=Path, default=None, help="MP4 path, a GIF where no encoder (default: runs/play-<task>.mp4)"
    )
    p.add_argument("--no-video", action="store_true", help="print the returns only")
    p.add_argument(
        "--camera-distance",
        type=positive("metres"),
        default=1.6,
        help="the camera's distance from each world's root body (default: 1.6; a fixed-base arm may need more)",
    )
    p.add_argument(
        "--motion",
        type=Path,
        default=None,
        help="also write world 0's first finished episode as a motion clip (mjlab's .npz) here (task-layer envs)",
    )
    p.add_argument(
        "--model-xml",
        type=Path,
        default=None,
        help="the robot's MJCF in place of the file the checkpoint recorded (trained on another machine)",
    )
    p.add_argument(
        "--motion-file",
        type=Path,
        default=None,
        help="a tracking task: the clip (mjlab's .npz) in place of the file the checkpoint recorded (trained on "
        "another machine)",
    )
    p.add_argument(
        "--terrain",
        default=None,
        help="put every world on this sub-terrain of the task's grid (e.g. pyramid_stairs), at --terrain-level; "
        "the terrain curriculum is off (task-layer envs on a terrain grid)",
    )
    p.add_argument(
        "--terrain-level",
        type=int,
        default=None,
        help="the grid's row (difficulty) every world plays on (default with --terrain: the hardest)",
    )
    p.add_argument("--device", default="auto", help="cuda, cuda:N, cpu or auto (default: auto)")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="the seed of the reset (default: 0)")
    p.add_argument("--activation", default=None, help="rsl_rl checkpoints without a recorded config: the activation")


def add_export_parser(sub: Any) -> None:
    """The ``export`` subcommand's arguments."""
    help_text = "write a checkpoint's deterministic policy as ONNX and TorchScript and check them against torch"
    p = sub.add_parser("export", help=help_text, description=help_text)
    p.add_argument("checkpoint", type=Path, help="a checkpoint of examples/ppo_continuous.py or of rsl_rl's runner")
    p.add_argument("--out", type=Path, default=Path("exported"), help="output folder (default: exported)")
    p.add_argument(
        "--formats", default="onnx,torchscript", help="comma-separated, of onnx, torchscript (default: both)"
    )
    p.add_argument("--activation", default=None, help="rsl_rl checkpoints without a recorded config: the activation")


def _load(args: argparse.Namespace) -> Any:
    """The checkpoint's policy, or a usage message (a string) saying why it cannot be read."""
    from gym_graphreset.cli.train import checkpoint_path
    from gym_graphreset.integrations.export import load_policy

    if args.checkpoint.is_dir():
        found = checkpoint_path(args.checkpoint)
        if isinstance(found, str):
            return f"--checkpoint {found}"
        args.checkpoint = found
    try:
        return load_policy(args.checkpoint, activation=args.activation)
    except (FileNotFoundError, ValueError) as exc:
        return str(exc)


def headless_gl() -> None:
    """Set ``MUJOCO_GL=egl`` on a Linux machine without a display when it is unset and MuJoCo is not imported yet.

    MuJoCo picks its OpenGL backend when it is imported, GLFW by default, which needs a display and prints a
    ``GLFWError`` without one; EGL renders offscreen (where it is missing, the video is skipped with a notice).
    """
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if (
        sys.platform.startswith("linux")
        and not display
        and "MUJOCO_GL" not in os.environ
        and "mujoco" not in sys.modules
    ):
        os.environ["MUJOCO_GL"] = "egl"


def play(args: argparse.Namespace) -> int:
    """The ``play`` subcommand: the returns printed, the video written (or skipped with a notice)."""
    headless_gl()
    from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
    from gym_graphreset.core.terms import EpisodeStatistics

    if args.num_envs < 1 or args.steps < 1:
        return usage_error(f"--num-envs and --steps must be >= 1, got {args.num_envs} and {args.steps}")
    try:
        worlds = [int(w) for w in args.worlds.split(",") if w.strip()]
    except ValueError:
        return usage_error(f"--worlds must be comma-separated integers, got {args.worlds!r}")
    if not worlds or any(not 0 <= w < args.num_envs for w in worlds) or len(set(worlds)) < len(worlds):
        return usage_error(f"--worlds must be distinct, in [0, {args.num_envs}) (--num-envs), got {args.worlds!r}")
    device = resolve_device(args.device)
    if isinstance(device, str):
        return usage_error(device)
    from gym_graphreset.cli.train import task_id, task_of_run

    task = None
    if args.checkpoint is None:  # `play CHECKPOINT`: the checkpoint given as the positional
        if args.target is None:
            return usage_error("play needs a checkpoint: gym-graphreset play [task] --checkpoint PATH")
        args.checkpoint = Path(args.target)
    elif args.target is not None:
        task = task_id(args.target)
    policy = _load(args)
    if isinstance(policy, str):
        return usage_error(policy)
    env_id = task or args.env_id or policy.source.env_id or task_of_run(args.checkpoint)
    if env_id is None:
        return usage_error(f"the checkpoint {str(args.checkpoint)!r} records no task: pass the task (or --env-id)")
    if problem := unregistered_env(env_id):
        return usage_error(problem)
    env_kwargs = _env_kwargs(policy.source.env_kwargs, args.model_xml, args.checkpoint, args.motion_file, env_id)
    if isinstance(env_kwargs, str):
        return usage_error(env_kwargs)
    spot = _terrain_spot(args, env_id, env_kwargs)
    if isinstance(spot, str):
        return usage_error(spot)
    if spot is not None:
        env_kwargs = {**spot.env_kwargs, "cfg": spot.cfg}
    inner = gym.make_vec(env_id, args.num_envs, vectorization_mode="vector_entry_point", device=device, **env_kwargs)
    if args.motion is not None:
        inner = _with_motion_recorders(inner, env_id, args, device, env_kwargs)
        if isinstance(inner, str):
            return usage_error(inner)
    if spot is not None:
        print(spot.place(inner))
    env = FixedShapeAutoresetVectorEnv(inner, "masked_persistent", reset_terms={"episode": EpisodeStatistics()})
    policy = policy.to(device)
    obs, _ = env.reset(seed=args.seed)
    width = policy.observation(obs).shape[-1]
    if width != policy.obs_dim:
        env.close()
        return usage_error(f"the checkpoint's policy reads {policy.obs_dim} observation columns, {env_id} has {width}")
    action_shape = tuple(env.single_action_space.shape or ())
    if action_shape != (policy.act_dim,):
        env.close()
        return usage_error(
            f"the checkpoint's policy outputs {policy.act_dim} actions, {env_id} takes actions of shape {action_shape}"
        )
    targets = _check_targets(args, env_id, env.unwrapped)
    if isinstance(targets, str):
        env.close()
        return usage_error(targets)
    view = None if args.no_video else _renderer(env, worlds, args.camera_distance)
    frames = [view.frame()] if view is not None else []
    returns = torch.zeros(args.num_envs, device=device)
    ended = torch.zeros(3, dtype=torch.float64, device=device)  # finished episodes: returns, lengths, count
    with torch.no_grad():
        for _ in range(args.steps):
            obs, reward, *_, info = env.step(policy(policy.observation(obs)))
            returns += reward
            done = info["_episode"]
            r, n = info["episode"]["r"], info["episode"]["l"]
            ended += torch.stack((torch.where(done, r, 0.0).sum(), torch.where(done, n, 0).sum(), done.sum()))
            returns = torch.where(done, 0.0, returns)
            if view is not None:
                frames.append(view.frame())
    if view is not None:
        view.close()
    if args.motion is not None:
        _write_motion(env.unwrapped, args.motion)
    total, length, count = ended.tolist()
    shown = ", ".join(f"world {w}: {returns[w].item():.2f}" for w in worlds)
    print(
        f"{env_id} x{args.num_envs}, {args.steps} steps of the deterministic policy: {count:.0f} episodes ended"
        + (f", mean return {total / count:.2f}, mean length {length / count:.1f}" if count else "")
        + f"; running return {shown}"
    )
    if frames:
        from gym_graphreset.envs.mjwarp.rendering import save_video

        physics: Any = env.unwrapped  # a MuJoCo Warp env: it rendered
        written = save_video(frames, targets, fps=1.0 / float(physics.dt))
        if written is not None:
            print(f"wrote {written} ({len(frames)} frames of worlds {worlds})")
    env.close()
    return 0


def _check_targets(args: argparse.Namespace, env_id: str, physics: Any) -> Path | str:
    """The video path (checked: a writable place, a GIF's fps) and the motion path, before the rollout; or why not."""
    from gym_graphreset.envs.mjwarp import MJWarpVectorEnv
    from gym_graphreset.envs.mjwarp.rendering import check_output_path, check_video_target

    video = args.video or Path("runs") / f"play-{env_id.split('/')[-1]}.mp4"
    try:
        if args.motion is not None:
            check_output_path(args.motion, "--motion")
        if args.no_video or not isinstance(physics, MJWarpVectorEnv):  # only a MuJoCo Warp env renders
            return video
        return check_video_target(video, 1.0 / float(physics.dt), "--video")
    except (TypeError, ValueError) as exc:
        return str(exc)


def _env_kwargs(
    recorded: dict[str, Any],
    model_xml: Path | None,
    checkpoint: Path,
    motion_file: Path | None,
    env_id: str,
) -> dict[str, Any] | str:
    """The env's constructor arguments: the checkpoint's, with the files given in place of its own; or why not.

    ``model_xml`` replaces the recorded model file, ``motion_file`` the recorded clip (a tracking task's). A
    recorded file that is not on this machine (a checkpoint trained elsewhere) is named, with the flag that
    replaces it, rather than failing inside the env's constructor.
    """
    from gym_graphreset.managers.registry import registered_task

    if motion_file is not None:
        task = registered_task(env_id)
        if task is None or "motion_file" not in task.options:
            return f"--motion-file is for a task that tracks a clip (a `motion_file` option); {env_id} takes none"
    kwargs = dict(recorded)
    files = [
        ("model_xml", model_xml, "model file", "that robot's MJCF"),
        ("motion_file", motion_file, "clip", "that clip"),
    ]
    for key, given, what, instead in files:
        flag = "--" + key.replace("_", "-")
        if given is not None:
            if not given.is_file():
                return f"{flag} {str(given)!r} is not a file"
            kwargs[key] = str(given)
        elif (path := kwargs.get(key)) and not Path(str(path)).is_file():
            return (
                f"the checkpoint {str(checkpoint)!r} was trained on the {what} {str(path)!r}, which is not here: "
                f"pass {flag} ({instead} on this machine)"
            )
    return kwargs


@dataclass(frozen=True)
class TerrainSpot:
    """Where ``play --terrain`` / ``--terrain-level`` puts every world: one cell (or row) of the task's grid.

    Attributes:
        cfg: The task's config with the curriculum terms that read this grid taken out (the levels stay put).
        env_kwargs: The env's other constructor arguments (the model's went into ``cfg``).
        grid: The name of the grid's part (a ``TerrainCfg``) in ``cfg.sensors``.
        column: The sub-terrain's column (``None``: each world keeps its own).
        level: The row.
        dropped: The curriculum terms taken out.
    """

    cfg: Any
    env_kwargs: dict[str, Any]
    grid: str
    column: int | None
    level: int
    dropped: tuple[str, ...]

    def place(self, env: Any) -> str:
        """Put ``env``'s worlds on the cell (before its first reset spawns them there); what was done, in words."""
        state = env.sensors[self.grid]
        state.place(level=self.level, column=self.column)
        generator = state.terrain.cfg
        where = "its own sub-terrain" if self.column is None else list(generator.sub_terrains)[self.column]
        row = f"level {self.level} of 0-{generator.num_rows - 1} (difficulty {generator.difficulty(self.level):.2f})"
        off = f"; the terrain curriculum ({', '.join(self.dropped)}) is off" if self.dropped else ""
        return f"play: every world on {where} at {row}{off}"


def _terrain_spot(args: argparse.Namespace, env_id: str, kwargs: dict[str, Any]) -> TerrainSpot | str | None:
    """``--terrain`` / ``--terrain-level`` checked against the task's grid before any env is built; or why not.

    ``None``: neither was given.
    """
    if args.terrain is None and args.terrain_level is None:
        return None
    from gym_graphreset.managers.binding import sensors_read
    from gym_graphreset.managers.registry import registered_task
    from gym_graphreset.terrains.terrain_generator import TerrainCfg

    entry = registered_task(env_id)
    if entry is None:
        return f"--terrain and --terrain-level need a task-layer env on a terrain grid; {env_id} is not one"
    try:
        cfg, rest = entry.split(None, kwargs)
    except (TypeError, ValueError) as exc:
        return str(exc)
    grids = {name: part for name, part in cfg.sensors.items() if isinstance(part, TerrainCfg)}
    if len(grids) != 1:
        what = f"several terrain grids {list(grids)}" if grids else "no terrain grid (a TerrainCfg among its sensors)"
        return f"--terrain and --terrain-level need a task on one terrain grid; {env_id} has {what}"
    ((grid, part),) = grids.items()
    generator = part.generator
    names = list(generator.sub_terrains)
    if args.terrain is not None and args.terrain not in names:
        return f"--terrain must name one of {env_id}'s sub-terrains ({', '.join(names)}), got {args.terrain!r}"
    top = generator.num_rows - 1
    if args.terrain_level is not None and not 0 <= args.terrain_level <= top:
        return f"--terrain-level must be in [0, {top}] ({env_id}'s grid has {top + 1} levels), got {args.terrain_level}"
    level = args.terrain_level if args.terrain_level is not None else top
    dropped = tuple(n for n, t in cfg.curriculum.items() if grid in sensors_read(t.func, t.params).values())
    kept = {n: t for n, t in cfg.curriculum.items() if n not in dropped}
    return TerrainSpot(
        cfg=replace(cfg, curriculum=kept),
        env_kwargs=rest,
        grid=grid,
        column=None if args.terrain is None else names.index(args.terrain),
        level=level,
        dropped=dropped,
    )


_MODEL_KWARGS = ("model_xml", "keep_sensors", "terrain", "motion_file")
"""Constructor arguments a task's config already holds (given with ``cfg=`` they are refused)."""


def _with_motion_recorders(
    inner: Any, env_id: str, args: argparse.Namespace, device: Any, kwargs: dict[str, Any]
) -> Any:
    """``inner`` rebuilt with the motion recorders of every body (a task-layer env), or why it cannot be."""
    from gym_graphreset import mdp
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv
    from gym_graphreset.tasks.tracking.motion_clips import robot_body_names

    if not isinstance(inner, ManagerBasedEnv):
        inner.close()
        return f"--motion records task-layer envs (a ManagerBasedEnv); {env_id} is a {type(inner).__name__}"
    cfg = replace(
        inner.cfg,
        recorders=mdp.motion_recorders(robot_body_names(inner.mjm)),
        refresh="com",
        recorder_frames=max(args.steps, inner.max_episode_steps) + 2,
    )
    inner.close()
    rest = {k: v for k, v in kwargs.items() if k not in _MODEL_KWARGS and k != "cfg"}  # cfg: play --terrain's
    return gym.make_vec(env_id, args.num_envs, vectorization_mode="vector_entry_point", device=device, cfg=cfg, **rest)


def _write_motion(env: Any, path: Path) -> None:
    """World 0's first finished episode as a clip, or a one-line notice when none finished."""
    episodes = env.recorder_manager.episodes()
    first = next((i for i, e in enumerate(episodes) if e.env_id == 0), None)
    if first is None:
        print(f"no clip written: no episode of world 0 finished within --steps ({path} not written)")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    chosen = env.recorder_manager.export_motion(path, episode=first)
    frames = len(next(iter(chosen.fields.values())))
    print(f"wrote {path} (world 0's episode {chosen.ordinal}: {frames} frames at {1.0 / env.step_dt:g} fps)")


def _renderer(env: Any, worlds: list[int], distance: float) -> Any:
    """A renderer of ``worlds``, or ``None`` after a one-line notice when this env or machine cannot render."""
    from gym_graphreset.envs.mjwarp.frames import RenderUnavailable
    from gym_graphreset.envs.mjwarp.rendering import WorldsView

    try:
        return WorldsView(env, worlds, distance=distance)
    except (RenderUnavailable, TypeError) as exc:
        print(f"play: no video ({exc}); the returns only")
        return None


def export(args: argparse.Namespace) -> int:
    """The ``export`` subcommand: each format written and checked against the torch policy."""
    from gym_graphreset.integrations.export import check_export, export_onnx, export_torchscript

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or set(formats) - {"onnx", "torchscript"}:
        return usage_error(f"--formats must be a comma-separated subset of onnx, torchscript, got {args.formats!r}")
    if args.out.exists() and not args.out.is_dir():
        return usage_error(f"--out must be a directory (the exported files go in it), got the file {str(args.out)!r}")
    policy = _load(args)
    if isinstance(policy, str):
        return usage_error(policy)
    names = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
    for kind in formats:
        target = args.out / names[kind]
        if target.exists() and target.resolve() == args.checkpoint.resolve():
            return usage_error(
                f"--out {str(args.out)!r}: the {kind} export would overwrite the checkpoint {str(args.checkpoint)!r} "
                "(it is named policy.pt there); give another --out"
            )
    for kind in formats:
        if kind == "onnx":
            try:
                import onnx  # noqa: F401
                import onnxscript  # noqa: F401  (torch's exporter builds the graph with it)
            except ImportError:
                print("onnx is not installed (pip install 'gym_graphreset[export]'): skipped the ONNX export")
                continue
            path = export_onnx(policy, args.out / "policy.onnx")
        else:
            path = export_torchscript(policy, args.out / "policy.pt")
        check = check_export(policy, path)
        diff = "" if check.max_abs_diff is None else f", max |diff| {check.max_abs_diff:.2g} on 256 random observations"
        print(f"wrote {path} (checked with {check.runtime}{diff})")
    return 0
