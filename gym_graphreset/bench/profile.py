"""Where a step's time goes: a torch-profiler trace of timed steps, grouped into what grows with the batch.

:func:`profile_step` runs one mode's steps under ``torch.profiler`` (CUDA activity included on a GPU,
captured-graph replays too) and sums device time per kernel into four groups:

- ``physics``: MuJoCo Warp's kernels (every warp kernel but the library's own, :data:`OWN_WARP_KERNELS`:
  warp names a CUDA kernel ``<function>_<hash>_cuda_kernel_forward``, with no module in it);
- ``warp``: the library's own warp kernels (the fused masked reset);
- ``copies``: memcpy and memset (buffers, the publication ring, host transfers);
- ``torch``: every other kernel (terms, masks, observation assembly).

The physics group is a lower bound on a CUDA graph: kernels inside the solver's conditional nodes are
not all traced (Go1 at 16,384 envs: 7.8 ms of physics kernels traced against 23.7 ms timed), while the
torch and copy kernels are. On a CPU there are no device kernels: the groups then sum the CPU time of
torch's operators (``torch`` and ``copies``; warp's CPU kernels are not visible to the profiler).
``python -m gym_graphreset profile`` prints the table and writes it as JSON; :func:`profile_sweep` repeats it
over batch sizes, to show which group grows faster than the physics.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import torch

from gym_graphreset.bench.runner import MODES, warmed_env

__all__ = [
    "GROUPS",
    "OWN_WARP_KERNELS",
    "Group",
    "StepProfile",
    "group_of",
    "plot_profiles",
    "profile_step",
    "profile_sweep",
    "profile_table",
    "save_profiles",
]

Group = Literal["physics", "warp", "copies", "torch"]
"""A group of kernels (or, on a CPU, operators) that a step's time is summed into."""
GROUPS: tuple[Group, ...] = ("physics", "warp", "copies", "torch")
"""The groups a kernel (or, on a CPU, an operator) is summed into."""

OWN_WARP_KERNELS: tuple[str, ...] = ("_masked_reset_kernel",)
"""The keys of the library's own warp kernels (kept in step with :mod:`gym_graphreset.envs.mjwarp.reset` by a test)."""

_WARP_SUFFIXES = ("_cuda_kernel_forward", "_cuda_kernel_backward", "_cpu_kernel_forward", "_cpu_kernel_backward")
_COPY_MARKS = ("memcpy", "memset", "aten::copy_", "aten::to", "aten::_to_copy", "aten::clone", "aten::index_put_")


def group_of(name: str) -> Group:
    """The group of one kernel or operator name (see the module docstring)."""
    low = name.lower()
    if low.endswith(_WARP_SUFFIXES):
        return "warp" if name.startswith(tuple(f"{key}_" for key in OWN_WARP_KERNELS)) else "physics"
    if any(mark in low for mark in _COPY_MARKS):
        return "copies"
    return "torch"


@dataclass
class StepProfile:
    """One mode's profile at one batch size: time per step by group and the heaviest kernels.

    Attributes:
        mode: The mode label (a key of :data:`~gym_graphreset.bench.runner.MODES`).
        env_id: The env id the factory makes.
        num_envs: The batch size.
        device: ``"cuda"`` (device kernel time) or ``"cpu"`` (operator self time).
        steps: Profiled steps.
        us_per_step: Group -> microseconds per step.
        top: The heaviest kernels: ``(name, group, microseconds per step, calls per step)``.
    """

    mode: str
    env_id: str
    num_envs: int
    device: str
    steps: int
    us_per_step: dict[str, float]
    top: list[tuple[str, str, float, float]] = field(default_factory=list)

    @property
    def total_us(self) -> float:
        """Summed time per step over every group."""
        return sum(self.us_per_step.values())

    def share(self, group: Group) -> float:
        """``group``'s share of the summed time (0 when nothing was timed)."""
        total = self.total_us
        return self.us_per_step.get(group, 0.0) / total if total > 0 else 0.0


def profile_step(
    make_inner: Callable[[], gym.vector.VectorEnv],
    mode: str = "step graph",
    *,
    steps: int = 20,
    warmup: int = 10,
    env_id: str = "",
    top: int = 15,
) -> StepProfile:
    """Profile ``steps`` steps of ``mode`` after ``warmup`` untimed ones (capture and compilation included).

    Raises:
        ValueError: ``mode`` is not a known mode, or ``steps`` / ``warmup`` / ``top`` are out of range.
    """
    from torch.profiler import ProfilerActivity, profile

    if mode not in MODES:
        raise ValueError(f"`mode` must be one of {list(MODES)}, got {mode!r}")
    if steps < 1 or warmup < 0 or top < 0:
        raise ValueError(f"`steps` must be >= 1, `warmup` >= 0 and `top` >= 0, got {steps}, {warmup} and {top}")
    # no validation poll inside the profiled steps: the profile is of the step alone
    env, pool = warmed_env(make_inner, mode, warmup=warmup, poll_interval=max(32, steps + warmup + 1))
    try:
        device = env.device
        on_cuda = device.type == "cuda"
        if on_cuda:
            torch.cuda.synchronize(device)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
        with profile(activities=activities) as prof:
            for i in range(steps):
                env.step(pool[i % len(pool)])
            if on_cuda:
                torch.cuda.synchronize(device)
        rows = _kernel_rows(prof.key_averages(), on_cuda)
    finally:
        env.close()
    us_per_step: dict[str, float] = dict.fromkeys(GROUPS, 0.0)
    for name, us, _ in rows:
        us_per_step[group_of(name)] += us / steps
    heaviest = sorted(rows, key=lambda r: -r[1])[:top]
    return StepProfile(
        mode=mode,
        env_id=env_id,
        num_envs=env.num_envs,
        device=device.type,
        steps=steps,
        us_per_step=us_per_step,
        top=[(name, group_of(name), us / steps, calls / steps) for name, us, calls in heaviest],
    )


def _kernel_rows(averages: Any, on_cuda: bool) -> list[tuple[str, float, int]]:
    """``(name, total microseconds, calls)``: device kernels on CUDA, top-level operators' self time on a CPU."""
    rows = []
    for event in averages:
        if on_cuda:
            us = float(getattr(event, "self_device_time_total", 0.0))
            if us > 0 and event.device_type.name == "CUDA":
                rows.append((event.key, us, int(event.count)))
        elif event.key.startswith("aten::") and event.self_cpu_time_total > 0:
            rows.append((event.key, float(event.self_cpu_time_total), int(event.count)))
    return rows


def profile_sweep(
    make_inner: Callable[[int], gym.vector.VectorEnv],
    sizes: Sequence[int],
    mode: str = "step graph",
    *,
    steps: int = 20,
    warmup: int = 10,
    env_id: str = "",
    show_progress: bool = True,
) -> list[StepProfile]:
    """:func:`profile_step` at each batch size in ``sizes`` (``make_inner(n)`` builds an env of ``n`` rows)."""
    from tqdm.auto import tqdm

    out = []
    for n in tqdm(sizes, desc=f"profile {env_id or 'env'}", unit="size", disable=not show_progress):
        out.append(profile_step(functools.partial(make_inner, n), mode, steps=steps, warmup=warmup, env_id=env_id))
    return out


def profile_table(profiles: Sequence[StepProfile]) -> str:
    """A plain-text table: per size, microseconds per step and share of each group."""
    head = f"{'envs':>7} {'mode':<20} " + " ".join(f"{g + ' us':>12} {'%':>4}" for g in GROUPS) + f" {'total us':>10}"
    lines = [head]
    for p in profiles:
        cells = " ".join(f"{p.us_per_step[g]:>12.1f} {100 * p.share(g):>4.0f}" for g in GROUPS)
        lines.append(f"{p.num_envs:>7} {p.mode:<20} {cells} {p.total_us:>10.1f}")
    return "\n".join(lines)


def plot_profiles(profiles: Sequence[StepProfile], path: Path, title: str) -> bool:
    """Microseconds per env step (per row) of each group, stacked, against batch size; whether it was written.

    A group whose band widens to the right costs more per row at larger batches than the physics does.
    """
    from gym_graphreset.bench.plotting import import_pyplot, save_figure

    plt = import_pyplot(path)
    if plt is None:
        return False
    ordered = sorted(profiles, key=lambda p: p.num_envs)
    xs = [p.num_envs for p in ordered]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.stackplot(xs, *[[1e3 * p.us_per_step[g] / p.num_envs for p in ordered] for g in GROUPS], labels=GROUPS)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("envs")
    ax.set_ylabel(f"ns per env step ({ordered[0].device} time)" if ordered else "ns per env step")
    ax.legend(loc="upper right")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    return save_figure(plt, fig, path, dpi=150)


def save_profiles(profiles: Sequence[StepProfile], path: Path) -> Path:
    """Write ``profiles`` as JSON (one record each, ``top`` kernels included); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([dataclasses.asdict(p) for p in profiles], indent=1))
    return path
