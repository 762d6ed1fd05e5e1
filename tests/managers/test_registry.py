"""``register_task``: a TaskCfg becomes a vector env id; duplicates and non-tasks are refused by name; the library's
own ids are tasks of the same registry; options build variants, and an option a task does not take is refused."""

from __future__ import annotations

import importlib
import pathlib
import re
import sys
from collections.abc import Iterator
from dataclasses import fields

import gymnasium as gym
import pytest

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset import registration
from gym_graphreset.managers.registry import RegisteredTask, register_task, registered_task
from gym_graphreset.tasks import ManagerBasedEnv, velocity_task
from tests.tasks.test_layer import ROBOT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ENV_ID = "TestLab/Biped-Velocity-v0"


@pytest.fixture
def clean_registry() -> Iterator[None]:
    yield
    for env_id in (ENV_ID, "TestLab/Other-v0"):
        gym.registry.pop(env_id, None)


@pytest.mark.usefixtures("clean_registry")
def test_a_registered_factory_is_made_by_make_vec_with_its_keywords() -> None:
    calls: list[int] = []

    def task() -> object:
        calls.append(1)
        return velocity_task(ROBOT)

    register_task(ENV_ID, task)  # type: ignore[arg-type]
    assert calls == [], "the factory runs when an env is made, not at registration"
    env = gym.make_vec(ENV_ID, 3, vectorization_mode="vector_entry_point", device="cpu", max_episode_steps=7)
    assert isinstance(env, ManagerBasedEnv) and env.num_envs == 3 and calls == [1]
    env.close()


@pytest.mark.usefixtures("clean_registry")
def test_a_module_id_imports_the_module_that_registers_it(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``"my_lab_tasks:<id>"``: Gymnasium imports ``my_lab_tasks`` first, whose import registers the task."""
    (tmp_path / "my_lab_tasks.py").write_text(
        "from gym_graphreset.tasks import velocity_task\n"
        "from gym_graphreset.managers.registry import register_task\n"
        "from tests.tasks.test_layer import ROBOT\n"
        "register_task('TestLab/Other-v0', lambda: velocity_task(ROBOT))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_lab_tasks", raising=False)
    assert "TestLab/Other-v0" not in gym.registry
    env = gym.make_vec("my_lab_tasks:TestLab/Other-v0", 2, vectorization_mode="vector_entry_point", device="cpu")
    assert isinstance(env, ManagerBasedEnv)
    env.close()


@pytest.mark.usefixtures("clean_registry")
def test_a_second_registration_is_refused_unless_replace() -> None:
    register_task(ENV_ID, velocity_task(ROBOT))
    with pytest.raises(ValueError, match=re.escape(f"`env_id` {ENV_ID!r} is already registered (pass replace=True")):
        register_task(ENV_ID, velocity_task(ROBOT))
    register_task(ENV_ID, velocity_task(ROBOT), replace=True)


@pytest.mark.usefixtures("clean_registry")
def test_a_non_task_is_refused_at_registration_and_at_make() -> None:
    with pytest.raises(TypeError, match=re.escape("`task` must be a TaskCfg or a function returning one, got int")):
        register_task(ENV_ID, 3)  # type: ignore[arg-type]
    register_task(ENV_ID, lambda: "not a task")  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match=re.escape("must be a TaskCfg or a function returning one, got str")):
        gym.make_vec(ENV_ID, 2, vectorization_mode="vector_entry_point", device="cpu")


@pytest.mark.usefixtures("clean_registry")
def test_make_vec_with_cfg_builds_that_task_in_place_of_the_registered_one() -> None:
    """``make_vec(id, cfg=...)`` on a register_task id builds the given task (as the library's ids do), so
    ``play --motion`` can rebuild it with its recorders instead of failing with a TypeError."""
    from dataclasses import replace

    from gym_graphreset import mdp
    from gym_graphreset.tasks.tracking.motion_clips import robot_body_names

    register_task(ENV_ID, velocity_task(ROBOT))
    plain = gym.make_vec(ENV_ID, 2, vectorization_mode="vector_entry_point", device="cpu")
    recorders = mdp.motion_recorders(robot_body_names(plain.mjm))
    cfg = replace(plain.cfg, recorders=recorders, refresh="com")
    plain.close()
    env = gym.make_vec(ENV_ID, 2, vectorization_mode="vector_entry_point", device="cpu", cfg=cfg)
    assert isinstance(env, ManagerBasedEnv) and env.cfg is cfg and set(env.recorder_manager.names) == set(recorders)
    env.close()


@pytest.mark.usefixtures("clean_registry")
@pytest.mark.parametrize("builtin", sorted(registration.TASK_LAYER))
def test_the_librarys_tasks_and_a_users_go_through_one_registry(builtin: str) -> None:
    """A built-in id and a user's id are both ``register_task`` entries; ``task_cfg`` answers both from it."""
    task, env_class, options, steps = registration.TASK_LAYER[builtin]
    entry = registered_task(builtin)
    assert isinstance(entry, RegisteredTask) and (entry.task, entry.env_class, entry.options) == (
        task,
        env_class,
        options,
    )
    assert gym.spec(builtin).max_episode_steps == steps and gym.spec(builtin).vector_entry_point is entry
    module, _, name = task.partition(":")
    answered, built = registration.task_cfg(builtin), getattr(importlib.import_module(module), name)()
    assert answered is not None and type(answered.model) is type(built.model)  # the model: a RobotModel
    assert all(getattr(answered, f.name) == getattr(built, f.name) for f in fields(built) if f.name != "model")

    cfg = velocity_task(ROBOT)
    mine = register_task(ENV_ID, lambda: cfg, options=("obs_clip",), max_episode_steps=7)
    assert registered_task(ENV_ID) is mine and gym.spec(ENV_ID).max_episode_steps == 7
    assert registered_task(f"my_tasks:{ENV_ID}") is mine  # ``module:id``, as make_vec takes it
    assert registration.task_cfg(ENV_ID) is cfg
    assert registration.task_cfg("gym_graphreset/CartPole-v1") is None  # not a task of the layer


@pytest.mark.usefixtures("clean_registry")
def test_options_build_the_variant_and_cfg_edits_apply_to_a_given_cfg() -> None:
    """A factory's option reaches the factory; ``obs_clip`` edits the config, a given ``cfg=`` too; a factory
    option with ``cfg=`` is refused, naming both."""

    def task(push: float = 0.5) -> object:
        cfg = velocity_task(ROBOT)
        return cfg.replace_term("events", "push_robot", params={"linear": (push,) * 3, "angular": (push,) * 3})

    entry = register_task(ENV_ID, task, options=("push", "obs_clip"))  # type: ignore[arg-type]
    assert entry.cfg(push=0.25).events["push_robot"].params["linear"] == (0.25,) * 3
    given = velocity_task(ROBOT)
    assert entry.cfg(given, obs_clip=3.0).obs_clip == 3.0 and given.obs_clip is None
    with pytest.raises(ValueError, match=re.escape("give `push` or `cfg`, not both")):
        entry.cfg(given, push=0.25)


@pytest.mark.usefixtures("clean_registry")
def test_a_model_variant_the_task_does_not_take_is_refused_naming_what_it_takes() -> None:
    """``model_xml=`` on a task without a robot-model option, an unknown option, a bad ``keep_sensors``: named."""
    register_task(ENV_ID, velocity_task(ROBOT), options=("obs_clip",))
    with pytest.raises(ValueError, match=re.escape(f"{ENV_ID!r} takes no `model_xml`: its options are `obs_clip`")):
        gym.make_vec(ENV_ID, 2, vectorization_mode="vector_entry_point", device="cpu", model_xml="robot.xml")
    tracking = registered_task("gym_graphreset/G1-Tracking-Flat-v0")
    assert tracking is not None
    accepted = "`motion_file` / `model_xml` / `keep_sensors` / `obs_clip` / `forward_before_obs`"
    with pytest.raises(ValueError, match=re.escape(f"takes no `terrain`: its options are {accepted}")):
        tracking.cfg(terrain=None)
    with pytest.raises(ValueError, match=re.escape("`keep_sensors` must be a bool, got 'yes'")):
        registered_task("gym_graphreset/Go1-Velocity-Flat-v0").cfg(keep_sensors="yes")  # type: ignore[union-attr]


@pytest.mark.usefixtures("clean_registry")
def test_none_keeps_the_tasks_own_value_and_unknown_options_fail_at_registration() -> None:
    """``obs_clip=None`` (as every other option's ``None``) leaves the task's value, not a removed clip; an option
    the task function does not take is refused when registered, naming what it takes."""
    from dataclasses import replace

    entry = register_task(ENV_ID, lambda: replace(velocity_task(ROBOT), obs_clip=5.0), options=("obs_clip",))
    assert entry.cfg(obs_clip=None).obs_clip == 5.0 and entry.cfg(obs_clip=2.0).obs_clip == 2.0

    def task(push: float = 0.5) -> object:
        return velocity_task(ROBOT)

    message = f"register_task({ENV_ID!r}): `options` ['psuh'] are not parameters of the task (it takes ['push'])"
    with pytest.raises(ValueError, match=re.escape(message)):
        register_task(ENV_ID, task, options=("psuh",), replace=True)  # type: ignore[arg-type]
