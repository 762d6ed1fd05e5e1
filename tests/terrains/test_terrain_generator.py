"""The terrain generator and the terrain curriculum, on the CPU.

Generator: the same seed gives the same terrain, difficulty grows by row (stair height, slope, roughness,
box height), the MJCF compiles, every origin lies on the surface (MuJoCo's own ``mj_ray`` from above), bad
config values are refused naming the field. Curriculum: a hand-made end of episode per env moves levels by
mjlab's rule, only on the reset rows, on the device, with no host read; the spawn follows the new cell.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace
from typing import Any

import mujoco
import numpy as np
import pytest
import torch

from gym_graphreset.terrains.sub_terrains import (
    FlatTerrainCfg,
    PyramidSlopeTerrainCfg,
    PyramidStairsTerrainCfg,
    RandomBoxesTerrainCfg,
    RandomRoughTerrainCfg,
    WaveTerrainCfg,
)
from gym_graphreset.terrains.terrain_generator import (
    ROUGH_TERRAINS_CFG,
    TerrainCfg,
    TerrainGeneratorCfg,
    add_terrain,
    check_model_terrain,
    generate_terrain,
)

SMALL = TerrainGeneratorCfg(
    sub_terrains={
        "flat": FlatTerrainCfg(),
        "rough": RandomRoughTerrainCfg(),
        "stairs": PyramidStairsTerrainCfg(step_height_range=(0.0, 0.2)),
        "stairs_inv": PyramidStairsTerrainCfg(step_height_range=(0.0, 0.2), inverted=True),
        "slope": PyramidSlopeTerrainCfg(slope_range=(0.0, 0.5)),
        "slope_inv": PyramidSlopeTerrainCfg(slope_range=(0.0, 0.5), inverted=True),
        "boxes": RandomBoxesTerrainCfg(),
        "waves": WaveTerrainCfg(num_waves=2),
    },
    size=(4.0, 4.0),
    num_rows=5,
    border_width=2.0,
    seed=7,
)


TINY_STEPS = PyramidStairsTerrainCfg(step_width=1e-4, border_width=0.0)


def ray_down(m: mujoco.MjModel, d: mujoco.MjData, x: float, y: float, top: float = 10.0) -> float:
    """The surface height at (x, y) by MuJoCo's own ray cast."""
    dist = mujoco.mj_ray(m, d, np.array([x, y, top]), np.array([0.0, 0.0, -1.0]), None, 1, -1, np.zeros(1, np.int32))
    assert dist >= 0
    return top - dist


def cell_heights(terrain, col: int, row: int) -> np.ndarray:
    """Surface samples inside cell (row, col), 0.5 m in from its edges."""
    sx, sy = terrain.cfg.size
    ox, oy = terrain.origins[row, col, :2]
    x, y = np.meshgrid(
        np.linspace(ox - sx / 2 + 0.5, ox + sx / 2 - 0.5, 41), np.linspace(oy - sy / 2 + 0.5, oy + sy / 2 - 0.5, 41)
    )
    return terrain.surface(x, y)


def test_same_seed_same_terrain_other_seed_other() -> None:
    """Determinism by seed: identical heights, boxes and origins (and MJCF); another seed changes the random cells."""
    a, b = generate_terrain(SMALL), generate_terrain(SMALL)
    assert np.array_equal(a.heights, b.heights) and np.array_equal(a.boxes, b.boxes)
    assert np.array_equal(a.origins, b.origins) and a.to_mjcf() == b.to_mjcf()
    c = generate_terrain(replace(SMALL, seed=8))
    assert not np.array_equal(a.heights, c.heights)
    assert not np.array_equal(a.boxes, c.boxes)


def test_difficulty_grows_by_row() -> None:
    """Stair height, slope height, roughness, box height and wave amplitude are non-decreasing by row, and grow
    overall."""
    t = generate_terrain(SMALL)
    rows = range(SMALL.num_rows)
    measures = {
        "stairs": [cell_heights(t, t.cell_of("stairs"), r).max() for r in rows],
        "stairs_inv": [-cell_heights(t, t.cell_of("stairs_inv"), r).min() for r in rows],
        "slope": [cell_heights(t, t.cell_of("slope"), r).max() for r in rows],
        "slope_inv": [-cell_heights(t, t.cell_of("slope_inv"), r).min() for r in rows],
        "rough": [cell_heights(t, t.cell_of("rough"), r).std() for r in rows],
        "boxes": [cell_heights(t, t.cell_of("boxes"), r).max() for r in rows],
        "waves": [np.ptp(cell_heights(t, t.cell_of("waves"), r)) for r in rows],
        "flat": [np.abs(cell_heights(t, t.cell_of("flat"), r)).max() for r in rows],
    }
    for name, m in measures.items():
        if name == "flat":
            assert max(m) == 0.0
            continue
        assert all(b >= a - 1e-9 for a, b in itertools.pairwise(m)), (name, m)
        assert m[-1] > m[0] + 0.01, (name, m)
    # the stairs' step height is the row's difficulty times 0.2 m: the platform is (num_steps + 1) steps up
    n = SMALL.sub_terrains["stairs"].num_steps(SMALL.size)
    assert np.allclose(t.origins[:, t.cell_of("stairs"), 2], (n + 1) * 0.2 * t.difficulty)
    assert np.allclose(t.difficulty, np.linspace(0, 1, SMALL.num_rows))


@pytest.mark.parametrize("mode", ["boxes", "heightfield"])
def test_mjcf_compiles_and_origins_lie_on_the_surface(mode: str) -> None:
    """The fragment compiles; MuJoCo's ``mj_ray`` finds every origin on the surface and agrees with ``surface``."""
    t = generate_terrain(replace(SMALL, box_terrains=mode))
    m = mujoco.MjModel.from_xml_string(t.to_mjcf())
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    assert m.nhfield == 1 and m.hfield_ncol[0] == t.heights.shape[0]
    assert (m.ngeom == 1 + len(t.boxes)) and ((len(t.boxes) > 4) == (mode == "boxes"))
    for o in t.origins.reshape(-1, 3):
        assert abs(ray_down(m, d, o[0], o[1]) - o[2]) < 1e-4
    rng = np.random.default_rng(1)
    ex, ey = t.extent
    for x, y in rng.uniform([-ex / 2, -ey / 2], [ex / 2, ey / 2], (200, 2)):
        assert abs(ray_down(m, d, x, y) - float(t.surface(np.array(x), np.array(y)))) < 1e-4


def test_add_terrain_replaces_the_floor_and_retargets_sensors() -> None:
    """A robot's plane ``floor`` is replaced; a contact sensor on the floor now names the body ``terrain``."""
    robot = """<mujoco><worldbody><geom name="floor" type="plane" size="0 0 1"/>
      <body name="b" pos="0 0 1"><freejoint/><geom name="foot" type="sphere" size="0.1"/></body></worldbody>
      <sensor><contact name="c" geom1="foot" geom2="floor" data="found"/></sensor></mujoco>"""
    xml = add_terrain(robot, generate_terrain(replace(SMALL, num_rows=2)))
    m = mujoco.MjModel.from_xml_string(xml)
    assert mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor") == -1
    assert m.nhfield == 1
    body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "terrain")
    assert m.sensor_reftype[0] == mujoco.mjtObj.mjOBJ_BODY and m.sensor_refid[0] == body


def test_add_terrain_refuses_a_floor_the_model_does_not_have() -> None:
    """``floor=`` naming no world geom is refused (the plane would stay over the terrain); ``None`` adds it alone."""
    robot = """<mujoco><worldbody><geom name="ground" type="plane" size="0 0 1"/>
      <body name="b" pos="0 0 1"><freejoint/><geom type="sphere" size="0.1"/></body></worldbody></mujoco>"""
    terrain = generate_terrain(replace(SMALL, num_rows=2))
    with pytest.raises(ValueError, match=r"`floor` 'floor' is no geom.*'ground'"):
        add_terrain(robot, terrain)
    m = mujoco.MjModel.from_xml_string(add_terrain(robot, terrain, floor=None))
    assert mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "ground") >= 0 and m.nhfield == 1


ROBOT = """<mujoco><worldbody><geom name="floor" type="plane" size="0 0 1"/>
  <body name="b" pos="0 0 1"><freejoint/><geom type="sphere" size="0.1"/></body></worldbody></mujoco>"""


@pytest.mark.parametrize(
    ("change", "field"),
    [({"num_rows": 3}, "num_rows"), ({"seed": 8}, "seed"), ({"size": (4.0, 4.4)}, "size")],
)
@pytest.mark.parametrize("how", ["add_terrain", "to_mjcf"])
def test_a_terrain_other_than_the_models_is_refused_naming_the_field(change: dict, field: str, how: str) -> None:
    """The model keeps its generator config: another one is refused naming the field; the same one passes."""
    small = replace(SMALL, num_rows=2)
    built = generate_terrain(small)
    xml = add_terrain(ROBOT, built) if how == "add_terrain" else built.to_mjcf()
    m = mujoco.MjModel.from_xml_string(xml)
    check_model_terrain(m, built, "TerrainCfg")
    with pytest.raises(ValueError, match=rf"TerrainCfg: `generator.{field}`"):
        check_model_terrain(m, generate_terrain(replace(small, **change)), "TerrainCfg")


@pytest.mark.parametrize("change", [{"num_rows": 3}, {"seed": 8}, {"horizontal_scale": 0.05}])
def test_a_terrain_other_than_the_models_is_refused_without_the_kept_config(change: dict) -> None:
    """A model without the kept config (edited by hand) is compared by its heightfield and boxes."""
    import re

    small = replace(SMALL, num_rows=2)
    xml = re.sub(r"<custom>.*?</custom>", "", add_terrain(ROBOT, generate_terrain(small)), flags=re.S)
    m = mujoco.MjModel.from_xml_string(xml)
    check_model_terrain(m, generate_terrain(small), "TerrainCfg")
    with pytest.raises(ValueError, match="the model's terrain is not the one `generator` makes"):
        check_model_terrain(m, generate_terrain(replace(small, **change)), "TerrainCfg")
    with pytest.raises(ValueError, match="the model holds no terrain"):
        check_model_terrain(mujoco.MjModel.from_xml_string(ROBOT), generate_terrain(small), "TerrainCfg")


def test_waves_follow_mjlabs_formula() -> None:
    """At difficulty 1 on an 8 m cell: a flat border, heights on the 5 mm vertical step, peak to peak twice the
    0.2 m amplitude (less the quantisation), centred on 0, ``num_waves`` crests of the cosine along x."""
    cfg = WaveTerrainCfg()
    grid = cfg._make(1.0, (8.0, 8.0), 0.1, np.random.default_rng(0)).grid
    assert grid is not None and grid.shape == (81, 81)
    b = 2  # int(0.25 m / 0.1 m) border samples
    assert not grid[:b].any() and not grid[-b:].any() and not grid[:, :b].any() and not grid[:, -b:].any()
    inner = grid[b:-b, b:-b]
    np.testing.assert_allclose(inner / 0.005, np.rint(inner / 0.005), atol=1e-9)
    assert 0.4 - 4 * 0.005 <= np.ptp(inner) <= 0.4 and abs(inner.mean()) < 0.02
    row = inner[:, 0]  # j = 0: a * cos(i k) alone, num_waves crests (i = 0 and every 77 / 4 samples)
    crests = np.flatnonzero((row[1:-1] >= row[:-2]) & (row[1:-1] > row[2:])) + 1
    assert len(crests) + 1 == cfg.num_waves  # the crest at j = 0 is the edge
    assert not cfg._make(0.0, (8.0, 8.0), 0.1, np.random.default_rng(0)).grid.any()  # difficulty 0: flat


def test_rough_preset_is_mjlabs_grid() -> None:
    """mjlab 1.6's rough grid: 8 m cells, 10 rows, one column per type, 20 m border, its seven sub-terrains and
    their shares; it compiles."""
    cfg = ROUGH_TERRAINS_CFG
    assert cfg.size == (8.0, 8.0) and cfg.num_rows == 10 and cfg.border_width == 20.0 and cfg.num_cols == 7
    shares = {n: s.proportion for n, s in cfg.sub_terrains.items()}
    assert shares == {
        "flat": 0.2,
        "pyramid_stairs": 0.2,
        "pyramid_stairs_inv": 0.2,
        "hf_pyramid_slope": 0.1,
        "hf_pyramid_slope_inv": 0.1,
        "random_rough": 0.1,
        "wave_terrain": 0.1,
    }
    t = generate_terrain(cfg)
    assert t.origins.shape == (10, 7, 3)
    mujoco.MjModel.from_xml_string(t.to_mjcf())


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: replace(SMALL, box_terrains="mesh"), "box_terrains"),
        (lambda: replace(SMALL, size=(4.05, 4.0)), "size"),
        (lambda: replace(SMALL, num_rows=0), "num_rows"),
        (lambda: replace(SMALL, seed=-1), "seed"),
        (lambda: replace(SMALL, difficulty_range=(1.0, 0.0)), "difficulty_range"),
        (lambda: replace(SMALL, sub_terrains={}), "sub_terrains"),
        (lambda: PyramidStairsTerrainCfg(step_width=0.0), "step_width"),
        (lambda: RandomRoughTerrainCfg(noise_range=(0.1, 0.02)), "noise_range"),
        (lambda: RandomBoxesTerrainCfg(num_boxes=-1), "num_boxes"),
        (lambda: WaveTerrainCfg(num_waves=0), "num_waves"),
        (lambda: WaveTerrainCfg(vertical_scale=0.0), "vertical_scale"),
        (lambda: replace(SMALL, sub_terrains={"w": WaveTerrainCfg(border_width=2.0)}), "border_width"),
        (lambda: replace(SMALL, sub_terrains={"w": WaveTerrainCfg(border_width=0.04)}), "border_width"),
        (lambda: PyramidSlopeTerrainCfg(proportion=0.0), "proportion"),
        (lambda: TerrainCfg(SMALL, max_init_level=-1), "max_init_level"),
        (lambda: replace(SMALL, difficulty_range=(0.0, 2.0)), "difficulty_range"),
        (lambda: replace(SMALL, sub_terrains={"s": PyramidStairsTerrainCfg(platform_width=50.0)}), "platform_width"),
        (lambda: replace(SMALL, sub_terrains={"b": RandomBoxesTerrainCfg(platform_width=50.0)}), "platform_width"),
        (lambda: replace(SMALL, size=(1e5, 1e5)), "size"),  # 7 TiB of heights: refused before allocating
        (lambda: replace(SMALL, sub_terrains={"b": RandomBoxesTerrainCfg(num_boxes=10**6)}), "num_boxes"),
        (lambda: replace(SMALL, sub_terrains={"s": TINY_STEPS}), "step_width"),  # 20,000 steps per cell
        (lambda: replace(SMALL, sub_terrains={"s": PyramidStairsTerrainCfg(border_width=2.0)}), "border_width"),
        (lambda: replace(SMALL, sub_terrains={"r": RandomRoughTerrainCfg(border_width=2.5)}), "border_width"),
        (lambda: replace(SMALL, sub_terrains={"p": PyramidSlopeTerrainCfg(platform_width=3.6)}), "platform_width"),
        (lambda: replace(SMALL, sub_terrains={"p": PyramidSlopeTerrainCfg(border_width=2.0)}), "border_width"),
        (lambda: replace(SMALL, sub_terrains={"b": RandomBoxesTerrainCfg(platform_width=3.5)}), "platform_width"),
        (lambda: generate_terrain(SMALL).env_origins(0), "num_envs"),
        (lambda: generate_terrain(SMALL).env_origins(4, max_init_level=-1), "max_init_level"),
        (lambda: generate_terrain(SMALL).env_origins(4, seed="a"), "seed"),  # type: ignore[arg-type]
    ],
)
def test_bad_values_are_refused_naming_the_field(build, field: str) -> None:
    """Each bad value raises a ValueError that names its field."""
    with pytest.raises(ValueError, match=f"`{field}`"):
        build()


def test_env_origins_by_proportion_and_level() -> None:
    """Envs spread over the columns by proportion (each column at least one), levels within max_init_level."""
    t = generate_terrain(replace(SMALL, sub_terrains={"a": FlatTerrainCfg(proportion=3.0), "b": FlatTerrainCfg()}))
    levels, types, origins = t.env_origins(8, max_init_level=2)
    assert types[:2].tolist() == [0, 1] and types.bincount().tolist() in ([6, 2], [5, 3], [7, 1])
    assert int(levels.max()) <= 2
    _, many, _ = t.env_origins(4000)
    assert abs(int(many.bincount()[0]) - 3000) < 20  # every prefix within a few envs of the proportions
    assert torch.allclose(origins, torch.tensor(t.origins[levels.numpy(), types.numpy()], dtype=torch.float32))


# ---------------------------------------------------------------------------------------------- curriculum

pytest.importorskip("mujoco_warp", reason="the curriculum runs in a MuJoCo Warp task")

from gym_graphreset.mdp.terrain_levels import (  # noqa: E402
    reset_to_terrain_origin,
    terrain_level,
    terrain_levels_vel,
)
from gym_graphreset.tasks import (  # noqa: E402
    CurriculumTerm,
    EventTerm,
    JointPositionAction,
    ManagerBasedEnv,
    MetricTerm,
    ObsGroup,
    ObsTerm,
    TaskCfg,
    TerminationTerm,
    mdp,
)
from gym_graphreset.testing import assert_no_host_reads  # noqa: E402

FLOATER = """
<mujoco>
  <option timestep="0.005" gravity="0 0 0"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <body name="base" pos="0 0 0.5">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.05" mass="1" contype="0" conaffinity="0"/>
      <body name="arm" pos="0 0 0.1">
        <joint name="arm" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.02" mass="0.1" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator><position name="arm" joint="arm" kp="5"/></actuator>
</mujoco>
"""
CURRICULUM_GRID = TerrainGeneratorCfg(
    sub_terrains={"flat": FlatTerrainCfg(), "stairs": PyramidStairsTerrainCfg(step_height_range=(0.0, 0.1))},
    size=(4.0, 4.0),
    num_rows=4,
    border_width=1.0,
)
EPISODE_S = 2.0


@dataclass(frozen=True)
class _HeightCommandCfg:
    """A 1-wide command of a user's own (a target height): not a velocity."""

    def build(self, env: ManagerBasedEnv) -> _HeightCommand:
        return _HeightCommand(torch.full((env.num_envs, 1), 0.3, device=env.device))


@dataclass
class _HeightCommand:
    command: torch.Tensor
    reset_draws: int = 0
    step_draws: int = 0

    def reset(self, rows: torch.Tensor, u: torch.Tensor) -> None:
        pass

    def step(self, u: torch.Tensor) -> None:
        pass

    def metrics(self) -> dict[str, torch.Tensor]:
        return {}


def curriculum_env(n: int, spawn_first: bool = False, **changes: Any) -> ManagerBasedEnv:
    """The curriculum grid's env; ``changes``: TaskCfg fields to replace, or the env's own ``global_env_offset`` /
    ``max_episode_steps``."""
    env_args = {k: changes.pop(k) for k in ("global_env_offset", "max_episode_steps") if k in changes}
    root = EventTerm(mdp.reset_root_state_uniform, "reset", {"xy": 0.0, "z": (0.0, 0.0), "yaw": 0.0}, draws=4)
    on_cell = EventTerm(reset_to_terrain_origin, "reset")
    events = {"on_cell": on_cell, "root": root} if spawn_first else {"root": root, "on_cell": on_cell}
    cfg = TaskCfg(
        model=add_terrain(FLOATER, generate_terrain(CURRICULUM_GRID)),
        decimation=1,
        episode_length_s=EPISODE_S,
        actions={"arm": JointPositionAction(("arm",))},
        observations={"policy": ObsGroup({"z": ObsTerm(mdp.projected_gravity)})},
        commands={"twist": mdp.VelocityCommandCfg()},
        sensors={"terrain": TerrainCfg(CURRICULUM_GRID, max_init_level=1)},
        events=events,
        terminations={"time_out": TerminationTerm(mdp.time_out, time_out=True)},
        curriculum={"terrain_levels": CurriculumTerm(terrain_levels_vel)},
        metrics={"terrain_level": MetricTerm(terrain_level)},
        base_body="base",
        init_base_height=0.5,
    )
    return ManagerBasedEnv(replace(cfg, **changes), n, device="cpu", **env_args)


def test_the_terrain_spawn_shifts_the_root_pose_wherever_it_is_listed() -> None:
    """Listed before the root-reset event, the terrain spawn still runs after it: every env on its cell."""
    listed_first, listed_last = curriculum_env(8, spawn_first=True), curriculum_env(8)
    origins = listed_first.sensors["terrain"].origins
    assert origins[:, 0:2].abs().amax() > 1.0  # cells away from the world origin
    torch.testing.assert_close(listed_first.qpos[:, 0:2], origins[:, 0:2], rtol=0, atol=0)
    torch.testing.assert_close(listed_first.qpos, listed_last.qpos, rtol=0, atol=0)


def test_the_terrain_curriculum_refuses_a_command_that_is_not_a_velocity() -> None:
    """A 1-wide command read as a speed would demote every env: refused when the env is built, naming it."""
    message = (
        "curriculum['terrain_levels']: terrain_levels_vel: command 'height' is (1,) wide per env; it reads the "
        "command's first two columns as the commanded (vx, vy) speed, so it needs a velocity command"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        curriculum_env(
            2,
            commands={"height": _HeightCommandCfg()},
            curriculum={"terrain_levels": CurriculumTerm(terrain_levels_vel, {"command_name": "height"})},
        )


def test_curriculum_moves_levels_by_mjlabs_rule_on_the_reset_rows() -> None:
    """Hand-made ends of episode: up past half a cell, down short of half the commanded distance, else stay.

    Env 0 walked 2.5 m (> 2 m: up); env 1 walked 0.1 m of a 1 m/s command (< 1 m: down); env 2 walked 1 m
    with a zero command (stays); env 3 on the last row walked far (redrawn in range); env 4 on row 0 is sent
    down (stays 0); env 5 walked far but is not reset (unchanged). Spawns follow the new cells.
    """
    env = curriculum_env(6)
    state = env.sensors["terrain"]
    initial = state.levels.clone()
    assert int(initial.max()) <= 1  # max_init_level; the constructor's reset froze the levels
    env.step(torch.zeros(6, 1))
    state.levels.copy_(torch.tensor([1, 2, 1, 3, 0, 1]))
    state.move(torch.zeros(6, dtype=torch.bool), *(torch.zeros(6, dtype=torch.bool),) * 2, torch.zeros(6))
    walked = torch.tensor([[2.5, 0.0], [0.1, 0.0], [0.0, 1.0], [3.0, 0.0], [0.0, 0.1], [3.0, 0.0]])
    qpos, qvel = env.state()
    qpos[:, 0:2] = state.origins[:, 0:2] + walked
    env.set_state(qpos, qvel)
    env.commands["twist"].command.copy_(
        torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [0.0, 0, 0], [0.0, 0, 0], [1.0, 0, 0], [0.0, 0, 0]])
    )
    mask = torch.tensor([True, True, True, True, True, False])
    env.reset(options={"reset_mask": mask})
    levels = state.levels.tolist()
    assert levels[0] == 2 and levels[1] == 1 and levels[2] == 1 and levels[4] == 0 and levels[5] == 1
    assert 0 <= levels[3] < CURRICULUM_GRID.num_rows
    assert torch.equal(env.curriculum_manager.values["terrain_levels"], state.levels.float())
    cells = torch.as_tensor(generate_terrain(CURRICULUM_GRID).origins, dtype=torch.float32)
    assert torch.allclose(state.origins, cells[state.levels, state.types])
    assert torch.allclose(env.qpos[:5, 0:2], state.origins[:5, 0:2])  # respawned on the new cells
    assert torch.allclose(env.qpos[:5, 2], state.origins[:5, 2] + 0.5)
    _, _, _, _, info = env.step(torch.zeros(6, 1))
    # levels in info: the episode mean of the level (env 5's episode had its level hand-set midway)
    assert torch.allclose(info["metrics"]["terrain_level"][:5], state.levels[:5].float())
    assert torch.allclose(state.histogram().sum(), torch.tensor(1.0))


def test_curriculum_makes_no_host_read() -> None:
    """The curriculum term's move, masked over all rows, reads nothing on the host."""
    env = curriculum_env(4)
    env.step(torch.zeros(4, 1))
    rows = torch.tensor([True, False, True, False])
    terrain_levels_vel(env, rows)  # warm
    assert_no_host_reads(lambda: terrain_levels_vel(env, rows))


@pytest.mark.parametrize(("change", "field"), [({"num_rows": 6}, "num_rows"), ({"seed": 3}, "seed")])
def test_env_refuses_a_terrain_cfg_other_than_the_models(change: dict, field: str) -> None:
    """A ``TerrainCfg`` with more rows or another seed than the model's terrain is refused when the env is built."""
    cfg = curriculum_env(2).cfg
    other = replace(cfg, sensors={"terrain": TerrainCfg(replace(CURRICULUM_GRID, **change), max_init_level=1)})
    with pytest.raises(ValueError, match=rf"`generator.{field}`"):
        ManagerBasedEnv(other, 2, device="cpu")


def test_env_origins_are_a_function_of_the_global_env_index() -> None:
    """Envs 4..7 of one population start on the same cells whether one process or a second rank holds them."""
    t = generate_terrain(SMALL)
    whole = t.env_origins(8, max_init_level=3)
    share = t.env_origins(4, max_init_level=3, first_env=4)
    for a, b in zip(whole, share, strict=True):
        assert torch.equal(a[4:], b)
    assert len(set(whole[0].tolist())) > 1  # levels are drawn, not all equal


def test_terrain_levels_and_types_follow_the_global_env_offset() -> None:
    """Under torchrun a rank's rows (``global_env_offset``) start where one process's rows of those ids do."""
    one = curriculum_env(8).sensors["terrain"]
    rank1 = curriculum_env(4, global_env_offset=4).sensors["terrain"]
    assert torch.equal(rank1.levels, one.levels[4:]) and torch.equal(rank1.types, one.types[4:])
    assert not torch.equal(rank1.levels, one.levels[:4]) or not torch.equal(rank1.types, one.types[:4])


def test_curriculum_measures_the_walk_against_the_envs_own_horizon() -> None:
    """With ``max_episode_steps`` of 0.5 s (not ``episode_length_s`` = 2 s), 0.4 m at 1 m/s is enough to stay."""
    env = curriculum_env(2, max_episode_steps=100)  # 100 steps x 5 ms
    state = env.sensors["terrain"]
    env.step(torch.zeros(2, 1))
    state.levels.copy_(torch.tensor([1, 1]))
    state.move(torch.zeros(2, dtype=torch.bool), *(torch.zeros(2, dtype=torch.bool),) * 2, torch.zeros(2))
    qpos, qvel = env.state()
    qpos[:, 0:2] = state.origins[:, 0:2] + torch.tensor([[0.4, 0.0], [0.1, 0.0]])
    env.set_state(qpos, qvel)
    env.commands["twist"].command.copy_(torch.tensor([[1.0, 0, 0], [1.0, 0, 0]]))
    env.reset(options={"reset_mask": torch.tensor([True, True])})
    assert state.levels.tolist() == [1, 0]  # half of 0.5 s at 1 m/s is 0.25 m: 0.4 m stays, 0.1 m goes down


def test_an_unknown_terrain_name_is_refused_when_the_env_is_built() -> None:
    """A term naming a terrain the task does not have fails at construction naming the term, not at a step."""
    cfg = curriculum_env(2).cfg
    bounds = TerminationTerm(mdp.out_of_terrain_bounds, {"terrain_name": "ground"}, time_out=True)
    with pytest.raises(ValueError, match=r"terminations\['bounds'\]: 'out_of_terrain_bounds' param `terrain_name`"):
        ManagerBasedEnv(cfg.with_term("terminations", "bounds", bounds), 2, device="cpu")
    no_terrain = replace(cfg, sensors={})  # terrain_name left at its default, "terrain"
    message = r"events\['on_cell'\]: 'reset_to_terrain_origin' param `terrain_name`: the task has no sensor 'terrain'"
    with pytest.raises(ValueError, match=message):
        ManagerBasedEnv(no_terrain, 2, device="cpu")


def test_place_puts_every_env_on_one_cell_and_refuses_outside_the_grid() -> None:
    """``TerrainState.place``: every env on the row and/or column asked (the other kept per env), origins on that
    cell, and the next reset spawns there; a row or column outside the grid is refused naming it, nothing moved."""
    env = curriculum_env(4)
    state = env.sensors["terrain"]
    types = state.types.clone()
    state.place(level=3)
    assert state.levels.tolist() == [3] * 4 and torch.equal(state.types, types)
    state.place(column=1)
    assert state.types.tolist() == [1] * 4
    cells = torch.as_tensor(generate_terrain(CURRICULUM_GRID).origins, dtype=torch.float32)
    assert torch.equal(state.origins, cells[3, 1].expand(4, 3))
    env.reset(options={"reset_mask": torch.ones(4, dtype=torch.bool)})  # the first reset: the levels stay
    torch.testing.assert_close(env.qpos[:, 0:2], cells[3, 1, 0:2].expand(4, 2), rtol=0, atol=0)
    before = (state.levels.clone(), state.types.clone(), state.origins.clone())
    for bad, field in (({"level": 4}, "level"), ({"column": 2}, "column"), ({"level": -1, "column": 0}, "level")):
        with pytest.raises(ValueError, match=rf"TerrainState.place: `{field}` must be None or an int in"):
            state.place(**bad)
    assert all(torch.equal(a, b) for a, b in zip(before, (state.levels, state.types, state.origins), strict=True))
