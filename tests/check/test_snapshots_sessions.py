"""Snapshot atomicity (RO-TX, SCAN) and session guarantees on hand-made histories."""

from __future__ import annotations

from check_builders import Builder, names

from okapikv.check.causal import check_causal, check_sessions, check_snapshots

# ------------------------------------------------------------------ snapshots


def _x_then_y() -> Builder:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "y", "y1", 20)  # y1 causally depends on x1
    return b


def test_rotx_consistent_snapshots_pass() -> None:
    snapshots: list[dict[str, str | None]] = [{"x": None, "y": None}, {"x": "x1", "y": None}, {"x": "x1", "y": "y1"}]
    for reads in snapshots:
        b = _x_then_y()
        b.rotx("r", reads, dc=1)
        assert check_snapshots(b.history()) == [], reads
        assert check_causal(b.history()) == [], reads


def test_rotx_fractured_read() -> None:
    b = _x_then_y()
    bad = b.rotx("r", {"x": None, "y": "y1"}, dc=1)
    found = check_snapshots(b.history())
    assert names(found) == ["FracturedRead"]
    assert found[0].operations == (bad.id, 1, 0)
    assert names(check_causal(b.history())) == ["WriteCOInitRead"]


def test_rotx_fractured_read_of_an_overwritten_value() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "x", "x2", 20, found=True)
    b.put("a", "y", "y1", 30)
    b.rotx("r", {"y": "y1", "x": "x1"}, dc=1)
    assert names(check_snapshots(b.history())) == ["FracturedRead"]


def test_fracture_is_not_blamed_on_the_snapshot_when_the_session_knew_already() -> None:
    """The reader depended on x2 before the RO-TX: a stale x is a session problem, not a fracture."""
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "x", "x2", 20, found=True)
    b.put("a", "y", "y1", 30)
    b.get("r", "x", "x2", dc=1)
    b.rotx("r", {"y": "y1", "x": "x1"}, dc=1)
    assert check_snapshots(b.history()) == []
    assert names(check_sessions(b.history())) == ["MonotonicReads"]


def test_scan_missing_a_causal_predecessor() -> None:
    b = _x_then_y()
    b.scan("r", "a", "z", [("y", "y1")], dc=1)
    assert names(check_snapshots(b.history())) == ["FracturedRead"]
    b = _x_then_y()
    b.scan("r", "a", "z", [("x", "x1"), ("y", "y1")], dc=1)
    b.scan("r", "a", "z", [("x", "x1")], dc=1)  # the second scan lost y: a monotonic-reads problem
    assert check_snapshots(b.history()) == []
    assert names(check_sessions(b.history())) == ["MonotonicReads"]


def test_scan_limit_bounds_what_it_claims_about_absent_keys() -> None:
    b = _x_then_y()
    b.scan("r", "a", "z", [("x", "x1")], dc=1, limit=1)  # y beyond the limit: not a null read
    assert check_snapshots(b.history()) == []
    assert check_causal(b.history()) == []


def test_scan_result_shape() -> None:
    b = _x_then_y()
    b.scan("r", "x", "x", [("x", "x1"), ("y", "y1")], dc=1)
    b.scan("r", "a", "z", [("y", "y1"), ("x", "x1")], dc=1)
    b.scan("r", "a", "z", [("x", "x1"), ("y", "y1")], dc=1, limit=1)
    assert names(check_snapshots(b.history())) == ["ScanLimit", "ScanOrder", "ScanOutOfRange"]


# ------------------------------------------------------------------ session guarantees


def test_read_your_writes() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.get("a", "x", None)
    assert names(check_sessions(b.history())) == ["ReadYourWrites"]


def test_read_your_writes_across_own_overwrite() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "x", "x2", 20, found=True)
    b.get("a", "x", "x1")
    assert names(check_sessions(b.history())) == ["ReadYourWrites"]


def test_monotonic_reads() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "x", "x2", 20, found=True)
    b.get("b", "x", "x2", dc=1)
    b.get("b", "x", "x1", dc=1)
    assert names(check_sessions(b.history())) == ["MonotonicReads"]


def test_monotonic_reads_with_concurrent_writers() -> None:
    b = Builder()
    b.put("a", "x", "xa", 10, dc=0)
    b.put("c", "x", "xc", 20, dc=2)
    b.get("b", "x", "xc", dc=1)
    b.get("b", "x", "xa", dc=1)  # went back to the LWW loser after seeing the winner
    assert names(check_sessions(b.history())) == ["MonotonicReads"]


def test_monotonic_writes() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "y", "y1", 20)
    b.get("b", "y", "y1", dc=1)
    b.get("b", "x", None, dc=1)
    assert names(check_sessions(b.history())) == ["MonotonicWrites"]


def test_monotonic_writes_arbitration_order() -> None:
    b = Builder()
    b.put("a", "x", "x1", 20)
    b.put("a", "x", "x2", 10, found=True)  # the session's second write is arbitrated before its first
    assert names(check_sessions(b.history())) == ["MonotonicWrites"]


def test_writes_follow_reads() -> None:
    b = Builder()
    b.put("c", "x", "x1", 10, dc=2)
    b.get("a", "x", "x1")
    b.put("a", "y", "y1", 20)
    b.get("b", "y", "y1", dc=1)
    b.get("b", "x", None, dc=1)
    assert names(check_sessions(b.history())) == ["WritesFollowReads"]


def test_longer_causal_chains_are_causal_but_not_session_anomalies() -> None:
    """x1 -> (a) y1 -> (b) z1 -> (c) reads x as null: two hops, no single session guarantee."""
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "y", "y1", 20)
    b.get("b", "y", "y1", dc=1)
    b.put("b", "z", "z1", 30, dc=1)
    b.get("c", "z", "z1", dc=2)
    b.get("c", "x", None, dc=2)
    assert check_sessions(b.history()) == []
    assert names(check_causal(b.history())) == ["WriteCOInitRead"]


def test_valid_sessions_pass() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.get("a", "x", "x1")
    b.put("b", "x", "x2", 20, dc=1, found=True)
    b.get("a", "x", "x2")
    b.get("a", "x", "x2")
    b.put("a", "y", "y1", 30)
    b.get("c", "y", "y1", dc=2)
    b.get("c", "x", "x2", dc=2)
    assert check_sessions(b.history()) == []
    assert check_causal(b.history()) == []
