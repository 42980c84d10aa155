"""Version vector helpers (Okapi section 3.3: GSV = entry-wise min, USV = min of GSVs)."""

from __future__ import annotations

import pytest

from okapikv.core.vectors import leq, merge_max, merge_min, with_entry, zeros


def test_zeros() -> None:
    assert zeros(3) == (0, 0, 0)
    assert zeros(0) == ()


def test_merge_max_is_entry_wise() -> None:
    assert merge_max((1, 5, 3), (4, 2, 3)) == (4, 5, 3)


def test_merge_max_of_equal_vectors_returns_the_same_object() -> None:
    vector = (1, 2)
    assert merge_max(vector, (1, 2)) is vector


def test_merge_max_rejects_length_mismatch() -> None:
    with pytest.raises(ValueError):
        merge_max((1, 2), (1, 2, 3))


def test_merge_min_is_entry_wise_over_many() -> None:
    assert merge_min([(3, 9, 4), (5, 1, 4), (4, 7, 2)]) == (3, 1, 2)
    assert merge_min(iter([(1, 2)])) == (1, 2)


def test_merge_min_of_nothing_is_an_error() -> None:
    with pytest.raises(StopIteration):
        merge_min([])


def test_leq_is_entry_wise() -> None:
    assert leq((1, 2), (1, 2))
    assert leq((0, 2), (1, 2))
    assert not leq((2, 0), (1, 5))
    with pytest.raises(ValueError):
        leq((1,), (1, 2))


def test_with_entry_replaces_one_entry() -> None:
    assert with_entry((1, 2, 3), 0, 9) == (9, 2, 3)
    assert with_entry((1, 2, 3), 2, 9) == (1, 2, 9)
