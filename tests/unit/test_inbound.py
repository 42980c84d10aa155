"""The receiving side of the peer links (``okapikv.server.inbound``) against a real node, without
a network: who may send, what is new (resent tails skipped per sender incarnation, gaps refused),
what the core gets, which acknowledgements go back (coalesced, probes at once, only what is
durable, and those held back by their deadline, over both transports) and the full-disk refusal."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import grpc
import pytest

from okapikv.cluster.config import local_cluster
from okapikv.core.messages import Heartbeat, ServerId
from okapikv.core.timestamps import pack
from okapikv.server.inbound import InboundLink, LinkRefused, PeerIntake
from okapikv.server.native import start_native
from okapikv.server.node import PartitionNode
from okapikv.server.servicers import PeerServicer
from okapikv.wire import convert
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.frames import PEER_MAGIC, FrameDecoder, encode_frame

REMOTE = ServerId(1, 0)
INTERVAL = InboundLink.ACK_INTERVAL_S


def _node() -> PartitionNode:
    return PartitionNode(local_cluster(dcs=("a", "b"), partitions=2, wan="off", base_port=45300), 0, 0)


def _batch(first: int, timestamps: list[int], *, source: ServerId = REMOTE, incarnation: int = 7,
           cluster_id: str = "okapi-local") -> pb.PeerBatch:
    """Heartbeats from ``source`` numbered from ``first`` (each carries its timestamp: ``pack(t)``)."""
    frames = [convert.frame_peer_message(convert.encode_peer_message(Heartbeat(source, pack(t)))) for t in timestamps]
    batch: pb.PeerBatch = pb.PeerBatch.FromString(
        convert.encode_batch(convert.batch_header(cluster_id, source, incarnation), first, frames))
    return batch


def test_resent_messages_reach_the_core_once_and_a_gap_is_refused() -> None:
    node = _node()
    link = PeerIntake(node).open("peer")
    assert link.accept(_batch(1, [10, 20, 30]), now=1.0) == 3
    assert node.core.vv[1] == pack(30)
    # A reconnect resends 2..3 with 4..5: only 4 and 5 are new.
    assert link.accept(_batch(2, [20, 30, 40, 50]), now=2.0) == 5
    assert node.host.peer_messages_received == 5 and node.host.peer_batches_received == 2
    assert node.core.vv[1] == pack(50)
    with pytest.raises(LinkRefused) as refused:
        link.accept(_batch(7, [70]), now=3.0)  # 6 is missing
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert node.host.peer_messages_received == 5


def test_the_numbering_is_the_nodes_not_the_connections_and_restarts_with_the_sender() -> None:
    node = _node()
    intake = PeerIntake(node)
    intake.open("first connection").accept(_batch(1, [10, 20]), now=1.0)
    # The sender reconnected (another connection, maybe another port): its resent tail is skipped.
    assert intake.open("second connection").accept(_batch(1, [10, 20, 30]), now=1.0) == 3
    assert node.host.peer_messages_received == 3
    # The sender restarted: a new incarnation numbers from 1 again, and nothing is skipped.
    assert intake.open("third connection").accept(_batch(1, [40], incarnation=8), now=1.0) == 1
    assert node.host.peer_messages_received == 4 and node.core.vv[1] == pack(40)


def test_acknowledgements_are_coalesced_and_a_probe_is_answered_at_once() -> None:
    node = _node()
    link = PeerIntake(node).open("peer")
    assert link.accept(_batch(1, [10]), now=100.0) == 1  # the first: nothing acknowledged before
    assert link.accept(_batch(2, [20]), now=100.0 + INTERVAL / 2) is None  # within the interval
    assert link.accept(_batch(3, []), now=100.0 + INTERVAL / 2) == 2  # a probe: answered at once
    assert link.accept(_batch(3, [30]), now=100.0 + INTERVAL) is None
    assert link.accept(_batch(4, [40]), now=100.0 + 2 * INTERVAL) == 4  # the interval is over
    many = list(range(100, 100 + InboundLink.ACK_MESSAGES))
    assert link.accept(_batch(5, many), now=100.0 + 2 * INTERVAL) == 4 + len(many)  # enough messages


def test_other_clusters_unknown_sources_and_the_server_itself_are_refused() -> None:
    node = _node()
    link = PeerIntake(node).open("peer")
    cases = [
        (_batch(1, [10], cluster_id="another"), grpc.StatusCode.PERMISSION_DENIED),
        (_batch(1, [10], source=ServerId(2, 0)), grpc.StatusCode.INVALID_ARGUMENT),
        (_batch(1, [10], source=ServerId(1, 2)), grpc.StatusCode.INVALID_ARGUMENT),
        (_batch(1, [10], source=ServerId(0, 0)), grpc.StatusCode.INVALID_ARGUMENT),
    ]
    for batch, code in cases:
        with pytest.raises(LinkRefused) as refused:
            link.accept(batch, now=1.0)
        assert refused.value.code == code
    assert node.host.peer_batches_received == 0 and list(node.core.vv) == [0, 0]


def test_a_malformed_message_is_dropped_and_the_rest_handled(monkeypatch: pytest.MonkeyPatch) -> None:
    from okapikv.server import inbound

    def picky(message: pb.PeerMessage, source: ServerId, num_dcs: int) -> object:
        if message.heartbeat.timestamp == pack(10):
            raise ValueError("malformed")
        return convert.peer_message_from_pb(message, source, num_dcs)

    monkeypatch.setattr(inbound, "peer_message_from_pb", picky)
    node = _node()
    assert PeerIntake(node).open("peer").accept(_batch(1, [10, 20]), now=1.0) == 2  # acknowledged: never resent
    assert node.host.handler_errors == 1 and node.host.peer_messages_received == 1 and node.core.vv[1] == pack(20)


@dataclass
class StubCommitter:
    """The group committer as the intake and the node see it."""

    required: int = 0
    durable: int = 0
    disk_full: bool = False

    def stage(self, changes: object, clock: int) -> int:
        return self.required


def test_only_what_is_durable_is_acknowledged() -> None:
    node = _node()
    committer = StubCommitter(required=5, durable=4)
    node._committer = node.host.committer = committer  # type: ignore[assignment]
    link = PeerIntake(node).open("peer")
    assert link.accept(_batch(1, [10, 20]), now=1.0) == 0  # handled, in commit group 5: not durable yet
    assert node.core.vv[1] == pack(20)
    committer.durable = 5
    committer.required = 6
    assert link.accept(_batch(3, []), now=1.0) == 2  # the probe finds 1..2 durable
    assert link.accept(_batch(3, [30]), now=2.0) == 2  # 3 waits for group 6
    committer.durable = 6
    assert link.accept(_batch(4, []), now=2.0) == 3


def test_a_full_disk_refuses_batches_from_other_dcs_only() -> None:
    node = _node()
    node._committer = node.host.committer = StubCommitter(disk_full=True)  # type: ignore[assignment]
    link = PeerIntake(node).open("peer")
    with pytest.raises(LinkRefused) as refused:
        link.accept(_batch(1, [10]), now=1.0)
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "disk full" in refused.value.message
    assert node.core.vv[1] == 0 and node.host.peer_batches_received == 0
    # The same DC's other partition (its stabilization messages add no versions) still gets through.
    assert link.accept(_batch(1, [10], source=ServerId(0, 1)), now=1.0) == 1


def test_a_link_reopened_after_a_membership_change_is_not_skipped_as_already_handled() -> None:
    """A node closes its links to a DC that leaves the membership and opens new ones when it
    comes back; the new link numbers from 1 again, so it must not go out under the identity the
    receiver already handled numbers of (its first messages, e.g. a repair's versions, were lost)."""
    config = local_cluster(dcs=("a", "b"), partitions=2, wan="off", base_port=45300)
    sender, receiver = PartitionNode(config, 0, 0), PartitionNode(config, 1, 0)
    intake = PeerIntake(receiver)
    destination = ServerId(1, 0)

    def frames(timestamps: list[int]) -> list[bytes]:
        return [convert.frame_peer_message(convert.encode_peer_message(Heartbeat(sender.id, pack(t))))
                for t in timestamps]

    async def reopen() -> list[bytes]:
        headers = []
        for _ in range(2):
            link = sender.peer_links._open(destination)
            headers.append(link._header)
            del sender.peer_links.links[destination]  # as ``PeerLinks.close_removed`` does
            await link.close()
        return headers

    first, second = asyncio.run(reopen())
    link = intake.open("a/0")
    assert link.accept(pb.PeerBatch.FromString(convert.encode_batch(first, 1, frames([10, 20]))), now=1.0) == 2
    link.accept(pb.PeerBatch.FromString(convert.encode_batch(second, 1, frames([30]))), now=2.0)
    assert receiver.core.vv[0] == pack(30)


# ---------------------------------------------------------------- acknowledgements held back have a deadline


def test_an_acknowledgement_held_back_is_owed_by_the_end_of_the_interval() -> None:
    """The last batch of a busy spell falls inside the interval: what it carried is still
    acknowledged ``ACK_INTERVAL_S`` after the last acknowledgement, with no batch after it (else
    the sender's admission control reads the link as lagging: okapikv.server.admission)."""
    link = PeerIntake(_node()).open("peer")
    assert link.owed_in(100.0) is None  # nothing handled yet
    assert link.accept(_batch(1, [10]), now=100.0) == 1
    assert link.owed_in(100.0) is None  # everything handled is acknowledged
    assert link.accept(_batch(2, [20, 30]), now=100.01) is None
    assert link.owed_in(100.01) == pytest.approx(INTERVAL - 0.01)
    assert link.owed_in(100.0 + 2 * INTERVAL) == 0.0
    assert link.owed(100.0 + INTERVAL) == 3
    assert link.owed_in(100.0 + INTERVAL) is None and link.owed(100.0 + INTERVAL) is None
    # The owed acknowledgement restarts the interval for the batches after it.
    assert link.accept(_batch(4, [40]), now=100.0 + 1.5 * INTERVAL) is None
    assert link.owed_in(100.0 + 1.5 * INTERVAL) == pytest.approx(INTERVAL / 2)


def test_an_owed_acknowledgement_waits_for_durability_and_looks_again_soon() -> None:
    node = _node()
    committer = StubCommitter(required=5, durable=5)
    node._committer = committer  # type: ignore[assignment]
    link = PeerIntake(node).open("peer")
    assert link.accept(_batch(1, [10]), now=1.0) == 1
    committer.required = 6
    assert link.accept(_batch(2, [20]), now=1.01) is None
    assert link.owed(1.0 + INTERVAL) is None  # group 6 is not durable yet
    assert link.owed_in(1.0 + INTERVAL) == pytest.approx(InboundLink.DURABLE_RECHECK_S)
    committer.durable = 6
    assert link.owed(1.0 + INTERVAL + InboundLink.DURABLE_RECHECK_S) == 2
    assert link.owed_in(2.0) is None


async def _acks_after_two_batches(send: Callable[[list[bytes]], Awaitable[None]],
                                  acks: asyncio.Queue[int]) -> list[int]:
    """Send two batches back to back (the second lands inside the acknowledgement interval) and
    nothing after them; the acknowledgements that come back within 2 s."""
    await send([_batch(1, [10]).SerializeToString(), _batch(2, [20, 30]).SerializeToString()])
    received: list[int] = []
    deadline = asyncio.get_running_loop().time() + 2.0
    while 3 not in received:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            break
        try:
            received.append(await asyncio.wait_for(acks.get(), remaining))
        except TimeoutError:
            break
    return received


def test_the_native_port_sends_an_owed_acknowledgement_without_another_batch() -> None:
    async def scenario() -> list[int]:
        node = _node()
        server = await start_native(node, PeerIntake(node), "127.0.0.1", 0, None)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        acks: asyncio.Queue[int] = asyncio.Queue()

        async def read_acks() -> None:
            decoder = FrameDecoder()
            while data := await reader.read(1 << 16):
                for frame in decoder.feed(data):
                    acks.put_nowait(pb.LinkAck.FromString(frame).received)

        async def send(frames: list[bytes]) -> None:
            writer.write(PEER_MAGIC + b"".join(encode_frame(frame) for frame in frames))
            await writer.drain()

        reading = asyncio.ensure_future(read_acks())
        try:
            return await _acks_after_two_batches(send, acks)
        finally:
            reading.cancel()
            writer.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(scenario()) == [1, 3]


def test_the_peer_link_rpc_sends_an_owed_acknowledgement_without_another_batch() -> None:
    async def scenario() -> list[int]:
        node = _node()
        server = grpc.aio.server()
        pb_grpc.add_PeerServicer_to_server(PeerServicer(PeerIntake(node)), server)  # type: ignore[no-untyped-call]
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        outgoing: asyncio.Queue[pb.PeerBatch | None] = asyncio.Queue()
        acks: asyncio.Queue[int] = asyncio.Queue()

        async def requests() -> AsyncIterator[pb.PeerBatch]:
            while (batch := await outgoing.get()) is not None:
                yield batch

        async def send(frames: list[bytes]) -> None:
            for frame in frames:
                outgoing.put_nowait(pb.PeerBatch.FromString(frame))

        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = pb_grpc.PeerStub(channel).Link(requests())  # type: ignore[no-untyped-call]

            async def read_acks() -> None:
                async for ack in call:
                    acks.put_nowait(ack.received)

            reading = asyncio.ensure_future(read_acks())
            try:
                return await _acks_after_two_batches(send, acks)
            finally:
                outgoing.put_nowait(None)
                reading.cancel()
                await server.stop(None)

    assert asyncio.run(scenario()) == [1, 3]
