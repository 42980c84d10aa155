"""The client session (Okapi section 3.2): merged entry-wise with max, never moves backwards."""

from __future__ import annotations

from okapikv.core.messages import Session
from okapikv.core.session import ClientSession


def test_starts_empty() -> None:
    session = ClientSession(3)
    assert session.current == Session((0, 0, 0), 0)


def test_merge_is_entry_wise_max() -> None:
    session = ClientSession(3)
    session.merge(Session((5, 1, 7), 10))
    session.merge(Session((2, 9, 7), 4))
    assert session.current == Session((5, 9, 7), 10)


def test_merge_never_moves_backwards() -> None:
    session = ClientSession(2)
    session.merge(Session((5, 5), 5))
    session.merge(Session((0, 0), 0))
    assert session.current == Session((5, 5), 5)


def test_merge_of_a_longer_vector_grows_the_session() -> None:
    """A server that knows one more DC (the cluster grew, okapikv.core.growth) teaches the session."""
    session = ClientSession(2)
    session.merge(Session((1, 2, 3), 9))
    assert session.current == Session((1, 2, 3), 9)


def test_merge_of_a_shorter_vector_keeps_the_other_entries() -> None:
    session = ClientSession(3)
    session.merge(Session((0, 0, 7), 0))
    session.merge(Session((4, 1), 9))
    assert session.current == Session((4, 1, 7), 9)


def test_current_is_a_snapshot() -> None:
    session = ClientSession(2)
    before = session.current
    session.merge(Session((4, 4), 4))
    assert before == Session((0, 0), 0)


def test_rebase() -> None:
    session = ClientSession(2)
    session.merge(Session((4, 4), 4))
    session.rebase(2)
    assert session.current == Session((4, 4), 4)
    session.rebase(3)
    assert session.current == Session((0, 0, 0), 0)
