"""How many contacts and constraint rows a task's worlds use, against what MuJoCo Warp allocates for them.

Builds a registered task (``--env-id``, with any ``--env-kwargs``), steps it ``--steps`` times with random
actions under the autoreset wrapper (the task's own terminations and time-outs reset its rows), and records
after every physics substep, on the device: each world's constraint rows (``d.nefc``, which counts the rows a
world asked for even past ``njmax``), each world's contacts (from the contact arrays' world ids), the
broadphase's candidate pairs and the contacts of all worlds (``d.ncollision``, ``d.nacon``: MuJoCo Warp keeps
both in one pool of ``naconmax = nconmax x nworld`` slots) and the overflow bits. Prints and writes JSON: the
peak and p99.9 per world, the pool's peaks, the allocation in use, and a suggested ``njmax`` / ``nconmax``
(the peak x ``--margin``, rounded up to a multiple of 8: ``njmax`` from the peak rows of any world, at least 16,
the dense solver's tile, below which the solver sums in another order; ``nconmax`` from the pool's peak per
world, candidate pairs or contacts, the larger).

A smaller budget leaves every result bit for bit the same as long as nothing overflows (the kernels that run
over the allocation skip its empty slots), and an overflow is never silent: the env latches it as
``mjwarp_overflow[...]``, and this probe reports the latch's verdict too. A rare event (a robot falling onto its
side) needs more than a walk: probe with the population and the run length you train with, on the GPU.

    python benchmarks/contact_budget.py --num-envs 32 --steps 300
    python benchmarks/contact_budget.py --env-id gym_graphreset/G1-Tracking-Flat-v0 --num-envs 16
    python benchmarks/contact_budget.py --env-kwargs model_xml=/path/to/go1.xml,keep_sensors=true \\
        --num-envs 4096 --steps 1000 --device cuda
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
import warp as wp
from tqdm.auto import tqdm

import gym_graphreset  # noqa: F401  (registers the env ids)
from gym_graphreset import DeferredValidationError, FixedShapeAutoresetVectorEnv
from gym_graphreset.bench.peers.compare import parse_variant
from gym_graphreset.bench.runner import sample_actions
from gym_graphreset.envs.mjwarp.vector_env import OVERFLOW_CHECKS, MJWarpVectorEnv

NJMAX_FLOOR = 16
"""The dense solver's tile of constraint rows (``mujoco_warp`` ``TILE_SIZE_JTDAJ_DENSE``): with ``njmax`` below it
the Hessian's sums run in another order, so results would differ from a larger budget in the last bits."""


@wp.kernel(enable_backward=False)
def _snapshot(
    nefc: wp.array(dtype=int),
    overflow: wp.array(dtype=int),
    ncollision: wp.array(dtype=int),
    nacon: wp.array(dtype=int),
    substep: int,
    nefc_out: wp.array2d(dtype=int),
    contacts_out: wp.array2d(dtype=int),
    overflow_out: wp.array2d(dtype=int),
    totals_out: wp.array2d(dtype=int),
):
    w = wp.tid()
    nefc_out[w, substep] = nefc[w]
    contacts_out[w, substep] = 0
    overflow_out[w, substep] = overflow[w]
    if w == 0:
        totals_out[substep, 0] = ncollision[0]
        totals_out[substep, 1] = nacon[0]


@wp.kernel(enable_backward=False)
def _count_contacts(
    nacon: wp.array(dtype=int),
    worldid: wp.array(dtype=int),
    naconmax: int,
    substep: int,
    contacts_out: wp.array2d(dtype=int),
):
    i = wp.tid()
    if i < wp.min(nacon[0], naconmax):
        wp.atomic_add(contacts_out, worldid[i], substep, 1)


class SubstepCounts:
    """After each substep: per world its constraint rows, contacts and overflow bits; the pool's two totals.

    Appended to the env's ``substep_records`` before its first step, so a captured physics graph holds its
    two launches per substep; the buffers hold the last step's substeps.
    """

    def __init__(self, env: MJWarpVectorEnv) -> None:
        if env._physics_started:
            raise RuntimeError("SubstepCounts: the env has stepped already; attach it before the first step")
        d, n, k = env.d, env.num_envs, env.frame_skip
        dev = env.wp_device
        self.naconmax = int(d.naconmax)
        self._nefc = wp.zeros((n, k), dtype=int, device=dev)
        self._contacts = wp.zeros((n, k), dtype=int, device=dev)
        self._overflow = wp.zeros((n, k), dtype=int, device=dev)
        self._totals = wp.zeros((k, 2), dtype=int, device=dev)
        self.nefc, self.contacts = wp.to_torch(self._nefc), wp.to_torch(self._contacts)
        self.overflow, self.totals = wp.to_torch(self._overflow), wp.to_torch(self._totals)
        env.substep_records.append(self)  # type: ignore[arg-type]  (a record: its `record(d, substep)`)

    def record(self, d: Any, substep: int) -> None:
        """Snapshot the counters after ``substep`` (two launches; captured with the physics)."""
        dev = self._nefc.device
        wp.launch(
            _snapshot,
            dim=self._nefc.shape[0],
            inputs=[d.nefc, d.overflow, d.ncollision, d.nacon, substep],
            outputs=[self._nefc, self._contacts, self._overflow, self._totals],
            device=dev,
        )
        if self.naconmax > 0:
            wp.launch(
                _count_contacts,
                dim=self.naconmax,
                inputs=[d.nacon, d.contact.worldid, self.naconmax, substep],
                outputs=[self._contacts],
                device=dev,
            )


@dataclass
class Allocation:
    """What MuJoCo Warp allocated: per world and, for contacts, the pool of all worlds."""

    nworld: int
    njmax: int
    njmax_pad: int
    nconmax: int
    naconmax: int

    @classmethod
    def of(cls, env: MJWarpVectorEnv) -> Allocation:
        d = env.d
        return cls(env.num_envs, int(d.njmax), int(d.njmax_pad), int(d.naconmax) // env.num_envs, int(d.naconmax))


class DemandStats:
    """Running peaks, histograms and per-step series of the counts, on the device (read once, at the end)."""

    def __init__(self, counts: SubstepCounts, alloc: Allocation, steps: int, device: torch.device) -> None:
        self.counts, self.alloc = counts, alloc
        self.rows_bins = 4 * max(alloc.njmax, 256) + 1  # the top bin holds everything above it
        self.contact_bins = max(alloc.naconmax, 1) + 1  # a world's stored contacts never pass naconmax
        self.rows_hist = torch.zeros(self.rows_bins, dtype=torch.long, device=device)
        self.contact_hist = torch.zeros(self.contact_bins, dtype=torch.long, device=device)
        # per step: max over worlds and substeps of rows, contacts; max over substeps of the two pool totals;
        # the overflow bits ORed over worlds and substeps
        self.series = torch.zeros(5, steps, dtype=torch.long, device=device)
        self.worlds_overflowed = torch.zeros(alloc.nworld, dtype=torch.bool, device=device)
        self._bits = torch.tensor([1 << b for b in range(31)], dtype=torch.long, device=device)
        self._latched = sum(OVERFLOW_CHECKS.values())  # the bits that invalidate physics
        self._ones = torch.ones(counts.nefc.numel(), dtype=torch.long, device=device)

    def add(self, step: int) -> None:
        """Fold the last step's substeps in (device ops only)."""
        c = self.counts
        nefc, contacts = c.nefc.long(), c.contacts.long()
        self.rows_hist.index_add_(0, nefc.flatten().clamp(0, self.rows_bins - 1), self._ones)
        self.contact_hist.index_add_(0, contacts.flatten().clamp(0, self.contact_bins - 1), self._ones)
        bits = ((c.overflow.long().flatten().unsqueeze(1) & self._bits) != 0).any(0)
        self.series[:, step] = torch.stack(
            (nefc.amax(), contacts.amax(), c.totals[:, 0].amax().long(), c.totals[:, 1].amax().long(),
             (bits.long() * self._bits).sum())
        )  # fmt: skip
        self.worlds_overflowed |= ((c.overflow.long() & self._latched) != 0).any(1)


def percentile(hist: list[int], q: float) -> int:
    """The smallest value whose cumulative share of ``hist`` (counts per value) reaches ``q`` in [0, 1]."""
    total = sum(hist)
    if total == 0:
        return 0
    need, seen = q * total, 0
    for value, count in enumerate(hist):
        seen += count
        if seen >= need:
            return value
    return len(hist) - 1


def round_up(x: float, multiple: int = 8) -> int:
    """``x`` rounded up to a multiple of ``multiple`` (at least one multiple)."""
    return max(multiple, multiple * math.ceil(x / multiple))


def suggest(peak_rows: int, pool_per_world: int, margin: float) -> dict[str, int]:
    """``njmax`` / ``nconmax``: the peaks x ``margin``, rounded up to 8 (``njmax`` at least ``NJMAX_FLOOR``).

    ``njmax`` bounds each world's rows: from the peak of any world. ``nconmax`` sizes one pool of
    ``nconmax x nworld`` slots that the candidate pairs, then the contacts, of all worlds share: from the
    pool's peak per world (a world may hold more than ``nconmax`` contacts while others hold fewer).
    """
    return {
        "njmax": max(NJMAX_FLOOR, round_up(peak_rows * margin)),
        "nconmax": round_up(pool_per_world * margin),
    }


def overflow_names(bits: int) -> tuple[list[str], list[str]]:
    """The bits set in ``bits``: the overflows that invalidate physics (the env's latched checks), and the
    convergence warnings (MuJoCo Warp's ``ITERATIONS`` / ``LS_ITERATIONS``: a solve that hit its iteration
    limit, which no budget changes)."""
    import mujoco_warp as mjw

    named = [t.name for t in mjw.OverflowType if t.value and t.value & (t.value - 1) == 0 and bits & t.value]
    return [n for n in named if n in OVERFLOW_CHECKS], [n for n in named if n not in OVERFLOW_CHECKS]


def summarize(stats: DemandStats, margin: float) -> dict[str, Any]:
    """The JSON summary: allocation, peaks and p99.9 per world, pool totals, overflow, suggestion."""
    alloc, nworld = stats.alloc, stats.alloc.nworld
    rows_hist, contact_hist = stats.rows_hist.tolist(), stats.contact_hist.tolist()
    series = stats.series.tolist()
    peak_rows, peak_contacts = max(series[0], default=0), max(series[1], default=0)
    peak_pairs, peak_pool = max(series[2], default=0), max(series[3], default=0)
    # the pool holds every world's candidate pairs and contacts: a per-world budget must cover their mean too
    pool_per_world = math.ceil(max(peak_pairs, peak_pool) / nworld)
    seen = 0
    for b in series[4]:
        seen |= b
    bits = seen & sum(OVERFLOW_CHECKS.values())  # budget and buffer overflows, not convergence warnings
    names, warnings = overflow_names(seen)
    return {
        "allocation": {
            "njmax": alloc.njmax,
            "njmax_pad": alloc.njmax_pad,
            "nconmax": alloc.nconmax,
            "naconmax": alloc.naconmax,
            "nworld": nworld,
        },
        "constraint_rows_per_world": {"peak": peak_rows, "p99.9": percentile(rows_hist, 0.999)},
        "contacts_per_world": {"peak": peak_contacts, "p99.9": percentile(contact_hist, 0.999)},
        "pool": {
            "peak_candidate_pairs": peak_pairs,
            "peak_contacts": peak_pool,
            "peak_per_world": pool_per_world,
        },
        "overflow": {"bits": bits, "names": names, "worlds": int(stats.worlds_overflowed.sum())},
        "convergence_warnings": warnings,
        "margin": margin,
        "suggested": suggest(peak_rows, pool_per_world, margin),
        "per_step": {
            "max_constraint_rows": series[0],
            "max_contacts": series[1],
            "candidate_pairs": series[2],
            "contacts": series[3],
            "overflow_bits": series[4],
        },
    }


def _env_kwargs(texts: list[str]) -> dict[str, Any]:
    """``--env-kwargs`` values (``key=value[,key=value...]``, typed as the bench CLI's ``--variant``)."""
    kwargs: dict[str, Any] = {}
    for text in texts:
        try:
            kwargs |= parse_variant(f"env-kwargs:{text}").kwargs
        except ValueError:
            raise ValueError(f"items must be key=value with a non-empty key, got {text!r}") from None
    return kwargs


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1.0):
        raise argparse.ArgumentTypeError(f"must be a number >= 1 (the peak x margin is suggested), got {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an int >= 1, got {text!r}")
    return value


def probe(
    env_id: str,
    num_envs: int,
    steps: int,
    *,
    device: str,
    env_kwargs: dict[str, Any] | None = None,
    margin: float = 2.0,
    seed: int = 0,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Step ``env_id`` with random actions and return :func:`summarize`'s summary, with the latch's verdict.

    Raises:
        ValueError: ``env_id`` does not build a MuJoCo Warp env, or the env refused ``env_kwargs``.
    """
    kwargs = dict(env_kwargs or {})
    try:
        inner = gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", device=device, **kwargs
        )
    except TypeError as exc:
        raise ValueError(f"{env_id} refused --env-kwargs {sorted(kwargs)}: {exc}") from exc
    if not isinstance(inner, MJWarpVectorEnv):
        raise ValueError(f"{env_id} builds a {type(inner).__name__}, not a MuJoCo Warp env: it has no contact budget")
    counts = SubstepCounts(inner)
    alloc = Allocation.of(inner)
    env = FixedShapeAutoresetVectorEnv(inner, "masked", validation_poll_interval=steps + 1)
    stats = DemandStats(counts, alloc, steps, inner.device)
    pool = sample_actions(env.action_space, inner.device, 64, seed=seed)
    env.reset(seed=seed)
    for i in tqdm(range(steps), desc=env_id, unit="step", mininterval=2, disable=not show_progress):
        env.step(pool[i % len(pool)])
        stats.add(i)
    try:
        env.poll_finite_validation()
        latch = "clean"
    except DeferredValidationError as err:
        latch = str(err)
    env.close()
    summary = summarize(stats, margin)
    return {
        "env_id": env_id,
        "env_kwargs": kwargs,
        "num_envs": num_envs,
        "steps": steps,
        "substeps_per_step": inner.frame_skip,
        "device": str(inner.device),
        "seed": seed,
        **summary,
        "latch": latch,
        "latched_overflow_checks": sorted(n for n in OVERFLOW_CHECKS if f"mjwarp_overflow[{n}]" in latch),
    }


def report(result: dict[str, Any]) -> str:
    """The summary as lines of text."""
    a, rows, con, pool = (result[k] for k in ("allocation", "constraint_rows_per_world", "contacts_per_world", "pool"))
    s, ov = result["suggested"], result["overflow"]
    overflow = f"{', '.join(ov['names'])} in {ov['worlds']} world(s)" if ov["bits"] else "none"
    kwargs = f" {result['env_kwargs']}" if result["env_kwargs"] else ""
    return "\n".join(
        [
            f"{result['env_id']}{kwargs}: {result['num_envs']} envs x {result['steps']} steps "
            f"x {result['substeps_per_step']} substeps on {result['device']}",
            f"  allocated per world: njmax {a['njmax']} (padded {a['njmax_pad']}), nconmax {a['nconmax']} "
            f"(naconmax {a['naconmax']} for {a['nworld']} worlds)",
            f"  constraint rows per world: peak {rows['peak']}, p99.9 {rows['p99.9']}",
            f"  contacts per world: peak {con['peak']}, p99.9 {con['p99.9']}",
            f"  pool of all worlds: peak {pool['peak_candidate_pairs']} candidate pairs, {pool['peak_contacts']} "
            f"contacts ({pool['peak_per_world']} per world)",
            f"  overflow: {overflow}; latch: {result['latch'].splitlines()[0]}",
            f"  convergence warnings (not a budget): {', '.join(result['convergence_warnings']) or 'none'}",
            f"  suggested (peak x {result['margin']:g}, rounded up to 8): njmax={s['njmax']}, nconmax={s['nconmax']}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Probe, print, write JSON; exit status 1 when the run overflowed its allocation."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="gym_graphreset/Go1-Velocity-Flat-v0")
    p.add_argument(
        "--env-kwargs",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE...]",
        help="keyword arguments of the env, repeatable, typed as bench's --variant: true/false as bools, numbers as "
        "ints or floats, the rest as strings (e.g. model_xml=/path/to/go1.xml,keep_sensors=true or njmax=64)",
    )
    p.add_argument("--num-envs", type=_positive, default=32)
    p.add_argument("--steps", type=_positive, default=300, help="env steps (default: 300)")
    p.add_argument("--margin", type=_margin, default=2.0, help="the suggestion is the peak x margin (default: 2.0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    try:
        env_kwargs = _env_kwargs(args.env_kwargs)
    except ValueError as exc:
        p.error(f"--env-kwargs: {exc}")
    result = probe(
        args.env_id,
        args.num_envs,
        args.steps,
        device=args.device,
        env_kwargs=env_kwargs,
        margin=args.margin,
        seed=args.seed,
        show_progress=not args.no_progress,
    )
    print(report(result))
    args.out.mkdir(parents=True, exist_ok=True)
    name = args.env_id.split("/")[-1]
    path = args.out / f"contact_budget_{name}_{args.num_envs}_{args.device.split(':')[0]}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return 1 if result["overflow"]["bits"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
