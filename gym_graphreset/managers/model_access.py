"""What a task's terms read from the env: values cached per step phase or for the env's life, model ids by name.

:class:`ModelAccess` is a mixin of :class:`~gym_graphreset.managers.manager_based_env.ManagerBasedEnv`: the lookups
resolve names once (cached as constants, their host uploads one-time) so that terms read only device tensors in a step.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Literal

import torch

from gym_graphreset.capture.host_reads import one_time_uploads

__all__ = ["ModelAccess", "Phase", "PhaseCache", "PhaseName"]


_COUNTS = {
    "body": ("nbody", "bodies"),
    "geom": ("ngeom", "geoms"),
    "joint": ("njnt", "joints"),
    "sensor": ("nsensor", "sensors"),
    "site": ("nsite", "sites"),
}
"""MuJoCo object kind -> (the model's count field, plural): a failed name lookup lists the names there are."""


def _listing(names: list[str], family: int = 5) -> list[str]:
    """``names`` in model order, a numbered family of more than ``family`` names as one ``'first' ... 'last' (k)``."""
    import re

    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(re.sub(r"\d+$", "#", n), []).append(n)
    out: list[str] = []
    for members in groups.values():
        out += members if len(members) <= family else [f"{members[0]} ... {members[-1]} ({len(members)} names)"]
    return out


PhaseName = Literal["setup", "physics", "events", "forward", "observe", "observed", "reset", "new_state", "started"]
"""The phases of a task's step and reset, in order; a value cached in one is not read in another.

``setup``: construction. A step: ``physics`` (after the physics: sensors, rewards, terminations, commands and
interval events), ``events`` (after commands and interval events, which may write the state: metrics),
``forward`` (after ``TaskCfg.forward_before_obs``'s forward pass), ``observe`` (the observation alone: a
``cast="before_obs"`` ray sensor casts only here) and ``observed`` (after it: recorders). A reset: ``reset``
(curricula and events on the terminal state), ``new_state`` (after the physics reset: startup events and every
manager's reset), ``started`` (after them), then ``observe`` and ``observed`` as in a step.
"""


class Phase:
    """The phase the env is in now (the env's one instance, updated in place as phases begin).

    Attributes:
        name: The phase.
        rows: In ``observe``: the rows observed (the reset mask after a reset; ``None``: every row, after a
            step); ``None`` in other phases.
    """

    __slots__ = ("name", "rows")

    def __init__(self) -> None:
        self.name: PhaseName = "setup"
        self.rows: torch.Tensor | None = None


class PhaseCache:
    """Values computed once per step phase (:meth:`ModelAccess.cached`), keyed by the phase they were computed in.

    The env begins each phase in one place (:meth:`begin`), which starts the phase's values afresh: a value is
    read only in the phase that computed it, so nothing places an invalidation by hand. Not a ``dict``
    attribute of the env on purpose: a captured graph's buffer watch scans the env's tensor attributes and dicts
    of tensors, and these entries are transient (every phase starts with the cache empty), so a graph never
    reads an entry computed outside it, and an eager step's new entries must not make a reset graph recapture.
    """

    __slots__ = ("phase", "values")

    def __init__(self) -> None:
        self.phase = Phase()
        self.values: dict[Hashable, Any] = {}

    def begin(self, name: PhaseName, rows: torch.Tensor | None = None) -> None:
        """Enter phase ``name`` (``rows``: the rows an ``observe`` phase observes); the last phase's values go."""
        self.phase.name, self.phase.rows = name, rows
        self.values.clear()

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value of ``key`` computed in this phase (``compute()`` the first time it is asked for)."""
        values = self.values
        if key not in values:
            values[key] = compute()
        return values[key]


class ModelAccess:
    """Caches and name lookups over the env's MuJoCo model (``mjm``) and MuJoCo Warp model (``m``).

    The env sets ``_cache`` (a :class:`PhaseCache`) and ``_constants`` (a dict) before any term binds, and has
    ``mjm``, ``m``, ``device``, ``num_envs``, ``joint_names``, ``batched_model_fields`` and ``_model_defaults``.
    """

    mjm: Any
    m: Any
    device: torch.device
    num_envs: int
    joint_names: tuple[str, ...]
    batched_model_fields: tuple[str, ...]
    _model_defaults: dict[str, torch.Tensor]
    _cache: PhaseCache
    _constants: dict[Hashable, Any]

    def cached(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per step phase (:data:`PhaseName`: after the physics, after events, a reset...)."""
        return self._cache.get(key, compute)

    @property
    def phase(self) -> Phase:
        """The phase the env is in (a term that reads differently in an observation reads ``phase.name``)."""
        return self._cache.phase

    def constant(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()`` once for the env's lifetime (ids, offsets, scale tensors of a term).

        Its host uploads (``torch.tensor([...])``) are one-time, so the host-read check does not count them.
        """
        if key not in self._constants:
            with one_time_uploads():
                self._constants[key] = compute()
        return self._constants[key]

    def invalidate(self) -> None:
        """Begin the current phase anew, forgetting its cached values (the state was written from outside).

        For code that writes the physics state outside the env's step and reset (``set_state``, a
        ``mujoco_warp`` call on ``env.d``); the env's own phases need no call.
        """
        phase = self._cache.phase
        self._cache.begin(phase.name, phase.rows)

    def _id(self, kind: Any, name: str, what: str) -> int:
        """The id of ``name``; an unknown name is refused with its close matches first, then the model's names.

        Numbered families (a terrain's ``terrain_box_0`` ... ``terrain_box_611``) are listed as one entry.
        """
        import difflib

        import mujoco

        i = mujoco.mj_name2id(self.mjm, kind, name)
        if i < 0:
            noun = str(kind).split("_")[-1].lower()
            count, plural = _COUNTS.get(noun, ("", ""))
            names = [mujoco.mj_id2name(self.mjm, kind, j) for j in range(getattr(self.mjm, count, 0))]
            named = [n for n in names if n]
            close = difflib.get_close_matches(name, named, n=5)
            hint = f"; close: {close}" if close else ""
            listed = f"; the model's {plural}: {_listing(named)}" if count else ""
            raise ValueError(f"{what}: the model has no {noun} {name!r}{hint}{listed}")
        return int(i)

    def body_id(self, name: str) -> int:
        """The id of body ``name``."""
        import mujoco

        return self.constant(("body", name), lambda: self._id(mujoco.mjtObj.mjOBJ_BODY, name, "body_id"))

    def site_ids(self, names: tuple[str, ...]) -> torch.Tensor:
        """Ids of sites, ``(k,)`` on the device."""
        import mujoco

        return self.constant(
            ("sites", names),
            lambda: torch.tensor(
                [self._id(mujoco.mjtObj.mjOBJ_SITE, s, "site_ids") for s in names], device=self.device
            ),
        )

    def site_body_ids(self, names: tuple[str, ...]) -> torch.Tensor:
        """The bodies the sites are fixed to, ``(k,)``."""
        import mujoco

        def compute() -> torch.Tensor:
            ids = [self._id(mujoco.mjtObj.mjOBJ_SITE, s, "site_body_ids") for s in names]
            return torch.tensor([int(self.mjm.site_bodyid[i]) for i in ids], device=self.device)

        return self.constant(("site_bodies", names), compute)

    def site_offset(self, name: str) -> torch.Tensor:
        """A site's position in its body's frame, expanded to ``(n, 3)``."""
        import mujoco

        sid = self._id(mujoco.mjtObj.mjOBJ_SITE, name, "site_offset")
        return torch.tensor(self.mjm.site_pos[sid], dtype=torch.float32, device=self.device).expand(self.num_envs, 3)

    def geom_ids(self, names: tuple[str, ...]) -> torch.Tensor:
        """Ids of geoms, ``(k,)`` on the device."""
        import mujoco

        return self.constant(
            ("geoms", names),
            lambda: torch.tensor(
                [self._id(mujoco.mjtObj.mjOBJ_GEOM, g, "geom_ids") for g in names], device=self.device
            ),
        )

    def joint_index(self, names: tuple[str, ...], what: str) -> list[int]:
        """Positions of ``names`` among the action joints."""
        missing = [j for j in names if j not in self.joint_names]
        if missing:
            raise ValueError(f"{what}: {missing} are not action joints")
        return [self.joint_names.index(j) for j in names]

    def actuator_ids(self, joint_names: tuple[str, ...], what: str) -> list[int]:
        """The actuator driving each joint (exactly one per joint)."""
        import mujoco

        mjm = self.mjm
        out = []
        for j in joint_names:
            jid = self._id(mujoco.mjtObj.mjOBJ_JOINT, j, what)
            acts = [
                a for a in range(mjm.nu) if int(mjm.actuator_trnid[a, 0]) == jid and int(mjm.actuator_trntype[a]) == 0
            ]
            if len(acts) != 1:
                raise ValueError(f"{what}: joint {j!r} must be driven by exactly one actuator, found {len(acts)}")
            out.append(acts[0])
        return out

    def model_field(self, name: str) -> torch.Tensor:
        """A per-world MuJoCo Warp model field (declared in an event's ``model_fields``), ``(n, ...)``."""
        if name not in self.batched_model_fields:
            raise ValueError(
                f"model field {name!r} is not per-world: declare it in the event's `model_fields` "
                f"(per-world now: {list(self.batched_model_fields)})"
            )
        import warp as wp

        return self.constant(("model_field", name), lambda: wp.to_torch(getattr(self.m, name)))

    def model_default(self, name: str) -> torch.Tensor:
        """World 0's value of a per-world model field at construction (before any randomisation)."""
        return self._model_defaults[name]
