"""The receiver half of the peer link protocol: resent messages are skipped, gaps refused, and a
restarted sender (new incarnation) starts its numbering over. Then the sender against a fake
receiver, and admission control (``okapikv.server.admission``) on a fake clock."""

from __future__ import annotations

from okapikv.core.messages import ServerId
from okapikv.server.inbound import SequenceTable

A = ServerId(0, 0)
B = ServerId(1, 0)


def test_in_order_batches_are_admitted_whole() -> None:
    links = SequenceTable()
    assert links.admit(A, 7, 1, 3) == 0
    assert links.handled(A, 7, 1, 3) == 3
    assert links.admit(A, 7, 4, 2) == 0
    assert links.handled(A, 7, 4, 2) == 5


def test_a_resent_tail_is_skipped() -> None:
    links = SequenceTable()
    links.handled(A, 7, 1, 5)
    assert links.admit(A, 7, 3, 6) == 3  # 3, 4, 5 already handled; 6, 7, 8 are new
    assert links.handled(A, 7, 3, 6) == 8
    assert links.admit(A, 7, 1, 4) == 4  # an old batch entirely: skip all of it
    assert links.handled(A, 7, 1, 4) == 8  # and the acknowledgement does not move back


def test_a_gap_is_refused() -> None:
    links = SequenceTable()
    links.handled(A, 7, 1, 5)
    assert links.admit(A, 7, 7, 1) is None


def test_a_new_incarnation_starts_over_and_sources_are_independent() -> None:
    links = SequenceTable()
    links.handled(A, 7, 1, 50)
    assert links.admit(A, 8, 1, 2) == 0
    assert links.handled(A, 8, 1, 2) == 2
    assert links.admit(B, 1, 40, 2) == 0  # first contact mid-stream (this server restarted): accept
    assert links.handled(B, 1, 40, 2) == 41


# ---------------------------------------------------------------- the sender, against a fake receiver


import asyncio  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402

import grpc  # noqa: E402
import grpc.aio  # noqa: E402

from okapikv.cluster.ports import free_port_block  # noqa: E402
from okapikv.core.messages import Heartbeat  # noqa: E402
from okapikv.server.links import OutgoingLink  # noqa: E402
from okapikv.wire import convert  # noqa: E402
from okapikv.wire import okapikv_pb2 as pb  # noqa: E402
from okapikv.wire import okapikv_pb2_grpc as pb_grpc  # noqa: E402


class FakeReceiver(pb_grpc.PeerServicer):
    """Records heartbeat timestamps in the order handled; the first ``break_streams`` streams
    die after one batch, before acknowledging it."""

    def __init__(self, break_streams: int) -> None:
        self.links = SequenceTable()
        self.handled: list[int] = []
        self.arrival: list[float] = []
        self.break_streams = break_streams
        self.streams = 0

    async def Link(self, request_iterator: AsyncIterator[pb.PeerBatch],
                   context: grpc.aio.ServicerContext) -> AsyncIterator[pb.LinkAck]:
        self.streams += 1
        breaking = self.streams <= self.break_streams
        async for batch in request_iterator:
            source = ServerId(batch.source.dc, batch.source.partition)
            skip = self.links.admit(source, batch.incarnation, batch.first_sequence, len(batch.messages))
            assert skip is not None
            for message in batch.messages[skip:]:
                self.handled.append(message.heartbeat.timestamp)
                self.arrival.append(asyncio.get_running_loop().time())
            last = self.links.handled(source, batch.incarnation, batch.first_sequence, len(batch.messages))
            if breaking:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "simulated break")
            yield pb.LinkAck(received=last)


def _free_port() -> int:
    """A port reserved for this process until the test's server binds it (``okapikv.cluster.ports``;
    an ephemeral port from a bind to port 0 could be taken by any connection meanwhile)."""
    return free_port_block(1)


async def _run_link(*, break_streams: int, start_late_s: float, delay_s: float, count: int) -> FakeReceiver:
    port = _free_port()
    receiver = FakeReceiver(break_streams)
    link = OutgoingLink(destination=ServerId(1, 0), label="b/0", address=f"127.0.0.1:{port}",
                        header=convert.batch_header("c", ServerId(0, 0), 5), delay_s=delay_s,
                        max_batch_bytes=1 << 20, max_message_bytes=4 << 20)
    link.start()
    loop = asyncio.get_running_loop()
    sent_at = loop.time()
    server = grpc.aio.server()
    pb_grpc.add_PeerServicer_to_server(receiver, server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"127.0.0.1:{port}")

    async def start_server() -> None:
        await asyncio.sleep(start_late_s)
        await server.start()

    starting = asyncio.create_task(start_server())
    for timestamp in range(1, count + 1):
        frame = convert.frame_peer_message(convert.encode_peer_message(Heartbeat(ServerId(0, 0), timestamp)))
        link.enqueue(frame, 16)
        if timestamp % 10 == 0:
            await asyncio.sleep(0.01)  # bursts: several batches, so several streams can break
    await starting
    try:
        for _ in range(200):
            if len(receiver.handled) >= count:
                break
            await asyncio.sleep(0.05)
    finally:
        await link.close()
        await server.stop(None)
    assert all(arrival >= sent_at + delay_s for arrival in receiver.arrival)
    return receiver


def test_messages_queued_before_the_receiver_starts_are_delivered_in_order() -> None:
    receiver = asyncio.run(_run_link(break_streams=0, start_late_s=0.3, delay_s=0.0, count=50))
    assert receiver.handled == list(range(1, 51))


def test_broken_streams_neither_lose_nor_duplicate_messages() -> None:
    receiver = asyncio.run(_run_link(break_streams=2, start_late_s=0.0, delay_s=0.0, count=200))
    assert receiver.handled == list(range(1, 201))
    assert receiver.streams >= 3


def test_wan_delay_holds_messages_back() -> None:
    receiver = asyncio.run(_run_link(break_streams=0, start_late_s=0.0, delay_s=0.05, count=20))
    assert receiver.handled == list(range(1, 21))


def test_oversized_replication_batches_are_split_and_oversized_replies_dropped() -> None:
    from okapikv.cluster.config import MESSAGE_OVERHEAD_BYTES, ClusterConfig, local_cluster
    from okapikv.core.messages import ReadItem, ReplicateBatch, SliceReply, Update
    from okapikv.server.node import PartitionNode

    limit = (1 << 20) + 1024 + MESSAGE_OVERHEAD_BYTES
    config = ClusterConfig.from_dict(local_cluster(dcs=("a", "b"), partitions=1).to_dict()
                                     | {"max_message_bytes": limit})
    node = PartitionNode(config, 0, 0)
    updates = tuple(Update(b"k%d" % i, b"x" * 300_000, i + 1, 0, None) for i in range(10))
    frames = node.encoder.encode(ReplicateBatch(node.id, updates, (7, 8)))
    assert len(frames) > 1
    assert all(len(frame) <= limit - MESSAGE_OVERHEAD_BYTES for frame, _ in frames)
    batches = [
        convert.peer_message_from_pb(message, node.id, node.num_dcs)
        for frame, _ in frames
        for message in pb.PeerBatch.FromString(frame).messages
    ]
    assert tuple(update for batch in batches for update in batch.updates) == updates  # type: ignore[union-attr]
    # the GSV riding on the batch goes once, with its last updates
    assert [batch.gsv for batch in batches] == [None] * (len(batches) - 1) + [(7, 8)]  # type: ignore[union-attr]
    too_big = SliceReply(node.id, 1, (ReadItem(b"k", b"x" * (2 << 20), 1, 0, None),), False)
    assert node.encoder.encode(too_big) == []
    assert node.encoder.oversized_dropped == 1


# ---------------------------------------------------------------- admission control (Admission.backlogged)


def test_backlog_counts_only_what_is_due_on_a_working_link() -> None:
    async def scenario() -> None:
        link = OutgoingLink(destination=ServerId(1, 0), label="b/0", address="127.0.0.1:1",
                            header=convert.batch_header("c", ServerId(0, 0), 5), delay_s=0.05,
                            max_batch_bytes=1 << 20, max_message_bytes=4 << 20)  # never started
        now = asyncio.get_running_loop().time()
        assert link.backlog_s(now) == 0.0  # nothing queued
        link.enqueue(b"frame", 5)
        link.connected = True
        assert link.backlog_s(now) == 0.0  # still inside its emulated WAN delay
        assert abs(link.backlog_s(now + 0.25) - 0.2) < 0.01  # due for 0.2 s, not sent
        link.held = True  # a cut DC holds nothing back
        assert link.backlog_s(now + 0.25) == 0.0
        link.held, link.connected = False, False  # neither does one that is unreachable
        assert link.backlog_s(now + 0.25) == 0.0

    asyncio.run(scenario())


class StubLink:
    """What admission reads of a link: its backlog and when it was last acknowledged."""

    def __init__(self, backlog_s: float = 0.0, last_ack_at: float = 0.0) -> None:
        self.backlog = backlog_s
        self.last_ack_at = last_ack_at

    def backlog_s(self, now: float) -> float:
        return self.backlog


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_client_batches_wait_only_for_a_replica_that_is_slow_not_one_that_is_stuck() -> None:
    from okapikv.server import admission as admission_module
    from okapikv.server.admission import Admission

    clock = FakeClock()
    links: dict[ServerId, StubLink] = {}
    admission = Admission(links, time=clock)
    assert not admission.backlogged()  # no links yet
    now = clock.now
    link = StubLink(0.01, last_ack_at=now)
    links[ServerId(1, 0)] = link
    assert not admission.backlogged()
    link.backlog = admission_module.ADMISSION_LAG_S + 0.01
    assert admission.backlogged()
    link.backlog = 5.0  # far behind but still acknowledging: slow, so still held
    assert admission.backlogged()
    link.last_ack_at = now - admission_module.ADMISSION_GIVE_UP_S - 0.1  # no ack for a while: stuck
    assert not admission.backlogged()


def test_bounded_visibility_holds_client_batches_while_remote_updates_are_late() -> None:
    """``bounded_visibility``: a server holds client batches while a remote DC's newest visible
    update is older than Okapi's UST bound for it, unless so much older that the DC is cut off."""
    import dataclasses

    from okapikv.cluster.config import local_cluster
    from okapikv.core.timestamps import pack
    from okapikv.server import visibility_bound as bound_module
    from okapikv.server.node import PartitionNode

    def scenario(bounded: bool) -> None:
        config = dataclasses.replace(local_cluster(dcs=("a", "b", "c"), partitions=1, wan=0.0, base_port=45200),
                                     wan_ms=((0.0, 10.0, 40.0), (10.0, 0.0, 20.0), (40.0, 20.0, 0.0)),
                                     bounded_visibility=bounded)
        # From a to c: through b (10 + 20) or directly and back (40 + 0): the slowest path, 40 ms,
        # plus ADMISSION_VISIBILITY_PERIODS (1.5) stabilization periods of 5 ms: below the bound.
        assert bound_module.ADMISSION_VISIBILITY_PERIODS == 1.5
        assert bound_module.visibility_bounds_us(config, 2) == (47_500, 57_500, 0)  # from b: through a, 10 + 40
        server = PartitionNode(config, 2, 0)  # its admission, as the node sets it up
        clock = FakeClock()
        admission = server.admission
        admission.time = clock
        server.peer_links.links[ServerId(0, 0)] = StubLink(last_ack_at=clock.now)  # type: ignore[assignment]
        now_us = server.clock.now_us()
        server.core.stable = (pack(now_us - 20_000), pack(now_us - 20_000), pack(now_us))
        assert not admission.backlogged()  # both remote DCs within their bounds
        server.core.stable = (pack(now_us - 60_000), pack(now_us - 20_000), pack(now_us))
        assert admission.backlogged() is bounded  # DC a 12.5 ms past its threshold
        server.core.stable = (pack(now_us - 60_000 - bound_module.VISIBILITY_GIVE_UP_US), pack(now_us),
                              pack(now_us))
        assert not admission.backlogged()  # a whole second late: cut off, not slow; writes go on

    scenario(True)
    scenario(False)


def test_the_admission_policy_carries_no_visibility_bound_unless_the_config_asks() -> None:
    """The bound is an experiment on emulated WANs (``okapikv.server.visibility_bound``): a server
    whose config leaves it off, or whose protocol has no UST, builds none."""
    import dataclasses

    from okapikv.cluster.config import local_cluster
    from okapikv.server.visibility_bound import visibility_hold

    config = local_cluster(dcs=("a", "b"), partitions=1, wan=10.0, base_port=45200)
    assert visibility_hold(config, 0, True, lambda: 0, lambda: (0, 0)) is None
    bounded = dataclasses.replace(config, bounded_visibility=True)
    assert visibility_hold(bounded, 0, False, lambda: 0, lambda: (0, 0)) is None
    hold = visibility_hold(bounded, 0, True, lambda: 0, lambda: (0, 0))
    assert hold is not None and hold() is False


def test_a_held_connection_waits_at_most_the_admission_bound_and_counts_once() -> None:
    """The native port's callbacks (``Admission.hold``): a wait begins once (one count), holds
    until ``ADMISSION_MAX_WAIT_S`` has passed, then lets the work through; the next wait counts anew."""
    from okapikv.server.admission import ADMISSION_MAX_WAIT_S, Admission

    clock = FakeClock()
    admission = Admission({}, time=clock)
    since = admission.hold(None)
    assert since == clock.now and admission.waits == 1
    clock.now += ADMISSION_MAX_WAIT_S / 2
    assert admission.hold(since) == since and admission.waits == 1  # still waiting, not counted again
    clock.now += ADMISSION_MAX_WAIT_S / 2
    assert admission.hold(since) is None  # waited long enough: go ahead
    assert admission.hold(None) == clock.now and admission.waits == 2


def test_an_awaited_wait_ends_when_replication_catches_up_or_at_the_bound() -> None:
    """The gRPC and RESP ports' wait (``Admission.wait``): it looks again every retry and returns
    at the first look that finds the backlog gone, and after ``ADMISSION_MAX_WAIT_S`` while it stays."""
    from okapikv.server import admission as admission_module
    from okapikv.server.admission import ADMISSION_MAX_WAIT_S, Admission

    class ClearingLink(StubLink):
        """Behind for the first ``looks`` looks, then caught up."""

        def __init__(self, looks: int, last_ack_at: float) -> None:
            super().__init__(admission_module.ADMISSION_LAG_S + 1, last_ack_at)
            self.looks_left = looks
            self.looks = 0

        def backlog_s(self, now: float) -> float:
            self.looks += 1
            self.looks_left -= 1
            return self.backlog if self.looks_left >= 0 else 0.0

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        stuck = StubLink(admission_module.ADMISSION_LAG_S + 1, last_ack_at=loop.time() + 60)
        admission = Admission({ServerId(1, 0): stuck}, time=loop.time)
        assert admission.backlogged()
        started = loop.time()
        await admission.wait()  # never clears: waits out the bound
        assert loop.time() - started >= ADMISSION_MAX_WAIT_S and admission.waits == 1
        clearing = ClearingLink(2, last_ack_at=loop.time() + 60)
        admission = Admission({ServerId(1, 0): clearing}, time=loop.time)
        assert admission.backlogged()  # look 1
        await admission.wait()  # look 2: still behind; look 3: caught up, so it returns
        assert clearing.looks == 3 and admission.waits == 1

    asyncio.run(scenario())
