"""Per-key linearizability (single DC) and convergence at quiescence on hand-made histories."""

from __future__ import annotations

from check_builders import Builder, names

from okapikv.check.convergence import check_convergence
from okapikv.check.linearizability import check_linearizability, linearizability

# ------------------------------------------------------------------ linearizability


def test_sequential_register_passes() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10, at=(0, 10))
    b.get("b", "x", "x1", at=(20, 30))
    b.swap("b", "x", "x2", "x1", 40, at=(40, 50))
    b.delete("a", "x", 60, found=True, at=(60, 70))
    b.get("a", "x", None, at=(80, 90))
    b.put("a", "x", "x3", 100, found=False, at=(100, 110))
    assert check_linearizability(b.history()) == []


def test_stale_read_after_a_completed_write() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10, at=(0, 10))
    b.put("a", "x", "x2", 20, found=True, at=(20, 30))
    bad = b.get("b", "x", "x1", at=(40, 50))
    found = check_linearizability(b.history())
    assert names(found) == ["NotLinearizable"]
    assert found[0].operations[0] == bad.id
    assert found[0].key == "x"


def test_overlapping_operations_may_take_effect_in_either_order() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10, at=(0, 10))
    b.put("a", "x", "x2", 20, found=True, at=(20, 60))
    b.get("b", "x", "x1", at=(30, 40))  # overlaps the second put: may precede it
    b.get("c", "x", "x2", at=(35, 45))
    assert check_linearizability(b.history()) == []


def test_swap_must_return_the_old_value() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10, at=(0, 10))
    b.swap("b", "x", "x2", None, 20, at=(20, 30))
    assert names(check_linearizability(b.history())) == ["NotLinearizable"]


def test_put_and_delete_report_found_truthfully() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10, found=True, at=(0, 10))  # nothing existed
    assert names(check_linearizability(b.history())) == ["NotLinearizable"]
    b = Builder()
    b.delete("a", "x", 10, found=True, at=(0, 10))
    assert names(check_linearizability(b.history())) == ["NotLinearizable"]


def test_unknown_outcome_may_or_may_not_take_effect() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10, at=(0, 10))
    b.info_put("b", "x", "x2", at=(20, 30))
    b.get("c", "x", "x1", at=(40, 50))
    b.get("c", "x", "x2", at=(60, 70))  # the lost-reply put took effect late
    assert check_linearizability(b.history()) == []
    b.get("c", "x", "x1", at=(80, 90))  # ... and cannot be undone
    assert names(check_linearizability(b.history())) == ["NotLinearizable"]


def test_keys_are_checked_independently() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10, at=(0, 10))
    b.put("a", "y", "y1", 10, at=(0, 10))
    b.get("b", "y", None, at=(20, 30))
    result = linearizability(b.history())
    assert result.keys_checked == 2
    assert [a.key for a in result.anomalies] == ["y"]


def test_multi_dc_histories_are_not_checked() -> None:
    b = Builder()
    b.put("a", "x", "x1", 10, at=(0, 10))
    b.get("b", "x", None, dc=1, at=(20, 30))
    assert check_linearizability(b.history()) == []


def test_budget_exhaustion_is_undecided_not_an_anomaly() -> None:
    b = Builder()
    for i in range(12):
        b.put(f"p{i}", "x", f"v{i}", i, at=(0, 100))
    b.get("r", "x", "nope", at=(0, 100))
    result = linearizability(b.history(), step_budget=50)
    assert result.anomalies == [] and result.keys_undecided == ["x"]


# ------------------------------------------------------------------ convergence


def _two_writes() -> Builder:
    b = Builder()
    b.put("a", "x", "xa", 10, dc=0)
    b.put("b", "x", "xb", 20, dc=1)
    return b


def test_converged_to_the_last_writer() -> None:
    b = _two_writes()
    for dc in range(3):
        b.get(f"final-{dc}", "x", "xb", dc=dc, final=True)
    assert check_convergence(b.history()) == []


def test_divergence() -> None:
    b = _two_writes()
    b.get("final-0", "x", "xa", dc=0, final=True)
    b.get("final-1", "x", "xb", dc=1, final=True)
    assert names(check_convergence(b.history())) == ["Divergence", "LostUpdate"]


def test_converged_to_the_wrong_value() -> None:
    b = _two_writes()
    b.get("final-0", "x", "xa", dc=0, final=True)
    b.get("final-1", "x", "xa", dc=1, final=True)
    found = check_convergence(b.history())
    assert names(found) == ["LostUpdate", "LostUpdate"]


def test_deleted_last_means_absent_everywhere() -> None:
    b = _two_writes()
    b.delete("c", "x", 30, dc=2)
    b.get("final-0", "x", None, dc=0, final=True)
    b.get("final-1", "x", "xb", dc=1, final=True)
    assert names(check_convergence(b.history())) == ["Divergence", "LostUpdate"]


def test_missing_final_read() -> None:
    b = _two_writes()
    b.put("a", "y", "y1", 30)
    b.get("final-0", "x", "xb", dc=0, final=True)
    b.get("final-1", "x", "xb", dc=1, final=True)
    b.get("final-1", "y", "y1", dc=1, final=True)
    assert names(check_convergence(b.history())) == ["MissingFinalRead"]


def test_no_final_reads_no_verdict() -> None:
    assert check_convergence(_two_writes().history()) == []
