"""Redraw the figures in docs/img from the measurements kept in benchmarks/results/ (no GPU needed).

    python docs/tools/figures.py

Each benchmark JSON (``{"versions": ..., "results": [ModeResult fields, ...]}``) becomes one figure of
``gym_graphreset.bench.plotting.plot_results``; the two PPO runs (.npz) become one learning-curve
figure, and the soak run's windows one line. The rough-terrain picture is rendered with ``mujoco.Renderer``
(an OpenGL context: EGL on a headless machine, ``MUJOCO_GL=egl``); without one it is skipped with a notice.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from gym_graphreset.bench.plotting import plot_curves, plot_results, plot_soak
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
SOAK = "h200-soak-HalfCheetah-v5-4096"
PPO = {"eager update": "h200-ppo-Ant-v5-4096-eager-update.npz", "captured update": "h200-ppo-Ant-v5-4096.npz"}


def load(names: list[str]) -> list[ModeResult]:
    """The results of the named JSON files under benchmarks/results/."""
    return [ModeResult(**r) for name in names for r in json.loads((RESULTS / name).read_text())["results"]]


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
    if render_terrain(IMG / "terrain_rough.png"):
        print(IMG / "terrain_rough.png")


if __name__ == "__main__":
    main()
