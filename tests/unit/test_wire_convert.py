"""Core messages <-> protobuf: every peer message survives the hand-framed PeerBatch, and client
requests and replies map field by field."""

from __future__ import annotations

import pytest

from okapikv.core.messages import (
    ClientReply,
    DeleteRequest,
    ErrorReply,
    GetReply,
    GetRequest,
    GsvBroadcast,
    GsvExchange,
    Heartbeat,
    PeerMessage,
    PutRequest,
    ReadItem,
    ReadTxReply,
    ReadTxRequest,
    ReplicateBatch,
    ScanReply,
    ScanRequest,
    ScanSlice,
    ServerId,
    Session,
    SliceReply,
    SwapReply,
    SwapRequest,
    TxSlice,
    Update,
    VvReport,
    WriteReply,
)
from okapikv.wire import convert
from okapikv.wire import okapikv_pb2 as pb

SOURCE = ServerId(2, 3)
BIG = (1 << 64) - 1

PEER_MESSAGES: list[PeerMessage] = [
    ReplicateBatch(SOURCE, (
        Update(b"k", b"v", 5, 2, None),
        Update(b"gone", None, 6, 2, None),
        Update(b"empty", b"", 7, 2, (1, 2, 7)),
    )),
    ReplicateBatch(SOURCE, ()),
    Heartbeat(SOURCE, BIG),
    VvReport(SOURCE, (1, 2, 3), (0, 0, 1)),
    GsvBroadcast(SOURCE, (4, 5, 6), None, (1, 1, 1)),
    GsvBroadcast(SOURCE, (4, 5, 6), (3, 3, 3), (1, 1, 1)),
    GsvExchange(SOURCE, (7, 8, 9)),
    TxSlice(SOURCE, 11, (1, 2, 3), (b"a", b"b")),
    ScanSlice(SOURCE, 12, (1, 2, 3), b"a", b"z", None),
    ScanSlice(SOURCE, 13, (1, 2, 3), b"", b"", 0),
    SliceReply(SOURCE, 14, (ReadItem(b"a", b"1", 9, 0, (9, 0, 0)), ReadItem(b"b", None, 0, 2, None)), False),
    SliceReply(SOURCE, 15, (), True),
]


@pytest.mark.parametrize("message", PEER_MESSAGES, ids=lambda m: type(m).__name__)
def test_peer_messages_round_trip_through_a_framed_batch(message: PeerMessage) -> None:
    header = convert.batch_header("cluster-x", SOURCE, incarnation=99)
    frames = [convert.frame_peer_message(convert.encode_peer_message(message))] * 3
    batch = pb.PeerBatch.FromString(convert.encode_batch(header, 300, frames))
    assert (batch.cluster_id, batch.source.dc, batch.source.partition) == ("cluster-x", 2, 3)
    assert (batch.incarnation, batch.first_sequence, len(batch.messages)) == (99, 300, 3)
    for decoded in batch.messages:
        assert convert.peer_message_from_pb(decoded, SOURCE) == message
    assert convert.approximate_size(message) > 0


def test_an_empty_peer_message_is_ignored() -> None:
    assert convert.peer_message_from_pb(pb.PeerMessage(), SOURCE) is None


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 1 << 35, BIG])
def test_varint(value: int) -> None:
    encoded = convert.encode_varint(value)
    assert pb.PeerBatch.FromString(b"\x28" + encoded).first_sequence == value


def test_an_empty_session_means_zeros() -> None:
    assert convert.session_from_pb(pb.Session(), 3) == Session((0, 0, 0), 0)
    assert convert.session_from_pb(pb.Session(stable=[1, 2], dt=5), 3) == Session((1, 2), 5)


def test_operations_become_core_requests() -> None:
    session = pb.Session(stable=[4, 5], dt=6)
    core_session = Session((4, 5), 6)
    batch = pb.OperationBatch()
    batch.operations.add(id=1).get.CopyFrom(pb.GetRequest(key=b"k", session=session))
    batch.operations.add(id=2).put.CopyFrom(pb.PutRequest(key=b"k", value=b"v", session=session))
    batch.operations.add(id=3).swap.CopyFrom(pb.SwapRequest(key=b"k", value=b"w", session=session))
    batch.operations.add(id=4).delete.CopyFrom(pb.DeleteRequest(key=b"k", session=session))
    batch.operations.add(id=5).scan.CopyFrom(pb.ScanRequest(start=b"a", end=b"b", session=session))
    batch.operations.add(id=6).scan.CopyFrom(pb.ScanRequest(start=b"a", end=b"b", limit=7, session=session))
    batch.operations.add(id=7).read_tx.CopyFrom(pb.ReadTxRequest(keys=[b"x", b"y"], session=session))
    batch.operations.add(id=8)
    converted = [convert.operation_request(op, 100 + index, 2) for index, op in enumerate(batch.operations)]
    assert converted == [
        ("get", GetRequest(100, b"k", core_session)),
        ("put", PutRequest(101, b"k", b"v", core_session)),
        ("swap", SwapRequest(102, b"k", b"w", core_session)),
        ("delete", DeleteRequest(103, b"k", core_session)),
        ("scan", ScanRequest(104, b"a", b"b", None, core_session)),
        ("scan", ScanRequest(105, b"a", b"b", 7, core_session)),
        ("read_tx", ReadTxRequest(106, (b"x", b"y"), core_session)),
        None,
    ]


def test_replies_fill_results() -> None:
    session = Session((1, 2), 3)
    cases: list[tuple[str, ClientReply, str]] = [
        ("get", GetReply(1, b"v", session), "get"),
        ("get", GetReply(1, None, session), "get"),
        ("put", WriteReply(1, True, 9, session), "put"),
        ("delete", WriteReply(1, False, 9, session), "delete"),
        ("swap", SwapReply(1, None, 9, session), "swap"),
        ("scan", ScanReply(1, ((b"a", b"1"),), session), "scan"),
        ("read_tx", ReadTxReply(1, (b"1", None), session), "read_tx"),
        ("put", ErrorReply(1, "INVALID_ARGUMENT", "no"), "error"),
    ]
    for kind, reply, field in cases:
        result = pb.Result(id=5)
        convert.fill_result(result, kind, reply)
        assert result.WhichOneof("result") == field
        if field != "error":
            assert list(getattr(result, field).session.stable) == [1, 2]
    result = pb.Result()
    convert.fill_result(result, "get", GetReply(1, None, session))
    assert not result.get.found
    convert.fill_result(result, "read_tx", ReadTxReply(1, (b"1", None), session))
    assert [(v.found, v.value) for v in result.read_tx.values] == [(True, b"1"), (False, b"")]
