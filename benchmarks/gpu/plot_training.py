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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gym_graphreset.bench.plotting import load_training_curve


def _series(rows: list[dict[str, Any]], get: Any) -> tuple[list[float], list[float]]:
    """(env steps in millions, values) over the rows where ``get(row)`` is not None."""
    xs, ys = [], []
    for row in rows:
        value = get(row)
        if value is not None:
            xs.append(row["env_steps"] / 1e6)
            ys.append(float(value))
    return xs, ys


def plot(rows: list[dict[str, Any]], out: Path, title: str, dt: float) -> Path:
    """Draw the panels of :mod:`plot_training` for ``rows`` into ``out``; returns ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    terms = sorted({t for r in rows for t, v in (r.get("episode_reward") or {}).items() if v is not None and v > 0})
    levels = any(r.get("terrain_level") for r in rows)
    fig, axes = plt.subplots(1, 2 + levels, figsize=(5.0 * (2 + levels), 3.6), squeeze=False)
    ax = axes[0][0]
    ax.plot(*_series(rows, lambda r: None if r["episode_length"] is None else r["episode_length"] * dt))
    ax.set(xlabel="env steps (M)", ylabel="mean episode length (s)", title="episode length")
    ax = axes[0][1]
    for term in terms:
        ax.plot(*_series(rows, lambda r, t=term: (r.get("episode_reward") or {}).get(t)), label=term.split("/")[-1])
    ax.set(xlabel="env steps (M)", ylabel="episode sum / episode length (s)", title="Episode_Reward/<term>")
    if terms:
        ax.legend(fontsize=7)
    if levels:
        ax = axes[0][2]
        for key in ("mean", "max"):
            ax.plot(*_series(rows, lambda r, k=key: (r.get("terrain_level") or {}).get(k)), label=key)
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
    if not args.dt > 0:
        parser.error(f"--dt must be > 0, got {args.dt}")
    rows = load_training_curve(args.json)
    if importlib.util.find_spec("matplotlib") is None:
        print("matplotlib is not installed (pip install matplotlib): no figure")
        return 0
    out = plot(rows, args.out or args.json.with_suffix(".png"), args.title or args.json.stem, args.dt)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
