"""What the peer links carry, in bytes, by what it is for: counted where frames are handed to the
links (``okapikv.server.peer_encoding``), once per destination, so native-port and gRPC links count alike
(both carry the same serialized ``PeerMessage`` frames; the per-batch ``PeerBatch`` header and the
transport's own framing are not counted).

Why measured: the paper compares systems by the dependency metadata each replicated update
carries (12 bytes for Okapi and GentleRain, 28 for Cure with 3 DCs, Okapi section 5) and by the
bytes stabilization costs. The core counts the first by formula (``ServerStats``); this counts
what the encoding really sends: an update's ``Update`` message minus its key and value is its
metadata on the wire (timestamp, source DC, Cure's dependency vector, field tags and lengths), and
a batch's GSV (Okapi piggybacks it) and framing are the batch's share.

Kinds: ``replication`` (``ReplicateBatch``), ``heartbeat``, ``read`` (slices and their replies),
``recovery`` (catch-up, repair, restart, replica progress) and ``stabilization``: every other
message, so a protocol's own stabilization messages count there without an edit here.
"""

from __future__ import annotations

from okapikv.core.messages import (
    CatchUpReply,
    CatchUpRequest,
    Heartbeat,
    PeerMessage,
    RepairBatch,
    ReplicaProgress,
    ReplicateBatch,
    Restarted,
    ScanSlice,
    SliceReply,
    TxSlice,
)

_READ = (TxSlice, ScanSlice, SliceReply)
_RECOVERY = (CatchUpRequest, CatchUpReply, RepairBatch, Restarted, ReplicaProgress)


class PeerWireBytes:
    """Counters of the bytes handed to peer links (module docstring); each grows only."""

    __slots__ = ("replication_wire_bytes", "replication_wire_updates", "replication_wire_payload_bytes",
                 "replication_wire_update_bytes", "heartbeat_wire_bytes", "stabilization_wire_bytes",
                 "read_wire_bytes", "recovery_wire_bytes")

    def __init__(self) -> None:
        self.replication_wire_bytes = 0  # every byte of replication frames
        self.replication_wire_updates = 0  # updates in them
        self.replication_wire_payload_bytes = 0  # their keys and values
        self.replication_wire_update_bytes = 0  # their Update messages (the rest: batch GSV, framing)
        self.heartbeat_wire_bytes = 0
        self.stabilization_wire_bytes = 0
        self.read_wire_bytes = 0
        self.recovery_wire_bytes = 0

    @staticmethod
    def measure(message: PeerMessage, frame_bytes: int, update_bytes: int = 0) -> tuple[int, ...]:
        """What one send of ``message`` as ``frame_bytes`` adds (``add`` it once per destination):
        ``update_bytes``, of a replication batch, is what its updates take
        (``wire.convert.encode_replicate_batch``)."""
        if isinstance(message, ReplicateBatch):
            payload = sum([len(update.key) + (len(update.value) if update.value is not None else 0)
                           for update in message.updates])
            return frame_bytes, len(message.updates), payload, update_bytes, 0, 0, 0, 0
        if isinstance(message, Heartbeat):
            return 0, 0, 0, 0, frame_bytes, 0, 0, 0
        if isinstance(message, _READ):
            return 0, 0, 0, 0, 0, 0, frame_bytes, 0
        if isinstance(message, _RECOVERY):
            return 0, 0, 0, 0, 0, 0, 0, frame_bytes
        return 0, 0, 0, 0, 0, frame_bytes, 0, 0

    def add(self, measured: tuple[int, ...]) -> None:
        for name, value in zip(self.__slots__, measured, strict=True):
            if value:
                setattr(self, name, getattr(self, name) + value)

    def figures(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}
