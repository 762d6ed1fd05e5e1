"""MJCF helpers: the floor every robot task gets is a colliding plane whose checker material shows motion."""

from __future__ import annotations

import numpy as np
import pytest

from gym_graphreset.envs.mjwarp.frames import RenderUnavailable, WorldRenderer
from gym_graphreset.envs.mjwarp.mjcf import FLOOR_TEXTURE, add_floor

mujoco = pytest.importorskip("mujoco")


def _scene() -> object:
    spec = mujoco.MjSpec()
    add_floor(spec)
    body = spec.worldbody.add_body(name="box", pos=[0.0, 0.0, 0.5])
    body.add_freejoint()
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.1, 0.1, 0.1])
    return spec.compile()


def test_floor_collides_and_wears_the_checker_material() -> None:
    """A plane named ``floor`` that collides with everything, its material the checker texture; a box falls
    onto it and rests (the material is visual: it does not keep the plane from colliding)."""
    m = _scene()
    floor = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    assert m.geom_type[floor] == mujoco.mjtGeom.mjGEOM_PLANE and m.geom_contype[floor] == 1
    material = m.geom_matid[floor]
    assert mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_MATERIAL, material) == FLOOR_TEXTURE
    texture = m.mat_texid[material, mujoco.mjtTextureRole.mjTEXROLE_RGB]
    assert mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TEXTURE, texture) == FLOOR_TEXTURE
    d = mujoco.MjData(m)
    for _ in range(500):
        mujoco.mj_step(m, d)
    assert abs(d.qpos[2] - 0.1) < 1e-2  # resting on the plane


def test_a_second_floor_reuses_the_texture() -> None:
    """Adding the texture once per spec: a spec that already has it (a model's own) is not refused as a duplicate."""
    spec = mujoco.MjSpec()
    add_floor(spec)
    spec.geom("floor").name = "old_floor"
    add_floor(spec)
    m = spec.compile()
    assert m.ntex == 2 and m.nmat == 1  # the checker and the sky, once each


def test_the_floor_is_not_one_flat_colour_in_a_frame() -> None:
    """Seen from above, the floor shows its squares: many distinct colours, not a uniform grey."""
    try:
        renderer = WorldRenderer(_scene(), 96, 72)
    except RenderUnavailable as exc:
        pytest.skip(f"no OpenGL context on this machine: {exc}")
    import torch

    frame = renderer.frame(torch.tensor([0.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0]))
    renderer.close()
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 20
