"""How the fast suite turns its interleaved rounds into the verdicts of its acceptance targets
(``suites.acceptance``), from figures in results.json's form."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.harness.replication import LagSummary, ReplicationSampler
from benchmarks.harness.storage_costs import StorageCosts
from benchmarks.suites.acceptance import judge
from benchmarks.suites.acceptance import paired as _paired
from benchmarks.suites.fast_figures import FastFigures, Verdict
from okapikv.bench.engine.results import MemoryRow


def figures(ops_s: float) -> dict[str, Any]:
    return {"ops_s": ops_s, "mean_us": 1.0, "p99_us": 2.0, "errors": 0, "server_cpu_s": 1.0,
            "client_cores": 0.5, "partitions": 1}


def evaluate(fast: dict[str, Any], memory: list[MemoryRow]) -> list[Verdict]:
    """The verdicts of figures as results.json holds them."""
    return judge(FastFigures.from_dict(fast), memory)


def test_paired_takes_the_median_of_each_rounds_ratio() -> None:
    rounds = [{"okapi": 90.0, "eventual": 100.0}, {"okapi": 60.0, "eventual": 75.0},
              {"okapi": 99.0, "eventual": 100.0}, {"okapi": 50.0}]  # the last round lost a run: skipped
    assert _paired(rounds, "okapi", "eventual") == pytest.approx((0.9, 0.8, 0.99))
    assert _paired([{"okapi": 1.0}], "okapi", "eventual") is None


def test_cost_of_causality_is_judged_on_paired_rounds_not_on_the_two_medians() -> None:
    # medians 6,342 vs 7,574 (16%), but round by round Okapi was 9%, 18% and 1% behind
    rounds = [{"okapi": 6869.0, "eventual": 7574.0}, {"okapi": 6342.0, "eventual": 7711.0},
              {"okapi": 6248.0, "eventual": 6339.0}]
    fast = {"rotx": {"okapi": figures(6342), "eventual": figures(7574)}, "rotx_rounds": rounds}
    [row] = [row for row in evaluate(fast, []) if row.target == "3. cost of causality, RO-TX + PUT"]
    assert row.met is True
    assert row.measured.startswith("+9.3% (paired rounds +1.4% .. +17.8%; medians 6,342 vs 7,574")
    # without rounds (results of an older suite) the medians decide
    del fast["rotx_rounds"]
    [row] = [row for row in evaluate(fast, []) if row.target == "3. cost of causality, RO-TX + PUT"]
    assert row.met is False and row.measured.startswith("+16.3%")


def test_scaling_is_judged_on_paired_rounds_too() -> None:
    fast = {"ycsb_a": {"okapi": figures(100), "okapi-2p": figures(90)},
            "ycsb_a_rounds": [{"okapi": 100.0, "okapi-2p": 120.0}, {"okapi": 80.0, "okapi-2p": 90.0},
                              {"okapi": 110.0, "okapi-2p": 99.0}]}
    [row] = [row for row in evaluate(fast, []) if row.target.startswith("6.")]
    assert row.met is True and "paired rounds x1.12" in row.measured


def test_replication_sampler_takes_the_windows_lag_distribution_from_the_servers_counts() -> None:
    """The servers count lag samples cumulatively (tenths of a ms); the window is last - first."""
    reads = [
        {"s1": {"dc_index": 1, "stable_lag_samples": [{"900": 5}, {}]}},  # before the window
        {"s1": {"dc_index": 1, "stable_lag_samples": [{"900": 5, "1000": 98, "1200": 1, "1500": 1}, {}]}},
    ]

    class Cluster:
        calls = 0

        def fetch_stats(self) -> dict[str, dict[str, Any]]:
            self.calls += 1
            return reads[min(self.calls, 2) - 1]  # then the last read again, until the sampler stops

    sampler = ReplicationSampler(Cluster(), interval_s=0.001)
    with sampler:
        while len(sampler.samples) < 2:
            pass
    summary = sampler.lag_summary(0, 1)
    assert summary == LagSummary(samples=100, p50_ms=100.0, p99_ms=120.0, max_ms=150.0)
    assert summary.to_dict() == {"lag_samples": 100, "lag_p50_ms": 100.0, "lag_p99_ms": 120.0, "lag_max_ms": 150.0}
    assert sampler.lag_summary(1, 0).to_dict() == {"lag_samples": 0}


def test_scaling_is_judged_on_the_lean_load_where_it_ran_with_the_async_client_beside() -> None:
    fast = {"ycsb_a": {"okapi": figures(100), "okapi-2p": figures(80), "okapi-lean": figures(60),
                       "okapi-2p-lean": figures(95)},
            "ycsb_a_rounds": [{"okapi": 100.0, "okapi-2p": 80.0, "okapi-lean": 60.0, "okapi-2p-lean": 96.0},
                              {"okapi": 100.0, "okapi-2p": 75.0, "okapi-lean": 50.0, "okapi-2p-lean": 80.0}]}
    [row] = [row for row in evaluate(fast, []) if row.target.startswith("6.")]
    assert row.met is True
    assert row.measured == ("lean load, 64 sessions per partition: 60 -> 95 ops/s (paired rounds x1.60, x1.60 .. "
                               "x1.60); async client (64 sessions, 1 process): 100 -> 80 ops/s (paired rounds x0.78, "
                               "x0.75 .. x0.80)")


def test_plain_okapi_under_the_replication_load_is_a_comparison_row_not_a_verdict() -> None:
    def run(system: str, rate: float, lag_p99: float) -> dict[str, Any]:
        return {"system": system, "throughput": figures(rate), "queues": {"max_messages": 10},
                "visibility": [{"source": "a", "destination": "b", "bound_ms": 88.0, "lag_p99_ms": lag_p99}]}

    fast = {"replication": run("okapi-bounded", 12_000, 85.0), "replication_unbounded": run("okapi", 14_000, 101.0)}
    rows = {row.target: row for row in evaluate(fast, [])}
    assert rows["5. visibility p99 at full PUT load (okapi-bounded)"].met is True
    plain = rows["5. ... plain okapi, same load (no admission control)"]
    assert plain.met is None and plain.measured == "14,000 PUT/s; worst lag p99 101 ms vs 88 ms (+13 ms)"


def test_durable_throughput_and_cpu_per_operation_are_judged_from_the_same_rounds() -> None:
    fast: dict[str, Any] = {
            "ycsb_a": {"okapi": figures(100), "okapi-durable": figures(80)},
            "ycsb_a_server_us_per_op": {"okapi": 9.5, "okapi-durable": 30.0},
            "ycsb_a_rounds": [{"okapi": 100.0, "okapi-durable": 90.0}, {"okapi": 100.0, "okapi-durable": 70.0},
                              {"okapi": 100.0, "okapi-durable": 88.0}]}
    rows = {row.id: row for row in evaluate(fast, [])}
    assert rows["durable-ycsb-a"].met is True  # paired rounds: -12% (the medians say -20%)
    assert rows["durable-ycsb-a"].measured.startswith("+12.0% (paired rounds +10.0% .. +30.0%")
    assert rows["server-cpu-per-op"].met is True
    assert rows["server-cpu-per-op"].measured == "9.5 us in memory at 100 ops/s; durable 30.0 us at 80 ops/s"
    del fast["ycsb_a_server_us_per_op"]  # results written before the figure existed: no row
    assert "server-cpu-per-op" not in {row.id for row in evaluate(fast, [])}


def test_redis_benchmark_load_rate_and_data_size_rows() -> None:
    def point(clients: int, pipeline: int, okapi: float, redis: float) -> dict[str, Any]:
        return {"clients": clients, "pipeline": pipeline, "okapi_set": okapi, "okapi_get": okapi,
                "redis_set": redis, "redis_get": redis}

    fast = {"redis_benchmark": [[point(1, 1, 5, 10), point(50, 1, 90, 80), point(50, 16, 100, 400)],
                                [point(1, 1, 6, 10), point(50, 1, 40, 80), point(50, 16, 100, 400)],
                                [point(1, 1, 7, 10), point(50, 1, 70, 80), point(50, 16, 100, 400)]],
            "durable_scale": {"large": 20_000, "small": 1_000, "quick": True, "load_rates": [90e3, 120e3, 110e3],
                              "rounds": [{"large": 95.0, "small": 100.0}, {"large": 80.0, "small": 100.0},
                                         {"large": 92.0, "small": 100.0}], "checkpoint_s": [2.0, 5.0, 3.0]}}
    rows = {row.id: row for row in evaluate(fast, [])}
    assert rows["redis-benchmark-c1"].met is None and rows["redis-benchmark-c1"].measured.startswith("60%")
    assert rows["redis-benchmark-c50"].met is False and rows["redis-benchmark-c50"].measured.startswith("88%")
    assert rows["redis-benchmark-p16"].met is None
    load = rows["load-rate"]
    assert load.met is True and load.target == "bulk load, 20,000 records, one durable partition"
    assert load.measured == "110,000 records/s (--quick: a smaller data set, not the target's)"
    size = rows["durable-data-size"]
    assert size.met is True and size.target == "durable YCSB-A at 20,000 vs 1,000 records"
    assert size.measured.startswith("+8.0% (paired rounds +5.0% .. +20.0%; medians 92 vs 100 ops/s)")
    checkpoints = rows["load-checkpoints"]
    assert checkpoints.met is None and checkpoints.target == "... its checkpoints past the load's end, 20,000 records"
    assert checkpoints.measured.startswith("3.0 s (rounds 2.0-5.0 s)")
    del fast["durable_scale"]["checkpoint_s"]  # results written before the figure existed: no row
    assert "load-checkpoints" not in {row.id for row in evaluate(fast, [])}


def test_the_idle_rows_judge_the_busiest_server_and_the_latest_pair() -> None:
    idle = {"idle_s": 10.0, "cores": [0.004, 0.012, 0.006],
            "visibility": [{"source": "a", "destination": "b", "visible_ms": 80.0, "bound_ms": 90.0},
                           {"source": "b", "destination": "a", "visible_ms": 95.0, "bound_ms": 90.0}]}
    rows = {row.target: row for row in evaluate({"idle": idle}, [])}
    cores, visibility = rows["idle cores per server"], rows["first-update visibility after idle"]
    assert cores.met is False and cores.measured.startswith("0.0120 core on the busiest server")
    assert visibility.met is False and visibility.measured.startswith("worst pair b->a: 95 ms vs 90 ms")
    idle["cores"] = [0.004, 0.009]
    idle["visibility"][1]["visible_ms"] = None  # timed out
    rows = {row.target: row for row in evaluate({"idle": idle}, [])}
    assert rows["idle cores per server"].met is True
    assert rows["first-update visibility after idle"].measured.startswith("worst pair b->a: timed out")
    idle["visibility"] = idle["visibility"][:1]
    assert {row.target: row for row in evaluate({"idle": idle}, [])}["first-update visibility after idle"].met


def test_the_storage_rows_show_recovery_and_checkpoint_costs_as_comparisons() -> None:
    costs = StorageCosts(1_000_000, 36 << 20, 17.6, 19.6, 100_000, 1.64, 4.23)
    rows = {row.id: row for row in judge(FastFigures(storage=costs), [])}
    recovery, checkpoint = rows["recovery"], rows["checkpoint-under-load"]
    assert recovery.target == "recovery of 1,000,000 versions, one durable partition" and recovery.met is None
    assert recovery.measured == "17.60 s from the log (36 MiB), 19.60 s from the checkpoint"
    assert checkpoint.target == "checkpoint of 100,000 logged versions" and checkpoint.met is None
    assert checkpoint.measured == "4.23 s under load, 1.64 s alone"
    assert FastFigures.from_dict(FastFigures(storage=costs).to_dict()).storage == costs
