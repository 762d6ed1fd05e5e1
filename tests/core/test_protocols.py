"""The five contracts: ResetTerm's no-op hooks are not called, hooks are found once, old names still import."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gym_graphreset import GraphParticipant, ResetTerm, StepData
from gym_graphreset.core.protocols import check_participant, hook, roles
from gym_graphreset.core.selection import declares


class _Counter(ResetTerm):
    def reset(self, env_ids: Any) -> None: ...

    def on_step(self, step: StepData) -> None: ...


class _Plain:  # duck-typed, no base class
    def reset(self, env_ids: Any) -> None: ...

    def info(self) -> dict[str, Any]:
        return {}


def test_only_overridden_hooks_are_roles() -> None:
    assert roles(_Counter()) == ["reset", "on_step"]
    assert roles(_Plain()) == ["reset", "info"]
    assert hook(_Counter(), "info") is None and hook(_Counter(), "on_step") is not None


def test_graph_participant_defaults_are_not_hooks() -> None:
    class Holder(GraphParticipant):
        def capture_buffers(self) -> tuple[torch.Tensor, ...]:
            return (torch.zeros(1),)

    assert roles(Holder()) == ["capture_buffers"]
    assert list(GraphParticipant().capture_buffers()) == [] and GraphParticipant().torch_generators() == []


@pytest.mark.parametrize("hook_name", ["bind", "on_step", "add_checks"])
def test_arity_comes_from_the_declared_signature(hook_name: str) -> None:
    term = type("T", (ResetTerm,), {"reset": lambda self, rows: None, hook_name: lambda self, a, b: None})()
    with pytest.raises(TypeError, match=f"t.{hook_name} must take 1 positional argument"):
        check_participant("t", term, term=True)


class _Stepper:
    supports_step_capture = True

    def step(self, actions: Any) -> None: ...


class _Overrides(_Stepper):
    def step(self, actions: Any) -> None: ...


class _Inherits(_Stepper):
    pass


class _Resetter:
    supports_reset_selection = True

    def reset(self, env_ids: Any) -> None: ...


class _OverridesReset(_Resetter):
    def reset(self, env_ids: Any) -> None: ...


def test_one_capability_function_for_step_capture_and_reset_selection() -> None:
    assert declares(_Stepper(), "step_capture") and declares(_Inherits(), "step_capture")
    assert declares(_Overrides(), "step_capture")  # inherited as declared, as before
    assert declares(_Resetter(), "reset_selection") and not declares(_OverridesReset(), "reset_selection")
    assert not declares(_Stepper(), "reset_selection")
