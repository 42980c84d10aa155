"""The liveness checker (``okapikv.check.liveness``) on hand-made histories, the history fields it
reads (``visible`` events, ``held_until_us``), and the convergence checker's matching exemption."""

from __future__ import annotations

from pathlib import Path

from check_builders import Builder, names

from okapikv.check.convergence import check_convergence
from okapikv.check.history import History, HistoryRecorder, load_history, save_history
from okapikv.check.liveness import check_liveness
from okapikv.check.report import check_history

HEAL = 1_000_000
MS = 1_000


def healed(builder: Builder, *, dcs: int = 2, visibility: bool = True) -> History:
    history = builder.history()
    history.meta.update(dcs=dcs, liveness={"heal_us": HEAL, "operation_bound_us": 100 * MS,
                                           "visibility_bound_us": 200 * MS, "visibility": visibility})
    return history


def test_nothing_to_judge_without_a_heal() -> None:
    builder = Builder()
    builder.put("c0", "k", "v1", 5, at=(0, 10**9))
    assert check_liveness(builder.history()) == []


def test_operations_after_the_heal_complete_within_the_bound_a_clean_refusal_counts() -> None:
    builder = Builder()
    builder.get("c0", "k", None, at=(10, HEAL - 5))  # done before the heal: not judged
    builder.get("c1", "k", None, at=(HEAL - 50 * MS, HEAL + 90 * MS))  # in flight at the heal, in time
    builder.put("c2", "k", "v1", 5, at=(HEAL + 10, HEAL + 150 * MS), status="fail")  # refused, but late
    slow = builder.get("c3", "k", None, at=(10, HEAL + 120 * MS))
    stuck = builder.info_put("c4", "k", "v2", at=(HEAL + 5, HEAL + 5))
    builder.get("c5", "k", None, at=(HEAL + 400 * MS, HEAL + 401 * MS))  # ends the history
    builder.get("c6", "k", None, at=(HEAL + 20, HEAL + 60 * MS))
    stuck.status = None  # no outcome recorded at all
    anomalies = check_liveness(healed(builder, visibility=False))
    assert names(anomalies) == ["OperationNeverCompleted", "SlowOperation", "SlowOperation"]
    by_op = {anomaly.operations[0]: anomaly for anomaly in anomalies}
    assert "took 120 ms after the heal (bound 100 ms)" in by_op[slow.id].explanation
    assert "no outcome" in by_op[stuck.id].explanation


def test_a_write_after_the_heal_must_become_visible_in_every_other_dc_within_the_bound() -> None:
    builder = Builder()
    on_time = builder.put("c0", "a", "v1", 5, dc=0, at=(HEAL + 10, HEAL + 20))
    on_time.visible = {1: HEAL + 150 * MS, 2: HEAL + 200 * MS}
    late = builder.put("c0", "b", "v2", 6, dc=0, at=(HEAL + 30, HEAL + 40))
    late.visible = {1: HEAL + 100 * MS, 2: HEAL + 300 * MS}
    never = builder.put("c1", "c", "v3", 7, dc=1, at=(HEAL + 50, HEAL + 60))
    never.visible = {0: HEAL + 10 * MS}
    builder.put("c2", "d", "v4", 8, dc=2, at=(HEAL - 10, HEAL + 70))  # started before the heal: not judged
    builder.get("c3", "a", "v1", at=(HEAL + 500 * MS, HEAL + 501 * MS))
    anomalies = check_liveness(healed(builder, dcs=3))
    assert [(a.name, a.operations) for a in anomalies] == [
        ("VisibilityStalled", (late.id,)), ("VisibilityStalled", (never.id,))]
    assert "became visible in dc2 300 ms after it completed" in anomalies[0].explanation
    assert "still not visible in dc2" in anomalies[1].explanation
    # A write not visible yet whose deadline the history does not reach is not judged.
    short = Builder()
    short.put("c0", "a", "v1", 5, dc=0, at=(HEAL + 10, HEAL + 20))
    short.get("c1", "a", None, at=(HEAL + 30, HEAL + 100 * MS))
    assert check_liveness(healed(short)) == []


def test_a_write_held_back_by_a_timestamp_legitimately_ahead_counts_from_when_it_may_show() -> None:
    builder = Builder()
    held = builder.put("c0", "a", "v1", 5, dc=0, at=(HEAL + 10, HEAL + 20))
    held.held_until_us = HEAL + 3_600_000 * MS  # its server's clock is an hour ahead
    shown = builder.put("c0", "b", "v2", 6, dc=0, at=(HEAL + 30, HEAL + 40))
    shown.held_until_us = HEAL + 300 * MS
    shown.visible = {1: HEAL + 450 * MS}  # 150 ms after it may show
    builder.get("c1", "a", None, at=(HEAL + 900 * MS, HEAL + 901 * MS))
    assert check_liveness(healed(builder)) == []
    shown.held_until_us = None
    assert names(check_liveness(healed(builder))) == ["VisibilityStalled"]


def test_convergence_does_not_judge_a_key_whose_write_is_held_past_the_final_reads() -> None:
    builder = Builder()
    held = builder.put("c0", "a", "ahead", 10**12, dc=0)
    builder.put("c1", "b", "v", 5, dc=1)
    builder.get("f0", "a", "ahead", dc=0, final=True)
    builder.get("f1", "a", None, dc=1, final=True)  # not visible there yet: held back
    builder.get("f0", "b", "v", dc=0, final=True)
    builder.get("f1", "b", "v", dc=1, final=True)
    assert names(check_convergence(builder.history())) == ["Divergence", "LostUpdate"]
    held.held_until_us = 10**9
    assert check_convergence(builder.history()) == []


def test_visible_events_and_held_until_round_trip_and_run_in_the_report(tmp_path: Path) -> None:
    recorder = HistoryRecorder({"dcs": 2, "liveness": {"heal_us": 0, "visibility": True}})
    op = recorder.invoke("c0", 0, "put", 10, key="k", value="v")
    recorder.complete(op, "ok", 20, found=False, timestamp=7, held_until_us=50)
    recorder.visible(op, 1, 60)
    recorder.visible(op, 1, 70)  # the first time only
    path = tmp_path / "h.jsonl"
    recorder.write(path)
    loaded = load_history(path)
    [again] = loaded.operations
    assert again.held_until_us == 50 and again.visible == {1: 60}
    save_history(loaded, tmp_path / "h2.jsonl")
    assert load_history(tmp_path / "h2.jsonl").operations[0].visible == {1: 60}
    report = check_history(loaded)
    assert "liveness" in report.checkers and report.ok
