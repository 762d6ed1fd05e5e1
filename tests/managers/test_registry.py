"""``register_task``: a TaskCfg becomes a vector env id; duplicates and non-tasks are refused by name."""

from __future__ import annotations

import pathlib
import re
import sys
from collections.abc import Iterator

import gymnasium as gym
import pytest

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset.managers.registry import register_task
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
