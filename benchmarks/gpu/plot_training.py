"""One training run's progress (a ``benchmarks/gpu/rsl_rl_go1.py`` JSON) against env steps, as a PNG.

    .venv/bin/python benchmarks/gpu/plot_training.py runs/tracking.json            # writes runs/tracking.png
    .venv/bin/python benchmarks/gpu/plot_training.py RUN.json --out fig.png --title "G1 tracking"

Panels: the mean episode length (seconds, at the task's 50 Hz unless ``--dt`` says otherwise), every
``Episode_Reward/<term>`` the run logged (mjlab's tags; the positive terms), and, on a rough task, the
terrain level (mean and highest over the envs). Against env steps rather than wall-clock, so runs that
shared a GPU are read fairly. Without matplotlib it prints a one-line notice and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gym_graphreset.bench.plotting import load_training_curve


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_rows(rows: list[dict[str, Any]]) -> None:
    """Refuse, naming the row and field, what the panels cannot draw (a non-numeric value where a number goes).

    Raises:
        ValueError: ``env_steps`` not a number; ``episode_length`` neither a number nor null; ``episode_reward`` or
            ``terrain_level`` neither null nor an object of numbers (or nulls).
    """
    for i, row in enumerate(rows):
        if not _number(row["env_steps"]):
            raise ValueError(f"row {i}: 'env_steps' must be a number, got {row['env_steps']!r}")
        if row["episode_length"] is not None and not _number(row["episode_length"]):
            raise ValueError(f"row {i}: 'episode_length' must be a number or null, got {row['episode_length']!r}")
        for key in ("episode_reward", "terrain_level"):
            value = row.get(key)
            if value is None:
                continue
            if not isinstance(value, dict) or not all(v is None or _number(v) for v in value.values()):
                raise ValueError(f"row {i}: '{key}' must be null or an object of numbers, got {value!r}")


def _series(rows: list[dict[str, Any]], get: Any) -> tuple[list[float], list[float]]:
    """(env steps in millions, values) over the rows where ``get(row)`` is not None."""
    xs, ys = [], []
    for row in rows:
        value = get(row)
        if value is not None:
            xs.append(row["env_steps"] / 1e6)
            ys.append(float(value))
    return xs, ys


def plot(rows: list[dict[str, Any]], out: Path, title: str, dt: float) -> Path | None:
    """Draw the panels of :mod:`plot_training` for ``rows`` into ``out``; returns ``out``, or None (and draws
    nothing) when no row holds a value to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    terms = sorted({t for r in rows for t, v in (r.get("episode_reward") or {}).items() if v is not None and v > 0})
    levels = any(r.get("terrain_level") for r in rows)
    if not terms and not levels and all(r["episode_length"] is None for r in rows):
        return None
    marker = "o" if len(rows) < 3 else None  # a line through one point draws nothing
    fig, axes = plt.subplots(1, 2 + levels, figsize=(5.0 * (2 + levels), 3.6), squeeze=False)
    ax = axes[0][0]
    ax.plot(*_series(rows, lambda r: None if r["episode_length"] is None else r["episode_length"] * dt), marker=marker)
    ax.set(xlabel="env steps (M)", ylabel="mean episode length (s)", title="episode length")
    ax = axes[0][1]
    for term in terms:
        values = _series(rows, lambda r, t=term: (r.get("episode_reward") or {}).get(t))
        ax.plot(*values, label=term.split("/")[-1], marker=marker)
    ax.set(xlabel="env steps (M)", ylabel="episode sum / episode length (s)", title="Episode_Reward/<term>")
    if terms:
        ax.legend(fontsize=7)
    if levels:
        ax = axes[0][2]
        for key in ("mean", "max"):
            ax.plot(*_series(rows, lambda r, k=key: (r.get("terrain_level") or {}).get(k)), label=key, marker=marker)
        ax.set(xlabel="env steps (M)", ylabel="terrain level", title="terrain curriculum")
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, draw the figure; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, help="a training JSON written by benchmarks/gpu/rsl_rl_go1.py")
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default: the JSON's, .png)")
    parser.add_argument("--title", default=None, help="figure title (default: the JSON's file name)")
    parser.add_argument("--dt", type=float, default=0.02, help="seconds per env step (default: 0.02, 50 Hz)")
    args = parser.parse_args(argv)
    if not args.json.is_file():
        parser.error(f"no such JSON: {args.json}")
    if not (args.dt > 0 and math.isfinite(args.dt)):
        parser.error(f"--dt must be a finite number > 0, got {args.dt}")
    out = args.out or args.json.with_suffix(".png")
    if not out.parent.is_dir():
        parser.error(f"--out: no folder {out.parent}")
    try:
        rows = load_training_curve(args.json)
        check_rows(rows)
    except (OSError, ValueError) as exc:
        parser.error(f"{args.json}: {exc}" if str(args.json) not in str(exc) else str(exc))
    if importlib.util.find_spec("matplotlib") is None:
        print("matplotlib is not installed (pip install matplotlib): no figure")
        return 0
    if plot(rows, out, args.title or args.json.stem, args.dt) is None:
        print(f"nothing to draw: no row of {args.json} has an episode length, a reward term or a terrain level")
        return 1
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
