"""Curriculum terms: ``func(env, rows, **params)`` at each reset, on the device; what they return is logged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from gym_graphreset.managers.binding import Accepts, accepts, number

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["reward_weight_by_step"]


def _stages_ok(stages: Any) -> bool:
    pairs = isinstance(stages, (tuple, list)) and len(stages) > 0
    if not pairs or not all(isinstance(s, (tuple, list)) and len(s) == 2 for s in stages):
        return False
    steps = [s for s, _ in stages]
    return (
        all(isinstance(s, int) and not isinstance(s, bool) for s in steps)
        and steps[0] == 0
        and steps == sorted(steps)
        and all(number().ok(w) for _, w in stages)
    )


_STAGES = Accepts("((first env step, weight), ...) starting at step 0, sorted by step, with finite weights", _stages_ok)


@accepts(stages=_STAGES)
def reward_weight_by_step(
    env: ManagerBasedEnv, rows: torch.Tensor, term: str, stages: tuple[tuple[int, float], ...]
) -> torch.Tensor:
    """A global curriculum: reward ``term``'s weight follows ``(first env step, weight)`` stages.

    The weight is looked up on the device from the env's step counter and written into the reward manager's
    weight vector (times the step dt) when any row of ``rows`` resets (``rows.any()`` on the device: a
    global curriculum moves at resets, as on the selected-row path, with no host read); returns the weight.
    """
    table = env.constant(
        ("weight_stages", term, stages),
        lambda: (
            torch.tensor([s for s, _ in stages], device=env.device),
            torch.tensor([w for _, w in stages], dtype=torch.float32, device=env.device),
        ),
    )
    steps, weights = table
    stage = (env.common_step >= steps).sum() - 1
    current = env.reward_manager.weight(term)
    weight = torch.where(rows.any(), weights.index_select(0, stage.view(1))[0], current)
    env.reward_manager.set_weight(term, weight)
    return weight
