"""Redraw the figures in docs/img from the measurements kept in benchmarks/results/ (no GPU needed).

    python docs/tools/figures.py

Each benchmark JSON (``{"versions": ..., "results": [ModeResult fields, ...]}``) becomes one figure of
``gym_graphreset.bench.plotting.plot_results``; the two PPO runs (.npz) become one learning-curve
figure, and the soak run's windows one line. A comparison with mjlab at one or two batch sizes is a bar
chart of each side's env-steps/s (one run each, as the pages say); over more sizes, lines. The training
runs are drawn against wall-clock or env steps. Every text is drawn at least ``MIN_PT`` points per 8 inches
of figure width, so that at the page's column width (~640-740 px) no label is under 10 px. The
rough-terrain picture is rendered with ``mujoco.Renderer`` (an OpenGL context: EGL on a headless machine,
``MUJOCO_GL=egl``); without one it is skipped with a notice.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from gym_graphreset.bench.peers.compare import PeerHeadline, load_results, peer_headline, rounds_rows
from gym_graphreset.bench.plotting import (
    plot_curves,
    plot_peer_comparison,
    plot_peer_headlines,
    plot_results,
    plot_soak,
    plot_training_curves,
)
from gym_graphreset.bench.results import ModeResult

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
IMG = ROOT / "docs" / "img"

# figure stem -> the JSON files it draws (several: the runs of one configuration, merged).
BENCHMARKS = {
    "h200-Ant-v5-4096-all-modes": ["h200-Ant-v5-4096-all-modes.json"],
    "h200-Ant-v5-512-all-modes": ["h200-Ant-v5-512-all-modes.json"],
    "h200-Ant-v5-baselines": ["h200-Ant-v5-baselines.json"],
    "h200-HalfCheetah-v5-baselines": ["h200-HalfCheetah-v5-baselines.json"],
    "h200-Ant-v5-sizes": ["h200-Ant-v5-sizes.json"],
    "h200-HalfCheetah-v5-sizes": ["h200-HalfCheetah-v5-sizes.json"],
    "h200-Humanoid-v5-sizes": ["h200-Humanoid-v5-sizes.json"],
    "h200-ResetHeavyHalfCheetah-v0-all-modes": ["h200-ResetHeavyHalfCheetah-v0-all-modes.json"],
    "h200-ResetHeavyHalfCheetah-v0-compile": ["h200-ResetHeavyHalfCheetah-v0-compile.json"],
    "h200-Ant-v5-4096-compile": ["h200-Ant-v5-4096-compile.json"],
}
# figure stem -> the JSON files of one comparison with mjlab (one run of each side).
PEERS = {
    "h200-Go1-vs-mjlab-step-states": ["h200-Go1-vs-mjlab-step-states.json"],
    "h100-G1-Tracking-vs-mjlab": ["h100-G1-Tracking-vs-mjlab.json", "h100-G1-Tracking-4096-compile.json"],
    "h100-G1-vs-mjlab": ["h100-G1-vs-mjlab.json"],
    "h100-Go1-scale-sweep-vs-mjlab": ["h100-Go1-scale-sweep-vs-mjlab.json"],
}
PEER_TITLES = {
    "h200-Go1-vs-mjlab-step-states": "Go1 flat, mjlab's go1.xml",
    "h100-G1-Tracking-vs-mjlab": "G1 motion tracking, mjlab's g1.xml and sensors",
    "h100-G1-vs-mjlab": "G1 flat, mjlab's g1.xml and sensors",
    "h100-Go1-scale-sweep-vs-mjlab": "Go1 flat, mjlab's go1.xml",
}
# figure stem -> (legend label -> training-curve JSON), drawn with mjlab's run as the reference.
TRAINING = {
    "h200-Go1-train-vs-mjlab": {
        "mjlab": "h200-mjlab-train-Go1-4096.json",
        "gym_graphreset, PPO example": "h200-ppo-Go1-4096.json",
    },
    "h200-Go1-rsl_rl-vs-mjlab": {
        "mjlab": "h200-mjlab-train-Go1-4096.json",
        "gym_graphreset, rsl_rl": "h200-rsl_rl-Go1-4096.json",
        "gym_graphreset, PPO example": "h200-ppo-Go1-4096.json",
    },
}
# The first page's comparison with mjlab: task -> (its `bench --rounds` JSON, our model variant on the same
# work). Each is the sides alternated three times in one run on one card; ours compiled (LEGGED_MODE).
LEGGED_ROUNDS = {
    "Go1 flat velocity": ("h100-Go1-rounds-4096.json", "gym_graphreset/Go1-Velocity-Flat-v0[mjlab-work]"),
    # measured without our forward before the observations (mjlab runs one): an upper bound of identical work's
    "G1 motion tracking, no forward before obs": (
        "h100-G1-Tracking-rounds-4096.json",
        "gym_graphreset/G1-Tracking-Flat-v0[mjlab-work]",
    ),
}
LEGGED_MODE = "step graph+compile"
LEGGED_ENVS = 4096
LEGGED = ROOT / "docs" / "legged.json"
MIN_PT = 10.0  # points per 8 inches of figure width
SOAK = "h200-soak-HalfCheetah-v5-4096"
PPO = {"eager update": "h200-ppo-Ant-v5-4096-eager-update.npz", "captured update": "h200-ppo-Ant-v5-4096.npz"}


def load(names: list[str]) -> list[ModeResult]:
    """The results of the named JSON files under benchmarks/results/."""
    return [ModeResult(**r) for name in names for r in json.loads((RESULTS / name).read_text())["results"]]


@contextlib.contextmanager
def readable_text() -> Iterator[None]:
    """Raise every text of a figure saved inside the block to at least ``MIN_PT`` per 8 inches of width.

    The plotting helpers size their legends for a full-size figure; the pages show figures at the column's
    width, so a figure's smallest text is set from its width in inches.
    """
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    savefig = Figure.savefig

    def save(fig: Figure, *args: Any, **kwargs: Any) -> Any:
        least = MIN_PT * max(1.0, fig.get_figwidth() / 8.0)
        moved: list[tuple[list[Any], list[str]]] = []  # long legends inside a panel: under the panels instead
        fig.canvas.draw()
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None or len(legend.get_texts()) <= 4:
                continue
            if legend.get_window_extent().overlaps(ax.get_window_extent()):
                legend.remove()
                moved.append(ax.get_legend_handles_labels())
        rect = (0.0, 0.0, 1.0, 1.0)
        if moved:
            fig.set_figheight(max(fig.get_figheight(), 0.55 * fig.get_figwidth()))
            for handles, labels in moved:
                fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False, fontsize=least)
            rows = sum(-(-len(labels) // 3) for _, labels in moved)
            rect = (0.0, (rows * 1.5 * least / 72 + 0.1) / fig.get_figheight(), 1.0, 1.0)
        fig.canvas.draw()  # tick labels exist once drawn
        for text in fig.findobj(Text):
            if text.get_text() and float(text.get_fontsize()) < least:
                text.set_fontsize(least)
        with contextlib.suppress(ValueError, RuntimeError):  # a layout that cannot be solved keeps its own
            fig.tight_layout(rect=rect)
        return savefig(fig, *args, **kwargs)

    Figure.savefig = save  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        Figure.savefig = savefig  # type: ignore[method-assign]


def plot_peer_bars(runs: list[list[ModeResult]], path: Path, title: str) -> None:
    """One panel per batch size: each side's env-steps/s as a bar, its step / own physics beside it.

    ``runs`` holds the results of each file apart: a step is divided by the bare physics of its own run.
    """
    results = [r for run in runs for r in run]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r.num_envs for r in results})
    rows = [r for r in results if r.mode not in ("bare physics",) and not r.mode.startswith("non-physics")]
    fig, axes = plt.subplots(len(sizes), 1, figsize=(8, 1.4 + 0.8 * len(rows) + 0.5 * len(sizes)))
    axes = np.atleast_1d(axes)
    for ax, n in zip(axes, sizes, strict=True):
        here = [r for r in rows if r.num_envs == n]
        here.sort(key=lambda r: (r.extra.get("engine") is None, r.env_steps_per_s))
        # each step against the bare physics of its own run (the files are separate runs)
        physics = {
            (r.env_id, id(run)): r.ms_per_step
            for run in runs
            for r in run
            if r.num_envs == n and r.mode == "bare physics"
        }
        labels, rates, notes, colors = [], [], [], []
        for r in here:
            peer = r.extra.get("engine") is not None
            run = next(run for run in runs if any(x is r for x in run))
            own = r.extra.get("physics_ms") if peer else physics.get((r.env_id, id(run)))
            labels.append(r.mode if peer else f"ours, {r.mode}")
            rates.append(r.env_steps_per_s / 1e3)
            notes.append(
                f"{r.env_steps_per_s / 1e3:,.1f}k" + (f"  (step {r.ms_per_step / own:.2f}x own physics)" if own else "")
            )
            colors.append("black" if peer else "tab:blue")
        ax.barh(labels, rates, color=colors)
        for y, (rate, note) in enumerate(zip(rates, notes, strict=True)):
            ax.text(rate, y, " " + note, va="center")
        ax.set_xlim(0, max(rates) * 1.75)
        ax.set_xlabel(f"env-steps/s, thousands ({n} envs; higher is better)")
        ax.grid(True, axis="x", alpha=0.3)
    axes[0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def benchmarks_script(name: str) -> ModuleType:
    """Import ``benchmarks/gpu/<name>.py`` (a script folder, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "gpu" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def draw_peers_and_training() -> None:
    """The comparisons with mjlab and the training runs; print each path."""
    for stem, names in PEERS.items():
        results = load(names)
        gpu = json.loads((RESULTS / names[0]).read_text())["versions"].get("gpu", "GPU")
        gpu = gpu.replace(" HBM3", "").replace("NVIDIA ", "")
        title = f"{PEER_TITLES[stem]}, one {gpu}\none run of each side, not alternated"
        if len({r.num_envs for r in results}) <= 2:
            plot_peer_bars([load([name]) for name in names], IMG / f"{stem}.png", title)
        elif not plot_peer_comparison(results, IMG / f"{stem}.png", title):
            continue
        print(IMG / f"{stem}.png")
    for stem, runs in TRAINING.items():
        title = "Go1 flat, 4096 envs, one H200: tracking reward against wall-clock"
        if plot_training_curves({k: RESULTS / v for k, v in runs.items()}, IMG / f"{stem}.png", title, "mjlab"):
            print(IMG / f"{stem}.png")
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / "h100-go1-like-for-like.png"
        benchmarks_script("plot_like_for_like").main([str(RESULTS / "h100-go1-like-for-like"), "--out", str(png)])
        (IMG / png.name).write_bytes(png.read_bytes())
        print(IMG / png.name)
    out = IMG / "h100-g1-tracking-training.png"
    title = "G1 motion tracking, stock rsl_rl, 4096 envs, one H100 80GB (shared with a second run)"
    json_path = RESULTS / "h100-training-shared-gpu" / "g1-tracking.json"
    if benchmarks_script("plot_training").main([str(json_path), "--out", str(out), "--title", title]) == 0:
        print(out)


def _k(value: float) -> str:
    return f"{value / 1e3:,.0f}k"


def legged_headlines() -> dict[str, PeerHeadline]:
    """Each task of ``LEGGED_ROUNDS`` summed up over its alternated rounds."""
    return {
        task: peer_headline(rounds_rows(load_results([RESULTS / name])), env_id, LEGGED_MODE, LEGGED_ENVS)
        for task, (name, env_id) in LEGGED_ROUNDS.items()
    }


def legged_table(heads: dict[str, PeerHeadline], gpu: str) -> str:
    """The first page's table: each side's median (range) and the ratio's, over the alternated rounds."""
    lines = [
        f"| task, {LEGGED_ENVS} envs, one {gpu} | this library, env-steps/s | mjlab 1.6 | this library / mjlab "
        "| step / own physics (ours, mjlab) | torch host syncs/step (ours, mjlab) |",
        "| --- | ---: | ---: | ---: | --- | --- |",
    ]
    for task, h in heads.items():
        own = "-" if h.ours_over_physics is None else f"**{h.ours_over_physics[0]:.2f}**"
        syncs = ", ".join(
            "-" if v is None else f"{v:.2f}".rstrip("0").rstrip(".") for v in (h.ours_host_syncs, h.peer_host_syncs)
        )
        lines.append(
            f"| {task} | {_k(h.ours[0])} ({_k(h.ours[1])}-{_k(h.ours[2])}) | {_k(h.peer[0])} ({_k(h.peer[1])}-"
            f"{_k(h.peer[2])}) | **{h.ratio[0]:.2f}x** ({h.ratio[1]:.2f}-{h.ratio[2]:.2f}) "
            f"| {own}, {h.peer_over_physics[0]:.2f} | {syncs} |"
        )
    return "\n".join(lines)


def write_legged() -> None:
    """docs/legged.json (the table the landing pages quote) and its figure, from the rounds files; print the paths."""
    heads = legged_headlines()
    cards = {json.loads((RESULTS / name).read_text())["versions"]["gpu"] for name, _ in LEGGED_ROUNDS.values()}
    if len(cards) != 1:
        raise ValueError(f"the first page's rounds were measured on different cards {sorted(cards)}: rerun on one")
    gpu = cards.pop().replace(" HBM3", "").replace("NVIDIA ", "")
    figure = f"img/{gpu.split()[0].lower()}-legged-vs-mjlab-rounds.png"
    title = f"This library against mjlab 1.6, its tasks and model files, {LEGGED_ENVS} envs, one {gpu}"
    plot_peer_headlines(heads, ROOT / "docs" / figure, title)
    record = {
        "sources": {task: f"benchmarks/results/{name}" for task, (name, _) in LEGGED_ROUNDS.items()},
        "gpu": gpu,
        "mode": LEGGED_MODE,
        "num_envs": LEGGED_ENVS,
        "figure": figure,
        "table": legged_table(heads, gpu),
        "ratios": {task: [round(v, 2) for v in h.ratio] for task, h in heads.items()},
    }
    LEGGED.write_text(json.dumps(record, indent=1) + "\n")
    print(ROOT / "docs" / figure)
    print(LEGGED)


def render_terrain(path: Path) -> bool:
    """Render mjlab's rough set on the generator, 5 levels (difficulty 0 at the back), from the front corner."""
    import mujoco
    from PIL import Image

    from gym_graphreset.terrains.terrain_generator import ROUGH_TERRAINS_CFG, generate_terrain

    terrain = generate_terrain(replace(ROUGH_TERRAINS_CFG, num_rows=5, border_width=2.0))
    model = mujoco.MjModel.from_xml_string(terrain.to_mjcf())
    model.vis.global_.offwidth, model.vis.global_.offheight = 1280, 720
    model.vis.headlight.ambient[:], model.vis.headlight.diffuse[:] = (0.45,) * 3, (0.7,) * 3
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    try:
        renderer = mujoco.Renderer(model, 720, 1280)
    except Exception as exc:  # no OpenGL context on this machine
        print(f"terrain picture skipped: no OpenGL context ({type(exc).__name__}: {exc})")
        return False
    camera = mujoco.MjvCamera()
    camera.lookat[:] = (3.0, 0.0, 0.0)
    camera.distance, camera.azimuth, camera.elevation = 46.0, 200.0, -38.0
    renderer.update_scene(data, camera)
    Image.fromarray(renderer.render()).save(path)
    renderer.close()
    return True


def main() -> None:
    """Write every figure; print each path."""
    with readable_text():
        draw_figures()
    if render_terrain(IMG / "terrain_rough.png"):
        print(IMG / "terrain_rough.png")


def draw_figures() -> None:
    """Every figure drawn with matplotlib; print each path."""
    for stem, names in BENCHMARKS.items():
        results = load(names)
        gpu = json.loads((RESULTS / names[0]).read_text())["versions"].get("gpu", "GPU")
        task = results[0].env_id
        if plot_results(results, IMG / f"{stem}.png", f"{task} on one {gpu}"):
            print(IMG / f"{stem}.png")
    curves = {label: dict(np.load(RESULTS / name)) for label, name in PPO.items()}
    title = "PPO on gym_graphreset/Ant-v5, 4096 envs, one NVIDIA H200"
    if plot_curves(curves, IMG / "h200-ppo-Ant-v5-4096.png", title):
        print(IMG / "h200-ppo-Ant-v5-4096.png")
    soak = json.loads((RESULTS / f"{SOAK}.json").read_text())
    title = f"soak: {soak['env_id']} x{soak['num_envs']}, step graph, one NVIDIA H200"
    if plot_soak(soak["windows"], IMG / f"{SOAK}.png", title):
        print(IMG / f"{SOAK}.png")
    draw_peers_and_training()
    write_legged()


if __name__ == "__main__":
    main()
