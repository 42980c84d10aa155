"""The receiver half of the peer link protocol: resent messages are skipped, gaps refused, and a
restarted sender (new incarnation) starts its numbering over."""

from __future__ import annotations

from okapikv.core.messages import ServerId
from okapikv.server.links import IncomingLinks

A = ServerId(0, 0)
B = ServerId(1, 0)


def test_in_order_batches_are_admitted_whole() -> None:
    links = IncomingLinks()
    assert links.admit(A, 7, 1, 3) == 0
    assert links.handled(A, 7, 1, 3) == 3
    assert links.admit(A, 7, 4, 2) == 0
    assert links.handled(A, 7, 4, 2) == 5


def test_a_resent_tail_is_skipped() -> None:
    links = IncomingLinks()
    links.handled(A, 7, 1, 5)
    assert links.admit(A, 7, 3, 6) == 3  # 3, 4, 5 already handled; 6, 7, 8 are new
    assert links.handled(A, 7, 3, 6) == 8
    assert links.admit(A, 7, 1, 4) == 4  # an old batch entirely: skip all of it
    assert links.handled(A, 7, 1, 4) == 8  # and the acknowledgement does not move back


def test_a_gap_is_refused() -> None:
    links = IncomingLinks()
    links.handled(A, 7, 1, 5)
    assert links.admit(A, 7, 7, 1) is None


def test_a_new_incarnation_starts_over_and_sources_are_independent() -> None:
    links = IncomingLinks()
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
        self.links = IncomingLinks()
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
    frames = node._encode(ReplicateBatch(node.id, updates, (7, 8)))
    assert len(frames) > 1
    assert all(len(frame) <= limit - MESSAGE_OVERHEAD_BYTES for frame, _ in frames)
    batches = [
        convert.peer_message_from_pb(message, node.id)
        for frame, _ in frames
        for message in pb.PeerBatch.FromString(frame).messages
    ]
    assert tuple(update for batch in batches for update in batch.updates) == updates  # type: ignore[union-attr]
    # the GSV riding on the batch goes once, with its last updates
    assert [batch.gsv for batch in batches] == [None] * (len(batches) - 1) + [(7, 8)]  # type: ignore[union-attr]
    too_big = SliceReply(node.id, 1, (ReadItem(b"k", b"x" * (2 << 20), 1, 0, None),), False)
    assert node._encode(too_big) == []
    assert node.oversized_dropped == 1


# ---------------------------------------------------------------- admission control (PartitionNode.backlogged)


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


def test_client_batches_wait_only_for_a_replica_that_is_slow_not_one_that_is_stuck() -> None:
    from okapikv.cluster.config import local_cluster
    from okapikv.server import node as node_module
    from okapikv.server.node import PartitionNode

    class StubLink:
        def __init__(self, backlog_s: float, last_ack_at: float) -> None:
            self.backlog = backlog_s
            self.last_ack_at = last_ack_at

        def backlog_s(self, now: float) -> float:
            return self.backlog

    async def scenario() -> None:
        config = local_cluster(dcs=("a", "b"), partitions=1, wan="off", base_port=45100)
        server = PartitionNode(config, 0, 0)
        server._loop = asyncio.get_running_loop()
        assert not server.backlogged()  # no links yet
        now = server._loop.time()
        link = StubLink(0.01, last_ack_at=now)
        server._links[ServerId(1, 0)] = link  # type: ignore[assignment]
        assert not server.backlogged()
        link.backlog = node_module.ADMISSION_LAG_S + 0.01
        assert server.backlogged()
        link.backlog = 5.0  # far behind but still acknowledging: slow, so still held
        assert server.backlogged()
        link.last_ack_at = now - node_module.ADMISSION_GIVE_UP_S - 0.1  # no ack for a while: stuck
        assert not server.backlogged()

    asyncio.run(scenario())


def test_bounded_visibility_holds_client_batches_while_remote_updates_are_late() -> None:
    """``bounded_visibility``: a server holds client batches while a remote DC's newest visible
    update is older than Okapi's UST bound for it, unless so much older that the DC is cut off."""
    import dataclasses

    from okapikv.cluster.config import local_cluster
    from okapikv.core.timestamps import pack
    from okapikv.server import node as node_module
    from okapikv.server.node import PartitionNode, _visibility_bounds_us

    class StubLink:
        last_ack_at = 0.0

        def backlog_s(self, now: float) -> float:
            return 0.0

    async def scenario(bounded: bool) -> None:
        config = dataclasses.replace(local_cluster(dcs=("a", "b", "c"), partitions=1, wan=0.0, base_port=45200),
                                     wan_ms=((0.0, 10.0, 40.0), (10.0, 0.0, 20.0), (40.0, 20.0, 0.0)),
                                     bounded_visibility=bounded)
        # From a to c: through b (10 + 20) or directly and back (40 + 0): the slowest path, 40 ms,
        # plus ADMISSION_VISIBILITY_PERIODS (1.5) stabilization periods of 5 ms: below the bound.
        assert node_module.ADMISSION_VISIBILITY_PERIODS == 1.5
        assert _visibility_bounds_us(config, 2) == (47_500, 57_500, 0)  # from b: through a, 10 + 40
        server = PartitionNode(config, 2, 0)
        server._loop = asyncio.get_running_loop()
        link = StubLink()
        link.last_ack_at = server._loop.time()
        server._links[ServerId(0, 0)] = link  # type: ignore[assignment]
        now_us = server.clock.now_us()
        server.core.stable = (pack(now_us - 20_000), pack(now_us - 20_000), pack(now_us))
        assert not server.backlogged()  # both remote DCs within their bounds
        server.core.stable = (pack(now_us - 60_000), pack(now_us - 20_000), pack(now_us))
        assert server.backlogged() is bounded  # DC a 12.5 ms past its threshold
        server.core.stable = (pack(now_us - 60_000 - node_module.VISIBILITY_GIVE_UP_US), pack(now_us), pack(now_us))
        assert not server.backlogged()  # a whole second late: cut off, not slow; writes go on

    asyncio.run(scenario(True))
    asyncio.run(scenario(False))
