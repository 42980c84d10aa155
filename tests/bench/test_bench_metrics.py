"""Histogram merging, server-stats deltas and the figures derived from them, CPU time readers."""

from __future__ import annotations

import dataclasses
import os

import pytest

from benchmarks.harness.proc import process_cpu_seconds, total_cpu_seconds
from okapikv.bench.engine.histograms import merge_encoded, new_histogram, record_us
from okapikv.bench.engine.results import DurabilitySummary, LatencySummary, Run
from okapikv.bench.engine.stats import stats_delta, summarize_durability, summarize_traffic, summarize_waits


def test_merging_encoded_histograms_equals_one_histogram_of_everything() -> None:
    parts = [new_histogram() for _ in range(3)]
    together = new_histogram()
    for index, part in enumerate(parts):
        for value in range(1, 2001):
            latency = value * (index + 1)
            record_us(part, latency)
            record_us(together, latency)
    merged = merge_encoded(part.encode() for part in parts)
    assert LatencySummary.of(merged) == LatencySummary.of(together)
    summary = LatencySummary.of(merged)
    assert summary.count == 6000
    assert summary.p50_us <= summary.p99_us <= summary.p999_us <= summary.max_us


def test_out_of_range_latencies_are_clamped_not_lost() -> None:
    histogram = new_histogram()
    record_us(histogram, 0)
    record_us(histogram, 10**12)
    assert histogram.get_total_count() == 2
    assert LatencySummary.of(new_histogram()).count == 0


def _server(put: int, read_tx: int, waits: dict[str, tuple[int, int]], **counters: int) -> dict[str, object]:
    return {
        "operations": {"put": put, "read_tx": read_tx},
        "waits": {reason: {"count": count, "total_us": total, "max_us": total, "mean_us": 1.0}
                  for reason, (count, total) in waits.items()},
        **counters,
    }


def test_waits_and_traffic_from_stats_deltas() -> None:
    before = {
        "a": _server(100, 50, {"put_dependency": (1, 1000)}, replicated_updates_sent=200,
                     replication_metadata_bytes=2400, stabilization_bytes=1000),
        "b": _server(0, 0, {}),
    }
    after = {
        "a": _server(300, 150, {"put_dependency": (21, 41_000), "tx_clock": (10, 50_000)},
                     replicated_updates_sent=600, replication_metadata_bytes=7200, replication_payload_bytes=6400,
                     stabilization_bytes=3000),
        "b": _server(100, 100, {"tx_stable": (30, 60_000)}),
    }
    delta = stats_delta(after, before)
    assert delta["operations"] == {"put": 300, "read_tx": 200}
    assert "mean_us" not in delta["waits"]["put_dependency"]
    waits = summarize_waits(delta)
    assert waits["write"].operations == 300 and waits["write"].waits == 20
    assert waits["write"].probability == pytest.approx(20 / 300, rel=1e-4)
    assert waits["write"].mean_us == pytest.approx(2000.0)
    assert waits["rotx"].waits == 40 and waits["rotx"].probability == pytest.approx(0.2)
    assert waits["rotx"].mean_us == pytest.approx(2750.0)
    assert waits["rotx"].reasons == {"tx_clock": 10, "tx_stable": 30}
    traffic = summarize_traffic(delta, window_s=2.0)
    assert traffic.updates_replicated == 400
    assert traffic.metadata_bytes_per_update == 12.0
    assert traffic.payload_bytes_per_update == 16.0
    assert traffic.stabilization_bytes_per_s == 1000.0


def test_no_operations_means_no_wait_probability() -> None:
    waits = summarize_waits({"operations": {}, "waits": {}})
    assert waits["write"].probability == 0.0 and waits["rotx"].mean_us == 0.0


def test_cpu_time_of_a_live_process() -> None:
    sum(range(2_000_000))  # burn a little CPU so the reading is positive
    own = process_cpu_seconds(os.getpid())
    assert own is not None and own > 0
    assert process_cpu_seconds(2**22 + 12345) is None  # no such process
    assert total_cpu_seconds([]) is None


def test_per_transaction_stalls_sit_beside_the_per_slice_waits() -> None:
    """Two servers coordinated 100 RO-TXs over 2 partitions: 30 slices waited (per slice 30%), but
    they belonged to 20 transactions (per transaction 20%), each counted for its longest wait."""
    before = {"a": _server(0, 0, {}, snapshot_reads_finished=10, snapshot_read_stalls=1, snapshot_read_stall_us=10),
              "b": _server(0, 0, {})}
    after = {"a": _server(0, 60, {"tx_clock": (20, 60_000)}, snapshot_reads_finished=70, snapshot_read_stalls=13,
                          snapshot_read_stall_us=40_010),
             "b": _server(0, 40, {"tx_clock": (10, 30_000)}, snapshot_reads_finished=40, snapshot_read_stalls=8,
                          snapshot_read_stall_us=20_000)}
    waits = summarize_waits(stats_delta(after, before))
    assert waits["rotx"].probability == pytest.approx(0.3) and waits["rotx"].mean_us == pytest.approx(3000.0)
    per_tx = waits["rotx_tx"]
    assert (per_tx.operations, per_tx.waits) == (100, 20)
    assert per_tx.probability == pytest.approx(0.2) and per_tx.mean_us == pytest.approx(3000.0)
    # servers without the counters (results of other builds) have no per-transaction figure
    assert "rotx_tx" not in summarize_waits(stats_delta({"a": _server(0, 5, {})}, {}))


def test_metadata_and_bytes_per_operation_come_from_the_wire_counters() -> None:
    core = {"replicated_updates_sent": 100, "replication_metadata_bytes": 1200, "replication_payload_bytes": 1600}
    wire = {"replication_wire_updates": 100, "replication_wire_bytes": 5000, "replication_wire_payload_bytes": 1600,
            "replication_wire_update_bytes": 3300, "stabilization_wire_bytes": 4000, "heartbeat_wire_bytes": 1000,
            "read_wire_bytes": 700}
    traffic = summarize_traffic(core, 1.0, wire, operations=50)
    assert traffic.metadata_bytes_per_update == 12.0  # the paper's formula, from the core
    assert traffic.wire_metadata_bytes_per_update == 17.0  # (3300 - 1600) / 100, measured
    assert traffic.wire_batch_bytes_per_update == 17.0  # (5000 - 3300) / 100
    assert traffic.wire_replication_bytes_per_op == 100.0 and traffic.wire_stabilization_bytes_per_op == 100.0
    assert traffic.wire_total_bytes_per_op == 200.0 and traffic.wire_read_bytes_per_op == 14.0
    bare = summarize_traffic(core, 1.0)
    assert bare.wire_metadata_bytes_per_update is None and bare.wire_total_bytes_per_op is None


def test_server_cpu_per_operation_net_of_the_idle_background() -> None:
    from benchmarks.harness.records import net_cpu_us_per_op

    # 3 CPU-seconds in a 2 s window with 0.5 idle cores: 2 s of it served the 1,000 operations
    assert net_cpu_us_per_op(3.0, 0.5, 2.0, 1000) == 2000.0
    assert net_cpu_us_per_op(0.5, 0.5, 2.0, 1000) == 0.0  # timers starved by the load: never below zero
    assert net_cpu_us_per_op(3.0, None, 2.0, 1000) is None and net_cpu_us_per_op(3.0, 0.5, 2.0, 0) is None


def test_visibility_per_destination_pools_its_sources_and_measures_their_spread() -> None:
    from benchmarks.harness.visibility import by_destination

    pairs = [("oregon", "ireland", [60.0, 61.0, 62.0]), ("virginia", "ireland", [40.0, 41.0, 42.0]),
             ("ireland", "oregon", [70.0, 71.0, 72.0]), ("virginia", "oregon", [71.0, 72.0, 73.0]),
             ("oregon", "virginia", [])]
    ireland, oregon, virginia = by_destination(pairs)
    assert (ireland.destination, ireland.count, ireland.p50_ms) == ("ireland", 6, 42.0)
    assert ireland.source_p50_ms == {"oregon": 61.0, "virginia": 41.0} and ireland.source_spread_ms == 20.0
    assert oregon.count == 6 and oregon.source_spread_ms == 1.0  # one mode
    assert (virginia.count, virginia.source_p50_ms, virginia.source_spread_ms) == (0, {}, 0.0)


def _durable(fsyncs: int, versions: int, operations: int, commit_s: float, lag_s: float, gets: int, early: int,
             held: int) -> dict[str, object]:
    return {"storage": {"fsyncs": fsyncs, "versions_written": versions, "operations_committed": operations,
                        "commit_seconds": commit_s, "release_lag_seconds": lag_s, "path": "/d"},
            "driver": {"get_replies_early": early, "get_replies_held": held},
            "core": {"operations": {"get": gets}}}


def test_a_durable_runs_commit_groups_and_held_gets_come_from_the_stats_delta() -> None:
    before = {"a": _durable(10, 100, 200, 0.5, 0.1, 40, 30, 2)}
    after = {"a": _durable(110, 2100, 4200, 1.5, 0.3, 1040, 930, 52)}
    summary = summarize_durability(stats_delta(after, before))
    assert summary == DurabilitySummary(fsyncs=100, versions_per_fsync=20.0, operations_per_fsync=40.0,
                                        commit_ms=10.0, release_lag_ms=2.0, gets=1000, gets_early=900,
                                        gets_held=50)
    assert summarize_durability(stats_delta({"a": {"core": {"operations": {"get": 5}}}}, {})) is None  # in memory


def test_a_runs_durability_summary_round_trips_through_results_json_and_is_left_out_when_absent() -> None:
    fields = {"system": "okapi", "workload": "ycsb-a", "clients": 1, "processes": 1, "dcs": 1, "partitions": 1,
              "clock_skew_ms": 0.0, "rotx_partitions": None, "write_ratio": None, "records": 10, "duration_s": 1.0,
              "warmup_s": 0.0, "operations": 1, "throughput_ops_s": 1.0, "errors": {}, "last_error": "",
              "latency_us": {}, "cpu": {"client_s": 0.0, "client_cores": 0.0, "server_s": None, "server_cores": None,
                                        "server_cpu_us_per_op": None}}
    assert "durability" not in Run.from_dict(fields).to_dict()
    durability = DurabilitySummary(3, 2.0, 4.0, 1.5, 0.5, 10, 8, 1)
    written = Run.from_dict({**fields, "durability": dataclasses.asdict(durability)}).to_dict()
    assert Run.from_dict(written).durability == durability
