"""Peer messages to frames: what the node hands its outgoing links (``okapikv.server.links``).

Each frame stays below the message-size limit: a receiver refuses an oversized message, and the
link would resend it forever, stalling everything behind it. A large replication batch (or repair
batch) is split (its updates install one by one anyway; a batch's GSV rides on its last part); a
slice reply too large to send is dropped and logged (its read then fails by the client's timeout
instead of blocking the link). The same replication batch goes to every other DC, so the last
message's frames are kept and reused. What the frames carry is counted by kind
(``okapikv.server.wire_bytes``), once per destination.
"""

from __future__ import annotations

import logging

from okapikv.core.messages import PeerMessage, RepairBatch, ReplicateBatch
from okapikv.server.wire_bytes import PeerWireBytes
from okapikv.wire.convert import approximate_size, encode_peer_message, encode_replicate_batch, frame_peer_message

log = logging.getLogger("okapikv.server")

#: a frame for the link: the framed message and its approximate size (the link's batching budget)
Frame = tuple[bytes, int]


class PeerEncoder:
    def __init__(self, label: str, max_frame_bytes: int, *, scalar: bool) -> None:
        """``scalar``: GentleRain's slices carry one time (``okapikv.wire.convert``)."""
        self.label = label
        self.max_frame_bytes = max_frame_bytes
        self.scalar = scalar
        self.wire_bytes = PeerWireBytes()
        self.oversized_dropped = 0
        self._last_sent: object = None
        self._last_frames: list[Frame] = []
        self._last_measured: tuple[int, ...] = ()
        self._update_bytes = 0  # of the replication batch ``encode`` last encoded

    def frames(self, message: PeerMessage) -> list[Frame]:
        """The frames of ``message`` for one destination (counted)."""
        if message is not self._last_sent:
            self._update_bytes = 0
            self._last_frames = self.encode(message)
            self._last_sent = message
            self._last_measured = PeerWireBytes.measure(
                message, sum([len(frame) for frame, _ in self._last_frames]), self._update_bytes)
        self.wire_bytes.add(self._last_measured)
        return self._last_frames

    def encode(self, message: PeerMessage) -> list[Frame]:
        """Framed message(s), each below the limit (module docstring); [] if it cannot be sent."""
        size = approximate_size(message)
        limit = self.max_frame_bytes
        if size <= limit:
            if isinstance(message, ReplicateBatch):
                encoded, update_bytes = encode_replicate_batch(message, scalar=self.scalar)
                self._update_bytes += update_bytes
                return [(frame_peer_message(encoded), size)]
            return [(frame_peer_message(encode_peer_message(message, scalar=self.scalar)), size)]
        if isinstance(message, ReplicateBatch) and len(message.updates) > 1:
            half = len(message.updates) // 2
            return self.encode(ReplicateBatch(message.source, message.updates[:half])) + self.encode(
                ReplicateBatch(message.source, message.updates[half:], message.gsv))
        if isinstance(message, RepairBatch) and len(message.updates) > 1:
            half = len(message.updates) // 2
            return self.encode(RepairBatch(message.source, message.request_id, message.updates[:half])) + (
                self.encode(RepairBatch(message.source, message.request_id, message.updates[half:])))
        self.oversized_dropped += 1
        log.error("%s: dropped a %s of about %d bytes, above the %d-byte message limit",
                  self.label, type(message).__name__, size, limit)
        return []
