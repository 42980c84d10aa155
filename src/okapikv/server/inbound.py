"""The receiving side of the peer links: numbered batches in, the core fed in order, acknowledgements out.

The protocol needs links that are FIFO and reliable while up (docs/protocol.md, "Replication and
heartbeats"): a replica takes ``vv[i]`` as proof that every earlier update of DC i is installed.
The sender (``okapikv.server.links.OutgoingLink``) numbers its messages per incarnation, keeps each
until it is acknowledged and resends the unacknowledged tail after a broken connection. Here, for
every batch (``InboundLink.accept``):

- who sent it: this cluster's id, a known server other than this one; on a full disk
  (``okapikv.storage.space``) batches from other DCs are refused, since their versions need space
  (``okapikv.core.host.Host.peer_refusal``: the link ends and the sender resends once it is
  accepted again);
- what is new: messages of that sender incarnation already handled are skipped (a resent tail),
  and a batch that leaves a gap is refused, so the stream restarts and the sender resends
  (``SequenceTable``); a new incarnation (the sender restarted) starts its numbering over;
- the core gets the new messages in one call (``PartitionNode.run_core``); a malformed message is
  dropped and logged (a handler error), not refused, which would only bring it back forever;
- what to acknowledge: only messages whose content is durable here (``PeerIntake.durable_ack``),
  because the sender forgets what is acknowledged and a crash loses what is not on disk. Without a
  data directory everything handled is acknowledged;
- when: acknowledgements only let the sender forget messages, so they are coalesced (every
  ``ACK_INTERVAL_S`` or ``ACK_MESSAGES`` messages): each write costs far more than the few bytes it
  carries, and links carry a heartbeat every few milliseconds. A batch with no messages is the
  sender's liveness probe (``okapikv.server.liveness``) and is acknowledged at once. An
  acknowledgement held back has a deadline, ``ACK_INTERVAL_S`` after the last one, met by the
  transport's timer (``InboundLink.owed_in`` / ``owed``) even when no batch follows: the sender's
  admission control (``okapikv.server.admission``) reads an unacknowledged message older than
  ``ADMISSION_LAG_S`` as a replica falling behind and holds every client request up to 20 ms. Left
  to the next batch, the last acknowledgement of a busy spell waited for the next message, a
  second away once the link's servers went idle (``okapikv.core.pacing``), and each RESP or native
  request of that second took 20 ms more: the "dip after a write burst" (docs/benchmarks.md).

What the node keeps for all its incoming links (the numbering, the acknowledgements waiting to be
durable) is one ``PeerIntake``; each connection is one ``InboundLink``. The two transports that
carry links are thin adapters: the native port (``okapikv.server.native``) and the ``Peer.Link``
RPC (``okapikv.server.servicers.PeerServicer``) check who may link by their own means (with TLS, a
client certificate), decode frames, and write the acknowledgements this returns.
"""

from __future__ import annotations

import logging
from collections import deque

import grpc

from okapikv.core.messages import Message, ServerId
from okapikv.server.node import PartitionNode
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import peer_message_from_pb

log = logging.getLogger("okapikv.server")


class LinkRefused(Exception):
    """An incoming peer link must end: ``code`` names the gRPC status it ends with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SequenceTable:
    """Which message numbers of each sender were handled (per sender incarnation).

    A sender resends its unacknowledged tail after a reconnect, so a batch may start with messages
    this server already handed to its core: those are skipped. A new incarnation (the sender
    restarted) starts its numbering over.
    """

    def __init__(self) -> None:
        self._handled: dict[ServerId, tuple[int, int]] = {}  # source -> (incarnation, last handled)

    def admit(self, source: ServerId, incarnation: int, first_sequence: int, count: int) -> int | None:
        """How many leading messages of the batch to skip, or None if the batch leaves a gap
        (messages missing before it: the stream must be restarted so the sender resends)."""
        known = self._handled.get(source)
        last = known[1] if known is not None and known[0] == incarnation else 0
        if known is None or known[0] != incarnation:
            last = first_sequence - 1  # first contact with this incarnation: start where it starts
        if first_sequence > last + 1:
            return None
        skip = min(count, last + 1 - first_sequence)
        return skip

    def handled(self, source: ServerId, incarnation: int, first_sequence: int, count: int) -> int:
        """Record that the batch was handled; returns the number to acknowledge."""
        known = self._handled.get(source)
        last = first_sequence + count - 1
        if known is not None and known[0] == incarnation:
            last = max(last, known[1])
        self._handled[source] = (incarnation, last)
        return last

    def last(self, source: ServerId, incarnation: int) -> int:
        """The highest message number of ``source``'s ``incarnation`` handled (0: none)."""
        known = self._handled.get(source)
        return known[1] if known is not None and known[0] == incarnation else 0


class PeerIntake:
    """What one node keeps for all its incoming peer links (module docstring); one per node, shared
    by every transport, so a sender that reconnects over another one is still deduplicated."""

    def __init__(self, node: PartitionNode) -> None:
        self.node = node
        self.sequences = SequenceTable()
        # per source: (commit group needed, incarnation, last handled), oldest first
        self._unsynced_acks: dict[ServerId, deque[tuple[int, int, int]]] = {}
        self._durable_acks: dict[ServerId, tuple[int, int]] = {}  # source -> (incarnation, durable up to)

    def open(self, peer: str) -> InboundLink:
        """An incoming link from ``peer`` (its address, for the logs)."""
        return InboundLink(self, peer)

    def receive(self, batch: pb.PeerBatch) -> int | None:
        """Hand the new messages of ``batch`` to the core in order; the number to acknowledge, or
        None if the batch leaves a gap (the stream must restart)."""
        node = self.node
        source = ServerId(batch.source.dc, batch.source.partition)
        messages = batch.messages
        count = len(messages)
        sequences = self.sequences
        skip = sequences.admit(source, batch.incarnation, batch.first_sequence, count)
        if skip is None:
            return None
        converted: list[Message] = []
        for index in range(skip, count):
            try:
                message = peer_message_from_pb(messages[index], source, node.num_dcs)
            except Exception:  # a malformed message must not stall the link with endless resends
                node.host.handler_errors += 1
                log.exception("%s: dropped a malformed message from %s", node.label, source)
                continue
            if message is not None:
                converted.append(message)
        node.host.peer_batches_received += 1
        node.host.peer_messages_received += len(converted)
        if converted:
            node.run_core(converted)
        handled = sequences.handled(source, batch.incarnation, batch.first_sequence, count)
        return self.durable_ack(source, batch.incarnation, handled)

    def durable_ack(self, source: ServerId, incarnation: int, handled: int) -> int:
        """The highest message number of ``source`` whose content is durable here (what may be
        acknowledged: the sender then forgets it). Without storage, everything handled."""
        committer = self.node.committer
        if committer is None:
            return handled
        self._unsynced_acks.setdefault(source, deque()).append((committer.required, incarnation, handled))
        return self.durable_up_to(source, incarnation)

    def durable_up_to(self, source: ServerId, incarnation: int) -> int:
        """The highest message number of ``source``'s ``incarnation`` handled here and durable."""
        committer = self.node.committer
        if committer is None:
            return self.sequences.last(source, incarnation)
        pending = self._unsynced_acks.get(source)
        while pending and pending[0][0] <= committer.durable:
            _, acked_incarnation, sequence = pending.popleft()
            self._durable_acks[source] = (acked_incarnation, sequence)
        acked = self._durable_acks.get(source)
        return acked[1] if acked is not None and acked[0] == incarnation else 0


class InboundLink:
    """One incoming peer link, whatever carries it: check each batch, hand it to the node's
    ``PeerIntake``, say when to acknowledge (module docstring)."""

    #: Well under the sender's ``ADMISSION_LAG_S`` (75 ms), which must also cover both ends' wait
    #: for a core: at 50 ms, 2 DCs x 2 partitions on a loaded 2-core VM counted a median of ~275
    #: admission waits per 40k-request redis-benchmark run, at 20 ms ~30 (four paired rounds), for
    #: 50 acknowledgement writes a second per busy link instead of 20 (docs/benchmarks.md).
    ACK_INTERVAL_S = 0.02
    ACK_MESSAGES = 4096
    #: how soon ``owed`` looks again when what it owes is not durable yet (a commit group takes ~1 ms)
    DURABLE_RECHECK_S = 0.005

    def __init__(self, intake: PeerIntake, peer: str) -> None:
        self.intake = intake
        self.peer = peer
        self._last_ack_time = 0.0
        self._unacknowledged = 0
        self._sender: tuple[ServerId, int] | None = None  # (source, incarnation) of the last batch
        self._acked = 0  # the last number acknowledged to that incarnation
        self._recheck_at = 0.0  # ``owed`` found nothing durable: not due again before this

    def accept(self, batch: pb.PeerBatch, now: float) -> int | None:
        """Handle ``batch`` (``now``: the event loop's time); the sequence number to acknowledge
        now, or None. Raises ``LinkRefused``."""
        node = self.intake.node
        config = node.config
        if batch.cluster_id != config.cluster_id:
            log.warning("%s: refused a peer link from cluster %r (this is %r)",
                        node.label, batch.cluster_id, config.cluster_id,
                        extra={"event": "peer_refused", "peer": self.peer, "reason": "cluster id"})
            raise LinkRefused(grpc.StatusCode.PERMISSION_DENIED,
                              f"this server belongs to cluster {config.cluster_id!r}, not {batch.cluster_id!r}")
        source = batch.source
        if not (source.dc < len(config.dcs) and source.partition < config.partitions) or (
            source.dc == node.id.dc and source.partition == node.id.partition
        ):
            raise LinkRefused(grpc.StatusCode.INVALID_ARGUMENT, f"unknown peer {source.dc}/{source.partition}")
        refused = node.host.peer_refusal(ServerId(source.dc, source.partition))
        if refused is not None:
            raise LinkRefused(grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
        try:
            acknowledged = self.intake.receive(batch)
        except Exception:
            log.exception("%s: failed on a peer batch", node.label)
            raise LinkRefused(grpc.StatusCode.INTERNAL, "failed on a peer batch") from None
        if acknowledged is None:
            raise LinkRefused(grpc.StatusCode.FAILED_PRECONDITION, "message numbers skip ahead: resend")
        sender = (ServerId(source.dc, source.partition), batch.incarnation)
        if sender != self._sender:
            self._sender, self._acked = sender, 0
        self._unacknowledged += len(batch.messages)
        if (self._unacknowledged >= self.ACK_MESSAGES or now - self._last_ack_time >= self.ACK_INTERVAL_S
                or not batch.messages):  # a probe (``okapikv.server.liveness``): answer at once
            return self._sent(acknowledged, now)
        return None

    def owed_in(self, now: float) -> float | None:
        """Seconds until an acknowledgement held back is due (0: now), or None when every message
        handled is acknowledged. The transport calls ``owed`` then (module docstring)."""
        sender = self._sender
        if sender is None or self.intake.sequences.last(*sender) <= self._acked:
            return None
        due = max(self._last_ack_time + self.ACK_INTERVAL_S, self._recheck_at)
        return max(0.0, due - now)

    def owed(self, now: float) -> int | None:
        """At ``owed_in``'s deadline: the number to acknowledge now, or None when nothing more is
        durable yet (``owed_in`` then says when to look again)."""
        sender = self._sender
        if sender is None:
            return None
        acknowledged = self.intake.durable_up_to(*sender)
        if acknowledged <= self._acked:
            self._recheck_at = now + self.DURABLE_RECHECK_S
            return None
        return self._sent(acknowledged, now)

    def _sent(self, acknowledged: int, now: float) -> int:
        self._last_ack_time = now
        self._unacknowledged = 0
        self._acked = max(self._acked, acknowledged)
        return acknowledged
