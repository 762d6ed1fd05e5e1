"""ResetSelection fails closed; masks resolve; masked row writes; the MRO opt-in rule."""

from __future__ import annotations

import operator
import re

import numpy as np
import pytest
import torch

from gym_graphreset import (
    ResetSelection,
    assign_rows_,
    fill_rows_,
    reset_selection_capable,
    resolve_reset_mask,
    supports_reset_selection,
)


@pytest.fixture
def sel() -> ResetSelection:
    s = ResetSelection(4, "cpu")
    s.set_(torch.tensor([True, False, True, False]))
    return s


@pytest.mark.parametrize(
    "misuse",
    [
        pytest.param(lambda s: torch.zeros(4)[s], id="index-tensor"),
        pytest.param(lambda s: np.zeros(4)[s], id="index-numpy"),
        pytest.param(lambda s: list(s), id="iterate"),
        pytest.param(lambda s: bool(s), id="bool"),
        pytest.param(lambda s: operator.index(s), id="operator.index"),
        pytest.param(lambda s: [1, 2, 3, 4][s], id="index-list"),
        pytest.param(lambda s: len(s), id="len"),
    ],
)
def test_selection_is_not_an_index(sel: ResetSelection, misuse) -> None:
    """Code that treats a selection as ids fails with a message that says how to use the mask."""
    with pytest.raises(TypeError, match=re.escape("selection.mask")):
        misuse(sel)


def test_set_keeps_address_and_checks_shape(sel: ResetSelection) -> None:
    ptr = sel.mask.data_ptr()
    sel.set_(torch.ones(4, dtype=torch.bool))
    assert sel.mask.data_ptr() == ptr and sel.mask.all()
    with pytest.raises(ValueError, match=re.escape("mask must have shape (4,), got (3,)")):
        sel.set_(torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="dtype torch.bool"):
        sel.set_(torch.ones(4))


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (None, [True, True, True, True]),
        (torch.tensor([0, 3]), [True, False, False, True]),
        ([1], [False, True, False, False]),
        (np.array([False, True, True, False]), [False, True, True, False]),
        (torch.tensor([True, False, False, False]), [True, False, False, False]),
    ],
)
def test_resolve_reset_mask(x, expected) -> None:
    assert resolve_reset_mask(x, 4, "cpu").tolist() == expected


def test_resolve_selection_is_a_copy(sel: ResetSelection) -> None:
    mask = resolve_reset_mask(sel, 4, "cpu")
    assert mask.tolist() == sel.mask.tolist() and mask.data_ptr() != sel.mask.data_ptr()


def test_resolve_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match=re.escape("shape (4,), got (2,)")):
        resolve_reset_mask(torch.ones(2, dtype=torch.bool), 4, "cpu")
    with pytest.raises(ValueError, match="integer tensor or a bool mask"):
        resolve_reset_mask(torch.ones(2), 4, "cpu")
    with pytest.raises(ValueError, match="has 4 rows, expected 5"):
        resolve_reset_mask(ResetSelection(4, "cpu"), 5, "cpu")


@pytest.mark.parametrize("rows", ["selection", "ids", "mask"])
def test_fill_and_assign_rows(sel: ResetSelection, rows: str) -> None:
    """Masked writes touch exactly the selected rows, whatever form the rows come in."""
    which = {"selection": sel, "ids": torch.tensor([0, 2]), "mask": sel.mask.clone()}[rows]
    t = torch.arange(8.0).reshape(4, 2)
    ptr = t.data_ptr()
    fill_rows_(t, which, -1.0)
    assert t.tolist() == [[-1, -1], [2, 3], [-1, -1], [6, 7]] and t.data_ptr() == ptr
    src = torch.full((4, 2), 9.0)
    assign_rows_(t, which, src)
    assert t.tolist() == [[9, 9], [2, 3], [9, 9], [6, 7]]
    with pytest.raises(ValueError, match="full width"):
        assign_rows_(t, which, torch.zeros(2, 2))


class _Base:
    supports_reset_selection = True

    def reset(self, env_ids) -> None: ...


class _Inherits(_Base):
    """Inherits reset and the declaration: capable."""


class _Overrides(_Base):
    """Overrides reset without re-declaring: a blocker."""

    def reset(self, env_ids) -> None: ...


class _Redeclares(_Base):
    supports_reset_selection = True

    def reset(self, env_ids) -> None: ...


@reset_selection_capable
class _Decorated(_Overrides):
    def reset(self, env_ids) -> None: ...


class _OptsOut(_Base):
    supports_reset_selection = False


class _Plain:
    def reset(self, env_ids) -> None: ...


@pytest.mark.parametrize(
    ("cls", "capable"),
    [
        (_Base, True),
        (_Inherits, True),
        (_Overrides, False),
        (_Redeclares, True),
        (_Decorated, True),
        (_OptsOut, False),
        (_Plain, False),
    ],
)
def test_mro_rule(cls: type, capable: bool) -> None:
    """A declaration counts only at or below the class that defines the effective reset."""
    assert supports_reset_selection(cls) is capable
    assert supports_reset_selection(cls()) is capable


def test_instance_declaration_wins() -> None:
    obj = _Plain()
    obj.supports_reset_selection = True
    assert supports_reset_selection(obj)


def test_row_id_writes_read_nothing_on_the_host() -> None:
    """Terms on the selected path get row ids from the wrapper's nonzero(): writing them is no further sync
    (a host-side range check here was one sync per fill_rows_/assign_rows_ call, 16 per reset-heavy step)."""
    from gym_graphreset.testing.host_reads import count_host_reads

    t, ids = torch.zeros(6, 2), torch.tensor([1, 4])
    n, where = count_host_reads(lambda: (fill_rows_(t, ids, 1.0), assign_rows_(t, ids, torch.full((6, 2), 2.0))))
    assert n == 0, where
    assert t[:, 0].tolist() == [0, 2, 0, 0, 2, 0]
    with pytest.raises(IndexError):
        fill_rows_(t, torch.tensor([6]), 1.0)  # out of range fails as torch indexing does
