"""The height scan observation term: mjlab's ray grid cast with MuJoCo Warp's public ``rays``, on the CPU.

A free box ``base`` (with an actuated arm above it, so the task has an action) floats over a plane and a box
step of the terrain's geom group. The scan must read the base height on flat ground, the step where its rays
land on it, agree with MuJoCo's own ``mj_ray`` on a generated terrain, and make no host read. The same holds
for the foot clearances of a ``TerrainHeightSensorCfg`` (two sites under the base), and the terrain normal
fitted to a scan must match the ground's (a ramp) and an exact eigen-decomposition. Cast as mjlab's ``sense()``
(``cast="before_obs"``), rewards read the last observation's scan and a step casts once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace

import mujoco
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the height scan casts MuJoCo Warp rays")

from gym_graphreset.mdp.height_scan import RayCastSensorCfg, grid_pattern, height_scan, terrain_normal
from gym_graphreset.mdp.math import fit_plane_normal
from gym_graphreset.mdp.rays import RayBuffers
from gym_graphreset.mdp.rewards import upright
from gym_graphreset.mdp.terrain_height import TerrainHeightSensorCfg, ring_pattern, terrain_height
from gym_graphreset.tasks import (
    JointPositionAction,
    ManagerBasedEnv,
    MetricTerm,
    ObsGroup,
    ObsTerm,
    RewardTerm,
    TaskCfg,
    TerminationTerm,
    mdp,
)
from gym_graphreset.terrains.sub_terrains import FlatTerrainCfg, PyramidStairsTerrainCfg, RandomRoughTerrainCfg
from gym_graphreset.terrains.terrain_generator import Terrain, TerrainGeneratorCfg, add_terrain, generate_terrain
from gym_graphreset.testing import assert_no_host_reads

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

STEP_X0, STEP_TOP = 0.3, 0.2
STEP = f'<geom name="step" type="box" pos="{STEP_X0 + 2.0} 0 {STEP_TOP / 2}" size="2 2 {STEP_TOP / 2}" group="2"/>'
FLOATER = f"""
<mujoco>
  <option timestep="0.005" gravity="0 0 0"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05" group="2"/>
    {STEP}
    <body name="base" pos="-1 0 0.5">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.05" mass="1"/>
      <site name="foot_a" pos="0.1 0 -0.05"/>
      <site name="foot_b" pos="-0.1 0 -0.05"/>
      <body name="arm" pos="0 0 0.1">
        <joint name="arm" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.02" mass="0.1"/>
      </body>
    </body>
  </worldbody>
  <actuator><position name="arm" joint="arm" kp="5"/></actuator>
</mujoco>
"""


FEET = ("foot_a", "foot_b")


def task(model: str, sensor: RayCastSensorCfg, feet: TerrainHeightSensorCfg | None = None) -> TaskCfg:
    extra = {} if feet is None else {"feet": feet}
    return TaskCfg(
        model=model,
        decimation=1,
        episode_length_s=1.0,
        actions={"arm": JointPositionAction(("arm",))},
        observations={"policy": ObsGroup({"scan": ObsTerm(height_scan, {"sensor_name": "scan"})})},
        sensors={"scan": sensor, **extra},
        terminations={"time_out": TerminationTerm(mdp.time_out, time_out=True)},
        base_body="base",
    )


def place(env: ManagerBasedEnv, xyz: torch.Tensor, yaw: torch.Tensor) -> None:
    qpos, qvel = env.state()
    qpos[:, 0:3] = xyz
    qpos[:, 3] = torch.cos(yaw / 2)
    qpos[:, 4:6] = 0.0
    qpos[:, 6] = torch.sin(yaw / 2)
    env.set_state(qpos, qvel)
    env.invalidate()


def place_over_cells(env: ManagerBasedEnv, origins: np.ndarray, seed: int, height: tuple[float, float]) -> torch.Tensor:
    """Each world's base over a random terrain cell, up to 1.5 m off its origin, ``height`` above it, any yaw."""
    rng = np.random.default_rng(seed)
    flat = origins.reshape(-1, 3)
    n = env.num_envs
    xyz = torch.tensor(flat[rng.choice(len(flat), n)], dtype=torch.float32) + torch.tensor(
        rng.uniform([-1.5, -1.5, height[0]], [1.5, 1.5, height[1]], (n, 3)), dtype=torch.float32
    )
    place(env, xyz, torch.tensor(rng.uniform(-3, 3, n), dtype=torch.float32))
    return xyz


def rough_and_stairs(seed: int) -> tuple[Terrain, str]:
    """A small generated terrain (random rough and pyramid stairs, 2 rows of 4 m cells) under the floater."""
    gen = TerrainGeneratorCfg(
        sub_terrains={"rough": RandomRoughTerrainCfg(), "stairs": PyramidStairsTerrainCfg()},
        size=(4.0, 4.0),
        num_rows=2,
        border_width=1.0,
        seed=seed,
    )
    terrain = generate_terrain(gen)
    return terrain, add_terrain(FLOATER.replace(STEP, ""), terrain)


@pytest.fixture(scope="module")
def env() -> ManagerBasedEnv:
    return ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base")), 3, device="cpu")


def test_grid_is_mjlabs_pattern() -> None:
    """1.6 m x 1.0 m at 0.1 m: 17 x 11 = 187 rays, x fastest, centred on the body."""
    g = grid_pattern((1.6, 1.0), 0.1)
    assert g.shape == (187, 3)
    assert torch.allclose(g[:17, 0], torch.linspace(-0.8, 0.8, 17), atol=1e-6)
    assert torch.allclose(g[::17, 1], torch.linspace(-0.5, 0.5, 11), atol=1e-6)
    assert RayCastSensorCfg("trunk").num_rays == 187


def test_flat_ground_reads_base_height(env: ManagerBasedEnv) -> None:
    """Over the plane, every ray reads the base height (to 1e-4), in every world; shape (num_envs, n_rays)."""
    z = torch.tensor([0.5, 0.31, 1.7])
    place(
        env, torch.stack((torch.full((3,), -2.0), torch.tensor([0.0, 3.0, -4.0]), z), 1), torch.tensor([0.0, 1.0, -2.0])
    )
    scan = height_scan(env, "scan")
    assert scan.shape == (3, 187)
    assert torch.allclose(scan, z.unsqueeze(1).expand(3, 187), atol=1e-4)
    obs, _ = env.reset()
    assert obs.shape == (3, 187)  # one group: its tensor, made at the reset with the scan's width


def test_step_is_seen_where_rays_land_on_it(env: ManagerBasedEnv) -> None:
    """With the base straddling the step's edge, rays landing past x = 0.3 read base z - 0.2, the others base z.

    World 1 is turned 90 degrees (yaw alignment turns the grid); world 2 sits fully over the step.
    """
    base_z = 0.6
    xyz = torch.tensor([[STEP_X0, 0.0, base_z], [STEP_X0 - 0.05, 0.0, base_z], [STEP_X0 + 1.0, 0.0, base_z]])
    yaw = torch.tensor([0.0, math.pi / 2, 0.3])
    place(env, xyz, yaw)
    scan = height_scan(env, "scan")
    sensor = env.sensors["scan"]
    ray_x = sensor.origins[..., 0]
    on_step = ray_x > STEP_X0 + 1e-4
    off_step = ray_x < STEP_X0 - 1e-4
    expected = torch.where(on_step, base_z - STEP_TOP, base_z)
    decided = on_step | off_step
    assert torch.allclose(scan[decided], expected[decided], atol=1e-4)
    assert on_step[0].sum() > 0 and off_step[0].sum() > 0
    # the turned world's grid: its local +y axis points along world -x
    assert torch.allclose(sensor.origins[1, :, 0] - xyz[1, 0], -sensor.offsets[:, 1], atol=1e-5)
    assert bool(on_step[2].all())


def test_misses_read_max_distance() -> None:
    """A ray past ``max_distance`` reads ``max_distance`` (a group without geoms is refused: see below)."""
    near = ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base", max_distance=0.4)), 1, device="cpu")
    assert torch.allclose(height_scan(near, "scan"), torch.full((1, 187), 0.4))  # base at 0.5 over the plane


def test_scan_makes_no_host_read(env: ManagerBasedEnv) -> None:
    """Placing the rays, the warp cast and the heights read nothing on the host."""
    env.invalidate()
    height_scan(env, "scan")  # warm: kernels loaded

    def compute() -> None:
        env.invalidate()
        height_scan(env, "scan")

    assert_no_host_reads(compute)


def _mj_ray(xml: str) -> Callable[[np.ndarray, int], float]:
    """MuJoCo C's ``mj_ray`` straight down on ``xml``'s initial state, against geom group 2 (the terrain's)."""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    group = np.zeros(6, np.uint8)
    group[2] = 1
    geomid = np.zeros(1, np.int32)
    return lambda p, exclude: mujoco.mj_ray(m, d, p, np.array([0.0, 0.0, -1.0]), group, 1, exclude, geomid)


def test_scan_matches_mujoco_mj_ray_on_generated_terrain() -> None:
    """On a generated terrain (heightfield and boxes), warp distances equal MuJoCo C's ``mj_ray``."""
    gen = TerrainGeneratorCfg(
        sub_terrains={
            "rough": RandomRoughTerrainCfg(),
            "stairs": PyramidStairsTerrainCfg(step_height_range=(0.05, 0.2)),
            "flat": FlatTerrainCfg(),
        },
        size=(4.0, 4.0),
        num_rows=2,
        border_width=1.0,
        seed=3,
    )
    terrain = generate_terrain(gen)
    xml = add_terrain(FLOATER.replace(STEP, ""), terrain)  # the plane `floor` is replaced
    n = 4
    env = ManagerBasedEnv(task(xml, RayCastSensorCfg("base", size=(0.8, 0.6), resolution=0.2)), n, device="cpu")
    xyz = place_over_cells(env, terrain.origins, seed=0, height=(0.8, 1.2))
    scan = height_scan(env, "scan")
    sensor = env.sensors["scan"]
    ray = _mj_ray(xml)
    for w in range(n):
        for r in range(0, sensor.num_rays, 3):
            p = sensor.origins[w, r].double().numpy()
            dist = ray(p, -1)
            assert dist > 0
            assert abs(float(sensor.distances[w, r]) - dist) < 1e-4, (w, r)
            assert abs(float(scan[w, r]) - (float(xyz[w, 2]) - (p[2] - dist))) < 1e-4


def test_ring_is_mjlabs_pattern() -> None:
    """The centre first, then the ring counter-clockwise from +x (Go1: 0.04 m, 4 rays)."""
    ring = ring_pattern(0.04, 4)
    want = torch.tensor([[0.0, 0, 0], [0.04, 0, 0], [0, 0.04, 0], [-0.04, 0, 0], [0, -0.04, 0]])
    assert torch.allclose(ring, want, atol=1e-7)


@pytest.mark.parametrize(
    ("reduction", "want_a"),
    [("min", 0.45 - STEP_TOP), ("max", 0.45), ("mean", 0.45 - 4 / 5 * STEP_TOP)],
)
def test_foot_clearance_over_the_floor_and_the_step_edge(reduction: str, want_a: float) -> None:
    """Feet 0.45 m over the floor read 0.45; a foot just past the step's edge has 4 of its 5 rays on the step
    (all but the ``-x`` one), reduced as asked. The base's own geoms are not hit."""
    feet = TerrainHeightSensorCfg(FEET, radius=0.04, num_samples=4, reduction=reduction)  # type: ignore[arg-type]
    env = ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base"), feet), 2, device="cpu")
    x_a = STEP_X0 + 0.01  # foot_a's centre 1 cm past the edge: only its -x ray (3 cm back) is off the step
    place(env, torch.tensor([[-1.0, 0, 0.5], [x_a - 0.1, 0, 0.5]]), torch.zeros(2))
    heights = terrain_height(env, "feet")
    assert heights.shape == (2, 2)
    assert torch.allclose(heights[0], torch.tensor([0.45, 0.45]), atol=1e-5)
    assert heights[1, 0].item() == pytest.approx(want_a, abs=1e-5)
    assert heights[1, 1].item() == pytest.approx(0.45, abs=1e-5)  # foot_b, 0.2 m behind, over the floor


def test_foot_rays_miss_beyond_max_distance() -> None:
    """Every ray of a foot missing reads its height clamped to ``[0, max_distance]``, as mjlab's."""
    feet = TerrainHeightSensorCfg(FEET, max_distance=0.3)
    env = ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base"), feet), 1, device="cpu")
    place(env, torch.tensor([[-1.0, 0, 0.5]]), torch.zeros(1))
    assert torch.allclose(terrain_height(env, "feet"), torch.full((1, 2), 0.3))


def test_foot_clearance_matches_mujoco_mj_ray_on_generated_terrain() -> None:
    """Every ring ray's distance equals MuJoCo C's ``mj_ray`` (its foot's body excluded); the clearance is the
    nearest ground under the ring, turned with the base's yaw."""
    terrain, xml = rough_and_stairs(seed=5)
    n = 3
    feet = TerrainHeightSensorCfg(FEET, radius=0.03, num_samples=6)
    env = ManagerBasedEnv(task(xml, RayCastSensorCfg("base", size=(0.4, 0.4), resolution=0.2), feet), n, device="cpu")
    place_over_cells(env, terrain.origins, seed=1, height=(0.5, 0.8))
    heights = terrain_height(env, "feet")
    sensor = env.sensors["feet"]
    ray = _mj_ray(xml)
    base = mujoco.mj_name2id(mujoco.MjModel.from_xml_string(xml), mujoco.mjtObj.mjOBJ_BODY, "base")
    for w in range(n):
        for f in range(2):
            dists = []
            for r in range(7):
                p = sensor.origins[w, f, r].double().numpy()
                dist = ray(p, base)
                assert abs(float(sensor.distances.view(n, 2, 7)[w, f, r]) - dist) < 1e-4, (w, f, r)
                dists.append(dist)
            assert float(heights[w, f]) == pytest.approx(min(dists), abs=1e-4)  # clearance of each ray = its dist
        yaw = math.atan2(float(env.qpos[w, 6]), float(env.qpos[w, 3])) * 2
        centre, ahead = sensor.origins[w, 0, 0], sensor.origins[w, 0, 1]  # the ring's +x ray turns with the yaw
        assert torch.allclose(ahead[:2] - centre[:2], 0.03 * torch.tensor([math.cos(yaw), math.sin(yaw)]), atol=1e-5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sites": ()}, "`sites` must be a non-empty tuple of site names, got ()"),
        ({"radius": -0.1}, "`radius` must be a finite number >= 0, got -0.1"),
        ({"radius": float("inf")}, "`radius` must be a finite number >= 0, got inf"),
        ({"num_samples": 2.5}, "`num_samples` must be an int in [0, 1024], got 2.5"),
        ({"num_samples": 10**7}, "`num_samples` must be an int in [0, 1024], got 10000000"),  # not allocated
        ({"max_distance": 0.0}, "`max_distance` must be a finite number > 0, got 0.0"),
        ({"geom_group": 6}, "`geom_group` must be None or an int in [0, 5], got 6"),
        ({"reduction": "median"}, "`reduction` must be 'min', 'max' or 'mean', got 'median'"),
    ],
)
def test_bad_terrain_height_settings_are_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        TerrainHeightSensorCfg(**{"sites": FEET, **change})  # type: ignore[arg-type]


RAMP_ANGLE = 0.2
RAMP = FLOATER.replace(STEP, "").replace(
    '<geom name="floor" type="plane" size="0 0 0.05" group="2"/>',
    f'<geom name="ramp" type="box" size="6 6 0.1" pos="0 0 -0.1" euler="0 {math.degrees(RAMP_ANGLE)} 0" group="2"/>',
)


def test_terrain_normal_is_the_ramp_s_and_upright_reads_tilt_against_it() -> None:
    """Over a ramp tilted 0.2 rad about y the fitted normal is the ramp's; a base lying on the ramp is upright
    against the terrain (1.0) and tilted against gravity; over flat ground both readings agree."""
    env = ManagerBasedEnv(task(RAMP, RayCastSensorCfg("base")), 2, device="cpu")
    qpos, qvel = env.state()
    qpos[:, 0:3] = torch.tensor([[0.0, 0, 1.0], [0.5, 0.5, 1.0]])
    qpos[:, 3:7] = torch.tensor([math.cos(RAMP_ANGLE / 2), 0.0, math.sin(RAMP_ANGLE / 2), 0.0])  # on the ramp
    env.set_state(qpos, qvel)
    env.invalidate()
    want = torch.tensor([math.sin(RAMP_ANGLE), 0.0, math.cos(RAMP_ANGLE)])
    assert torch.allclose(terrain_normal(env, "scan"), want.expand(2, 3), atol=1e-4)
    assert torch.allclose(upright(env, 0.3, terrain_sensor_name="scan"), torch.ones(2), atol=1e-6)
    tilted = math.exp(-(math.sin(RAMP_ANGLE) ** 2) / 0.3**2)
    assert torch.allclose(upright(env, 0.3), torch.full((2,), tilted), atol=1e-5)
    flat = ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base")), 1, device="cpu")
    place(flat, torch.tensor([[-1.5, 0, 0.5]]), torch.zeros(1))
    assert torch.equal(terrain_normal(flat, "scan"), torch.tensor([[0.0, 0.0, 1.0]]))


def test_plane_fit_equals_an_exact_eigen_decomposition() -> None:
    """The closed-form fit equals float64 ``torch.linalg.eigh`` on noisy tilted planes (up to 40 degrees, some
    rays missing), and falls back to up for too few points, a line, or a non-finite point."""
    gen = torch.Generator().manual_seed(0)
    n, k = 500, 32
    tilt = 0.7 * torch.rand(n, generator=gen)
    azimuth = 6.28 * torch.rand(n, generator=gen)
    normal = torch.stack((tilt.sin() * azimuth.cos(), tilt.sin() * azimuth.sin(), tilt.cos()), dim=-1)
    xy = 1.6 * torch.rand(n, k, 2, generator=gen) - 0.8
    z = -(normal[:, None, 0] * xy[..., 0] + normal[:, None, 1] * xy[..., 1]) / normal[:, None, 2]
    points = torch.cat((xy, z.unsqueeze(-1)), dim=-1) + 0.01 * torch.randn(n, k, 3, generator=gen)
    valid = torch.rand(n, k, generator=gen) > 0.1
    got = fit_plane_normal(points, valid).double()
    mask = valid.unsqueeze(-1).double()
    centred = (points.double() - (points.double() * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True)) * mask
    exact = torch.linalg.eigh(torch.einsum("bni,bnj->bij", centred, centred)).eigenvectors[:, :, 0]
    exact = torch.where(exact[:, 2:3] < 0, -exact, exact)
    assert torch.acos((got * exact).sum(-1).clamp(-1, 1)).max() < 1e-3  # radians
    assert torch.acos((got * normal.double()).sum(-1).clamp(-1, 1)).max() < 0.05  # near the true plane
    up = torch.tensor([[0.0, 0.0, 1.0]])
    few = torch.zeros(1, k, dtype=torch.bool)
    few[0, :2] = True
    line = torch.zeros(1, k, 3)
    line[0, :, 0] = torch.linspace(0, 1, k)
    broken = points[:1].clone()
    broken[0, 0, 0] = float("nan")
    every = torch.ones(1, k, dtype=torch.bool)
    for pts, ok in ((points[:1], few), (line, every), (broken, every)):
        assert torch.equal(fit_plane_normal(pts, ok), up)


def test_feet_and_normal_make_no_host_read() -> None:
    feet = TerrainHeightSensorCfg(FEET)
    env = ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base"), feet), 2, device="cpu")
    terrain_height(env, "feet")
    terrain_normal(env, "scan")

    def compute() -> None:
        env.invalidate()
        terrain_height(env, "feet")
        upright(env, 0.3, terrain_sensor_name="scan")

    assert_no_host_reads(compute)


def test_sensors_refuse_what_would_read_nothing() -> None:
    """A geom group with no geom in it (every ray would miss and read plausible values), an unknown site
    (the model's sites listed), a plane fit on fewer than 3 points, the wrong kind of sensor."""
    with pytest.raises(ValueError, match=re.escape("no geom of the model is in `geom_group` 4, so every ray")):
        ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base", geom_group=4)), 1, device="cpu")
    with pytest.raises(
        ValueError, match=re.escape("TerrainHeightSensorCfg: no geom of the model is in `geom_group` 3")
    ):
        ManagerBasedEnv(
            task(FLOATER, RayCastSensorCfg("base"), TerrainHeightSensorCfg(FEET, geom_group=3)), 1, device="cpu"
        )
    with pytest.raises(ValueError, match=re.escape("no site 'toe'; the model's sites: ['foot_a', 'foot_b']")):
        ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base"), TerrainHeightSensorCfg(("toe",))), 1, device="cpu")
    env = ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base"), TerrainHeightSensorCfg(FEET)), 1, device="cpu")
    with pytest.raises(ValueError, match=re.escape("`max_points` must be an int >= 3 (a plane needs 3 points), got 2")):
        terrain_normal(env, "scan", max_points=2)
    with pytest.raises(TypeError, match="terrain_normal: sensor 'feet' is a TerrainHeightSensor, not a RayCastSensor"):
        terrain_normal(env, "feet")
    with pytest.raises(TypeError, match="terrain_height: sensor 'scan' is a RayCastSensor, not a TerrainHeightSensor"):
        terrain_height(env, "scan")


def test_bvh_cast_equals_the_every_geom_cast_on_generated_terrain() -> None:
    """The scan's BVH walk gives the distances and geoms of MuJoCo Warp's every-geom cast, ray for ray."""
    import mujoco_warp as mjw

    terrain, xml = rough_and_stairs(seed=7)
    env = ManagerBasedEnv(task(xml, RayCastSensorCfg("base", size=(1.0, 0.6), resolution=0.1)), 3, device="cpu")
    place_over_cells(env, terrain.origins, seed=2, height=(0.5, 1.0))
    height_scan(env, "scan")
    sensor = env.sensors["scan"]
    bvh = (sensor.distances.clone(), sensor.geom_ids.clone())
    assert (bvh[0] > 0).all()
    args = (sensor._pnt, sensor._vec, sensor._geomgroup, True, sensor._bodyexclude, sensor._dist, sensor._geomid)
    mjw.rays(env.m, env.d, *args, sensor._normal)  # no render context: every geom tested
    torch.testing.assert_close(sensor.distances, bvh[0], atol=1e-5, rtol=0)
    assert torch.equal(sensor.geom_ids, bvh[1])


def test_bvh_follows_geoms_that_move() -> None:
    """A scanned geom on a moving body: the BVH is refit before each cast, so the scan sees where it went
    (with the BVH of its first pose, rays under its new pose would pass it by)."""
    mover = '<body name="plate" pos="5 5 0.2"><freejoint/><geom type="box" size="0.5 0.5 0.02" group="2"/></body>'
    xml = FLOATER.replace(STEP, "").replace("</worldbody>", f"{mover}</worldbody>")
    env = ManagerBasedEnv(task(xml, RayCastSensorCfg("base", size=(0.2, 0.2), resolution=0.1)), 2, device="cpu")
    assert env.sensors["scan"]._context.moving
    place(env, torch.tensor([[-1.0, 0.0, 0.5]] * 2), torch.zeros(2))
    assert torch.allclose(height_scan(env, "scan"), torch.tensor(0.5), atol=1e-4)  # the floor
    qpos, qvel = env.state()
    qpos[:, 8:11] = torch.tensor([-1.0, 0.0, 0.2])  # the plate (after the base's 7 and the arm's 1) under the base
    env.set_state(qpos, qvel)
    env.invalidate()
    assert torch.allclose(height_scan(env, "scan"), torch.tensor(0.5 - 0.22), atol=1e-4)  # on the plate


def test_any_group_includes_groups_above_five() -> None:
    """``geom_group=None`` casts against a geom of MuJoCo group 7 too (MJCF allows any group), as ``mj_ray``."""
    box = '<geom name="g7" type="box" pos="-1 0 0.1" size="0.5 0.5 0.1" group="7"/>'
    xml = FLOATER.replace(STEP, box)
    env = ManagerBasedEnv(task(xml, RayCastSensorCfg("base", size=(0.2, 0.2), geom_group=None)), 1, device="cpu")
    place(env, torch.tensor([[-1.0, 0.0, 0.5]]), torch.zeros(1))
    assert torch.allclose(height_scan(env, "scan"), torch.tensor(0.5 - 0.2), atol=1e-4)  # on the box, not the floor


def test_unknown_scan_body_lists_the_bodies() -> None:
    """A body the model lacks is refused naming the sensor and listing the model's bodies."""
    with pytest.raises(ValueError, match=r"RayCastSensorCfg: .*'trunk'.*bodies: \['world', 'base', 'arm'\]"):
        ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("trunk")), 1, device="cpu")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"size": (float("inf"), 1.0)}, "`size` must be an (x, y) pair of finite numbers >= 0, got (inf, 1.0)"),
        ({"size": (True, 1.0)}, "`size` must be an (x, y) pair of finite numbers >= 0, got (True, 1.0)"),
        ({"resolution": 1e-5}, "has 16,000,260,001 rays per env; at most 65,536 are accepted (raise `resolution`)"),
        ({"max_distance": float("nan")}, "`max_distance` must be a finite number > 0, got nan"),
    ],
    ids=["infinite", "bool", "too-many-rays", "nan-distance"],
)
def test_bad_ray_grids_are_refused_before_allocating(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        RayCastSensorCfg("base", **change)  # type: ignore[arg-type]


@pytest.mark.parametrize("cast", [pytest.param("before_obs", marks=pytest.mark.slow), "each_phase"])
def test_before_obs_gives_rewards_the_last_observation_s_scan_and_casts_once(
    cast: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base rises 5 mm per step. ``"before_obs"`` (mjlab's): a reward reads the scan of the observation made
    before the step, and a step casts once; ``"each_phase"``: the reward casts at the stepped pose, which the
    step's observation then shows, two casts per step."""
    seen: list[torch.Tensor] = []

    def probe(env: ManagerBasedEnv) -> torch.Tensor:
        seen.append(height_scan(env, "scan").clone())
        return torch.zeros(env.num_envs, device=env.device)

    launches = []
    launch = RayBuffers._launch
    monkeypatch.setattr(RayBuffers, "_launch", lambda self: (launches.append(1), launch(self))[1])
    cfg = replace(task(FLOATER, RayCastSensorCfg("base", cast=cast)), rewards={"probe": RewardTerm(probe, weight=1.0)})
    env = ManagerBasedEnv(cfg, 2, device="cpu", max_episode_steps=50)
    obs = [env.reset(seed=0)[0].clone()]
    qpos, qvel = env.state()
    qvel[:, 2] = 1.0
    env.set_state(qpos, qvel)
    launches.clear()
    for _ in range(3):
        obs.append(env.step(torch.zeros(2, 1))[0].clone())
    assert len(launches) == 3 * (1 if cast == "before_obs" else 2)
    for k in range(3):
        assert torch.equal(seen[k], obs[k] if cast == "before_obs" else obs[k + 1]), k
    # the scan follows the rising base (a step's cast reads the pose at its last substep's start: one step late
    # at decimation 1, so the first step still shows the reset pose)
    assert not torch.equal(obs[1], obs[2]) and not torch.equal(obs[2], obs[3])
    env.close()


def test_bad_cast_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("`cast` must be 'each_phase' or 'before_obs', got 'always'")):
        RayCastSensorCfg("base", cast="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("`cast` must be 'each_phase' or 'before_obs', got None")):
        TerrainHeightSensorCfg(FEET, cast=None)  # type: ignore[arg-type]


SOLES = ("left_sole", "right_sole")


def _scan_reward(env: ManagerBasedEnv) -> torch.Tensor:
    return height_scan(env, "scan").mean(dim=1)


def _low_scan(env: ManagerBasedEnv) -> torch.Tensor:
    """Ends the episodes of rows whose scan reads low: resets that do not come all at once."""
    return height_scan(env, "scan").mean(dim=1) < 0.25


def _staggered(env: ManagerBasedEnv) -> torch.Tensor:
    """Ends row ``r``'s episodes after ``2 + r % 3`` steps: resets of some rows at a time, whatever the physics."""
    return env.elapsed >= 2 + env.env_ids % 3


def _biped_with_rays(forward_before_obs: bool, observe_scan: bool = True, observe_feet: bool = True) -> TaskCfg:
    """The biped of ``test_layer`` with a scan and foot rays sensed as mjlab's, read by rewards and a termination."""
    from tests.tasks.test_layer import user_task

    cfg = user_task()
    cfg = cfg.with_term("sensors", "scan", RayCastSensorCfg("base", (0.4, 0.2), geom_group=0, cast="before_obs"))
    cfg = cfg.with_term("sensors", "fh", TerrainHeightSensorCfg(SOLES, geom_group=0, cast="before_obs"))
    if observe_scan:
        cfg = cfg.with_obs("policy", "scan", ObsTerm(height_scan, {"sensor_name": "scan"}))
    if observe_feet:
        cfg = cfg.with_obs("policy", "fh", ObsTerm(terrain_height, {"sensor_name": "fh"}))
    cfg = cfg.with_term("rewards", "scan", RewardTerm(_scan_reward, weight=1.0))
    cfg = cfg.with_term("terminations", "low", TerminationTerm(_low_scan))
    params = {**cfg.rewards["foot_clearance"].params, "height_sensor_name": "fh"}
    return replace(cfg.replace_term("rewards", "foot_clearance", params=params), forward_before_obs=forward_before_obs)


@pytest.mark.parametrize("forward_before_obs", [False, True])
@pytest.mark.slow
def test_before_obs_is_masked_equal_to_selected_with_staggered_resets(forward_before_obs: bool) -> None:
    """Rays kept per observed row: bit for bit the selected path's through resets of some rows at a time, also
    with the forward pass before the observations."""
    from gym_graphreset import FixedShapeAutoresetVectorEnv
    from gym_graphreset.testing import assert_masked_matches_selected
    from tests.tasks.test_layer import N, _actions

    cfg = _biped_with_rays(forward_before_obs).with_term("terminations", "staggered", TerminationTerm(_staggered))

    def factory(flags: dict[str, object]) -> FixedShapeAutoresetVectorEnv:
        inner = ManagerBasedEnv(cfg, N, device="cpu", max_episode_steps=7)
        return FixedShapeAutoresetVectorEnv(inner, **flags)  # type: ignore[arg-type]

    env = factory({"config": "selected"})
    env.reset(seed=3)
    dones = [int((te | tr).sum()) for te, tr in (env.step(a)[2:4] for a in _actions(30))]
    assert any(0 < d < N for d in dones), f"no partial reset to compare: {dones}"
    env.close()
    assert_masked_matches_selected(factory, _actions(30), seed=3)


def test_a_metric_on_kept_rays_does_not_freeze_the_observation() -> None:
    """A metric (outside the observation) reading the foot rays through ``mdp.observations.feet`` (cached per
    phase) must not leave its value for an observation that reads the same: the observed clearances are the
    same with and without it (they froze at the kept rays when the observation reused the metric's value)."""
    from gym_graphreset.mdp import observations
    from tests.tasks.test_layer import _actions

    def feet_mean(env: ManagerBasedEnv) -> torch.Tensor:
        return observations.feet(env, SOLES, "fh")[0].mean(dim=1)

    def feet_heights(env: ManagerBasedEnv) -> torch.Tensor:
        return observations.feet(env, SOLES, "fh")[0]

    runs = []
    for with_metric in (False, True):
        cfg = _biped_with_rays(False, observe_feet=False).with_obs("policy", "feet", ObsTerm(feet_heights))
        if with_metric:
            cfg = cfg.with_term("metrics", "feet", MetricTerm(feet_mean))
        env = ManagerBasedEnv(cfg, 3, device="cpu", max_episode_steps=100)
        env.reset(seed=3)
        runs.append([env.step(a[:3])[0]["policy"].clone() for a in _actions(5)])
        env.close()
    assert not torch.equal(runs[0][0], runs[0][-1])
    for plain, metered in zip(*runs, strict=True):
        assert torch.equal(plain, metered)


def test_a_before_obs_sensor_no_observation_reads_is_refused() -> None:
    """Its rays would never be cast, and the reward reading them would read zeros: refused when the env is built
    (at its first observation)."""
    with pytest.raises(ValueError, match=re.escape("sensors ['scan']: cast='before_obs' casts only for observations")):
        ManagerBasedEnv(_biped_with_rays(False, observe_scan=False), 2, device="cpu", max_episode_steps=10)


@pytest.mark.parametrize("feet", [False, True], ids=["scan", "feet"])
def test_ray_sensors_refuse_a_task_whose_resets_leave_poses_stale(feet: bool) -> None:
    """With ``refresh="none"`` a reset row's first cast would start at the previous episode's pose: refused."""
    cfg = replace(task(FLOATER, RayCastSensorCfg("base")), refresh="none")
    if feet:  # the foot rays alone
        policy = ObsGroup({"h": ObsTerm(terrain_height, {"sensor_name": "feet"})})
        cfg = replace(cfg, sensors={"feet": TerrainHeightSensorCfg(FEET)}, observations={"policy": policy})
    name = "TerrainHeightSensorCfg" if feet else "RayCastSensorCfg"
    with pytest.raises(ValueError, match=rf"{name}: rays are cast from body and site poses.*refresh='none'"):
        ManagerBasedEnv(cfg, 1, device="cpu")
