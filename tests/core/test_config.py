"""``StepConfig``: presets with overrides, the resolver, and the int fields' accepted types."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from gym_graphreset import StepConfig
from gym_graphreset.core.config import PRESETS


@pytest.mark.parametrize(
    ("name", "overrides", "expected"),
    [
        ("masked", {"reset_path": "selected"}, StepConfig(reset_path="selected")),
        ("masked_persistent", {"reset_path": "selected"}, StepConfig(reset_path="selected", persistent_buffers=True)),
        ("selected", {"reset_path": "masked"}, StepConfig(reset_path="masked")),
        ("step_graph", {"graph": None}, StepConfig()),
        ("reset_graph", {"graph": None, "reset_path": "masked"}, StepConfig(reset_path="masked")),
        ("step_graph", {"graph": "reset"}, StepConfig(graph="reset")),
    ],
)
def test_preset_overrides_apply_to_the_decisions_and_the_rest_follows(
    name: Any, overrides: dict[str, Any], expected: StepConfig
) -> None:
    config = StepConfig.preset(name, **overrides)
    assert config == expected
    assert config.validation == ("deferred" if config.masked else "immediate")


def test_preset_without_overrides_is_the_preset_and_contradictions_still_raise() -> None:
    assert all(StepConfig.preset(name) == config for name, config in PRESETS.items())
    with pytest.raises(ValueError, match=re.escape("`graph='step'` resets through the mask")):
        StepConfig.preset("step_graph", reset_path="selected")
    with pytest.raises(TypeError, match=re.escape("unknown StepConfig field(s) ['masked_autoreset']; the fields are")):
        StepConfig.preset("masked", masked_autoreset=True)


def test_resolve_takes_a_name_a_config_or_none() -> None:
    assert StepConfig.resolve(None) == StepConfig()
    assert StepConfig.resolve("masked") == PRESETS["masked"]
    config = StepConfig(graph="step")
    assert StepConfig.resolve(config) is config
    with pytest.raises(ValueError, match=re.escape("`preset` must be one of")):
        StepConfig.resolve("fast")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=re.escape("`config` must be a StepConfig or a preset name")):
        StepConfig.resolve(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["validation_poll_interval", "published_buffer_depth", "graph_warmup"])
def test_numpy_integers_are_accepted_for_int_fields(field: str) -> None:
    config = StepConfig(**{field: np.int64(5)})
    assert getattr(config, field) == 5 and type(getattr(config, field)) is int
    with pytest.raises(ValueError, match=re.escape(f"`{field}` must be an int >= ")):
        StepConfig(**{field: np.float64(5.0)})
    with pytest.raises(ValueError, match=re.escape(f"`{field}` must be an int >= ")):
        StepConfig(**{field: np.True_})
