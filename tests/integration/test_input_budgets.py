"""Input budgets and connection timeouts (``okapikv.server.budgets``, ``[connections]``) against a
real server: connections that announce large frames and send only part of them pin a bounded amount
of memory and are closed by the frame timeout, a connection that never sends a frame or goes idle
is closed, the gRPC port drops a client that never finishes its handshake, and other clients are
served throughout."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from integration_support import ClusterFactory, RunningCluster, cluster_processes

from okapikv.client import Client
from okapikv.cluster.config import split_address
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.frames import MAGIC, FrameDecoder

MIB = 1 << 20
FRAME_TIMEOUT_S = 8.0
FIRST_FRAME_TIMEOUT_S = 2.0
IDLE_TIMEOUT_S = 4.0
ANNOUNCED = 60 * MIB  # below the default 64 MiB message limit: only the budget can refuse it
SENT = 40 * MIB
CONNECTIONS = 10


@pytest.fixture(scope="module")
def solo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    """One server, default limits and budget, short timeouts (so the test waits seconds)."""
    with cluster_processes(tmp_path_factory.mktemp("budgets")) as (make, _):
        factory: ClusterFactory = make
        yield factory(dcs=("solo",), partitions=1, connections={
            "frame_timeout_ms": FRAME_TIMEOUT_S * 1000, "first_frame_timeout_ms": FIRST_FRAME_TIMEOUT_S * 1000,
            "idle_timeout_ms": IDLE_TIMEOUT_S * 1000})


def _stats(cluster: RunningCluster) -> dict[str, Any]:
    stats: dict[str, Any] = json.loads(cluster.stub(0, 0).Stats(pb.StatsRequest(), timeout=5).json)
    return stats


def _native(cluster: RunningCluster) -> tuple[str, int]:
    info = cluster.stub(0, 0).ClusterInfo(pb.ClusterInfoRequest(), timeout=5)
    return split_address(cluster.address(0, 0))[0], info.native_port


def _rss_mib(cluster: RunningCluster) -> float:
    with open(f"/proc/{cluster.processes[('solo', 0)].pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _closed_with(connection: socket.socket, timeout_s: float) -> tuple[float, str | None]:
    """Wait until the server closes ``connection``: how long it took and the refusal it sent."""
    started = time.monotonic()
    connection.settimeout(timeout_s)
    decoder = FrameDecoder()
    frames: list[bytes] = []
    try:
        while chunk := connection.recv(1 << 16):
            frames += decoder.feed(chunk)
    except ConnectionResetError:
        pass
    elapsed = time.monotonic() - started
    if not frames:
        return elapsed, None
    error = pb.ResultBatch.FromString(frames[0]).results[0].error
    return elapsed, f"{error.code}: {error.message}"


def _half_send(host: str, port: int) -> socket.socket | None:
    """Announce an ``ANNOUNCED``-byte frame and send ``SENT`` bytes of it; None if the server
    closed the connection on the way (refused)."""
    connection = socket.create_connection((host, port), timeout=10)
    chunk = b"\0" * MIB
    try:
        connection.sendall(MAGIC + struct.pack(">I", ANNOUNCED))
        for _ in range(SENT // MIB):
            connection.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        connection.close()
        return None
    return connection


def test_half_sent_frames_pin_bounded_memory_and_are_closed_by_the_frame_timeout(solo: RunningCluster) -> None:
    host, port = _native(solo)
    budget = _stats(solo)["input"]["budget_bytes"]
    admitted_most = budget // (ANNOUNCED + 4)
    rss_before = _rss_mib(solo)
    started = time.monotonic()
    held = [connection for connection in (_half_send(host, port) for _ in range(CONNECTIONS)) if connection]
    time.sleep(0.5)  # the server reads what the kernel still holds
    rss_held = _rss_mib(solo)
    stats = _stats(solo)["input"]
    print(f"RSS {rss_before:.0f} MiB before, {rss_held:.0f} MiB with {CONNECTIONS} connections each announcing "
          f"{ANNOUNCED // MIB} MiB and sending {SENT // MIB} MiB ({len(held)} admitted by the "
          f"{budget // MIB} MiB budget)")
    try:
        assert 0 < len(held) <= admitted_most
        assert stats["closed"]["input_budget"] >= CONNECTIONS - len(held)
        assert stats["partial_bytes"] == len(held) * (ANNOUNCED + 4) <= budget
        # 400 MB of half-sent frames without the budget: now what the admitted ones sent, plus slack
        assert rss_held - rss_before < admitted_most * SENT / MIB + 60, (rss_before, rss_held)
        with Client(solo.address(0, 0), timeout_s=10) as client:  # everyone else is served
            client.put(b"during", b"served")
            assert client.get(b"during") == b"served"
        for connection in held:
            remaining = FRAME_TIMEOUT_S + 3 - (time.monotonic() - started)
            _, refusal = _closed_with(connection, max(remaining, 0.1))
            assert refusal is not None and refusal.startswith("DEADLINE_EXCEEDED") and "not complete" in refusal
        assert time.monotonic() - started >= FRAME_TIMEOUT_S - 1
    finally:
        for connection in held:
            connection.close()
    stats = _stats(solo)["input"]
    assert stats["partial_bytes"] == 0 and stats["closed"]["frame_timeout"] >= len(held)
    print(f"RSS {_rss_mib(solo):.0f} MiB after the frame timeout closed them")
    with Client(solo.address(0, 0), timeout_s=10) as client:
        assert client.get(b"during") == b"served"


def test_a_connection_that_never_completes_a_frame_or_goes_idle_is_closed(solo: RunningCluster) -> None:
    host, port = _native(solo)
    with socket.create_connection((host, port), timeout=5) as silent:
        silent.sendall(MAGIC)  # a preamble, then nothing
        elapsed, refusal = _closed_with(silent, FIRST_FRAME_TIMEOUT_S + 3)
    assert refusal is not None and "no complete frame" in refusal
    assert FIRST_FRAME_TIMEOUT_S - 0.5 <= elapsed < FIRST_FRAME_TIMEOUT_S + 2
    batch = pb.OperationBatch()
    batch.operations.add(id=1).get.key = b"k"
    with socket.create_connection((host, port), timeout=5) as idle:
        idle.sendall(MAGIC + struct.pack(">I", batch.ByteSize()) + batch.SerializeToString())
        elapsed, _ = _closed_with(idle, IDLE_TIMEOUT_S + 3)  # the GET's result, then the close
    assert IDLE_TIMEOUT_S - 0.5 <= elapsed < IDLE_TIMEOUT_S + 2
    closed = _stats(solo)["input"]["closed"]
    assert closed["first_frame_timeout"] >= 1 and closed["idle_timeout"] >= 1


def test_the_grpc_port_closes_a_client_that_never_finishes_its_handshake(solo: RunningCluster) -> None:
    host, port = split_address(solo.address(0, 0))
    with socket.create_connection((host, port), timeout=5) as slow:
        slow.sendall(b"PRI * HTTP/2.0\r\n")  # half of the HTTP/2 preface, then nothing
        started = time.monotonic()
        slow.settimeout(FIRST_FRAME_TIMEOUT_S + 5)
        try:
            while slow.recv(1 << 16):
                pass
        except ConnectionResetError:
            pass
        elapsed = time.monotonic() - started
    assert elapsed < FIRST_FRAME_TIMEOUT_S + 3, f"still open after {elapsed:.1f} s"
    with Client(solo.address(0, 0), timeout_s=10, native=False) as client:
        client.put(b"grpc", b"fine")
        assert client.get(b"grpc") == b"fine"
