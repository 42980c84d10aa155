"""The running store over real gRPC: 2 DCs x 2 partitions of `okapi server` processes on loopback
with a 5 ms emulated one-way WAN delay."""

from __future__ import annotations

import functools
import json
from typing import Any

import grpc
import pytest
from integration_support import ClusterFactory, RunningCluster, eventually, get_value, keys_for_each_partition

from okapikv.core.partitioning import partition_of
from okapikv.wire import okapikv_pb2 as pb


def test_cluster_info_returns_the_topology(cluster: RunningCluster) -> None:
    info = cluster.stub(1, 1).ClusterInfo(pb.ClusterInfoRequest(), timeout=5)
    assert info.cluster_id == cluster.config.cluster_id
    assert list(info.dc_names) == ["dc0", "dc1"]
    assert info.num_partitions == 2
    assert info.protocol == "okapi"
    assert (info.dc, info.partition) == (1, 1)
    assert info.max_value_bytes == 1 << 20
    assert info.max_message_bytes == 2 << 20
    servers = {(s.dc, s.partition): s.address for s in info.servers}
    assert servers == {(cluster.config.dc_index(s.dc), s.partition): s.address for s in cluster.config.servers}


def test_put_in_one_dc_becomes_visible_in_the_other(cluster: RunningCluster) -> None:
    for key in keys_for_each_partition(2, "geo"):
        reply = cluster.stub_for_key(0, key).Put(pb.PutRequest(key=key, value=b"from dc0"), timeout=5)
        assert not reply.found and reply.timestamp > 0
        assert get_value(cluster, 0, key) == b"from dc0"  # read-your-writes in the DC
        assert eventually(functools.partial(get_value, cluster, 1, key)) == b"from dc0"


def test_swap_and_delete_report_the_previous_value(cluster: RunningCluster) -> None:
    key = b"swap-me"
    stub = cluster.stub_for_key(0, key)
    stub.Put(pb.PutRequest(key=key, value=b"one"), timeout=5)
    swapped = stub.Swap(pb.SwapRequest(key=key, value=b"two"), timeout=5)
    assert swapped.found and swapped.old_value == b"one"
    deleted = stub.Delete(pb.DeleteRequest(key=key), timeout=5)
    assert deleted.found
    assert get_value(cluster, 0, key) is None
    assert not stub.Delete(pb.DeleteRequest(key=key), timeout=5).found


def test_misrouted_key_is_refused(cluster: RunningCluster) -> None:
    key = keys_for_each_partition(2, "route")[1]
    with pytest.raises(grpc.RpcError) as raised:
        cluster.stub(0, 0).Put(pb.PutRequest(key=key, value=b"x"), timeout=5)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "partition 1" in raised.value.details()


def test_read_tx_and_scan_see_one_snapshot_across_partitions(cluster: RunningCluster) -> None:
    keys = [f"snap-{i:02d}".encode() for i in range(10)]
    session = pb.Session()
    for key in keys:
        reply = cluster.stub_for_key(0, key).Put(pb.PutRequest(key=key, value=key.upper(), session=session),
                                                 timeout=5)
        session = reply.session
    assert {partition_of(key, 2) for key in keys} == {0, 1}
    tx = cluster.stub(0, 1).ReadTx(pb.ReadTxRequest(keys=[*keys, b"snap-missing"], session=session), timeout=5)
    assert [v.value for v in tx.values[:-1]] == [key.upper() for key in keys]
    assert all(v.found for v in tx.values[:-1]) and not tx.values[-1].found
    scan = cluster.stub(0, 0).Scan(pb.ScanRequest(start=b"snap-", end=b"snap-~", session=session), timeout=5)
    assert [(item.key, item.value) for item in scan.items] == [(key, key.upper()) for key in keys]
    limited = cluster.stub(0, 0).Scan(pb.ScanRequest(start=b"snap-", end=b"snap-~", limit=3, session=session),
                                      timeout=5)
    assert [item.key for item in limited.items] == keys[:3]

    def remote_scan() -> list[bytes] | None:
        reply = cluster.stub(1, 0).Scan(pb.ScanRequest(start=b"snap-", end=b"snap-~"), timeout=5)
        found = [item.key for item in reply.items]
        return found if found == keys else None

    eventually(remote_scan)


def test_pipeline_stream_answers_a_batch_of_64(cluster: RunningCluster) -> None:
    partition = 0
    keys = [key for key in (f"pipe-{i}".encode() for i in range(400)) if partition_of(key, 2) == partition][:32]
    batch = pb.OperationBatch()
    for index, key in enumerate(keys):
        operation = batch.operations.add(id=1000 + index)
        operation.put.key = key
        operation.put.value = b"v%d" % index
    for index, key in enumerate(keys):
        batch.operations.add(id=2000 + index).get.key = key
    assert len(batch.operations) == 64
    reads = pb.OperationBatch()
    reads.operations.add(id=1).read_tx.keys.extend(keys[:4])
    reads.operations.add(id=2)  # no request in the oneof: answered with an error, the rest still work
    results: dict[int, Any] = {}
    for result_batch in cluster.stub(0, partition).Pipeline(iter([batch, reads]), timeout=10):
        for result in result_batch.results:
            results[result.id] = result
    assert len(results) == 66
    for index, _key in enumerate(keys):
        assert results[1000 + index].WhichOneof("result") == "put"
        got = results[2000 + index]
        assert got.WhichOneof("result") == "get" and got.get.found and got.get.value == b"v%d" % index
    assert [v.value for v in results[1].read_tx.values] == [b"v0", b"v1", b"v2", b"v3"]
    assert results[2].WhichOneof("result") == "error" and results[2].error.code == "INVALID_ARGUMENT"


def test_pipeline_reports_refusals_per_operation(cluster: RunningCluster) -> None:
    batch = pb.OperationBatch()
    batch.operations.add(id=7).put.key = b""  # empty key: refused
    batch.operations.add(id=8).get.key = keys_for_each_partition(2, "ok")[0]
    results = {r.id: r for b in cluster.stub(0, 0).Pipeline(iter([batch]), timeout=10) for r in b.results}
    assert results[7].error.code == "INVALID_ARGUMENT" and "empty" in results[7].error.message
    assert results[8].WhichOneof("result") == "get"


def test_stats_json_has_counts(cluster: RunningCluster) -> None:
    key = keys_for_each_partition(2, "stats")[0]
    cluster.stub_for_key(0, key).Put(pb.PutRequest(key=key, value=b"x"), timeout=5)
    stats = json.loads(cluster.stub_for_key(0, key).Stats(pb.StatsRequest(), timeout=5).json)
    assert stats["protocol"] == "okapi" and stats["dc"] == "dc0" and stats["partition"] == partition_of(key, 2)
    assert stats["core"]["operations"]["put"] >= 1
    assert stats["core"]["heartbeats_sent"] > 0
    assert len(stats["vv"]) == len(stats["stable"]) == len(stats["gsv"]) == 2
    assert stats["parked"] == 0
    assert stats["keys"] >= 1
    assert stats["clock_us"] > 0
    assert all(link["connected"] for link in stats["links"].values())
    lag = stats["stable_lag_ms"]
    assert all(value is not None and value < 5_000 for value in lag)
    own, remote = stats["stable_lag_samples"][stats["dc_index"]], stats["stable_lag_samples"][1 - stats["dc_index"]]
    assert own == {} and sum(remote.values()) > 0  # the remote DC's lag, sampled at the timer ticks


def test_health_reports_serving(cluster: RunningCluster) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    stub = health_pb2_grpc.HealthStub(cluster.channel(1, 0))
    for service in ("", "okapikv.KeyValue"):
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_servers_started_in_reverse_order_converge(cluster_factory: ClusterFactory) -> None:
    reversed_cluster = cluster_factory(start=False)
    order = [(s.dc, s.partition) for s in reversed(reversed_cluster.config.servers)]
    reversed_cluster.start_all(order=order, pause_s=0.3)
    for source, destination in ((0, 1), (1, 0)):
        for key in keys_for_each_partition(2, f"reverse-{source}"):
            reversed_cluster.stub_for_key(source, key).Put(pb.PutRequest(key=key, value=b"v"), timeout=5)
            assert eventually(functools.partial(get_value, reversed_cluster, destination, key)) == b"v"
