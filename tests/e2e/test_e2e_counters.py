"""Counters end to end (docs/protocol.md, "Counters"): redis-py connections to a real `okapi up`
cluster of 3 DCs, and the same command sequence against a real redis-server.

- 1,000 INCRs, sent concurrently by connections spread over the three DCs while the link between
  two DCs is cut and healed (``okapikv.server.faults``), end with every DC reading exactly 1,000:
  none lost (last-writer-wins would keep one DC's), none counted twice (a link's resends).
- INCR, INCRBY, DECR, DECRBY, GET, SET, DEL, their errors, and the expiry commands' replies that
  do not depend on the clock's reading (TTL, PERSIST, EXPIRE, GETEX, SETEX, PSETEX, SET EX)
  answer, on one connection, exactly what redis-server answers for the same sequence.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis
from okapi_processes import Cluster
from test_e2e_resp import resp_ports

from benchmarks.harness.redis_ref import LocalRedis
from okapikv.server.faults import ENVIRONMENT_VARIABLE, HOLD_LINKS

pytestmark = pytest.mark.timeout(240)

DCS = ("oregon", "virginia", "ireland")
INCREMENTS = 1_000
CONNECTIONS_PER_DC = 2
POLL_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("okapi-home"), DCS, partitions=1, extra=["--wan-ms", "2"])
    running.env[ENVIRONMENT_VARIABLE] = "1"
    try:
        running.start()
        yield running
    finally:
        running.stop()


def hold(cluster: Cluster, dc: str, to_dcs: list[str]) -> None:
    with grpc.insecure_channel(cluster.address(dc)) as channel:
        channel.unary_unary(HOLD_LINKS)(json.dumps({"dcs": to_dcs}).encode(), timeout=30, wait_for_ready=True)


def test_concurrent_incrs_over_three_dcs_and_a_cut_all_count_once(cluster: Cluster) -> None:
    ports = resp_ports(cluster)
    per_connection = INCREMENTS // (len(DCS) * CONNECTIONS_PER_DC)
    extra = INCREMENTS - per_connection * len(DCS) * CONNECTIONS_PER_DC
    acknowledged: list[int] = []
    failures: list[BaseException] = []
    halfway = threading.Barrier(len(DCS) * CONNECTIONS_PER_DC + 1)
    healed = threading.Event()

    def run(dc: str, count: int) -> None:
        connection = redis.Redis(port=ports[(dc, 0)], socket_timeout=60)
        done = 0
        try:
            for index in range(count):
                if index == count // 2:
                    halfway.wait(timeout=60)  # the cut happens here, between the halves
                    if dc != "ireland":
                        healed.wait(timeout=60)  # half of the cut DCs' increments made while cut
                connection.incr("hits")
                done += 1
                if dc != "ireland" and index == count // 2 + count // 4:
                    healed.set()
        except BaseException as error:  # reported below
            failures.append(error)
        finally:
            acknowledged.append(done)
            connection.close()

    counts = [(dc, per_connection + (extra if (dc, copy) == (DCS[0], 0) else 0))
              for dc in DCS for copy in range(CONNECTIONS_PER_DC)]
    threads = [threading.Thread(target=run, args=item) for item in counts]
    for thread in threads:
        thread.start()
    halfway.wait(timeout=60)
    hold(cluster, "oregon", ["virginia"])
    hold(cluster, "virginia", ["oregon"])
    healed.set()  # the first quarter after the cut runs cut off; then the link heals
    time.sleep(0.5)
    hold(cluster, "oregon", [])
    hold(cluster, "virginia", [])
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    assert sum(acknowledged) == INCREMENTS
    deadline = time.monotonic() + POLL_TIMEOUT_S
    readers = {dc: redis.Redis(port=ports[(dc, 0)], socket_timeout=60) for dc in DCS}
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        seen = {dc: reader.get("hits") for dc, reader in readers.items()}
        if all(value == str(INCREMENTS).encode() for value in seen.values()):
            break
        time.sleep(0.2)
    assert seen == {dc: str(INCREMENTS).encode() for dc in DCS}
    time.sleep(1.0)  # and it stays there: nothing arriving late counts twice
    assert {dc: reader.get("hits") for dc, reader in readers.items()} == seen


#: One connection's commands; each reply (or error text) must be redis-server's.
SEQUENCE: tuple[tuple[str, ...], ...] = (
    ("INCR", "a"), ("INCRBY", "a", "10"), ("DECR", "a"), ("DECRBY", "a", "5"), ("INCRBY", "a", "-3"),
    ("GET", "a"), ("INCRBY", "a", "x"), ("INCRBY", "a", "1.5"), ("INCRBY", "a", "+1"), ("INCRBY", "a", " 1"),
    ("INCRBY", "a", "99999999999999999999"), ("DECRBY", "a", "-9223372036854775808"),
    ("SET", "s", "41"), ("INCR", "s"), ("GET", "s"), ("SET", "t", "abc"), ("INCR", "t"), ("GET", "t"),
    ("SET", "z", "007"), ("INCR", "z"), ("SET", "big", "9223372036854775807"), ("INCR", "big"),
    ("DECRBY", "big", "-1"), ("SET", "small", "-9223372036854775808"), ("DECR", "small"),
    ("SET", "a", "5"), ("INCR", "a"), ("DEL", "a"), ("GET", "a"), ("DECR", "a"), ("INCR", "new"),
    ("INCR", "a", "b"),
    # expiry (docs/protocol.md, "Expiry"): the replies that do not depend on the clock's reading
    ("TTL", "nokey"), ("PTTL", "nokey"), ("TTL", "s"), ("EXPIRE", "nokey", "10"), ("PERSIST", "s"),
    ("SET", "e", "v", "EX", "100"), ("TTL", "e"), ("PERSIST", "e"), ("TTL", "e"), ("EXPIRE", "e", "100"),
    ("TTL", "e"), ("GETEX", "e", "PERSIST"), ("TTL", "e"), ("SETEX", "e", "100", "w"), ("GET", "e"), ("TTL", "e"),
    ("PSETEX", "e", "100000", "x"), ("TTL", "e"), ("GETEX", "e", "EX", "50"), ("TTL", "e"),
    ("SET", "e", "v", "EX", "0"), ("SET", "e", "v", "EX", "x"), ("SETEX", "e", "-1", "v"), ("GETEX", "e", "EX"),
    ("EXPIRE", "e", "abc"), ("EXPIRE", "e", "0"), ("GET", "e"), ("TTL", "e"),
    # expiry of counters (docs/protocol.md, "Expiry of counters"): the rate limit's INCR + EXPIRE
    ("INCR", "r"), ("TTL", "r"), ("EXPIRE", "r", "100"), ("TTL", "r"), ("INCR", "r"), ("TTL", "r"),
    ("INCRBY", "r", "5"), ("GET", "r"), ("PERSIST", "r"), ("TTL", "r"), ("PERSIST", "r"), ("PEXPIRE", "r", "100000"),
    ("TTL", "r"), ("GETEX", "r", "EX", "50"), ("TTL", "r"), ("DECR", "r"), ("TTL", "r"), ("EXPIRE", "r", "0"),
    ("GET", "r"), ("TTL", "r"), ("EXISTS", "r"), ("INCR", "r"), ("TTL", "r"), ("EXPIREAT", "r", "1"), ("EXISTS", "r"),
    ("SET", "w", "0", "EX", "100"), ("INCR", "w"), ("TTL", "w"), ("DECRBY", "w", "3"), ("TTL", "w"), ("GET", "w"),
    ("SETEX", "x", "100", "41"), ("INCR", "x"), ("TTL", "x"), ("SET", "x", "1"), ("TTL", "x"), ("INCR", "x"),
    ("TTL", "x"),
    ("INCRBYFLOAT", "a", "1.5"),
)


def replies(connection: redis.Redis) -> list[object]:
    answered: list[object] = []
    for command in SEQUENCE:
        try:
            answered.append(connection.execute_command(*command))
        except redis.ResponseError as error:
            answered.append(f"error: {error}")
    return answered


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_counter_replies_match_redis_server(cluster: Cluster, tmp_path: Path) -> None:
    ports = resp_ports(cluster)
    with LocalRedis() as reference:
        expected = replies(redis.Redis(port=reference.port, socket_timeout=10))
    okapi = redis.Redis(port=ports[("virginia", 0)], socket_timeout=60)
    okapi.delete("a", "s", "t", "z", "big", "small", "new", "e", "r", "w", "x")
    answered = replies(okapi)
    differences = [(command, mine, theirs) for command, mine, theirs in zip(SEQUENCE, answered, expected, strict=True)
                   if mine != theirs and command[0] != "INCRBYFLOAT"]
    assert differences == []
    assert str(answered[-1]).startswith("error: INCRBYFLOAT is not supported")
