"""The benchmark plots: ms/step per env and batch, and env-steps/s against the number of envs.

Used by the CLI, the PPO example and the soak run. matplotlib is the optional extra ``plot``: without it
:func:`import_pyplot` prints a one-line notice and the caller keeps its JSON and skips the PNG.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gym_graphreset.bench import ModeResult

__all__ = ["import_pyplot", "is_cpu_baseline", "plot_results"]


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


def plot_results(results: Sequence[ModeResult], path: Path, title: str) -> bool:
    """ms/step per env and batch (bars), and env-steps/s against the number of envs (lines, log-log).

    ms/step compares modes within a batch; env-steps/s shows how each mode scales, with each CPU
    baseline's best (EnvPool, Gymnasium's AsyncVectorEnv) as a horizontal line. Returns whether the PNG
    was written (``False``, with a notice, when matplotlib is missing).
    """
    plt = import_pyplot(path)
    if plt is None:
        return False

    cpu = [r for r in results if is_cpu_baseline(r)]
    results = [r for r in results if not is_cpu_baseline(r)]
    groups = sorted({(r.env_id, r.num_envs) for r in results}, key=lambda g: (g[0], g[1]))
    modes = list(dict.fromkeys(r.mode for r in results))  # in the order they were measured
    fig, (bars, lines) = plt.subplots(1, 2, figsize=(max(10, 3.2 * len(groups) + 4), 4.2))
    width = 0.8 / max(len(modes), 1)
    for k, mode in enumerate(modes):
        hits = [(i, r) for i, g in enumerate(groups) for r in results if (r.env_id, r.num_envs) == g and r.mode == mode]
        bars.bar([i + k * width for i, _ in hits], [r.ms_per_step for _, r in hits], width, label=mode)
    bars.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(groups))])
    bars.set_xticklabels([f"{g[0].split('/')[-1]}\n{g[1]} envs" for g in groups], fontsize=8)
    bars.set_ylabel("ms per env step (lower is better)")
    bars.legend(fontsize=7)
    for env_id in dict.fromkeys(r.env_id for r in results):
        for mode in modes:
            line = sorted((r for r in results if r.env_id == env_id and r.mode == mode), key=lambda r: r.num_envs)
            if line:
                name = mode if len({r.env_id for r in results}) == 1 else f"{env_id.split('/')[-1]} {mode}"
                lines.plot([r.num_envs for r in line], [r.env_steps_per_s for r in line], marker="o", label=name)
    for engine in dict.fromkeys(r.mode.split(" x")[0] for r in cpu):  # each engine's best: one line
        top = max((r for r in cpu if r.mode.startswith(engine)), key=lambda r: r.env_steps_per_s)
        lines.axhline(
            top.env_steps_per_s,
            linestyle="--",
            color="grey" if "gymnasium" in engine else "black",
            label=f"{top.env_id} {top.mode} (CPU): {top.env_steps_per_s:,.0f}",
        )
    lines.set_xscale("log", base=2)
    lines.set_yscale("log")
    lines.set_xlabel("number of envs")
    lines.set_ylabel("env-steps/s (higher is better)")
    lines.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
