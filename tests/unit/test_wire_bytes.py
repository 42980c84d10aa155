"""The peer links' bytes by kind (``okapikv.server.wire_bytes``), measured from the real encoding:
an update's metadata on the wire is its ``Update`` message minus key and value."""

from __future__ import annotations

from okapikv.core.messages import GsvExchange, Heartbeat, ReplicateBatch, ServerId, TxSlice, Update
from okapikv.core.timestamps import pack
from okapikv.server.wire_bytes import PeerWireBytes
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import encode_replicate_batch, frame_peer_message
from okapikv.wire.encoding import encode_varint

SOURCE = ServerId(1, 0)
NOW = pack(86_400_000_000)  # a day past the clocks' epoch (``EPOCH_UNIX_US``)
VARINT = len(encode_varint(NOW))


def _update(index: int, dv: tuple[int, ...] | None = None) -> Update:
    return Update(b"k%07d" % index, b"v%07d" % index, NOW + index, 1, dv)


def _metadata_per_update(batch: ReplicateBatch) -> tuple[float, float]:
    """(per update in its Update message, per update counting the whole frame) beyond key and value."""
    encoded, update_bytes = encode_replicate_batch(batch)
    wire = PeerWireBytes()
    wire.add(PeerWireBytes.measure(batch, len(frame_peer_message(encoded)), update_bytes))
    wire.add(PeerWireBytes.measure(batch, len(frame_peer_message(encoded)), update_bytes))  # a second DC
    updates = wire.replication_wire_updates
    assert updates == 2 * len(batch.updates) and wire.replication_wire_payload_bytes == 16 * updates
    return ((wire.replication_wire_update_bytes - wire.replication_wire_payload_bytes) / updates,
            (wire.replication_wire_bytes - wire.replication_wire_payload_bytes) / updates)


def test_update_bytes_are_the_update_messages_exactly() -> None:
    batch = ReplicateBatch(SOURCE, tuple(_update(i) for i in range(5)), (NOW, NOW, NOW))
    encoded, update_bytes = encode_replicate_batch(batch)
    parsed = pb.PeerMessage.FromString(encoded).replicate
    # each Update: tag (1 byte) + length (1 byte) + its own bytes; the GSV is not an update's
    assert update_bytes == sum(2 + update.ByteSize() for update in parsed.updates)
    assert len(encoded) > update_bytes + parsed.gsv.ByteSize()


def test_a_scalar_timestamp_update_costs_less_than_one_with_a_dependency_vector() -> None:
    """Okapi/GentleRain send an update without its dependency vector, Cure with the remote entries:
    on the wire (8 + 8 byte key and value) that is the paper's 12 vs 28 B in protobuf's varints."""
    okapi, okapi_framed = _metadata_per_update(ReplicateBatch(SOURCE, tuple(_update(i) for i in range(8))))
    cure, _ = _metadata_per_update(ReplicateBatch(SOURCE, tuple(_update(i, (NOW, NOW, 0)) for i in range(8))))
    # key, value tags+lengths (4) + timestamp (1 + varint) + source DC (2) + the Update's tag+length (2)
    assert okapi == 4 + 1 + VARINT + 2 + 2
    # the dv field: its tag and length, its entries' tag and length, two remote entries and a zero
    assert cure == okapi + 4 + 2 * VARINT + 1
    assert okapi_framed > okapi  # the batch's framing, shared by its updates


def test_other_messages_count_under_their_kind() -> None:
    wire = PeerWireBytes()
    wire.add(PeerWireBytes.measure(Heartbeat(SOURCE, NOW), 20))
    wire.add(PeerWireBytes.measure(GsvExchange(SOURCE, (NOW, NOW, NOW)), 40))
    wire.add(PeerWireBytes.measure(TxSlice(SOURCE, 1, (NOW,), (b"k",)), 30))
    assert (wire.heartbeat_wire_bytes, wire.stabilization_wire_bytes, wire.read_wire_bytes) == (20, 40, 30)
    assert wire.replication_wire_bytes == wire.recovery_wire_bytes == 0
    assert set(wire.figures()) == set(PeerWireBytes.__slots__)
