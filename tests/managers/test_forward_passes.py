"""The forward before the observations, reduced to the declared passes: the plan (closure, the full forward for an
undeclared reader, sensors refreshed only when covered, refusals), and each pass's fields bit for bit those of
MuJoCo Warp's whole forward on the CPU."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset.managers.forward_passes import FORWARD_PASSES, ForwardPass, plan_forward, reads_forward
from gym_graphreset.managers.manager_based_env import ManagerBasedEnv
from gym_graphreset.tasks import velocity_task
from tests.tasks.test_layer import BIPED, ROBOT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SENSED = BIPED.replace(
    "  </sensor>",
    '    <framepos name="imu_pos" objtype="site" objname="imu"/>\n'
    '    <velocimeter name="imu_vel" site="imu"/>\n'
    '    <accelerometer name="imu_acc" site="imu"/>\n'
    "  </sensor>",
)
"""The test biped with one sensor of each stage (position, velocity, acceleration) besides its contact sensors."""


def _model(**opt: int) -> SimpleNamespace:
    """A stand-in for a ``mujoco_warp.Model``'s options: no sleep, Euler integrator unless given."""
    return SimpleNamespace(opt=SimpleNamespace(**{"enableflags": 0, "disableflags": 0, "integrator": 0, **opt}))


def _reader(*passes: ForwardPass) -> SimpleNamespace:
    return SimpleNamespace(forward_passes=frozenset(passes))


@pytest.mark.parametrize(
    ("declared", "runs"),
    [
        ((), ()),
        (("kinematics",), ("kinematics",)),
        (("com_vel",), ("kinematics", "com_pos", "com_vel")),
        (("collision",), ("kinematics", "collision")),
        (("sensor_acc",), ("kinematics", "com_pos", "com_vel", "collision", "acceleration", "sensor_acc")),
    ],
)
def test_plan_runs_the_closure_of_what_readers_declare(
    declared: tuple[ForwardPass, ...], runs: tuple[str, ...]
) -> None:
    """The passes run are the declared ones and what they need, in forward's order; not the full forward."""
    plan = plan_forward(
        {"a": _reader(*declared), "b": _reader("kinematics")} if declared else {}, {}, "declared", _model()
    )
    assert plan.passes == runs and not plan.full and plan.reasons == ()


def test_an_undeclared_reader_runs_the_full_forward_and_is_named() -> None:
    """A term function without a declaration (or a sensor without one) falls back to the whole forward, said why."""

    def mine(env: object) -> None:
        pass

    plan = plan_forward({"observations['critic']['mine']": mine}, {"old": object()}, "declared", _model())
    assert plan.full and plan.passes == FORWARD_PASSES and plan.refreshed == ("old",)
    assert plan.describe()["reasons"] == [
        "observations['critic']['mine'] declares no forward passes",
        "sensors['old'] declares no forward passes for its refresh",
    ]
    assert plan_forward({}, {}, "full", _model()).full  # TaskCfg.forward_passes="full"
    assert plan_forward({"a": _reader("sensor_pos", "sensor_vel", "sensor_acc")}, {}, "declared", _model()).full


def test_the_model_can_require_the_full_forward() -> None:
    """Sleeping islands and the discrete integrator have forward steps of their own: the whole forward runs."""
    import mujoco_warp as mjw

    sleeping = plan_forward({}, {}, "declared", _model(enableflags=int(mjw.EnableBit.SLEEP)))
    assert sleeping.full and sleeping.reasons == ("the model enables sleeping islands",)
    discrete = plan_forward({}, {}, "declared", _model(integrator=int(mjw.IntegratorType.DISCRETE)))
    assert discrete.full and discrete.reasons == ("the model uses the discrete integrator",)


def test_a_sensor_refreshes_only_when_the_run_covers_what_it_declares() -> None:
    """A contact sensor's refresh reads acceleration-stage data: it refreshes when a reader asks for it."""
    sensors = {"feet": _reader("sensor_acc"), "rays": _reader()}
    assert plan_forward({"a": _reader("kinematics")}, sensors, "declared", _model()).refreshed == ("rays",)
    assert plan_forward({"a": _reader("sensor_acc")}, sensors, "declared", _model()).refreshed == ("feet", "rays")


def test_bad_declarations_are_refused() -> None:
    """An unknown pass or a bare string is refused naming what was wrong and the passes there are."""
    with pytest.raises(ValueError, match=re.escape("reads_forward: ['kinematic'] are not forward passes")):
        reads_forward("kinematic")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=re.escape("sensors['s']: `forward_passes` must be a frozenset of passes")):
        plan_forward({}, {"s": SimpleNamespace(forward_passes="kinematics")}, "declared", _model())
    with pytest.raises(ValueError, match=re.escape("`forward_passes` must be 'declared' or 'full', got 'some'")):
        replace(velocity_task(ROBOT), forward_passes="some")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def sensed() -> ManagerBasedEnv:
    """The biped with a sensor of each stage, full forward off: the state after a step is the physics' own."""
    env = ManagerBasedEnv(replace(velocity_task(ROBOT), model=SENSED), 3, device="cpu", max_episode_steps=1000)
    env.reset(seed=4)
    return env


def _stage_columns(env: ManagerBasedEnv, stage: int) -> list[int]:
    m = env.mjm
    return [
        int(m.sensor_adr[s]) + k
        for s in range(m.nsensor)
        if m.sensor_needstage[s] == stage
        for k in range(m.sensor_dim[s])
    ]


def _fields(env: ManagerBasedEnv, p: ForwardPass) -> dict[str, torch.Tensor]:
    """Copies of what pass ``p`` makes current (the module docstring's table)."""
    import mujoco
    import warp as wp

    d = env.d
    t = lambda x: wp.to_torch(x).clone()  # noqa: E731
    if p == "kinematics":
        names = ("xpos", "xquat", "xmat", "xipos", "ximat", "geom_xpos", "geom_xmat", "site_xpos", "site_xmat")
        return {n: t(getattr(d, n)) for n in names}
    if p == "com_pos":
        return {n: t(getattr(d, n)) for n in ("subtree_com", "cinert", "cdof")}
    if p == "com_vel":
        return {n: t(getattr(d, n)) for n in ("cvel", "cdof_dot")}
    if p == "collision":
        n = int(t(d.nacon)[0])
        return {"nacon": t(d.nacon), **{f: t(getattr(d.contact, f))[:n] for f in ("dist", "pos", "frame", "geom")}}
    if p == "acceleration":
        return {n: t(getattr(d, n)) for n in ("qacc", "qfrc_actuator", "actuator_force", "qfrc_constraint")}
    stage = {"sensor_pos": mujoco.mjtStage.mjSTAGE_POS, "sensor_vel": mujoco.mjtStage.mjSTAGE_VEL}.get(p)
    cols = _stage_columns(env, int(stage if stage is not None else mujoco.mjtStage.mjSTAGE_ACC))
    assert cols, p
    return {"sensordata": t(d.sensordata)[:, cols]}


@pytest.mark.parametrize("p", [p for p in FORWARD_PASSES if p != "full"])
def test_each_pass_gives_the_full_forwards_values_bit_for_bit(sensed: ManagerBasedEnv, p: ForwardPass) -> None:
    """After a step's physics, a pass run alone gives what MuJoCo Warp's whole forward then gives, and differs
    from what the physics left (so the check is not vacuous)."""
    import mujoco_warp as mjw

    env = sensed
    gen = torch.Generator().manual_seed(FORWARD_PASSES.index(p))
    env.step(torch.randn(3, 2, generator=gen))
    before = _fields(env, p)
    plan = plan_forward({"reader": _reader(p)}, {}, "declared", env.m)
    assert not plan.full and p in plan.passes
    plan.run(env.m, env.d)
    reduced = _fields(env, p)
    mjw.forward(env.m, env.d)
    full = _fields(env, p)
    for name, value in full.items():
        assert torch.equal(reduced[name], value), (p, name)
    assert any(not torch.equal(before[n], full[n]) for n in full) or p == "collision", p
