"""GentleRain on the wire is scalar (docs/protocol.md, "GentleRain"; ``okapikv.wire.convert``): its
stabilization messages, slices, SCAN snapshots and sessions carry one timestamp where Okapi and
Cure carry a vector, every form decodes back to what the core holds (the time in every entry), and
the bytes are counted here: a 3-DC GentleRain round's messages against the vector messages the
same round sent as Cure's (the figures the docs quote)."""

from __future__ import annotations

import pytest

from okapikv.client.operations import SessionState
from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    GetReply,
    GstBroadcast,
    GsvBroadcast,
    ReadTxReply,
    ScanReply,
    ScanSlice,
    Send,
    ServerId,
    Session,
    SnapshotRef,
    StableTimeReport,
    TxSlice,
    VvReport,
    WriteReply,
)
from okapikv.core.protocols import is_scalar
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack
from okapikv.wire import convert, encoding
from okapikv.wire import okapikv_pb2 as pb

SOURCE = ServerId(0, 1)
NOW_US = 60_000_000_000_000  # about 2026-11-25: a timestamp's varint takes 9 bytes, as in service


def wire_bytes(message: object, *, scalar: bool = False) -> int:
    """What the message adds to a PeerBatch: its element's tag and length, and its bytes."""
    return len(convert.frame_peer_message(convert.encode_peer_message(message, scalar=scalar)))  # type: ignore[arg-type]


def round_trip(message: object, *, scalar: bool = False, num_dcs: int = 3) -> object:
    decoded = pb.PeerMessage.FromString(convert.encode_peer_message(message, scalar=scalar))  # type: ignore[arg-type]
    return convert.peer_message_from_pb(decoded, SOURCE, num_dcs)


def test_only_gentlerain_is_scalar() -> None:
    names = ("okapi", "cure", "gentlerain", "eventual", "nonsense")
    assert [name for name in names if is_scalar(name)] == ["gentlerain"]


def test_the_scalar_stabilization_messages_round_trip() -> None:
    for message in (StableTimeReport(SOURCE, pack(NOW_US), pack(NOW_US - 9)), StableTimeReport(SOURCE, 0, 0),
                    GstBroadcast(SOURCE, pack(NOW_US), 7), GstBroadcast(SOURCE, 0, 0)):
        assert round_trip(message) == message


@pytest.mark.parametrize("message", [
    TxSlice(SOURCE, 11, (pack(NOW_US),) * 3, (b"a", b"b")),
    TxSlice(SOURCE, 0, (0, 0, 0), ()),
    ScanSlice(SOURCE, 12, (pack(NOW_US),) * 3, b"a", b"z", 5),
    ScanSlice(SOURCE, 0, (0, 0, 0), b"", b"", None),
], ids=["tx", "tx-zero", "scan", "scan-zero"])
def test_a_scalar_slice_carries_one_time_and_decodes_to_the_time_in_every_entry(message: TxSlice | ScanSlice) -> None:
    encoded = convert.peer_message_to_pb(message, scalar=True)
    inner = encoded.tx_slice if isinstance(message, TxSlice) else encoded.scan_slice
    assert not inner.HasField("snapshot") and inner.snapshot_time == message.snapshot[0]
    assert round_trip(message, scalar=True) == message
    assert round_trip(message) == message  # the vector form stays, for Okapi and Cure


def test_gentlerains_stabilization_round_is_counted_in_bytes() -> None:
    """A 3-DC x 3-partition GentleRain round as its core sends it, against the vector messages of
    the same round (what Cure sends, and GentleRain sent as a vector protocol): 24 B per report or
    broadcast instead of 66 (each message framed as a PeerBatch element)."""
    servers = [PartitionServer(CoreConfig(0, partition, 3, 3, protocol="gentlerain")) for partition in range(3)]
    for server in servers:
        server.vv[1], server.vv[2] = pack(NOW_US - 40_000), pack(NOW_US - 75_000)
        server.advance_stable((pack(NOW_US - 90_000),) * 3)  # a GST of earlier rounds: the GC floor
    reports = [effect for server in servers[1:] for effect in server.on_timer(NOW_US)
               if isinstance(effect, Send) and isinstance(effect.message, StableTimeReport)]
    assert len(reports) == 2
    for report in reports:
        servers[0].handle(report.message, NOW_US)
    broadcasts = [effect.message for effect in servers[0].on_timer(NOW_US + 5_000)
                  if isinstance(effect, Send) and isinstance(effect.message, GstBroadcast)]
    assert len(broadcasts) == 2 and broadcasts[0].gst == pack(NOW_US - 75_000)
    report = reports[0].message
    assert isinstance(report, StableTimeReport)
    scalar = {"report": wire_bytes(report), "broadcast": wire_bytes(broadcasts[0])}
    server = servers[1]
    vector = {"report": wire_bytes(VvReport(SOURCE, tuple(server.vv), (report.floor,) * 3)),
              "broadcast": wire_bytes(GsvBroadcast(SOURCE, (broadcasts[0].gst,) * 3, None,
                                                   (broadcasts[0].horizon,) * 3))}
    assert scalar == {"report": 24, "broadcast": 24}
    assert vector == {"report": 66, "broadcast": 66}
    # the core's own count (the servers' stabilization_bytes): source + one time per message
    assert servers[1].stats.stabilization_bytes == 4 + 8


def test_a_scalar_session_is_one_time_both_ways() -> None:
    stable, dt = (pack(NOW_US),) * 3, pack(NOW_US + 5)
    scalar_bytes = encoding.session(stable, dt, scalar=True)
    assert scalar_bytes == pb.Session(time=stable[0], dt=dt).SerializeToString()
    assert (len(scalar_bytes), len(encoding.session(stable, dt))) == (20, 39)
    # servers read either form as the vector the core holds
    assert convert.session_from_pb(pb.Session.FromString(scalar_bytes), 3) == Session(stable, dt)
    assert convert.session_from_pb(pb.Session(), 3) == Session((0, 0, 0), 0)  # a fresh session
    # a client merges a scalar reply entry-wise, and sends its session back as one time
    state = SessionState(3, scalar=True)
    state.merge(pb.Session.FromString(scalar_bytes))
    assert state.current == Session(stable, dt)
    assert state.message() == pb.Session(time=stable[0], dt=dt)
    assert state.wire() == encoding.session_field(scalar_bytes)


@pytest.mark.parametrize("reply", [
    GetReply(1, b"v", Session((9, 9, 9), 4)),
    WriteReply(2, True, 12, Session((9, 9, 9), 12)),
    ReadTxReply(3, (b"a", None), Session((9, 9, 9), 0)),
    ScanReply(4, ((b"k", b"v"),), Session((9, 9, 9), 1), b"l", SnapshotRef(0, (8, 8, 8))),
], ids=lambda reply: type(reply).__name__)
def test_scalar_pipeline_results_carry_one_time(reply: GetReply) -> None:
    kind = {GetReply: convert.GET, WriteReply: convert.PUT, ReadTxReply: convert.READ_TX, ScanReply: convert.SCAN}
    fields, bound = convert.scalar_result_fields(7, kind[type(reply)], reply)
    result = pb.Result(**fields)  # type: ignore[arg-type]
    body = getattr(result, result.WhichOneof("result") or "")
    assert list(body.session.stable) == [] and body.session.time == 9
    assert convert.session_from_pb(body.session, 3) == reply.session
    assert pb.ResultBatch(results=[result]).ByteSize() <= bound
    if isinstance(reply, ScanReply):
        request = pb.ScanRequest(snapshot=body.snapshot)
        assert list(body.snapshot.vector) == [] and convert.scan_request(request, 1, 3).snapshot == reply.snapshot
