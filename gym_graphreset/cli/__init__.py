"""Command line: ``python -m gym_graphreset {train,play,export,demo,bench,profile}`` (installed as ``gym-graphreset``).

``train`` trains rsl_rl's PPO on a registered task, every setting a flag (:mod:`gym_graphreset.cli.train`);
``demo`` and ``bench`` time the step modes (:mod:`gym_graphreset.cli.bench`); ``profile`` groups a step's
time into physics, warp, copies and torch at each batch size (:mod:`gym_graphreset.bench.profile`); ``play``
runs a trained checkpoint (the PPO example's or rsl_rl's) deterministically on a registered task and films
some of its worlds; ``export`` writes that policy as ONNX and TorchScript, the observation normaliser folded in, and
checks each file against the torch policy (:mod:`gym_graphreset.cli.policy`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from gym_graphreset.cli import bench, policy, profile
from gym_graphreset.cli.bench import DEFAULT_ENV, VariantRejected, same_task

__all__ = ["DEFAULT_ENV", "VariantRejected", "main", "same_task"]


def _version() -> str:
    """The installed package's version (the root module, which also states it, is a layer above ``cli``).

    A tree run without installing it (``PYTHONPATH=.``) has no package metadata: every other command still runs.
    """
    try:
        return importlib.metadata.version("gym_graphreset")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed: run from a source tree)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gym-graphreset",
        description="Train, play and export policies on GPU-batched tasks; time the step modes.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    train_help = "train rsl_rl's PPO on a registered task (gym-graphreset train <task> --help: its flags)"
    sub.add_parser("train", help=train_help, description=train_help)  # parsed by cli.train.main, from the task
    bench.add_parsers(sub)
    policy.add_play_parser(sub)
    policy.add_export_parser(sub)
    profile.add_parser(sub)
    return parser


def _print_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    """A library warning as a command line prints it: one ``warning:`` line on stderr, without its source line."""
    print(f"warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status. Warnings print as ``warning: ...`` lines on stderr."""
    with warnings.catch_warnings():
        warnings.filterwarnings("default", category=UserWarning)  # once per place and command, as a notice
        warnings.showwarning = _print_warning
        return _main(sys.argv[1:] if argv is None else list(argv))


def _main(argv: list[str]) -> int:
    if argv[:1] == ["train"]:
        from gym_graphreset.cli import train

        return train.main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "play":
        return policy.play(args)
    if args.command == "export":
        return policy.export(args)
    if args.command == "profile":
        return profile.run(args)
    return bench.run(args)
