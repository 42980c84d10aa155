"""Expiring keys end to end (docs/protocol.md, "Expiry"): redis-py connections to a real `okapi up`
cluster of 3 DCs (durable, 2 ms of WAN).

- `SET k v EX 2` in one DC: every DC reads k before its expiry and none after it (within the
  documented bound: the maximum clock offset, and one replication delay before); TTL answers like
  Redis (-2 absent, -1 no expiry, the seconds left); the expired versions are collected (each
  server's version count falls).
- EXPIRE in one DC and PERSIST in another, one after the other: the later write of the TTL wins in
  every DC; a PERSISTed key never expires; EXPIRE of an absent key answers 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc
import pytest
import redis
from okapi_processes import Cluster
from test_e2e_resp import resp_ports

from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.stats import from_json

pytestmark = pytest.mark.timeout(240)

DCS = ("oregon", "virginia", "ireland")
#: how long a write takes to be visible everywhere, at most, on a loaded 2-core machine
VISIBLE_S = 10.0
TTL_S = 6  # seconds; see the first test
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("okapi-home"), DCS, partitions=1, extra=["--wan-ms", "2"])
    try:
        running.start()
        yield running
    finally:
        running.stop()


def connections(cluster: Cluster) -> dict[str, redis.Redis]:
    ports = resp_ports(cluster)
    return {dc: redis.Redis(port=ports[(dc, 0)], socket_timeout=30) for dc in DCS}


def until(probe: Callable[[], T], done: Callable[[T], bool], timeout_s: float) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def versions(cluster: Cluster, dc: str) -> int:
    with grpc.insecure_channel(cluster.address(dc)) as channel:
        stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
        snapshot = from_json(stub.Stats(pb.StatsRequest(), timeout=30).json)
    return snapshot.store.versions


def test_a_key_set_with_ex_is_read_everywhere_until_it_expires_then_nowhere(cluster: Cluster) -> None:
    redis_of = connections(cluster)
    oregon = redis_of["oregon"]
    assert oregon.ttl("gone") == -2
    oregon.set("plain", "p")
    assert oregon.ttl("plain") == -1 and oregon.pttl("plain") == -1
    # Every DC holds "plain" before the version counts are taken: one arriving later would count
    # against the collection of the expiring key below.
    for dc in DCS:
        assert until(lambda r=redis_of[dc]: r.get("plain"), lambda v: v == b"p", VISIBLE_S) == b"p"  # type: ignore[misc]
    before = {dc: versions(cluster, dc) for dc in DCS}
    # The TTL is long enough for a loaded machine to show the key in every DC before it expires:
    # seeing it everywhere first is the precondition, not the property under test.
    key = "session"
    started = time.monotonic()  # the server's expiry is TTL_S after a time between these two
    assert oregon.set(key, "token", ex=TTL_S)
    written = time.monotonic()
    pttl = oregon.pttl(key)
    assert TTL_S * 1000 - (time.monotonic() - started) * 1000 - 1 <= pttl <= TTL_S * 1000
    assert oregon.ttl(key) in range(TTL_S + 1)
    seen = {dc: until(lambda r=redis_of[dc], k=key: r.get(k), lambda v: v == b"token", VISIBLE_S)  # type: ignore[misc]
            for dc in DCS}
    assert seen == {dc: b"token" for dc in DCS}
    assert time.monotonic() - started < TTL_S, "the key was not seen in every DC before it expired"
    time.sleep(max(0.0, TTL_S - (time.monotonic() - written)))
    # expired by every server's clock (one machine: no skew); the bound is the maximum clock offset
    after = {dc: redis_of[dc].get(key) for dc in DCS}
    assert after == {dc: None for dc in DCS}
    assert {dc: redis_of[dc].ttl(key) for dc in DCS} == {dc: -2 for dc in DCS}
    assert oregon.exists(key) == 0 and key.encode() not in oregon.keys("*")
    collected = {dc: until(lambda d=dc: versions(cluster, d), lambda n, d=dc: n < before[d] + 1, 30)  # type: ignore[misc]
                 for dc in DCS}
    assert all(collected[dc] <= before[dc] for dc in DCS), (before, collected)


def test_the_later_write_of_the_ttl_wins_in_every_dc(cluster: Cluster) -> None:
    redis_of = connections(cluster)
    oregon, ireland = redis_of["oregon"], redis_of["ireland"]
    assert oregon.expire("never-written", 10) is False
    oregon.set("k", "v", ex=100)
    until(lambda: ireland.get("k"), lambda v: v == b"v", VISIBLE_S)
    assert ireland.persist("k") is True  # PERSIST in ireland, after the SET EX it saw
    assert ireland.persist("k") is False  # nothing left to persist
    for dc in DCS:
        assert until(lambda r=redis_of[dc]: r.ttl("k"), lambda t: t == -1, VISIBLE_S) == -1  # type: ignore[misc]
    assert oregon.expire("k", 1) is True  # later, in oregon: EXPIRE wins over the PERSIST it saw
    for dc in DCS:
        ttl = until(lambda r=redis_of[dc]: r.ttl("k"), lambda t: t in (0, 1) or t == -2, VISIBLE_S)  # type: ignore[misc]
        assert ttl in (0, 1, -2)
    time.sleep(1.1)
    assert {dc: redis_of[dc].get("k") for dc in DCS} == {dc: None for dc in DCS}
    oregon.set("kept", "v", px=2000)
    assert oregon.persist("kept") is True
    time.sleep(2.1)
    assert oregon.get("kept") == b"v" and oregon.getex("kept", ex=50) == b"v" and oregon.ttl("kept") in (49, 50)
    assert oregon.getex("kept", persist=True) == b"v" and oregon.ttl("kept") == -1
