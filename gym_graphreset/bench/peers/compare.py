"""GPU peers measured on the same machine in their own interpreter: mjlab (MuJoCo Warp + torch managers).

mjlab pins its own mujoco / mujoco-warp, so it cannot be imported next to this library. :func:`run_peer`
runs a standalone runner script (``mjlab_runner.py``, next to this module) with the peer's Python, one
process per size under a timeout, and parses the single JSON line it prints into a
:class:`~gym_graphreset.bench.results.ModeResult` (``mode="mjlab"``; its own physics time, step/physics ratio and
versions in ``extra``). A peer that is missing, times out or crashes gives a one-line notice and a
:class:`PeerSkipped`, never an exception: the rest of the benchmark keeps its numbers.

:func:`comparison_table` sets each size's fastest mode of ours (per model variant) against the peer.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gym_graphreset.bench.results import ModeResult
from gym_graphreset.bench.runner import MODES, PhysicsStates

__all__ = [
    "PEERS",
    "PeerConfig",
    "PeerHeadline",
    "PeerSkipped",
    "Variant",
    "best_ours",
    "comparison_table",
    "load_results",
    "parse_peer_output",
    "parse_variant",
    "peer_headline",
    "RoundsRow",
    "rounds_rows",
    "rounds_table",
    "run_peer",
    "runner_path",
    "same_model",
]

PeerName = Literal["mjlab"]
PEERS: dict[str, str] = {"mjlab": "Mjlab-Velocity-Flat-Unitree-Go1"}
"""Known peers -> the task each runs by default."""
EXIT_MISSING = 3
"""The runner's exit status when the peer is not importable in its interpreter."""


@dataclass(frozen=True)
class PeerConfig:
    """How to run a peer: which interpreter, with which ``PYTHONPATH``, on which task, for how long."""

    name: PeerName = "mjlab"
    python: str = sys.executable
    pythonpath: str | None = None
    task: str | None = None
    device: str = "cuda:0"
    timeout_s: float = 300.0
    physics_states: PhysicsStates = "step"
    """The states its own physics is timed on (as :func:`gym_graphreset.bench.runner.measure_bare_physics`)."""
    motion_file: str | None = None
    """The clip a tracking task's motion command reads (mjlab's ``npz``; ``None`` for other tasks)."""

    def __post_init__(self) -> None:
        if self.name not in PEERS:
            raise ValueError(f"`name` must be one of {sorted(PEERS)}, got {self.name!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"`timeout_s` must be > 0, got {self.timeout_s}")
        if self.physics_states not in ("step", "free"):
            raise ValueError(f"`physics_states` must be 'step' or 'free', got {self.physics_states!r}")


@dataclass(frozen=True)
class PeerSkipped:
    """Why a peer gave no result at one size (its one-line notice has been printed)."""

    reason: Literal["missing", "timeout", "failed"]
    message: str


VariantValue = bool | int | float | str
"""A ``--variant`` value, typed: ``true``/``false`` a bool, ``3`` an int, ``0.5`` a float, the rest a string."""


@dataclass(frozen=True)
class Variant:
    """A model variant of our env: a label and the keyword arguments its constructor gets."""

    label: str
    kwargs: dict[str, VariantValue] = field(default_factory=dict)


def _typed(value: str) -> VariantValue:
    """``value`` as a bool (``true``/``false``, any case), an int, a float, or the string itself."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def parse_variant(text: str) -> Variant:
    """``LABEL`` or ``LABEL:key=value[,key=value...]`` -> :class:`Variant` (e.g. ``mjlab-go1:model_xml=go1.xml``).

    Values are typed: ``true``/``false`` become bools, numbers ints or floats, the rest stay strings
    (``n=3,scale=0.5,flat=true,model_xml=go1.xml``).

    Raises:
        ValueError: an empty label, or an item that is not ``key=value`` with a non-empty key.
    """
    label, _, rest = text.partition(":")
    if not label.strip():
        raise ValueError(f"`--variant` needs a label before ':', got {text!r} (expected LABEL[:key=value,...])")
    kwargs: dict[str, VariantValue] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"`--variant` items must be key=value, got {item!r} in {text!r}")
        kwargs[key.strip()] = _typed(value.strip())
    return Variant(label.strip(), kwargs)


def runner_path(name: PeerName = "mjlab") -> Path:
    """The standalone runner script of a peer (run by path with the peer's interpreter)."""
    return Path(__file__).with_name(f"{name}_runner.py")


def parse_peer_output(stdout: str, name: str = "mjlab") -> dict[str, Any] | None:
    """The last line of ``stdout`` that is a JSON object with ``"peer": name`` (peers print much else first)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("peer") == name:
            return record
    return None


def _check_record(record: dict[str, Any], num_envs: int, steps: int) -> None:
    """Refuse a record of another size or step count, or with a timing that is not a finite number > 0.

    Raises:
        ValueError: naming the field, what was expected and what came.
    """
    for name, asked in (("num_envs", num_envs), ("steps", steps)):
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, int) or value != asked:
            raise ValueError(f"`{name}` must be {asked} (the run asked for), got {value!r}")
    for name in ("ms_per_step", "env_steps_per_s", "physics_ms"):
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"`{name}` must be a finite number > 0, got {value!r}")
    for name in ("host_syncs_per_step", "peak_gpu_mem_mb"):
        value = record[name]
        if value is None and name == "peak_gpu_mem_mb":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"`{name}` must be a finite number >= 0, got {value!r}")


def _to_result(record: dict[str, Any], num_envs: int, steps: int) -> ModeResult:
    """A runner's record at ``num_envs`` x ``steps`` -> a ModeResult (``mode``: the peer; the rest: ``extra``).

    Raises:
        ValueError: a field missing, or one :func:`_check_record` refuses (named).
    """
    main = ("num_envs", "device", "steps", "ms_per_step", "env_steps_per_s", "host_syncs_per_step", "peak_gpu_mem_mb")
    missing = [k for k in (*main, "task", "physics_ms") if k not in record]
    if missing:
        raise ValueError(f"the peer's JSON line lacks {missing}: {record}")
    _check_record(record, num_envs, steps)
    extra = {k: v for k, v in record.items() if k not in (*main, "peer", "task")}
    extra["engine"] = record["peer"]
    return ModeResult(
        mode=record["peer"],
        env_id=record["task"],
        num_envs=int(record["num_envs"]),
        device=str(record["device"]),
        steps=int(record["steps"]),
        ms_per_step=float(record["ms_per_step"]),
        env_steps_per_s=float(record["env_steps_per_s"]),
        host_syncs_per_step=record["host_syncs_per_step"],
        peak_gpu_mem_mb=record["peak_gpu_mem_mb"],
        extra=extra,
    )


def _skip(config: PeerConfig, reason: Literal["missing", "timeout", "failed"], text: str) -> PeerSkipped:
    message = f"{config.name} peer: {text}: skipped"
    print(message)
    return PeerSkipped(reason, message)


def run_peer(
    config: PeerConfig, num_envs: int, *, steps: int, warmup: int, runner: Path | None = None
) -> ModeResult | PeerSkipped:
    """Run the peer's runner at ``num_envs`` in its own interpreter: its result, or why not (after a notice).

    ``missing`` (no interpreter, or the peer is not importable in it) holds for every size, so callers stop
    there; ``timeout`` and ``failed`` concern this size only.

    ``runner`` replaces the peer's runner script (tests pass a fake one). ``PYTHONPATH`` is
    ``config.pythonpath`` when given (replacing ours), else inherited.
    """
    if num_envs < 1 or steps < 1 or warmup < 0:
        raise ValueError(f"need num_envs >= 1, steps >= 1, warmup >= 0; got {num_envs}, {steps}, {warmup}")
    script = runner or runner_path(config.name)
    cmd = [config.python, str(script), "--num-envs", str(num_envs), "--steps", str(steps), "--warmup", str(warmup)]
    cmd += ["--device", config.device, "--physics-states", config.physics_states]
    cmd += ["--task", config.task] if config.task else []
    cmd += ["--motion-file", config.motion_file] if config.motion_file else []
    env = dict(os.environ) | {"PYTHONUNBUFFERED": "1"}
    env.setdefault("MUJOCO_GL", "disable")
    if config.pythonpath is not None:
        env["PYTHONPATH"] = config.pythonpath
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=config.timeout_s, env=env, check=False)
    except FileNotFoundError:
        return _skip(config, "missing", f"its interpreter {config.python!r} was not found (--peer-python)")
    except PermissionError:
        return _skip(config, "missing", f"its interpreter {config.python!r} is not executable (--peer-python)")
    except subprocess.TimeoutExpired:
        return _skip(config, "timeout", f"x{num_envs} did not finish within {config.timeout_s:g} s (--peer-timeout)")
    record = parse_peer_output(proc.stdout, config.name)
    if proc.returncode == EXIT_MISSING or (record is not None and record.get("error") == "missing"):
        detail = record.get("detail", "") if record else ""
        hint = "set --peer-python/--peer-pythonpath"
        return _skip(config, "missing", f"not importable with {config.python} ({detail}; {hint})")
    if proc.returncode != 0 or record is None:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return _skip(config, "failed", f"x{num_envs} failed (exit status {proc.returncode}: {tail})")
    try:
        return _to_result(record, num_envs, steps)
    except (ValueError, TypeError) as exc:
        return _skip(config, "failed", f"x{num_envs} printed an unreadable result ({exc})")


def best_ours(results: Sequence[ModeResult], num_envs: int, env_id: str) -> ModeResult | None:
    """Our fastest step mode (not bare physics, non-physics or a baseline) at one size of one env id."""
    ours = [r for r in results if r.mode in MODES and r.num_envs == num_envs and r.env_id == env_id]
    return max(ours, key=lambda r: r.env_steps_per_s, default=None)


def same_model(ours: ModeResult, peer: ModeResult) -> bool:
    """Whether our result's variant loaded the very MJCF file the peer reported (``model_xml``)."""
    mine = ours.extra.get("env_kwargs", {}).get("model_xml")
    theirs = peer.extra.get("model_xml")
    return bool(theirs and mine) and Path(str(mine)).resolve() == Path(str(theirs)).resolve()


def comparison_table(results: Sequence[ModeResult]) -> str:
    """Markdown: per size, each peer and ours (fastest mode, per env id / model variant), same columns.

    A ratio whose variant loads the peer's own model file (``--variant LABEL:model_xml=...``) is marked
    "same model".
    """
    physics = {(r.env_id, r.num_envs): r.ms_per_step for r in results if r.mode == "bare physics"}
    peers = [r for r in results if r.extra.get("engine") in PEERS]
    lines = [
        "| side | task / model | envs | mode | env-steps/s | ms/step | own bare physics ms | step / physics "
        "| host syncs/step | x peer |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    sizes = sorted({r.num_envs for r in results})
    ids = list(dict.fromkeys(r.env_id for r in results if r.mode in ("bare physics", *MODES)))
    for n in sizes:
        peer_here = [p for p in peers if p.num_envs == n]
        for p in peer_here:
            lines.append(
                f"| {p.mode} | {p.env_id} | {n} | {p.mode} | {p.env_steps_per_s:,.0f} | {p.ms_per_step:.2f} "
                f"| {p.extra['physics_ms']:.2f} | {p.ms_per_step / p.extra['physics_ms']:.2f} "
                f"| {_fmt(p.host_syncs_per_step)} | - |"
            )
        for env_id in ids:
            best = best_ours(results, n, env_id)
            if best is None:
                continue
            floor = physics.get((env_id, n))
            ratios = [
                f"{best.env_steps_per_s / p.env_steps_per_s:.2f}x" + (" (same model)" if same_model(best, p) else "")
                for p in peer_here
            ]
            lines.append(
                f"| ours | {env_id} | {n} | {best.mode} | {best.env_steps_per_s:,.0f} | {best.ms_per_step:.2f} "
                f"| {_fmt(floor)} | {_fmt(best.ms_per_step / floor if floor else None)} "
                f"| {_fmt(best.host_syncs_per_step)} | {', '.join(ratios) or '-'} |"
            )
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def load_results(paths: Sequence[Path]) -> list[ModeResult]:
    """The results of one or more ``bench`` JSON files (e.g. one per size), in order."""
    results = []
    for path in paths:
        record = json.loads(Path(path).read_text())
        results += [ModeResult(**r) for r in record["results"]]
    return results


@dataclass(frozen=True)
class RoundsRow:
    """One side (a peer, or one of our modes on one env id / variant) at one size, over alternated rounds.

    ``ratios`` are ours / the peer's env-steps/s within each round (the peer's own rows have none), so that a
    drift of the machine between rounds moves both sides of a ratio alike.
    """

    side: str
    env_id: str
    num_envs: int
    mode: str
    env_steps_per_s: tuple[float, ...]
    ms_per_step: tuple[float, ...]
    physics_ms: tuple[float, ...]
    ratios: tuple[float, ...] = ()
    same_model: bool = False
    host_syncs: tuple[float, ...] = ()

    @staticmethod
    def spread(values: Sequence[float]) -> tuple[float, float, float] | None:
        """(median, min, max), or ``None`` for no values."""
        return (statistics.median(values), min(values), max(values)) if values else None


def rounds_rows(results: Sequence[ModeResult]) -> list[RoundsRow]:
    """Group results tagged ``extra["round"]`` by side, env id, size and mode; pair ours with each peer per round.

    Raises:
        ValueError: a result without a round tag, or rounds that are not 0..N-1 for every side.
    """
    untagged = [f"{r.mode} x{r.num_envs}" for r in results if "round" not in r.extra]
    if untagged:
        raise ValueError(f"results without a round (extra['round']): {untagged}")
    physics = {(r.env_id, r.num_envs, r.extra["round"]): r.ms_per_step for r in results if r.mode == "bare physics"}
    groups: dict[tuple[str, str, int, str], dict[int, ModeResult]] = {}
    for r in results:
        if r.mode == "bare physics" or (r.mode not in MODES and r.extra.get("engine") not in PEERS):
            continue
        side = str(r.extra["engine"]) if r.extra.get("engine") in PEERS else "ours"
        groups.setdefault((side, r.env_id, r.num_envs, r.mode), {})[int(r.extra["round"])] = r
    rows = []
    for (side, env_id, n, mode), by_round in groups.items():
        order = sorted(by_round)
        runs = [by_round[i] for i in order]
        if side == "ours":
            floors = [physics.get((env_id, n, i)) for i in order]
            own_physics = tuple(f for f in floors if f is not None)
        else:
            own_physics = tuple(float(r.extra["physics_ms"]) for r in runs)
        ratios: list[float] = []
        same = False
        if side == "ours":
            peers = {int(p.extra["round"]): p for p in results if p.extra.get("engine") in PEERS and p.num_envs == n}
            ratios = [by_round[i].env_steps_per_s / peers[i].env_steps_per_s for i in order if i in peers]
            same = any(same_model(by_round[i], peers[i]) for i in order if i in peers)
        rows.append(
            RoundsRow(
                side=side,
                env_id=env_id,
                num_envs=n,
                mode=mode,
                env_steps_per_s=tuple(r.env_steps_per_s for r in runs),
                ms_per_step=tuple(r.ms_per_step for r in runs),
                physics_ms=own_physics,
                ratios=tuple(ratios),
                same_model=same,
                host_syncs=tuple(r.host_syncs_per_step for r in runs if r.host_syncs_per_step is not None),
            )
        )
    return sorted(rows, key=lambda row: (row.num_envs, row.side == "ours", row.env_id, row.mode))


def _spread(values: Sequence[float], fmt: str) -> str:
    s = RoundsRow.spread(values)
    if s is None:
        return "-"
    return f"{s[0]:{fmt}} ({s[1]:{fmt}}-{s[2]:{fmt}})"


def rounds_table(rows: Sequence[RoundsRow]) -> str:
    """Markdown: each side's median (min-max) over the alternated rounds, and of ours / the peer per round."""
    lines = [
        "| side | task / model | envs | mode | rounds | env-steps/s | ms/step | own physics ms | x peer |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        ratio = _spread(row.ratios, ".2f") + (" same model" if row.same_model else "") if row.ratios else "-"
        lines.append(
            f"| {row.side} | {row.env_id} | {row.num_envs} | {row.mode} | {len(row.env_steps_per_s)} "
            f"| {_spread(row.env_steps_per_s, ',.0f')} | {_spread(row.ms_per_step, '.2f')} "
            f"| {_spread(row.physics_ms, '.2f')} | {ratio} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class PeerHeadline:
    """One task's figures against a peer over alternated rounds: each side's median and range, and the ratio's.

    ``ours`` is the row of one of our modes on one env id (a model variant), ``peer`` the peer's row at the same
    size; ``ratio`` is ours / the peer's env-steps/s per round, ``ours_over_physics`` our step over our own bare
    physics per round. Each is ``(median, min, max)``; the host syncs per step are each side's median.
    """

    env_id: str
    num_envs: int
    mode: str
    rounds: int
    ours: tuple[float, float, float]
    peer: tuple[float, float, float]
    ratio: tuple[float, float, float]
    ours_over_physics: tuple[float, float, float] | None
    peer_over_physics: tuple[float, float, float]
    ours_host_syncs: float | None
    peer_host_syncs: float | None


def _median_range(values: Sequence[float]) -> tuple[float, float, float]:
    spread = RoundsRow.spread(values)
    if spread is None:
        raise ValueError("no values")
    return spread


def peer_headline(rows: Sequence[RoundsRow], env_id: str, mode: str, num_envs: int) -> PeerHeadline:
    """The headline of ``rows`` (:func:`rounds_rows`) for our ``mode`` on ``env_id`` at ``num_envs``.

    Raises:
        ValueError: no such row of ours, no peer row at that size, or fewer than three rounds of either side
            (one pair of runs is not a ratio).
    """
    ours = [r for r in rows if r.side == "ours" and r.env_id == env_id and r.mode == mode and r.num_envs == num_envs]
    peers = [r for r in rows if r.side != "ours" and r.num_envs == num_envs]
    if not ours:
        have = sorted({f"{r.env_id} / {r.mode} x{r.num_envs}" for r in rows if r.side == "ours"})
        raise ValueError(f"no rounds of ours for {env_id} / {mode} x{num_envs}; the results have {have}")
    if len(peers) != 1:
        raise ValueError(f"expected one peer's rounds at x{num_envs}, found {len(peers)}")
    row, peer = ours[0], peers[0]
    if min(len(row.ratios), len(peer.env_steps_per_s)) < 3:
        raise ValueError(
            f"{env_id} / {mode} x{num_envs}: {len(row.ratios)} paired rounds; a ratio needs at least 3 alternations"
        )
    aligned = len(row.physics_ms) == len(row.ms_per_step)  # our bare physics measured in every round
    own = [ms / f for ms, f in zip(row.ms_per_step, row.physics_ms, strict=True)] if aligned else []
    peer_own = [ms / f for ms, f in zip(peer.ms_per_step, peer.physics_ms, strict=True)]
    return PeerHeadline(
        env_id=env_id,
        num_envs=num_envs,
        mode=mode,
        rounds=len(row.ratios),
        ours=_median_range(row.env_steps_per_s),
        peer=_median_range(peer.env_steps_per_s),
        ratio=_median_range(row.ratios),
        ours_over_physics=_median_range(own) if own else None,
        peer_over_physics=_median_range(peer_own),
        ours_host_syncs=statistics.median(row.host_syncs) if row.host_syncs else None,
        peer_host_syncs=statistics.median(peer.host_syncs) if peer.host_syncs else None,
    )
