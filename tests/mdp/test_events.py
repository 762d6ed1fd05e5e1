"""Mass, actuator-gain and COM randomisation: per-world model fields written through the mask, seen by the physics,
and the constants derived from them recomputed per world (``recompute="set_const"``)."""

from __future__ import annotations

import copy
import re
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.tasks import EventTerm, ManagerBasedEnv, TaskCfg, mdp, velocity_task
from gym_graphreset.testing import assert_masked_matches_selected, assert_no_host_reads
from tests.tasks.test_layer import ROBOT, user_task

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

N, HORIZON = 6, 10
JOINTS = ROBOT.joint_names
KP, KV = 20.0, 1.0  # the biped's position actuators
MASS = {"base": 2.0, "left": 0.3}
# scales; a light leg with much more damping than the model's would be unstable at the biped's explicit 5 ms step
MASS_RANGE, KP_RANGE, KV_RANGE = (0.8, 1.5), (0.5, 1.5), (0.8, 1.2)

MASS_EVENT = EventTerm(
    mdp.randomize_body_mass,
    "reset",
    {"bodies": ("base", "left"), "mass_range": MASS_RANGE},
    draws=2,
    model_fields=("body_mass", "body_subtreemass"),
)
GAIN_EVENT = EventTerm(
    mdp.randomize_actuator_gains,
    "startup",
    {"joint_names": JOINTS, "stiffness_range": KP_RANGE, "damping_range": KV_RANGE},
    draws=2 * len(JOINTS),
    model_fields=("actuator_gainprm", "actuator_biasprm"),
)


def randomized_task() -> TaskCfg:
    return user_task().with_term("events", "mass", MASS_EVENT).with_term("events", "gains", GAIN_EVENT)


def _fields(env: ManagerBasedEnv) -> dict[str, torch.Tensor]:
    return {
        name: env.model_field(name).clone()
        for name in ("body_mass", "body_subtreemass", "actuator_gainprm", "actuator_biasprm")
    }


@pytest.fixture(scope="module")
def env() -> ManagerBasedEnv:
    return ManagerBasedEnv(randomized_task(), N, device="cpu", max_episode_steps=HORIZON)


def test_mass_is_redrawn_on_the_reset_rows_only(env: ManagerBasedEnv) -> None:
    env.reset(seed=0)
    before = _fields(env)
    rows = torch.tensor([True, False, True, False, False, True])
    env.reset(options={"reset_mask": rows})  # not seeded: startup events (the gains) stay
    after = _fields(env)
    for name in before:
        assert torch.equal(after[name][~rows], before[name][~rows]), f"{name} changed outside the mask"
    for body, default in MASS.items():
        mass = after["body_mass"][rows, env.body_id(body)]
        assert ((mass >= MASS_RANGE[0] * default) & (mass <= MASS_RANGE[1] * default)).all(), (body, mass)
        assert (mass != before["body_mass"][rows, env.body_id(body)]).all(), f"{body} was not redrawn"
    assert torch.equal(after["actuator_gainprm"], before["actuator_gainprm"])
    others = after["body_mass"][:, env.body_id("right")]
    assert (others == 0.3).all(), "a body not named keeps the model's mass"
    # the subtree masses follow: the whole robot's is the sum of its bodies'
    torch.testing.assert_close(after["body_subtreemass"][:, env.body_id("base")], after["body_mass"][:, 1:].sum(1))
    torch.testing.assert_close(after["body_subtreemass"][:, env.body_id("left")], after["body_mass"][:, 2])


def test_gains_are_redrawn_by_a_seeded_reset_of_the_rows_only(env: ManagerBasedEnv) -> None:
    env.reset(seed=1)
    before = _fields(env)
    rows = torch.tensor([False, True, True, False, True, False])
    env.reset(seed=2, options={"reset_mask": rows})
    after = _fields(env)
    for name in before:
        assert torch.equal(after[name][~rows], before[name][~rows]), f"{name} changed outside the mask"
    acts = torch.tensor([env.mjm.actuator(j).id for j in JOINTS])
    gain, bias = after["actuator_gainprm"][:, acts], after["actuator_biasprm"][:, acts]
    kp, kv = gain[..., 0], -bias[..., 2]
    assert ((kp >= KP_RANGE[0] * KP) & (kp <= KP_RANGE[1] * KP)).all()
    assert ((kv >= KV_RANGE[0] * KV) & (kv <= KV_RANGE[1] * KV)).all()
    assert torch.equal(bias[..., 1], -kp), "a position actuator's bias is -kp q"
    assert (kp[rows] != before["actuator_gainprm"][rows][:, acts, 0]).all()
    assert (kp[:, 0] != kp[:, 1]).all(), "each joint draws its own gain"


def _settle(env: ManagerBasedEnv, qpos: torch.Tensor, qvel: torch.Tensor, steps: int = 8) -> torch.Tensor:
    env.set_state(qpos, qvel)
    ctrl = torch.tensor([[0.4, -0.4]]).expand(env.num_envs, 2)
    for _ in range(steps):
        env.run_physics(ctrl)
    return env.qpos.clone()


@pytest.mark.parametrize("event", ["mass", "gains"])
def test_the_physics_sees_the_randomised_row(event: str) -> None:
    """Two rows from one state: equal until one row's field is randomised, then apart; the other row unchanged."""
    cfg = velocity_task(ROBOT).without_term("events", "foot_friction").without_term("events", "base_com")
    cfg = cfg.with_term("events", "mass", MASS_EVENT).with_term("events", "gains", GAIN_EVENT)
    cfg = cfg.replace_term("events", "mass", mode="startup")
    env = ManagerBasedEnv(cfg, 2, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=0)
    for name, value in _fields(env).items():  # both rows back to the model's values
        env.model_field(name).copy_(env.model_default(name).expand_as(value))
    qpos, qvel = env.qpos[0].clone(), torch.zeros(env.mjm.nv)
    same = _settle(env, qpos, qvel)
    assert torch.equal(same[0], same[1])
    one = torch.tensor([False, True])
    u = torch.full((2, 4), 0.9)  # heavier / stiffer and more damped
    if event == "mass":
        mdp.randomize_body_mass(env, one, u[:, :2], ("base", "left"), MASS_RANGE)
    else:
        mdp.randomize_actuator_gains(env, one, u, JOINTS, KP_RANGE, KV_RANGE)
    apart = _settle(env, qpos, qvel)
    assert torch.equal(apart[0], same[0]), "the row outside the mask moved differently"
    assert not torch.allclose(apart[1], same[1], atol=1e-4), f"the physics did not see the {event}"
    env.close()


def test_bad_declarations_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=re.escape("param `operation` must be one of ['scale', 'add', 'abs']")):
        EventTerm(mdp.randomize_body_mass, "reset", {"bodies": ("base",), "mass_range": (1, 2), "operation": "mul"})
    few = user_task().with_term("events", "mass", EventTerm(**{**MASS_EVENT.__dict__, "draws": 1}))
    with pytest.raises(ValueError, match=re.escape("randomize_body_mass: its EventTerm needs `draws=2`, got draws=1")):
        ManagerBasedEnv(few, 2, device="cpu")
    undeclared = user_task().with_term("events", "gains", EventTerm(**{**GAIN_EVENT.__dict__, "model_fields": ()}))
    with pytest.raises(ValueError, match=re.escape("model field 'actuator_gainprm' is not per-world")):
        ManagerBasedEnv(undeclared, 2, device="cpu")
    zero = user_task().with_term(
        "events",
        "mass",
        EventTerm(**{**MASS_EVENT.__dict__, "params": {"bodies": ("base", "left"), "mass_range": (0, 1)}}),
    )
    with pytest.raises(
        ValueError, match=re.escape("with operation='scale', `mass_range` must have low > 0, got (0, 1)")
    ):
        ManagerBasedEnv(zero, 2, device="cpu")


DERIVED = ("body_invweight0", "dof_invweight0", "actuator_acc0", "body_subtreemass")


def _com_task(recompute: str) -> TaskCfg:
    """The biped's velocity task, whose startup ``base_com`` event shifts the base's COM."""
    return velocity_task(ROBOT).replace_term("events", "base_com", recompute=recompute)


def _set_const(env: ManagerBasedEnv, world: int) -> Any:
    """MuJoCo's own ``mj_setConst`` on a copy of the model with ``world``'s COM offsets."""
    import mujoco

    m = copy.deepcopy(env.mjm)
    m.body_ipos[:] = env.model_field("body_ipos")[world].numpy()
    mujoco.mj_setConst(m, mujoco.MjData(m))
    return m


def test_set_const_gives_each_world_the_constants_of_its_com() -> None:
    """After the startup events each world's derived constants are MuJoCo's ``mj_setConst`` for a model with that
    world's COM (float32 precision); the compiled model's values, which they replace, are far from them."""
    env = ManagerBasedEnv(_com_task("set_const"), 3, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=0)
    for w in range(3):
        want = _set_const(env, w)
        for name in DERIVED:
            got = env.model_field(name)[w].numpy()
            np.testing.assert_allclose(got, getattr(want, name), rtol=1e-4, atol=1e-6, err_msg=f"world {w}: {name}")
        assert not np.allclose(env.mjm.body_invweight0, want.body_invweight0, rtol=1e-3)
    env.close()


@pytest.mark.slow
def test_set_const_keeps_the_state_and_changes_only_the_physics() -> None:
    """The recompute restores the state (the first observations and the kinematics equal those without it, bit
    for bit); stepped, the worlds move differently (the contacts' softness follows the inverse weights)."""
    envs = [ManagerBasedEnv(_com_task(r), 3, device="cpu", max_episode_steps=100) for r in ("set_const", "none")]
    first = [{k: v.clone() for k, v in e.reset(seed=4)[0].items()} for e in envs]
    for group in first[0]:
        assert torch.equal(first[0][group], first[1][group]), group
    assert torch.equal(envs[0].xpos, envs[1].xpos) and torch.equal(envs[0].site_xpos, envs[1].site_xpos)
    for _ in range(20):
        for e in envs:
            e.step(torch.zeros(3, 2))
    assert not torch.equal(envs[0].qpos, envs[1].qpos)
    for e in envs:
        e.close()


def test_a_seeded_reset_of_some_rows_keeps_the_other_worlds_constants() -> None:
    env = ManagerBasedEnv(_com_task("set_const"), 4, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=1)
    before = {name: env.model_field(name).clone() for name in (*DERIVED, "body_ipos")}
    rows = torch.tensor([True, False, False, True])
    env.reset(seed=2, options={"reset_mask": rows})
    for name, old in before.items():
        new = env.model_field(name)
        assert torch.equal(new[~rows], old[~rows]), f"{name} changed outside the mask"
        if name != "body_subtreemass":  # masses do not move with the COM
            assert not torch.equal(new[rows], old[rows]), f"{name} was not redrawn on the mask"
    want = _set_const(env, 3)
    np.testing.assert_allclose(env.model_field("body_invweight0")[3].numpy(), want.body_invweight0, rtol=1e-4)
    env.close()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"recompute": "all"}, "`recompute` must be 'none' or 'set_const', got 'all'"),
        ({"mode": "reset"}, "`recompute='set_const'` runs after startup events only"),
    ],
)
def test_bad_recompute_is_refused(changes: dict[str, str], message: str) -> None:
    event = velocity_task(ROBOT).events["base_com"]
    with pytest.raises(ValueError, match=re.escape(message)):
        EventTerm(**{**event.__dict__, **changes})


def test_recompute_constants_needs_the_derived_fields_per_world() -> None:
    env = ManagerBasedEnv(_com_task("none"), 2, device="cpu", max_episode_steps=HORIZON)
    with pytest.raises(ValueError, match=re.escape("give a startup EventTerm recompute='set_const'")):
        env.recompute_constants()
    env.close()


def _factory(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
    return FixedShapeAutoresetVectorEnv(
        ManagerBasedEnv(randomized_task(), N, device="cpu", max_episode_steps=HORIZON), **flags
    )


def _actions(steps: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [2.0 * torch.randn(N, 2, generator=gen) for _ in range(steps)]


@pytest.mark.slow
def test_randomisation_is_masked_equal_to_selected_and_reads_no_host() -> None:
    assert_masked_matches_selected(_factory, _actions(25), seed=3)
    env = _factory({"config": "masked"})
    env.reset(seed=1)
    assert_no_host_reads(lambda: [env.step(a) for a in _actions(25)])
