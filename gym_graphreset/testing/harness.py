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

The sync detectors are defined in :mod:`gym_graphreset.testing.host_syncs`, :func:`rollout` and the report of
where two rollouts differ in :mod:`gym_graphreset.testing.rollouts`; all are importable from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import torch

from gym_graphreset.capture.compiling import CompileBackend
from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.config import PRESETS, PresetName, StepConfig
from gym_graphreset.testing.host_reads import assert_no_host_reads, count_host_reads
from gym_graphreset.testing.host_syncs import SyncCanaryResult, assert_sync_free, count_host_syncs
from gym_graphreset.testing.rollouts import (
    ObservationLayout,
    compare_rollouts,
    differing_obs_terms,
    info_columns,
    rollout,
)

if TYPE_CHECKING:
    from gym_graphreset.managers.forward_passes import ForwardMode

__all__ = [
    "EpisodeComparison",
    "assert_compiled_matches_uncompiled",
    "SyncCanaryResult",
    "assert_no_host_reads",
    "assert_capture_matches_eager",
    "assert_declared_forward_matches_full",
    "assert_masked_matches_selected",
    "assert_statistically_equivalent",
    "assert_sync_free",
    "count_host_reads",
    "count_host_syncs",
    "finished_episodes",
    "ks_statistic",
    "rollout",
]

Factory = Callable[[dict[str, Any]], FixedShapeAutoresetVectorEnv]
"""Builds a wrapped env from the wrapper's keyword arguments (``{"config": StepConfig}``): ``**`` them in."""


def _config(config: StepConfig | PresetName | None, default: PresetName) -> StepConfig:
    """A preset name or a StepConfig (``None``: ``default``), as a StepConfig (an unknown name is refused)."""
    return StepConfig.resolve(config if config is not None else default)


def assert_masked_matches_selected(
    env_factory: Factory,
    actions: Sequence[torch.Tensor],
    *,
    config: StepConfig | PresetName | None = None,
    seed: int = 0,
    atol: float = 0.0,
) -> None:
    """Assert that a masked configuration returns what the selected-row path returns, step for step.

    Args:
        env_factory: Builds a wrapped env from the wrapper's keywords (``{"config": ...}``).
        actions: The actions to step.
        config: The masked configuration (default: the ``"masked"`` preset).
        seed: Reset seed of both runs.
        atol: 0 for bitwise equality (counter-based draws on the CPU), else an absolute tolerance.
    """
    reference_env = env_factory({"config": PRESETS["selected"]})
    columns = info_columns(reference_env)  # names the term when a named info column differs
    reference = rollout(reference_env, actions, seed)
    candidate = rollout(env_factory({"config": _config(config, "masked")}), actions, seed)
    compare_rollouts(reference, candidate, "masked vs selected", atol, columns)


def assert_capture_matches_eager(
    env_factory: Factory,
    actions: Sequence[torch.Tensor],
    *,
    graph: Literal["reset", "step"] = "reset",
    seed: int = 0,
    atol: float = 0.0,
) -> None:
    """Assert that the ``graph`` preset returns what the same configuration returns eagerly."""
    reference = rollout(env_factory({"config": PRESETS["masked_persistent"]}), actions, seed)
    captured_env = env_factory({"config": PRESETS["step_graph" if graph == "step" else "reset_graph"]})
    candidate = rollout(captured_env, actions, seed)
    if captured_env.graph is None or not captured_env.graph.captured:
        raise AssertionError("the captured configuration never captured a graph (too few steps for the warm-up?)")
    compare_rollouts(reference, candidate, f"captured ({graph}) vs eager", atol)


def assert_compiled_matches_uncompiled(
    env_factory: Factory,
    actions: Sequence[torch.Tensor],
    *,
    config: StepConfig | PresetName | None = None,
    backend: CompileBackend = "inductor",
    seed: int = 0,
    atol: float = 0.0,
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
    """
    as_written = _config(config, "masked")
    reference = rollout(env_factory({"config": as_written}), actions, seed)
    env = env_factory({"config": dataclasses.replace(as_written, compile=backend)})
    candidate = rollout(env, actions, seed)
    compare_rollouts(reference, candidate, f"compiled ({backend}) vs as written", atol)
    report = env.capture_report().state["compile"]
    if not report["ok"]:
        raise AssertionError(f"the compiled step split or recompiled: {report['graph_breaks'] + report['recompiles']}")
    return report


def assert_declared_forward_matches_full(
    env_factory: Callable[[ForwardMode], FixedShapeAutoresetVectorEnv],
    actions: Sequence[torch.Tensor],
    *,
    seed: int = 0,
) -> None:
    """Assert that a task's declared forward passes give, bit for bit, what MuJoCo Warp's whole forward gives.

    The check of :mod:`~gym_graphreset.managers.forward_passes` declarations: a term that reads a quantity
    outside the passes it declares reads it stale, and its observation differs from the full forward's. Run on
    the CPU (bitwise); the error names the observation terms that differ first.

    Args:
        env_factory: Builds the wrapped task env with ``TaskCfg.forward_passes`` set to its argument
            (``"declared"`` or ``"full"``; ``forward_before_obs=True``).
        actions: The actions to step (long enough to cross resets).
        seed: Reset seed of both runs.
    """
    full_env = env_factory("full")
    columns = info_columns(full_env)
    inner = full_env.env
    layout = inner.observation_layout if isinstance(inner, ObservationLayout) else {}
    reference = rollout(full_env, actions, seed)
    candidate = rollout(env_factory("declared"), actions, seed)
    try:
        compare_rollouts(reference, candidate, "declared forward passes vs the full forward", 0.0, columns)
    except AssertionError as e:
        terms = differing_obs_terms(reference, candidate, layout)
        hint = " (they read a quantity outside the forward passes they declare)" if terms else ""
        raise AssertionError(f"{e}{terms}{hint}") from None


def finished_episodes(
    env: FixedShapeAutoresetVectorEnv, actions: Sequence[torch.Tensor], seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns and lengths (float64, on the host) of every episode that ended while stepping ``actions``.

    The env needs an :class:`~gym_graphreset.core.terms.EpisodeStatistics` term (``info["episode"]``). One
    host read per step: this is a measurement helper, not a training loop.
    """
    from gym_graphreset.core.terms import EpisodeStatistics

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
    """
    import math

    reference = finished_episodes(env_factory({"config": PRESETS["selected"]}), actions, seed)
    candidate = finished_episodes(env_factory({"config": _config(config, "masked")}), actions, seed)
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
