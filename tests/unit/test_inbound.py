"""The receiving side of the peer links (``okapikv.server.inbound``) against a real node, without
a network: who may send, what is new (resent tails skipped per sender incarnation, gaps refused),
what the core gets, which acknowledgements go back (coalesced, probes at once, only what is
durable) and the full-disk refusal."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc
import pytest

from okapikv.cluster.config import local_cluster
from okapikv.core.messages import Heartbeat, ServerId
from okapikv.core.timestamps import pack
from okapikv.server.inbound import InboundLink, LinkRefused, PeerIntake
from okapikv.server.node import PartitionNode
from okapikv.wire import convert
from okapikv.wire import okapikv_pb2 as pb

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
