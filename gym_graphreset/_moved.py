"""Old module paths of the flat layout, still importable: each is the module at its new place.

``import gym_graphreset.wrapper`` gives ``gym_graphreset.core.autoreset_env`` itself (the same module object,
so classes compare equal) with a ``DeprecationWarning`` naming the new path. Only names in :data:`MOVED` are
served; the finder answers nothing else.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install"]

MOVED: dict[str, str] = {
    "selection": "core.selection",
    "rng": "core.rng",
    "buffers": "core.buffers",
    "validation": "core.validation",
    "config": "core.config",
    "protocols": "core.protocols",
    "participants": "core.participants",
    "inputs": "core.inputs",
    "terms": "core.terms",
    "executors": "core.executors",
    "same_step": "core.same_step",
    "masked_path": "core.masked_path",
    "stepping": "core.stepping",
    "failures": "core.failures",
    "wrapper": "core.autoreset_env",
    "graph": "capture.graph",
    "host_transitions": "capture.host_transitions",
    "compiling": "capture.compiling",
    "dynamo_records": "capture.dynamo_records",
    "host_syncs": "testing.host_syncs",
    "host_reads": "testing.host_reads",
    "rollouts": "testing.rollouts",
    "bench_results": "bench.results",
    "baselines": "bench.baselines",
    "plotting": "bench.plotting",
    "peers.compare": "bench.peers.compare",
    "peers.mjlab_runner": "bench.peers.mjlab_runner",
    "peers": "bench.peers",
    "rendering": "envs.mjwarp.rendering",
    "envs.warp_runtime": "envs.mjwarp.runtime",
    "envs.mjwarp_reset": "envs.mjwarp.reset",
    "envs.mjwarp_checks": "envs.mjwarp.checks",
    "envs.mujoco_base": "envs.gym_mujoco.base",
    "envs.mujoco_3d": "envs.gym_mujoco.bodies_3d",
    "envs.mujoco_tasks": "envs.gym_mujoco.tasks",
    "envs.reset_heavy": "envs.gym_mujoco.reset_heavy",
    "envs.go1_cfg": "envs.go1.cfg",
    "envs.go1_command": "tasks.mdp.commands",
    "envs.go1_model": "envs.go1.model",
    "envs.go1_terms": "tasks.mdp.math",
}
"""Old module (under ``gym_graphreset.``) -> where it lives now."""


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"`{spec.name}` moved to `{self.new}`; import it from there", DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported at its new place."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        old = fullname.removeprefix("gym_graphreset.")
        if old == fullname or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias("gym_graphreset." + MOVED[old]))


def install() -> None:
    """Serve the old paths (idempotent), first in ``sys.meta_path``.

    A moved package's old submodule paths must resolve to the new modules, not load the same file a second
    time under the old name.
    """
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
