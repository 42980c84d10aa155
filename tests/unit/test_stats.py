"""Server statistics: waits (count, total, max, mean) and the metadata byte counters."""

from __future__ import annotations

from okapikv.core.stats import ServerStats, WaitStats


def test_wait_stats() -> None:
    stats = WaitStats()
    assert stats.mean_us == 0.0
    stats.record(10)
    stats.record(30)
    assert (stats.count, stats.total_us, stats.max_us, stats.mean_us) == (2, 40, 30, 20.0)


def test_record_wait_per_reason() -> None:
    stats = ServerStats()
    stats.record_wait("put_dependency", 5)
    stats.record_wait("put_dependency", 7)
    stats.record_wait("tx_clock", 1)
    assert stats.waits["put_dependency"].count == 2
    assert stats.waits["tx_clock"].total_us == 1


def test_as_dict() -> None:
    stats = ServerStats()
    stats.operations["put"] += 2
    stats.record_wait("tx_stable", 4)
    stats.replication_metadata_bytes = 24
    result = stats.as_dict()
    assert result["operations"] == {"put": 2}
    assert result["waits"] == {"tx_stable": {"count": 1, "total_us": 4, "max_us": 4, "mean_us": 4.0}}
    assert result["replication_metadata_bytes"] == 24
    assert set(result) >= {"heartbeats_sent", "stabilization_bytes", "gc_bytes", "snapshot_retries"}
