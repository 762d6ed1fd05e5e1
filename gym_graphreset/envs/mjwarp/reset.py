"""The masked reset of :class:`~gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv` as one warp kernel.

One thread per world: skip unless the world's mask bit is set, then write the new episode's initial state
and clear the state ``mujoco_warp.reset_data`` clears for a model without mocap bodies, equality
constraints, sensors, user data, flexes, plugins or sleep. The initial state is an input, as the env
declares (``initial_state_draws``): ``"engine"``: the kernel counts the episode and draws ``init_qpos`` /
``init_qvel`` plus noise from the counter-based hash (:mod:`gym_graphreset.core.rng`, same words, same
float32 maths); ``"task"``: torch counted the episode and the task's ``_sample_initial_state`` proposed every
row's state, which the kernel copies on the reset rows. Replacing ``reset_data`` (six or more
launches, one over every contact slot of the population) and the torch hash (a few dozen elementwise
kernels) by one launch matters because a captured step pays a few microseconds per graph node.

Imported lazily by the env: warp is an optional dependency.
"""

from __future__ import annotations

from typing import Any, Literal

import mujoco_warp as mjw
import torch
import warp as wp

__all__ = ["KernelReset", "ReferenceReset", "ResetKind", "launch_masked_reset", "needs_reset_data"]

ResetKind = Literal["kernel", "reference"]
"""The two physics resets of an env: the fused kernel, or ``reset_data`` + torch writes (the reference)."""

_M1 = wp.constant(wp.uint32(0x7FEB352D))
_M2 = wp.constant(wp.uint32(0x846CA68B))
_GOLDEN = wp.constant(wp.uint32(0x9E3779B9))
_K_SEED = wp.constant(wp.uint32(0x5BD1E995))  # rng._K_SEED
_K_ENV = wp.constant(wp.uint32(0xCC9E2D51))  # rng._K_ENV
_LOW32 = wp.constant(wp.int64(0xFFFFFFFF))
_INV24 = wp.constant(1.0 / 16777216.0)
_TWO_PI = wp.constant(6.283185307179586)


@wp.func
def _mix32(x: wp.uint32) -> wp.uint32:
    # Chris Wellons' lowbias32, as rng._mix32 (uint32 products wrap mod 2**32)
    x = x ^ (x >> wp.uint32(16))
    x = x * _M1
    x = x ^ (x >> wp.uint32(15))
    x = x * _M2
    return x ^ (x >> wp.uint32(16))


@wp.func
def _low32(v: wp.int64) -> wp.uint32:
    return wp.uint32(v & _LOW32)


@wp.func
def _combine(h: wp.uint32, v: wp.uint32, key: wp.uint32) -> wp.uint32:
    # rng._combine: the round's key (from the high words of the seed and env index) after the add
    return _mix32(((h ^ v) + _GOLDEN) ^ key)


@wp.func
def _uniform24(bits: wp.uint32) -> float:
    return float(bits >> wp.uint32(8)) * _INV24


@wp.func
def _draw(h: wp.uint32, key: wp.uint32, word: int, pair: int, normal: int, scale: float) -> float:
    # rng.bits_to_uniform(bits, -scale, scale) or rng.bits_to_normal(bits, scale) of one hash word
    bits = _combine(h, wp.uint32(word), key)
    if normal == 0:
        return (2.0 * scale) * _uniform24(bits) + (-scale)
    u1 = (float(bits >> wp.uint32(8)) + 0.5) * _INV24  # in (0, 1): no log(0)
    u2 = _uniform24(_combine(h, wp.uint32(pair), key))
    return scale * wp.sqrt(-2.0 * wp.log(u1)) * wp.cos(_TWO_PI * u2)


@wp.kernel(enable_backward=False)
def _masked_reset_kernel(
    mask: wp.array(dtype=bool),
    seed: wp.array(dtype=wp.int64),
    env_ids: wp.array(dtype=wp.int64),
    episode: wp.array(dtype=wp.int64),
    elapsed: wp.array(dtype=wp.int64),
    init_qpos: wp.array2d(dtype=float),
    init_qvel: wp.array2d(dtype=float),
    per_row: int,
    draw: int,
    scale: float,
    qpos_normal: int,
    qvel_normal: int,
    qpos: wp.array2d(dtype=float),
    qvel: wp.array2d(dtype=float),
    ctrl: wp.array2d(dtype=float),
    act: wp.array2d(dtype=float),
    act_dot: wp.array2d(dtype=float),
    qacc: wp.array2d(dtype=float),
    qacc_warmstart: wp.array2d(dtype=float),
    qfrc_applied: wp.array2d(dtype=float),
    qfrc_actuator: wp.array2d(dtype=float),
    qfrc_constraint: wp.array2d(dtype=float),
    xfrc_applied: wp.array2d(dtype=wp.spatial_vector),
    cfrc_ext: wp.array2d(dtype=wp.spatial_vector),
    time: wp.array(dtype=float),
    overflow: wp.array(dtype=int),
):
    # init_qpos/init_qvel: row w * per_row (per_row 0: one shared row); draw 1: count the episode and add the
    # hash's noise, draw 0: copy the rows as they are (the task's proposals; torch counted the episode)
    w = wp.tid()
    if not mask[w]:
        return
    r = w * per_row
    elapsed[w] = wp.int64(0)
    nq = qpos.shape[1]
    nv = qvel.shape[1]
    if draw == 0:
        for i in range(nq):
            qpos[w, i] = init_qpos[r, i]
        for i in range(nv):
            qvel[w, i] = init_qvel[r, i]
    else:
        ep = episode[w] + wp.int64(1)
        episode[w] = ep
        s = seed[0]
        seed_key = _low32(s >> wp.int64(32)) * _K_SEED  # as rng.hash_keys (uint32 products wrap mod 2**32)
        row_key = seed_key ^ (_low32(env_ids[w] >> wp.int64(32)) * _K_ENV)
        h = _mix32(_low32(s) ^ _mix32(_low32(s >> wp.int64(32))))  # stream 0
        h = _combine(h, _low32(env_ids[w]), seed_key)
        h = _combine(h, _low32(ep), row_key)
        qvel_base = nq * (1 + qpos_normal)  # words [0, qvel_base) draw qpos, the rest qvel
        for i in range(nq):
            qpos[w, i] = init_qpos[r, i] + _draw(h, row_key, i, nq + i, qpos_normal, scale)
        for i in range(nv):
            qvel[w, i] = init_qvel[r, i] + _draw(h, row_key, qvel_base + i, qvel_base + nv + i, qvel_normal, scale)
    for i in range(nv):
        qacc[w, i] = 0.0
        qacc_warmstart[w, i] = 0.0
        qfrc_applied[w, i] = 0.0
        qfrc_actuator[w, i] = 0.0
        qfrc_constraint[w, i] = 0.0
    for i in range(ctrl.shape[1]):
        ctrl[w, i] = 0.0
    for i in range(act.shape[1]):
        act[w, i] = 0.0
        act_dot[w, i] = 0.0
    zero6 = wp.spatial_vector(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for b in range(cfrc_ext.shape[1]):
        xfrc_applied[w, b] = zero6
        cfrc_ext[w, b] = zero6
    time[w] = 0.0
    overflow[w] = 0


def needs_reset_data(mjm: Any) -> bool:
    """Whether the model has state the kernel does not reset (then ``reset_data`` runs first)."""
    import mujoco

    sleep = bool(mjm.opt.enableflags & getattr(mujoco.mjtEnableBit, "mjENBL_SLEEP", 0))
    return bool(mjm.nmocap or mjm.neq or mjm.nsensordata or mjm.nuserdata or mjm.nflex or mjm.nplugin or sleep)


def launch_masked_reset(env: Any, arrays: dict[str, Any], task_draws: bool = False) -> None:
    """Launch the kernel on ``env``'s worlds (``arrays``: warp views of the torch key/state tensors).

    ``task_draws``: ``arrays["init_qpos"]`` / ``["init_qvel"]`` hold one proposed row per world, copied as they
    are; else one shared row, plus the kernel's noise draws.
    """
    d = env.d
    wp.launch(
        _masked_reset_kernel,
        dim=env.num_envs,
        inputs=[
            arrays["mask"],
            arrays["seed"],
            arrays["env_ids"],
            arrays["episode"],
            arrays["elapsed"],
            arrays["init_qpos"],
            arrays["init_qvel"],
            int(task_draws),
            int(not task_draws),
            float(env.reset_noise_scale),
            int(env.qpos_noise == "normal"),
            int(env.qvel_noise == "normal"),
            d.qpos,
            d.qvel,
            d.ctrl,
            d.act,
            d.act_dot,
            d.qacc,
            d.qacc_warmstart,
            d.qfrc_applied,
            d.qfrc_actuator,
            d.qfrc_constraint,
            d.xfrc_applied,
            d.cfrc_ext,
            d.time,
            d.overflow,
        ],
        device=env.wp_device,
    )


def _propose(env: Any, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Count the new episode on the rows of ``mask`` and draw every row's proposal (``_sample_initial_state``).

    Both paths propose before the physics reset, so a task's draws see the same state on either.
    """
    env.keys.advance_(mask)
    return env._sample_initial_state()


class KernelReset:
    """The fused reset: ``reset_data`` only for models that need it, then :func:`launch_masked_reset`.

    With the engine's draws (``initial_state_draws="engine"``) the kernel counts the episode and draws the
    state, so torch does nothing. With the task's (``"task"``) torch counts the episode and runs
    ``_sample_initial_state``, whose proposals are copied into two buffers allocated once (a warp graph holds
    them), which the kernel writes on the reset rows.
    """

    kind: ResetKind = "kernel"

    def __init__(self, env: Any) -> None:
        f = wp.from_torch
        self.env = env
        self.needs_reset_data = needs_reset_data(env.mjm)
        self.task_draws = env.initial_state_draws == "task"
        if self.task_draws:
            self.proposal = (torch.zeros_like(env.qpos), torch.zeros_like(env.qvel))
            init_qpos, init_qvel = self.proposal
        else:
            init_qpos, init_qvel = env.init_qpos.view(1, -1), env.init_qvel.view(1, -1)
        self.arrays = {
            "mask": env.reset_mask_wp,
            "seed": f(env.seed.view(1)),
            "env_ids": f(env.env_ids),
            "episode": f(env.episode),
            "elapsed": f(env.elapsed),
            "init_qpos": f(init_qpos),
            "init_qvel": f(init_qvel),
        }

    def reset(self, mask: torch.Tensor) -> None:
        """Reset the physics of the rows of ``mask`` (the env's ``reset_mask_wp`` holds it already)."""
        if self.task_draws:
            qpos, qvel = _propose(self.env, mask)
            self.proposal[0].copy_(qpos)
            self.proposal[1].copy_(qvel)
        self.env.runtime.run("reset", self._launch)

    def _launch(self) -> None:
        """The warp launches (captured as one warp graph when eager on CUDA)."""
        if self.needs_reset_data:
            mjw.reset_data(self.env.m, self.env.d, reset=self.arrays["mask"])
        launch_masked_reset(self.env, self.arrays, self.task_draws)


class ReferenceReset:
    """The reference reset: the proposals (``_sample_initial_state``), ``reset_data``, masked torch writes."""

    kind: ResetKind = "reference"
    needs_reset_data = True

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self, mask: torch.Tensor) -> None:
        """Count the episode, draw, ``mujoco_warp.reset_data`` on the masked worlds, write the masked rows."""
        env = self.env
        qpos, qvel = _propose(env, mask)
        env.runtime.run("reset", self._reset_data)
        m2 = mask.unsqueeze(1)
        env.qpos.copy_(torch.where(m2, qpos, env.qpos))
        env.qvel.copy_(torch.where(m2, qvel, env.qvel))
        env.cfrc_ext.copy_(torch.where(mask.view(-1, 1, 1), 0.0, env.cfrc_ext))
        env.qfrc_actuator.copy_(torch.where(m2, 0.0, env.qfrc_actuator))
        env.qfrc_constraint.copy_(torch.where(m2, 0.0, env.qfrc_constraint))
        env.elapsed.masked_fill_(mask, 0)

    def _reset_data(self) -> None:
        mjw.reset_data(self.env.m, self.env.d, reset=self.env.reset_mask_wp)
