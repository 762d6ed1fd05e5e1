"""The checks :class:`~gym_graphreset.core.autoreset_env.FixedShapeAutoresetVectorEnv` makes of its arguments.

Its keywords and configuration (:func:`resolve_config`), the inner env's autoreset mode against the
configuration (:func:`check_inner_env`), the participants against the configuration
(:func:`negotiate`), and the messages it gives the other ranks and a refused partial reset.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NoReturn

import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from gym_graphreset.capture.graph import cuda_capture_reasons
from gym_graphreset.core.config import PresetName, StepConfig
from gym_graphreset.core.participants import Participants
from gym_graphreset.core.selection import ResetSelectionUnsupportedError, participant_name

__all__ = [
    "KEYWORDS",
    "check_inner_env",
    "negotiate",
    "partial_reset_refusal",
    "poll_settings",
    "raised",
    "refuse_keywords",
    "resolve_config",
]


KEYWORDS = ("config", "reset_terms", "process_group", "published_buffer_depth", "validation_poll_interval")
"""The wrapper's keywords besides ``env``."""


def refuse_keywords(unknown: list[str]) -> NoReturn:
    """A ``TypeError`` naming ``unknown`` and the accepted keywords (and where a field of StepConfig goes)."""
    fields = [k for k in unknown if k in StepConfig.fields()]
    hint = f"; pass {fields} in `config=StepConfig(...)`" if fields else ""
    raise TypeError(f"unknown keyword(s) {unknown}; FixedShapeAutoresetVectorEnv accepts {list(KEYWORDS)}{hint}")


def resolve_config(
    config: StepConfig | PresetName | None,
    published_buffer_depth: int | None,
    validation_poll_interval: int | None,
    unknown: dict[str, Any],
) -> StepConfig:
    """The wrapper's :class:`StepConfig`: ``config`` resolved, with the keywords given applied over it.

    Raises:
        TypeError: ``unknown`` keywords (named, with the accepted ones), or ``config`` of the wrong type.
    """
    if unknown:
        refuse_keywords(sorted(unknown))
    cfg = StepConfig.resolve(config)
    if published_buffer_depth is not None:
        cfg = dataclasses.replace(cfg, published_buffer_depth=published_buffer_depth)
    if validation_poll_interval is not None:
        cfg = dataclasses.replace(cfg, validation_poll_interval=validation_poll_interval)
    return cfg


def raised(call: str, exc: BaseException) -> str:
    """``"step() 6 raised ValueError: ..."``: what a call raised, for the other ranks."""
    return f"{call} raised {type(exc).__name__}" + (f": {exc}" if str(exc) else "")


def check_inner_env(env: VectorEnv, cfg: StepConfig, device: torch.device) -> AutoresetMode:
    """The inner env's autoreset mode, checked against ``cfg`` (and ``cfg.graph`` against ``device``).

    Raises:
        ValueError: No declared mode, ``AutoresetMode.NEXT_STEP``, ``reset_path="masked"`` with an inner env
            that autoresets itself, or a ``graph`` off CUDA or where capture cannot work.
    """
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    mode = AutoresetMode(mode) if not isinstance(mode, AutoresetMode) else mode
    if "autoreset_mode" not in env.metadata:
        raise ValueError(
            f"the inner env {participant_name(env)} declares no metadata['autoreset_mode'], so Gymnasium "
            "would take it for AutoresetMode.NEXT_STEP; declare metadata = {'autoreset_mode': "
            "AutoresetMode.DISABLED} (the wrapper resets done rows through reset(options={'reset_mask': ...})) "
            "or AutoresetMode.SAME_STEP (the env resets them itself)"
        )
    if mode == AutoresetMode.NEXT_STEP:
        raise ValueError(
            f"the inner env {participant_name(env)} uses AutoresetMode.NEXT_STEP; build it with "
            "autoreset_mode=AutoresetMode.DISABLED so that this wrapper resets done rows itself"
        )
    if cfg.masked and mode != AutoresetMode.DISABLED:
        raise ValueError(f"`reset_path='masked'` needs an inner env with AutoresetMode.DISABLED, got {mode}")
    if cfg.graph is not None and device.type != "cuda":
        raise ValueError(f"`graph={cfg.graph!r}` needs a CUDA env, but the env is on device {device}")
    if cfg.graph is not None and cuda_capture_reasons(device):
        reasons = "; ".join(cuda_capture_reasons(device).values())
        raise ValueError(f"`graph={cfg.graph!r}` but capture is not possible here: {reasons}")
    return mode


def negotiate(cfg: StepConfig, parts: Participants, added: str | None = None) -> None:
    """Refuse participants ``cfg`` cannot run, naming every one (or the term ``added``).

    Raises:
        ResetSelectionUnsupportedError: ``reset_path="masked"`` with a participant that cannot take a
            :class:`~gym_graphreset.core.selection.ResetSelection`.
        ValueError: ``graph="step"`` with a participant that does not declare ``supports_step_capture``.
    """
    if cfg.masked and added in parts.reset_selection_blockers():
        raise ResetSelectionUnsupportedError(
            f"`reset_path='masked'` but reset term {added!r} cannot take a ResetSelection"
        )
    if cfg.masked and (blockers := parts.reset_selection_blockers()):
        raise ResetSelectionUnsupportedError(
            "`reset_path='masked'` but these reset participants cannot take a ResetSelection: "
            f"{', '.join(blockers)}. Declare `supports_reset_selection = True` (or use "
            "@reset_selection_capable) on each after converting its reset to masked writes."
        )
    if cfg.executor == "step_graph" and (blockers := parts.step_capture_blockers()):
        raise ValueError(
            "`graph='step'` captures the whole step, but these participants do not declare "
            f"`supports_step_capture = True`: {', '.join(blockers)}; use graph='reset'"
        )


def poll_settings(cfg: StepConfig) -> dict[str, object]:
    """The settings a poll compares across ranks: the validation mode (and the poll interval, when deferred)."""
    settings: dict[str, object] = {"validation": cfg.validation}
    if cfg.deferred:
        settings["validation_poll_interval"] = cfg.validation_poll_interval
    return settings


def partial_reset_refusal(interrupted: str | None) -> str:
    """Why a ``reset_mask`` that leaves rows out is refused (the env was ``interrupted``, or never reset)."""
    why = interrupted or "the env was never reset"
    return (
        f"`options['reset_mask']` must cover every row here: {why}, so rows outside the mask would step "
        "from a state they never got (Gymnasium's sub-envs raise ResetNeeded); call reset() without "
        "a reset_mask"
    )
