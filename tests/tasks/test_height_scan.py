"""The height scan observation term: mjlab's ray grid cast with MuJoCo Warp's public ``rays``, on the CPU.

A free box ``base`` (with an actuated arm above it, so the task has an action) floats over a plane and a box
step of the terrain's geom group. The scan must read the base height on flat ground, the step where its rays
land on it, agree with MuJoCo's own ``mj_ray`` on a generated terrain, and make no host read.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the height scan casts MuJoCo Warp rays")

from gym_graphreset.tasks import JointPositionAction, ManagerBasedEnv, ObsGroup, ObsTerm, TaskCfg
from gym_graphreset.tasks.mdp.height_scan import RayCastSensorCfg, grid_pattern, height_scan
from gym_graphreset.tasks.terrain import (
    FlatTerrainCfg,
    PyramidStairsTerrainCfg,
    RandomRoughTerrainCfg,
    TerrainGeneratorCfg,
    add_terrain,
    generate_terrain,
)
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
      <body name="arm" pos="0 0 0.1">
        <joint name="arm" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.02" mass="0.1"/>
      </body>
    </body>
  </worldbody>
  <actuator><position name="arm" joint="arm" kp="5"/></actuator>
</mujoco>
"""


def task(model: str, sensor: RayCastSensorCfg) -> TaskCfg:
    return TaskCfg(
        model=model,
        decimation=1,
        episode_length_s=1.0,
        actions={"arm": JointPositionAction(("arm",))},
        observations={"policy": ObsGroup({"scan": ObsTerm(height_scan, {"sensor_name": "scan"})})},
        sensors={"scan": sensor},
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
    assert obs["policy"].shape == (3, 187)  # the observation made at the reset has the scan's width


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


def test_misses_read_max_distance_and_group_filter() -> None:
    """A ray past ``max_distance`` reads ``max_distance``; a group without geoms hits nothing."""
    near = ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base", max_distance=0.4)), 1, device="cpu")
    assert torch.allclose(height_scan(near, "scan"), torch.full((1, 187), 0.4))  # base at 0.5 over the plane
    none = ManagerBasedEnv(task(FLOATER, RayCastSensorCfg("base", geom_group=4)), 1, device="cpu")
    assert torch.allclose(height_scan(none, "scan"), torch.full((1, 187), 5.0))


def test_scan_makes_no_host_read(env: ManagerBasedEnv) -> None:
    """Placing the rays, the warp cast and the heights read nothing on the host."""
    env.invalidate()
    height_scan(env, "scan")  # warm: kernels loaded

    def compute() -> None:
        env.invalidate()
        height_scan(env, "scan")

    assert_no_host_reads(compute)


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
    rng = np.random.default_rng(0)
    origins = terrain.origins.reshape(-1, 3)[rng.choice(len(terrain.origins.reshape(-1, 3)), n)]
    xyz = torch.tensor(origins, dtype=torch.float32) + torch.tensor(
        rng.uniform([-1.5, -1.5, 0.8], [1.5, 1.5, 1.2], (n, 3)), dtype=torch.float32
    )
    place(env, xyz, torch.tensor(rng.uniform(-3, 3, n), dtype=torch.float32))
    scan = height_scan(env, "scan")
    sensor = env.sensors["scan"]
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    group = np.zeros(6, np.uint8)
    group[2] = 1
    geomid = np.zeros(1, np.int32)
    for w in range(n):
        for r in range(0, sensor.num_rays, 3):
            p = sensor.origins[w, r].double().numpy()
            dist = mujoco.mj_ray(m, d, p, np.array([0.0, 0.0, -1.0]), group, 1, -1, geomid)
            assert dist > 0
            assert abs(float(sensor.distances[w, r]) - dist) < 1e-4, (w, r)
            assert abs(float(scan[w, r]) - (float(xyz[w, 2]) - (p[2] - dist))) < 1e-4
