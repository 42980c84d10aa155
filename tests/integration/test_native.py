"""The native port (``okapikv.server.native``) against real server processes: advertised through
ClusterInfo, used by both clients with the same answers as gRPC, refusing whatever breaks the
framing without harm to the server, followed to a new port when a server restarts, and off with
``native = false`` (clients then pipeline over gRPC)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import time

import pytest
from integration_support import ClusterFactory, RunningCluster, get_value

from okapikv.client import AsyncClient, Client
from okapikv.cluster.config import split_address
from okapikv.core.messages import GetReply, Session
from okapikv.errors import InvalidArgument
from okapikv.server.pipeline import MAX_UNSENT_BYTES, MAX_UNSENT_RESULTS
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import result_size_bound
from okapikv.wire.frames import MAGIC, FrameDecoder, encode_frame


def _native_port(cluster: RunningCluster, dc: int, partition: int) -> int:
    port: int = cluster.stub(dc, partition).ClusterInfo(pb.ClusterInfoRequest(), timeout=5).native_port
    return port


def _driver_stats(cluster: RunningCluster, dc: int, partition: int) -> dict[str, int]:
    stats = json.loads(cluster.stub(dc, partition).Stats(pb.StatsRequest(), timeout=5).json)
    driver: dict[str, int] = stats["driver"]
    return driver


def _exchange(host: str, port: int, data: bytes) -> list[pb.ResultBatch]:
    """Send raw bytes to a native port; the result batches received until the server closes."""
    decoder = FrameDecoder()
    frames: list[bytes] = []
    with socket.create_connection((host, port), timeout=5) as connection:
        connection.sendall(data)
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            frames += decoder.feed(chunk)
    return [pb.ResultBatch.FromString(frame) for frame in frames]


def _session_ops(client: Client, prefix: str) -> list[object]:
    keys = [f"{prefix}-{index}".encode() for index in range(6)]
    answers: list[object] = [client.put(key, b"one") for key in keys]
    answers += [client.get(key) for key in keys]
    answers.append(client.swap(keys[0], b"two"))
    answers.append(client.delete(keys[1]))
    answers.append(client.get(keys[1]))
    answers.append(client.read_tx(keys))
    scanned = client.scan(f"{prefix}-".encode(), f"{prefix}-~".encode())
    answers.append([(key.removeprefix(prefix.encode()), value) for key, value in scanned])
    counter = f"{prefix}-counter"
    answers += [client.incr(counter), client.incr(counter, 5), client.incr(counter, by=-10), client.get(counter)]
    with pytest.raises(InvalidArgument, match="value is not an integer or out of range"):
        client.incr(keys[0])
    expiring = f"{prefix}-expiring"
    client.put(expiring, b"soon", ttl=100)
    expiry = client.expire(expiring)
    answers += [expiry.value, 0 < expiry.ttl_us <= 100_000_000, expiry.changed]
    answers.append(client.expire(expiring, persist=True))
    answers.append(client.expire(expiring, at_ms=1))  # a Unix time long past: gone at once
    answers.append(client.get(expiring))
    return answers


def test_both_clients_use_the_native_port_with_the_same_answers_as_grpc(cluster: RunningCluster) -> None:
    ports = [_native_port(cluster, 0, partition) for partition in (0, 1)]
    assert all(ports) and len(set(ports)) == 2
    before = [_driver_stats(cluster, 0, partition)["native_connections"] for partition in (0, 1)]
    address = cluster.address(0, 0)
    with Client(address, timeout_s=10) as native, Client(address, timeout_s=10, native=False) as grpc_only:
        assert _session_ops(native, "native") == _session_ops(grpc_only, "grpc")
    after = [_driver_stats(cluster, 0, partition)["native_connections"] for partition in (0, 1)]
    assert all(b > a for a, b in zip(before, after, strict=True)), "the blocking client did not use the native port"

    async def concurrent() -> tuple[list[bytes | None], tuple[int, int]]:
        async with AsyncClient(address, timeout_s=10) as client:
            sessions = [client.fork() for _ in range(32)]
            await asyncio.gather(*(s.put(f"async-{i}", f"v{i}") for i, s in enumerate(sessions)))
            values = await asyncio.gather(*(s.get(f"async-{i}") for i, s in enumerate(sessions)))
            counted = await asyncio.gather(*(s.incr("async-counter", 2) for s in sessions))
            assert sorted(counted) == list(range(2, 65, 2))  # one key's server: each sees those before it
            return list(values), client.pipeline_counters()

    values, (batches, operations) = asyncio.run(concurrent())
    assert values == [f"v{i}".encode() for i in range(32)]
    assert operations == 96 and batches < operations  # batched
    assert [_driver_stats(cluster, 0, p)["native_connections"] for p in (0, 1)] > after


@pytest.mark.parametrize("payload, reason", [
    (b"GET / HTTP/1.1\r\nHost: okapi\r\n\r\n", "bad preamble"),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "bad preamble"),
    (MAGIC + struct.pack(">I", 3 << 20), "exceeds the limit"),  # the cluster's limit is 2 MiB
    (MAGIC + encode_frame(b"\xff\xff\xff\xff garbage"), "not an OperationBatch"),
])
def test_what_breaks_the_framing_is_refused_and_harms_nothing(cluster: RunningCluster, payload: bytes,
                                                              reason: str) -> None:
    host = split_address(cluster.address(0, 0))[0]
    port = _native_port(cluster, 0, 0)
    refused_before = _driver_stats(cluster, 0, 0)["native_refused"]
    batches = _exchange(host, port, payload)
    assert len(batches) == 1 and batches[0].results[0].id == 0
    assert batches[0].results[0].error.code == "INVALID_ARGUMENT"
    assert reason in batches[0].results[0].error.message
    assert _driver_stats(cluster, 0, 0)["native_refused"] == refused_before + 1
    # Random bytes after a good preamble either parse as a huge length or as garbage: refused too.
    _exchange(host, port, MAGIC + os.urandom(4096))
    with Client(cluster.address(0, 0), timeout_s=10) as client:
        client.put(b"after-garbage", b"fine")
        assert client.get(b"after-garbage") == b"fine"


def test_a_well_formed_batch_over_a_raw_socket(cluster: RunningCluster) -> None:
    """The format is what the docs say: preamble, then length-prefixed protobuf both ways."""
    host = split_address(cluster.address(0, 0))[0]
    batch = pb.OperationBatch()
    operation = batch.operations.add(id=7)
    operation.get.key = b"no-such-key"
    with socket.create_connection((host, _native_port(cluster, 0, 0)), timeout=5) as connection:
        connection.sendall(MAGIC + encode_frame(batch.SerializeToString()))
        decoder = FrameDecoder()
        frames: list[bytes] = []
        while not frames:
            frames = decoder.feed(connection.recv(65536))
    result = pb.ResultBatch.FromString(frames[0]).results[0]
    assert result.id == 7 and result.WhichOneof("result") == "get" and not result.get.found


def test_a_restarted_server_is_found_on_its_new_native_port(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(dcs=("solo",), partitions=1)
    with Client(cluster.address(0, 0), timeout_s=30) as client:
        client.put(b"kept", b"in memory until the restart")
        cluster.stop(0, 0)
        cluster.start(0, 0)
        cluster.wait_serving()
        assert client.get(b"kept") is None  # an in-memory server: the point is that the call works
        client.put(b"after", b"restart")
        assert get_value(cluster, 0, b"after") == b"restart"
    assert _driver_stats(cluster, 0, 0)["native_connections"] >= 1


def test_native_off_serves_clients_over_grpc(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(dcs=("solo",), partitions=1, native=False)
    assert _native_port(cluster, 0, 0) == 0
    with Client(cluster.address(0, 0), timeout_s=10) as client:
        client.put(b"k", b"v")
        assert client.get(b"k") == b"v"

    async def with_async_client() -> bytes | None:
        async with AsyncClient(cluster.address(0, 0), timeout_s=10) as client:
            await client.put(b"k2", b"v2")
            return await client.get(b"k2")

    assert asyncio.run(with_async_client()) == b"v2"
    assert _driver_stats(cluster, 0, 0)["native_connections"] == 0


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def test_a_client_that_never_reads_is_flow_controlled(cluster_factory: ClusterFactory) -> None:
    """A client that sends without ever reading ends up blocked: the server stops reading once
    ``MAX_UNSENT_RESULTS`` results (or ``MAX_UNSENT_BYTES``) wait behind a full write buffer,
    instead of buffering without bound; it keeps serving everyone else, and once the client reads,
    every result arrives and the server reads again."""
    cluster = cluster_factory(dcs=("solo",), partitions=1)
    process = cluster.processes[("solo", 0)]
    host = split_address(cluster.address(0, 0))[0]
    # Kilobyte keys and values fill the socket buffers both ways after a few thousand operations,
    # so that what blocks the sender is the server's own limit on unsent results.
    key, value = b"k" * 1000, b"v" * 1000
    with Client(cluster.address(0, 0), timeout_s=10) as client:
        client.put(key, value)
    rss_before = _rss_bytes(process.pid)
    per_frame, complete, next_id = 500, 0, 1  # complete: operations in frames sent in full
    pending = memoryview(b"")
    blocked = False
    connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with connection:
        # Small buffers at this end (set before connecting) keep what the kernel holds small.
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 10)
        connection.settimeout(5)
        connection.connect((host, _native_port(cluster, 0, 0)))
        connection.sendall(MAGIC)
        connection.settimeout(1.0)  # a send that makes no progress for 1 s: the server stopped reading
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            if not pending:
                batch = pb.OperationBatch()
                for operation_id in range(next_id, next_id + per_frame):
                    batch.operations.add(id=operation_id).get.key = key
                next_id += per_frame
                pending = memoryview(encode_frame(batch.SerializeToString()))
            try:
                pending = pending[connection.send(pending):]
            except TimeoutError:
                blocked = True
                break
            if not pending:
                complete = next_id - 1
        rss_blocked = _rss_bytes(process.pid)
        assert blocked, f"sent {next_id - 1} operations without ever blocking"
        # the sink fills at whichever limit comes first (each result carries the 1000-byte value,
        # and counts for the bound on its size the sink keeps, not its exact size)
        least = min(MAX_UNSENT_RESULTS, MAX_UNSENT_BYTES // result_size_bound(GetReply(0, value, Session((0,), 0))))
        assert complete >= least, f"blocked after only {complete} operations"
        assert rss_blocked < 500 << 20, f"the server grew from {rss_before >> 20} to {rss_blocked >> 20} MiB"
        assert process.poll() is None, "the server died"
        with Client(cluster.address(0, 0), timeout_s=10) as client:  # others are still served
            client.put(b"after-flood", b"still serving")
            assert client.get(b"after-flood") == b"still serving"

        def receive(count: int) -> list[int]:
            """Read results until ``count`` arrived; their ids (each must carry the value)."""
            decoder = FrameDecoder()
            ids: list[int] = []
            while len(ids) < count:
                chunk = connection.recv(1 << 20)
                assert chunk, f"the server closed the connection after {len(ids)} of {count} results"
                for frame in decoder.feed(chunk):
                    for result in pb.ResultBatch.FromString(frame).results:
                        assert result.WhichOneof("result") == "get" and result.get.value == value, result
                        ids.append(result.id)
            assert not decoder.buffered
            return ids

        connection.settimeout(10)
        assert sorted(receive(complete)) == list(range(1, complete + 1))
        connection.sendall(pending)  # the rest of the frame that blocked: the server reads again
        assert sorted(receive(next_id - 1 - complete)) == list(range(complete + 1, next_id))
    assert process.poll() is None


def test_unsent_results_are_bounded_in_bytes_too(cluster_factory: ClusterFactory) -> None:
    """Large values: the server stops taking operations once ``MAX_UNSENT_BYTES`` of results wait,
    long before ``MAX_UNSENT_RESULTS`` of them would (a count alone let 64 KiB values pin gigabytes:
    720 MiB after 6 s here, and growing)."""
    cluster = cluster_factory(dcs=("solo",), partitions=1)
    process = cluster.processes[("solo", 0)]
    with Client(cluster.address(0, 0), timeout_s=10) as client:
        client.put(b"big", b"x" * (64 << 10))
    host = split_address(cluster.address(0, 0))[0]
    with socket.create_connection((host, _native_port(cluster, 0, 0)), timeout=5) as connection:
        connection.sendall(MAGIC)
        connection.settimeout(1.0)
        sent, deadline = 0, time.monotonic() + 4.0
        while time.monotonic() < deadline:
            batch = pb.OperationBatch()
            for operation_id in range(sent + 1, sent + 101):
                batch.operations.add(id=operation_id).get.key = b"big"
            try:
                connection.sendall(encode_frame(batch.SerializeToString()))
            except TimeoutError:
                break
            sent += 100
        time.sleep(1.0)  # whatever the server still does with what it took
        rss = _rss_bytes(process.pid)
    assert rss < 400 << 20, f"server RSS {rss >> 20} MiB after {sent} operations of 64 KiB results"
    with Client(cluster.address(0, 0), timeout_s=10) as client:
        assert client.get(b"big") == b"x" * (64 << 10)
