"""What each manager demands of a term, checked where the user meets it, naming the term and what is accepted.

Build-time checks (a term's signature, the names it reads, the action terms' joints and actuators) fail when
the env is built; a term's result (shape, dtype) is checked where the manager takes it, from metadata only
(no device read), so the check costs nothing in a captured step.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.tasks import (
    EventTerm,
    JointEffortAction,
    JointPositionAction,
    ManagerBasedEnv,
    MetricTerm,
    ObsTerm,
    RewardTerm,
    TaskCfg,
    TerminationTerm,
    mdp,
)
from tests.tasks.test_layer import ROBOT, user_task

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
N = 2


def _build(cfg: TaskCfg) -> ManagerBasedEnv:
    return ManagerBasedEnv(cfg, N, device="cpu")


def _stepped(cfg: TaskCfg) -> ManagerBasedEnv:
    env = _build(cfg)
    env.step(torch.zeros(N, env.single_action_space.shape[0]))
    return env


def _height_without_env(target: float) -> torch.Tensor:
    """A reward written without the env parameter."""
    return torch.tensor(target)


def _kick_undeclared(env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor) -> None:
    """A reset event reading a draw it did not declare (``draws=0``)."""
    env.initial_state.qvel[:, 0] = u[:, 0]


class _NoStepDraws:
    """A user's command that forgot ``step_draws``."""

    reset_draws = 0

    def __init__(self, n: int) -> None:
        self.command = torch.zeros(n, 1)

    def reset(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        pass

    def step(self, u: torch.Tensor) -> None:
        pass

    def metrics(self) -> dict[str, torch.Tensor]:
        return {}


class _NoStepDrawsCfg:
    def build(self, env: ManagerBasedEnv) -> _NoStepDraws:
        return _NoStepDraws(env.num_envs)


def _lift_in_place(env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor) -> None:
    """A reset event written mjlab's way: straight into the physics state (lost to the engine's reset)."""
    env.qpos[:, 2] += 0.1


def _brake_in_place(env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor) -> None:
    """A reset event that sets controls: the physics reset after the events zeroes them on the reset rows."""
    env.ctrl.mul_(0.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda c: c.replace_term("rewards", "track_linear_velocity", params={"std": 0.5, "command_name": "twst"}),
            "rewards['track_linear_velocity']: 'track_linear_velocity' param `command_name`: the task has no "
            "command 'twst'; its commands: ['twist']",
        ),
        (
            lambda c: c.with_term("events", "kick", EventTerm(lambda env, rows: None, "reset")),
            "events['kick']: '<lambda>' is called as func(env, rows, u, **params) and takes 2 positional argument(s)",
        ),
        (
            lambda c: replace(
                c,
                actions={
                    "a": JointPositionAction(("left_hip", "right_hip")),
                    "b": JointPositionAction(("left_hip",)),
                },
            ),
            "TaskCfg.actions['b']: joint 'left_hip' is already driven by action term 'a'",
        ),
        (
            lambda c: replace(c, actions={"a": JointPositionAction(("left_hip", "sholder"))}),
            "TaskCfg.actions: the model has no joint 'sholder'; the model's joints: [",
        ),
        (
            lambda c: replace(c, actions={"a": JointEffortAction(("left_hip", "right_hip"))}),
            "actions['a']: a JointEffortAction drives torque motors (`<motor>`: no bias); actuators ['left_hip', "
            "'right_hip'] are not (use JointPositionAction for them)",
        ),
        (
            lambda c: c.with_obs("policy", "gravity", ObsTerm(mdp.projected_gravity, scale=(1.0, 2.0))),
            "observations['policy']['gravity']: `scale` has 2 entries; the term is 3 wide",
        ),
        (
            lambda c: c.with_obs("policy", "complex", ObsTerm(lambda env: env.qpos[:, :1] * 1j)),
            "returned torch.complex64; an observation is real",
        ),
        (
            lambda c: c.replace_term("events", "base_com", model_fields=("body_ipo",)),
            "events['base_com']: `model_fields` has 'body_ipo', no field of mujoco_warp.Model; close: ['body_ipos'",
        ),
        (
            lambda c: c.without_term("terminations", "time_out"),
            "TaskCfg.terminations: no term is a time-out (`time_out=True`), so episodes would never end at "
            "`episode_length_s` (20 s); terms: ['fell_over']. Add 'time_out': TerminationTerm(mdp.time_out, "
            "time_out=True)",
        ),
        (
            lambda c: c.with_term("rewards", "height", RewardTerm(_height_without_env, 1.0, {"target": 0.3})),
            "rewards['height']: '_height_without_env' is called as func(env, **params), but its param(s) "
            "['target'] stand where the call passes (env): make (env) its first parameter(s), before its params",
        ),
        (
            lambda c: c.with_term("events", "kick", EventTerm(_kick_undeclared, "reset")),
            "events['kick']: '_kick_undeclared' raised IndexError (",
        ),
        (
            lambda c: c.replace_term("sensors", "feet_contact", sensor_names=("left_contct", "right_contact")),
            "ContactSensorCfg: the model has no sensor 'left_contct'; close: ['left_contact', 'right_contact']; "
            "the model's sensors: ['left_contact', 'right_contact']",
        ),
        (
            lambda c: c.with_term("commands", "height", _NoStepDrawsCfg()),
            "commands['height']: _NoStepDraws has no ['step_draws']; a command (the CommandTerm protocol) has "
            "`reset_draws` and `step_draws`",
        ),
        (
            lambda c: replace(c, init_base_height=0.0),
            "events['reset_base']: reset_root_state_uniform: TaskCfg.init_base_height is 0, so the base spawns at "
            "0 + z (0.01, 0.05) m, in the ground: the robot would start in penetration",
        ),
        (
            lambda c: c.with_term("events", "lift", EventTerm(_lift_in_place, "reset")),
            "events['lift']: '_lift_in_place' wrote env.qpos, which the engine's physics reset overwrites on the "
            "reset rows after the reset events (state from env.initial_state, controls zeroed): write the new "
            "episode's state to env.initial_state.qpos",
        ),
        (
            lambda c: c.with_term("events", "brake", EventTerm(_brake_in_place, "reset")),
            "events['brake']: '_brake_in_place' wrote env.ctrl, which the engine's physics reset overwrites",
        ),
    ],
    ids=[
        "unknown-command",
        "event-arity",
        "joint-twice",
        "unknown-joint",
        "effort-on-servos",
        "obs-scale",
        "complex",
        "model-field",
        "no-time-out",
        "no-env-parameter",
        "undeclared-draws",
        "misspelled-contact-sensor",
        "command-without-step-draws",
        "spawn-in-the-ground",
        "reset-writes-qpos",
        "reset-writes-ctrl",
    ],
)
def test_bad_terms_are_refused_when_the_env_is_built(change: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError, IndexError), match=re.escape(message)):
        _build(change(user_task()))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda c: c.with_term("rewards", "wide", RewardTerm(lambda env: torch.ones(env.num_envs, 1), 1.0)),
            "rewards['wide']: '<lambda>' must return a (2,) real tensor, got (2, 1) torch.float32",
        ),
        (
            lambda c: c.with_term("terminations", "soft", TerminationTerm(lambda env: torch.zeros(env.num_envs))),
            "terminations['soft']: '<lambda>' must return a (2,) bool tensor, got (2,) torch.float32",
        ),
        (
            lambda c: c.with_term("metrics", "pair", MetricTerm(lambda env: torch.ones(env.num_envs, 2))),
            "metrics['pair']: '<lambda>' must return a (2,) real tensor, got (2, 2) torch.float32",
        ),
        (
            lambda c: c.with_term("rewards", "listy", RewardTerm(lambda env: [0.0] * env.num_envs, 1.0)),
            "rewards['listy']: '<lambda>' must return a (2,) real tensor, got list",
        ),
    ],
    ids=["reward-shape", "termination-dtype", "metric-shape", "reward-not-a-tensor"],
)
def test_a_term_s_bad_result_is_refused_naming_it(change: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        _stepped(change(user_task()))


def test_results_are_cast_to_the_declared_float32() -> None:
    """A float64 observation or reward term (and an int or bool one) still gives float32, as the spaces say."""
    cfg = user_task().with_obs("policy", "height64", ObsTerm(lambda env: env.qpos[:, 2:3].double()))
    cfg = cfg.with_obs("policy", "steps", ObsTerm(lambda env: env.elapsed.unsqueeze(1)))
    ones64 = RewardTerm(lambda env: torch.ones(env.num_envs, dtype=torch.float64), 1.0)
    cfg = cfg.with_term("rewards", "alive64", ones64)
    cfg = cfg.with_term("rewards", "flag", RewardTerm(lambda env: env.qpos[:, 2] > 0.0, 1.0))
    env = _build(cfg)
    obs, reward, *_ = env.step(torch.zeros(N, 2))
    assert obs["policy"].dtype == torch.float32 and obs["critic"].dtype == torch.float32
    assert reward.dtype == torch.float32
    assert env.observation_space.contains({k: v.numpy() for k, v in obs.items()})


def test_an_event_s_draws_must_match_what_it_uses() -> None:
    """Too few or too many draws for a fixed-draw event is refused by name, not broadcast silently."""
    cfg = user_task().replace_term("events", "reset_robot_joints", draws=1)
    message = "reset_joints_by_offset: its EventTerm needs `draws=2`, got draws=1"
    with pytest.raises(ValueError, match=re.escape(message)):
        _build(cfg)


def test_one_observation_group_is_returned_as_its_box() -> None:
    """With one group the env returns that group's tensor, which its Box space describes (through the wrapper)."""
    cfg = user_task()
    env = _build(replace(cfg, observations={"policy": cfg.observations["policy"]}))
    wrapped = FixedShapeAutoresetVectorEnv(env, "masked")
    obs, _ = wrapped.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and obs.shape == wrapped.observation_space.shape
    obs, *_ = wrapped.step(torch.zeros(N, 2))
    assert isinstance(obs, torch.Tensor) and wrapped.single_observation_space.contains(obs[0].numpy())
    assert set(env.last_obs) == {"policy"} and torch.equal(env.last_obs["policy"], obs)
    wrapped.close()


def test_a_robot_needs_a_site_and_a_contact_sensor_per_foot() -> None:
    with pytest.raises(ValueError, match=re.escape("got 1 foot_sites, 2 foot_contact_sensors, 2 foot_geoms")):
        replace(ROBOT, foot_sites=("left_sole",))


def test_a_time_out_function_must_be_declared_a_time_out() -> None:
    """``mdp.time_out`` without ``time_out=True`` is refused when declared: its time-outs would be failures."""
    message = "TerminationTerm('time_out'): this function ends episodes at their horizon, a time-out: declare it "
    with pytest.raises(ValueError, match=re.escape(message + "with `time_out=True`")):
        TerminationTerm(mdp.time_out)
    assert TerminationTerm(mdp.time_out, time_out=True).time_out


def test_declared_terms_refuse_a_non_callable_and_a_non_bool_time_out() -> None:
    with pytest.raises(ValueError, match=re.escape("`func` must be callable, got 'upright'")):
        RewardTerm("upright", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("`time_out` must be a bool, got 'yes'")):
        TerminationTerm(mdp.time_out, time_out="yes")  # type: ignore[arg-type]


class _Counting:
    """A term class with per-row state: how many times it was called for the row in the row's episode."""

    built: list[_Counting] = []

    def __init__(self, env: ManagerBasedEnv) -> None:
        self.env = env
        self.calls = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        _Counting.built.append(self)

    def count(self, rows: torch.Tensor | None = None) -> None:
        self.calls.add_(1 if rows is None else rows.long())

    def reset(self, rows: torch.Tensor) -> None:
        self.calls.copy_(torch.where(rows, 0, self.calls))


class _CountingObs(_Counting):
    def __call__(self) -> torch.Tensor:
        self.count(self.env.observed_rows)  # after a reset: the reset rows are observed
        return self.calls.unsqueeze(1).float()


class _CountingFlag(_Counting):
    def __call__(self) -> torch.Tensor:
        self.count()
        return torch.zeros_like(self.calls, dtype=torch.bool)


class _CountingMetric(_Counting):
    def __call__(self) -> torch.Tensor:
        self.count()
        return self.calls.float()


class _CountingEvent(_Counting):
    def __call__(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        self.count()  # an interval event is called every step (``rows``: those that fire)


class _CountingResetEvent(_Counting):
    def __call__(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        self.count(rows)


ADD_COUNTING_TERM = {
    "observation": lambda c: c.with_obs("policy", "calls", ObsTerm(_CountingObs)),
    "termination": lambda c: c.with_term("terminations", "never", TerminationTerm(_CountingFlag)),
    "metric": lambda c: c.with_term("metrics", "calls", MetricTerm(_CountingMetric)),
    "interval-event": lambda c: c.with_term(
        "events", "tick", EventTerm(_CountingEvent, "interval", interval_range_s=(0.1, 0.2))
    ),
    "reset-event": lambda c: c.with_term("events", "tock", EventTerm(_CountingResetEvent, "reset")),
}
# Calls a reset makes of the term for each reset row (the other rows are not called).
CALLS_IN_A_RESET = {"observation": 1, "termination": 0, "metric": 0, "interval-event": 0, "reset-event": 1}


@pytest.mark.parametrize("kind", list(ADD_COUNTING_TERM))
def test_every_term_class_forgets_the_rows_of_a_reset(kind: str) -> None:
    """A term class of any kind (StatefulTerm) is reset through the mask: the reset rows start their count over,
    the other rows keep theirs, so no per-row state leaks into the next episode."""
    _Counting.built.clear()
    env = _build(ADD_COUNTING_TERM[kind](user_task()))
    (term,) = _Counting.built
    env.reset(seed=0)
    for _ in range(3):
        env.step(torch.zeros(N, 2))
    before = term.calls.clone()
    in_reset = CALLS_IN_A_RESET[kind]
    assert (before > in_reset).all() or kind == "reset-event"  # the state the reset must clear
    env.reset(options={"reset_mask": torch.tensor([True, False])})
    assert term.calls[0].item() == in_reset, f"the {kind} class kept the finished episode's state"
    assert term.calls[1].item() == before[1].item()  # a row not reset keeps its state
    env.close()


@pytest.mark.slow
def test_term_classes_reset_masked_equal_to_selected_with_no_host_read() -> None:
    """Term classes of every kind, reset through the mask: the masked path returns what the selected one does
    (their counts reach the observation and the metrics), and its steps read nothing on the host."""
    from gym_graphreset.testing import assert_masked_matches_selected, assert_no_host_reads

    def task() -> TaskCfg:
        cfg = user_task()
        for add in ADD_COUNTING_TERM.values():
            cfg = add(cfg)
        return cfg

    def factory(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        return FixedShapeAutoresetVectorEnv(ManagerBasedEnv(task(), N, device="cpu", max_episode_steps=5), **flags)

    gen = torch.Generator().manual_seed(0)
    actions = [2.0 * torch.randn(N, 2, generator=gen) for _ in range(14)]
    assert_masked_matches_selected(factory, actions, seed=3)
    env = factory({"config": "masked"})
    env.reset(seed=3)
    assert_no_host_reads(lambda: [env.step(a) for a in actions])
    env.close()
