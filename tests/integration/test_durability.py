"""Durability and failures with real server processes (docs/operations.md, "Durability and failures"):

1. kill -9 of servers during a concurrent write load, then restart: every acknowledged write is
   read back, and replication resumes by itself (catch-up);
2. the course's project-2 scenario: 3 partitions, PUT/SWAP/GET/SCAN, one partition server killed:
   the others keep serving, an operation on the dead one retries until it is back, then reads the
   latest value;
3. a DC cut off for a while: every DC keeps serving its local reads and writes (100 %), remote
   visibility pauses, and after the repair every DC converges with no update lost;
4. a client whose DC goes down moves its session to another DC and keeps read-your-writes and
   monotonic reads; a write that never left the old DC makes it wait, boundedly, then say so; the
   same for an ``AsyncClient`` and its forks, which move together;
5. `okapi up` keeps data across restarts by default and refuses another server's directory.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from durability_support import DurableCluster, Writers, durable_cluster, wait_for
from integration_support import free_port_range, keys_for_each_partition

from okapikv.client.aio import AsyncClient
from okapikv.client.sync import Client
from okapikv.cluster.launcher import READY_LINE
from okapikv.errors import FailoverTimeout
from okapikv.wire import okapikv_pb2 as pb

pytestmark = pytest.mark.slow


def scan_all(cluster: DurableCluster, dc: int, prefix: str) -> dict[bytes, bytes]:
    """Every pair of the range, page after page (a reply holds at most ``max_scan_items`` pairs and
    stops early where its slices examined too many keys they may not return: ``ScanResponse.resume``)."""
    request = pb.ScanRequest(start=prefix.encode(), end=(prefix + "~").encode())
    pairs: dict[bytes, bytes] = {}
    while True:
        # wait_for_ready: the cached channel to a restarted server may still be backing off.
        reply = cluster.stub(dc, 0).Scan(request, timeout=30, wait_for_ready=True)
        pairs.update((item.key, item.value) for item in reply.items)
        if not reply.resume:
            return pairs
        request = pb.ScanRequest(start=reply.resume, end=request.end, snapshot=reply.snapshot)


def test_kill_9_during_a_write_load_loses_no_acknowledged_write(tmp_path: Path) -> None:
    with durable_cluster(tmp_path, ("a", "b"), 2) as cluster:
        with Writers(cluster, 0, 4, "load") as writers:
            wait_for(lambda: len(writers.snapshot()) >= 150, 60, "writes before the crash")
            # The origin of half the writes and, in the other DC, a receiver of the other half.
            cluster.stop("a", 0, signal.SIGKILL)
            cluster.stop("b", 1, signal.SIGKILL)
            time.sleep(0.3)
            cluster.start("a", 0)
            cluster.start("b", 1)
            cluster.wait_serving()
            restarted = len(writers.snapshot())
            wait_for(lambda: len(writers.snapshot()) >= restarted + 150, 60, "writes after the restart")
        acknowledged = writers.snapshot()
        assert writers.failures > 0  # some writes did hit the dead server (and were retried or dropped)
        local = scan_all(cluster, 0, "load")
        lost = {key for key, value in acknowledged.items() if local.get(key) != value}
        assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {sorted(lost)[:5]}"

        def remote_has_everything() -> bool:
            remote = scan_all(cluster, 1, "load")
            return all(remote.get(key) == value for key, value in acknowledged.items())

        wait_for(remote_has_everything, 60, "replication after the restart")
        for dc, partition in (("a", 0), ("b", 1)):
            stats = cluster.stats(dc, partition)
            assert stats["storage"]["recovered"]["versions"] > 0
            assert stats["core"]["catch_up_replies_received"] >= 1 and stats["catching_up"] == []


def test_course_project_2_one_partition_down_then_back(tmp_path: Path) -> None:
    with durable_cluster(tmp_path, ("solo",), 3, wan_ms=0) as cluster:
        keys = keys_for_each_partition(3, "course")
        with Client(cluster.address(0, 0), timeout_s=30) as client:
            for key in keys:
                assert client.put(key, b"v1") is False
            assert client.swap(keys[0], b"v2") == b"v1"
            assert client.get(keys[1]) == b"v1"
            assert client.scan(b"course", b"course~") == sorted(zip(keys, [b"v2", b"v1", b"v1"], strict=True))
            cluster.stop("solo", 2, signal.SIGKILL)
            assert client.get(keys[0]) == b"v2"  # the other partitions keep serving
            assert client.put(keys[1], b"v3") is True
            result: dict[str, bytes | None] = {}
            waiting = threading.Thread(target=lambda: result.update(old=client.swap(keys[2], b"after")))
            waiting.start()
            time.sleep(1.0)
            assert waiting.is_alive()  # retrying with backoff while its partition is down
            cluster.start("solo", 2)
            waiting.join(timeout=30)
            assert result == {"old": b"v1"}  # the value written before the crash survived it
            assert client.get(keys[2]) == b"after"
            assert client.delete(keys[1]) is True
            assert client.scan(b"course", b"course~") == [(keys[0], b"v2"), (keys[2], b"after")]


def test_a_dc_cut_off_keeps_serving_locally_and_converges_after_repair(tmp_path: Path) -> None:
    with durable_cluster(tmp_path, ("a", "b", "c"), 1, wan_ms=2) as cluster:
        stubs = [cluster.stub(dc, 0) for dc in range(3)]
        stubs[0].Put(pb.PutRequest(key=b"before", value=b"1"), timeout=5)
        wait_for(lambda: stubs[2].Get(pb.GetRequest(key=b"before"), timeout=5).found, 20, "warm-up replication")
        cluster.cut_off("c")
        attempts = [0, 0, 0]
        successes = [0, 0, 0]
        written: dict[bytes, bytes] = {}
        end = time.monotonic() + 2.0
        index = 0
        while time.monotonic() < end:
            for dc in range(3):
                key, value = f"cut-{dc}-{index}".encode(), f"v{index}".encode()
                attempts[dc] += 1
                try:
                    reply = stubs[dc].Put(pb.PutRequest(key=key, value=value), timeout=2)
                    read = stubs[dc].Get(pb.GetRequest(key=key, session=reply.session), timeout=2)
                except grpc.RpcError:
                    continue
                if read.value == value:
                    successes[dc] += 1
                    written[key] = value
            index += 1
        assert attempts == successes, f"local availability during the cut: {successes} of {attempts}"
        # Remote visibility pauses: what a wrote during the cut is not visible in c (nor, under Okapi,
        # in b: nothing of a is universally stable while c cannot confirm it).
        assert not stubs[2].Get(pb.GetRequest(key=b"cut-0-0"), timeout=5).found
        assert not stubs[1].Get(pb.GetRequest(key=b"cut-0-0"), timeout=5).found
        cluster.repair()

        def converged() -> bool:
            for stub in stubs:
                reply = stub.Scan(pb.ScanRequest(start=b"cut-", end=b"cut-~"), timeout=10)
                if {item.key: item.value for item in reply.items} != written:
                    return False
            return True

        wait_for(converged, 60, "convergence after the repair")


def _okapi_up(home: Path, base_port: int, *extra: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "okapikv.cli", "up", "--dcs", "solo", "--partitions", "1", "--wan", "off",
         "--base-port", str(base_port), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, OKAPI_HOME=str(home)),
    )
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    output = []
    deadline = time.monotonic() + 60
    while READY_LINE not in output and time.monotonic() < deadline and process.poll() is None:
        if selector.select(timeout=1):
            output.append(process.stdout.readline().rstrip("\n"))
    assert READY_LINE in output, "\n".join(output)
    return process


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()


def test_okapi_up_keeps_data_across_restarts_unless_in_memory(tmp_path: Path) -> None:
    base = free_port_range(2)  # the server's port and its RESP port
    address = f"127.0.0.1:{base}"
    process = _okapi_up(tmp_path, base)
    try:
        with Client(address, timeout_s=10) as client:
            client.put("kept", "yes")
    finally:
        _stop(process)
    assert (tmp_path / "okapi-data" / "solo-p0" / "okapi.sqlite3").exists()
    process = _okapi_up(tmp_path, base)
    try:
        with Client(address, timeout_s=10) as client:
            assert client.get("kept") == b"yes"
    finally:
        _stop(process)
    process = _okapi_up(tmp_path, base, "--in-memory")
    try:
        with Client(address, timeout_s=10) as client:
            assert client.get("kept") is None
    finally:
        _stop(process)


def test_a_server_refuses_another_servers_data(tmp_path: Path) -> None:
    with durable_cluster(tmp_path, ("a",), 2, wan_ms=0) as cluster:
        cluster.stop("a", 1)
        result = subprocess.run(
            [sys.executable, "-m", "okapikv.cli", "server", "--config", str(cluster.path), "--dc", "a",
             "--partition", "1", "--data-dir", str(cluster.data_dir("a", 0))],
            capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 1
        assert "in use by another server" in result.stderr


def test_a_client_fails_over_to_another_dc_and_keeps_its_guarantees(tmp_path: Path) -> None:
    with durable_cluster(tmp_path, ("a", "b"), 2, wan_ms=5) as cluster:
        keys = keys_for_each_partition(2, "mine")
        fallback = [cluster.address("b", 1)]
        with Client(cluster.address("a", 0), timeout_s=30, fallback=fallback, failover_after_s=1.0,
                    failover_wait_s=5.0) as client:
            client.put(keys[0], b"1")
            client.put(keys[1], b"2")
            client.put(keys[0], b"3")
            assert client.get(keys[1]) == b"2"
            # The writes leave DC a: b serves them once they are stable there, which takes as long
            # as the machine's load makes it (no fixed sleep can promise that).
            def in_b() -> bool:
                return all(cluster.stub_for_key("b", key).Get(pb.GetRequest(key=key), timeout=5).value == value
                           for key, value in ((keys[0], b"3"), (keys[1], b"2")))

            wait_for(in_b, 30, "the session's writes reaching b")
            cluster.stop("a", 0, signal.SIGKILL)
            cluster.stop("a", 1, signal.SIGKILL)
            assert client.get(keys[0]) == b"3"  # read-your-writes, now served by DC b
            assert client.topology.dc_name == "b"
            assert client.get(keys[1]) == b"2"
            assert client.swap(keys[1], b"4") == b"2"
            assert client.get(keys[1]) == b"4"

        # A write that never left DC a: the move must wait for it, at most failover_wait_s. The
        # write must be acknowledged by a for that: a server that answers within failover_after_s
        # keeps the session (here a/0 stalls for a second during the write), while one slower than
        # that moves it, and the write with it, to b (at least once: the client retries it there).
        cluster.start("a", 0)
        cluster.start("a", 1)
        cluster.wait_serving()
        with Client(cluster.address("a", 0), timeout_s=30, fallback=fallback, failover_after_s=3.0,
                    failover_wait_s=1.0) as client:
            # a catches up with what b wrote while it was down (visible once universally stable)
            wait_for(lambda: client.get(keys[1]) == b"4", 30, "a catching up with b")
            for server in cluster.config.servers:
                if server.dc == "a":
                    cluster.hold_links("a", server.partition, ["b"])
            stalled = cluster.processes[("a", 0)]
            stalled.send_signal(signal.SIGSTOP)
            resume = threading.Timer(1.0, stalled.send_signal, (signal.SIGCONT,))
            resume.start()
            client.put(keys[0], b"stranded")
            resume.join()
            assert client.topology.dc_name == "a", "the write moved the session: a did not answer in time"
            cluster.stop("a", 0, signal.SIGKILL)
            cluster.stop("a", 1, signal.SIGKILL)
            started = time.monotonic()
            with pytest.raises(FailoverTimeout, match="no other DC received every write"):
                client.get(keys[0])
            assert time.monotonic() - started < 10
            assert client.topology.dc_name == "a"  # it stayed
        cluster.start("a", 0)
        cluster.start("a", 1)
        cluster.wait_serving()
        stub = cluster.stub_for_key("b", keys[0])
        wait_for(lambda: stub.Get(pb.GetRequest(key=keys[0]), timeout=5).value == b"stranded", 30,
                 "the stranded write reaching b once a is back")


@pytest.mark.parametrize(("native", "pipeline"), [(True, True), (False, True), (False, False)],
                         ids=["native-port", "grpc-stream", "unary"])
def test_an_async_client_and_its_forks_fail_over_together(tmp_path: Path, native: bool, pipeline: bool) -> None:
    """The connections move once, with the first session that finds the DC gone; every other
    session is adopted by the new DC at its next operation, or gets ``FailoverTimeout`` while that
    DC lacks its writes, and moves once they arrive."""
    with durable_cluster(tmp_path, ("a", "b"), 2, wan_ms=5) as cluster:
        mine, theirs, stranded = (keys_for_each_partition(2, prefix) for prefix in ("mine", "theirs", "stranded"))
        fallback = [cluster.address("b", 1)]

        async def scenario() -> None:
            # failover_after_s above the longest write under load: the stranded write below must be
            # acknowledged by a, not moved to b with its session
            async with AsyncClient(cluster.address("a", 0), timeout_s=30, fallback=fallback, failover_after_s=3.0,
                                   failover_wait_s=1.0, native=native, pipeline=pipeline) as client:
                fork, late = client.fork(), client.fork()
                await asyncio.gather(client.put(mine[0], b"1"), client.put(mine[1], b"2"))
                await fork.put(theirs[0], b"f")
                assert await late.get(theirs[0]) == b"f"  # late now depends on fork's write
                # Those writes leave DC a: b serves them once they are stable there (as long as the
                # machine's load makes it; no fixed sleep can promise that).
                for key, value in ((mine[0], b"1"), (mine[1], b"2"), (theirs[0], b"f")):
                    stub, deadline = cluster.stub_for_key("b", key), time.monotonic() + 30
                    while stub.Get(pb.GetRequest(key=key), timeout=5).value != value:
                        assert time.monotonic() < deadline, f"{key!r} not in b within 30 s"
                        await asyncio.sleep(0.05)
                for server in cluster.config.servers:
                    if server.dc == "a":
                        cluster.hold_links("a", server.partition, ["b"])
                await fork.put(stranded[1], b"never left a")
                assert client.topology.dc_name == "a", "the write moved the session: a did not answer in time"
                cluster.stop("a", 0, signal.SIGKILL)
                cluster.stop("a", 1, signal.SIGKILL)

                # Concurrent operations of one session: one moves the connections, the others resend.
                assert list(await asyncio.gather(client.get(mine[0]), client.get(mine[1]), client.get(mine[0]))) == [
                    b"1", b"2", b"1"]
                assert client.topology.dc_name == "b"
                assert await late.get(theirs[0]) == b"f"  # adopted at its next operation
                assert await late.swap(theirs[0], b"g") == b"f"
                started = time.monotonic()
                with pytest.raises(FailoverTimeout, match=r"DC a is unreachable .*\(DC b lacks updates of a by"):
                    await fork.get(theirs[0])
                assert time.monotonic() - started < 5

                cluster.start("a", 0)
                cluster.start("a", 1)  # durable: the stranded write is there, and leaves for b
                deadline = time.monotonic() + 30
                while True:
                    try:
                        assert await fork.get(stranded[1]) == b"never left a"
                        break
                    except FailoverTimeout:
                        assert time.monotonic() < deadline, "fork never adopted by b"
                assert client.topology.dc_name == "b"  # the connections stay where they moved
                assert await fork.get(theirs[0]) == b"g"

        asyncio.run(scenario())
