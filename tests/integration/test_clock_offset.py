"""The maximum clock offset on real server processes (a clock far ahead, far behind; docs/operations.md,
"Clocks: the maximum offset").

1. A server restarted with its clock an hour ahead cannot drag any other server's HLC: its writes
   succeed, a session that depends on them is refused elsewhere with a clear error (in its own DC and
   in the other), the other servers' HLCs stay within the offset of their clocks, they hold its
   watermark back and say so in their logs, and remote visibility among the good servers goes on.
2. A durable server killed and restarted with its clock an hour behind its persisted clock bound says
   so loudly at start, and then takes 70,000 PUTs: none waits for its clock to catch up (the 16-bit
   logical counter carries into the physical part instead of parking every PUT after the 65,535th).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import signal
import time
from pathlib import Path

import grpc
import pytest
from durability_support import DurableCluster, durable_cluster
from integration_support import ClusterFactory, RunningCluster, eventually, get_value, keys_for_each_partition

from okapikv.client.aio import AsyncClient
from okapikv.client.sync import Client
from okapikv.core.timestamps import physical_of
from okapikv.errors import ClockOffsetExceeded
from okapikv.wire import okapikv_pb2 as pb

pytestmark = pytest.mark.slow

HOUR_MS = 3_600_000.0
MAX_OFFSET_US = 500_000


def set_skew(cluster: RunningCluster, dc: str, partition: int, skew_ms: float) -> None:
    """Give one server a clock ``skew_ms`` off in the config file (read when it next starts)."""
    servers = tuple(dataclasses.replace(s, clock_skew_ms=skew_ms) if (s.dc, s.partition) == (dc, partition) else s
                    for s in cluster.config.servers)
    cluster.config = dataclasses.replace(cluster.config, servers=servers)
    cluster.config.dump(cluster.path)


def server_stats(cluster: RunningCluster, dc: str, partition: int) -> dict[str, object]:
    import json

    reply = cluster.stub(dc, partition).Stats(pb.StatsRequest(), timeout=30, wait_for_ready=True)
    parsed: dict[str, object] = json.loads(reply.json)
    return parsed


def test_a_server_an_hour_ahead_cannot_drag_another_servers_hlc(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(dcs=("a", "b"), partitions=2, wan_ms=5.0)
    key0, key1 = keys_for_each_partition(2, "drag")  # key0 lives on partition 0, key1 on partition 1
    with Client(cluster.address("b", 0), timeout_s=30) as kv:
        kv.put(key0, b"before")
    eventually(lambda: get_value(cluster, 0, key0) == b"before" or None)

    cluster.stop("a", 0)
    set_skew(cluster, "a", 0, HOUR_MS)
    cluster.start("a", 0)
    cluster.wait_serving()

    with Client(cluster.address("a", 0), timeout_s=30) as kv:
        kv.put(key0, b"from-the-future")  # the server an hour ahead takes writes...
        ahead_us = physical_of(kv.session.dt) - int(time.time() * 1e6 - 1_735_689_600_000_000)
        assert ahead_us > HOUR_MS * 1000 - 60_000_000
        # ... but a session that depends on them is refused by a server whose clock is right,
        # in the same DC (the write's dt) and in the other (its stable entry), with a clear error.
        with pytest.raises(ClockOffsetExceeded, match="maximum clock offset of 500 ms"):
            kv.put(key1, b"dragged")
        session = kv.session
    foreign = pb.Session(stable=[session.dt, 0], dt=0)
    with pytest.raises(grpc.RpcError) as refused:
        cluster.stub("b", 0).Put(pb.PutRequest(key=key0, value=b"dragged", session=foreign), timeout=10)
    assert refused.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert "ahead of this server's clock" in (refused.value.details() or "")

    # The other DC never shows the write from the future, and no other HLC moved past its clock.
    time.sleep(1.0)
    assert get_value(cluster, 1, key0) == b"before"
    for dc, partition in (("a", 1), ("b", 0), ("b", 1)):
        stats = server_stats(cluster, dc, partition)
        assert isinstance(stats["hlc_ahead_us"], int) and stats["hlc_ahead_us"] <= MAX_OFFSET_US, (dc, partition)
        stable = stats["stable"]
        assert isinstance(stable, list) and isinstance(stats["clock_us"], int)
        assert all(physical_of(entry) <= stats["clock_us"] + MAX_OFFSET_US for entry in stable), stats
    held = server_stats(cluster, "b", 0)["core"]
    assert isinstance(held, dict) and held["clock_offset_clamps"] > 0 and held["clock_offset_refusals"] == 1
    assert "CLOCK OFFSET EXCEEDED" in cluster.log_path("b", 0).read_text()

    # Remote visibility among the good servers goes on (partition 1 of both DCs).
    with Client(cluster.address("b", 1), timeout_s=30) as kv:
        kv.put(key1, b"from-b")
    eventually(lambda: get_value(cluster, 0, key1) == b"from-b" or None)
    with Client(cluster.address("a", 1), timeout_s=30) as kv:
        kv.put(key1, b"from-a")
    eventually(lambda: get_value(cluster, 1, key1) == b"from-a" or None)


async def put_all(address: str, count: int, sessions: int) -> list[int]:
    """``count`` PUTs from ``sessions`` concurrent sessions of one async client; their timestamps."""
    timestamps: list[int] = []
    async with AsyncClient(address, timeout_s=30) as client:
        async def session(number: int, kv: AsyncClient) -> None:
            for index in range(number, count, sessions):
                await kv.put(f"k{index % 1000}", "v")
                assert kv.last_write_timestamp is not None
                timestamps.append(kv.last_write_timestamp)

        await asyncio.gather(*(session(number, client.fork()) for number in range(sessions)))
    return timestamps


def test_70000_puts_after_an_hlc_an_hour_ahead_all_complete(tmp_path: Path) -> None:
    cluster: DurableCluster
    with durable_cluster(tmp_path, ("solo",), 1) as cluster:
        with Client(cluster.address("solo", 0), timeout_s=30) as kv:
            for index in range(5):
                kv.put(f"before{index}", "v")
        cluster.stop("solo", 0, signal.SIGKILL)
        set_skew(cluster, "solo", 0, -HOUR_MS)  # the clock steps back an hour
        cluster.start("solo", 0)
        cluster.wait_serving()
        log = cluster.log_path("solo", 0).read_text()
        warning = re.search(r"CLOCK BEHIND ITS RECOVERED BOUND: the timestamps of the last run reach ([0-9.]+) s", log)
        assert warning is not None, log[-2000:]
        assert 3_590 < float(warning.group(1)) < 3_602  # the hour, less the time the restart took
        started = time.monotonic()
        timestamps = asyncio.run(put_all(cluster.address("solo", 0), 70_000, 64))
        elapsed = time.monotonic() - started
        assert len(timestamps) == 70_000 and len(set(timestamps)) == 70_000
        stats = server_stats(cluster, "solo", 0)
        assert stats["parked"] == 0
        core = stats["core"]
        assert isinstance(core, dict) and core["waits"] == {}
        assert stats["clock_ahead_at_start_us"] > HOUR_MS * 1000 - 60_000_000  # type: ignore[operator]
        with Client(cluster.address("solo", 0), timeout_s=30) as kv:
            assert kv.get("before0") == b"v"  # nothing acknowledged before the kill was lost
        print(f"70,000 PUTs with the HLC an hour ahead: {elapsed:.1f} s")
