"""Abuse must never take a server down or lose an acknowledged write: garbage bytes on the port,
unknown RPCs, malformed protobuf, oversized keys, values and messages, a foreign cluster's peer, and
a peer that goes away and comes back."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from integration_support import ClusterFactory, RunningCluster, eventually, get_value, keys_for_each_partition

from okapikv.cluster.config import split_address
from okapikv.core.partitioning import partition_of
from okapikv.wire import okapikv_pb2 as pb


def _identity(data: bytes) -> bytes:
    return data


def _write_some(cluster: RunningCluster, prefix: str, count: int = 20) -> dict[bytes, bytes]:
    written = {}
    for index in range(count):
        key, value = f"{prefix}-{index}".encode(), f"value-{index}".encode()
        cluster.stub_for_key(0, key).Put(pb.PutRequest(key=key, value=value), timeout=5)
        written[key] = value
    return written


def _assert_serving_and_intact(cluster: RunningCluster, written: dict[bytes, bytes]) -> None:
    for dc in (0, 1):
        for partition in (0, 1):
            health = health_pb2_grpc.HealthStub(cluster.channel(dc, partition))
            status = health.Check(health_pb2.HealthCheckRequest(), timeout=5).status
            assert status == health_pb2.HealthCheckResponse.SERVING
    for key, value in written.items():
        assert get_value(cluster, 0, key) == value
        assert eventually(functools.partial(get_value, cluster, 1, key)) == value


def _expect_status(code: grpc.StatusCode | set[grpc.StatusCode], call: object) -> grpc.RpcError:
    codes = code if isinstance(code, set) else {code}
    with pytest.raises(grpc.RpcError) as raised:
        call()  # type: ignore[operator]
    assert raised.value.code() in codes, raised.value
    return raised.value


def test_garbage_bytes_on_the_port(cluster: RunningCluster) -> None:
    written = _write_some(cluster, "garbage")
    host, port = split_address(cluster.address(0, 0))
    payloads = [
        b"\x00" * 64,
        b"GET / HTTP/1.1\r\nHost: okapi\r\n\r\n",
        os.urandom(8192),
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + os.urandom(4096),  # an HTTP/2 preface, then noise
    ]
    for payload in payloads:
        with socket.create_connection((host, port), timeout=5) as connection:
            connection.sendall(payload)
            connection.settimeout(1)
            with contextlib.suppress(OSError):
                connection.recv(1024)
    _assert_serving_and_intact(cluster, written)


def test_unknown_rpcs_and_malformed_protobuf(cluster: RunningCluster) -> None:
    written = _write_some(cluster, "malformed")
    channel = cluster.channel(0, 1)
    raw = {"request_serializer": _identity, "response_deserializer": _identity}
    _expect_status(grpc.StatusCode.UNIMPLEMENTED,
                   lambda: channel.unary_unary("/okapikv.KeyValue/Explode", **raw)(b"", timeout=5))
    _expect_status(grpc.StatusCode.UNIMPLEMENTED,
                   lambda: channel.unary_unary("/no.such.Service/Method", **raw)(b"abc", timeout=5))
    bad = {grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNKNOWN}
    for method in ("Put", "Get", "ReadTx", "Stats"):
        _expect_status(bad, lambda method=method: channel.unary_unary(f"/okapikv.KeyValue/{method}", **raw)(
            b"\xff\xff\xff\xff\x0f", timeout=5))
    pipeline = channel.stream_stream("/okapikv.KeyValue/Pipeline", **raw)
    _expect_status(bad, lambda: list(pipeline(iter([b"\x0a\xff\xff\xff"]), timeout=5)))
    link = channel.stream_stream("/okapikv.Peer/Link", **raw)
    _expect_status(bad, lambda: list(link(iter([b"\x12\x05garbage"]), timeout=5)))
    _assert_serving_and_intact(cluster, written)


def test_oversized_keys_values_and_messages(cluster: RunningCluster) -> None:
    written = _write_some(cluster, "oversized")
    key = keys_for_each_partition(2, "big")[0]
    stub = cluster.stub_for_key(0, key)
    error = _expect_status(grpc.StatusCode.INVALID_ARGUMENT,
                           lambda: stub.Put(pb.PutRequest(key=key, value=b"x" * ((1 << 20) + 1)), timeout=10))
    assert "exceeds the limit" in (error.details() or "")
    _expect_status(grpc.StatusCode.INVALID_ARGUMENT,
                   lambda: stub.Put(pb.PutRequest(key=b"k" * 1025, value=b"x"), timeout=5))
    _expect_status(grpc.StatusCode.INVALID_ARGUMENT, lambda: stub.Get(pb.GetRequest(key=b""), timeout=5))
    # Above the cluster's 2 MiB message limit gRPC refuses the message before it is decoded.
    _expect_status(grpc.StatusCode.RESOURCE_EXHAUSTED,
                   lambda: stub.Put(pb.PutRequest(key=key, value=b"x" * (3 << 20)), timeout=10))
    # A value exactly at the limit is fine, and so is reading it back.
    stub.Put(pb.PutRequest(key=key, value=b"y" * (1 << 20)), timeout=10)
    assert get_value(cluster, 0, key) == b"y" * (1 << 20)
    assert get_value(cluster, 1, key) in (None, b"y" * (1 << 20))
    _assert_serving_and_intact(cluster, written)
    stats = json.loads(stub.Stats(pb.StatsRequest(), timeout=5).json)
    assert stats["driver"]["handler_errors"] == 0
    assert stats["core"]["rejected_requests"] >= 3


def test_a_foreign_cluster_cannot_link(cluster: RunningCluster) -> None:
    link = cluster.channel(1, 0).stream_stream(
        "/okapikv.Peer/Link", request_serializer=pb.PeerBatch.SerializeToString,
        response_deserializer=pb.LinkAck.FromString)
    batch = pb.PeerBatch(cluster_id="someone-else", source=pb.ServerRef(dc=0, partition=0), incarnation=1,
                         first_sequence=1)
    batch.messages.add().heartbeat.timestamp = (1 << 64) - 1
    error = _expect_status(grpc.StatusCode.PERMISSION_DENIED, lambda: list(link(iter([batch]), timeout=5)))
    assert "someone-else" in (error.details() or "")
    stats = json.loads(cluster.stub(1, 0).Stats(pb.StatsRequest(), timeout=5).json)
    assert max(stats["vv"]) < (1 << 64) - 1  # the foreign heartbeat never reached the core


def test_writes_queued_for_a_stopped_peer_arrive_after_it_restarts(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory()
    key = keys_for_each_partition(2, "outage")[1]
    partition = partition_of(key, 2)
    assert cluster.stop("dc1", partition, signal.SIGTERM) == 0  # a clean shutdown exits 0
    reply = cluster.stub_for_key(0, key).Put(pb.PutRequest(key=key, value=b"while you were out"), timeout=5)
    assert reply.timestamp > 0
    time.sleep(0.3)  # the link to the stopped server fails and keeps the update queued
    cluster.start("dc1", partition)
    cluster.wait_serving()

    def value_once_repaired() -> bytes | None:
        try:
            return get_value(cluster, 1, key)
        except grpc.RpcError as error:
            # In memory, the restarted server first fetches back what its last run had from its
            # replicas, refusing clients meanwhile (okapikv.core.catchup, Verification).
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                return None
            raise

    assert eventually(value_once_repaired) == b"while you were out"
