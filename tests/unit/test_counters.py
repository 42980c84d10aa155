"""Counters (``okapikv.core.counters``, docs/protocol.md "Counters"): the state's encoding, the merge
of a read, INCR's rules and refusals, and a 3-DC cluster of cores whose concurrent increments,
resent updates, resets and garbage collection keep every increment exactly once."""

from __future__ import annotations

from random import Random

import pytest
from unit.test_server_replication import T0, Mesh, make, replies, session

from okapikv.core import counters
from okapikv.core.counters import CounterState, Resolved
from okapikv.core.messages import (
    DeleteRequest,
    ErrorReply,
    GetReply,
    GetRequest,
    IncrReply,
    IncrRequest,
    PutManyRequest,
    PutRequest,
    ReadTxReply,
    ReadTxRequest,
    ReplicateBatch,
    ScanReply,
    ScanRequest,
    Send,
    ServerId,
    Session,
    SwapReply,
    SwapRequest,
)
from okapikv.core.mvstore import Version


def counter(epoch: tuple[int, int], base: int, *totals: tuple[int, int]) -> bytes:
    return counters.encode(CounterState(epoch, base, totals))


def always(version: Version) -> bool:
    return True


class TestState:
    @pytest.mark.parametrize("base", [0, 1, -1, 63, -64, counters.INT64_MAX, counters.INT64_MIN])
    def test_encode_decode_round_trip(self, base: int) -> None:
        state = CounterState((123456789, 2), base, ((5, 0), (0, 300), (1 << 40, 7)))
        encoded = counters.encode(state)
        assert counters.is_counter(encoded)
        assert counters.decode(encoded) == state

    def test_a_small_three_dc_state_costs_under_30_bytes(self) -> None:
        state = CounterState((1 << 60, 2), 0, ((1000, 3), (7, 0), (0, 0)))
        assert len(counters.encode(state)) < 30

    @pytest.mark.parametrize("text,expected", [
        (b"0", 0), (b"-7", -7), (b"9223372036854775807", counters.INT64_MAX),
        (b"-9223372036854775808", counters.INT64_MIN), (b"9223372036854775808", None), (b"", None),
        (b"01", None), (b"+1", None), (b" 1", None), (b"1.5", None), (b"-0", None), (b"abc", None),
        ("١".encode(), None),
    ])
    def test_parse_integer_as_redis(self, text: bytes, expected: int | None) -> None:
        assert counters.parse_integer(text) == expected


class TestResolve:
    def test_merges_the_current_epochs_counters_by_maximum_per_dc(self) -> None:
        chain = [Version(b"10", 5, 0, None),
                 Version(counter((5, 0), 10, (3, 0), (0, 0)), 10, 0, None),
                 Version(counter((5, 0), 10, (1, 0), (0, 2)), 11, 1, None),
                 Version(counter((5, 0), 10, (3, 1), (0, 0)), 12, 0, None)]
        resolved = counters.resolve(chain, always, 2)
        assert resolved.state == CounterState((5, 0), 10, ((3, 1), (0, 2)))
        assert resolved.state.value == 10
        view = counters.read_view(resolved, 2, 0)
        assert view is not None and view.value == b"10" and view.timestamp == 12
        assert view.dv == (12, 11)  # depends on both DCs' increments

    def test_a_reset_wins_over_the_increments_it_did_not_see(self) -> None:
        chain = [Version(counter((0, 0), 0, (4, 0), (0, 0)), 10, 0, None),
                 Version(None, 20, 1, None),  # DELETE in DC 1, not seeing DC 0's increment at 25
                 Version(counter((0, 0), 0, (5, 0), (0, 0)), 25, 0, None)]
        assert counters.resolve(chain, always, 2) == Resolved(chain[1])

    def test_increments_on_top_of_a_reset_count_from_it(self) -> None:
        chain = [Version(counter((0, 0), 0, (4, 0), (0, 0)), 10, 0, None),
                 Version(b"x", 20, 1, None),
                 Version(counter((20, 1), 7, (0, 0), (0, 1)), 30, 1, None),
                 Version(counter((0, 0), 0, (5, 0), (0, 0)), 25, 0, None)]
        chain.sort(key=lambda version: version.order)
        state = counters.resolve(chain, always, 2).state
        assert state is not None and state.value == 6

    def test_invisible_versions_do_not_count(self) -> None:
        chain = [Version(counter((0, 0), 0, (1, 0), (0, 0)), 10, 0, None),
                 Version(counter((0, 0), 0, (0, 0), (9, 0)), 11, 1, None)]
        state = counters.resolve(chain, lambda version: version.source_dc == 0, 2).state
        assert state is not None and state.value == 1


class TestIncrement:
    def test_own_entry_grows_from_every_version_of_the_epoch_visible_or_not(self) -> None:
        chain = [Version(counter((0, 0), 0, (1, 0), (0, 0)), 10, 0, None),
                 Version(counter((0, 0), 0, (2, 0), (0, 0)), 11, 0, None)]
        resolved = counters.resolve(chain, lambda version: version.timestamp == 10, 2)
        state = counters.increment(chain, resolved, 0, 2, -1, 0)
        assert state == CounterState((0, 0), 0, ((2, 1), (0, 0)))

    def test_starts_from_an_integer_string_and_refuses_any_other(self) -> None:
        string = Version(b"41", 7, 1, None)
        started = counters.increment([string], Resolved(string), 0, 2, 1, 0)
        assert isinstance(started, CounterState) and started.epoch == (7, 1) and started.value == 42
        text = Version(b"forty", 7, 1, None)
        assert counters.increment([text], Resolved(text), 0, 2, 1, 0) == counters.NOT_AN_INTEGER

    def test_refuses_to_leave_64_bits(self) -> None:
        top = Version(str(counters.INT64_MAX).encode(), 7, 1, None)
        assert counters.increment([top], Resolved(top), 0, 2, 1, 0) == counters.OVERFLOW


def incr(mesh: Mesh, dc: int, key: bytes, by: int, now_us: int, sessions: dict[int, Session]) -> IncrReply:
    server = mesh.servers[ServerId(dc, 0)]
    effects = server.handle(IncrRequest(now_us, key, by, sessions[dc]), now_us)
    [reply] = replies(effects)
    assert isinstance(reply, IncrReply), reply
    sessions[dc] = reply.session
    mesh.deliver([effect for effect in effects if isinstance(effect, Send)], now_us)
    return reply


def get(mesh: Mesh, dc: int, key: bytes, now_us: int) -> bytes | None:
    server = mesh.servers[ServerId(dc, 0)]
    [reply] = replies(server.handle(GetRequest(1, key, session(server.num_dcs)), now_us))
    assert isinstance(reply, GetReply)
    return reply.value


class TestCluster:
    def test_concurrent_increments_in_three_dcs_all_count_once(self) -> None:
        mesh = Mesh(3, 1)
        rng = Random(7)
        sessions = {dc: session(3) for dc in range(3)}
        mesh.hold = lambda send: True  # every DC increments without seeing the others
        expected = 0
        now = T0
        for _ in range(60):
            dc, by = rng.randrange(3), rng.choice([1, 1, 5, -2])
            now += 10
            reply = incr(mesh, dc, b"c", by, now, sessions)
            expected += by
            assert reply.timestamp > 0
        held = list(mesh.held)
        mesh.held = []
        mesh.hold = lambda send: False
        mesh.deliver(held + held, now)  # every batch twice: a resend counts once
        mesh.run(now, now + 200_000, 5_000)
        assert {get(mesh, dc, b"c", now + 200_000) for dc in range(3)} == {str(expected).encode()}

    def test_reply_is_the_value_the_session_sees_with_its_own_increments(self) -> None:
        mesh = Mesh(2, 1)
        sessions = {dc: session(2) for dc in range(2)}
        assert incr(mesh, 0, b"c", 1, T0, sessions).value == 1
        assert incr(mesh, 0, b"c", 1, T0 + 1, sessions).value == 2
        assert incr(mesh, 0, b"c", -5, T0 + 2, sessions).value == -3

    def test_reads_writes_and_refusals_on_counter_keys(self) -> None:
        server = make(num_dcs=1)
        ses = session(1)

        def one(request: object) -> object:
            [reply] = replies(server.handle(request, T0 + 10))  # type: ignore[arg-type]
            return reply

        assert isinstance(one(IncrRequest(1, b"c", 3, ses)), IncrReply)
        get_reply = one(GetRequest(2, b"c", ses))
        assert isinstance(get_reply, GetReply) and get_reply.value == b"3"
        tx = one(ReadTxRequest(3, (b"c",), ses))
        assert isinstance(tx, ReadTxReply) and tx.values == (b"3",)
        scan = one(ScanRequest(4, b"a", b"z", None, ses))
        assert isinstance(scan, ScanReply) and scan.items == ((b"c", b"3"),)
        swap = one(SwapRequest(5, b"c", b"7", ses))
        assert isinstance(swap, SwapReply) and swap.old_value == b"3"
        again = one(IncrRequest(6, b"c", 1, ses))
        assert isinstance(again, IncrReply) and again.value == 8  # from the integer string
        one(PutRequest(7, b"s", b"text", ses))
        refused = one(IncrRequest(8, b"s", 1, ses))
        assert isinstance(refused, ErrorReply) and refused.message == counters.NOT_AN_INTEGER
        one(DeleteRequest(9, b"c", ses))
        restarted = one(IncrRequest(10, b"c", 1, ses))
        assert isinstance(restarted, IncrReply) and restarted.value == 1
        for request in (PutRequest(11, b"x", counters.MAGIC + b"1", ses),
                        PutManyRequest(12, (b"x",), (counters.MAGIC,), ses),
                        IncrRequest(13, b"c", 1 << 63, ses)):
            assert isinstance(one(request), ErrorReply)
        get_x = one(GetRequest(14, b"x", ses))
        assert isinstance(get_x, GetReply) and get_x.value is None

    def test_delete_concurrent_with_increments_resolves_alike_in_every_dc(self) -> None:
        mesh = Mesh(2, 1)
        sessions = {dc: session(2) for dc in range(2)}
        incr(mesh, 0, b"c", 5, T0, sessions)
        mesh.run(T0, T0 + 100_000, 5_000)
        now = T0 + 100_000
        mesh.hold = lambda send: True
        effects = mesh.servers[ServerId(1, 0)].handle(DeleteRequest(1, b"c", sessions[1]), now)
        mesh.deliver(effects, now)
        incr(mesh, 0, b"c", 2, now + 5, sessions)  # after the delete in timestamp order, not seeing it
        held = list(mesh.held)
        mesh.held, mesh.hold = [], lambda send: False
        mesh.deliver(held, now + 10)
        mesh.run(now, now + 200_000, 5_000)
        assert get(mesh, 0, b"c", now + 200_000) is None
        assert get(mesh, 1, b"c", now + 200_000) is None

    def test_gc_keeps_what_the_merge_needs_and_drops_the_rest(self) -> None:
        mesh = Mesh(2, 1, gc_interval_us=10_000)
        sessions = {dc: session(2) for dc in range(2)}
        mesh.hold = lambda send: isinstance(send.message, ReplicateBatch)
        incr(mesh, 0, b"c", 3, T0, sessions)
        incr(mesh, 1, b"c", 4, T0 + 1, sessions)
        held = list(mesh.held)
        mesh.held, mesh.hold = [], lambda send: False
        mesh.deliver(held, T0 + 2)
        mesh.run(T0, T0 + 500_000, 5_000)
        for dc in range(2):
            assert get(mesh, dc, b"c", T0 + 500_000) == b"7"
            # two concurrent versions, neither dominating the other: both stay
            assert mesh.servers[ServerId(dc, 0)].store.version_count == 2
        sessions[0] = Session((0, 0), 0)
        incr(mesh, 0, b"c", 1, T0 + 500_001, {0: Session(mesh.servers[ServerId(0, 0)].stable, 0), 1: sessions[1]})
        mesh.run(T0 + 500_000, T0 + 1_000_000, 5_000)
        for dc in range(2):
            assert get(mesh, dc, b"c", T0 + 1_000_000) == b"8"
            # DC 0's newest dominates its older one; DC 1's one stays: one version per DC at most
            versions = mesh.servers[ServerId(dc, 0)].store.versions(b"c")
            assert sorted(version.source_dc for version in versions) == [0, 1]
