"""PUT / SWAP / DELETE / GET / SCAN / RO-TX semantics in one DC (docs/protocol.md, "Operations").

One DC of the simulator's deterministic world (``okapikv.sim.world.World.fixed``) with no delay
inside the DC: every slice and reply is delivered at once, and a parked request is resumed as time
advances to the earliest deadline. Every test runs
with one and with three partitions and under every protocol: with one DC they must all behave like
a plain linearizable key-value store.
"""

from __future__ import annotations

import pytest

from okapikv.core.messages import (
    GetReply,
    ReadTxReply,
    ScanReply,
    SwapReply,
    WriteReply,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.timestamps import pack
from okapikv.sim.caller import Caller
from okapikv.sim.world import World

PROTOCOLS = ["okapi", "cure", "gentlerain", "eventual"]


@pytest.fixture(params=[(p, n) for p in PROTOCOLS for n in (1, 3)], ids=lambda c: f"{c[0]}-{c[1]}p")
def dc(request: pytest.FixtureRequest) -> Caller:
    protocol, partitions = request.param
    return one_dc(partitions, protocol)


def one_dc(partitions: int, protocol: str) -> Caller:
    """A client session on one DC whose partitions talk without delay."""
    return Caller(World.fixed(1, partitions, protocol, lan_us=0))


def get(dc: Caller, key: bytes) -> bytes | None:
    reply = dc.get(key)
    assert isinstance(reply, GetReply)
    return reply.value


def put(dc: Caller, key: bytes, value: bytes) -> WriteReply:
    reply = dc.put(key, value)
    assert isinstance(reply, WriteReply)
    return reply


def delete(dc: Caller, key: bytes) -> WriteReply:
    reply = dc.delete(key)
    assert isinstance(reply, WriteReply)
    return reply


def swap(dc: Caller, key: bytes, value: bytes) -> SwapReply:
    reply = dc.swap(key, value)
    assert isinstance(reply, SwapReply)
    return reply


def read_tx(dc: Caller, keys: list[bytes], coordinator: int = 0) -> tuple[bytes | None, ...]:
    reply = dc.read_tx(keys, coordinator)
    assert isinstance(reply, ReadTxReply)
    return reply.values


def scan(dc: Caller, start: bytes, end: bytes, limit: int | None = None, coordinator: int = 0) -> list:  # type: ignore[type-arg]
    reply = dc.scan(start, end, limit, coordinator)
    assert isinstance(reply, ScanReply)
    return list(reply.items)


class TestSingleKey:
    def test_get_missing(self, dc: Caller) -> None:
        assert get(dc, b"nothing") is None

    def test_put_reports_whether_a_value_existed(self, dc: Caller) -> None:
        assert not put(dc, b"k", b"1").found
        assert put(dc, b"k", b"2").found
        assert get(dc, b"k") == b"2"

    def test_put_timestamps_grow_and_set_session_dt(self, dc: Caller) -> None:
        first = put(dc, b"k", b"1")
        second = put(dc, b"k", b"2")
        assert second.timestamp > first.timestamp
        assert dc.session.dt == second.timestamp
        assert first.session.dt == first.timestamp

    def test_delete_reports_whether_a_value_existed(self, dc: Caller) -> None:
        assert not delete(dc, b"k").found
        put(dc, b"k", b"1")
        assert delete(dc, b"k").found
        assert get(dc, b"k") is None
        assert not delete(dc, b"k").found
        assert not put(dc, b"k", b"again").found
        assert get(dc, b"k") == b"again"

    def test_delete_writes_a_tombstone_version(self, dc: Caller) -> None:
        put(dc, b"k", b"1")
        delete(dc, b"k")
        versions = dc.owner(b"k").store.versions(b"k")
        assert [v.value for v in versions] == [b"1", None]

    def test_swap_returns_the_old_value(self, dc: Caller) -> None:
        assert swap(dc, b"k", b"1").old_value is None
        assert swap(dc, b"k", b"2").old_value == b"1"
        assert get(dc, b"k") == b"2"
        delete(dc, b"k")
        assert swap(dc, b"k", b"3").old_value is None
        assert get(dc, b"k") == b"3"

    def test_swap_timestamp_is_above_what_it_read(self, dc: Caller) -> None:
        written = put(dc, b"k", b"1")
        swapped = swap(dc, b"k", b"2")
        assert swapped.timestamp > written.timestamp

    def test_keys_are_independent(self, dc: Caller) -> None:
        put(dc, b"a", b"1")
        put(dc, b"b", b"2")
        delete(dc, b"a")
        assert get(dc, b"a") is None
        assert get(dc, b"b") == b"2"

    def test_binary_keys_and_values(self, dc: Caller) -> None:
        key, value = bytes(range(256)), bytes(reversed(range(256))) * 3
        put(dc, key, value)
        assert get(dc, key) == value

    def test_versions_live_only_at_the_owner(self, dc: Caller) -> None:
        put(dc, b"k", b"1")
        holders = [server.id.partition for server in dc.world.servers if server.store.versions(b"k")]
        assert holders == [partition_of(b"k", dc.world.num_partitions)]

    def test_one_dc_sends_nothing_to_other_dcs(self, dc: Caller) -> None:
        put(dc, b"k", b"1")
        delete(dc, b"k")
        dc.world.advance(10_000)
        assert not dc.world.network.carried_between_dcs()
        assert all(server.stats.replicated_updates_sent == 0 for server in dc.world.servers)

    def test_operations_are_counted(self, dc: Caller) -> None:
        put(dc, b"k", b"1")
        swap(dc, b"k", b"2")
        delete(dc, b"k")
        get(dc, b"k")
        owner = dc.owner(b"k").stats.operations
        assert (owner["put"], owner["swap"], owner["delete"], owner["get"]) == (1, 1, 1, 1)


class TestReadTransaction:
    def test_values_in_request_order(self, dc: Caller) -> None:
        for key in (b"a", b"b", b"c"):
            put(dc, key, key.upper())
        assert read_tx(dc, [b"c", b"missing", b"a", b"b"]) == (b"C", None, b"A", b"B")

    def test_deleted_key_reads_none(self, dc: Caller) -> None:
        put(dc, b"a", b"1")
        delete(dc, b"a")
        assert read_tx(dc, [b"a"]) == (None,)

    def test_duplicate_keys(self, dc: Caller) -> None:
        put(dc, b"a", b"1")
        assert read_tx(dc, [b"a", b"a"]) == (b"1", b"1")

    def test_empty_key_set(self, dc: Caller) -> None:
        assert read_tx(dc, []) == ()

    def test_any_partition_can_coordinate(self, dc: Caller) -> None:
        keys = [f"key{i}".encode() for i in range(12)]
        for key in keys:
            put(dc, key, key + b"!")
        for coordinator in range(dc.world.num_partitions):
            assert read_tx(dc, keys, coordinator) == tuple(key + b"!" for key in keys)
        assert all(server.pending_reads == 0 for server in dc.world.servers)

    def test_sees_the_sessions_own_writes_immediately(self, dc: Caller) -> None:
        # No time passes between the write and the read: lts = max(clock, dt) covers the write.
        put(dc, b"a", b"1")
        put(dc, b"a", b"2")
        put(dc, b"b", b"3")
        assert read_tx(dc, [b"a", b"b"]) == (b"2", b"3")


class TestScan:
    def fill(self, dc: Caller) -> None:
        for key in (b"a", b"aa", b"ab", b"b", b"ba", b"c", b"B", b"\x00", b"\xff"):
            put(dc, key, b"v" + key)

    def test_inclusive_byte_order_across_partitions(self, dc: Caller) -> None:
        self.fill(dc)
        assert scan(dc, b"a", b"b") == [(b"a", b"va"), (b"aa", b"vaa"), (b"ab", b"vab"), (b"b", b"vb")]

    def test_whole_keyspace(self, dc: Caller) -> None:
        self.fill(dc)
        keys = [key for key, _ in scan(dc, b"", b"\xff\xff")]
        assert keys == sorted([b"a", b"aa", b"ab", b"b", b"ba", b"c", b"B", b"\x00", b"\xff"])

    def test_skips_deleted_keys(self, dc: Caller) -> None:
        self.fill(dc)
        delete(dc, b"aa")
        assert [key for key, _ in scan(dc, b"a", b"ab")] == [b"a", b"ab"]

    def test_limit(self, dc: Caller) -> None:
        self.fill(dc)
        assert [key for key, _ in scan(dc, b"a", b"c", limit=2)] == [b"a", b"aa"]
        assert scan(dc, b"a", b"c", limit=0) == []
        assert len(scan(dc, b"a", b"c", limit=100)) == 6

    def test_limit_is_applied_after_deletes(self, dc: Caller) -> None:
        self.fill(dc)
        delete(dc, b"a")
        delete(dc, b"aa")
        assert [key for key, _ in scan(dc, b"a", b"c", limit=2)] == [b"ab", b"b"]

    def test_empty_and_reversed_ranges(self, dc: Caller) -> None:
        self.fill(dc)
        assert scan(dc, b"d", b"e") == []
        assert scan(dc, b"c", b"a") == []

    def test_any_partition_can_coordinate(self, dc: Caller) -> None:
        self.fill(dc)
        expected = scan(dc, b"", b"\xff")
        for coordinator in range(dc.world.num_partitions):
            assert scan(dc, b"", b"\xff", coordinator=coordinator) == expected


class TestLinearizableInOneDC:
    def test_a_fresh_session_sees_the_latest_write(self, dc: Caller) -> None:
        # Single-key operations in one DC are linearizable: even a client with an empty session
        # reads the last completed write of the key, at the same clock reading.
        put(dc, b"k", b"1")
        put(dc, b"k", b"2")
        other = Caller(dc.world)
        reply = other.get(b"k")
        assert isinstance(reply, GetReply) and reply.value == b"2"
        written = other.put(b"k", b"3")
        assert isinstance(written, WriteReply) and written.found
        assert get(dc, b"k") == b"3"

    def test_many_writes_in_one_microsecond(self) -> None:
        # Okapi: the logical counter orders them, no wait. The first timer round (a stabilization
        # that advances the HLC to the clock) runs alone, a microsecond before the writes.
        dc = Caller(World.fixed(1, 1, "okapi", lan_us=0, start_us=999_999))
        dc.world.advance(1)
        stamps = [put(dc, b"k", str(i).encode()).timestamp for i in range(100)]
        assert stamps == sorted(set(stamps))
        assert dc.world.now == 1_000_000
        assert stamps[-1] == pack(1_000_000, 99)
        assert get(dc, b"k") == b"99"
