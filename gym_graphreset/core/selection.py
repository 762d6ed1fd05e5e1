"""Fixed-shape reset selection: a persistent full-width mask instead of row ids.

A :class:`ResetSelection` travels through the same reset APIs that take ``env_ids`` and through
Gymnasium's ``options={"reset_mask": ...}``. It refuses to act as an index, so code that was not
converted to masked writes fails loudly instead of resetting the wrong rows.

Participants (inner envs, wrappers, reset terms) opt in with ``supports_reset_selection = True`` or
:func:`reset_selection_capable`. A declaration counts only at or below the class that defines the
effective ``reset`` in the MRO: overriding ``reset`` without re-declaring support makes a blocker.
"""

from __future__ import annotations

from typing import Any, Literal, NoReturn, TypeVar

import numpy as np
import torch

__all__ = [
    "Capability",
    "ResetSelection",
    "ResetSelectionUnsupportedError",
    "assign_rows_",
    "declares",
    "fill_rows_",
    "options_reset_mask",
    "participant_name",
    "reset_selection_capable",
    "resolve_reset_mask",
    "supports_reset_selection",
]

_T = TypeVar("_T", bound=type)

_NOT_AN_INDEX = (
    "ResetSelection is a full-width mask, not an index: read `selection.mask` (a bool tensor of shape "
    "(num_envs,)) and write rows with `fill_rows_`/`assign_rows_` or `torch.where(selection.mask, ...)`"
)


class ResetSelectionUnsupportedError(ValueError):
    """Raised when masked autoreset is asked for but some participant cannot take a selection."""


class ResetSelection:
    """A persistent bool mask of the rows to reset, updated in place and never reallocated.

    Args:
        num_envs: Number of rows (the env batch size).
        device: Device of the mask.

    Example:
        >>> sel = ResetSelection(4, "cpu")
        >>> _ = sel.set_(torch.tensor([True, False, False, True]))
        >>> sel.mask.tolist()
        [True, False, False, True]
    """

    __slots__ = ("mask", "num_envs")

    def __init__(self, num_envs: int, device: torch.device | str) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)):
            raise TypeError(f"`num_envs` must be an int >= 1, got {num_envs!r} ({type(num_envs).__name__})")
        if num_envs < 1:
            raise ValueError(f"`num_envs` must be an int >= 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self.mask = torch.zeros(self.num_envs, dtype=torch.bool, device=device)

    @property
    def device(self) -> torch.device:
        """Device of the mask."""
        return self.mask.device

    def set_(self, mask: torch.Tensor) -> ResetSelection:
        """Copy ``mask`` into the persistent mask (no reallocation, no host read)."""
        if mask.shape != self.mask.shape:
            raise ValueError(f"mask must have shape {tuple(self.mask.shape)}, got {tuple(mask.shape)}")
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must have dtype torch.bool, got {mask.dtype}")
        self.mask.copy_(mask)
        return self

    def capture_buffers(self) -> tuple[torch.Tensor]:
        """The mask, which a captured graph reads and writes."""
        return (self.mask,)

    def __repr__(self) -> str:
        return f"ResetSelection(num_envs={self.num_envs}, device={self.mask.device})"

    # Fail closed: a selection used like ids must not silently pick rows.
    def __index__(self) -> NoReturn:
        raise TypeError(_NOT_AN_INDEX)

    def __iter__(self) -> NoReturn:
        raise TypeError(_NOT_AN_INDEX)

    def __bool__(self) -> NoReturn:
        raise TypeError(_NOT_AN_INDEX)

    def __len__(self) -> NoReturn:
        raise TypeError(_NOT_AN_INDEX)

    def __array__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_NOT_AN_INDEX)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> NoReturn:
        raise TypeError(_NOT_AN_INDEX)


def reset_selection_capable(cls: _T) -> _T:
    """Class decorator: declare that ``cls.reset`` accepts a :class:`ResetSelection`."""
    cls.supports_reset_selection = True  # type: ignore[attr-defined]
    return cls


Capability = Literal["reset_selection", "step_capture"]
"""What a participant may declare: ``supports_reset_selection`` / ``supports_step_capture``."""
_COVERS: dict[str, str | None] = {"reset_selection": "reset", "step_capture": None}


def declares(obj: object, capability: Capability) -> bool:
    """Whether ``obj`` (or a class) declares ``supports_<capability> = True``: the one capability mechanism.

    A declaration sits in a class body or on the instance, and is read along the MRO. For
    ``reset_selection`` (about ``reset``, whose masked writes a subclass can silently undo) it counts only
    at or below the class that defines the effective ``reset``: a subclass overriding ``reset`` without
    re-declaring is not capable, whatever its parents said. ``step_capture`` is inherited as declared (a
    subclass whose ``step`` reads the host declares ``supports_step_capture = False``).
    """
    attr, method = f"supports_{capability}", _COVERS[capability]
    if not isinstance(obj, type) and attr in getattr(obj, "__dict__", {}):
        return obj.__dict__[attr] is True
    cls = obj if isinstance(obj, type) else type(obj)
    owner = None if method is None else next((klass for klass in cls.__mro__ if method in vars(klass)), None)
    for klass in cls.__mro__:
        if attr in vars(klass):
            return vars(klass)[attr] is True
        if klass is owner:
            break
    return False


def supports_reset_selection(obj: object) -> bool:
    """Whether ``obj``'s effective ``reset`` takes a :class:`ResetSelection` (``declares(obj, "reset_selection")``)."""
    return declares(obj, "reset_selection")


def participant_name(obj: object) -> str:
    """A readable name for a participant: its class name, never a repr."""
    return obj.__name__ if isinstance(obj, type) else type(obj).__name__


def resolve_reset_mask(x: Any, num_envs: int, device: torch.device | str) -> torch.Tensor:
    """Turn ``None`` / row ids / a bool mask / a :class:`ResetSelection` into a bool mask.

    ``None`` means all rows. A selection gives a copy of its mask. A bool mask (torch, numpy, or a Python
    list/tuple of bools) must have shape ``(num_envs,)``; ids (integers, in ``[0, num_envs)``) are scattered
    into a fresh mask. Anything else (floats, mixed lists, ids out of range, negative ids) is refused: a
    list of bools is never read as ids.
    """
    device = torch.device(device)
    if x is None:
        return torch.ones(num_envs, dtype=torch.bool, device=device)
    if isinstance(x, ResetSelection):
        if x.num_envs != num_envs:
            raise ValueError(f"ResetSelection has {x.num_envs} rows, expected {num_envs}")
        return x.mask.to(device, copy=True)
    if isinstance(x, (list, tuple)):
        x = _list_to_tensor(x)
    elif isinstance(x, np.ndarray):
        x = _numpy_to_tensor(x)
    elif isinstance(x, (bool, int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        x = torch.tensor([int(x)])
    elif not isinstance(x, torch.Tensor):
        raise TypeError(
            "`reset_mask` must be None, a bool mask of shape (num_envs,), row ids, or a ResetSelection; "
            f"got {type(x).__name__}"
        )
    x = x.to(device)
    if x.dtype == torch.uint8:
        raise TypeError(_UINT8_AMBIGUOUS)
    if x.dtype == torch.bool:
        if x.shape != (num_envs,):
            raise ValueError(f"a bool reset mask must have shape ({num_envs},), got {tuple(x.shape)}")
        return x.clone()
    if x.dtype.is_floating_point or x.dtype.is_complex:
        raise ValueError(f"env ids must be an integer tensor or a bool mask, got dtype {x.dtype}")
    ids = x.reshape(-1).long()
    if ids.numel() and bool(((ids < 0) | (ids >= num_envs)).any()):  # host read: ids are the host's input
        bad = ids[(ids < 0) | (ids >= num_envs)].tolist()
        raise ValueError(f"env ids must lie in [0, {num_envs}), got {bad[:8]}")
    mask = torch.zeros(num_envs, dtype=torch.bool, device=device)
    mask[ids] = True
    return mask


def _numpy_to_tensor(x: np.ndarray) -> torch.Tensor:
    """A copy of a numpy mask or ids in any memory layout (reversed, strided, non-native byte order)."""
    if x.dtype.kind not in "biuf":
        raise TypeError(f"`reset_mask` must be a bool mask or integer row ids, got a numpy array of dtype {x.dtype}")
    return torch.tensor(np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("=")))  # a copy: read-only is fine


_UINT8_AMBIGUOUS = (
    "`reset_mask` of dtype uint8 is ambiguous (torch indexes with it as a mask, numpy as row ids): "
    "pass a bool mask (`mask.bool()`) or integer row ids (`ids.long()`)"
)


def _list_to_tensor(values: list[Any] | tuple[Any, ...]) -> torch.Tensor:
    if any(isinstance(v, np.uint8) for v in values):
        raise TypeError(_UINT8_AMBIGUOUS)
    kinds = {
        "bool" if isinstance(v, (bool, np.bool_)) else "int" if isinstance(v, (int, np.integer)) else "other"
        for v in values
    }
    if kinds == {"bool"}:
        return torch.tensor([bool(v) for v in values], dtype=torch.bool)
    if kinds <= {"int"}:
        return torch.tensor([int(v) for v in values], dtype=torch.long)
    raise ValueError(
        "a list `reset_mask` must hold only bools (a mask) or only ints (row ids), got "
        f"{[type(v).__name__ for v in values][:8]}"
    )


def options_reset_mask(options: dict[str, Any] | None, all_rows: torch.Tensor) -> torch.Tensor:
    """The rows an env's ``reset(options=...)`` must reset, as a bool mask, with no copy on the hot path.

    ``options["reset_mask"]`` may be absent (every row: ``all_rows``, a persistent all-True mask), a
    :class:`ResetSelection` (its mask, used directly), or ids / a bool mask (resolved into a new mask).
    """
    reset_mask = (options or {}).get("reset_mask")
    if reset_mask is None:
        return all_rows
    if isinstance(reset_mask, ResetSelection):
        return reset_mask.mask
    return resolve_reset_mask(reset_mask, all_rows.shape[0], all_rows.device)


def _ids_mask(ids: torch.Tensor, num_envs: int, device: torch.device) -> torch.Tensor:
    """Integer row ids as a mask with no host read: ids out of range fail as torch indexing does.

    The ids a term is handed on the selected path come from the wrapper's ``nonzero()`` (in range by
    construction); checking them on the host again in every ``fill_rows_`` / ``assign_rows_`` was one host
    sync per call. User-facing masks (``options["reset_mask"]``) are still checked, by name, in
    :func:`resolve_reset_mask`.
    """
    mask = torch.zeros(num_envs, dtype=torch.bool, device=device)
    return mask.index_fill_(0, ids.reshape(-1).to(device, torch.long), True)


def _row_mask(sel: Any, t: torch.Tensor) -> torch.Tensor:
    if isinstance(sel, ResetSelection):
        mask = sel.mask
    elif isinstance(sel, torch.Tensor) and sel.dtype in (torch.int16, torch.int32, torch.int64):
        mask = _ids_mask(sel, t.shape[0], t.device)
    else:
        mask = resolve_reset_mask(sel, t.shape[0], t.device)
    if mask.shape[0] != t.shape[0]:
        raise ValueError(f"selection has {mask.shape[0]} rows, tensor has {t.shape[0]}")
    return mask.view(-1, *([1] * (t.dim() - 1)))


def fill_rows_(t: torch.Tensor, sel: Any, value: float | int | bool | torch.Tensor) -> torch.Tensor:
    """In place: ``t[rows] = value`` for the selected rows, as a masked write with no host read.

    ``value`` is a Python scalar (passed to the kernel, no host-to-device copy) or a tensor that
    broadcasts to a row of ``t``.
    """
    mask = _row_mask(sel, t)
    if isinstance(value, torch.Tensor):
        t.copy_(torch.where(mask, value.to(t.device, t.dtype), t))
    else:
        t.masked_fill_(mask, value)
    return t


def assign_rows_(dst: torch.Tensor, sel: Any, src: torch.Tensor) -> torch.Tensor:
    """In place: ``dst[rows] = src[rows]`` for the selected rows; ``src`` is full width."""
    if src.shape != dst.shape:
        raise ValueError(f"src must be full width with shape {tuple(dst.shape)}, got {tuple(src.shape)}")
    dst.copy_(torch.where(_row_mask(sel, dst), src.to(dst.dtype), dst))
    return dst
