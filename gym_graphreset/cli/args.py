"""Argument types shared by the subcommands, and the usage-error exit."""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Callable

import gymnasium as gym
import torch


def int_at_least(minimum: int) -> Callable[[str], int]:
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


def sizes(text: str) -> list[int]:
    """An argparse ``type``: comma-separated ints >= 1 (batch sizes, process counts)."""
    parts = [part.strip() for part in text.split(",")]
    try:
        values = [int(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated ints >= 1, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be comma-separated ints >= 1, got {text!r}")
    return values


def positive(unit: str) -> Callable[[str], float]:
    """An argparse ``type``: a finite number of ``unit`` > 0."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number of {unit} > 0, got {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"must be a finite number of {unit} > 0, got {text!r}")
        return value

    return parse


seconds = positive("seconds")
"""An argparse ``type``: a finite number of seconds > 0."""


def usage_error(message: str) -> int:
    """Print ``message`` as argparse prints a usage error; the exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def resolve_device(name: str) -> torch.device | str:
    """The ``--device`` asked for (``auto``: CUDA when there is one), or what is wrong with it."""
    try:
        device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name)
    except RuntimeError:
        return f"--device must be cuda, cuda:N, cpu or auto, got {name!r}"
    if device.type not in ("cuda", "cpu"):
        return f"--device must be cuda, cuda:N, cpu or auto, got {name!r}"
    if device.type == "cuda" and not torch.cuda.is_available():
        return "--device cuda asked for, but CUDA is not available"
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        return f"--device {name} asked for, but there are {torch.cuda.device_count()} CUDA device(s)"
    return device


def unregistered_env(env_id: str) -> str | None:
    """Why ``env_id`` cannot be made (``None``: it can); ``module:id`` imports ``module`` first, as Gymnasium does."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return (
                f"--env-id {env_id!r}: the module {module!r} that registers it cannot be imported ({exc}); "
                "it must be importable from here (run from its folder with PYTHONPATH=., or install it)"
            )
    if name not in gym.registry:
        return f"--env-id must be a registered env id (or module:id), got {env_id!r}"
    return None
