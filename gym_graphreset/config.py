"""The wrapper's configuration as data: one frozen dataclass, validated in one place, five presets.

Every combination of flags the wrapper accepts is an :class:`AutoresetConfig`; an invalid one is a
``ValueError`` naming the flag at construction. The five legal step modes are :data:`PRESETS`, which the
benchmarks, the tests and the harness use instead of tables of their own.

Example:
    >>> AutoresetConfig.preset("step_graph").executor
    'step_graph'
    >>> AutoresetConfig(masked_autoreset=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `masked_autoreset=True` requires `defer_finite_validation=True`: ...
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gym_graphreset.compiling import CompileBackend

__all__ = ["PRESETS", "AutoresetConfig", "CaptureMode", "Executor", "GraphScope", "PresetName", "ResetPath"]

GraphScope = Literal["reset", "step"]
"""What one CUDA graph covers: the masked reset body, or the whole step."""
CaptureMode = Literal["global", "thread_local", "relaxed"]
"""CUDA stream capture modes (torch's and warp's names alike)."""
ResetPath = Literal["selected", "masked"]
"""How done rows are reset: by host-read ids, or through a full-width mask."""
Executor = Literal["eager", "reset_graph", "step_graph"]
"""What runs a step: plain calls, the reset body as a graph, or the whole step as a graph."""
PresetName = Literal["selected", "masked", "masked_persistent", "reset_graph", "step_graph"]
"""The names of the five :data:`PRESETS`."""


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be a bool, got {value!r}")


_INT64_MAX = 2**63 - 1
_MAXIMA: dict[str, tuple[int, str]] = {  # upper bounds, with why: refused at construction, not a hang or overflow later
    "published_buffer_depth": (2**16, "one copy of the step's outputs per slot"),
    "validation_poll_interval": (_INT64_MAX, "steps are counted in int64"),
    "autoreset_graph_warmup": (_INT64_MAX, "steps are counted in int64"),
}


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}, got {value!r}")
    maximum, why = _MAXIMA[name]
    if value > maximum:
        raise ValueError(f"`{name}` must be an int <= {maximum} ({why}), got {value!r}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        accepted = " or ".join(map(repr, choices)) if len(choices) == 2 else f"one of {choices}"
        raise ValueError(f"`{name}` must be {accepted}, got {value!r}")


def check_warmup(warmup: Any) -> int:
    """Validate a graph's warm-up (eager calls before the capture)."""
    _check_int("autoreset_graph_warmup", warmup, 0)
    return warmup


def check_capture_mode(capture_mode: Any) -> CaptureMode:
    """Validate a CUDA stream capture mode name."""
    _check_choice("autoreset_graph_capture_mode", capture_mode, get_args(CaptureMode))
    return capture_mode


@dataclass(frozen=True)
class AutoresetConfig:
    """How :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` steps and resets (all flags default off).

    Attributes:
        masked_autoreset: Reset done rows through a full-width mask every step (no host read) and publish
            ``final_obs`` every step. Requires ``defer_finite_validation``.
        defer_finite_validation: Latch checks on the device, poll every ``validation_poll_interval`` steps.
        validation_poll_interval: Steps between polls in deferred mode (>= 1).
        persistent_step_buffers: Fixed-address carriers, published through a ring.
        published_buffer_depth: What step ``t`` returned stays unchanged through step ``t + depth - 1``.
        autoreset_cuda_graph: Capture the reset body or the whole step as one CUDA graph. Requires
            ``masked_autoreset`` and ``persistent_step_buffers`` (and a CUDA env, checked by the wrapper).
        autoreset_graph_warmup: Eager steps before the capture (>= 0).
        autoreset_graph_capture_mode: CUDA stream capture mode, for torch and warp alike.
        cuda_graph_scope: ``"reset"`` (the masked reset body) or ``"step"`` (the whole step). ``"step"``
            requires ``autoreset_cuda_graph``.
        compile_step: Run the step's torch code through ``torch.compile`` (before any capture), so that
            many small kernels become few (:mod:`gym_graphreset.compiling`). Requires
            ``masked_autoreset`` (the selected-row path reads the host by design), and not the
            ``"reset"`` graph scope (use the whole-step graph).
        compile_backend: The ``torch.compile`` backend (``"inductor"`` fuses; ``"aot_eager"``/``"eager"``
            only trace). Only read with ``compile_step``.
    """

    masked_autoreset: bool = False
    defer_finite_validation: bool = False
    validation_poll_interval: int = 32
    persistent_step_buffers: bool = False
    published_buffer_depth: int = 2
    autoreset_cuda_graph: bool = False
    autoreset_graph_warmup: int = 3
    autoreset_graph_capture_mode: CaptureMode = "thread_local"
    cuda_graph_scope: GraphScope = "reset"
    compile_step: bool = False
    compile_backend: CompileBackend = "inductor"

    def __post_init__(self) -> None:
        for name in (
            "masked_autoreset",
            "defer_finite_validation",
            "persistent_step_buffers",
            "autoreset_cuda_graph",
            "compile_step",
        ):
            _check_bool(name, getattr(self, name))
        _check_int("validation_poll_interval", self.validation_poll_interval, 1)
        _check_int("published_buffer_depth", self.published_buffer_depth, 1)
        check_warmup(self.autoreset_graph_warmup)
        check_capture_mode(self.autoreset_graph_capture_mode)
        _check_choice("cuda_graph_scope", self.cuda_graph_scope, get_args(GraphScope))
        _check_choice("compile_backend", self.compile_backend, get_args(CompileBackend))
        if self.masked_autoreset and not self.defer_finite_validation:
            raise ValueError(
                "`masked_autoreset=True` requires `defer_finite_validation=True`: checking every step "
                "would read the host every step"
            )
        if self.autoreset_cuda_graph and not (self.masked_autoreset and self.persistent_step_buffers):
            raise ValueError(
                "`autoreset_cuda_graph=True` requires `masked_autoreset=True` and "
                f"`persistent_step_buffers=True`, got masked_autoreset={self.masked_autoreset}, "
                f"persistent_step_buffers={self.persistent_step_buffers}"
            )
        if self.cuda_graph_scope == "step" and not self.autoreset_cuda_graph:
            raise ValueError("`cuda_graph_scope='step'` requires `autoreset_cuda_graph=True`")
        if self.compile_step and not self.masked_autoreset:
            raise ValueError(
                "`compile_step=True` requires `masked_autoreset=True`: the selected-row path reads the host "
                "every step, which would split the compiled step at every read"
            )
        if self.compile_step and self.executor == "step_graph" and self.autoreset_graph_warmup < 2:
            raise ValueError(
                "`compile_step=True` with the step graph requires `autoreset_graph_warmup >= 2` (the first step runs "
                f"as written, the second compiles; compiling during the capture would fail), got "
                f"{self.autoreset_graph_warmup}"
            )
        if self.compile_step and self.executor == "reset_graph":
            raise ValueError(
                "`compile_step=True` cannot be combined with `cuda_graph_scope='reset'` (the reset body would be "
                "captured inside a compiled step); use cuda_graph_scope='step', which captures the compiled step"
            )

    @classmethod
    def preset(cls, name: PresetName, **overrides: Any) -> AutoresetConfig:
        """One of the five modes (:data:`PRESETS`), with ``overrides`` applied and validated."""
        _check_choice("preset", name, tuple(PRESETS))
        return dataclasses.replace(PRESETS[name], **overrides)

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The names of every flag, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @property
    def reset_path(self) -> ResetPath:
        """How done rows are found and reset: by host-read ids (``"selected"``) or a mask (``"masked"``)."""
        return "masked" if self.masked_autoreset else "selected"

    @property
    def executor(self) -> Executor:
        """What runs a step: eagerly, with the reset body captured, or the whole step captured."""
        if not self.autoreset_cuda_graph:
            return "eager"
        return "step_graph" if self.cuda_graph_scope == "step" else "reset_graph"

    def flags(self) -> dict[str, Any]:
        """The flags that differ from the defaults, as keyword arguments of the wrapper."""
        default = AutoresetConfig()
        return {f: getattr(self, f) for f in self.fields() if getattr(self, f) != getattr(default, f)}


_MASKED = AutoresetConfig(masked_autoreset=True, defer_finite_validation=True)
_PERSISTENT = dataclasses.replace(_MASKED, persistent_step_buffers=True)

PRESETS: dict[PresetName, AutoresetConfig] = {
    "selected": AutoresetConfig(),
    "masked": _MASKED,
    "masked_persistent": _PERSISTENT,
    "reset_graph": dataclasses.replace(_PERSISTENT, autoreset_cuda_graph=True),
    "step_graph": dataclasses.replace(_PERSISTENT, autoreset_cuda_graph=True, cuda_graph_scope="step"),
}
"""The five step modes, from the classic selected-row path to the whole step in one CUDA graph."""
