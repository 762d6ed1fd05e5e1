"""Command debug values in every step's ``info["metrics"]``, and a per-env curriculum updating masked rows only."""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset import PRESETS, FixedShapeAutoresetVectorEnv
from gym_graphreset.tasks import CurriculumTerm, ManagerBasedEnv, TaskCfg, mdp
from gym_graphreset.testing import assert_masked_matches_selected, assert_no_host_reads
from tests.tasks.test_layer import user_task

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

N, HORIZON = 6, 12
KEYS = ("command", "is_heading", "is_standing", "error_vel_xy", "error_vel_yaw")


def _actions(steps: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [2.0 * torch.randn(N, 2, generator=gen) for _ in range(steps)]


def test_command_debug_values_reach_every_step_s_info() -> None:
    env = ManagerBasedEnv(user_task(), N, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=0)
    infos = []
    for a in _actions(4):
        *_, info = env.step(a)
        cmd = env.commands["twist"]
        assert isinstance(cmd, mdp.VelocityCommand)
        metrics = info["metrics"]
        assert "base_height" in metrics, "the metric terms' episode means stay"
        for key in KEYS:
            value = metrics[f"command/twist/{key}"]
            assert isinstance(value, torch.Tensor) and value.device == env.device and value.shape[0] == N
        torch.testing.assert_close(metrics["command/twist/command"], cmd.command, rtol=0, atol=0)
        assert torch.equal(metrics["command/twist/is_standing"], cmd.is_standing)
        lin = mdp.base_lin_vel(env)
        xy = torch.linalg.vector_norm(cmd.command[:, :2] - lin[:, :2], dim=1)
        torch.testing.assert_close(metrics["command/twist/error_vel_xy"], xy)
        torch.testing.assert_close(metrics["command/twist/error_vel_yaw"], (cmd.command[:, 2] - env.qvel[:, 5]).abs())
        infos.append({k: v.clone() for k, v in metrics.items()})
    assert not torch.equal(infos[0]["command/twist/error_vel_xy"], infos[-1]["command/twist/error_vel_xy"])
    env.close()


@pytest.mark.slow
def test_command_debug_values_pass_the_wrapper_with_no_host_read() -> None:
    env = FixedShapeAutoresetVectorEnv(
        ManagerBasedEnv(user_task(), N, device="cpu", max_episode_steps=HORIZON), config="masked"
    )
    env.reset(seed=2)
    infos: list[dict[str, Any]] = []
    assert_no_host_reads(lambda: infos.extend(env.step(a)[-1] for a in _actions(15)))
    assert all(f"command/twist/{k}" in info["metrics"] for info in infos for k in KEYS)


class EpisodeLengthLevel:
    """A per-env curriculum: at a reset, a row whose episode lasted ``steps`` or more goes up a level, else down."""

    def __init__(self, env: ManagerBasedEnv, steps: int) -> None:
        self.env, self.steps = env, steps
        self.level = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        lasted = self.env.elapsed >= self.steps  # the curriculum runs on the terminal state
        moved = torch.where(lasted, self.level + 1, (self.level - 1).clamp(min=0))
        self.level.copy_(torch.where(rows, moved, self.level))
        return self.level


def levelled_task() -> TaskCfg:
    return user_task().with_term("curriculum", "level", CurriculumTerm(EpisodeLengthLevel, {"steps": 3}))


def test_a_per_env_curriculum_updates_the_masked_rows_only() -> None:
    env = ManagerBasedEnv(levelled_task(), N, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=0)
    for a in _actions(4):
        env.step(a)
    first = torch.tensor([True, True, False, False, True, False])
    env.reset(options={"reset_mask": first})
    level = env.curriculum_manager.values["level"].clone()
    assert level.tolist() == [1, 1, 0, 0, 1, 0]
    env.step(_actions(1)[0])
    second = torch.tensor([True, False, True, False, False, False])
    env.reset(options={"reset_mask": second})  # row 0: 1 step (down); row 2: 5 steps (up)
    after = env.curriculum_manager.values["level"]
    assert after.tolist() == [0, 1, 1, 0, 1, 0]
    assert torch.equal(after[~second], level[~second])
    env.close()


@pytest.mark.slow
def test_the_per_env_curriculum_is_masked_equal_to_selected_with_no_host_read() -> None:
    actions = _actions(25)  # within one validation poll window (the poll is the harness's one host read)
    levels = []
    for config in ("selected", "masked"):
        inner = ManagerBasedEnv(levelled_task(), N, device="cpu", max_episode_steps=HORIZON)
        env = FixedShapeAutoresetVectorEnv(inner, config=PRESETS[config])
        env.reset(seed=4)
        if config == "masked":
            assert_no_host_reads(lambda: [env.step(a) for a in actions])  # noqa: B023
        else:
            for a in actions:
                env.step(a)
        levels.append(inner.curriculum_manager.values["level"].clone())
    assert torch.equal(levels[0], levels[1])
    assert (levels[0] > 0).any(), "no row went up a level: the test proves nothing"


def ramped_task() -> TaskCfg:
    """``alive`` declared with weight 0 and raised to 0.5 at env step 10 by a curriculum (a ramp from 0)."""
    ramp = CurriculumTerm(mdp.reward_weight_by_step, {"term": "alive", "stages": ((0, 0.0), (10, 0.5))})
    return user_task().replace_term("rewards", "alive", weight=0.0).with_term("curriculum", "alive_ramp", ramp)


def test_a_curriculum_raises_a_reward_from_weight_zero() -> None:
    """A zero weight is a value: the term is a 0 column until the curriculum raises it, then it counts."""
    env = ManagerBasedEnv(ramped_task(), N, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=0)
    col = env.reward_names.index("alive")
    _, _, _, _, info = env.step(_actions(1)[0])
    assert (info["reward_terms"][:, col] == 0).all()
    env.common_step.fill_(10)
    env.reset(seed=0)
    assert env.reward_manager.weight("alive").item() == 0.5
    _, _, _, _, info = env.step(_actions(1)[0])
    torch.testing.assert_close(info["reward_terms"][:, col], torch.full((N,), 0.5 * env.step_dt))
    env.close()


@pytest.mark.slow
def test_the_ramp_from_zero_is_masked_equal_to_selected() -> None:
    """Bit for bit over episodes that cross the ramp's step (the weight moves at resets on the device)."""

    def factory(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        inner = ManagerBasedEnv(ramped_task(), N, device="cpu", max_episode_steps=HORIZON)
        return FixedShapeAutoresetVectorEnv(inner, **flags)

    assert_masked_matches_selected(factory, _actions(30), seed=3)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")
def test_the_ramp_from_zero_captured_matches_eager_and_is_sync_free() -> None:
    """Captured in the whole-step graph, the ramp from weight 0 gives the eager masked path's rewards and reward
    columns over episodes that cross the ramp's step (the weight is a device value the graph reads), and a step
    never waits for the GPU."""
    from gym_graphreset.testing import assert_sync_free

    actions = [a.cuda() for a in _actions(30)]
    runs = []
    for preset in ("masked_persistent", "step_graph"):
        env = FixedShapeAutoresetVectorEnv(
            ManagerBasedEnv(ramped_task(), N, device="cuda", max_episode_steps=HORIZON), PRESETS[preset]
        )
        env.reset(seed=3)
        rewards, columns = [], []
        for a in actions:
            _, reward, _, _, info = env.step(a)
            rewards.append(reward.clone())
            columns.append(info["reward_terms"].clone())
        runs.append((torch.stack(rewards), torch.stack(columns)))
        alive = env.unwrapped.reward_names.index("alive")
        if preset == "step_graph":
            env.validation_poll_interval = 10_000  # the canary's steps cross no poll (every 32 steps: a host read)
            assert_sync_free(lambda env=env: env.step(actions[0]))
        env.close()
    (eager_r, eager_c), (graph_r, graph_c) = runs
    assert (eager_c[0, :, alive] == 0).all() and (eager_c[-1, :, alive] != 0).all()  # the ramp crossed 0 -> 0.5
    torch.testing.assert_close(graph_r, eager_r, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(graph_c, eager_c, rtol=1e-5, atol=1e-6)
