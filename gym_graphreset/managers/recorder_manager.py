"""The recorder manager: named per-frame tensors in a preallocated device ring, finished episodes exported.

Every recorder term of a :class:`~gym_graphreset.managers.task_cfg.TaskCfg` (``recorders``) writes one frame per
row into a ``(num_envs, frames, ...)`` ring: frame 0 of an episode after its reset (on the reset rows only,
through the mask), frame ``k`` after its ``k``-th step (every row). A reset through the mask marks the
row's running episode finished (if it took at least one step). All of that is masked writes at per-row
cursors: no host read, capturable in the step graph.

:meth:`RecorderManager.export` (host side, after a rollout, never in a step) writes the finished episodes
still whole in the ring to an ``.npz``: one array per term (the episodes' frames concatenated), with
``episode_lengths`` (frames per episode), ``episode_env_ids`` and ``fps``.
:meth:`RecorderManager.export_motion` writes one episode in mjlab's motion format (see
:func:`~gym_graphreset.mdp.recorders.motion_recorders`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gym_graphreset.managers.binding import bind

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["MOTION_FIELDS", "RecordedEpisode", "RecorderManager"]

MOTION_FIELDS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
"""The arrays of an mjlab motion ``.npz`` besides ``fps`` (frames first)."""


@dataclass(frozen=True)
class RecordedEpisode:
    """One finished episode read back from the ring (host arrays, frames first)."""

    env_id: int
    ordinal: int
    """The row's resets before the episode began (the constructor's reset starts episode 0)."""
    fields: dict[str, np.ndarray]

    @property
    def length(self) -> int:
        """Frames in the episode (its steps + 1: the reset frame)."""
        return len(next(iter(self.fields.values())))


class RecorderManager:
    """Recorder terms in a per-row device ring (see the module docstring).

    Attributes:
        names: The recorder terms, in declaration order.
        capacity: Frames per row in the ring.
        buffers: ``{name: (num_envs, capacity, ...)}`` the recorded values.
        ordinal, frame: ``(num_envs, capacity)`` int64 each slot's episode ordinal and frame in it (-1: empty).
        ends: ``(num_envs, capacity)`` bool, the slot is the last frame of a finished episode.
        cursor: ``(num_envs,)`` int64 frames written per row (the next slot is ``cursor % capacity``).
        finished: ``(num_envs,)`` int64 episodes finished per row (whole in the ring or not).
    """

    def __init__(self, env: ManagerBasedEnv) -> None:
        self.env = env
        self.names = tuple(env.cfg.recorders)
        self._calls = [bind(env, t.func, t.params, f"recorders[{n!r}]") for n, t in env.cfg.recorders.items()]
        n, dev = env.num_envs, env.device
        self.capacity = int(env.cfg.recorder_frames or env.max_episode_steps + 1)
        self.buffers: dict[str, torch.Tensor] = {}
        for name, call in zip(self.names, self._calls, strict=True):
            sample = call()
            if not isinstance(sample, torch.Tensor) or sample.dim() < 1 or sample.shape[0] != n:
                got = tuple(sample.shape) if isinstance(sample, torch.Tensor) else type(sample).__name__
                raise ValueError(f"recorders[{name!r}]: the term must return a ({n}, ...) tensor, got {got}")
            self.buffers[name] = torch.zeros(n, self.capacity, *sample.shape[1:], dtype=sample.dtype, device=dev)
        full = (n, self.capacity)
        self.ordinal = torch.full(full, -1, dtype=torch.long, device=dev)
        self.frame = torch.full(full, -1, dtype=torch.long, device=dev)
        self.ends = torch.zeros(full, dtype=torch.bool, device=dev)
        self.cursor = torch.zeros(n, dtype=torch.long, device=dev)
        self.finished = torch.zeros(n, dtype=torch.long, device=dev)
        self._current = torch.full((n,), -1, dtype=torch.long, device=dev)  # the running episode's ordinal
        self._frames = torch.zeros(n, dtype=torch.long, device=dev)  # frames of the running episode
        self._rows = torch.arange(n, device=dev)

    def reset(self, rows: torch.Tensor) -> None:
        """Mark the running episodes of the rows of ``rows`` finished (if they stepped); start new ones."""
        if not self._calls:
            return
        last = (self.cursor - 1).remainder(self.capacity)
        finished = rows & (self._frames > 1)
        self.ends[self._rows, last] = self.ends[self._rows, last] | finished
        self.finished.add_(finished.long())
        self._current.copy_(torch.where(rows, self._current + 1, self._current))
        self._frames.copy_(torch.where(rows, 0, self._frames))

    def record(self, rows: torch.Tensor | None = None) -> None:
        """Write this frame of every term: on the rows of ``rows`` (a reset's mask), or on every row (a step)."""
        if not self._calls:
            return
        slot = self.cursor.remainder(self.capacity)
        at = (self._rows, slot)
        for name, call in zip(self.names, self._calls, strict=True):
            buf = self.buffers[name]
            value = call().to(buf.dtype)
            if rows is not None:
                value = torch.where(rows.view(-1, *([1] * (buf.dim() - 2))), value, buf[at])
            buf[at] = value
        if rows is None:
            self.ordinal[at] = self._current
            self.frame[at] = self._frames
            self.ends[at] = False
            self.cursor.add_(1)
            self._frames.add_(1)
        else:
            self.ordinal[at] = torch.where(rows, self._current, self.ordinal[at])
            self.frame[at] = torch.where(rows, self._frames, self.frame[at])
            self.ends[at] = self.ends[at] & ~rows
            self.cursor.add_(rows.long())
            self._frames.add_(rows.long())

    # ------------------------------------------------------------------ host side, outside the step

    def episodes(self) -> list[RecordedEpisode]:
        """The finished episodes still whole in the ring, by env, oldest first (reads the device: host side)."""
        if not self._calls:
            return []
        cursor = self.cursor.cpu().numpy()
        ordinal, frame, ends = self.ordinal.cpu().numpy(), self.frame.cpu().numpy(), self.ends.cpu().numpy()
        buffers = {k: v.cpu().numpy() for k, v in self.buffers.items()}
        env_ids = self.env.env_ids.cpu().numpy()
        out: list[RecordedEpisode] = []
        for row in range(self.env.num_envs):
            kept = min(int(cursor[row]), self.capacity)
            slots = [(int(cursor[row]) - kept + k) % self.capacity for k in range(kept)]
            start = 0
            while start < len(slots):
                stop = start + 1
                while stop < len(slots) and ordinal[row, slots[stop]] == ordinal[row, slots[start]]:
                    stop += 1
                run = slots[start:stop]
                whole = frame[row, run[0]] == 0 and bool((np.diff(frame[row, run]) == 1).all())
                if whole and ends[row, run[-1]]:
                    fields = {k: v[row, run] for k, v in buffers.items()}
                    out.append(RecordedEpisode(int(env_ids[row]), int(ordinal[row, run[0]]), fields))
                start = stop
        return out

    def export(self, path: str | Path, *, fields: tuple[str, ...] | None = None, compressed: bool = False) -> int:
        """Write the finished episodes to exactly ``path`` (an ``.npz`` archive, whatever its suffix); returns how many.

        Arrays: each term of ``fields`` (default: all) as the episodes' frames concatenated, frames first;
        ``episode_lengths`` and ``episode_env_ids`` ``(E,)`` int64; ``fps`` ``(1,)`` (``1 / step_dt``).
        Finished episodes no longer whole in the ring (longer than it, or overwritten by later frames) are
        not written: a ``UserWarning`` says how many (raise ``TaskCfg.recorder_frames`` to keep them).
        """
        names = self._fields(fields)
        episodes = self.episodes()
        self._warn_dropped(len(episodes))
        arrays: dict[str, Any] = {}
        for name in names:
            parts = [e.fields[name] for e in episodes]
            arrays[name] = np.concatenate(parts, axis=0) if parts else self.buffers[name][0, :0].cpu().numpy()
        arrays["episode_lengths"] = np.array([e.length for e in episodes], dtype=np.int64)
        arrays["episode_env_ids"] = np.array([e.env_id for e in episodes], dtype=np.int64)
        arrays["fps"] = np.array([1.0 / self.env.step_dt])
        _write(path, arrays, compressed)
        return len(episodes)

    def export_motion(self, path: str | Path, episode: int = 0) -> RecordedEpisode:
        """Write finished episode number ``episode`` (of :meth:`episodes`) as an mjlab motion ``.npz``.

        Arrays: ``fps`` ``(1,)`` and :data:`MOTION_FIELDS`, frames first (needs recorders of those names,
        e.g. :func:`~gym_graphreset.mdp.recorders.motion_recorders`). Joints and bodies are written in
        the model's order, as a clip holds them, whatever order the recorders name them in (the body
        recorders must name theirs: ``body_names``). Returns the episode written (as recorded).
        """
        self._fields(MOTION_FIELDS)
        episodes = self.episodes()
        if not (isinstance(episode, int) and 0 <= episode < len(episodes)):
            raise ValueError(f"`episode` must be an int in [0, {len(episodes)}) (finished episodes), got {episode!r}")
        chosen = episodes[episode]
        arrays: dict[str, Any] = {
            k: chosen.fields[k][:, self._model_order(k)].astype(np.float32) for k in MOTION_FIELDS
        }
        arrays["fps"] = np.array([1.0 / self.env.step_dt])
        _write(path, arrays, compressed=False)
        return chosen

    def _warn_dropped(self, whole: int) -> None:
        """Warn of the finished episodes the ring no longer holds whole (``whole``: those it does)."""
        import warnings

        dropped = int(self.finished.sum()) - whole
        if dropped > 0:
            warnings.warn(
                f"recorder export: {dropped} finished episode(s) are not whole in the ring of {self.capacity} "
                f"frames per env (longer than it, or overwritten by later frames) and are not written; "
                f"raise TaskCfg.recorder_frames to keep them",
                stacklevel=3,
            )

    def _model_order(self, field: str) -> np.ndarray:
        """The permutation putting recorder ``field``'s joints or bodies (its axis 1) in the model's order."""
        import mujoco

        env, params = self.env, self.env.cfg.recorders[field].params
        if field.startswith("joint_"):
            joints = params.get("joint_names")
            if joints is None:  # the action joints, in action order
                keys = env.joint_qpos_ids.tolist()
            else:
                keys = [env._id(mujoco.mjtObj.mjOBJ_JOINT, j, f"recorders[{field!r}]") for j in joints]
        else:
            bodies = params.get("body_names")
            if not isinstance(bodies, (tuple, list)):
                raise ValueError(
                    f"export_motion: recorders[{field!r}] must name the bodies it records (param `body_names`, "
                    "as mdp.motion_recorders does), so that the clip holds them in the model's order"
                )
            keys = [env.body_id(b) for b in bodies]
        return np.argsort(np.asarray(keys), kind="stable")

    def _fields(self, fields: tuple[str, ...] | None) -> tuple[str, ...]:
        if fields is None:
            return self.names
        missing = [f for f in fields if f not in self.names]
        if missing:
            raise ValueError(f"`fields` {missing} are not recorder terms; recorders: {list(self.names)}")
        return tuple(fields)


def _write(path: str | Path, arrays: dict[str, Any], compressed: bool) -> None:
    """``arrays`` as an ``.npz`` archive at exactly ``path`` (``numpy.savez`` would append ``.npz`` to a name)."""
    with open(path, "wb") as f:
        (np.savez_compressed if compressed else np.savez)(f, **arrays)
