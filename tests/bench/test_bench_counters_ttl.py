"""Counters and expiry in the bench workloads (``workloads.MixedSource``): the mix the flags ask for,
and `okapi bench --workload a --quick --incr-ratio ... --ttl-ms ...` end to end on a real cluster."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.harness.redis_ref import LocalRedis
from okapikv.bench.engine.adapters import MemoryTarget, RedisTarget, Target, TargetSpec
from okapikv.bench.engine.generators import InsertSequence
from okapikv.bench.engine.keyspace import PartitionedKeyspace
from okapikv.bench.engine.workloads import (
    COUNTER_KEYS,
    COUNTER_PREFIX,
    INCR,
    INSERT,
    PUT_TTL,
    READ,
    ROTX,
    UPDATE,
    WorkloadConfig,
    make_source,
)

OPS = 10_000


def _kinds(config: WorkloadConfig, keyspace: PartitionedKeyspace | None = None) -> tuple[Counter[str], set[bytes]]:
    source = make_source(config, random.Random(3), InsertSequence(config.records, 0, 1), keyspace)
    counts: Counter[str] = Counter()
    counters: set[bytes] = set()
    for _ in range(OPS):
        operation = source.next()
        counts[operation.kind] += 1
        if operation.kind == INCR:
            counters.add(operation.key)
        if operation.kind == PUT_TTL:
            assert operation.ttl_ms == 1500 and operation.value
        source.acknowledge(operation)
    return counts, counters


def test_incr_ratio_and_ttl_mix_into_ycsb_and_rotx() -> None:
    counts, counters = _kinds(WorkloadConfig("a", records=1000, incr_ratio=0.25, ttl_ms=1500))
    assert abs(counts[INCR] / OPS - 0.25) < 0.03
    assert counts[UPDATE] == 0 and abs(counts[PUT_TTL] / OPS - 0.375) < 0.03 and counts[READ] > 0
    assert len(counters) == COUNTER_KEYS and all(key.startswith(COUNTER_PREFIX) for key in counters)
    inserts, _ = _kinds(WorkloadConfig("d", records=1000, ttl_ms=1500))  # inserts keep extending the key space
    assert inserts[INSERT] == 0 and inserts[PUT_TTL] > 0
    keyspace = PartitionedKeyspace(1000, 2, 8)
    rotx, _ = _kinds(WorkloadConfig("rotx", records=1000, num_partitions=2, write_ratio=0.5, incr_ratio=0.1,
                                    ttl_ms=1500), keyspace)
    assert rotx[ROTX] and rotx[PUT_TTL] and abs(rotx[INCR] / OPS - 0.1) < 0.02
    plain, _ = _kinds(WorkloadConfig("a", records=1000))
    assert set(plain) == {READ, UPDATE}


@pytest.mark.parametrize("bad", [{"incr_ratio": 1.5}, {"ttl_ms": -1}])
def test_bad_mix_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        WorkloadConfig("a", **bad)  # type: ignore[arg-type]


@pytest.mark.timeout(300)
def test_bench_quick_with_counters_and_ttl_issues_both_without_errors(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "okapikv.cli", "bench", "--workload", "a", "--quick", "--incr-ratio", "0.3",
         "--ttl-ms", "2000", "--no-progress", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=240)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    [run] = json.loads((tmp_path / "results.json").read_text())["series"]["custom"]["runs"]
    assert {"incr", "put_ttl", "read"} <= set(run["latency_us"]) and "update" not in run["latency_us"]
    assert not run["errors"] and run["operations"] > 0
    assert run["server_operations"]["incr"] > 0
    refused = subprocess.run([sys.executable, "-m", "okapikv.cli", "bench", "--workload", "a", "--load", "lean",
                              "--ttl-ms", "10", "--quick", "--out", str(tmp_path / "lean")],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "--ttl-ms" in refused.stderr


async def _incr_and_put_ttl(target: Target) -> None:
    await target.open()
    try:
        session = target.session(0)
        for _ in range(3):
            await session.incr(b"#n")
        await session.put_ttl(b"k", b"v", 60_000)
        assert await session.get(b"k") == b"v"
    finally:
        await target.close()


def test_memory_target_counts_and_stores() -> None:
    target = MemoryTarget()
    asyncio.run(_incr_and_put_ttl(target))
    assert target.store.counts[b"#n"] == 3


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_redis_target_sends_incr_and_set_px(tmp_path: Path) -> None:
    import redis

    with LocalRedis() as reference:
        check = redis.Redis(port=reference.port, socket_timeout=10)
        asyncio.run(_incr_and_put_ttl(RedisTarget(TargetSpec("redis", (reference.address,)), 1)))
        assert check.get("#n") == b"3" and 59_000 < check.pttl("k") <= 60_000
