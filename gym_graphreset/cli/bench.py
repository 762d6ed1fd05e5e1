"""``demo`` and ``bench``: time the step modes (and peers, CPU baselines, model variants) on a registered task."""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import torch

from gym_graphreset.bench.peers.compare import (
    PEERS,
    PeerConfig,
    Variant,
    comparison_table,
    parse_variant,
    rounds_rows,
    rounds_table,
    run_peer,
)
from gym_graphreset.bench.plotting import plot_peer_comparison, plot_results
from gym_graphreset.bench.results import ModeResult, save_json, table
from gym_graphreset.bench.runner import CUDA_ONLY, DEFAULT_MODES, MODES, measure_modes
from gym_graphreset.cli.args import int_at_least, resolve_device, seconds, sizes, unregistered_env, usage_error

DEFAULT_ENV = "gym_graphreset/CartPole-v1"


class VariantRejected(ValueError):
    """The env's constructor refused a ``--variant``'s keyword arguments."""


def add_parsers(sub: Any) -> None:
    """The ``demo`` and ``bench`` subcommands' arguments."""
    for name, help_text, steps, envs in (
        ("demo", "a short run of every mode on the default env", 300, "4096"),
        ("bench", "a longer run over several batch sizes, saved as JSON and a PNG plot", 1000, "512,4096,16384"),
    ):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--env-id", default=DEFAULT_ENV, help=f"a registered vector env id (default: {DEFAULT_ENV})")
        p.add_argument("--num-envs", type=sizes, default=envs, help=f"comma-separated batch sizes (default: {envs})")
        p.add_argument("--steps", type=int_at_least(1), default=steps, help=f"timed steps per mode (default: {steps})")
        p.add_argument(
            "--warmup",
            type=int_at_least(0),
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
        p.add_argument(
            "--physics-graph",
            choices=("warp", "torch"),
            default="warp",
            help="how the bare-physics floor replays on CUDA: MuJoCo Warp's own captured graph (warp) or captured "
            "into a torch CUDA graph as the whole-step graph embeds it (torch) (default: warp)",
        )
        p.add_argument(
            "--out",
            type=Path,
            default=Path("runs") / name,
            help=f"output folder for JSON and PNG (default: runs/{name} in the current folder)",
        )
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
            type=sizes,
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
            "--peer-motion-file", default=None, help="the clip a peer's tracking task reads (mjlab's npz format)"
        )
        p.add_argument(
            "--peer-timeout", type=seconds, default=300.0, help="seconds allowed per peer size (default: 300)"
        )
        p.add_argument(
            "--rounds",
            type=int_at_least(1),
            default=1,
            help="alternate our modes and the --peer this many times at each size, then report the median and "
            "range of each side and of the ratio (3 or more for a ratio worth quoting; default: 1)",
        )
        p.add_argument(
            "--envpool-envs",
            type=sizes,
            default="64,256,512",
            help="num_envs swept for --cpu-baseline envpool (default: 64,256,512)",
        )


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
    device = resolve_device(args.device)
    if isinstance(device, str):
        return device
    if args.physics_graph == "torch" and device.type != "cuda":
        return f"--physics-graph torch needs a CUDA device (a CUDA graph), and the device is {device}"
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
                motion_file=args.peer_motion_file,
            )
            for p in peers
        ]
    except ValueError as exc:
        return str(exc)
    return variants, configs


def _measure_ours(
    args: argparse.Namespace, device: torch.device, modes: list[str], variants: dict[str, Variant], n: int
) -> list[Any]:
    """Every mode of every model variant at ``n`` envs (a size out of device memory is skipped, with a notice)."""
    results = []
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

        try:
            measured = measure_modes(  # VariantRejected: a usage error, reported by main()
                make_inner,
                modes,
                steps=args.steps,
                warmup=args.warmup,
                env_id=env_id,
                show_progress=not args.no_progress,
                physics_states=args.physics_states,
                physics_graph=args.physics_graph,
            )
        except torch.OutOfMemoryError as exc:  # the sizes measured so far are kept and saved
            print(f"{env_id} x{n}: out of device memory; skipped this size ({str(exc).splitlines()[0]})")
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        for r in measured:
            r.extra |= {"variant": variant.label, "env_kwargs": variant.kwargs} if variant.label else {}
        results += measured
    return results


def _measure(
    args: argparse.Namespace,
    device: torch.device,
    modes: list[str],
    baselines: set[str],
    variants: dict[str, Variant],
    configs: list[PeerConfig],
    keep: Callable[[list[Any]], None] | None = None,
) -> list[Any]:
    """Per round and size, every mode of every model variant, then the GPU peers; then the CPU baselines asked for.

    With ``--rounds`` > 1 the sides alternate at each size and every result carries ``extra["round"]``; ``keep``
    is given the results so far after each round, so that a run stopped midway keeps its whole rounds.
    """
    results: list[Any] = []
    sizes: list[int] = args.num_envs
    missing: set[str] = set()  # peers not importable: skipped at every later size and round
    for round_ in range(args.rounds):
        for n in sizes:
            tag = {"round": round_} if args.rounds > 1 else {}
            if args.rounds > 1:
                print(f"round {round_ + 1} of {args.rounds}, x{n}: ours, then {len(configs)} peer(s)")
            for r in _measure_ours(args, device, modes, variants, n):
                r.extra |= tag
                results.append(r)
            for config in configs:
                if config.name in missing:
                    continue
                print(f"timing the {config.name} peer x{n} in {config.python} ...")
                peer = run_peer(config, n, steps=args.steps, warmup=args.warmup)
                if isinstance(peer, ModeResult):
                    peer.extra |= tag
                    results.append(peer)
                elif peer.reason == "missing":
                    missing.add(config.name)
        if keep is not None and args.rounds > 1 and round_ < args.rounds - 1:
            keep(results)
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


def run(args: argparse.Namespace) -> int:
    """The ``demo`` and ``bench`` subcommands: every mode measured, printed, saved as JSON and plotted."""
    if problem := unregistered_env(args.env_id):
        return usage_error(problem)
    chosen = _choices(args)
    if isinstance(chosen, str):
        return usage_error(chosen)
    device, modes, baselines = chosen
    peer_chosen = _peer_choices(args, device)
    if isinstance(peer_chosen, str):
        return usage_error(peer_chosen)
    variants, configs = peer_chosen
    stem = f"{args.command}-{args.env_id.split('/')[-1]}-{device.type}"

    def keep(so_far: list[Any]) -> None:  # the JSON of the rounds done, rewritten whole at the end
        save_json(so_far, args.out / f"{stem}.json")
        print(f"wrote the rounds so far to {args.out / (stem + '.json')}")

    try:
        results = _measure(args, device, modes, baselines, variants, configs, keep)
    except VariantRejected as exc:
        return usage_error(str(exc))
    # the tables and plots of one run show the last round; the rounds table sums up every round
    last = [r for r in results if r.extra.get("round", args.rounds - 1) == args.rounds - 1]
    ours_and_baselines = [r for r in last if r.extra.get("engine") not in PEERS]
    print()
    print(table(ours_and_baselines))
    if configs or len(variants) > 1:
        print()
        print(comparison_table(last))
    rounds_md = None
    if args.rounds > 1:
        rounds_md = rounds_table(rounds_rows([r for r in results if "round" in r.extra]))
        print(f"\nmedian (min-max) over {args.rounds} alternated rounds:\n{rounds_md}")
    _print_comparisons(args, last)
    save_json(results, args.out / f"{stem}.json")
    if rounds_md is not None:
        (args.out / f"{stem}-rounds.md").write_text(rounds_md + "\n")
        print(f"wrote {args.out / (stem + '-rounds.md')}")
    plotted = plot_results(ours_and_baselines, args.out / f"{stem}.png", f"{args.env_id} on {device}")
    print(f"\nwrote {args.out / (stem + '.json')}" + (f" and {args.out / (stem + '.png')}" if plotted else ""))
    if any(r.extra.get("engine") in PEERS for r in last):
        names = "-".join(c.name for c in configs)
        peer_png = args.out / f"{stem}-vs-{names}.png"
        if plot_peer_comparison(last, peer_png, f"{args.env_id} vs {names} on {device}"):
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
