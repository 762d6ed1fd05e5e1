"""The terrain generator and the terrain curriculum, on the CPU.

Generator: the same seed gives the same terrain, difficulty grows by row (stair height, slope, roughness,
box height), the MJCF compiles, every origin lies on the surface (MuJoCo's own ``mj_ray`` from above), bad
config values are refused naming the field. Curriculum: a hand-made end of episode per env moves levels by
mjlab's rule, only on the reset rows, on the device, with no host read; the spawn follows the new cell.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

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
    assert types.tolist() == [0] * 6 + [1] * 2
    assert int(levels.max()) <= 2
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


def curriculum_env(n: int) -> ManagerBasedEnv:
    cfg = TaskCfg(
        model=add_terrain(FLOATER, generate_terrain(CURRICULUM_GRID)),
        decimation=1,
        episode_length_s=EPISODE_S,
        actions={"arm": JointPositionAction(("arm",))},
        observations={"policy": ObsGroup({"z": ObsTerm(mdp.projected_gravity)})},
        commands={"twist": mdp.VelocityCommandCfg()},
        sensors={"terrain": TerrainCfg(CURRICULUM_GRID, max_init_level=1)},
        events={
            "root": EventTerm(mdp.reset_root_state_uniform, "reset", {"xy": 0.0, "z": (0.0, 0.0), "yaw": 0.0}, draws=4),
            "on_cell": EventTerm(reset_to_terrain_origin, "reset"),
        },
        curriculum={"terrain_levels": CurriculumTerm(terrain_levels_vel)},
        metrics={"terrain_level": MetricTerm(terrain_level)},
        base_body="base",
        init_base_height=0.5,
    )
    return ManagerBasedEnv(cfg, n, device="cpu")


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
