"""Register a task as a Gymnasium vector env id, so every trainer, script and CLI can make it by name.

One registry for every task, the library's own included: :func:`register_task` stores a
:class:`RegisteredTask` as the id's vector entry point in Gymnasium's registry, and :func:`task_cfg` reads a
task's default config back from it. Nothing here imports MuJoCo Warp: a task and its env class may be named
as ``"module:attribute"`` strings, imported when an env is made.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from gym_graphreset.assets.robot_model import MODEL_OPTIONS

if TYPE_CHECKING:
    from gym_graphreset.managers.task_cfg import TaskCfg

__all__ = [
    "CFG_EDITS",
    "RegisteredTask",
    "make_task_env",
    "register_task",
    "registered_task",
    "task_cfg",
]

CFG_EDITS = ("obs_clip", "forward_before_obs", "forward_passes")
"""The ``TaskCfg`` fields a task may take as options: ``replace(cfg, field=value)``, on a given ``cfg=`` too."""


def _load(ref: Any) -> Any:
    """``ref`` itself, or the attribute a ``"module:attribute"`` string names (imported now)."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _task_cfg_type() -> type[TaskCfg]:
    from gym_graphreset.managers.task_cfg import TaskCfg

    return TaskCfg


def _named(names: tuple[str, ...] | list[str]) -> str:
    return " / ".join(f"`{n}`" for n in names) or "none"


@dataclass(frozen=True)
class RegisteredTask:
    """A registered task: the vector entry point Gymnasium stores for its id (see :func:`register_task`)."""

    env_id: str
    task: Any
    """A ``TaskCfg``, a function returning one, or a ``"module:attribute"`` string naming either."""
    env_class: Any = "gym_graphreset.managers.manager_based_env:ManagerBasedEnv"
    """The env class (or its ``"module:attribute"``), built as ``env_class(cfg=cfg, num_envs=n, **kwargs)``."""
    options: tuple[str, ...] = ()
    """Keyword arguments of ``make_vec`` the task takes: the factory's parameters, or ``TaskCfg`` fields of
    :data:`CFG_EDITS`."""

    @property
    def factory_options(self) -> tuple[str, ...]:
        """The options the task's factory takes (a ``cfg=`` replaces them)."""
        return tuple(o for o in self.options if o not in CFG_EDITS)

    def cfg(self, cfg: TaskCfg | None = None, **options: Any) -> TaskCfg:
        """The task's config: ``cfg``, or the task built with ``options``, then the options' ``TaskCfg`` edits.

        Raises:
            ValueError: an option the task does not take (naming those it takes), or ``cfg`` with a factory
                option (a cfg names its own model).
            TypeError: the task is neither a TaskCfg nor a function returning one.
        """
        task_cfg_type = _task_cfg_type()
        if unknown := [k for k in options if k not in self.options]:
            raise ValueError(
                f"{self.env_id!r} takes no `{unknown[0]}`: its options are {_named(self.options)} "
                "(other keywords go to the env)"
            )
        edits = {k: options.pop(k) for k in CFG_EDITS if k in options}
        edits = {k: v for k, v in edits.items() if v is not None}  # None: the task's own value
        options = {k: v for k, v in options.items() if v is not None}  # None: the task's default
        if cfg is not None and (given := [k for k, v in options.items() if v is not False]):
            use = f"; use {_qualname(self.task)}(model_xml, keep_sensors=True)"
            hint = use if self.factory_options[:2] == MODEL_OPTIONS else ""
            raise ValueError(
                f"give {_named(given)} or `cfg`, not both (a cfg names its own model: give "
                f"{_named(self.factory_options)} or `cfg`{hint})"
            )
        if cfg is None:
            task = _load(self.task)
            cfg = task(**options) if callable(task) and not isinstance(task, task_cfg_type) else task
        if not isinstance(cfg, task_cfg_type):
            raise TypeError(f"the task must be a TaskCfg or a function returning one, got {type(cfg).__name__}")
        return dataclasses.replace(cfg, **edits) if edits else cfg

    def split(self, cfg: TaskCfg | None, kwargs: Mapping[str, Any]) -> tuple[TaskCfg, dict[str, Any]]:
        """The task's config for ``make_vec``'s keywords, and the keywords left for the env.

        A model variant (``model_xml`` / ``keep_sensors``) asked of a task that does not take one is refused
        here, naming the options it takes.
        """
        asked = [k for k in kwargs if k in self.options or k in MODEL_OPTIONS]
        rest = {k: v for k, v in kwargs.items() if k not in asked}
        return self.cfg(cfg, **{k: kwargs[k] for k in asked}), rest

    def __deepcopy__(self, memo: dict[int, Any]) -> RegisteredTask:
        return self  # frozen: Gymnasium deep-copies the spec of every env it makes

    def __call__(self, num_envs: int = 1, *, cfg: TaskCfg | None = None, **kwargs: Any) -> Any:
        """The env of ``num_envs`` worlds (``cfg``: this task replaced; ``kwargs``: options and env arguments)."""
        task, rest = self.split(cfg, kwargs)
        return _load(self.env_class)(cfg=task, num_envs=num_envs, **rest)


def _qualname(task: Any) -> str:
    if isinstance(task, str):
        return task.partition(":")[2]
    return str(getattr(task, "__name__", type(task).__name__))


def make_task_env(task: TaskCfg | Callable[..., TaskCfg], num_envs: int = 1, **kwargs: Any) -> Any:
    """A :class:`~gym_graphreset.managers.manager_based_env.ManagerBasedEnv` of ``task`` (a config or a factory)."""
    return RegisteredTask("<unregistered>", task)(num_envs, **kwargs)


def register_task(
    env_id: str,
    task: TaskCfg | Callable[..., TaskCfg] | str,
    *,
    env_class: type | str | None = None,
    options: tuple[str, ...] = (),
    max_episode_steps: int | None = None,
    replace: bool = False,
) -> RegisteredTask:
    """Register ``task`` as the vector env ``env_id`` (``gym.make_vec(env_id, n, vectorization_mode=...)``).

    A function is called at each ``make_vec``, so the model is built when the env is made, not at import.
    ``gym.make_vec(env_id, n, ..., cfg=other)`` builds ``other`` in place of the registered task (``play
    --motion`` rebuilds a task with recorders that way).
    An id registered from a module ``my_tasks`` can be made from any process as ``"my_tasks:<env_id>"``
    (Gymnasium imports the module first): ``examples/ppo_continuous.py --env-id my_tasks:MyLab/Walk-v0`` and
    ``python -m gym_graphreset play`` find it that way.

    Args:
        env_id: The id.
        task: A ``TaskCfg``, a function returning one, or a ``"module:attribute"`` string naming either
            (imported when an env is made).
        env_class: The env class, or its ``"module:attribute"`` (default
            :class:`~gym_graphreset.managers.manager_based_env.ManagerBasedEnv`); give one only where it adds
            behaviour. It is built as ``env_class(cfg=cfg, num_envs=n, **kwargs)``.
        options: ``make_vec`` keywords the task takes: parameters of the function (``model_xml`` and
            ``keep_sensors``, a task's model variant, among them), or ``obs_clip`` / ``forward_before_obs`` /
            ``forward_passes``, which edit the config. A model variant asked of a task without it is refused,
            naming the options.
        max_episode_steps: The spec's horizon (Gymnasium's ``TimeLimit``; ``None``: none).
        replace: Re-register an id on purpose.

    Returns:
        The registered task (Gymnasium's entry point for ``env_id``).

    Raises:
        ValueError: ``env_id`` is already registered (pass ``replace=True`` to re-register it), or a ``task``
            string is not ``"module:attribute"``.
        TypeError: ``task`` is neither a TaskCfg, a callable nor a ``"module:attribute"`` string.
    """
    if isinstance(task, str):  # checked without an import: MuJoCo Warp loads when an env is made
        if task.count(":") != 1:
            raise ValueError(f"a `task` string must be 'module:attribute', got {task!r}")
    elif not (callable(task) or isinstance(task, _task_cfg_type())):
        raise TypeError(f"`task` must be a TaskCfg or a function returning one, got {type(task).__name__}")
    _check_options(env_id, task, tuple(options))
    if env_id in gym.registry and not replace:
        raise ValueError(f"`env_id` {env_id!r} is already registered (pass replace=True to re-register it)")
    entry = RegisteredTask(env_id, task, options=tuple(options))
    if env_class is not None:
        entry = dataclasses.replace(entry, env_class=env_class)
    gym.registry.pop(env_id, None)  # replace=True: re-registered on purpose, without Gymnasium's warning
    gym.register(id=env_id, vector_entry_point=entry, max_episode_steps=max_episode_steps)
    return entry


def _check_options(env_id: str, task: Any, options: tuple[str, ...]) -> None:
    """Refuse options a function task does not take (a ``"module:attribute"`` task is imported when made).

    Without this a misspelled option would pass registration and fail at ``make_vec`` as a bare ``TypeError``.
    """
    wanted = [o for o in options if o not in CFG_EDITS]
    if isinstance(task, str) or not wanted:
        return
    takes: list[str] = []
    if callable(task):
        params = inspect.signature(task).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return
        takes = sorted(p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY)
    if unknown := [o for o in wanted if o not in takes]:
        raise ValueError(
            f"register_task({env_id!r}): `options` {unknown} are not parameters of the task (it takes "
            f"{takes or 'none'}); options are the task function's parameters or the config edits {list(CFG_EDITS)}"
        )


def registered_task(env_id: str) -> RegisteredTask | None:
    """The task registered as ``env_id`` through :func:`register_task` (``None``: another kind of id, or none).

    A ``"module:id"`` (as ``gym.make_vec`` takes it) is looked up by its ``id``; the module is not imported here.
    """
    spec = gym.registry.get(env_id.rpartition(":")[2])
    entry = None if spec is None else spec.vector_entry_point
    return entry if isinstance(entry, RegisteredTask) else None


def task_cfg(env_id: str) -> TaskCfg | None:
    """The config a registered task id builds by default (``None``: an id that takes no task config)."""
    entry = registered_task(env_id)
    return None if entry is None else entry.cfg()
