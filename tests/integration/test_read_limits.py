"""Bounded snapshot reads on real server processes (docs/operations.md, "Read limits and paging").

One DC x 2 partitions holding 500,000 keys. Four clients in their own processes scan the whole
range at once: each scan comes back complete (paged: 4,096 pairs a reply, every page at the first
page's snapshot) or fails with a clear error, within a deadline, while a probe client's PUTs keep
completing quickly and a RO-TX over 100,000 keys is refused within a second. Then four more
scanning processes are killed mid-scan: the servers drop their reads at once, and nothing stays
pending. And a read whose client goes away (a closed native connection, a cancelled RPC, a
cancelled Pipeline stream) while a partition it needs is stopped is dropped at once, not held
until the read's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import grpc
import grpc.aio
import pytest
from integration_support import ClusterFactory, RunningCluster, bulk_put, eventually, keys_for_each_partition

from okapikv.client import Client
from okapikv.errors import InvalidArgument
from okapikv.wire import encoding
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.frames import MAGIC, encode_frame

KEYS = 500_000
SCANNERS = 4
SCAN_DEADLINE_S = 60.0
PROBE_PUT_BOUND_S = 3.0  # generous: a PUT queued behind the reads' bounded slices takes milliseconds
REFUSAL_BOUND_S = 1.0
SCANS_UNDER_WAY_S = 2.0  # scanner processes start in ~0.5 s, then page

# A client process scanning the whole range: "SCANNED <pairs>" or "FAILED <error>", exit 0 or 3.
SCANNER = """
import sys, time
from okapikv import Client
from okapikv.errors import OkapiError
started = time.monotonic()
try:
    with Client(sys.argv[1], timeout_s=30) as kv:
        count = len(kv.scan(b"k", b"l"))
except OkapiError as error:
    print(f"FAILED {type(error).__name__}: {error}", flush=True)
    sys.exit(3)
print(f"SCANNED {count} in {time.monotonic() - started:.1f} s", flush=True)
"""


def _stats(cluster: RunningCluster, partition: int) -> dict[str, Any]:
    import json

    reply = cluster.stub(0, partition).Stats(pb.StatsRequest(), timeout=10)
    parsed: dict[str, Any] = json.loads(reply.json)
    return parsed


class Probe:
    """PUTs one after another from a thread, each timed, until stopped."""

    def __init__(self, address: str) -> None:
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._client = Client(address, timeout_s=30)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            number += 1
            started = time.monotonic()
            try:
                self._client.put(b"probe-%d" % (number % 50), b"%d" % number)
            except Exception as error:  # recorded: the test fails on any
                self.errors.append(f"{type(error).__name__}: {error}")
            self.latencies.append(time.monotonic() - started)
            self._stop.wait(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self._client.close()


def _start_scanners(address: str, count: int) -> list[subprocess.Popen[str]]:
    return [subprocess.Popen([sys.executable, "-c", SCANNER, address], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for _ in range(count)]


@pytest.mark.slow
def test_concurrent_whole_range_scans_leave_writes_flowing_and_nothing_pending(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(dcs=("dc0",), partitions=2, wan_ms=0.0)
    address = cluster.address(0, 0)
    started = time.monotonic()
    bulk_put(cluster, 0, [(b"k%06d" % index, b"v%07d" % index) for index in range(KEYS)])
    print(f"\nloaded {KEYS} keys in {time.monotonic() - started:.1f} s")  # figures: run with -s
    probe = Probe(cluster.address(0, 1))
    asker = Client(address, timeout_s=30)
    scanners = _start_scanners(address, SCANNERS)
    try:
        # While the scans run, a RO-TX over 100,000 keys is refused at once, by the client (it knows
        # the servers' limit) and by the busy coordinator asked directly.
        time.sleep(SCANS_UNDER_WAY_S)
        keys = [f"k{index:06d}" for index in range(100_000)]
        started = time.monotonic()
        with pytest.raises(InvalidArgument, match="at most 10000 keys"):
            asker.read_tx(keys)
        client_refusal_s = time.monotonic() - started
        request = pb.ReadTxRequest(keys=[key.encode() for key in keys])
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            cluster.stub(0, 0).ReadTx(request, timeout=30)
        server_refusal_s = time.monotonic() - started
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert client_refusal_s < REFUSAL_BOUND_S and server_refusal_s < REFUSAL_BOUND_S, (
            client_refusal_s, server_refusal_s)

        deadline = time.monotonic() + SCAN_DEADLINE_S
        outcomes = []
        for scanner in scanners:
            try:
                output, _ = scanner.communicate(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pytest.fail(f"a whole-range scan neither completed nor failed within {SCAN_DEADLINE_S} s")
            outcomes.append((scanner.returncode, output.strip()))
        print(f"RO-TX over 100,000 keys refused in {client_refusal_s * 1000:.1f} ms by the client, "
              f"{server_refusal_s * 1000:.1f} ms by the coordinator; scans: {[output for _, output in outcomes]}")
        for returncode, output in outcomes:
            assert (returncode == 0 and output.startswith(f"SCANNED {KEYS} ")) or (
                returncode == 3 and output.startswith("FAILED ")), outcomes
        assert any(returncode == 0 for returncode, _ in outcomes), outcomes
    finally:
        for scanner in scanners:
            if scanner.poll() is None:
                scanner.kill()
                scanner.wait()
        probe.stop()
        asker.close()
    latencies = sorted(probe.latencies)
    print(f"probe PUTs during the scans: {len(latencies)}, median {latencies[len(latencies) // 2] * 1000:.1f} ms, "
          f"max {latencies[-1] * 1000:.1f} ms; SCAN pages that stopped early: "
          f"{_stats(cluster, 0)['core'].get('scan_pages')} (coordinator)")
    assert not probe.errors, probe.errors[:3]
    assert len(probe.latencies) >= 20 and max(probe.latencies) < PROBE_PUT_BOUND_S, (
        len(probe.latencies), max(probe.latencies))

    # Scanners that die mid-scan: their reads are dropped once their connections close.
    before = _stats(cluster, 0)["core"].get("scan_pages", 0)
    killed = _start_scanners(address, SCANNERS)
    try:
        eventually(lambda: _stats(cluster, 0)["core"].get("scan_pages", 0) >= before + 2 * SCANNERS or None,
                   timeout_s=30)
    finally:
        for scanner in killed:
            scanner.send_signal(signal.SIGKILL)
            scanner.wait()
    def nothing_pending() -> bool | None:
        return all(_stats(cluster, partition)["pending_reads"] == 0 for partition in (0, 1)) or None

    eventually(nothing_pending, timeout_s=5)
    # ... and the snapshots held for their next pages are let go once the lease (5 s) is over.
    eventually(lambda: _stats(cluster, 0).get("snapshot_leases", 0) == 0 or None, timeout_s=10)
    stats = _stats(cluster, 0)
    assert stats["driver"]["waiting_replies"] == 0
    assert stats["core"]["reads_refused"] == 0  # four scans at once fit the default limits


def test_a_read_whose_client_goes_away_is_dropped_at_once(cluster_factory: ClusterFactory) -> None:
    """Partition 1 is stopped (SIGSTOP), so a RO-TX coordinated by partition 0 that needs a key of
    partition 1 waits (its silence deadline is 5 s). Each way a client can leave drops it from the
    coordinator within a second: the driver tells the core (``PartitionServer.cancel_reads``)."""
    cluster = cluster_factory(dcs=("dc0",), partitions=2, wan_ms=0.0)
    _, far = keys_for_each_partition(2, prefix="gone")
    stopped = cluster.processes[("dc0", 1)]
    host = cluster.address(0, 0).rpartition(":")[0]
    native_port = cluster.stub(0, 0).ClusterInfo(pb.ClusterInfoRequest(), timeout=10).native_port
    request = encoding.read_tx_request([far], encoding.session_field(b""))
    os.kill(stopped.pid, signal.SIGSTOP)
    try:
        def pending() -> int:
            count: int = _stats(cluster, 0)["pending_reads"]
            return count

        # a native connection that closes
        with socket.create_connection((host, native_port), timeout=10) as connection:
            connection.sendall(MAGIC + encode_frame(encoding.batch_element(encoding.operation(1, b"\x3a", request))))
            eventually(lambda: pending() == 1 or None, timeout_s=5)
        started = time.monotonic()
        eventually(lambda: pending() == 0 or None, timeout_s=1)
        native_s = time.monotonic() - started

        # a unary call whose deadline passes (gRPC cancels it on the server)
        with pytest.raises(grpc.RpcError) as expired:
            cluster.stub(0, 0).ReadTx(pb.ReadTxRequest.FromString(request), timeout=0.5)
        assert expired.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        eventually(lambda: pending() == 0 or None, timeout_s=1)

        # a Pipeline stream the client cancels
        async def cancelled_stream() -> None:
            async with grpc.aio.insecure_channel(cluster.address(0, 0)) as channel:
                stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
                call = stub.Pipeline()
                batch = pb.OperationBatch()
                batch.operations.add(id=1).read_tx.CopyFrom(pb.ReadTxRequest.FromString(request))
                await call.write(batch)
                for _ in range(100):
                    if pending() == 1:
                        break
                    await asyncio.sleep(0.05)
                call.cancel()

        asyncio.run(cancelled_stream())
        eventually(lambda: pending() == 0 or None, timeout_s=1)
        core = _stats(cluster, 0)["core"]
        assert core["reads_abandoned"] == 3 and core["read_timeouts"] == 0, core
        assert native_s < 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stopped.pid, signal.SIGCONT)
