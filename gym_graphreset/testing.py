"""A conformance harness users run on their own envs and terms.

- :func:`assert_sync_free`: the sleep canary. Queue a long GPU sleep on the env's stream, step a few
  times, and check that the host came back while the GPU was still busy: no step waited for the device.
  This sees every sync (torch's, warp's, the driver's), unlike torch's sync debug mode.
- :func:`count_host_syncs`: torch's sync debug mode, for a traceback of the culprit (torch ops only).
- :func:`count_host_reads` / :func:`assert_no_host_reads`: the CPU-side detector: counts the tensor
  calls that would read the device from the host (``bool(t)``, ``.item()``, ``.tolist()``, ``.nonzero()``,
  ``.cpu()``, boolean-mask indexing...), so a masked path can be proven sync-free without a GPU.
- :func:`assert_masked_matches_selected` / :func:`assert_capture_matches_eager`: run the same actions
  through two configurations and compare every tensor a step returns, info included (nested; an
  entry ``k`` with a mask ``_k`` on the mask's rows), naming the key and step that differ.
- :func:`assert_statistically_equivalent`: where physics is not bitwise deterministic (GPU contact
  solvers), compare the distributions of finished episodes' returns and lengths instead.
"""

from __future__ import annotations

import dataclasses
import os
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from gym_graphreset.buffers import tree_leaves
from gym_graphreset.compiling import CompileBackend
from gym_graphreset.config import PRESETS, PresetName, StepConfig, from_flags
from gym_graphreset.host_reads import assert_no_host_reads, count_host_reads
from gym_graphreset.wrapper import FixedShapeAutoresetVectorEnv

__all__ = [
    "EpisodeComparison",
    "assert_compiled_matches_uncompiled",
    "SyncCanaryResult",
    "assert_no_host_reads",
    "assert_capture_matches_eager",
    "assert_masked_matches_selected",
    "assert_statistically_equivalent",
    "assert_sync_free",
    "count_host_reads",
    "count_host_syncs",
    "finished_episodes",
    "ks_statistic",
    "rollout",
]

MASKED_FLAGS: dict[str, Any] = {"config": PRESETS["masked"]}
"""The masked preset as the wrapper's keywords (``FixedShapeAutoresetVectorEnv(env, **MASKED_FLAGS)``)."""
Factory = Callable[[dict[str, Any]], FixedShapeAutoresetVectorEnv]
"""Builds a wrapped env from the wrapper's keyword arguments (``{"config": StepConfig}``): ``**`` them in."""


def _config(config: StepConfig | PresetName | dict[str, Any] | None, default: PresetName) -> StepConfig:
    """A preset name, a StepConfig, or a dict of wrapper keywords (``config=`` and flags), as a StepConfig."""
    if isinstance(config, dict):
        rest = {k: v for k, v in config.items() if k != "config"}
        return from_flags(config.get("config"), rest)
    return from_flags(config if config is not None else default, {})


class SyncCanaryResult(dict):
    """What the canary measured: ``host_seconds``, ``sleep_seconds``, ``gpu_busy_after``."""


def _sleep_cycles(seconds: float, device: torch.device) -> int:
    """GPU clock cycles that ``torch.cuda._sleep`` needs to spin for ``seconds`` (calibrated once)."""
    with torch.cuda.device(device):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        probe = 20_000_000
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        end.synchronize()
        return int(seconds * probe / (start.elapsed_time(end) / 1e3))


def assert_sync_free(
    step: Callable[[], Any], *, device: torch.device | str = "cuda", steps: int = 4, sleep_seconds: float = 0.4
) -> SyncCanaryResult:
    """Assert that ``step()`` never waits for the GPU, with a sleep canary on the current stream.

    Args:
        step: One env step (build actions beforehand; making them must not sync either).
        device: The env's CUDA device.
        steps: Calls to make; keep it <= 5 (graphs with conditional nodes apply queue back-pressure after
            ~10-30 launches, which looks like a sync but is not one).
        sleep_seconds: GPU time queued ahead of the steps.

    Raises:
        AssertionError: A step blocked the host until the queued GPU work finished.
    """
    device = torch.device(device)
    cycles = _sleep_cycles(sleep_seconds, device)
    torch.cuda.synchronize(device)
    stream = torch.cuda.current_stream(device)
    torch.cuda._sleep(cycles)
    per_step: list[float] = []
    start = time.perf_counter()
    for _ in range(steps):
        step()
        per_step.append(time.perf_counter() - start - sum(per_step))
    host = time.perf_counter() - start
    busy = not stream.query()
    torch.cuda.synchronize(device)
    result = SyncCanaryResult(
        host_seconds=host,
        sleep_seconds=sleep_seconds,
        gpu_busy_after=busy,
        per_step_ms=[round(t * 1e3, 3) for t in per_step],
    )
    if not busy or host > 0.5 * sleep_seconds:
        raise AssertionError(
            f"a step waited for the GPU: {steps} steps took {host * 1e3:.1f} ms of host time "
            f"(per step: {result['per_step_ms']} ms) behind a "
            f"{sleep_seconds * 1e3:.0f} ms GPU sleep (GPU still busy afterwards: {busy}); use "
            "count_host_syncs() for a traceback of torch-side syncs. A step that launches more kernels than "
            "CUDA's launch queue holds (~1,000 on an H200) also blocks here (back-pressure, not a sync): "
            "capture it, or check its parts separately"
        )
    return result


def count_host_syncs(fn: Callable[[], Any]) -> tuple[int, list[str]]:
    """Run ``fn`` under torch's sync debug mode; return the number of syncs and where each happened.

    Sees only syncs made by torch operations (``.item()``, ``.nonzero()``, ``bool(t)``...), not warp's.
    Each location is the innermost frame outside torch, so the culprit's file and line are named.
    Without CUDA there is no device to wait for: ``fn`` runs and ``(0, [])`` is returned.
    """
    if not torch.cuda.is_available():
        fn()
        return 0, []
    previous = torch.cuda.get_sync_debug_mode()
    found: list[str] = []

    def record(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if "called a synchronizing cuda operation" not in str(message).lower():
            return  # e.g. the one-time "prototype feature" notice
        frames = [f for f in traceback.extract_stack()[:-1] if f"{os.sep}torch{os.sep}" not in f.filename]
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else f"{filename}:{lineno}"
        found.append(f"{where}: {message}")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return len(found), found


def rollout(env: FixedShapeAutoresetVectorEnv, actions: Sequence[torch.Tensor], seed: int = 0) -> list[dict[str, Any]]:
    """Reset with ``seed``, step through ``actions``; return host copies of everything each step returned.

    Each record maps ``"obs"``, ``"reward"``, ``"terminated"``, ``"truncated"`` and every info key to
    ``{leaf path: tensor}`` (``()`` for a plain tensor). An info entry ``k`` that comes with a bool mask
    ``_k`` (``final_obs``, ``episode``...) is kept on the mask's rows only: elsewhere it is unspecified.
    """
    obs, info = env.reset(seed=seed)
    records: list[dict[str, Any]] = [_record({"obs": obs}, info)]
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        records.append(_record({"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated}, info))
    return records


def _record(out: dict[str, Any], info: dict[str, Any]) -> dict[str, dict[Any, torch.Tensor]]:
    rec = {key: _host(value) for key, value in out.items()}
    for key, value in info.items():
        mask = info.get(f"_{key}") if not key.startswith("_") else None
        if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
            rec[key] = {p: v[mask].detach().cpu().clone() for p, v in tree_leaves(value)}
        else:
            rec[key] = _host(value)
    return rec


def _host(tree: Any) -> dict[Any, torch.Tensor]:
    return {p: v.detach().cpu().clone() for p, v in tree_leaves(tree)}


def _absent_means_empty(key: str, present: dict[str, dict[Any, torch.Tensor]]) -> bool:
    """Whether a masked info entry (or its mask) missing from one run is all-False in the other.

    Gymnasium adds ``final_obs`` / ``episode`` keys only on steps that need them; fixed-key paths publish
    them with an all-False mask. Both say the same thing.
    """
    mask = present.get(key if key.startswith("_") else f"_{key}", {}).get(())
    return mask is not None and not bool(mask.any())


def _compare(a: list[dict[str, Any]], b: list[dict[str, Any]], what: str, atol: float) -> None:
    if len(a) != len(b):
        raise AssertionError(f"{what}: {len(a)} vs {len(b)} steps")
    for t, (x, y) in enumerate(zip(a, b, strict=True)):
        for key in list(dict.fromkeys([*x, *y])):
            if key not in x or key not in y:
                if not _absent_means_empty(key, x if key in x else y):
                    raise AssertionError(f"{what}: {key} is returned by one run only (step {t})")
                continue
            if x[key].keys() != y[key].keys():
                raise AssertionError(f"{what}: {key} has leaves {list(x[key])} vs {list(y[key])} at step {t}")
            for leaf in x[key]:
                u, v = x[key][leaf], y[key][leaf]
                same = u.shape == v.shape and (
                    torch.equal(u, v) if atol == 0 else torch.allclose(u.double(), v.double(), atol=atol)
                )
                if not same:
                    rows = _differing_rows(u, v, x.get(f"_{key}", {}).get(()), atol)
                    raise AssertionError(
                        f"{what}: {key}{list(leaf) if leaf else ''} differs at step {t}{_likely_cause(x, t, rows)}"
                    )


def _differing_rows(u: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, atol: float) -> list[int]:
    """The env rows where ``u`` and ``v`` differ (through ``mask`` for a masked entry kept on its rows)."""
    if u.shape != v.shape or u.dim() == 0:
        return []
    bad = (u != v) if atol == 0 else ((u.double() - v.double()).abs() > atol)
    bad = bad.reshape(u.shape[0], -1).any(dim=1)
    rows = bad.nonzero().flatten()
    if mask is not None and mask.dtype == torch.bool and mask.dim() == 1 and int(mask.sum()) == u.shape[0]:
        rows = mask.nonzero().flatten()[rows]
    return rows.tolist()


def _likely_cause(reference: dict[str, Any], t: int, rows: list[int]) -> str:
    """``" in rows [...]"`` and what most often makes those rows differ."""
    if not rows:
        return ""
    shown = f" in row(s) {rows[:8]}{' ...' if len(rows) > 8 else ''}"
    if t == 0:
        return f"{shown}: the first reset() already differs (seeding, or a draw that is not a function of the row)"
    flags = [reference.get(k, {}).get(()) for k in ("terminated", "truncated")]
    if any(f is None for f in flags):
        return shown
    done = (flags[0] | flags[1]).bool()
    if all(bool(done[r]) for r in rows if r < done.shape[0]):
        return (
            f"{shown}, which reset at this step: their new episode differs. Likely a reset draw that depends on "
            "which rows reset together (draw per row with gym_graphreset.rng, e.g. counter_uniform), or a reset "
            "that reads row ids where it was given a ResetSelection"
        )
    return (
        f"{shown}, which did not reset at this step: state carried over differently. Likely a reset that "
        "wrote rows it was not asked to (a full-width write without the mask), or an earlier step's difference"
    )


def assert_masked_matches_selected(
    env_factory: Factory,
    actions: Sequence[torch.Tensor],
    *,
    config: StepConfig | PresetName | None = None,
    seed: int = 0,
    atol: float = 0.0,
    flags: dict[str, Any] | None = None,
) -> None:
    """Assert that a masked configuration returns what the selected-row path returns, step for step.

    Args:
        env_factory: Builds a wrapped env from the wrapper's keywords (``{"config": ...}``).
        actions: The actions to step.
        config: The masked configuration (default: the ``"masked"`` preset).
        seed: Reset seed of both runs.
        atol: 0 for bitwise equality (counter-based draws on the CPU), else an absolute tolerance.
        flags: Earlier releases' form of ``config`` (wrapper keywords), still accepted.
    """
    reference = rollout(env_factory({"config": PRESETS["selected"]}), actions, seed)
    candidate = rollout(env_factory({"config": _config(flags or config, "masked")}), actions, seed)
    _compare(reference, candidate, "masked vs selected", atol)


def assert_capture_matches_eager(
    env_factory: Factory,
    actions: Sequence[torch.Tensor],
    *,
    graph: Literal["reset", "step"] = "reset",
    seed: int = 0,
    atol: float = 0.0,
    cuda_graph_scope: Literal["reset", "step"] | None = None,
) -> None:
    """Assert that the ``graph`` preset returns what the same configuration returns eagerly.

    ``cuda_graph_scope`` is earlier releases' name of ``graph``, still accepted.
    """
    graph = cuda_graph_scope or graph
    reference = rollout(env_factory({"config": PRESETS["masked_persistent"]}), actions, seed)
    captured_env = env_factory({"config": PRESETS["step_graph" if graph == "step" else "reset_graph"]})
    candidate = rollout(captured_env, actions, seed)
    if captured_env.graph is None or not captured_env.graph.captured:
        raise AssertionError("the captured configuration never captured a graph (too few steps for the warm-up?)")
    _compare(reference, candidate, f"captured ({graph}) vs eager", atol)


def assert_compiled_matches_uncompiled(
    env_factory: Factory,
    actions: Sequence[torch.Tensor],
    *,
    config: StepConfig | PresetName | None = None,
    backend: CompileBackend = "inductor",
    seed: int = 0,
    atol: float = 0.0,
    flags: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Assert that ``config`` compiled with ``backend`` returns what ``config`` returns as written, step for step.

    Every returned tensor is compared (nested info included); the compiled run must also report no graph
    break outside a declared boundary and no recompile. Returns its compile report.

    Args:
        env_factory: Builds a wrapped env from the wrapper's keywords (``{"config": ...}``).
        actions: The actions to step.
        config: A masked configuration (a preset name or a StepConfig; default ``"masked"``).
        backend: The ``torch.compile`` backend of the compiled run.
        seed: Reset seed of both runs.
        atol: 0 for bitwise equality (the tracing backends), else an absolute tolerance (Inductor reorders
            float arithmetic).
        flags: Earlier releases' form of ``config`` (wrapper keywords), still accepted.
    """
    as_written = _config(flags or config, "masked")
    reference = rollout(env_factory({"config": as_written}), actions, seed)
    env = env_factory({"config": dataclasses.replace(as_written, compile=backend)})
    candidate = rollout(env, actions, seed)
    _compare(reference, candidate, f"compiled ({backend}) vs as written", atol)
    report = env.capture_report().state["compile"]
    if not report["ok"]:
        raise AssertionError(f"the compiled step split or recompiled: {report['graph_breaks'] + report['recompiles']}")
    return report


def finished_episodes(
    env: FixedShapeAutoresetVectorEnv, actions: Sequence[torch.Tensor], seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns and lengths (float64, on the host) of every episode that ended while stepping ``actions``.

    The env needs an :class:`~gym_graphreset.terms.EpisodeStatistics` term (``info["episode"]``). One
    host read per step: this is a measurement helper, not a training loop.
    """
    from gym_graphreset.terms import EpisodeStatistics

    if not any(isinstance(t, EpisodeStatistics) for t in env.reset_terms.values()):
        raise ValueError("the env has no EpisodeStatistics term: add reset_terms={'episode': EpisodeStatistics()}")
    env.reset(seed=seed)
    returns, lengths = [], []
    for a in actions:
        *_, info = env.step(a)
        if "episode" not in info:  # the selected-row path adds it on steps where some row finished
            continue
        done = info["_episode"]
        returns.append(info["episode"]["r"][done].double().cpu())
        lengths.append(info["episode"]["l"][done].double().cpu())
    empty = torch.zeros(0, dtype=torch.float64)
    return torch.cat([empty, *returns]), torch.cat([empty, *lengths])


def ks_statistic(a: torch.Tensor, b: torch.Tensor) -> float:
    """The two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical CDFs."""
    a, b = a.double().sort().values, b.double().sort().values
    grid = torch.cat([a, b])
    cdf_a = torch.searchsorted(a, grid, right=True).double() / len(a)
    cdf_b = torch.searchsorted(b, grid, right=True).double() / len(b)
    return float((cdf_a - cdf_b).abs().max())


class EpisodeComparison(dict):
    """Per statistic (``return``, ``length``): sample sizes, means, Welch z and KS statistic vs its bound."""


def assert_statistically_equivalent(
    env_factory: Factory,
    actions: Sequence[torch.Tensor],
    *,
    config: StepConfig | PresetName | None = None,
    seed: int = 0,
    alpha: float = 1e-3,
    min_episodes: int = 100,
    flags: dict[str, Any] | None = None,
) -> EpisodeComparison:
    """Assert that a configuration's finished episodes are distributed like the selected-row path's.

    For GPU physics, which is not bitwise deterministic, so trajectories drift apart within an episode.
    Both runs step the same (state-independent) actions from the same seed; their episode returns and
    lengths are compared by a two-sample Kolmogorov-Smirnov test at level ``alpha`` and a Welch z-test of
    the means at the same level (Bonferroni over the four tests). Returns the statistics for reporting.

    Args:
        env_factory: Builds a wrapped env (with an EpisodeStatistics term) from the wrapper's keywords.
        actions: The actions to step (enough for ``min_episodes`` episodes in each run).
        config: The candidate configuration (default: the ``"masked"`` preset).
        seed: Reset seed of both runs.
        alpha: Family-wise false-alarm rate of the four tests.
        min_episodes: Fewer finished episodes in either run is an error, not a pass.
        flags: Earlier releases' form of ``config`` (wrapper keywords), still accepted.
    """
    import math

    reference = finished_episodes(env_factory({"config": PRESETS["selected"]}), actions, seed)
    candidate = finished_episodes(env_factory({"config": _config(flags or config, "masked")}), actions, seed)
    level = alpha / 4
    c_alpha = math.sqrt(-0.5 * math.log(level / 2))  # KS critical coefficient
    z_crit = _normal_quantile(1 - level / 2)
    report = EpisodeComparison()
    failures = []
    for name, x, y in (("return", reference[0], candidate[0]), ("length", reference[1], candidate[1])):
        n, m = len(x), len(y)
        if min(n, m) < min_episodes:
            raise AssertionError(f"only {n} and {m} episodes finished; need {min_episodes}: step more actions")
        se = math.sqrt(float(x.var()) / n + float(y.var()) / m) or 1e-12
        z = (float(y.mean()) - float(x.mean())) / se
        ks, bound = ks_statistic(x, y), c_alpha * math.sqrt((n + m) / (n * m))
        report[name] = {
            "n_selected": n,
            "n_candidate": m,
            "mean_selected": float(x.mean()),
            "mean_candidate": float(y.mean()),
            "welch_z": z,
            "z_bound": z_crit,
            "ks": ks,
            "ks_bound": bound,
        }
        if abs(z) > z_crit or ks > bound:
            failures.append(f"{name}: means {float(x.mean()):.4g} vs {float(y.mean()):.4g} (z={z:.2f}), KS {ks:.3f}")
    if failures:
        raise AssertionError("episode statistics differ from the selected-row path: " + "; ".join(failures))
    return report


def _normal_quantile(p: float) -> float:
    return float(torch.special.ndtri(torch.tensor(p, dtype=torch.float64)))
