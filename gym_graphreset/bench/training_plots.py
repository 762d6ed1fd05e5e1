"""Training-comparison plots: several labels' seeds of training curves, like for like, and their summary.

:func:`summarize_training_comparison` tabulates where each label's runs ended and when they reached the
reference's final level; :func:`plot_training_comparison` draws their curves against wall-clock seconds and
env steps. The curve loading and figure helpers are :mod:`gym_graphreset.bench.plotting`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gym_graphreset.bench.plotting import final_level, import_pyplot, load_training_curve, save_figure, time_to_reach

__all__ = ["plot_training_comparison", "summarize_training_comparison"]


def _mean_curve(curves: Sequence[list[tuple[float, float]]]) -> tuple[list[float], list[float]]:
    """The mean of several ``(x, y)`` curves on a common grid up to the shortest one's end (linear interpolation)."""
    import numpy as np

    curves = [c for c in curves if c]
    if not curves:
        return [], []
    if len(curves) == 1:
        xs, ys = zip(*curves[0], strict=True)
        return list(xs), list(ys)
    start, end = max(c[0][0] for c in curves), min(c[-1][0] for c in curves)
    if end <= start:
        return [], []
    grid = np.linspace(start, end, 200)
    ys = np.mean([np.interp(grid, *np.asarray(c, dtype=float).T) for c in curves], axis=0)
    return grid.tolist(), ys.tolist()


def summarize_training_comparison(
    runs: Mapping[str, Sequence[Path]],
    reference: str | None = "mjlab",
    key: str = "track_lin_vel",
    higher_is_better: bool = True,
) -> list[dict[str, Any]]:
    """One row per label of ``runs`` (label -> its seeds' training-curve JSONs): where each run ended and when.

    Each row: ``label``, ``seeds``, ``final`` (mean over seeds of
    :func:`~gym_graphreset.bench.plotting.final_level` of ``key``), ``wall_s`` and ``env_steps`` (mean over seeds
    of the last row's), and, when ``reference`` is a label of ``runs``, ``reached_s`` (each seed's
    :func:`~gym_graphreset.bench.plotting.time_to_reach` of the reference's mean final level: at least it, or at
    most it for an error, ``higher_is_better=False``; ``None`` for a seed that did not) and ``fraction`` (their
    mean over the reference's mean wall-clock; ``None`` unless every seed reached it). Seeds with no rows are
    skipped.
    """
    curves = {label: [rows for p in paths if (rows := load_training_curve(p))] for label, paths in runs.items()}

    def mean(xs: Sequence[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    def finals(label: str) -> list[float]:
        return [f for rows in curves[label] if (f := final_level(rows, key)) is not None]

    level = mean(finals(reference)) if reference in curves else None
    ref_wall = mean([rows[-1]["wall_s"] for rows in curves.get(reference or "", [])])
    summary = []
    for label, seeds in curves.items():
        row: dict[str, Any] = {
            "label": label,
            "seeds": len(seeds),
            "final": mean(finals(label)),
            "wall_s": mean([rows[-1]["wall_s"] for rows in seeds]),
            "env_steps": mean([rows[-1]["env_steps"] for rows in seeds]),
            "reached_s": None,
            "fraction": None,
        }
        if level is not None and ref_wall:
            reached = [time_to_reach(rows, level, key, higher_is_better) for rows in seeds]
            row["reached_s"] = reached
            if reached and all(r is not None for r in reached):
                row["fraction"] = sum(r for r in reached if r is not None) / len(reached) / ref_wall
        summary.append(row)
    return summary


def plot_training_comparison(
    runs: Mapping[str, Sequence[Path]],
    path: Path,
    title: str = "Go1 flat velocity tracking, like for like with mjlab",
    reference: str | None = "mjlab",
    key: str = "track_lin_vel",
    higher_is_better: bool = True,
    ylabel: str = "linear-velocity tracking reward\n(mjlab's Episode_Reward, per s)",
) -> bool:
    """A metric against wall-clock seconds (top) and against env steps (bottom), one colour per label.

    ``runs`` maps a label (``"mjlab"``, ``"stock"``, ...) to its seeds' training-curve JSONs (the rows of
    :func:`~gym_graphreset.bench.plotting.load_training_curve`; ``key`` is the row field drawn, by default
    mjlab's ``track_lin_vel``, labelled ``ylabel``): each seed is a thin line, their mean (interpolated on a
    common grid up to the shortest seed's end) a thick one. With ``reference`` among the labels, its mean final
    level is a dashed line and each legend entry says when that label's seeds reached it (at least it, or at
    most it with ``higher_is_better=False``: :func:`summarize_training_comparison`). Returns whether the PNG
    was written (``False``, with a one-line notice, when matplotlib is missing).
    """
    summary = {row["label"]: row for row in summarize_training_comparison(runs, reference, key, higher_is_better)}
    curves = {label: [load_training_curve(p) for p in paths] for label, paths in runs.items()}
    plt = import_pyplot(path)
    if plt is None:
        return False
    fig, (by_time, by_steps) = plt.subplots(2, 1, figsize=(8, 9.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, seeds) in enumerate(curves.items()):
        color, row = colors[i % len(colors)], summary[label]
        name = f"{label} ({row['seeds']} seed{'s' if row['seeds'] != 1 else ''})"
        if row["fraction"] is not None and label != reference:
            name += f": reached {reference}'s final level at {row['fraction']:.2f} of its wall-clock"
        elif row["reached_s"] is not None and label != reference:
            done = sum(r is not None for r in row["reached_s"])
            name += f": {done}/{len(row['reached_s'])} seeds reached {reference}'s final level"
        for ax, x in ((by_time, "wall_s"), (by_steps, "env_steps")):
            points = [[(r[x], r[key]) for r in rows if r.get(key) is not None] for rows in seeds]
            for seed in points:
                if seed and len(points) > 1:
                    ax.plot(*zip(*seed, strict=True), color=color, linewidth=0.7, alpha=0.35)
            xs, ys = _mean_curve(points)
            if xs:
                ax.plot(xs, ys, color=color, linewidth=2.0, label=name)
    level = summary[reference]["final"] if reference in summary else None
    for ax in (by_time, by_steps):
        if level is not None:
            final = f"{reference}'s final level ({level:.3f})"
            ax.axhline(level, linestyle="--", color="grey", linewidth=1, label=final)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    by_time.set_xlabel("wall-clock seconds since training started")
    by_steps.set_xlabel("env steps")
    by_time.set_title(title, fontsize=11)
    handles, labels = by_time.get_legend_handles_labels()  # under the bottom panel, never over a curve
    by_steps.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    return save_figure(plt, fig, path, dpi=100)
