"""The maximum clock offset (``okapikv.core.server`` docstring; docs/operations.md, "Clocks: the
maximum offset"): what reaches more than the offset past a server's clock is refused (client
requests, snapshot slices, waits that long) or held back (peers' watermarks), changes nothing else,
and is counted; the HLC therefore stays within the offset of the clock, and no PUT ever waits for
the clock to catch up with an HLC that is ahead of it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from test_server_replication import T0, make, replies, sends, session

from okapikv.core.messages import (
    CatchUpReply,
    ClientRequest,
    DeleteRequest,
    ErrorReply,
    GetReply,
    GetRequest,
    Heartbeat,
    PutRequest,
    ReadTxReply,
    ReadTxRequest,
    ReplicateBatch,
    ScanRequest,
    ServerId,
    Session,
    SliceReply,
    SwapRequest,
    TxSlice,
    Update,
    WriteReply,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack, physical_of

OFFSET_US = 500_000
HOUR_US = 3_600_000_000
FAR = pack(T0 + HOUR_US)  # a timestamp from a clock an hour ahead


def state(server: PartitionServer) -> tuple[object, ...]:
    """Everything a refused request must leave as it was."""
    return (tuple(server.vv), server.stable, server.gsv, server.horizon, server.store.version_count,
            dict(server.stats.operations), server.parked_count, server.pending_reads)


def key_of(partition: int, partitions: int) -> bytes:
    return next(k for k in (f"k{i}".encode() for i in range(100)) if partition_of(k, partitions) == partition)


REQUESTS: dict[str, Callable[[Session], ClientRequest]] = {
    "put": lambda s: PutRequest(1, b"k", b"v", s),
    "swap": lambda s: SwapRequest(1, b"k", b"v", s),
    "delete": lambda s: DeleteRequest(1, b"k", s),
    "get": lambda s: GetRequest(1, b"k", s),
    "read_tx": lambda s: ReadTxRequest(1, (b"k",), s),
    "scan": lambda s: ScanRequest(1, b"a", b"z", None, s),
}


class TestClientRequests:
    @pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain"])
    @pytest.mark.parametrize("kind", sorted(REQUESTS))
    @pytest.mark.parametrize("where", ["dt", "stable"])
    def test_a_session_an_hour_ahead_is_refused_and_changes_nothing(self, protocol: str, kind: str,
                                                                    where: str) -> None:
        server = make(num_dcs=2, protocol=protocol)
        server.on_timer(T0)
        server.handle(PutRequest(9, b"k", b"old", session()), T0)
        before = state(server)
        ahead = session(dt=FAR) if where == "dt" else session(stable=(0, FAR))
        [reply] = replies(server.handle(REQUESTS[kind](ahead), T0 + 10))
        assert isinstance(reply, ErrorReply) and reply.code == "OUT_OF_RANGE"
        assert "3600000.0 ms ahead of this server's clock" in reply.message
        assert "maximum clock offset of 500 ms" in reply.message
        assert state(server) == before
        assert server.stats.clock_offset_refusals == 1
        assert server.last_clock_offset is not None and server.last_clock_offset[2] == HOUR_US - 10

    def test_a_dependency_within_the_offset_is_taken_and_the_hlc_follows_it(self) -> None:
        server = make()
        ahead = pack(T0 + OFFSET_US, 7)  # the last timestamp the ceiling allows
        [reply] = replies(server.handle(PutRequest(1, b"k", b"v", session(dt=ahead)), T0))
        assert isinstance(reply, WriteReply) and reply.timestamp == ahead + 1
        [refused] = replies(server.handle(PutRequest(2, b"k", b"v", session(dt=pack(T0 + OFFSET_US + 1))), T0))
        assert isinstance(refused, ErrorReply) and refused.code == "OUT_OF_RANGE"

    def test_dependencies_up_to_a_restored_hlc_ahead_of_the_clock_are_taken(self) -> None:
        # A restart above a persisted clock bound an hour ahead (the clock stepped back): the
        # server's own HLC is ahead, and a session that read its writes depends on no more than it.
        server = make(num_dcs=1)
        server.restore((), vv=(0,), stable=(0,), gsv=(0,), horizon=(0,), hlc_floor=FAR)
        [first] = replies(server.handle(PutRequest(1, b"k", b"v", Session((0,), 0)), T0))
        assert isinstance(first, WriteReply) and first.timestamp == FAR + 1
        [second] = replies(server.handle(PutRequest(2, b"k", b"w", Session((FAR + 1,), first.timestamp)), T0))
        assert isinstance(second, WriteReply) and second.timestamp == FAR + 2
        [read] = replies(server.handle(GetRequest(3, b"k", Session((FAR + 1,), second.timestamp)), T0))
        assert isinstance(read, GetReply) and read.value == b"w"
        assert server.stats.clock_offset_refusals == 0

    def test_70000_puts_after_an_hlc_an_hour_ahead_all_complete_at_once(self) -> None:
        # The 16-bit logical counter fills after 65,535 PUTs; the carry moves on instead of parking
        # every later PUT until the clock catches up (an hour here).
        server = make(num_dcs=1)
        server.restore((), vv=(0,), stable=(0,), gsv=(0,), horizon=(0,), hlc_floor=FAR)
        dt = 0
        for number in range(70_000):
            effects = server.handle(PutRequest(number, b"k", b"v", Session((0,), dt)), T0)
            reply = effects[0].reply  # type: ignore[union-attr]
            assert isinstance(reply, WriteReply), reply
            dt = reply.timestamp
        assert server.parked_count == 0 and server.stats.waits == {}
        assert physical_of(dt) == T0 + HOUR_US + 1

    @pytest.mark.parametrize("protocol", ["cure", "gentlerain"])
    def test_a_baseline_write_that_would_wait_past_the_offset_is_refused_not_parked(self, protocol: str) -> None:
        server = make(num_dcs=1, protocol=protocol)
        server.restore((), vv=(0,), stable=(0,), gsv=(0,), horizon=(0,), hlc_floor=FAR)
        before = state(server)
        [reply] = replies(server.handle(PutRequest(1, b"k", b"v", Session((0,), 0)), T0))
        assert isinstance(reply, ErrorReply) and reply.code == "OUT_OF_RANGE"
        assert "would wait for the clock" in reply.message
        assert state(server) == before and server.parked_count == 0
        # A wait within the offset still parks (the baselines' skew cost).
        near = make(num_dcs=1, protocol=protocol)
        assert near.handle(PutRequest(1, b"k", b"v", Session((0,), pack(T0 + 400_000))), T0) == []
        assert near.parked_count == 1

    def test_the_offset_is_configurable(self) -> None:
        server = make(max_clock_offset_us=10_000)
        [reply] = replies(server.handle(PutRequest(1, b"k", b"v", session(dt=pack(T0 + 20_000))), T0))
        assert isinstance(reply, ErrorReply) and "maximum clock offset of 10 ms" in reply.message


class TestPeerWatermarks:
    def test_a_heartbeat_an_hour_ahead_moves_vv_only_to_the_clock_plus_the_offset(self) -> None:
        server = make()
        server.handle(Heartbeat(ServerId(1, 0), FAR), T0)
        cap = pack(T0 + OFFSET_US, (1 << 16) - 1)
        assert server.vv[1] == cap
        assert server.stats.clock_offset_clamps == 1
        assert server.last_clock_offset == ("held back a Heartbeat watermark", "dc1/p0", HOUR_US)
        server.handle(Heartbeat(ServerId(1, 0), FAR + 1), T0 + 1_000)  # moves up with this clock
        assert server.vv[1] == pack(T0 + 1_000 + OFFSET_US, (1 << 16) - 1)
        server.handle(Heartbeat(ServerId(1, 0), FAR + 2), T0 + 500)  # never backwards
        assert server.vv[1] == pack(T0 + 1_000 + OFFSET_US, (1 << 16) - 1)
        assert server.hlc <= pack(T0 + 1_000)  # the HLC did not move

    def test_updates_an_hour_ahead_are_stored_but_the_stable_vector_stays_within_the_offset(self) -> None:
        a, b = make(dc=0), make(dc=1)
        updates = (Update(b"x", b"1", pack(T0 + 10), 1, None), Update(b"y", b"2", FAR, 1, None))
        a.handle(ReplicateBatch(ServerId(1, 0), updates), T0 + 100)
        assert a.store.version_count == 2  # nothing is lost: the far update waits, stored
        assert a.vv[1] == pack(T0 + 100 + OFFSET_US, (1 << 16) - 1)
        # A re-delivered copy (a resend after a reconnect, a catch-up) is installed idempotently.
        a.handle(ReplicateBatch(ServerId(1, 0), updates), T0 + 200)
        assert a.store.version_count == 2
        # Stabilization: the USV never passes this server's clock plus the offset.
        b.vv[1] = FAR
        a.stabilization._remote_gsvs[1] = (FAR, FAR)
        a.on_timer(T0 + 300)
        assert a.stable[1] <= pack(T0 + 300 + OFFSET_US, (1 << 16) - 1)
        [reply] = replies(a.handle(GetRequest(1, b"y", session()), T0 + 400))
        assert isinstance(reply, GetReply) and reply.value is None  # held back, not visible
        assert a.stats.clock_offset_clamps >= 1

    def test_a_catch_up_answer_an_hour_ahead_is_clamped(self) -> None:
        server = make()
        [request] = sends(server.start_catch_up())
        request_id = request.message.request_id  # type: ignore[union-attr]
        server.handle(CatchUpReply(ServerId(1, 0), request_id, FAR), T0)
        assert server.vv[1] == pack(T0 + OFFSET_US, (1 << 16) - 1)
        assert server.catching_up == ()

    def test_an_idle_server_heartbeats_its_hlc_when_that_is_ahead_of_its_clock(self) -> None:
        server = make()
        ahead = pack(T0 + 300_000, 5)  # a dependency within the offset moved the HLC ahead
        server.handle(PutRequest(1, b"k", b"v", session(dt=ahead)), T0)
        effects = server.on_timer(T0 + 10_000)
        beats = [send.message for send in sends(effects) if isinstance(send.message, Heartbeat)]
        assert beats and all(beat.timestamp == ahead + 1 for beat in beats)
        assert server.vv[0] == ahead + 1 > pack(T0 + 10_000)


class TestSnapshotSlices:
    def test_a_coordinator_with_a_clock_an_hour_ahead_cannot_raise_another_partitions_hlc(self) -> None:
        fast = make(partition=0, num_dcs=1, num_partitions=2)
        slow = make(partition=1, num_dcs=1, num_partitions=2)
        key = key_of(1, 2)
        effects = fast.handle(ReadTxRequest(7, (key,), Session((0,), 0)), T0 + HOUR_US)
        [slice_send] = sends(effects)
        assert isinstance(slice_send.message, TxSlice)
        before = state(slow)
        [answer] = sends(slow.handle(slice_send.message, T0))
        assert isinstance(answer.message, SliceReply) and answer.message.clock_ahead_us == HOUR_US
        assert state(slow) == before and slow.hlc < pack(T0 + 1)
        assert slow.stats.clock_offset_refusals == 1
        [reply] = replies(fast.handle(answer.message, T0 + HOUR_US))
        assert isinstance(reply, ErrorReply) and reply.code == "OUT_OF_RANGE" and reply.request_id == 7
        assert "partition 1 refused the snapshot" in reply.message
        assert fast.pending_reads == 0

    def test_a_slice_within_the_offset_raises_the_hlc_as_before(self) -> None:
        coordinator = make(partition=0, num_dcs=1, num_partitions=2)
        other = make(partition=1, num_dcs=1, num_partitions=2)
        effects = coordinator.handle(ReadTxRequest(7, (key_of(1, 2),), Session((0,), 0)), T0 + 300_000)
        [slice_send] = sends(effects)
        [answer] = sends(other.handle(slice_send.message, T0))
        assert isinstance(answer.message, SliceReply) and answer.message.clock_ahead_us == 0
        assert other.hlc == pack(T0 + 300_000)  # updateClockOnTx
        [reply] = replies(coordinator.handle(answer.message, T0 + 300_000))
        assert isinstance(reply, ReadTxReply)

    def test_a_cure_slice_that_would_wait_past_the_offset_is_refused(self) -> None:
        coordinator = make(partition=0, num_dcs=1, num_partitions=2, protocol="cure")
        other = make(partition=1, num_dcs=1, num_partitions=2, protocol="cure")
        other.restore((), vv=(0,), stable=(0,), gsv=(0,), horizon=(0,), hlc_floor=FAR)
        effects = coordinator.handle(ReadTxRequest(7, (key_of(1, 2),), Session((0,), FAR)), T0 + HOUR_US)
        [slice_send] = sends(effects)
        [answer] = sends(other.handle(slice_send.message, T0))
        assert isinstance(answer.message, SliceReply) and answer.message.clock_ahead_us > OFFSET_US
        assert other.parked_count == 0
