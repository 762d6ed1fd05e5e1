"""How :meth:`FixedShapeAutoresetVectorEnv.capture_report` builds its :class:`CaptureReport`.

The report's reasons (where the env runs, the configuration's flags, the participants' blockers and the host
reads of one body) and its ``state`` are gathered here from the wrapper's configuration, participants and
runners; the wrapper's method checks nothing else and returns this module's report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch

from gym_graphreset.capture.graph import CaptureReport, cuda_capture_reasons
from gym_graphreset.capture.host_reads import HostReadCounter
from gym_graphreset.core.inputs import neutral_actions

if TYPE_CHECKING:
    from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv

__all__ = ["build_capture_report", "count_host_reads"]


def build_capture_report(
    env: FixedShapeAutoresetVectorEnv,
    scope: Literal["reset", "step"] | None,
    check_host_reads: bool,
    actions: torch.Tensor | None,
) -> CaptureReport:
    """The :class:`CaptureReport` of ``env.capture_report(scope, check_host_reads=..., actions=...)``.

    Raises:
        ValueError: An unknown ``scope``; ``actions`` without ``check_host_reads``; ``check_host_reads``
            with ``config.compile``.
        RuntimeError: ``check_host_reads`` before ``reset()``.
    """
    scope = scope or env.config.graph or "reset"
    if scope not in ("reset", "step"):
        raise ValueError(f"`scope` must be 'reset', 'step' or None, got {scope!r}")
    if actions is not None and not check_host_reads:
        raise ValueError("`actions` are the step that check_host_reads=True takes; pass check_host_reads=True")
    graph = env.graph
    captured = bool(graph and graph.captured and env.config.graph == scope)
    host_reads: list[str] | None = (
        [] if captured else None
    )  # the capture ran the body: a host read would have failed it
    if check_host_reads:
        host_reads = count_host_reads(env, scope, actions)
    reasons = cuda_capture_reasons(env.device)
    needs = (
        ("reset_path='masked'", env.config.masked),
        ("persistent_buffers=True", env.config.persistent_buffers),
    )
    missing = [m for m, ok in needs if not ok]
    if missing:
        reasons["flags"] = f"capture needs {' and '.join(f'`{m}`' for m in missing)}"
    if blockers := env.reset_selection_blockers():
        reasons["reset_selection_blockers"] = f"cannot take a ResetSelection: {', '.join(blockers)}"
    if scope == "step" and (blockers := env.step_capture_blockers()):
        reasons["step_capture_blockers"] = f"do not declare supports_step_capture: {', '.join(blockers)}"
    if host_reads:
        reasons["host_reads"] = (
            f"{len(host_reads)} host read(s) in one {scope} body (each waits for the device, and fails a "
            f"capture): {'; '.join(host_reads[:8])}"
        )
    state = {
        "captured": bool(graph and graph.captured),
        "captures": graph.captures if graph else 0,
        "replays": graph.replays if graph else 0,
        "eager_calls": graph.eager_calls if graph else 0,
        "host_transitions": graph.transitions.names if graph else [],
        "participants": env._parts.report(),
        "resets": env._parts.reset_reports(),
        "compile": None if env._body.compiled is None else env._body.compiled.report.as_dict(),
    }
    unchecked = ""
    if check_host_reads and host_reads is None:
        unchecked = f"the step taken ran no separate {scope} body to count; {reasons.get('flags', 'see above')}"
    return CaptureReport(scope, reasons, state, host_reads, unchecked)


def count_host_reads(env: FixedShapeAutoresetVectorEnv, scope: str, actions: torch.Tensor | None) -> list[str] | None:
    """Take one step of ``env``, counting the host reads of the scope's body (``None``: the body did not run).

    Raises:
        ValueError: ``env.config.compile`` is set (counting would make the compiled step recompile).
        RuntimeError: ``env`` was not reset yet (the count takes a step).
    """
    if env.config.compile is not None:
        raise ValueError(
            "`check_host_reads=True` with `compile=...`: counting would make the compiled step recompile; "
            "its report (capture_report().state['compile']) names every graph break, and a host read is "
            "one (or check the same configuration without compile)"
        )
    if env._needs_reset:
        raise RuntimeError("capture_report(check_host_reads=True) takes a step: call reset() first")
    if actions is None:
        actions = neutral_actions(env.single_action_space, env.num_envs, env.device)
    counter = HostReadCounter()
    # the step runner runs the step body; the reset runner the masked reset body with persistent buffers
    runner = env._step_runner if scope == "step" else env._reset_runner
    runner.watch = counter
    try:
        env.step(actions)
    finally:
        runner.watch = None
    return counter.found if counter.entered else None
