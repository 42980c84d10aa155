"""A node's snapshot (``okapikv.wire.stats``) and its three renderings: the Stats JSON keeps the
keys its readers index, the Prometheus collector exports every declared figure under its metric
name, and `okapi status` reads the JSON back, also from a server that sends fewer keys."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Annotated, Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from okapikv.cluster.config import local_cluster
from okapikv.cluster.status import summarize
from okapikv.core.messages import CatchUpReply, PutRequest, ServerId, Session
from okapikv.core.stats import ServerStats
from okapikv.server.metrics import CORE_COUNTERS, registry_for
from okapikv.server.node import PartitionNode
from okapikv.server.wire_bytes import PeerWireBytes
from okapikv.wire.stats import counter, exported, from_json, gauge, to_document

TOP_LEVEL = {
    "cluster_id", "protocol", "dc", "dc_index", "partition", "address", "pid",
    "clock_us", "clock_unix_us", "clock_skew_us",
    "hlc", "hlc_ahead_us", "max_clock_offset_us", "clock_ahead_at_start_us", "vv", "stable", "gsv", "horizon",
    "stable_lag_ms", "stable_lag_samples", "parked", "pending_reads", "snapshot_leases", "keys", "catching_up",
    "repairing", "repair_waiting", "storage", "versions", "versions_collected", "latency", "core", "driver", "wire",
    "input", "links",
    "membership",
}
DRIVER = {
    "client_requests", "pipeline_batches", "waiting_replies", "peer_batches_received", "peer_messages_received",
    "handler_errors", "oversized_dropped", "native_port", "native_connections", "native_refused", "resp_port",
    "resp_connections", "resp_refused", "admission_waits", "event_loop_stalls", "event_loop_stall_seconds",
    "get_replies_early", "get_replies_held", "collector_passes", "collector_seconds",
}
LINK = {
    "address", "delay_ms", "connected", "queued", "unacked", "queued_bytes", "unacked_bytes", "sent_messages",
    "sent_batches", "resent_messages", "connects", "failures", "probes", "dead",
}
STORAGE = {
    "path", "disk_bytes", "groups_written", "versions_written", "versions_deleted", "mean_commit_ms", "max_commit_ms",
    "durable_group", "required_group", "clock_bound_us", "bound_waits", "checkpoints", "checkpoint_backlog",
    "disk_full", "full_commits", "vacuumed_pages", "fsyncs", "commit_seconds", "release_lag_seconds",
    "loop_groups", "slow_fallbacks",
    "operations_committed", "filesystem_free_bytes", "filesystem_size_bytes", "fsyncs_per_s", "operations_per_fsync",
    "versions_per_fsync", "held_effect_groups",
    "recovered",
}
INPUT = {"connections", "partial_bytes", "partial_bytes_peak", "budget_bytes", "closed"}
LATENCY = {"count", "mean_ms", "p50_ms", "p99_ms"}
#: The metric families a server exports (docs/operations.md lists them), under Prometheus's naming conventions.
METRICS = {
    "okapi_client_requests", "okapi_clock_ahead_at_start_seconds", "okapi_collector_passes",
    "okapi_collector_seconds", "okapi_clock_offset_clamps",
    "okapi_clock_offset_refusals", "okapi_gc_metadata_bytes", "okapi_handler_errors", "okapi_heartbeat_bytes",
    "okapi_heartbeats_sent", "okapi_hlc_ahead_seconds", "okapi_input_budget_bytes", "okapi_input_closed",
    "okapi_input_connections", "okapi_input_partial_bytes", "okapi_keys", "okapi_max_clock_offset_seconds",
    "okapi_membership_epoch",
    "okapi_operation_latency_seconds", "okapi_operations", "okapi_parked_requests", "okapi_peer_batches_received",
    "okapi_peer_link_dead", "okapi_peer_link_failures", "okapi_peer_link_probes", "okapi_peer_link_up",
    "okapi_peer_messages_resent", "okapi_peer_messages_sent", "okapi_pending_reads", "okapi_rejected_requests",
    "okapi_replicated_updates_received", "okapi_replicated_updates_sent", "okapi_replication_metadata_bytes",
    "okapi_replication_payload_bytes", "okapi_replication_queue_bytes", "okapi_replication_queue_messages",
    "okapi_server_info", "okapi_snapshot_leases", "okapi_snapshot_retries", "okapi_stabilization_bytes",
    "okapi_stabilization_messages", "okapi_stable_lag_seconds", "okapi_versions_collected", "okapi_versions_stored",
    "okapi_wait_seconds", "okapi_waits", "okapi_snapshot_read_stall_seconds",
}
#: Names the exporter must not use any more (renamed to follow the conventions; CHANGELOG).
RETIRED = {
    "okapi_usv_lag_milliseconds", "okapi_wait_max_seconds", "okapi_snapshot_read_stall_us",
    "okapi_storage_fsyncs_per_second", "okapi_storage_operations_per_fsync", "okapi_storage_versions_per_fsync",
}


async def _running_node(data_dir: Path | None) -> PartitionNode:
    """A started node of a 2-DC cluster (its links to the other DC open) with three PUTs."""
    config = local_cluster(dcs=("a", "b"), partitions=2, wan="off", base_port=45400)
    node = PartitionNode(config, 0, 0, data_dir=data_dir)
    node.start()
    # The other DC answers the restart request: it holds nothing of this server's, nothing was lost.
    node.run_core([CatchUpReply(ServerId(dc, 0), request_id, 0, 0)
                   for dc, request_id in node.core.catch_up.verifying.items()])
    for index in range(3):
        node.run_core([PutRequest(index + 1, b"k%d" % index, b"v", Session((0, 0), 0))])
    node.latency.observe("put", 0.002)
    await asyncio.sleep(0.05)
    return node


def _documents(tmp_path: Path) -> list[dict[str, Any]]:
    async def scenario(data_dir: Path | None) -> dict[str, Any]:
        node = await _running_node(data_dir)
        try:
            document: dict[str, Any] = json.loads(node.stats_json())
            return document
        finally:
            await node.close()

    return [asyncio.run(scenario(None)), asyncio.run(scenario(tmp_path / "data"))]


def test_the_stats_document_keeps_its_keys(tmp_path: Path) -> None:
    in_memory, durable = _documents(tmp_path)
    for document in (in_memory, durable):
        assert set(document) == TOP_LEVEL
        assert set(document["driver"]) == DRIVER
        assert document["links"] and all(set(link) == LINK for link in document["links"].values())
        assert set(document["input"]) == INPUT
        assert set(document["wire"]) == set(PeerWireBytes.__slots__)
        assert set(document["latency"]["put"]) == LATENCY
        core = document["core"]
        counters = {f.name for f in dataclasses.fields(ServerStats)}
        assert set(core) == counters, set(core) ^ counters
        assert document["keys"] == 3 and core["operations"] == {"put": 3}
    assert in_memory["storage"] is None
    storage = durable["storage"]
    assert isinstance(storage, dict) and set(storage) == STORAGE
    assert set(storage["recovered"]) == {"versions", "keys", "clock_bound_us"}  # no repair: no repair fields


def test_the_json_reads_back_to_the_same_document(tmp_path: Path) -> None:
    for document in _documents(tmp_path):
        text = json.dumps(document)
        assert to_document(from_json(text)) == document


def test_a_document_with_missing_keys_reads_as_zeros() -> None:
    snapshot = from_json(json.dumps({"protocol": "cure", "keys": 4, "core": {"operations": {"get": 2}, "mystery": 1},
                                     "links": {"b/0": {"connected": True}}, "unknown": [1]}))
    assert snapshot.identity.protocol == "cure" and snapshot.store.keys == 4 and snapshot.store.versions == 0
    assert snapshot.core.operations == {"get": 2} and snapshot.core.counters == {"mystery": 1}
    assert snapshot.links["b/0"].connected and snapshot.links["b/0"].queued == 0
    assert snapshot.storage is None and snapshot.stabilization.stable_lag_ms == ()
    assert summarize(from_json("{}"), ("a",))["operations_total"] == 0


def test_every_declared_figure_is_exported_under_its_metric_name() -> None:
    async def scenario() -> None:
        node = await _running_node(None)
        try:
            text = generate_latest(registry_for(node)).decode()
            snapshot = node.snapshot()
        finally:
            await node.close()
        families = {family.name: family for family in text_string_to_metric_families(text)}
        assert set(families) >= METRICS, METRICS - set(families)
        assert not set(families) & RETIRED
        for family in families.values():  # counters in base units, no label named like a metric's type
            assert not any(unit in family.name for unit in ("_milliseconds", "_us", "per_second", "per_fsync"))
            assert all("type" not in sample.labels for sample in family.samples), family.name
        for spec, name, value in exported(snapshot):
            metric = spec.name or f"okapi_{name}"
            assert families[metric].type == spec.kind, metric
            assert families[metric].samples[0].value == value, metric
        for name, value in snapshot.core.counters.items():  # each core counter, named or not
            metric = CORE_COUNTERS.get(name, (f"okapi_{name}", ""))[0]
            assert families[metric].type == "counter" and families[metric].samples[0].value == value, metric

    asyncio.run(scenario())


def test_a_new_figure_is_one_annotated_field() -> None:
    @dataclasses.dataclass(frozen=True)
    class Figures:
        widgets: Annotated[int, counter("Widgets made.")]
        level: Annotated[float, gauge("How full.", "okapi_fill_level", convert=lambda value: value / 100)]
        note: str

    figures = Figures(3, 50.0, "x")
    assert [(spec.kind, spec.name, name, value) for spec, name, value in exported(figures)] == [
        ("counter", "", "widgets", 3), ("gauge", "okapi_fill_level", "level", 0.5)]
    assert to_document(figures) == {"widgets": 3, "level": 50.0, "note": "x"}


def test_status_summarizes_the_snapshot(tmp_path: Path) -> None:
    document = _documents(tmp_path)[0]
    summary = summarize(from_json(json.dumps(document)), ("a", "b"))
    assert summary["protocol"] == "okapi" and summary["keys"] == 3 and summary["operations_total"] == 3
    assert summary["latency"]["put"]["count"] == 1
    assert summary["links_down"] == ["a/1", "b/0"]  # nothing answers its links
    assert summary["queue_messages"] >= 0 and set(summary["stable_lag_ms"]) == {"a", "b"}
    assert summary["fsyncs_per_s"] is None and summary["operations_per_fsync"] is None  # in memory: no fsyncs
    durable = summarize(from_json(json.dumps(_documents(tmp_path)[1])), ("a", "b"))
    assert isinstance(durable["fsyncs_per_s"], float) and isinstance(durable["operations_per_fsync"], float)


def test_a_durable_server_exports_its_fsyncs(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await _running_node(tmp_path / "data")
        try:
            deadline = time.monotonic() + 10  # the three PUTs' group commits on a busy machine
            while True:
                text = generate_latest(registry_for(node)).decode()
                families = {family.name: family for family in text_string_to_metric_families(text)}
                if families["okapi_storage_fsyncs"].samples[0].value >= 1 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.02)
        finally:
            await node.close()
        assert families["okapi_storage_fsyncs"].type == "counter"
        assert families["okapi_storage_fsyncs"].samples[0].value >= 1
        for name in ("okapi_storage_commit_seconds", "okapi_storage_operations_committed",
                     "okapi_storage_versions_written"):
            assert families[name].type == "counter", name
        free = families["okapi_storage_filesystem_free_bytes"].samples[0].value
        assert 0 < free <= families["okapi_storage_filesystem_size_bytes"].samples[0].value
        assert families["okapi_storage_disk_full"].samples[0].value == 0

    asyncio.run(scenario())
