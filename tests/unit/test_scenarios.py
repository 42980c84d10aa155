"""Protocol scenarios on the simulator's deterministic world (``okapikv.sim.world.World.fixed``:
fixed delays, 0.2 ms inside a DC, 20 ms between DCs unless a test says otherwise): causality,
convergence, clock skew, and when remote updates become visible under each protocol."""

from __future__ import annotations

import itertools

import pytest

from okapikv.core.messages import ClientReply, GetReply, ReadTxReply, ScanReply, ServerId
from okapikv.core.partitioning import partition_of
from okapikv.core.timestamps import physical_of
from okapikv.sim.caller import Caller
from okapikv.sim.world import World

PROTOCOLS = ["okapi", "cure", "gentlerain"]
MS = 1_000


def keys_on_distinct_partitions(num_partitions: int, prefix: str = "k") -> tuple[bytes, bytes]:
    """Two keys that live on different partitions."""
    first = f"{prefix}0".encode()
    for index in itertools.count(1):
        candidate = f"{prefix}{index}".encode()
        if partition_of(candidate, num_partitions) != partition_of(first, num_partitions):
            return first, candidate
    raise AssertionError("unreachable")


def value(reply: ClientReply) -> bytes | None:
    assert isinstance(reply, GetReply), reply
    return reply.value


def values(reply: ClientReply) -> list[bytes | None]:
    assert isinstance(reply, ReadTxReply), reply
    return list(reply.values)


def items(reply: ClientReply) -> list[tuple[bytes, bytes]]:
    assert isinstance(reply, ScanReply), reply
    return list(reply.items)


def waits(world: World) -> dict[str, int]:
    """Total wait count per reason over every server."""
    totals: dict[str, int] = {}
    for server in world.servers:
        for reason, wait in server.stats.waits.items():
            totals[reason] = totals.get(reason, 0) + wait.count
    return totals


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("piggyback", [False, True])
def test_causality_across_dcs_in_every_state(protocol: str, piggyback: bool) -> None:
    """In DC 0 a client writes x then y (different partitions). x's replication link is much slower
    than y's, so DC 2 receives y first. In every state where a reader in DC 2 sees y's new value
    (GET, RO-TX or SCAN), x's new value must be visible to it too."""
    partitions = 3
    x, y = keys_on_distinct_partitions(partitions, prefix="key")
    slow_link = (ServerId(0, partition_of(x, partitions)), ServerId(2, partition_of(x, partitions)))
    world = World.fixed(3, partitions, protocol, piggyback_usv=piggyback, link_extra_us={slow_link: 60 * MS})
    world.advance(30 * MS)
    writer = Caller(world, 0)
    writer.put(x, b"old-x")
    writer.put(y, b"old-y")
    world.advance(300 * MS)
    writer.put(x, b"new-x")
    writer.put(y, b"new-y")

    seen_y = {"get": False, "tx": False, "scan": False}
    low, high = min(x, y), max(x, y)
    for _ in range(200):
        world.advance(2 * MS)
        reader = Caller(world, 2)
        if value(reader.get(y)) == b"new-y":
            seen_y["get"] = True
            assert value(reader.get(x)) == b"new-x", "GET saw y's new value but not x's"
        tx_reader = Caller(world, 2)
        read = values(tx_reader.read_tx([x, y]))
        if read[1] == b"new-y":
            seen_y["tx"] = True
            assert read[0] == b"new-x", f"RO-TX fractured: {read}"
        scan_reader = Caller(world, 2)
        scanned = dict(items(scan_reader.scan(low, high)))
        if scanned.get(y) == b"new-y":
            seen_y["scan"] = True
            assert scanned.get(x) == b"new-x", f"SCAN fractured: {scanned}"
        if all(seen_y.values()):
            break
    assert all(seen_y.values()), f"y never became visible in DC 2: {seen_y}"


@pytest.mark.parametrize("protocol", PROTOCOLS + ["eventual"])
def test_concurrent_writes_converge_last_writer_wins(protocol: str) -> None:
    world = World.fixed(3, 2, protocol)
    world.advance(20 * MS)
    clients = [Caller(world, dc) for dc in range(3)]
    for dc, client in enumerate(clients):
        client.put(b"shared", f"from-{dc}".encode())
    world.advance(500 * MS)
    winner = max(
        (version.timestamp, version.source_dc, version.value)
        for server in world.servers
        for version in server.store.versions(b"shared")
    )
    for dc in range(3):
        assert value(Caller(world, dc).get(b"shared")) == winner[2]
        assert values(Caller(world, dc).read_tx([b"shared"])) == [winner[2]]
        assert items(Caller(world, dc).scan(b"s", b"t")) == [(b"shared", winner[2])]


def _skewed(protocol: str, skew_ms: int) -> tuple[World, bytes, bytes]:
    """One DC-0 server 50 ms ahead; returns the world and a key on the fast and the slow server."""
    slow_key, fast_key = keys_on_distinct_partitions(2, prefix="s")
    fast = ServerId(0, partition_of(fast_key, 2))
    world = World.fixed(3, 2, protocol, wan_us=10 * MS, skew_us={fast: skew_ms * MS})
    world.advance(50 * MS)
    return world, slow_key, fast_key


def test_okapi_never_waits_under_skew() -> None:
    world, slow_key, fast_key = _skewed("okapi", 50)
    client = Caller(world, 0)
    client.put(fast_key, b"1")  # timestamp 50 ms ahead of the slow server's clock
    client.put(slow_key, b"2")
    assert client.last_latency_us < 1 * MS
    client.read_tx([slow_key, fast_key])
    assert client.last_latency_us < 1 * MS
    assert waits(world) == {}


def test_cure_waits_about_the_skew_on_put_and_rotx() -> None:
    world, slow_key, fast_key = _skewed("cure", 50)
    client = Caller(world, 0)
    client.put(fast_key, b"1")
    client.put(slow_key, b"2")
    assert 45 * MS <= client.last_latency_us <= 55 * MS
    client.put(fast_key, b"3")
    client.read_tx([slow_key, fast_key])  # snapshot local entry is ahead of the slow partition's clock
    assert 40 * MS <= client.last_latency_us <= 55 * MS
    counts = waits(world)
    assert counts.get("put_dependency", 0) >= 1
    assert counts.get("tx_clock", 0) >= 1


def test_gentlerain_rotx_waits_until_whole_dc_stable_time_catches_up() -> None:
    """GentleRain's RO-TX snapshot must cover the client's dependency time: it waits until every DC
    has delivered up to it, about the furthest DC's delay plus the stabilization period."""
    world = World.fixed(3, 2, "gentlerain", wan_us=[[0, 10 * MS, 40 * MS], [10 * MS, 0, 30 * MS],
                                                    [40 * MS, 30 * MS, 0]])
    world.advance(100 * MS)
    client = Caller(world, 0)
    client.put(b"k", b"v")
    client.read_tx([b"k"])
    assert client.last_latency_us >= 40 * MS, "the snapshot waited less than the furthest DC's delay"
    assert waits(world).get("tx_stable", 0) == 1
    okapi = World.fixed(3, 2, "okapi", wan_us=10 * MS)
    okapi.advance(100 * MS)
    fast_client = Caller(okapi, 0)
    fast_client.put(b"k", b"v")
    assert values(fast_client.read_tx([b"k"])) == [b"v"]
    assert fast_client.last_latency_us < 1 * MS


def test_remote_visibility_rules_differ_by_protocol() -> None:
    """DC 0 writes while the link DC 0 <-> DC 2 is cut. DC 1 has the update.
    Okapi: invisible in DC 1 until DC 2 has it too (USV). Cure: visible once DC 1's GSV covers its
    dependencies. GentleRain: visible once DC 1's GST passes it (DC 2 still sends heartbeats to DC 1)."""
    visible_during_cut = {}
    for protocol in PROTOCOLS:
        world = World.fixed(3, 2, protocol, wan_us=5 * MS)
        world.advance(50 * MS)
        world.network.cut_link(0, 2)
        Caller(world, 0).put(b"remote", b"value")
        world.advance(200 * MS)
        visible_during_cut[protocol] = value(Caller(world, 1).get(b"remote")) == b"value"
        world.network.repair_link(0, 2)
        world.advance(200 * MS)
        assert value(Caller(world, 1).get(b"remote")) == b"value"
        assert value(Caller(world, 2).get(b"remote")) == b"value"
    assert visible_during_cut == {"okapi": False, "cure": True, "gentlerain": True}


def test_okapi_remote_visibility_waits_for_usv_then_appears() -> None:
    world = World.fixed(3, 1, "okapi", wan_us=[[0, 5 * MS, 5 * MS], [5 * MS, 0, 5 * MS], [5 * MS, 5 * MS, 0]])
    world.advance(30 * MS)
    writer = Caller(world, 0)
    writer.put(b"v", b"1")
    reader_server = world.server(ServerId(1, 0))
    write_time = world.now
    while value(Caller(world, 1).get(b"v")) != b"1":
        world.advance(500)
        assert world.now - write_time < 200 * MS
    # visible only after a full UST round: received (5 ms), GSV exchanged, USV computed
    assert world.now - write_time >= 10 * MS
    assert physical_of(reader_server.stable[0]) > 0


def test_okapi_put_after_remote_read_carries_dependency() -> None:
    """A client reads a remote value in DC 1 then writes in DC 1; in DC 2 the write's visibility
    implies the remote value's (writes follow reads across DCs)."""
    world = World.fixed(3, 2, "okapi", wan_us=5 * MS)
    world.advance(30 * MS)
    Caller(world, 0).put(b"a", b"from-0")
    client = Caller(world, 1)
    for _ in range(100):
        world.advance(2 * MS)
        if value(client.get(b"a")) == b"from-0":
            break
    client.put(b"b", b"from-1")
    for _ in range(100):
        world.advance(1 * MS)
        reader = Caller(world, 2)
        if value(reader.get(b"b")) == b"from-1":
            assert value(reader.get(b"a")) == b"from-0"
            return
    pytest.fail("b never became visible in DC 2")
