"""Rollout records and the report of where two of them differ.

:func:`rollout` resets and steps a wrapped env and keeps host copies of every tensor each step returned
(nested info included; an entry ``k`` with a mask ``_k`` on the mask's rows only). The comparison of two
records names the key, leaf, step and rows that differ and the most likely cause (a reset draw that depends
on which rows reset together, or a reset that wrote rows it was not asked to); where the inner env names its
info columns (:class:`~gym_graphreset.core.protocols.InfoColumns`, a task's reward terms), the terms whose
columns differ, and the draws API that makes a term reproducible. The conformance harness of
:mod:`gym_graphreset.testing.harness` compares two configurations' rollouts with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.buffers import tree_leaves
from gym_graphreset.core.participants import release_inner_env
from gym_graphreset.core.protocols import InfoColumns

__all__ = ["ObservationLayout", "compare_rollouts", "rollout"]


@runtime_checkable
class ObservationLayout(Protocol):
    """An env whose observation groups concatenate named terms: ``{group: {term: column slice}}``."""

    observation_layout: dict[str, dict[str, slice]]


def rollout(env: FixedShapeAutoresetVectorEnv, actions: Sequence[torch.Tensor], seed: int = 0) -> list[dict[str, Any]]:
    """Reset with ``seed``, step through ``actions``; return host copies of everything each step returned.

    Each record maps ``"obs"``, ``"reward"``, ``"terminated"``, ``"truncated"`` and every info key to
    ``{leaf path: tensor}`` (``()`` for a plain tensor). An info entry ``k`` that comes with a bool mask
    ``_k`` (``final_obs``, ``episode``...) is kept on the mask's rows only: elsewhere it is unspecified.
    Afterwards ``env`` gives up its claim on its inner env (without closing either), so that a harness may
    wrap the same inner env again for the run it compares against.
    """
    obs, info = env.reset(seed=seed)
    records: list[dict[str, Any]] = [_record({"obs": obs}, info)]
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        records.append(_record({"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated}, info))
    release_inner_env(env, env.env)
    return records


def info_columns(env: FixedShapeAutoresetVectorEnv) -> dict[str, tuple[str, ...]]:
    """The named info columns of ``env``'s inner env (:class:`~gym_graphreset.core.protocols.InfoColumns`), if any."""
    inner = env.env
    return dict(inner.info_columns) if isinstance(inner, InfoColumns) else {}


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


def compare_rollouts(
    a: list[dict[str, Any]],
    b: list[dict[str, Any]],
    what: str,
    atol: float,
    columns: dict[str, tuple[str, ...]] | None = None,
) -> None:
    """Raise ``AssertionError`` at the first step and key where the rollouts ``a`` and ``b`` differ (``what``: a label).

    Values agree within ``atol`` (0: bitwise); ``columns`` names a key's columns so the message names the term.
    """
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
                    terms = _differing_columns(x, y, columns or {}, atol)
                    cause = f"{_shown(rows)}{_term_cause(terms)}" if terms else _likely_cause(x, t, rows)
                    raise AssertionError(f"{what}: {key}{list(leaf) if leaf else ''} differs at step {t}{cause}")


def _differing_columns(
    x: dict[str, Any], y: dict[str, Any], columns: dict[str, tuple[str, ...]], atol: float
) -> dict[str, list[str]]:
    """Info key -> the names of its columns that differ between ``x`` and ``y`` (one step's records)."""
    found: dict[str, list[str]] = {}
    for key, names in columns.items():
        u, v = x.get(key, {}).get(()), y.get(key, {}).get(())
        if u is None or v is None or u.shape != v.shape or u.dim() < 1 or u.shape[-1] != len(names):
            continue
        bad = (u != v) if atol == 0 else ((u.double() - v.double()).abs() > atol)
        cols = bad.reshape(-1, len(names)).any(dim=0).tolist()
        if any(cols):
            found[key] = [n for n, c in zip(names, cols, strict=True) if c]
    return found


def _term_cause(terms: dict[str, list[str]]) -> str:
    """What the differing named columns say: those terms gave other values from the same state and draws."""
    named = "; ".join(f"info[{k!r}] columns {v}" for k, v in terms.items())
    return (
        f": the term(s) that differ: {named}. A term that gives other values from the same state reads randomness "
        "of its own (torch.rand/randn, numpy, random): draw through the env's counter-based draws instead (an "
        "event's `u` from EventTerm(draws=k), a command's reset/step draws, or env.streams(name) with "
        "gym_graphreset.core.rng.counter_uniform), which are the same on every path"
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


def _shown(rows: list[int]) -> str:
    return f" in row(s) {rows[:8]}{' ...' if len(rows) > 8 else ''}" if rows else ""


def _likely_cause(reference: dict[str, Any], t: int, rows: list[int]) -> str:
    """``" in rows [...]"`` and what most often makes those rows differ."""
    if not rows:
        return ""
    shown = _shown(rows)
    if t == 0:
        return f"{shown}: the first reset() already differs (seeding, or a draw that is not a function of the row)"
    flags = [reference.get(k, {}).get(()) for k in ("terminated", "truncated")]
    if any(f is None for f in flags):
        return shown
    done = (flags[0] | flags[1]).bool()
    if all(bool(done[r]) for r in rows if r < done.shape[0]):
        return (
            f"{shown}, which reset at this step: their new episode differs. Likely a reset draw that depends on "
            "which rows reset together (draw per row with gym_graphreset.core.rng, e.g. counter_uniform), or a reset "
            "that reads row ids where it was given a ResetSelection"
        )
    return (
        f"{shown}, which did not reset at this step: state carried over differently. Likely a reset that "
        "wrote rows it was not asked to (a full-width write without the mask), or an earlier step's difference"
    )


def differing_obs_terms(a: list[dict[str, Any]], b: list[dict[str, Any]], layout: dict[str, dict[str, slice]]) -> str:
    """``": observation term(s) [...] differ first at step t"`` for two rollouts' records, or ``""``.

    A group returned as one tensor names the terms whose columns differ (``layout``); a group of terms, its keys.
    """
    for t, (x, y) in enumerate(zip(a, b, strict=False)):
        names: list[str] = []
        for leaf, u in x.get("obs", {}).items():
            v = y.get("obs", {}).get(leaf)
            if v is None or u.shape != v.shape or torch.equal(u, v):
                continue
            group = leaf[0] if leaf else next(iter(layout), "")
            if len(leaf) > 1:
                names.append(f"{group}/{leaf[1]}")
                continue
            bad = (u != v).reshape(-1, u.shape[-1]).any(dim=0)
            names += [f"{group}/{term}" for term, cols in layout.get(group, {}).items() if bool(bad[cols].any())]
        if names:
            return f": observation term(s) {names} differ first at step {t}"
    return ""
