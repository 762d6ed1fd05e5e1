"""The tensor math the terms share: rotations, velocities, command activity and plane fits, as plain batched torch.

No host read, no branching on data: every function takes full-width ``(num_envs, ...)`` tensors and
returns one value per row, so a term is
the same code eagerly, masked, and inside a captured CUDA graph. Quaternions are MuJoCo's ``(w, x, y, z)``.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "active_command",
    "fit_plane_normal",
    "heading",
    "point_velocity",
    "projected_gravity",
    "quat_conjugate",
    "quat_error_magnitude",
    "quat_from_euler_xyz",
    "quat_mul",
    "quat_rotate",
    "quat_rotate_inverse",
    "rotation_columns",
    "wrap_to_pi",
    "yaw_of",
    "yaw_quat",
]


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate ``v`` ``(..., 3)`` by the unit quaternions ``q`` ``(..., 4)`` (body to world)."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v + w * t + torch.linalg.cross(u, t, dim=-1)


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate ``v`` ``(..., 3)`` by the inverse of ``q`` ``(..., 4)`` (world to body)."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v - w * t + torch.linalg.cross(u, t, dim=-1)


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a b`` of quaternions ``(..., 4)``: rotate by ``b``, then by ``a``."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    """The inverse rotation of unit quaternions ``(..., 4)``."""
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def quat_error_magnitude(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The angle [rad, 0 to pi] of the rotation between unit quaternions ``a`` and ``b`` ``(..., 4)``."""
    d = quat_mul(a, quat_conjugate(b))
    return 2.0 * torch.atan2(d[..., 1:].norm(dim=-1), d[..., 0].abs())


def quat_from_euler_xyz(roll: torch.Tensor, pitch: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions of intrinsic x-y-z Euler angles (yaw about z, then pitch about y, then roll about x)."""
    cr, sr = torch.cos(0.5 * roll), torch.sin(0.5 * roll)
    cp, sp = torch.cos(0.5 * pitch), torch.sin(0.5 * pitch)
    cy, sy = torch.cos(0.5 * yaw), torch.sin(0.5 * yaw)
    return torch.stack(
        (
            cy * cr * cp + sy * sr * sp,
            cy * sr * cp - sy * cr * sp,
            cy * cr * sp + sy * sr * cp,
            sy * cr * cp - cy * sr * sp,
        ),
        dim=-1,
    )


def rotation_columns(q: torch.Tensor) -> torch.Tensor:
    """The first two columns of the rotation matrices of ``q`` ``(..., 4)``, as ``(..., 6)`` (row-major pairs).

    A continuous 6-number orientation: mjlab's ``matrix_from_quat(q)[..., :2]`` flattened.
    """
    w, x, y, z = q.unbind(-1)
    col0 = torch.stack((1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)), dim=-1)
    col1 = torch.stack((2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)), dim=-1)
    return torch.stack((col0, col1), dim=-1).flatten(-2)


def yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions of a rotation by ``yaw`` ``(...)`` about the world z axis."""
    half = 0.5 * yaw
    zero = torch.zeros_like(yaw)
    return torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=-1)


def yaw_of(q: torch.Tensor) -> torch.Tensor:
    """The yaw angle (about world z) of quaternions ``(..., 4)``: ``yaw_quat(yaw_of(q))`` is q's heading part."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def projected_gravity(q: torch.Tensor) -> torch.Tensor:
    """The unit gravity direction in the body frame, ``(n, 3)``."""
    down = torch.zeros(q.shape[0], 3, dtype=q.dtype, device=q.device)
    down[:, 2] = -1.0
    return quat_rotate_inverse(q, down)


def heading(q: torch.Tensor) -> torch.Tensor:
    """Yaw of the body's forward (x) axis in the world, ``(n,)``."""
    fwd = torch.zeros(q.shape[0], 3, dtype=q.dtype, device=q.device)
    fwd[:, 0] = 1.0
    f = quat_rotate(q, fwd)
    return torch.atan2(f[:, 1], f[:, 0])


def wrap_to_pi(x: torch.Tensor) -> torch.Tensor:
    """Angles wrapped into ``[-pi, pi)``."""
    return torch.remainder(x + math.pi, 2.0 * math.pi) - math.pi


def point_velocity(cvel: torch.Tensor, subtree_com: torch.Tensor, point: torch.Tensor) -> torch.Tensor:
    """World linear velocity of points fixed to bodies from MuJoCo's ``cvel`` rows ``(n, k, 6)``.

    ``cvel`` is ``[angular, linear]`` with the linear part taken at the root's subtree centre of mass
    ``subtree_com`` ``(n, 1, 3)``; ``point`` is ``(n, k, 3)`` in the world.
    """
    ang, lin = cvel[..., :3], cvel[..., 3:]
    return lin + torch.linalg.cross(ang, point - subtree_com, dim=-1)


def active_command(command: torch.Tensor, threshold: float) -> torch.Tensor:
    """1.0 where ``|v_xy| + |w_z|`` of the command exceeds ``threshold``, else 0.0."""
    total = torch.linalg.vector_norm(command[:, :2], dim=1) + command[:, 2].abs()
    return (total > threshold).float()


def fit_plane_normal(points: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The upward unit normal of the plane through ``points`` ``(n, k, 3)`` where ``valid`` ``(n, k)`` holds.

    mjlab's ``fit_terrain_normal``: the covariance's eigenvector of the smallest eigenvalue (total least
    squares), computed in closed form for 3 x 3 (no ``torch.linalg.eigh``, whose CUDA path checks its result
    on the host). Rows with fewer than 3 valid points, points on a line or near one point, or non-finite
    points get ``(0, 0, 1)``, as mjlab's.
    """
    mask = valid.unsqueeze(-1).to(points.dtype)
    count = valid.sum(dim=1)
    centroid = (points * mask).sum(dim=1) / count.clamp(min=1).unsqueeze(-1).to(points.dtype)
    centered = torch.where(valid.unsqueeze(-1), points - centroid.unsqueeze(1), 0.0)
    cov = torch.einsum("bni,bnj->bij", centered, centered)
    finite = torch.isfinite(cov).all(dim=(-2, -1))
    eye = torch.eye(3, dtype=cov.dtype, device=cov.device)
    cov = torch.where(finite.view(-1, 1, 1), cov, eye)
    # eigenvalues of a symmetric 3 x 3 matrix (the trigonometric method), ascending
    q = cov.diagonal(dim1=-2, dim2=-1).sum(-1) / 3.0
    off = cov[:, 0, 1].square() + cov[:, 0, 2].square() + cov[:, 1, 2].square()
    shifted = cov - q.view(-1, 1, 1) * eye
    p = torch.sqrt(((shifted.diagonal(dim1=-2, dim2=-1).square().sum(-1) + 2.0 * off) / 6.0).clamp(min=0.0))
    tiny = torch.finfo(cov.dtype).tiny
    r = (_det3(shifted / p.clamp(min=tiny).view(-1, 1, 1)) / 2.0).clamp(-1.0, 1.0)
    phi = torch.acos(r) / 3.0
    largest = q + 2.0 * p * torch.cos(phi)
    smallest = q + 2.0 * p * torch.cos(phi + 2.0 * math.pi / 3.0)
    middle = 3.0 * q - largest - smallest
    # its eigenvector: the largest cross product of two rows of (cov - smallest * I)
    rows = cov - smallest.view(-1, 1, 1) * eye
    crosses = torch.stack(
        [torch.linalg.cross(rows[:, i], rows[:, j], dim=-1) for i, j in ((0, 1), (0, 2), (1, 2))], dim=1
    )
    best = crosses.norm(dim=-1).argmax(dim=1)
    normal = torch.gather(crosses, 1, best.view(-1, 1, 1).expand(-1, 1, 3)).squeeze(1)
    normal = normal / normal.norm(dim=-1, keepdim=True).clamp(min=1e-8)
    normal = torch.where(normal[:, 2:3] < 0, -normal, normal)
    eps = torch.finfo(cov.dtype).eps
    plane_like = smallest / middle.clamp(min=eps) < 0.1
    spread = middle > largest.clamp(min=eps) * 1e-6
    reliable = (count >= 3) & plane_like & spread & finite
    up = torch.zeros_like(normal)
    up[:, 2] = 1.0
    return torch.where(reliable.unsqueeze(-1), normal, up)


def _det3(a: torch.Tensor) -> torch.Tensor:
    """Determinants of ``(n, 3, 3)`` matrices, written out (elementwise kernels only)."""
    return (
        a[:, 0, 0] * (a[:, 1, 1] * a[:, 2, 2] - a[:, 1, 2] * a[:, 2, 1])
        - a[:, 0, 1] * (a[:, 1, 0] * a[:, 2, 2] - a[:, 1, 2] * a[:, 2, 0])
        + a[:, 0, 2] * (a[:, 1, 0] * a[:, 2, 1] - a[:, 1, 1] * a[:, 2, 0])
    )
