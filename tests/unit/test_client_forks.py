"""A client and its forks share one set of connections, in both clients, and move together.

Two fake DCs (``client_fake_server.py``: "oregon", the client's, and "ireland", its fallback).
Whichever session finds oregon gone moves the shared connections to ireland; every other session
of the client follows at its next operation (ireland adopts it: one ``AdoptSession``, no second
move), and closing the client closes every channel any of them opened. The moves with real servers
are in ``tests/integration/test_durability.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from client_fake_server import FakeCluster

from okapikv.client import AsyncClient, Client
from okapikv.client import aio as aio_module
from okapikv.client import sync as sync_module
from okapikv.core.backoff import Backoff

FAST = Backoff(base_s=0.01, cap_s=0.05)
MOVES: dict[str, Any] = {"timeout_s": 10, "failover_after_s": 0.2, "failover_wait_s": 2, "backoff": FAST}


@pytest.fixture
def dcs() -> Iterator[tuple[FakeCluster, FakeCluster]]:
    oregon, ireland = FakeCluster(num_partitions=2), FakeCluster(num_partitions=2, dc=1)
    oregon.start()
    ireland.start()
    try:
        yield oregon, ireland
    finally:
        oregon.close()
        ireland.close()


class Channels:
    """The channels ``module`` (a client's) opens with its ``opener``, and how many are still open."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any, opener: str) -> None:
        self.opened = 0
        self.closed = 0
        real = getattr(module, opener)

        def counting(*args: Any) -> Any:
            channel = real(*args)
            close = channel.close
            self.opened += 1

            def counted(*args: Any) -> Any:
                self.closed += 1
                return close(*args)

            channel.close = counted
            return channel

        monkeypatch.setattr(module, opener, counting)

    @property
    def open(self) -> int:
        return self.opened - self.closed


@pytest.fixture
def sync_channels(monkeypatch: pytest.MonkeyPatch) -> Channels:
    return Channels(monkeypatch, sync_module, "open_channel")


@pytest.fixture
def aio_channels(monkeypatch: pytest.MonkeyPatch) -> Channels:
    return Channels(monkeypatch, aio_module, "open_aio_channel")


def adoptions(dc: FakeCluster) -> int:
    return sum(len(servicer.received.adoptions) for servicer in dc.servicers)


def test_sync_a_fork_that_fails_over_leaves_no_channel_open(dcs: tuple[FakeCluster, FakeCluster],
                                                             sync_channels: Channels) -> None:
    oregon, ireland = dcs
    client = Client(oregon.addresses[0], fallback=[ireland.addresses[1]], **MOVES)
    fork = client.fork()
    fork.put("a", "1")
    oregon.stop()
    assert fork.get("a") is None
    assert fork.topology.dc_name == "ireland"
    fork.close()
    client.close()
    assert sync_channels.opened > 2  # oregon's two, then ireland's
    assert sync_channels.open == 0


def test_sync_a_fork_that_fails_over_takes_its_client_along(dcs: tuple[FakeCluster, FakeCluster],
                                                             sync_channels: Channels) -> None:
    oregon, ireland = dcs
    with Client(oregon.addresses[0], fallback=[ireland.addresses[1]], **MOVES) as client:
        fork = client.fork()
        assert fork.put("a", "1") is False and client.put("b", "2") is False
        oregon.stop()
        assert fork.get("a") is None  # ireland never got oregon's writes (fakes do not replicate)
        assert fork.topology.dc_name == "ireland"
        assert client.topology.dc_name == "ireland"  # the client follows its fork
        moved = adoptions(ireland)
        assert client.put("b", "3") is False  # in ireland, after ireland adopted its session
        assert adoptions(ireland) == moved + 1
        assert ireland.partition_server(b"b").received.keys[-1] == ("put", b"b")
        fork.close()
    assert sync_channels.open == 0


def test_sync_forks_follow_their_client_to_the_new_dc(dcs: tuple[FakeCluster, FakeCluster],
                                                       sync_channels: Channels) -> None:
    oregon, ireland = dcs
    with Client(oregon.addresses[0], fallback=[ireland.addresses[0]], **MOVES) as client:
        fork, idle = client.fork(), client.fork()
        fork.put("a", "1")
        oregon.stop()
        assert client.get("a") is None
        assert fork.topology.dc_name == idle.topology.dc_name == "ireland"
        moved = adoptions(ireland)
        assert fork.get("a") is None  # adopted, not moved again: no second ClusterInfo round
        assert adoptions(ireland) == moved + 1
        assert ireland.partition_server(b"a").received.keys[-1] == ("get", b"a")
    assert sync_channels.open == 0
    with pytest.raises(Exception, match="closed"):
        idle.get("a")


def test_async_a_fork_that_fails_over_takes_its_client_along_and_leaves_no_channel_open(
        dcs: tuple[FakeCluster, FakeCluster], aio_channels: Channels) -> None:
    oregon, ireland = dcs

    async def scenario() -> None:
        async with AsyncClient(oregon.addresses[0], fallback=[ireland.addresses[1]], **MOVES) as client:
            fork = client.fork()
            assert await fork.put("a", "1") is False
            oregon.stop()
            assert await fork.get("a") is None
            assert client.topology.dc_name == "ireland"
            moved = adoptions(ireland)
            assert await client.put("b", "3") is False
            assert adoptions(ireland) == moved + 1
            await fork.close()

    asyncio.run(scenario())
    assert aio_channels.open == 0
