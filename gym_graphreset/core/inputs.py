"""Checks of what a user hands the wrapper: every bad input is refused by name before any state changes.

Each function raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, bad value)
naming the argument, what is accepted and what came. They read only metadata (shape, dtype, device),
except where the configuration does not defer validation (the values are then read on the host).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import VectorWrapper

from gym_graphreset.core.protocols import TorchVectorEnv
from gym_graphreset.core.selection import resolve_reset_mask

__all__ = [
    "action_bounds",
    "check_fixed_shape_spaces",
    "check_device",
    "check_env_counts",
    "check_positive_int",
    "check_real",
    "check_actions",
    "check_process_group",
    "check_reset_options",
    "check_reset_terms",
    "check_seed",
    "check_step_outputs",
    "env_device",
    "inner_actions",
    "neutral_actions",
    "numpy_actions",
]


def env_device(env: Any) -> torch.device:
    """The torch device of the inner env chain: the outermost member's ``device`` (required somewhere).

    Pure forwarding ``VectorWrapper`` s (Gymnasium's do not forward attributes) are looked through.
    """
    member = env
    while not isinstance(member, TorchVectorEnv) and isinstance(member, VectorWrapper):
        member = member.env
    if not isinstance(member, TorchVectorEnv):
        raise TypeError(
            f"the inner env {type(env).__name__} has no `device` attribute: the wrapper needs torch tensors on a "
            "known device (wrap a numpy VectorEnv in gymnasium.wrappers.vector.NumpyToTorch, or set `device`)"
        )
    device = torch.device(member.device if member.device is not None else "cpu")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def action_bounds(space: gym.Space, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Inclusive integer ``(low, high)`` of a Discrete / MultiDiscrete action space (``None`` for others)."""
    if isinstance(space, gym.spaces.Discrete):
        low = torch.tensor(int(space.start), device=device)
        return low, low + int(space.n) - 1
    if isinstance(space, gym.spaces.MultiDiscrete):
        low = torch.as_tensor(np.asarray(space.start, dtype=np.int64), device=device)
        return low, low + torch.as_tensor(np.asarray(space.nvec, dtype=np.int64), device=device) - 1
    return None


def neutral_actions(space: gym.Space, num_envs: int, device: torch.device) -> torch.Tensor:
    """One in-space action per row, the same for every row.

    Zeros clipped into a ``Box``, the lowest value of a ``Discrete`` or ``MultiDiscrete``, zeros of a
    ``MultiBinary``.

    Raises:
        TypeError: Another action space (no action can be made up for it).
    """
    if isinstance(space, gym.spaces.Box):
        zeros = np.clip(np.zeros(space.shape, dtype=space.dtype), space.low, space.high)
        return torch.as_tensor(zeros, device=device).expand(num_envs, *space.shape).clone()
    bounds = action_bounds(space, device)
    if bounds is not None:
        return bounds[0].expand(num_envs, *(space.shape or ())).clone()
    if isinstance(space, gym.spaces.MultiBinary):
        return torch.zeros(num_envs, *space.shape, dtype=torch.int8, device=device)
    raise TypeError(f"no neutral action for a {type(space).__name__} action space: pass the actions")


def check_actions(
    actions: Any, space: gym.Space, num_envs: int, device: torch.device, *, read_values: bool
) -> torch.Tensor:
    """Refuse actions of the wrong type, shape, dtype or device; detach them from autograd.

    A numpy array (``env.action_space.sample()``, a numpy policy) is copied to a tensor on ``device``
    first, with its dtype: a memcpy on the CPU; on CUDA a host-to-device copy that makes the host wait,
    every step (correct, but the host synchronisation this library otherwise avoids, so torch tensors on
    the env's device stay the fast path). With ``read_values`` (validation not deferred) non-finite
    floats and out-of-range integers are refused too (one host read); otherwise the step latches them
    (``finite_actions``, ``valid_actions``).
    """
    expected = (num_envs, *(space.shape or ()))
    if isinstance(actions, np.ndarray):
        actions = numpy_actions(actions, device)
    if not isinstance(actions, torch.Tensor):
        raise ValueError(f"actions must be a torch.Tensor on {device} or a numpy array, got {type(actions).__name__}")
    if tuple(actions.shape) != expected:
        raise ValueError(f"actions must have shape {expected}, got {tuple(actions.shape)}")
    if isinstance(space, gym.spaces.Box):
        ok_dtype, accepted = actions.dtype.is_floating_point, "a floating dtype"
    elif isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        ok_dtype = not (actions.dtype.is_floating_point or actions.dtype.is_complex or actions.dtype == torch.bool)
        accepted = "an integer dtype"
    else:
        ok_dtype, accepted = True, "any dtype"
    if not ok_dtype:
        raise ValueError(f"actions must have {accepted} for a {type(space).__name__} action space, got {actions.dtype}")
    if actions.device != device:
        raise ValueError(f"actions must be on device {device}, got {actions.device}")
    actions = actions.detach()  # the policy's autograd graph stops here (never reaches rewards or state)
    if read_values:
        _refuse_bad_values(actions, space, num_envs)
    return actions


def numpy_actions(actions: np.ndarray, device: torch.device) -> torch.Tensor:
    """A copy of numpy ``actions`` on ``device``, same dtype; a dtype torch has no tensor for is refused by name.

    Raises:
        ValueError: ``actions`` has a dtype that is not a number or bool (e.g. ``object``, strings).
    """
    if actions.dtype.kind not in "biuf":
        raise ValueError(f"actions must be a numpy array of numbers, got a numpy array of dtype {actions.dtype}")
    native = np.ascontiguousarray(actions).astype(actions.dtype.newbyteorder("="), copy=False)  # torch: native order
    return torch.tensor(native, device=device)


def inner_actions(actions: Any, device: torch.device) -> torch.Tensor:
    """An inner env's ``actions``: a tensor as it is, a numpy array copied to ``device``; anything else refused.

    Raises:
        ValueError: ``actions`` is neither a torch.Tensor nor a numpy array of numbers.
    """
    if isinstance(actions, np.ndarray):
        return numpy_actions(actions, device)
    if not isinstance(actions, torch.Tensor):
        raise ValueError(f"actions must be a torch.Tensor or a numpy array, got {type(actions).__name__}")
    return actions


def _refuse_bad_values(actions: torch.Tensor, space: gym.Space, num_envs: int) -> None:
    if actions.dtype.is_floating_point:
        ok = torch.isfinite(actions).reshape(num_envs, -1).all(dim=1)
        if not bool(ok.all()):  # host read: this is the non-deferred mode
            rows = (~ok).nonzero().flatten().tolist()
            raise ValueError(f"actions must be finite; NaN or inf in rows {rows[:16]}")
    bounds = action_bounds(space, actions.device)
    if bounds is not None:
        ok = ((actions >= bounds[0]) & (actions <= bounds[1])).reshape(num_envs, -1).all(dim=1)
        if not bool(ok.all()):  # host read: this is the non-deferred mode
            rows = (~ok).nonzero().flatten().tolist()
            raise ValueError(f"actions must lie in the action space {space}; out of range in rows {rows[:16]}")


def check_step_outputs(
    env_name: str, num_envs: int, device: torch.device, reward: Any, terminated: Any, truncated: Any
) -> None:
    """Refuse an inner env's ``step()`` outputs of the wrong type, shape, dtype or device, naming the env.

    ``reward`` must be a floating tensor and ``terminated`` / ``truncated`` bool tensors, each of shape
    ``(num_envs,)`` on ``device``. Only metadata is read (no host read), so this runs on every step; a
    captured or compiled step runs it while it is captured or traced.

    Raises:
        TypeError: An output that is not a tensor, or has the wrong dtype.
        ValueError: An output of the wrong shape or on another device.
    """
    for field, value in (("reward", reward), ("terminated", terminated), ("truncated", truncated)):
        what = f"the inner env {env_name} returned `{field}`"
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{what} of type {type(value).__name__} from step(); the wrapper needs a torch.Tensor of shape "
                f"({num_envs},) on {device}"
            )
        if tuple(value.shape) != (num_envs,):
            raise ValueError(
                f"{what} of shape {tuple(value.shape)} from step(); the wrapper needs shape ({num_envs},) "
                "(one value per env)"
            )
        floating = field == "reward"
        if (floating and not value.dtype.is_floating_point) or (not floating and value.dtype != torch.bool):
            accepted = "a floating dtype" if floating else "dtype torch.bool"
            raise TypeError(f"{what} of dtype {value.dtype} from step(); the wrapper needs {accepted}")
        if value.device != device:
            raise ValueError(f"{what} on device {value.device} from step(); the wrapper needs device {device}")


def check_seed(seed: Any) -> int | None:
    """``None`` or a non-negative int (Gymnasium's rule; large seeds are folded into the counter key)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"`seed` must be an int or None (non-negative, as in Gymnasium), got {seed!r}")
    return int(seed)


def check_reset_options(options: Any, num_envs: int, device: torch.device) -> torch.Tensor | None:
    """The bool mask ``options["reset_mask"]`` asks for (``None``: every row), refusing bad options first."""
    if options is None:
        return None
    if not isinstance(options, dict):
        raise TypeError(f"`options` must be a dict or None, got {type(options).__name__}")
    reset_mask = options.get("reset_mask")
    return None if reset_mask is None else resolve_reset_mask(reset_mask, num_envs, device)


def check_reset_terms(reset_terms: Any) -> dict[str, Any]:
    """``{name: term}`` (a copy); names are strings."""
    if reset_terms is None:
        return {}
    if not isinstance(reset_terms, dict):
        raise TypeError(f"`reset_terms` must be a dict {{name: term}}, got {type(reset_terms).__name__}")
    for name in reset_terms:
        if not isinstance(name, str):
            raise TypeError(f"`reset_terms` keys must be str names, got {name!r}")
    return dict(reset_terms)


def check_process_group(process_group: Any) -> Any:
    """``None``, or ``True``/a group with ``torch.distributed`` initialised (refused at construction)."""
    if process_group is None or process_group is False:
        return None
    import torch.distributed as dist

    if isinstance(process_group, str) or not (process_group is True or isinstance(process_group, dist.ProcessGroup)):
        raise TypeError(
            f"`process_group` must be None, True (the default group) or a torch.distributed.ProcessGroup, "
            f"got {process_group!r}"
        )
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            "`process_group` was given but torch.distributed is not initialised: call "
            "torch.distributed.init_process_group() first (or leave process_group=None)"
        )
    return process_group


INT64_MAX = 2**63 - 1
"""The largest step count, horizon or env index: they are held in int64 tensors."""
MAX_NUM_ENVS = 2**31 - 1
"""The largest batch: row indices are int32 in warp kernels and CUDA grids."""


def check_positive_int(name: str, value: Any, minimum: int = 1, maximum: int = INT64_MAX) -> int:
    """An int (not a bool, not a float) in ``[minimum, maximum]``, refused by ``name`` otherwise.

    The default ``maximum`` is what an int64 tensor holds: a larger horizon or counter would overflow
    at the first comparison on the device, after the physics advanced.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an int >= {minimum}, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value!r}")
    if value > maximum:
        raise ValueError(f"`{name}` must be <= {maximum}, got {value!r}")
    return int(value)


def check_real(
    name: str, value: Any, *, low: float = -math.inf, high: float = math.inf, low_open: bool = False
) -> float:
    """A real number (not a bool, not NaN) in ``[low, high]`` (``(low, high]`` with ``low_open``), by ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if math.isnan(value) or value > high or value < low or (low_open and value == low):
        bounds = f"{'(' if low_open else '['}{low}, {high}]"
        raise ValueError(f"`{name}` must lie in {bounds}, got {value!r}")
    return value


def check_env_counts(num_envs: Any, max_episode_steps: Any, global_env_offset: Any) -> tuple[int, int, int]:
    """An env's batch size, horizon and global row offset, range-checked by name.

    ``num_envs`` in ``[1, MAX_NUM_ENVS]``; ``max_episode_steps`` in ``[1, INT64_MAX]``; the global env
    indices ``global_env_offset + row`` must fit an int64 (a larger offset would wrap to negative ids).
    """
    num_envs = check_positive_int("num_envs", num_envs, maximum=MAX_NUM_ENVS)
    max_episode_steps = check_positive_int("max_episode_steps", max_episode_steps)
    offset = check_positive_int("global_env_offset", global_env_offset, minimum=0, maximum=INT64_MAX - num_envs)
    return num_envs, max_episode_steps, offset


def check_device(device: Any) -> torch.device:
    """A usable torch device: ``cpu`` (``cpu:0`` is the same) or ``cuda[:N]`` with CUDA present."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"`device` must be 'cpu' or 'cuda[:N]', got {device}") from err
    if dev.type == "cpu":
        return torch.device("cpu")  # "cpu:0" would compare unequal to the tensors' "cpu"
    if dev.type != "cuda":
        raise ValueError(f"`device` must be 'cpu' or 'cuda[:N]', got {device}")
    if not torch.cuda.is_available():
        raise ValueError(f"`device` is {device!r} but CUDA is not available here; use 'cpu'")
    index = torch.cuda.current_device() if dev.index is None else dev.index
    if index >= torch.cuda.device_count():
        raise ValueError(f"`device` is {device!r} but only {torch.cuda.device_count()} CUDA device(s) exist")
    return torch.device("cuda", index)


_VARIABLE_SHAPE = (gym.spaces.Sequence, gym.spaces.Text, gym.spaces.Graph, gym.spaces.OneOf)


def _variable_parts(space: gym.Space, path: str) -> list[str]:
    if isinstance(space, _VARIABLE_SHAPE):
        return [f"{path or 'the space'} is {type(space).__name__}"]
    if isinstance(space, gym.spaces.Dict):
        return [p for k, sub in space.spaces.items() for p in _variable_parts(sub, f"{path}[{k!r}]")]
    if isinstance(space, gym.spaces.Tuple):
        return [p for i, sub in enumerate(space.spaces) for p in _variable_parts(sub, f"{path}[{i}]")]
    return []


def check_fixed_shape_spaces(env: Any) -> None:
    """Refuse variable-shape spaces (Sequence, Text, Graph, OneOf, also nested in Dict/Tuple), by name.

    The wrapper holds every row in fixed-shape tensors and resets rows with masked writes: a row whose
    observation has no fixed shape cannot be written that way (on any path).
    """
    for what, space in (("observation", env.single_observation_space), ("action", env.single_action_space)):
        parts = _variable_parts(space, "")
        if parts:
            raise ValueError(
                f"the {what} space {space} has no fixed shape ({'; '.join(parts)}): this is a fixed-shape wrapper "
                "(Box, Discrete, MultiDiscrete, MultiBinary, and Dict/Tuple of them are accepted)"
            )
