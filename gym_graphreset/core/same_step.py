"""The SAME_STEP output both reset paths build, and the reset path they share.

Gymnasium's ``SAME_STEP`` info of a step whose done rows were just reset (:func:`same_step_info`: the
step's info in ``final_info``, the reset's info merged on the reset rows), the ``finite_reset_obs`` check
(:func:`check_reset_obs`), every term's fixed-key, full-width info (:class:`TermInfos`), and
:class:`AutoresetPath`, the base of the selected-row and masked paths: the explicit ``reset()``, the term
resets, the carriers and the publication of term infos. The paths themselves are
:class:`~gym_graphreset.core.reset_paths.SelectedRowPath` and :class:`~gym_graphreset.core.reset_paths.MaskedPath`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from gym_graphreset.core.buffers import TensorStore, tree_leaves, tree_map, tree_where
from gym_graphreset.core.participants import Participants
from gym_graphreset.core.protocols import Rows, StepData
from gym_graphreset.core.selection import participant_name
from gym_graphreset.core.validation import ValidationLatch, finite_rows

__all__ = ["AutoresetPath", "StepOut", "TermInfos", "check_reset_obs", "same_step_info"]

StepOut = tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]
"""``(obs, reward, terminated, truncated, info)``, as Gymnasium returns a step."""


def check_reset_obs(latch: ValidationLatch, reset_obs: Any, rows: torch.Tensor | None) -> None:
    """Latch ``finite_reset_obs``: the reset rows' (``None``: every row's) new observations are finite."""
    for _, leaf in tree_leaves(reset_obs):
        if leaf.dtype.is_floating_point:
            ok = finite_rows(leaf) if rows is None else finite_rows(leaf) | ~rows
            latch.require(ok, "finite_reset_obs", "a reset produced NaN or inf observations")


def same_step_info(step_info: dict[str, Any], reset_info: dict[str, Any], done: torch.Tensor) -> dict[str, Any]:
    """Gymnasium's ``SAME_STEP`` info of a step whose ``done`` rows were just reset (fixed shapes, no host read).

    - ``final_info`` is the step's own info (what the finished episodes' last step said), each key masked
      to the done rows (``final_info["_k"]``), and ``_final_info`` the done mask;
    - the reset's info is merged in on the reset rows: a key ``k`` it returned (on the rows of its mask
      ``_k``, or every reset row) replaces the step's value there, and ``_k`` says which rows hold a value;
    - a step key that comes with a mask ``_k`` (Gymnasium-style per-env infos) is cleared from the reset
      rows' mask, as Gymnasium's ``SyncVectorEnv`` reports only the reset's info for them. Keys without a
      mask (a torch env's full-width values) keep the step's values.
    """
    info = dict(step_info)
    for key in step_info:
        mask_key = f"_{key}"
        if not key.startswith("_") and isinstance(step_info.get(mask_key), torch.Tensor):
            info[mask_key] = step_info[mask_key] & ~done
    for key, value in reset_info.items():
        if key.startswith("_"):
            continue
        given = reset_info.get(f"_{key}")
        rows = done if not isinstance(given, torch.Tensor) else given & done
        if key in info and _same_layout(info[key], value):
            info[key] = tree_where(rows, value, info[key])
            if isinstance(info.get(f"_{key}"), torch.Tensor):
                info[f"_{key}"] = info[f"_{key}"] | rows
        else:
            info[key], info[f"_{key}"] = value, rows
    info["final_info"], info["_final_info"] = _on_rows(step_info, done), done
    return info


def _on_rows(info: dict[str, Any], rows: torch.Tensor) -> dict[str, Any]:
    """``info`` valid on ``rows`` only: every key ``k`` gets (or narrows) its mask ``_k``; nested dicts too."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if key.startswith("_"):
            continue
        out[key] = _on_rows(value, rows) if isinstance(value, dict) else value
        given = info.get(f"_{key}")
        out[f"_{key}"] = given & rows if isinstance(given, torch.Tensor) else rows
    return out


def _same_layout(a: Any, b: Any) -> bool:
    la, lb = list(tree_leaves(a)), list(tree_leaves(b))
    return len(la) == len(lb) > 0 and all(
        pa == pb and ta.shape == tb.shape and ta.dtype == tb.dtype for (pa, ta), (pb, tb) in zip(la, lb, strict=True)
    )


def _fresh(tree: Any) -> Any:
    return tree_map(torch.clone, tree)


class TermInfos:
    """Reads every term's ``info()`` and holds it to its contract: fixed keys, full-width tensors.

    Every read checks that each tensor leaf has ``num_envs`` rows and that the keys are the ones the
    first read returned (host metadata only: no device read). A term that breaks either is refused by
    name (a ``ValueError`` naming the term and the key), never published half-shaped.
    """

    def __init__(self, providers: list[tuple[str, Callable[[], dict[str, Any]]]], num_envs: int) -> None:
        self.providers = providers
        self.num_envs = num_envs
        self._keys: dict[str, tuple[str, ...]] = {}

    def read(self) -> dict[str, Any]:
        """Every term's entries, merged in term order."""
        out: dict[str, Any] = {}
        for name, provider in self.providers:
            entries = provider()
            self._check_width(name, entries)  # every read: shapes are host metadata, no device read
            keys = tuple(entries)
            known = self._keys.get(name)
            if known is None:
                self._keys[name] = keys
            elif keys != known:
                raise ValueError(
                    f"reset term {name!r}: info() must return the same keys every step (fixed keys), returned "
                    f"{list(keys)} after {list(known)}"
                )
            out.update(entries)
        return out

    def owner(self, key: str) -> str:
        """The class of the term whose ``info()`` returned ``key`` (as read so far)."""
        for name, provider in self.providers:
            if key in self._keys.get(name, ()):
                return participant_name(getattr(provider, "__self__", provider))
        return "?"

    def _check_width(self, name: str, entries: dict[str, Any]) -> None:
        if not isinstance(entries, dict):
            raise TypeError(f"reset term {name!r}: info() must return a dict, got {type(entries).__name__}")
        narrow = _narrow_leaf(entries, self.num_envs, ())
        if narrow is not None:
            path, shape = narrow
            key = "".join([f"[{p!r}]" for p in path])
            raise ValueError(
                f"reset term {name!r}: info(){key} must be full width, shape (num_envs={self.num_envs}, ...), "
                f"got {shape}"
            )


def _narrow_leaf(tree: Any, rows: int, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[int, ...]] | None:
    """The path and shape of the first tensor leaf without ``rows`` rows, or ``None``.

    Plain recursion (no generator), so ``torch.compile`` traces it inside the step on every read.
    """
    if isinstance(tree, torch.Tensor):
        return None if tree.dim() > 0 and tree.shape[0] == rows else (path, tuple(tree.shape))
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, (tuple, list)) else ()
    for key, value in items:
        found = _narrow_leaf(value, rows, (*path, key))
        if found is not None:
            return found
    return None


class AutoresetPath:
    """What both reset paths own: the resets, the publishers, the reset-obs check, carriers and term infos.

    The inner env's and the terms' resets, explicit (:meth:`reset`) and of done rows
    (:meth:`reset_done_rows`), as the step path owns the step.
    """

    obs_carrier: Any = None

    def __init__(self, env: VectorEnv, parts: Participants, latch: ValidationLatch, persistent: bool) -> None:
        self.env = env
        self.parts = parts
        self.latch = latch
        self.carriers = TensorStore() if persistent else None
        self.infos = TermInfos(parts.info_providers, env.num_envs)
        self.final_infos = TensorStore()

    def capture_buffers(self) -> list[torch.Tensor]:
        """The carriers a graph writes (declared: they sit in a store, deeper than attributes)."""
        carriers = [] if self.carriers is None else list(self.carriers.buffers())
        return carriers + self.final_infos.buffers() + [leaf for _, leaf in tree_leaves(self.obs_carrier)]

    def final_term_infos(self) -> dict[str, Any]:
        """Every term's info before the done rows reset: what a finished episode's last step said.

        Held in a store (persistent carriers: a graph rewrites it in place) or a fresh copy, since the
        reset that follows may change the terms' tensors in place.
        """
        entries = self.infos.read()
        return self.final_infos.write(entries) if self.carriers is not None else _fresh(entries)

    def term_infos(self, info: dict[str, Any], final: dict[str, Any] | None) -> None:
        """Every term's info after the reset into ``info``; ``final`` (read before it) into ``final_info``.

        Published copies: in place, the ring copies; otherwise a fresh copy, so a kept reference is not
        overwritten by the next step (Gymnasium hands out fresh arrays too).
        """
        entries = self.infos.read()
        if entries and (clash := [k for k in entries if k in info]):  # host-side key check: no device read
            raise ValueError(
                f"the reset term {self.infos.owner(clash[0])} publishes info key(s) {clash} that the step's info "
                "already holds (from the inner env or its reset): one would silently replace the other"
            )
        info.update(entries if self.carriers is not None else _fresh(entries))
        if final is not None:  # what the finished episodes' last step said, as Gymnasium's per-env wrappers
            info["final_info"].update(_on_rows(final, info["_final_info"]))

    def terms_reset(self, rows: Rows) -> None:
        """Reset ``rows`` of every term, in order."""
        for term in self.parts.terms.values():
            term.reset(rows)

    def reset(
        self, seed: int | None, options: dict[str, Any] | None, mask: torch.Tensor | None
    ) -> tuple[Any, dict[str, Any]]:
        """An explicit ``reset()``: the inner env, every term, the publishers (full reset), the obs check.

        ``mask`` is the checked ``options["reset_mask"]`` (``None``: every row); ``options`` already holds
        it for the inner env. Returns the observations in the carrier once one exists.
        """
        obs, info = self.env.reset(seed=seed, options=options)
        self.terms_reset(self.rows_for_terms(mask))
        if mask is None:
            for clear in self.parts.publishers:
                clear()
        check_reset_obs(self.latch, obs, mask)
        return self.write_reset_obs(obs), info

    def rows_for_terms(self, mask: torch.Tensor | None) -> Rows:
        """What terms get on an explicit ``reset()`` for ``mask`` (``None``: every row)."""
        raise NotImplementedError

    def write_reset_obs(self, obs: Any) -> Any:
        """An explicit reset's observations, as published (the carrier, on the masked path, once it exists)."""
        return obs

    def reset_done_rows(self, step: StepData, info: dict[str, Any]) -> StepOut:
        """Reset the rows that finished this step and build the SAME_STEP output."""
        raise NotImplementedError
