"""The benchmark plots: ms per batched step per env and batch, and env-steps/s against the number of envs.

Used by the CLI, the PPO example and the soak run. matplotlib is the optional extra ``plot``: without it
:func:`import_pyplot` warns and the caller keeps its JSON and skips the PNG.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gym_graphreset.bench.peers.compare import PeerHeadline
from gym_graphreset.bench.results import ModeResult

__all__ = [
    "TRAINING_FIELDS",
    "final_level",
    "import_pyplot",
    "is_cpu_baseline",
    "load_training_curve",
    "plot_curves",
    "plot_peer_comparison",
    "plot_peer_headlines",
    "plot_results",
    "plot_soak",
    "plot_training_curves",
    "same_task",
    "save_figure",
    "time_to_reach",
]


def import_pyplot(path: Path) -> Any:
    """``matplotlib.pyplot`` (Agg backend), or ``None`` after a warning when the extra is missing.

    A run whose work is done must not crash over its plot: callers skip the PNG and keep the JSON.
    """
    try:
        import matplotlib
    except ImportError:
        warnings.warn(f"matplotlib is not installed (the `plot` extra): skipped the plot {path}", stacklevel=3)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(plt: Any, fig: Any, path: Path, dpi: int) -> bool:
    """Lay out ``fig``, write it to ``path`` (making its folder) and close it; returns ``True``."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return True


def is_cpu_baseline(result: ModeResult) -> bool:
    """Whether a result is a CPU engine users would run instead (EnvPool, Gymnasium's AsyncVectorEnv)."""
    return result.mode.startswith(("envpool", "gymnasium async"))


def same_task(gpu_env_id: str, cpu_env_id: str) -> bool:
    """Whether a CPU engine ran the GPU env's task (``gym_graphreset/Ant-v5`` and ``Ant-v5``).

    Only these are drawn: a speed-up across tasks (Ant on the CPU, HalfCheetah on the GPU) means nothing.
    """
    return gpu_env_id.split("/")[-1] == cpu_env_id.split("/")[-1]


def plot_results(results: Sequence[ModeResult], path: Path, title: str) -> bool:
    """Time per batched step per env and batch (bars), and env-steps/s against the number of envs (log-log).

    One panel per row, sized for a documentation page (~800 px at 100 dpi, saved at 2x for a sharp
    click-through). The bars compare modes within a batch; the lines show how each mode scales, with the
    best of each CPU engine (EnvPool, Gymnasium's AsyncVectorEnv) as a dashed horizontal line when it ran
    the same task. Returns whether the PNG was written (``False``, with a warning, when matplotlib is missing).
    """
    plt = import_pyplot(path)
    if plt is None:
        return False

    gpu = [r for r in results if not is_cpu_baseline(r)]
    cpu = [r for r in results if is_cpu_baseline(r) and any(same_task(g.env_id, r.env_id) for g in gpu)]
    groups = sorted({(r.env_id, r.num_envs) for r in gpu}, key=lambda g: (g[0], g[1]))
    modes = list(dict.fromkeys(r.mode for r in gpu))  # in the order they were measured
    one_size = len({r.num_envs for r in gpu}) == 1  # a throughput line needs two sizes: bars alone
    fig, axes = plt.subplots(1 if one_size else 2, 1, figsize=(8, 4.8 if one_size else 9), squeeze=False)
    bars, lines = axes[0][0], None if one_size else axes[1][0]
    width = 0.8 / max(len(modes), 1)
    for k, mode in enumerate(modes):
        hits = [(i, r) for i, g in enumerate(groups) for r in gpu if (r.env_id, r.num_envs) == g and r.mode == mode]
        bars.bar([i + k * width for i, _ in hits], [r.ms_per_step for _, r in hits], width, label=mode)
    bars.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(groups))])
    bars.set_xticklabels([f"{g[0].split('/')[-1]}\n{g[1]:,} envs" for g in groups])
    bars.set_ylabel("ms per batched step\n(lower is better)")
    bars.set_title("time of one step of all envs, per mode", fontsize=10)
    # Above the axes, never over the bars.
    bars.legend(loc="lower center", bbox_to_anchor=(0.5, 1.1), ncol=min(len(modes), 4), frameon=False)
    if lines is not None:
        several_tasks = len({r.env_id for r in gpu}) > 1
        for env_id in dict.fromkeys(r.env_id for r in gpu):
            for mode in modes:
                line = sorted((r for r in gpu if r.env_id == env_id and r.mode == mode), key=lambda r: r.num_envs)
                if line:
                    name = f"{env_id.split('/')[-1]} {mode}" if several_tasks else mode
                    lines.plot([r.num_envs for r in line], [r.env_steps_per_s for r in line], marker="o", label=name)
        for engine in dict.fromkeys(r.mode.split(" x")[0] for r in cpu):  # each engine's best: one line
            top = max((r for r in cpu if r.mode.startswith(engine)), key=lambda r: r.env_steps_per_s)
            lines.axhline(
                top.env_steps_per_s,
                linestyle="--",
                color="grey" if "gymnasium" in engine else "black",
                label=f"CPU, best: {top.mode} ({top.env_steps_per_s:,.0f})",
            )
        lines.set_xscale("log", base=2)
        lines.set_yscale("log")
        lines.set_xlabel("number of envs")
        lines.set_ylabel("env-steps/s\n(higher is better)")
        lines.set_title("throughput against the number of envs", fontsize=10)
        lines.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8, frameon=False)
    fig.suptitle(title)
    return save_figure(plt, fig, path, dpi=200)


def plot_curves(curves: Mapping[str, Mapping[str, Sequence[float]]], path: Path, title: str) -> bool:
    """Learning curves: mean episode return against env steps, then against wall time, one panel per row.

    ``curves`` maps a label to a run's ``env_steps``, ``seconds`` and ``mean_return`` (as the PPO example
    saves them). Each run has its own marker and line style.
    Returns whether the PNG was written (``False``, with a warning, when matplotlib is missing).
    """
    plt = import_pyplot(path)
    if plt is None:
        return False
    fig, (by_steps, by_time) = plt.subplots(2, 1, figsize=(8, 7.2), sharey=True)
    styles = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-.")]
    for i, ((label, curve), (marker, style)) in enumerate(zip(curves.items(), styles * len(curves), strict=False)):
        # The first run is drawn on top: a short run is not hidden under a long one.
        kwargs = {"marker": marker, "linestyle": style, "markersize": 4, "label": label, "zorder": 3 + len(curves) - i}
        by_steps.plot(curve["env_steps"], curve["mean_return"], **kwargs)
        by_time.plot(curve["seconds"], curve["mean_return"], **kwargs)
    by_steps.set_xlabel("env steps")
    by_time.set_xlabel("seconds from the first reset")
    for ax in (by_steps, by_time):
        ax.set_ylabel("mean episode return")
        ax.grid(alpha=0.3)
    by_steps.legend(loc="upper left", fontsize=9)
    fig.suptitle(title)
    return save_figure(plt, fig, path, dpi=200)


def plot_soak(windows: Sequence[Mapping[str, float]], path: Path, title: str) -> bool:
    """A soak run: the mean time per batched step of each window of steps (``step``, ``ms_per_step``).

    Flat after the first window (warm-up and capture) means no drift. Returns whether the PNG was written.
    """
    plt = import_pyplot(path)
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([w["step"] for w in windows], [w["ms_per_step"] for w in windows], marker="o")
    ax.set_xlabel("step (end of each window)")
    ax.set_ylabel("ms per batched step\n(window mean)")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    return save_figure(plt, fig, path, dpi=200)


def plot_peer_comparison(results: Sequence[ModeResult], path: Path, title: str) -> bool:
    """Env-steps/s against envs for ours and each GPU peer (top), step / own-physics ratio (bottom).

    One panel per row, sized for a page ~800 px wide. Ours: the fastest mode at each size, one line per
    env id (model variant), and its bare physics dotted; a peer: its step and its own physics dotted.
    Returns whether the PNG was written.
    """
    from gym_graphreset.bench.peers.compare import PEERS, best_ours
    from gym_graphreset.bench.runner import MODES

    plt = import_pyplot(path)
    if plt is None:
        return False
    peers = [r for r in results if r.extra.get("engine") in PEERS]
    physics = {(r.env_id, r.num_envs): r.ms_per_step for r in results if r.mode == "bare physics"}
    ids = list(dict.fromkeys(r.env_id for r in results if r.mode in MODES))
    fig, (rate, ratio) = plt.subplots(2, 1, figsize=(8, 8.5), sharex=True)
    for env_id in ids:
        best = [b for n in sorted({r.num_envs for r in results}) if (b := best_ours(results, n, env_id)) is not None]
        if not best:
            continue
        name = f"ours {env_id.split('/')[-1]}"
        (line,) = rate.plot([b.num_envs for b in best], [b.env_steps_per_s for b in best], marker="o", label=name)
        floors = [(b, physics[(env_id, b.num_envs)]) for b in best if (env_id, b.num_envs) in physics]
        if floors:
            xs = [b.num_envs for b, _ in floors]
            rate.plot(
                xs,
                [b.num_envs / f * 1e3 for b, f in floors],
                ":",
                marker="x",
                color=line.get_color(),
                label=f"{name} physics",
            )
            ratio.plot(xs, [b.ms_per_step / f for b, f in floors], marker="o", color=line.get_color(), label=name)
    for engine in dict.fromkeys(p.mode for p in peers):
        line_ = sorted((p for p in peers if p.mode == engine), key=lambda p: p.num_envs)
        xs = [p.num_envs for p in line_]
        name = f"{engine} {line_[0].env_id}"
        rate.plot(xs, [p.env_steps_per_s for p in line_], marker="s", color="black", label=name)
        rate.plot(
            xs,
            [p.num_envs / p.extra["physics_ms"] * 1e3 for p in line_],
            ":",
            marker="x",
            color="black",
            label=f"{name} physics",
        )
        ratio.plot(xs, [p.ms_per_step / p.extra["physics_ms"] for p in line_], marker="s", color="black", label=name)
    sizes = sorted({r.num_envs for r in results})
    rate.set_xscale("log", base=2)
    rate.set_xticks(sizes, [str(n) for n in sizes], minor=False)
    rate.xaxis.set_minor_locator(plt.NullLocator())
    rate.set_yscale("log")
    rate.set_ylabel("env-steps/s (higher is better)")
    rate.set_title(title, fontsize=11)
    rate.legend(fontsize=8)
    ratio.axhline(1.0, color="grey", linewidth=0.8)
    ratio.set_xlabel("number of envs")
    ratio.set_ylabel("step time / own bare physics time")
    ratio.legend(fontsize=8)
    for ax in (rate, ratio):
        ax.grid(True, which="both", alpha=0.3)
    return save_figure(plt, fig, path, dpi=100)


def plot_peer_headlines(tasks: Mapping[str, PeerHeadline], path: Path, title: str, peer: str = "mjlab") -> bool:
    """Each task's env-steps/s, ours against the peer: medians as bars, the rounds' range as whiskers.

    One row per task (``tasks``: label -> :func:`~gym_graphreset.bench.peers.compare.peer_headline`), the ratio's
    median and range written beside it. Returns whether the PNG was written.
    """
    plt = import_pyplot(path)
    if plt is None:
        return False
    labels = list(tasks)
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.9 * len(labels)))
    height = 0.38
    top = max(h.ours[2] for h in tasks.values()) / 1e3
    for i, label in enumerate(labels):
        h = tasks[label]
        for offset, (median, low, high), color, name in (
            (height / 2, h.peer, "0.25", peer),
            (-height / 2, h.ours, "tab:blue", "gym_graphreset"),
        ):
            ax.barh(
                i + offset,
                median / 1e3,
                height,
                xerr=[[(median - low) / 1e3], [(high - median) / 1e3]],
                color=color,
                capsize=3,
                label=name if i == 0 else None,
            )
        ratio, low, high = h.ratio
        ax.text(
            h.ours[2] / 1e3 + top * 0.02,
            i - height / 2,
            f"{ratio:.2f}x mjlab (range {low:.2f}-{high:.2f})",
            va="center",
        )
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.45)
    ax.set_xlabel("env-steps/s, thousands (median of alternated rounds, whiskers: range; higher is better)")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="lower right")
    return save_figure(plt, fig, path, dpi=100)


TRAINING_FIELDS = ("wall_s", "env_steps", "track_lin_vel", "episode_length")
"""Keys every row of a training-curve JSON has (``{"rows": [{...}, ...]}``); see :func:`load_training_curve`."""


def load_training_curve(path: Path) -> list[dict[str, Any]]:
    """The rows of a training-curve JSON, checked to carry :data:`TRAINING_FIELDS`.

    The format, shared by mjlab's run (``benchmarks/gpu/mjlab_train.py``) and ours: a JSON object whose
    ``"rows"`` is a list, one row per logged iteration, with ``wall_s`` (seconds since the training loop
    started), ``env_steps`` (collected so far), ``track_lin_vel`` (the linear-velocity tracking reward:
    weighted, dt-scaled episode sum over the maximum episode length in seconds, averaged over the episodes
    that ended; ``null`` when none did) and ``episode_length`` (mean steps of recently finished episodes,
    or ``null``). Other keys are kept and ignored.

    Raises:
        ValueError: not JSON, no ``rows`` list, or a row that is not an object or misses one of
            :data:`TRAINING_FIELDS`.
    """
    import json

    try:
        record = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise ValueError(f"{path}: expected a JSON object with a 'rows' list, got {type(record).__name__}")
    rows = record.get("rows")
    if not isinstance(rows, list):
        raise ValueError(f"{path}: expected a 'rows' list, got {type(rows).__name__} (keys: {sorted(record)})")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"{path}: row {i} is a {type(row).__name__}, not an object")
        missing = [k for k in TRAINING_FIELDS if k not in row]
        if missing:
            raise ValueError(f"{path}: row {i} lacks {missing} (every row needs {list(TRAINING_FIELDS)})")
    return rows


def final_level(rows: list[dict[str, Any]], key: str = "track_lin_vel", last: int = 5) -> float | None:
    """The mean of the last ``last`` non-null values of ``key``: where a run ended (``None`` if it has none)."""
    values = [r[key] for r in rows if r.get(key) is not None][-last:]
    return sum(values) / len(values) if values else None


def time_to_reach(
    rows: list[dict[str, Any]], level: float, key: str = "track_lin_vel", higher_is_better: bool = True
) -> float | None:
    """The first ``wall_s`` at which ``key`` is at least ``level`` (at most, for an error: ``higher_is_better=False``).

    ``None`` if never. A row without ``key`` or with a null value does not count.
    """
    return next(
        (
            r["wall_s"]
            for r in rows
            if r.get(key) is not None and (r[key] >= level if higher_is_better else r[key] <= level)
        ),
        None,
    )


def plot_training_curves(runs: dict[str, Path], path: Path, title: str, reference: str | None = None) -> bool:
    """Tracking reward (top) and episode length (bottom) against wall-clock seconds, one line per run.

    ``runs`` maps a legend label (``"mjlab"``, ``"gym_graphreset"``) to its training-curve JSON (see
    :func:`load_training_curve`); rows with ``null`` values are skipped. With ``reference`` (a label of
    ``runs``), the reference run's :func:`final_level` is drawn as a dashed line and each run's legend says
    when it first reached it (:func:`time_to_reach`). Returns whether the PNG was written.

    Raises:
        ValueError: ``reference`` is not a label of ``runs``, or a file is not a training curve.
    """
    if reference is not None and reference not in runs:
        raise ValueError(f"`reference` must be one of {sorted(runs)}, got {reference!r}")
    curves = {label: load_training_curve(p) for label, p in runs.items()}
    level = final_level(curves[reference]) if reference is not None else None
    plt = import_pyplot(path)
    if plt is None:
        return False
    fig, (reward, length) = plt.subplots(2, 1, figsize=(8, 8), sharex=True)
    for label, rows in curves.items():
        name = label
        if level is not None:
            reached = time_to_reach(rows, level)
            name += (
                f" (reached {level:.3f} at {reached:.0f} s)"
                if reached is not None
                else f" (not {level:.3f} in its {rows[-1]['wall_s']:.0f} s)"
            )
        for ax, key, legend in ((reward, "track_lin_vel", name), (length, "episode_length", label)):
            points = [(r["wall_s"], r[key]) for r in rows if r[key] is not None]
            if points:
                ax.plot(*zip(*points, strict=True), label=legend)
    if level is not None:
        reward.axhline(level, linestyle="--", color="grey", linewidth=1, label=f"{reference}'s final level")
    reward.set_ylabel("linear-velocity tracking reward\n(per second of max episode)")
    reward.set_title(title, fontsize=11)
    length.set_ylabel("mean episode length (steps)")
    length.set_xlabel("wall-clock seconds since training started")
    for ax in (reward, length):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=9)
    return save_figure(plt, fig, path, dpi=100)
