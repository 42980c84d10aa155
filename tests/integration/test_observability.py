"""Metrics, `okapi status` and structured logs on a live cluster of real server processes.

A GentleRain cluster (2 DCs x 1 partition, 5 ms WAN) runs a known workload: its RO-TX waits for the
stable time, so the wait metrics have something to count. Then every figure the issue names is
scraped from the servers' Prometheus endpoints and compared with the workload; `okapi status`
shows the cluster, and flags the server we stop; the servers' logs are one JSON event per line.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from integration_support import ClusterFactory, RunningCluster, eventually, free_port_range
from prometheus_client.parser import text_string_to_metric_families

from okapikv import compiled
from okapikv.wire import okapikv_pb2 as pb

OKAPI = [sys.executable, "-m", "okapikv.cli"]
PUTS = 20
OVERWRITES = 5
UNARY_GETS = 10
PIPELINED_GETS = 10

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(address: str) -> Samples:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample ``name`` whose labels include ``labels`` (None if absent)."""
    wanted = set(labels.items())
    found = [sample_value for (sample_name, sample_labels), sample_value in samples.items()
             if sample_name == name and wanted <= sample_labels]
    assert len(found) <= 1, f"{name} {labels} is ambiguous"
    return found[0] if found else None


def _metrics_cluster(cluster_factory: ClusterFactory) -> RunningCluster:
    cluster = cluster_factory(("dc0", "dc1"), 1, start=False, protocol="gentlerain")
    base = free_port_range(2)
    servers = tuple(dataclasses.replace(server, metrics_port=base + index)
                    for index, server in enumerate(cluster.config.servers))
    cluster.config = dataclasses.replace(cluster.config, servers=servers)
    cluster.config.dump(cluster.path)
    cluster.start_all()
    return cluster


def _workload(cluster: RunningCluster) -> None:
    stub = cluster.stub(0, 0)
    for index in range(PUTS):
        stub.Put(pb.PutRequest(key=b"key-%02d" % index, value=b"v"), timeout=10)
    for round_number in range(OVERWRITES):
        stub.Put(pb.PutRequest(key=b"hot", value=b"round %d" % round_number), timeout=10)
    for index in range(UNARY_GETS):
        stub.Get(pb.GetRequest(key=b"key-%02d" % index), timeout=10)
    batch = pb.OperationBatch()
    for index in range(PIPELINED_GETS):
        batch.operations.add(id=index).get.key = b"key-%02d" % index
    results = [result for reply in stub.Pipeline(iter([batch]), timeout=10) for result in reply.results]
    assert sorted(result.id for result in results) == list(range(PIPELINED_GETS))
    # GentleRain: a read-only transaction right after our own write waits until the DC's stable
    # time covers it (about the WAN delay): one wait with reason tx_stable.
    write = stub.Put(pb.PutRequest(key=b"hot", value=b"final"), timeout=10)
    reply = stub.ReadTx(pb.ReadTxRequest(keys=[b"hot"], session=write.session), timeout=10)
    assert reply.values[0].value == b"final"


def test_metrics_status_and_json_logs(cluster_factory: ClusterFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OKAPI_LOG_FORMAT", "json")  # inherited by the server processes
    cluster = _metrics_cluster(cluster_factory)
    _workload(cluster)
    puts = PUTS + OVERWRITES + 1
    dc0_metrics, dc1_metrics = (server.metrics_address for server in cluster.config.servers)
    assert dc0_metrics is not None and dc1_metrics is not None

    progress: dict[str, float | None] = {}

    def settled() -> Samples | None:
        """dc0's figures once replication, stabilization and GC have caught up everywhere."""
        samples, remote = scrape(dc0_metrics), scrape(dc1_metrics)
        # Received counts re-deliveries too (a link resends its unacknowledged tail after a
        # reconnect, which a loaded machine can cause): the exact figure is the remote key count.
        progress["received"] = value(remote, "okapi_replicated_updates_received_total")
        progress["remote_keys"] = value(remote, "okapi_keys")
        progress["collected"] = value(samples, "okapi_versions_collected_total")
        progress["stored"] = value(samples, "okapi_versions_stored")
        if progress["remote_keys"] != PUTS + 1 or (progress["received"] or 0) < puts or not progress["collected"]:
            return None
        return samples

    try:
        samples = eventually(settled, timeout_s=30)
    except AssertionError as error:
        raise AssertionError(f"{error}: {progress}") from None
    here = {"dc": "dc0", "partition": "0"}
    assert value(samples, "okapi_operations_total", operation="put", **here) == puts
    assert value(samples, "okapi_operations_total", operation="get", **here) == UNARY_GETS + PIPELINED_GETS
    assert value(samples, "okapi_operations_total", operation="read_tx", **here) == 1
    assert value(samples, "okapi_operation_latency_seconds_count", operation="put") == puts
    assert value(samples, "okapi_operation_latency_seconds_count", operation="get") == UNARY_GETS + PIPELINED_GETS
    assert value(samples, "okapi_operation_latency_seconds_bucket", operation="put", le="+Inf") == puts
    assert 0 < (value(samples, "okapi_operation_latency_seconds_sum", operation="put") or 0) < puts * 1.0
    assert value(samples, "okapi_waits_total", reason="tx_stable") == 1
    assert 0 < (value(samples, "okapi_wait_seconds_total", reason="tx_stable") or 0) < 1.0
    assert value(samples, "okapi_replicated_updates_sent_total") == puts
    assert value(samples, "okapi_replication_metadata_bytes_total") == 12 * puts  # GentleRain: 12 B/update
    # One partition per DC: GentleRain computes its GST without stabilization messages.
    assert value(samples, "okapi_stabilization_bytes_total") == 0
    assert (value(samples, "okapi_heartbeat_bytes_total") or 0) > 0
    # Versions: 20 keys + the hot key; GC keeps only the newest version of "hot".
    assert value(samples, "okapi_keys") == PUTS + 1
    collected = value(samples, "okapi_versions_collected_total") or 0
    assert 1 <= collected <= OVERWRITES
    assert value(samples, "okapi_versions_stored") == PUTS + 1 + OVERWRITES - collected
    for source in ("dc0", "dc1"):
        lag = value(samples, "okapi_stable_lag_seconds", source_dc=source)
        assert lag is not None and -0.05 < lag < 5, (source, lag)
    peer = {"peer_dc": "dc1", "peer_partition": "0"}
    assert value(samples, "okapi_peer_link_up", **peer) == 1
    assert value(samples, "okapi_replication_queue_messages", state="pending", **peer) is not None
    assert value(samples, "okapi_replication_queue_bytes", state="unacked", **peer) is not None
    assert (value(samples, "process_resident_memory_bytes") or 0) > 0

    # `okapi status` (one-shot table, --json, --watch) on the live cluster ...
    table = subprocess.run([*OKAPI, "status", "--config", str(cluster.path)], capture_output=True, text=True,
                           timeout=60)
    assert table.returncode == 0, table.stdout + table.stderr
    assert "dc0" in table.stdout and "dc1" in table.stdout and "DOWN" not in table.stdout
    watched = subprocess.Popen([*OKAPI, "status", "--config", str(cluster.path), "--watch", "0.2", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watched.stdout is not None
        lines = [watched.stdout.readline(), watched.stdout.readline()]
    finally:
        watched.terminate()
        watched.wait(timeout=10)
    refreshes = [json.loads(line) for line in lines]
    assert all(server["reachable"] for server in refreshes[1]["servers"])
    assert all("operations_per_s" in server for server in refreshes[1]["servers"])
    first = refreshes[0]["servers"][0]
    assert first["operations"]["put"] == puts and first["waits"]["tx_stable"]["count"] == 1

    # ... and with a server stopped: exit status 1, the server flagged.
    cluster.stop("dc1", 0)
    down = subprocess.run([*OKAPI, "status", "--config", str(cluster.path), "--json"], capture_output=True,
                          text=True, timeout=60)
    assert down.returncode == 1
    assert [s["reachable"] for s in json.loads(down.stdout)["servers"]] == [True, False]
    table = subprocess.run([*OKAPI, "status", "--config", str(cluster.path)], capture_output=True, text=True,
                           timeout=60)
    assert table.returncode == 1 and "DOWN" in table.stdout and "down:" in table.stdout

    _check_json_logs(cluster.log_path("dc0", 0))


def _check_json_logs(path: Path) -> None:
    deadline = time.monotonic() + 5
    events: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        lines = [line for line in path.read_text().splitlines() if line.startswith("{")]
        events = [json.loads(line) for line in lines]
        if any(event.get("event") == "listening" for event in events):
            break
        time.sleep(0.1)
    assert events, path.read_text()
    assert all(event["dc"] == "dc0" and event["partition"] == 0 and event["level"] for event in events)
    listening = next(event for event in events if event.get("event") == "listening")
    assert listening["metrics_port"] and listening["tls"] is False
    # which build runs, pure Python or the opt-in compiled one (okapikv.compiled), before it listens
    build = next(event for event in events if event.get("event") == "build")
    available = compiled.available()
    assert isinstance(build["compiled"], list) and set(build["compiled"]) <= set(available)
    assert bool(build["compiled"]) == bool(available) and events.index(build) < events.index(listening)
