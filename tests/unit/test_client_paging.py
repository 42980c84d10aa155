"""Paged SCANs and bounded reads in the client library, against the fake service
(``client_fake_server.py``, which pages and keeps snapshots as the real servers do).

Both clients page a long range transparently (each later page from the resume key, at the first
page's snapshot, with what is left of the limit), start a scan over when a later page finds its
snapshot gone, at most ``SCAN_RESTARTS`` times, retry a read the servers refuse for load until
their timeout (``Overloaded`` then), and refuse a RO-TX over the servers' ``max_read_keys`` without
sending it. ``okapi client``'s SCAN pages through ``Client.scan``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from client_fake_server import FakeCluster

from okapikv.client import AsyncClient, Client
from okapikv.client.operations import SCAN_RESTARTS
from okapikv.client.stdio import respond
from okapikv.core.backoff import Backoff
from okapikv.errors import InvalidArgument, Overloaded, SnapshotTooOld

FAST = Backoff(base_s=0.01, cap_s=0.05)
KEYS = [f"k{index:03d}" for index in range(23)]


@pytest.fixture
def fake() -> Iterator[FakeCluster]:
    cluster = FakeCluster(num_partitions=2)
    cluster.state.scan_page = 5
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


def fill(client: Client) -> list[tuple[bytes, bytes]]:
    for key in KEYS:
        client.put(key, "v" + key)
    return [(key.encode(), b"v" + key.encode()) for key in KEYS]


def scan_requests(fake: FakeCluster) -> list[bytes]:
    return [key for servicer in fake.servicers for method, key in servicer.received.keys if method == "scan"]


@pytest.mark.parametrize("native", [True, False])
def test_sync_scan_pages_transparently_at_one_snapshot(fake: FakeCluster, native: bool) -> None:
    with Client(fake.addresses[0], timeout_s=5, native=native) as client:
        expected = fill(client)
        fake.state.after_page = lambda: fake.state.data.pop(b"k020", None)  # gone after the first page
        assert client.scan("k", "l") == expected
        starts = scan_requests(fake)
        assert starts == [b"k", b"k004\x00", b"k009\x00", b"k014\x00", b"k019\x00"]
        assert client.scan("k", "l", limit=7) == expected[:7]  # 5, then the 2 left of the limit
        assert client.scan("k", "l") == [pair for pair in expected if pair[0] != b"k020"]


def test_async_scan_pages_transparently_at_one_snapshot(fake: FakeCluster) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=5) as client:
            for key in KEYS:
                await client.put(key, "v" + key)
            fake.state.after_page = lambda: fake.state.data.pop(b"k020", None)
            expected = [(key.encode(), b"v" + key.encode()) for key in KEYS]
            assert await client.scan("k", "l") == expected
            assert await client.scan("k", "l", limit=12) == expected[:12]
            assert [pair async for pair in client.iter_scan("k", "l", limit=3)] == expected[:3]

    asyncio.run(scenario())


def test_a_scan_whose_snapshot_expires_starts_over_a_bounded_number_of_times(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=5) as client:
        expected = fill(client)
        fake.state.expire_pages = SCAN_RESTARTS
        assert client.scan("k", "l") == expected  # no pair of an abandoned attempt is kept
        first_pages = [start for start in scan_requests(fake) if start == b"k"]
        assert len(first_pages) == SCAN_RESTARTS + 1
        fake.state.expire_pages = SCAN_RESTARTS + 1
        with pytest.raises(SnapshotTooOld, match="garbage-collection horizon"):
            client.scan("k", "l")


def test_async_scan_whose_snapshot_expires_too_often_raises(fake: FakeCluster) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=5) as client:
            for key in KEYS:
                await client.put(key, "v")
            fake.state.expire_pages = SCAN_RESTARTS + 1
            with pytest.raises(SnapshotTooOld):
                await client.scan("k", "l")

    asyncio.run(scenario())


def test_iter_scan_holds_one_page_and_never_starts_over(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=5) as client:
        expected = fill(client)
        pairs = client.iter_scan("k", "l")
        assert [next(pairs) for _ in range(5)] == expected[:5]
        assert scan_requests(fake) == [b"k"]  # the second page is asked for only when needed
        assert list(pairs) == expected[5:]
        fake.state.expire_pages = 1
        pairs = client.iter_scan("k", "l")
        assert next(pairs) == expected[0]
        with pytest.raises(SnapshotTooOld):
            list(pairs)


def test_a_read_refused_for_load_is_retried_then_raises_overloaded(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=5, backoff=FAST) as client:
        expected = fill(client)
        fake.state.overloaded = 3
        assert client.scan("k", "l") == expected
        assert client.read_tx(["k001"]) == [b"vk001"]
    with Client(fake.addresses[0], timeout_s=0.5, backoff=FAST) as client:
        fake.state.overloaded = 10_000
        started = time.monotonic()
        with pytest.raises(Overloaded, match="overloaded: this server already coordinates"):
            client.read_tx(["k001"])
        assert time.monotonic() - started < 2


def test_async_read_refused_for_load_raises_overloaded(fake: FakeCluster) -> None:
    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=0.5, backoff=FAST) as client:
            fake.state.overloaded = 10_000
            with pytest.raises(Overloaded):
                await client.scan("a", "z")

    asyncio.run(scenario())


def test_a_read_transaction_over_the_servers_limit_is_refused_before_it_is_sent(fake: FakeCluster) -> None:
    fake.state.max_read_keys = 10
    keys = [f"x{index}" for index in range(100_000)]
    with Client(fake.addresses[0], timeout_s=5) as client:
        started = time.monotonic()
        with pytest.raises(InvalidArgument, match="at most 10 keys, not 100000"):
            client.read_tx(keys)
        assert time.monotonic() - started < 1

    async def scenario() -> None:
        async with AsyncClient(fake.addresses[0], timeout_s=5) as client:
            with pytest.raises(InvalidArgument, match="at most 10 keys"):
                await client.read_tx(keys)

    asyncio.run(scenario())
    assert not [key for servicer in fake.servicers for method, key in servicer.received.keys if method == "read_tx"]


def test_okapi_client_scan_prints_every_page(fake: FakeCluster) -> None:
    with Client(fake.addresses[0], timeout_s=5) as client:
        fill(client)
        lines, stop = respond(client, "SCAN k l")
    assert not stop
    assert lines == ["SCAN k l BEGIN", *(f"  {key} v{key}" for key in KEYS), "SCAN END"]
    assert len(scan_requests(fake)) == 5


def test_the_distinct_keys_count_against_the_limit_and_are_counted_lazily() -> None:
    from okapikv.client.operations import unique_keys

    ordered, unique = unique_keys(["a", "b", "a"] * 50_000, max_keys=2)  # 150,000 names, 2 keys
    assert len(ordered) == 150_000 and unique == [b"a", b"b"]
    seen: list[int] = []

    def endless() -> Iterator[str]:
        number = 0
        while True:
            seen.append(number)
            yield f"k{number}"
            number += 1

    with pytest.raises(InvalidArgument, match="at most 10 keys, not more than 10"):
        unique_keys(endless(), max_keys=10)
    assert len(seen) == 11  # refused at the 11th distinct key, nothing more taken
