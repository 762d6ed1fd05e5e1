"""The wrapper's configuration as data: each field is one decision, five presets name the common ones.

A :class:`StepConfig` says how done rows are reset (``reset_path``), whether outputs live in persistent
buffers, what one CUDA graph covers (``graph``, if any), when checks are read (``validation``) and
whether the step's torch code is compiled. A graph implies the masked path and persistent buffers, and
the masked path implies deferred validation: leave those fields out and they follow; write a
contradiction and it is a ``ValueError`` naming both fields. :data:`PRESETS` are the five step modes,
which the benchmarks, the tests and the harness use.

The boolean keywords of earlier releases (``masked_autoreset=True``...) are still accepted by the
wrapper; :func:`from_flags` (the only place that reads them) maps them onto a :class:`StepConfig` with a
``DeprecationWarning`` (see the configuration docs for the table).

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
import warnings
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gym_graphreset.capture.compiling import CompileBackend

__all__ = [
    "LEGACY_FLAGS",
    "PRESETS",
    "RUNTIME_FIELDS",
    "CaptureMode",
    "Executor",
    "GraphScope",
    "PresetName",
    "ResetPath",
    "StepConfig",
    "Validation",
    "check_capture_mode",
    "check_warmup",
    "from_flags",
]

GraphScope = Literal["reset", "step"]
"""What one CUDA graph covers: the masked reset body, or the whole step."""
CaptureMode = Literal["global", "thread_local", "relaxed"]
"""CUDA stream capture modes (torch's and warp's names alike)."""
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
    "autoreset_graph_warmup": (_INT64_MAX, "steps are counted in int64"),  # the old keyword, checked by its name
}


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}, got {value!r}")
    maximum, why = _MAXIMA[name]
    if value > maximum:
        raise ValueError(f"`{name}` must be an int <= {maximum} ({why}), got {value!r}")


def _check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value not in choices:
        accepted = " or ".join(map(repr, choices)) if len(choices) == 2 else f"one of {choices}"
        raise ValueError(f"`{name}` must be {accepted}, got {value!r}")


def check_warmup(warmup: Any) -> int:
    """Validate a graph's warm-up (eager calls before the capture)."""
    _check_int("graph_warmup", warmup, 0)
    return warmup


def check_capture_mode(capture_mode: Any) -> CaptureMode:
    """Validate a CUDA stream capture mode name."""
    _check_choice("capture_mode", capture_mode, get_args(CaptureMode))
    return capture_mode


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
        _check_int("validation_poll_interval", self.validation_poll_interval, 1)
        _check_int("published_buffer_depth", self.published_buffer_depth, 1)
        check_warmup(self.graph_warmup)
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
        """One of the five modes (:data:`PRESETS`), with ``overrides`` (fields) applied and validated."""
        _check_choice("preset", name, tuple(PRESETS))
        return dataclasses.replace(PRESETS[name], **overrides)

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


PRESETS: dict[PresetName, StepConfig] = {
    "selected": StepConfig(),
    "masked": StepConfig(reset_path="masked"),
    "masked_persistent": StepConfig(reset_path="masked", persistent_buffers=True),
    "reset_graph": StepConfig(graph="reset"),
    "step_graph": StepConfig(graph="step"),
}
"""The five step modes, from the classic selected-row path to the whole step in one CUDA graph."""

RUNTIME_FIELDS = ("validation_poll_interval", "published_buffer_depth")
"""Fields that are not decisions about the step: the wrapper takes them as keywords too."""

LEGACY_FLAGS: dict[str, str] = {
    "masked_autoreset": "reset_path='masked'",
    "defer_finite_validation": "validation='deferred'",
    "persistent_step_buffers": "persistent_buffers=True",
    "autoreset_cuda_graph": "graph='reset' or graph='step'",
    "cuda_graph_scope": "graph='reset' or graph='step'",
    "autoreset_graph_warmup": "graph_warmup=...",
    "autoreset_graph_capture_mode": "capture_mode=...",
    "compile_step": "compile='inductor' (a backend)",
    "compile_backend": "compile=<backend>",
}
"""The boolean keywords of earlier releases, and what replaces each (see :func:`from_flags`)."""


def _legacy_values(config: StepConfig) -> dict[str, Any]:
    """``config`` as the keywords of earlier releases: the base :func:`from_flags` applies old keywords to."""
    return {
        "masked_autoreset": config.masked,
        "defer_finite_validation": config.deferred,
        "persistent_step_buffers": config.persistent_buffers,
        "autoreset_cuda_graph": config.graph is not None,
        "cuda_graph_scope": config.graph or "reset",
        "autoreset_graph_warmup": config.graph_warmup,
        "autoreset_graph_capture_mode": config.capture_mode,
        "compile_step": config.compile is not None,
        "compile_backend": config.compile or "inductor",
    }


def from_flags(config: StepConfig | PresetName | None, flags: dict[str, Any]) -> StepConfig:
    """``config`` (a preset name, a :class:`StepConfig` or ``None``: selected) with keyword ``flags`` applied.

    ``flags`` may hold :data:`RUNTIME_FIELDS` (applied as they are) and the keywords of earlier releases
    (:data:`LEGACY_FLAGS`, mapped onto the fields with a ``DeprecationWarning``). This function is the one
    place that reads the old keywords.

    Raises:
        TypeError: An unknown keyword, or ``config`` of the wrong type.
        ValueError: A value or a combination the configuration refuses, named.
    """
    accepted = [*RUNTIME_FIELDS, *LEGACY_FLAGS]
    if unknown := sorted(set(flags) - set(accepted)):
        fields = [f for f in unknown if f in StepConfig.fields()]
        hint = f"; pass {fields} in `config=StepConfig(...)`" if fields else ""
        raise TypeError(f"unknown wrapper flag(s) {unknown}; accepted: {accepted}{hint}")
    if config is None:
        base = StepConfig()
    elif isinstance(config, str):
        base = StepConfig.preset(config)
    elif isinstance(config, StepConfig):
        base = config
    else:
        raise TypeError(f"`config` must be a StepConfig or a preset name {list(PRESETS)}, got {type(config).__name__}")
    runtime = {k: v for k, v in flags.items() if k in RUNTIME_FIELDS}
    legacy = {k: v for k, v in flags.items() if k in LEGACY_FLAGS}
    if not legacy:
        return dataclasses.replace(base, **runtime)
    warnings.warn(
        "the wrapper's boolean keywords are deprecated: "
        + ", ".join(f"`{k}` -> {LEGACY_FLAGS[k]}" for k in legacy)
        + "; pass `config=` a preset name or a StepConfig",
        DeprecationWarning,
        stacklevel=3,
    )
    old = _legacy_values(base) | legacy
    for name in ("masked_autoreset", "defer_finite_validation", "persistent_step_buffers", "autoreset_cuda_graph"):
        if not isinstance(old[name], bool):
            raise ValueError(f"`{name}` must be a bool, got {old[name]!r}")
    if not isinstance(old["compile_step"], bool):
        raise ValueError(f"`compile_step` must be a bool, got {old['compile_step']!r}")
    _check_choice("cuda_graph_scope", old["cuda_graph_scope"], get_args(GraphScope))
    _check_choice("compile_backend", old["compile_backend"], get_args(CompileBackend))
    _check_int("autoreset_graph_warmup", old["autoreset_graph_warmup"], 0)
    _check_choice("autoreset_graph_capture_mode", old["autoreset_graph_capture_mode"], get_args(CaptureMode))
    if old["masked_autoreset"] and not old["defer_finite_validation"]:
        raise ValueError(
            "`masked_autoreset=True` requires `defer_finite_validation=True`: checking every step would read the "
            "host every step"
        )
    if old["compile_step"] and not old["masked_autoreset"]:
        raise ValueError(
            "`compile_step=True` requires `masked_autoreset=True`: the selected-row path reads the host every "
            "step, which would split the compiled step at every read"
        )
    if old["cuda_graph_scope"] == "step" and not old["autoreset_cuda_graph"]:
        raise ValueError("`cuda_graph_scope='step'` requires `autoreset_cuda_graph=True`")
    if old["autoreset_cuda_graph"] and not (old["masked_autoreset"] and old["persistent_step_buffers"]):
        raise ValueError(
            "`autoreset_cuda_graph=True` requires `masked_autoreset=True` and `persistent_step_buffers=True`, got "
            f"masked_autoreset={old['masked_autoreset']}, persistent_step_buffers={old['persistent_step_buffers']}"
        )
    return StepConfig(
        reset_path="masked" if old["masked_autoreset"] else "selected",
        persistent_buffers=old["persistent_step_buffers"],
        graph=old["cuda_graph_scope"] if old["autoreset_cuda_graph"] else None,
        validation="deferred" if old["defer_finite_validation"] else "immediate",
        compile=old["compile_backend"] if old["compile_step"] else None,
        validation_poll_interval=runtime.get("validation_poll_interval", base.validation_poll_interval),
        published_buffer_depth=runtime.get("published_buffer_depth", base.published_buffer_depth),
        graph_warmup=old["autoreset_graph_warmup"],
        capture_mode=old["autoreset_graph_capture_mode"],
    )
