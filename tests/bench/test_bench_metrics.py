"""Histogram merging, server-stats deltas and the figures derived from them, CPU time readers."""

from __future__ import annotations

import os

import pytest

from okapikv.bench.engine.histograms import merge_encoded, new_histogram, record_us
from okapikv.bench.engine.proc import process_cpu_seconds, total_cpu_seconds
from okapikv.bench.engine.results import LatencySummary
from okapikv.bench.engine.stats import stats_delta, summarize_traffic, summarize_waits


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
