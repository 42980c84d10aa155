"""The acceptance targets' table (``suites.acceptance.TARGETS``): one row per target, every goal
stated in it, judged by it alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.harness.latency import SequentialLatency
from benchmarks.suites import acceptance
from benchmarks.suites.acceptance import TARGETS, AcceptanceTarget, Goal, Measured, judge
from benchmarks.suites.fast_figures import DURABLE, FDATASYNC, FastFigures, LatencyPhase


def test_every_row_has_an_id_a_title_what_it_measures_and_a_goal_or_none() -> None:
    ids = [target.id for target in TARGETS]
    assert len(ids) == len(set(ids)) and all(ids)
    for target in TARGETS:
        assert target.title and target.measures and callable(target.figures)
        if target.goal is not None:
            assert target.goal.compare in ("<=", ">=", ">")
    goals = {target.id: target.goal.describe() for target in TARGETS if target.goal is not None}
    assert goals["latency-get-client"] == "<= 400 us" and goals["ycsb-a-throughput"] == ">= 30,000 ops/s"
    assert goals["ycsb-a-redis-ratio"] == ">= 50% of Redis" and goals["causality-rotx"] == "within 15% of eventual"
    assert goals["memory-per-key"] == "<= 250 B/key" and goals["scaling-1-2"] == "throughput grows"
    assert goals["visibility-under-load"] == "<= UST path + 3 stabilization periods"


@pytest.mark.parametrize(("compare", "at", "above", "below"), [("<=", True, False, True), (">=", True, True, False),
                                                                (">", False, True, False)])
def test_a_goal_compares_with_its_threshold(compare: str, at: bool, above: bool, below: bool) -> None:
    goal = Goal(compare, 10.0, "{:.0f}")
    assert (goal.met(10.0), goal.met(10.5), goal.met(9.5)) == (at, above, below)


def _latency(mean_us: float) -> LatencyPhase:
    figures = {"get": SequentialLatency(100, mean_us, mean_us, mean_us), "put": SequentialLatency(100, 1.0, 1.0, 1.0)}
    return LatencyPhase({"client": figures}, 100, [{"client": figures}])


def test_nothing_measured_is_no_row_and_rows_come_in_the_tables_order() -> None:
    assert judge(FastFigures(), []) == []
    rows = judge(FastFigures(latency=_latency(401.0)), [])
    assert [(row.id, row.met) for row in rows] == [("latency-get-client", False), ("latency-put-client", True)]
    assert rows[0].target == "1. GET latency, one client (Client)" and rows[0].goal == "<= 400 us"
    assert rows[0].measured == "401 us"


def test_a_goal_changed_in_the_table_changes_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Goals live in the table only: judging reads nothing else."""
    looser = tuple(replace(target, goal=Goal("<=", 500.0, "<= {:.0f} us")) if target.id == "latency-get-client"
                   else target for target in TARGETS)
    monkeypatch.setattr(acceptance, "TARGETS", looser)
    [get, _] = judge(FastFigures(latency=_latency(401.0)), [])
    assert get.met is True and get.goal == "<= 500 us"


def test_a_row_added_to_the_table_is_judged_and_a_row_without_goal_is_a_comparison(
        monkeypatch: pytest.MonkeyPatch) -> None:
    extra = (AcceptanceTarget("extra", "7. {what}", "a figure",
                              lambda fast, memory: [Measured(3.0, "3", {"what": "x"})], Goal(">=", 2.0, ">= {:g}")),
             AcceptanceTarget("shown", "8. shown", "a figure", lambda fast, memory: [Measured(1.0, "1")], None))
    monkeypatch.setattr(acceptance, "TARGETS", TARGETS + extra)
    rows = judge(FastFigures(), [])
    assert [(row.id, row.target, row.goal, row.measured, row.met) for row in rows] == [
        ("extra", "7. x", ">= 2", "3", True), ("shown", "8. shown", "(comparison)", "1", None)]


def test_a_durable_put_is_judged_against_the_fdatasync_of_its_own_round() -> None:
    """Each round's pair, then the median: +400, +700, +100 -> +400 us, within fdatasync p50 + 500 us."""
    def put(p50_us: float) -> dict[str, SequentialLatency]:
        return {"put": SequentialLatency(100, p50_us, p50_us, 2 * p50_us)}

    rounds = [{DURABLE: put(durable), FDATASYNC: put(disk)} for durable, disk in ((700, 300), (900, 200), (500, 400))]
    phase = LatencyPhase({DURABLE: put(700), FDATASYNC: put(300)}, 100, rounds)
    [row] = [row for row in judge(FastFigures(latency=phase), []) if row.id == "durable-put-over-fdatasync"]
    assert row.met is True and row.measured.startswith("+400 us") and row.goal == "<= fdatasync p50 + 500 us"
    slower = [{DURABLE: put(durable), FDATASYNC: put(200)} for durable in (800, 900, 1000)]
    [row] = [row for row in judge(FastFigures(latency=replace(phase, rounds=slower)), [])
             if row.id == "durable-put-over-fdatasync"]
    assert row.met is False
