"""The causal checker on hand-made histories: each Bouajjani et al. bad pattern is caught, valid
histories (including the legal staleness of last-writer-wins registers) pass."""

from __future__ import annotations

from check_builders import Builder, names

from okapikv.check.causal import check_causal, check_sessions, check_snapshots


def test_valid_causal_chain_passes() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.get("b", "x", "x1", dc=1)
    b.put("b", "y", "y1", 20, dc=1)
    b.get("c", "y", "y1", dc=2)
    b.get("c", "x", "x1", dc=2)
    b.rotx("c", {"x": "x1", "y": "y1"}, dc=2)
    h = b.history()
    assert check_causal(h) == []
    assert check_sessions(h) == []
    assert check_snapshots(h) == []


def test_remote_writes_may_stay_invisible() -> None:
    """A read that has no causal dependency on a write may miss it (remote update not yet stable)."""
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "x", "x2", 20, found=True)
    b.get("b", "x", None, dc=1)
    b.get("b", "x", "x1", dc=1)
    b.get("b", "x", "x2", dc=1)
    assert check_causal(b.history()) == []


def test_concurrent_writes_read_in_either_order_before_seeing_both() -> None:
    b = Builder()
    b.put("a", "x", "xa", 10, dc=0)
    b.put("b", "x", "xb", 11, dc=1)
    b.get("c", "x", "xa", dc=2)  # saw only xa: fine even though xb wins by LWW
    b.get("d", "x", "xb", dc=2)
    assert check_causal(b.history()) == []


def test_thin_air_read() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.get("b", "x", "never-written")
    found = check_causal(b.history())
    assert names(found) == ["ThinAirRead"]
    assert found[0].operations == (1,)


def test_read_of_a_failed_write_is_thin_air() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10, status="fail")
    b.get("b", "x", "x1")
    found = check_causal(b.history())
    assert names(found) == ["ThinAirRead"]
    assert "failed" in found[0].explanation


def test_write_co_init_read() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "y", "y1", 20)
    b.get("b", "y", "y1", dc=1)
    bad = b.get("b", "x", None, dc=1)
    found = check_causal(b.history())
    assert names(found) == ["WriteCOInitRead"]
    assert found[0].operations[0] == bad.id
    assert "Causal path" in found[0].explanation


def test_null_read_explained_by_a_concurrent_delete_is_not_flagged() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.delete("b", "x", 20, dc=1)  # concurrent with nothing a has seen, arbitrated after x1
    b.get("a", "x", None)  # may have read b's tombstone
    assert check_causal(b.history()) == []


def test_null_read_after_overwritten_delete_is_write_co_read() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.delete("a", "x", 20)
    b.put("a", "x", "x3", 30)
    b.get("a", "x", None)
    assert names(check_causal(b.history())) == ["WriteCORead"]


def test_write_co_read() -> None:
    """x1 ->po x2 ->po y1 ->rf get y ->po get x returning x1: an overwritten value."""
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "x", "x2", 20, found=True)
    b.put("a", "y", "y1", 30)
    b.get("b", "y", "y1", dc=1)
    b.get("b", "x", "x1", dc=1)
    found = check_causal(b.history())
    assert names(found) == ["WriteCORead"]
    assert set(found[0].operations) == {4, 1, 0}


def test_cyclic_cf_under_last_writer_wins() -> None:
    """Concurrent x_a (ts 10) and x_b (ts 20): a reader that causally saw x_b cannot read x_a."""
    b = Builder()
    b.put("a", "x", "xa", 10, dc=0)
    b.put("b", "x", "xb", 20, dc=1)
    b.put("b", "y", "yb", 30, dc=1)
    b.get("c", "y", "yb", dc=2)
    b.get("c", "x", "xa", dc=2)
    found = check_causal(b.history())
    assert names(found) == ["CyclicCF"]
    # the same read in the other arbitration order is fine
    b2 = Builder()
    b2.put("a", "x", "xa", 20, dc=0)
    b2.put("b", "x", "xb", 10, dc=1)
    b2.put("b", "y", "yb", 30, dc=1)
    b2.get("c", "y", "yb", dc=2)
    b2.get("c", "x", "xa", dc=2)
    assert check_causal(b2.history()) == []


def test_equal_timestamps_are_ordered_by_dc() -> None:
    b = Builder()
    b.put("a", "x", "xa", 10, dc=1)
    b.put("b", "x", "xb", 10, dc=0)
    b.put("b", "y", "yb", 30, dc=0)
    b.get("c", "y", "yb", dc=2)
    b.get("c", "x", "xa", dc=2)  # xa (dc1) wins the tie against xb (dc0)
    assert check_causal(b.history()) == []


def test_arbitration_contradicting_causality() -> None:
    """b read x1 (ts 20) then wrote x2 with a smaller timestamp: LWW would keep the older value."""
    b = Builder()
    b.put("a", "x", "x1", 20)
    b.get("b", "x", "x1", dc=1)
    bad = b.put("b", "x", "x2", 10, dc=1, found=True)
    found = check_causal(b.history())
    assert names(found) == ["CyclicCF"]
    assert found[0].operations[0] == bad.id
    assert names(check_sessions(b.history())) == ["WritesFollowReads"]


def test_cyclic_co() -> None:
    b = Builder()
    b.get("a", "x", "x2")  # reads b's write, which comes after b read a's write
    b.put("a", "y", "y1", 10)
    b.get("b", "y", "y1", dc=1)
    b.put("b", "x", "x2", 20, dc=1)
    found = check_causal(b.history())
    assert "CyclicCO" in names(found)
    cycle = next(a for a in found if a.name == "CyclicCO")
    assert set(cycle.operations) == {0, 1, 2, 3}


def test_duplicate_timestamp_is_a_lost_write() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("b", "x", "x2", 10)
    assert names(check_causal(b.history())) == ["DuplicateTimestamp"]


def test_duplicate_values_make_reads_unchecked() -> None:
    b = Builder()
    b.put("a", "x", "same", 10)
    b.put("b", "x", "same", 20)
    b.get("c", "x", "same")
    assert names(check_causal(b.history())) == ["DuplicateWrite"]


def test_swap_reads_then_writes() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.swap("b", "x", "x2", "x1", 20, dc=1)
    b.get("c", "x", "x2", dc=2)
    b.get("c", "x", "x1", dc=2)  # x1 ->rf swap(x2): after reading x2, x1 is overwritten
    found = check_causal(b.history())
    assert names(found) == ["WriteCORead"]
    assert names(check_sessions(b.history())) == ["MonotonicReads"]


def test_swap_returning_a_value_older_than_its_causal_past() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "x", "x2", 20, found=True)
    b.swap("a", "x", "x3", "x1", 30)
    assert names(check_causal(b.history())) == ["WriteCORead"]
    assert names(check_sessions(b.history())) == ["ReadYourWrites"]


def test_put_found_false_despite_a_causal_predecessor() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10)
    b.put("a", "x", "x2", 20, found=False)
    assert names(check_causal(b.history())) == ["WriteCOInitRead"]


def test_unknown_outcome_write_may_be_read() -> None:
    b = Builder()
    b.info_put("a", "x", "x1")
    b.get("b", "x", "x1", dc=1)
    b.get("b", "x", None, dc=1)  # cannot be judged against a write of unknown order: no anomaly
    assert check_causal(b.history()) == []


def test_empty_history() -> None:
    assert check_causal(Builder().history()) == []
