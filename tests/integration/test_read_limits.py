"""Bounded snapshot reads on real server processes (docs/operations.md, "Read limits and paging").

One DC x 2 partitions holding 500,000 keys. Four clients in their own processes scan the whole
range at once: each scan comes back complete (paged: 4,096 pairs a reply, every page at the first
page's snapshot) or fails with a clear error, within a deadline, while a probe client's PUTs keep
completing quickly and a RO-TX over 100,000 keys is refused within a second. Then four more
scanning processes are killed mid-scan: the servers drop their reads at once, and nothing stays
pending.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from typing import Any

import grpc
import pytest
from integration_support import ClusterFactory, RunningCluster, bulk_put, eventually

from okapikv.client import Client
from okapikv.errors import InvalidArgument
from okapikv.wire import okapikv_pb2 as pb

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
    bulk_put(cluster, 0, [(b"k%06d" % index, b"v%07d" % index) for index in range(KEYS)])
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
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            cluster.stub(0, 0).ReadTx(pb.ReadTxRequest(keys=[key.encode() for key in keys]), timeout=30)
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
    for partition in (0, 1):
        eventually(lambda partition=partition: _stats(cluster, partition)["pending_reads"] == 0 or None,
                   timeout_s=5)
    # ... and the snapshots held for their next pages are let go once the lease (5 s) is over.
    eventually(lambda: _stats(cluster, 0).get("snapshot_leases", 0) == 0 or None, timeout_s=10)
    stats = _stats(cluster, 0)
    assert stats["driver"]["waiting_replies"] == 0
    assert stats["core"]["reads_refused"] == 0  # four scans at once fit the default limits
