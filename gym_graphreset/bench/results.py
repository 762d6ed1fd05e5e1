"""What a bench run returns and writes: :class:`ModeResult`, the Markdown report and the JSON file.

:mod:`gym_graphreset.bench.runner` measures; this module holds the results' type and their rendering, which the
CLI, the peer comparison and the plots share.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

__all__ = ["ModeResult", "env_versions", "save_json", "table"]


@dataclass
class ModeResult:
    """One mode's measurement."""

    mode: str
    env_id: str
    num_envs: int
    device: str
    steps: int
    ms_per_step: float
    env_steps_per_s: float
    host_syncs_per_step: float | None
    peak_gpu_mem_mb: float | None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def cpu_baseline(
        cls, mode: str, env_id: str, num_envs: int, steps: int, elapsed: float, transitions: int, **extra: Any
    ) -> ModeResult:
        """A CPU engine's measurement: ``steps`` rounds making ``transitions`` env steps in ``elapsed`` s."""
        return cls(
            mode=mode,
            env_id=env_id,
            num_envs=num_envs,
            device="cpu",
            steps=steps,
            ms_per_step=elapsed / steps * 1e3,
            env_steps_per_s=transitions / elapsed,
            host_syncs_per_step=None,
            peak_gpu_mem_mb=None,
            extra=extra,
        )


def env_versions() -> dict[str, str]:
    """Versions of what the numbers depend on."""
    versions = {"python": platform.python_version(), "torch": torch.__version__, "gymnasium": gym.__version__}
    for name in ("warp", "mujoco", "mujoco_warp"):
        try:
            module = __import__(name)
            versions[name] = str(getattr(module, "__version__", "?"))
        except ImportError:
            pass
    if torch.cuda.is_available():
        versions["gpu"] = torch.cuda.get_device_name()
    return versions


def table(results: Sequence[ModeResult]) -> str:
    """A Markdown table with ratios against the selected-row mode and against bare physics."""
    base = {(r.env_id, r.num_envs): r.ms_per_step for r in results if r.mode == "selected"}
    physics = {(r.env_id, r.num_envs): r.ms_per_step for r in results if r.mode == "bare physics"}
    lines = [
        "| env | envs | mode | ms/step | env-steps/s | speed-up vs selected | x bare physics | host syncs/step |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        ref = base.get((r.env_id, r.num_envs))
        floor = physics.get((r.env_id, r.num_envs))
        ratio = f"{ref / r.ms_per_step:.2f}x" if ref else "-"
        over = f"{r.ms_per_step / floor:.3f}" if floor else "-"
        syncs = "-" if r.host_syncs_per_step is None else f"{r.host_syncs_per_step:.2f}"
        lines.append(
            f"| {r.env_id} | {r.num_envs} | {r.mode} | {r.ms_per_step:.3f} | {r.env_steps_per_s:,.0f} "
            f"| {ratio} | {over} | {syncs} |"
        )
    for key, floor in physics.items():
        parts = {r.mode: r.ms_per_step for r in results if (r.env_id, r.num_envs) == key}
        for suffix in ("", "+compile"):
            if f"non-physics{suffix}" in parts and f"step graph{suffix}" in parts:
                step, rest = parts[f"step graph{suffix}"], parts[f"non-physics{suffix}"]
                lines.append(
                    f"\n{key[0]} x{key[1]}: step graph{suffix} {step:.3f} ms = {step / (floor + rest):.3f} x "
                    f"(bare physics {floor:.3f} + non-physics{suffix} {rest:.3f})"
                )
    for r in results:
        if "compile" in r.extra:
            c = r.extra["compile"]
            what = (
                f"compiled in {c['compile_seconds']:.1f} s (first compiled call, not in ms/step), "
                f"{c['graphs']} graph(s)"
                if c["graphs"]
                else f"reused the graphs compiled for an earlier env in this process ({c['compile_seconds']:.2f} s)"
            )
            lines.append(
                f"\n{r.env_id} x{r.num_envs} {r.mode}: {what}, breaks at declared boundaries "
                f"{c['declared_breaks']}, other graph breaks {len(c['graph_breaks'])}, "
                f"recompiles {len(c['recompiles'])}"
                + "".join(f"\n  - {item}" for item in c["graph_breaks"] + c["recompiles"])
            )
    return "\n".join(lines)


def save_json(results: Sequence[ModeResult], path: Path) -> None:
    """Write results with the versions they were measured with."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"versions": env_versions(), "results": [asdict(r) for r in results]}, indent=2))
