"""The wrapper's configuration as data: each field is one decision, five presets name the common ones.

A :class:`StepConfig` says how done rows are reset (``reset_path``), whether outputs live in persistent
buffers, what one CUDA graph covers (``graph``, if any), when checks are read (``validation``) and
whether the step's torch code is compiled. A graph implies the masked path and persistent buffers, and
the masked path implies deferred validation: leave those fields out and they follow; write a
contradiction and it is a ``ValueError`` naming both fields. :data:`PRESETS` are the five step modes,
which the benchmarks, the tests and the harness use.

Example:
    >>> StepConfig(graph="step").reset_path
    'masked'
    >>> StepConfig(reset_path="selected", graph="step")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `graph='step'` resets through the mask: it needs `reset_path='masked'`...
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gym_graphreset.capture.compiling import CompileBackend
from gym_graphreset.capture.modes import CaptureMode, check_capture_mode

__all__ = [
    "PRESETS",
    "RUNTIME_FIELDS",
    "Executor",
    "GraphScope",
    "PresetName",
    "ResetPath",
    "StepConfig",
    "Validation",
]

GraphScope = Literal["reset", "step"]
"""What one CUDA graph covers: the masked reset body, or the whole step."""
ResetPath = Literal["selected", "masked"]
"""How done rows are reset: by host-read ids, or through a full-width mask."""
Validation = Literal["immediate", "deferred"]
"""When checks are read: every step (a host read), or latched on the device and polled."""
Executor = Literal["eager", "reset_graph", "step_graph"]
"""What runs a step: plain calls, the reset body as a graph, or the whole step as a graph."""
PresetName = Literal["selected", "masked", "masked_persistent", "reset_graph", "step_graph"]
"""The names of the five :data:`PRESETS`."""


_INT64_MAX = 2**63 - 1
_MAXIMA: dict[str, tuple[int, str]] = {  # upper bounds, with why: refused at construction, not a hang or overflow later
    "published_buffer_depth": (2**16, "one copy of the step's outputs per slot"),
    "validation_poll_interval": (_INT64_MAX, "steps are counted in int64"),
    "graph_warmup": (_INT64_MAX, "steps are counted in int64"),
}


def _check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` as a Python int (a numpy integer too), or a ``ValueError`` naming ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}, got {value!r}")
    maximum, why = _MAXIMA[name]
    if int(value) > maximum:
        raise ValueError(f"`{name}` must be an int <= {maximum} ({why}), got {value!r}")
    return int(value)


def _check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value not in choices:
        accepted = " or ".join(map(repr, choices)) if len(choices) == 2 else f"one of {choices}"
        raise ValueError(f"`{name}` must be {accepted}, got {value!r}")


@dataclass(frozen=True)
class StepConfig:
    """How :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` steps and resets.

    Fields left ``None`` follow from the others (a graph implies ``reset_path="masked"`` and
    ``persistent_buffers=True``; the masked path implies ``validation="deferred"``); after construction
    every field holds its value.

    Attributes:
        reset_path: ``"selected"`` (default: done rows found with a host read and reset by id) or
            ``"masked"`` (a full-width mask every step, no host read; ``final_obs`` every step).
        persistent_buffers: Outputs in fixed-address carriers, published through a ring.
        graph: ``None`` (no CUDA graph), ``"reset"`` (the masked reset body is one graph) or ``"step"``
            (the whole step is one graph). A CUDA env is checked by the wrapper.
        validation: ``"immediate"`` (every step reads its checks) or ``"deferred"`` (latched on the
            device, polled every ``validation_poll_interval`` steps).
        compile: A ``torch.compile`` backend for the step's torch code (:mod:`gym_graphreset.capture.compiling`),
            or ``None``. Needs the masked path, and no ``"reset"`` graph (use ``"step"``).
        validation_poll_interval: Steps between polls with deferred validation (>= 1); may be changed
            between steps (``env.validation_poll_interval``).
        published_buffer_depth: What step ``t`` (or a reset after it) returned stays unchanged through step
            ``t + depth - 1`` (1 to 65,536; slots are made on first use).
        graph_warmup: Eager steps before the capture (>= 0; >= 2 with ``compile`` and the step graph).
        capture_mode: CUDA stream capture mode, for torch and warp alike.
    """

    reset_path: ResetPath | None = None
    persistent_buffers: bool | None = None
    graph: GraphScope | None = None
    validation: Validation | None = None
    compile: CompileBackend | None = None
    validation_poll_interval: int = 32
    published_buffer_depth: int = 2
    graph_warmup: int = 3
    capture_mode: CaptureMode = "thread_local"

    def __post_init__(self) -> None:
        _check_choice("graph", self.graph, (None, *get_args(GraphScope)))
        _check_choice("reset_path", self.reset_path, (None, *get_args(ResetPath)))
        if self.persistent_buffers is not None and not isinstance(self.persistent_buffers, bool):
            raise ValueError(f"`persistent_buffers` must be None or a bool, got {self.persistent_buffers!r}")
        _check_choice("validation", self.validation, (None, *get_args(Validation)))
        _check_choice("compile", self.compile, (None, *get_args(CompileBackend)))
        for name, minimum in (("validation_poll_interval", 1), ("published_buffer_depth", 1), ("graph_warmup", 0)):
            object.__setattr__(self, name, _check_int(name, getattr(self, name), minimum))
        check_capture_mode(self.capture_mode)
        graph = self.graph
        if graph is not None and self.reset_path == "selected":
            raise ValueError(
                f"`graph={graph!r}` resets through the mask: it needs `reset_path='masked'`, got 'selected'"
            )
        if graph is not None and self.persistent_buffers is False:
            raise ValueError(
                f"`graph={graph!r}` holds its outputs at fixed addresses: it needs `persistent_buffers=True`"
            )
        path = self.reset_path or ("masked" if graph is not None else "selected")
        if path == "masked" and self.validation == "immediate":
            raise ValueError(
                "`reset_path='masked'` needs `validation='deferred'`: reading the checks every step would read "
                "the host every step"
            )
        object.__setattr__(self, "reset_path", path)
        object.__setattr__(self, "persistent_buffers", bool(self.persistent_buffers or graph is not None))
        object.__setattr__(self, "validation", self.validation or ("deferred" if path == "masked" else "immediate"))
        if self.compile is not None and path == "selected":
            raise ValueError(
                "`compile` needs `reset_path='masked'`: the selected-row path reads the host every step, which "
                "would split the compiled step at every read"
            )
        if self.compile is not None and graph == "reset":
            raise ValueError(
                "`compile` cannot be combined with `graph='reset'` (the reset body would be captured inside a "
                "compiled step); use graph='step', which captures the compiled step"
            )
        if self.compile is not None and graph == "step" and self.graph_warmup < 2:
            raise ValueError(
                "`compile` with `graph='step'` needs `graph_warmup >= 2` (the first step runs as written, the "
                f"second compiles; compiling during the capture would fail), got {self.graph_warmup}"
            )

    @classmethod
    def preset(cls, name: PresetName, **overrides: Any) -> StepConfig:
        """One of the five modes (:data:`PRESETS`), with ``overrides`` (fields) applied and validated.

        The overrides apply to the preset's decisions, and the fields left out follow again:
        ``preset("masked", reset_path="selected")`` is ``StepConfig(reset_path="selected")`` (immediate
        validation), not the masked preset's deferred validation kept over the selected path.

        Raises:
            ValueError: An unknown preset name, or a value or combination the configuration refuses.
            TypeError: An override that is not a field (the fields are listed).
        """
        _check_choice("preset", name, tuple(PRESETS))
        if unknown := sorted(set(overrides) - set(cls.fields())):
            raise TypeError(f"unknown StepConfig field(s) {unknown}; the fields are {list(cls.fields())}")
        return cls(**(_PRESET_DECISIONS[name] | overrides))

    @classmethod
    def resolve(cls, config: StepConfig | PresetName | None) -> StepConfig:
        """``config`` as a :class:`StepConfig`: a preset name is looked up, ``None`` is the default (selected).

        Raises:
            ValueError: An unknown preset name.
            TypeError: ``config`` is neither a :class:`StepConfig`, a preset name nor ``None``.
        """
        if config is None:
            return cls()
        if isinstance(config, str):
            return cls.preset(config)  # an unknown name is refused by preset
        if isinstance(config, StepConfig):
            return config
        raise TypeError(f"`config` must be a StepConfig or a preset name {list(PRESETS)}, got {type(config).__name__}")

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The names of every field, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @property
    def executor(self) -> Executor:
        """What runs a step: eagerly, with the reset body captured, or the whole step captured."""
        return "eager" if self.graph is None else "step_graph" if self.graph == "step" else "reset_graph"

    @property
    def masked(self) -> bool:
        """``reset_path == "masked"``."""
        return self.reset_path == "masked"

    @property
    def deferred(self) -> bool:
        """``validation == "deferred"``."""
        return self.validation == "deferred"


_PRESET_DECISIONS: dict[PresetName, dict[str, Any]] = {
    "selected": {},
    "masked": {"reset_path": "masked"},
    "masked_persistent": {"reset_path": "masked", "persistent_buffers": True},
    "reset_graph": {"graph": "reset"},
    "step_graph": {"graph": "step"},
}
"""The fields each preset decides; :meth:`StepConfig.preset` applies overrides to these and derives the rest."""

PRESETS: dict[PresetName, StepConfig] = {name: StepConfig(**fields) for name, fields in _PRESET_DECISIONS.items()}
"""The five step modes, from the classic selected-row path to the whole step in one CUDA graph."""

RUNTIME_FIELDS = ("validation_poll_interval", "published_buffer_depth")
"""Fields that are not decisions about the step: the wrapper takes them as keywords too."""
