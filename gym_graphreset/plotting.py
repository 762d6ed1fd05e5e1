"""The benchmark plots: ms per batched step per env and batch, and env-steps/s against the number of envs.

Used by the CLI, the PPO example and the soak run. matplotlib is the optional extra ``plot``: without it
:func:`import_pyplot` prints a one-line notice and the caller keeps its JSON and skips the PNG.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gym_graphreset.bench import ModeResult

__all__ = ["import_pyplot", "is_cpu_baseline", "plot_curves", "plot_results", "plot_soak", "same_task"]


def import_pyplot(path: Path) -> Any:
    """``matplotlib.pyplot`` (Agg backend), or ``None`` after a one-line notice when the extra is missing.

    A run whose work is done must not crash over its plot: callers skip the PNG and keep the JSON.
    """
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed (pip install 'gym_graphreset[plot]'): skipped the plot {path}")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    the same task. Returns whether the PNG was written (``False``, with a notice, when matplotlib is missing).
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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=200)
    plt.close(fig)
    return True


def plot_curves(curves: Mapping[str, Mapping[str, Sequence[float]]], path: Path, title: str) -> bool:
    """Learning curves: mean episode return against env steps, then against wall time, one panel per row.

    ``curves`` maps a label to a run's ``env_steps``, ``seconds`` and ``mean_return`` (as the PPO example
    saves them). Each run has its own marker and line style.
    Returns whether the PNG was written (``False``, with a notice, when matplotlib is missing).
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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=200)
    plt.close(fig)
    return True


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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=200)
    plt.close(fig)
    return True
