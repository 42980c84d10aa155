"""Protocol scenarios on the in-memory harness: causality, convergence, clock skew,
and when remote updates become visible under each protocol."""

from __future__ import annotations

import pytest
from harness import Harness, keys_on_distinct_partitions

from okapikv.core.messages import ServerId
from okapikv.core.timestamps import physical_of

PROTOCOLS = ["okapi", "cure", "gentlerain"]
MS = 1_000


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("piggyback", [False, True])
def test_causality_across_dcs_in_every_state(protocol: str, piggyback: bool) -> None:
    """In DC 0 a client writes x then y (different partitions). x's replication link is much slower
    than y's, so DC 2 receives y first. In every state where a reader in DC 2 sees y's new value
    (GET, RO-TX or SCAN), x's new value must be visible to it too."""
    partitions = 3
    x, y = keys_on_distinct_partitions(partitions, prefix="key")
    from okapikv.core.partitioning import partition_of

    slow_link = (ServerId(0, partition_of(x, partitions)), ServerId(2, partition_of(x, partitions)))
    harness = Harness(3, partitions, protocol, piggyback_usv=piggyback, link_delay_us={slow_link: 80 * MS})
    harness.run_for(30 * MS)
    writer = harness.client(0)
    writer.put(x, b"old-x")
    writer.put(y, b"old-y")
    harness.run_for(300 * MS)
    writer.put(x, b"new-x")
    writer.put(y, b"new-y")

    seen_y = {"get": False, "tx": False, "scan": False}
    low, high = min(x, y), max(x, y)
    for _ in range(200):
        harness.run_for(2 * MS)
        reader = harness.client(2)
        if reader.get(y) == b"new-y":
            seen_y["get"] = True
            assert reader.get(x) == b"new-x", "GET saw y's new value but not x's"
        tx_reader = harness.client(2)
        values = tx_reader.read_tx([x, y])
        if values[1] == b"new-y":
            seen_y["tx"] = True
            assert values[0] == b"new-x", f"RO-TX fractured: {values}"
        scan_reader = harness.client(2)
        items = dict(scan_reader.scan(low, high))
        if items.get(y) == b"new-y":
            seen_y["scan"] = True
            assert items.get(x) == b"new-x", f"SCAN fractured: {items}"
        if all(seen_y.values()):
            break
    assert all(seen_y.values()), f"y never became visible in DC 2: {seen_y}"


@pytest.mark.parametrize("protocol", PROTOCOLS + ["eventual"])
def test_concurrent_writes_converge_last_writer_wins(protocol: str) -> None:
    harness = Harness(3, 2, protocol)
    harness.run_for(20 * MS)
    clients = [harness.client(dc) for dc in range(3)]
    for dc, client in enumerate(clients):
        client.put(b"shared", f"from-{dc}".encode())
    harness.run_for(500 * MS)
    winner = max(
        (version.timestamp, version.source_dc, version.value)
        for server in harness.servers.values()
        for version in server.store.versions(b"shared")
    )
    for dc in range(3):
        assert harness.client(dc).get(b"shared") == winner[2]
        assert harness.client(dc).read_tx([b"shared"]) == [winner[2]]
        assert harness.client(dc).scan(b"s", b"t") == [(b"shared", winner[2])]


def _skewed(protocol: str, skew_ms: int) -> tuple[Harness, bytes, bytes]:
    """One DC-0 server 50 ms ahead; returns the harness and a key on the fast and the slow server."""
    slow_key, fast_key = keys_on_distinct_partitions(2, prefix="s")
    from okapikv.core.partitioning import partition_of

    fast = ServerId(0, partition_of(fast_key, 2))
    harness = Harness(3, 2, protocol, inter_dc_delay_us=10 * MS, skew_us={fast: skew_ms * MS})
    harness.run_for(50 * MS)
    return harness, slow_key, fast_key


def test_okapi_never_waits_under_skew() -> None:
    harness, slow_key, fast_key = _skewed("okapi", 50)
    client = harness.client(0)
    client.put(fast_key, b"1")  # timestamp 50 ms ahead of the slow server's clock
    client.put(slow_key, b"2")
    assert client.last_latency_us < 1 * MS
    client.read_tx([slow_key, fast_key])
    assert client.last_latency_us < 1 * MS
    assert harness.stats() == {}


def test_cure_waits_about_the_skew_on_put_and_rotx() -> None:
    harness, slow_key, fast_key = _skewed("cure", 50)
    client = harness.client(0)
    client.put(fast_key, b"1")
    client.put(slow_key, b"2")
    assert 45 * MS <= client.last_latency_us <= 55 * MS
    client.put(fast_key, b"3")
    client.read_tx([slow_key, fast_key])  # snapshot local entry is ahead of the slow partition's clock
    assert 40 * MS <= client.last_latency_us <= 55 * MS
    waits = harness.stats()
    assert waits.get("put_dependency", 0) >= 1
    assert waits.get("tx_clock", 0) >= 1


def test_gentlerain_rotx_waits_until_whole_dc_stable_time_catches_up() -> None:
    """GentleRain's RO-TX snapshot must cover the client's dependency time: it waits until every DC
    has delivered up to it, about the furthest DC's delay plus the stabilization period."""
    harness = Harness(3, 2, "gentlerain", inter_dc_delay_us=[[0, 10 * MS, 40 * MS], [10 * MS, 0, 30 * MS],
                                                             [40 * MS, 30 * MS, 0]])
    harness.run_for(100 * MS)
    client = harness.client(0)
    client.put(b"k", b"v")
    client.read_tx([b"k"])
    assert client.last_latency_us >= 40 * MS, "the snapshot waited less than the furthest DC's delay"
    assert harness.stats().get("tx_stable", 0) == 1
    okapi = Harness(3, 2, "okapi", inter_dc_delay_us=10 * MS)
    okapi.run_for(100 * MS)
    fast_client = okapi.client(0)
    fast_client.put(b"k", b"v")
    assert fast_client.read_tx([b"k"]) == [b"v"]
    assert fast_client.last_latency_us < 1 * MS


def test_remote_visibility_rules_differ_by_protocol() -> None:
    """DC 0 writes while the link DC 0 <-> DC 2 is cut. DC 1 has the update.
    Okapi: invisible in DC 1 until DC 2 has it too (USV). Cure: visible once DC 1's GSV covers its
    dependencies. GentleRain: visible once DC 1's GST passes it (DC 2 still sends heartbeats to DC 1)."""
    visible_during_cut = {}
    for protocol in PROTOCOLS:
        harness = Harness(3, 2, protocol, inter_dc_delay_us=5 * MS)
        harness.run_for(50 * MS)
        harness.cut(0, 2)
        harness.client(0).put(b"remote", b"value")
        harness.run_for(200 * MS)
        visible_during_cut[protocol] = harness.client(1).get(b"remote") == b"value"
        harness.repair(0, 2)
        harness.run_for(200 * MS)
        assert harness.client(1).get(b"remote") == b"value"
        assert harness.client(2).get(b"remote") == b"value"
    assert visible_during_cut == {"okapi": False, "cure": True, "gentlerain": True}


def test_okapi_remote_visibility_waits_for_usv_then_appears() -> None:
    harness = Harness(3, 1, "okapi", inter_dc_delay_us=[[0, 5 * MS, 5 * MS], [5 * MS, 0, 5 * MS],
                                                        [5 * MS, 5 * MS, 0]])
    harness.run_for(30 * MS)
    writer = harness.client(0)
    writer.put(b"v", b"1")
    reader_server = harness.servers[ServerId(1, 0)]
    write_time = harness.time_us
    while harness.client(1).get(b"v") != b"1":
        harness.run_for(500)
        assert harness.time_us - write_time < 200 * MS
    # visible only after a full UST round: received (5 ms), GSV exchanged, USV computed
    assert harness.time_us - write_time >= 10 * MS
    assert physical_of(reader_server.stable[0]) > 0


def test_okapi_put_after_remote_read_carries_dependency() -> None:
    """A client reads a remote value in DC 1 then writes in DC 1; in DC 2 the write's visibility
    implies the remote value's (writes follow reads across DCs)."""
    harness = Harness(3, 2, "okapi", inter_dc_delay_us=5 * MS)
    harness.run_for(30 * MS)
    harness.client(0).put(b"a", b"from-0")
    client = harness.client(1)
    for _ in range(100):
        harness.run_for(2 * MS)
        if client.get(b"a") == b"from-0":
            break
    client.put(b"b", b"from-1")
    for _ in range(100):
        harness.run_for(1 * MS)
        reader = harness.client(2)
        if reader.get(b"b") == b"from-1":
            assert reader.get(b"a") == b"from-0"
            return
    pytest.fail("b never became visible in DC 2")
