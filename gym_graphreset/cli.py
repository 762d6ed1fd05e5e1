"""Command line: ``python -m gym_graphreset {demo,bench,play,export}`` (also installed as ``gym-graphreset``).

``demo`` and ``bench`` time the step modes; ``play`` runs a trained checkpoint (the PPO example's or rsl_rl's)
deterministically on a registered task and films some of its worlds; ``export`` writes that policy as ONNX
and TorchScript, the observation normaliser folded in, and checks each file against the torch policy.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import torch

from gym_graphreset.bench.peers.compare import PEERS, PeerConfig, Variant, comparison_table, parse_variant, run_peer
from gym_graphreset.bench.plotting import plot_peer_comparison, plot_results
from gym_graphreset.bench.runner import CUDA_ONLY, DEFAULT_MODES, MODES, ModeResult, measure_modes, save_json, table

DEFAULT_ENV = "gym_graphreset/CartPole-v1"


class VariantRejected(ValueError):
    """The env's constructor refused a ``--variant``'s keyword arguments."""


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an int >= ``minimum`` (anything else is argparse's usage error, naming the flag)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an int >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an int >= {minimum}, got {value}")
        return value

    return parse


def _sizes(text: str) -> list[int]:
    """An argparse ``type``: comma-separated ints >= 1 (batch sizes, process counts)."""
    parts = [part.strip() for part in text.split(",")]
    try:
        values = [int(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated ints >= 1, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be comma-separated ints >= 1, got {text!r}")
    return values


def _seconds(text: str) -> float:
    """An argparse ``type``: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gym-graphreset", description="Compare the step modes of FixedShapeAutoresetVectorEnv side by side."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text, steps, envs in (
        ("demo", "a short run of every mode on the default env", 300, "4096"),
        ("bench", "a longer run over several batch sizes, saved as JSON and a PNG plot", 1000, "512,4096,16384"),
    ):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--env-id", default=DEFAULT_ENV, help=f"a registered vector env id (default: {DEFAULT_ENV})")
        p.add_argument("--num-envs", type=_sizes, default=envs, help=f"comma-separated batch sizes (default: {envs})")
        p.add_argument("--steps", type=_int_at_least(1), default=steps, help=f"timed steps per mode (default: {steps})")
        p.add_argument(
            "--warmup",
            type=_int_at_least(0),
            default=10,
            help="untimed steps per mode, capture included (default: 10)",
        )
        p.add_argument("--device", default="auto", help="cuda, cuda:N, cpu or auto (default: auto)")
        p.add_argument(
            "--modes",
            default=",".join(DEFAULT_MODES),
            help=f"comma-separated modes, of {list(MODES)} (default: all but step graph+compile)",
        )
        p.add_argument(
            "--physics-states",
            choices=("step", "free"),
            default="step",
            help="states the bare-physics floor of MuJoCo Warp envs is timed on: those a real step leaves (step) "
            "or worlds driven by raw random ctrl, never reset (free) (default: step)",
        )
        p.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="output folder for JSON and PNG")
        p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
        p.add_argument(
            "--async-baseline",
            metavar="GYM_ID",
            nargs="?",
            const="same",
            help="also time Gymnasium's own env in AsyncVectorEnv processes on the CPU; with no value, the same "
            "task as --env-id (gym_graphreset/Ant-v5 -> Ant-v5). A speed-up is printed only for the same task",
        )
        p.add_argument(
            "--async-envs",
            type=_sizes,
            default="16",
            help="comma-separated process counts for --async-baseline (default: 16)",
        )
        p.add_argument(
            "--cpu-baseline",
            default="",
            help="comma-separated CPU engines timed on the same task: envpool (its best over a num_envs x "
            "batch_size sweep), gymnasium-async (AsyncVectorEnv with --async-envs processes)",
        )
        p.add_argument(
            "--variant",
            action="append",
            default=[],
            metavar="LABEL[:KEY=VALUE,...]",
            help="a model variant of --env-id, repeatable: each is measured, its key=value pairs passed to the env "
            "constructor as keyword arguments: true/false as bools, numbers as ints or floats, the rest as strings "
            "(e.g. mjlab-go1:model_xml=/path/to/go1.xml)",
        )
        p.add_argument(
            "--peer",
            default="",
            help=f"comma-separated GPU peers timed on their own task in their own interpreter, of {sorted(PEERS)}",
        )
        p.add_argument(
            "--peer-python", default=sys.executable, help="the peer's Python interpreter (default: this one)"
        )
        p.add_argument("--peer-pythonpath", default=None, help="PYTHONPATH for the peer's interpreter (replaces ours)")
        p.add_argument("--peer-task", default=None, help="the peer's task id (default: its Go1 flat velocity task)")
        p.add_argument(
            "--peer-timeout", type=_seconds, default=300.0, help="seconds allowed per peer size (default: 300)"
        )
        p.add_argument(
            "--envpool-envs",
            type=_sizes,
            default="64,256,512",
            help="num_envs swept for --cpu-baseline envpool (default: 64,256,512)",
        )
    _play_parser(sub)
    _export_parser(sub)
    return parser


def _play_parser(sub: Any) -> None:
    help_text = "run a checkpoint's deterministic policy on a registered task and film some of its worlds"
    p = sub.add_parser("play", help=help_text, description=help_text)
    p.add_argument("checkpoint", type=Path, help="a checkpoint of examples/ppo_continuous.py or of rsl_rl's runner")
    p.add_argument("--env-id", default=None, help="a registered vector env id (default: the checkpoint's task)")
    p.add_argument("--num-envs", type=int, default=4, help="worlds stepped (default: 4)")
    p.add_argument("--steps", type=int, default=250, help="env steps (default: 250)")
    p.add_argument("--worlds", default="0", help="comma-separated worlds in the video, left to right (default: 0)")
    p.add_argument(
        "--video", type=Path, default=None, help="MP4 path, a GIF where no encoder (default: runs/play-<task>.mp4)"
    )
    p.add_argument("--no-video", action="store_true", help="print the returns only")
    p.add_argument("--device", default="auto", help="cuda, cuda:N, cpu or auto (default: auto)")
    p.add_argument("--seed", type=int, default=0, help="the seed of the reset (default: 0)")
    p.add_argument("--activation", default=None, help="rsl_rl checkpoints without a recorded config: the activation")


def _export_parser(sub: Any) -> None:
    help_text = "write a checkpoint's deterministic policy as ONNX and TorchScript and check them against torch"
    p = sub.add_parser("export", help=help_text, description=help_text)
    p.add_argument("checkpoint", type=Path, help="a checkpoint of examples/ppo_continuous.py or of rsl_rl's runner")
    p.add_argument("--out", type=Path, default=Path("exported"), help="output folder (default: exported)")
    p.add_argument(
        "--formats", default="onnx,torchscript", help="comma-separated, of onnx, torchscript (default: both)"
    )
    p.add_argument("--activation", default=None, help="rsl_rl checkpoints without a recorded config: the activation")


def _envpool_baseline(env_id: str, num_envs: list[int], steps: int) -> list[Any]:
    """EnvPool's sweep on the same task, or nothing (with a one-line notice) when the extra is missing."""
    try:
        from gym_graphreset.bench.baselines import best_envpool, envpool_task

        task = envpool_task(env_id)
        print(f"timing EnvPool {task} over num_envs {num_envs} x batch_size {{n, n/2}} ...")
        return best_envpool(task, num_envs=num_envs, steps=min(steps, 500))[1]
    except ImportError:
        print("EnvPool is not installed (pip install 'gym_graphreset[envpool]'): skipped the EnvPool baseline")
        return []


def same_task(env_id: str, gym_id: str) -> bool:
    """Whether ``gym_id`` (Gymnasium's) is the task ``env_id`` (ours) runs: ``gym_graphreset/Ant-v5`` is ``Ant-v5``."""
    return env_id.split("/")[-1] == gym_id


def _usage_error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _writable(out: Path) -> str | None:
    """What keeps ``--out`` from taking the results (``None``: it can, and it exists now)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        return f"--out {str(out)!r} cannot hold the results: {exc.strerror or exc}"
    return None


def _choices(args: argparse.Namespace) -> tuple[torch.device, list[str], set[str]] | str:
    """The device, the modes and the CPU baselines the arguments ask for, or what is wrong with them."""
    baselines = {b.strip() for b in args.cpu_baseline.split(",") if b.strip()}
    if baselines - {"envpool", "gymnasium-async"}:
        return f"unknown --cpu-baseline {sorted(baselines)}; choose from envpool, gymnasium-async"
    if args.async_baseline == "same" or ("gymnasium-async" in baselines and not args.async_baseline):
        args.async_baseline = args.env_id.split("/")[-1]
    auto = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(auto if args.device == "auto" else args.device)
    except RuntimeError:
        return f"--device must be cuda, cuda:N, cpu or auto, got {args.device!r}"
    if device.type not in ("cuda", "cpu"):
        return f"--device must be cuda, cuda:N, cpu or auto, got {args.device!r}"
    if device.type == "cuda" and not torch.cuda.is_available():
        return "--device cuda asked for, but CUDA is not available"
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        return f"--device {args.device} asked for, but there are {torch.cuda.device_count()} CUDA device(s)"
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        return f"unknown mode(s) {unknown}; choose from {list(MODES)}"
    if not modes:
        return f"no runnable mode: --modes {args.modes!r} names none; choose from {list(MODES)}"
    if device.type != "cuda":
        skipped = [m for m in modes if m in CUDA_ONLY]
        modes = [m for m in modes if m not in CUDA_ONLY]
        if not modes:
            return f"no runnable mode: --modes {args.modes!r} needs CUDA, and the device is {device}"
        print(f"No CUDA device: running on the CPU; skipping the CUDA-graph modes {skipped}.")
    if problem := _writable(args.out):
        return problem
    return device, modes, baselines


def _peer_choices(args: argparse.Namespace, device: torch.device) -> tuple[dict[str, Variant], list[PeerConfig]] | str:
    """The model variants of ``--env-id`` and the GPU peers the arguments ask for, or what is wrong with them."""
    peers = [p.strip() for p in args.peer.split(",") if p.strip()]
    if set(peers) - set(PEERS):
        return f"unknown --peer {sorted(set(peers) - set(PEERS))}; choose from {sorted(PEERS)}"
    try:
        variants = _variants(args.variant, args.env_id)
        configs = [
            PeerConfig(
                name=cast(Any, p),  # checked by PeerConfig
                python=args.peer_python,
                pythonpath=args.peer_pythonpath,
                task=args.peer_task,
                device=f"cuda:{device.index or 0}" if device.type == "cuda" else "cpu",
                timeout_s=args.peer_timeout,
                physics_states=args.physics_states,
            )
            for p in peers
        ]
    except ValueError as exc:
        return str(exc)
    return variants, configs


def _measure(
    args: argparse.Namespace,
    device: torch.device,
    modes: list[str],
    baselines: set[str],
    variants: dict[str, Variant],
    configs: list[PeerConfig],
) -> list[Any]:
    """Every mode at every size and model variant, then the GPU peers, then the CPU baselines asked for."""
    results = []
    sizes: list[int] = args.num_envs
    for n in sizes:
        for env_id, variant in variants.items():

            def make_inner(n: int = n, variant: Variant = variant) -> gym.vector.VectorEnv:
                kwargs: dict[str, Any] = {"device": device, **variant.kwargs}
                try:
                    return gym.make_vec(args.env_id, num_envs=n, vectorization_mode="vector_entry_point", **kwargs)
                except TypeError as exc:
                    if not variant.kwargs:
                        raise
                    raise VariantRejected(
                        f"`--variant {variant.label}`: {args.env_id} does not take {sorted(variant.kwargs)} ({exc})"
                    ) from exc

            measured = measure_modes(  # VariantRejected: a usage error, reported by main()
                make_inner,
                modes,
                steps=args.steps,
                warmup=args.warmup,
                env_id=env_id,
                show_progress=not args.no_progress,
                physics_states=args.physics_states,
            )
            for r in measured:
                r.extra |= {"variant": variant.label, "env_kwargs": variant.kwargs} if variant.label else {}
            results += measured
    for config in configs:
        for n in sizes:
            print(f"timing the {config.name} peer x{n} in {config.python} ...")
            peer = run_peer(config, n, steps=args.steps, warmup=args.warmup)
            if isinstance(peer, ModeResult):
                results.append(peer)
            elif peer.reason == "missing":
                break
    if args.async_baseline:
        from gym_graphreset.bench.runner import measure_gymnasium_async

        for n in args.async_envs:
            print(f"timing {args.async_baseline} in AsyncVectorEnv with {n} processes ...")
            results.append(
                measure_gymnasium_async(args.async_baseline, n, steps=min(args.steps, 500), context="forkserver")
            )
    if "envpool" in baselines:
        results += _envpool_baseline(args.env_id, args.envpool_envs, args.steps)
    return results


def _print_comparisons(args: argparse.Namespace, results: list[Any]) -> None:
    """The best mode against the CPU baselines on the same task (no ratio across tasks)."""
    best = max((r for r in results if r.mode in MODES), key=lambda r: r.env_steps_per_s)
    if args.async_baseline:
        best_cpu = max(r.env_steps_per_s for r in results if r.mode.startswith("gymnasium async"))
        line = f"\nbest here: {best.mode} x{best.num_envs} {best.env_steps_per_s:,.0f} env-steps/s"
        if same_task(args.env_id, args.async_baseline):
            line += f" = {best.env_steps_per_s / best_cpu:.1f} x Gymnasium AsyncVectorEnv on the same task"
        else:  # a ratio across tasks would compare different physics: none is printed
            line += f"; no ratio: Gymnasium AsyncVectorEnv ran another task, {args.async_baseline}"
        print(f"{line} ({best_cpu:,.0f})")
    envpool = [r for r in results if r.mode.startswith("envpool")]
    if envpool:
        top = max(envpool, key=lambda r: r.env_steps_per_s)
        print(
            f"best here: {best.mode} x{best.num_envs} {best.env_steps_per_s:,.0f} env-steps/s = "
            f"{best.env_steps_per_s / top.env_steps_per_s:.1f} x EnvPool's best on the same task "
            f"({top.mode}: {top.env_steps_per_s:,.0f})"
        )


def _device(name: str) -> torch.device | str:
    """The ``--device`` asked for, or what is wrong with it."""
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name)
    if device.type == "cuda" and not torch.cuda.is_available():
        return "--device cuda asked for, but CUDA is not available"
    return device


def _load(args: argparse.Namespace) -> Any:
    """The checkpoint's policy, or a usage message (a string) saying why it cannot be read."""
    from gym_graphreset.integrations.export import load_policy

    try:
        return load_policy(args.checkpoint, activation=args.activation)
    except (FileNotFoundError, ValueError) as exc:
        return str(exc)


def play(args: argparse.Namespace) -> int:
    """The ``play`` subcommand: the returns printed, the video written (or skipped with a notice)."""
    from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
    from gym_graphreset.core.terms import EpisodeStatistics

    if args.num_envs < 1 or args.steps < 1:
        return _usage_error(f"--num-envs and --steps must be >= 1, got {args.num_envs} and {args.steps}")
    try:
        worlds = [int(w) for w in args.worlds.split(",") if w.strip()]
    except ValueError:
        return _usage_error(f"--worlds must be comma-separated integers, got {args.worlds!r}")
    if not worlds or any(not 0 <= w < args.num_envs for w in worlds):
        return _usage_error(f"--worlds must be in [0, {args.num_envs}) (--num-envs), got {args.worlds!r}")
    device = _device(args.device)
    if isinstance(device, str):
        return _usage_error(device)
    policy = _load(args)
    if isinstance(policy, str):
        return _usage_error(policy)
    env_id = args.env_id or policy.source.env_id
    if env_id is None:
        return _usage_error(f"the checkpoint {str(args.checkpoint)!r} records no task: pass --env-id")
    if env_id not in gym.registry:
        return _usage_error(f"--env-id must be a registered env id, got {env_id!r}")
    inner = gym.make_vec(
        env_id, args.num_envs, vectorization_mode="vector_entry_point", device=device, **policy.source.env_kwargs
    )
    env = FixedShapeAutoresetVectorEnv(inner, "masked_persistent", reset_terms={"episode": EpisodeStatistics()})
    policy = policy.to(device)
    obs, _ = env.reset(seed=args.seed)
    width = policy.observation(obs).shape[-1]
    if width != policy.obs_dim:
        env.close()
        return _usage_error(f"the checkpoint's policy reads {policy.obs_dim} observation columns, {env_id} has {width}")
    view = None if args.no_video else _renderer(env, worlds)
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
    total, length, count = ended.tolist()
    shown = ", ".join(f"world {w}: {returns[w].item():.2f}" for w in worlds)
    print(
        f"{env_id} x{args.num_envs}, {args.steps} steps of the deterministic policy: {count:.0f} episodes ended"
        + (f", mean return {total / count:.2f}, mean length {length / count:.1f}" if count else "")
        + f"; running return {shown}"
    )
    if frames:
        from gym_graphreset.envs.mjwarp.rendering import save_video

        path = args.video or Path("runs") / f"play-{env_id.split('/')[-1]}.mp4"
        physics: Any = env.unwrapped  # a MuJoCo Warp env: it rendered
        written = save_video(frames, path, fps=1.0 / float(physics.dt))
        if written is not None:
            print(f"wrote {written} ({len(frames)} frames of worlds {worlds})")
    env.close()
    return 0


def _renderer(env: Any, worlds: list[int]) -> Any:
    """A renderer of ``worlds``, or ``None`` after a one-line notice when this env or machine cannot render."""
    from gym_graphreset.envs.mjwarp.rendering import RenderUnavailable, WorldsView

    try:
        return WorldsView(env, worlds)
    except (RenderUnavailable, TypeError) as exc:
        print(f"play: no video ({exc}); the returns only")
        return None


def export(args: argparse.Namespace) -> int:
    """The ``export`` subcommand: each format written and checked against the torch policy."""
    from gym_graphreset.integrations.export import check_export, export_onnx, export_torchscript

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or set(formats) - {"onnx", "torchscript"}:
        return _usage_error(f"--formats must be a comma-separated subset of onnx, torchscript, got {args.formats!r}")
    policy = _load(args)
    if isinstance(policy, str):
        return _usage_error(policy)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "play":
        return play(args)
    if args.command == "export":
        return export(args)
    chosen = _choices(args)
    if isinstance(chosen, str):
        return _usage_error(chosen)
    device, modes, baselines = chosen
    peer_chosen = _peer_choices(args, device)
    if isinstance(peer_chosen, str):
        return _usage_error(peer_chosen)
    variants, configs = peer_chosen
    try:
        results = _measure(args, device, modes, baselines, variants, configs)
    except VariantRejected as exc:
        return _usage_error(str(exc))
    ours_and_baselines = [r for r in results if r.extra.get("engine") not in PEERS]
    print()
    print(table(ours_and_baselines))
    if configs or len(variants) > 1:
        print()
        print(comparison_table(results))
    _print_comparisons(args, results)
    stem = f"{args.command}-{args.env_id.split('/')[-1]}-{device.type}"
    save_json(results, args.out / f"{stem}.json")
    plotted = plot_results(ours_and_baselines, args.out / f"{stem}.png", f"{args.env_id} on {device}")
    print(f"\nwrote {args.out / (stem + '.json')}" + (f" and {args.out / (stem + '.png')}" if plotted else ""))
    if any(r.extra.get("engine") in PEERS for r in results):
        names = "-".join(c.name for c in configs)
        peer_png = args.out / f"{stem}-vs-{names}.png"
        if plot_peer_comparison(results, peer_png, f"{args.env_id} vs {names} on {device}"):
            print(f"wrote {peer_png}")
    return 0


def _variants(texts: Sequence[str], env_id: str) -> dict[str, Variant]:
    """``--variant`` values -> {result env_id: variant}; none given: the env as registered, unlabelled.

    Raises:
        ValueError: a malformed value, a label given twice, or a model file (``model_xml``) that is not a file.
    """
    if not texts:
        return {env_id: Variant("")}
    variants: dict[str, Variant] = {}
    for text in texts:
        variant = parse_variant(text)
        key = f"{env_id}[{variant.label}]"
        if key in variants:
            raise ValueError(f"`--variant` label {variant.label!r} given twice")
        model = variant.kwargs.get("model_xml")
        if model is not None and not Path(str(model)).is_file():
            raise ValueError(f"`--variant {variant.label}`: model_xml {str(model)!r} is not a file")
        variants[key] = variant
    return variants


if __name__ == "__main__":
    raise SystemExit(main())
