"""Core messages <-> protobuf: every peer message survives the hand-framed PeerBatch, and client
requests and replies map field by field. Pipeline results built from dicts in one constructor call
(``result_fields``) are the results the ``fill_*`` functions build one field at a time, and the
size bound that comes with each never undercounts it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from okapikv.core.messages import (
    ClientReply,
    DeleteRequest,
    ErrorReply,
    GetReply,
    GetRequest,
    GsvBroadcast,
    GsvExchange,
    Heartbeat,
    MembershipUpdate,
    PeerMessage,
    PutRequest,
    ReadItem,
    ReadTxReply,
    ReadTxRequest,
    RelayReply,
    RelayRequest,
    ReplicateBatch,
    Restarted,
    ScanReply,
    ScanRequest,
    ScanSlice,
    ServerId,
    Session,
    SliceReply,
    SnapshotRef,
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
    ReplicateBatch(SOURCE, (), (0, 5, BIG)),  # the sender DC's GSV riding along
    Heartbeat(SOURCE, BIG),
    Heartbeat(SOURCE, 9, (BIG, 0, 7)),
    VvReport(SOURCE, (1, 2, 3), (0, 0, 1)),
    GsvBroadcast(SOURCE, (4, 5, 6), None, (1, 1, 1)),
    GsvBroadcast(SOURCE, (4, 5, 6), (3, 3, 3), (1, 1, 1)),
    GsvExchange(SOURCE, (7, 8, 9)),
    TxSlice(SOURCE, 11, (1, 2, 3), (b"a", b"b")),
    ScanSlice(SOURCE, 12, (1, 2, 3), b"a", b"z", None),
    ScanSlice(SOURCE, 13, (1, 2, 3), b"", b"", 0),
    SliceReply(SOURCE, 14, (ReadItem(b"a", b"1", 9, 0, (9, 0, 0)), ReadItem(b"b", None, 0, 2, None)), False),
    SliceReply(SOURCE, 15, (), True),
    SliceReply(SOURCE, 16, (ReadItem(b"a", b"1", 9, 0, None),), False, b"a"),  # a scan slice cut short
    SliceReply(SOURCE, 17, (ReadItem(b"a", b"1", 9, 0, None),), False, None, 0, 4_321),  # a slice that waited
    Restarted(SOURCE),
    MembershipUpdate(SOURCE, 3, ("member", "removed", "member")),
    RelayRequest(SOURCE, 21, 1, BIG),
    RelayReply(SOURCE, 21, 1, 0),
]


@pytest.mark.parametrize("message", PEER_MESSAGES, ids=lambda m: type(m).__name__)
def test_peer_messages_round_trip_through_a_framed_batch(message: PeerMessage) -> None:
    header = convert.batch_header("cluster-x", SOURCE, incarnation=99)
    frames = [convert.frame_peer_message(convert.encode_peer_message(message))] * 3
    batch = pb.PeerBatch.FromString(convert.encode_batch(header, 300, frames))
    assert (batch.cluster_id, batch.source.dc, batch.source.partition) == ("cluster-x", 2, 3)
    assert (batch.incarnation, batch.first_sequence, len(batch.messages)) == (99, 300, 3)
    for decoded in batch.messages:
        assert convert.peer_message_from_pb(decoded, SOURCE, 3) == message
    assert convert.approximate_size(message) > 0


def test_an_empty_peer_message_is_ignored() -> None:
    assert convert.peer_message_from_pb(pb.PeerMessage(), SOURCE, 3) is None


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
    later_page = pb.ScanRequest(start=b"a\x00", end=b"b", session=session,
                                snapshot=pb.ScanSnapshot(dc=1, vector=[7, 8]))
    batch.operations.add(id=9).scan.CopyFrom(later_page)
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
        ("scan", ScanRequest(108, b"a\x00", b"b", None, core_session, SnapshotRef(1, (7, 8)))),
    ]


def test_replies_become_results() -> None:
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
        result = pb.Result(**convert.result_fields(5, kind, reply)[0])  # type: ignore[arg-type]
        assert result.id == 5
        assert result.WhichOneof("result") == field
        if field != "error":
            assert list(getattr(result, field).session.stable) == [1, 2]
    result = pb.Result(**convert.result_fields(1, "get", GetReply(1, None, session))[0])  # type: ignore[arg-type]
    assert not result.get.found
    result = pb.Result(**convert.result_fields(1, "read_tx", ReadTxReply(1, (b"1", None), session))[0])  # type: ignore[arg-type]
    assert [(v.found, v.value) for v in result.read_tx.values] == [(True, b"1"), (False, b"")]
    with pytest.raises(TypeError, match="unexpected reply type"):
        convert.result_fields(1, "get", GetRequest(1, b"k", session))  # type: ignore[arg-type]


def _fill_result(target: pb.Result, kind: str, reply: ClientReply) -> None:
    """How the Pipeline built a result before ``result_fields``: in place, field by field."""
    if isinstance(reply, WriteReply):
        write = target.put if kind == "put" else target.delete
        write.SetInParent()
        convert.fill_write(write, reply)
    elif isinstance(reply, GetReply):
        target.get.SetInParent()
        convert.fill_get(target.get, reply)
    elif isinstance(reply, ErrorReply):
        target.error.code = reply.code
        target.error.message = reply.message
    elif isinstance(reply, SwapReply):
        target.swap.SetInParent()
        convert.fill_swap(target.swap, reply)
    elif isinstance(reply, ScanReply):
        target.scan.SetInParent()
        convert.fill_scan(target.scan, reply)
    else:
        assert isinstance(reply, ReadTxReply)
        target.read_tx.SetInParent()
        convert.fill_read_tx(target.read_tx, reply)


uint64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
timestamps = st.one_of(uint64, st.integers(min_value=(1 << 63) - (1 << 20), max_value=(1 << 63) - 1))
values = st.one_of(st.none(), st.just(b""), st.binary(max_size=300))
sessions = st.builds(Session, st.lists(timestamps, max_size=5).map(tuple), timestamps)
request_ids = st.integers(min_value=0, max_value=(1 << 62))
replies: st.SearchStrategy[tuple[str, ClientReply]] = st.one_of(
    st.tuples(st.just("get"), st.builds(GetReply, request_ids, values, sessions)),
    st.tuples(st.sampled_from(["put", "delete"]),
              st.builds(WriteReply, request_ids, st.booleans(), timestamps, sessions)),
    st.tuples(st.just("swap"), st.builds(SwapReply, request_ids, values, timestamps, sessions)),
    st.tuples(st.just("scan"), st.builds(ScanReply, request_ids,
                                          st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=300)),
                                                   max_size=6).map(tuple), sessions)),
    st.tuples(st.just("scan"), st.builds(ScanReply, request_ids,  # a page with a resume key
                                          st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=30)),
                                                   max_size=3).map(tuple), sessions, st.binary(min_size=1, max_size=40),
                                          st.builds(SnapshotRef, st.integers(0, 7),
                                                    st.lists(timestamps, min_size=1, max_size=5).map(tuple)))),
    st.tuples(st.just("read_tx"), st.builds(ReadTxReply, request_ids, st.lists(values, max_size=6).map(tuple),
                                             sessions)),
    st.tuples(st.sampled_from(["get", "put", "scan"]), st.builds(ErrorReply, request_ids, st.text(max_size=20),
                                                                 st.text(max_size=200))),
)
# one 70 KB value now and then, so that the length prefixes take more than a byte
large = st.tuples(st.just("get"), st.builds(GetReply, request_ids, st.just(b"x" * 70_000), sessions))


@given(st.lists(st.tuples(uint64, st.one_of(replies, large)), max_size=8))
def test_dict_built_results_are_the_field_by_field_ones(items: list[tuple[int, tuple[str, ClientReply]]]) -> None:
    """One ``ResultBatch`` built from ``result_fields`` dicts parses equal to (and serializes as)
    the batch built the old way, result by result with ``results.add()``; each result's size
    bound is at least its ``ByteSize()``, and the bounds add up to at least the whole serialized
    batch (framing included)."""
    converted = [convert.result_fields(operation_id, kind, reply) for operation_id, (kind, reply) in items]
    built = pb.ResultBatch(results=[fields for fields, _ in converted])
    expected = pb.ResultBatch()
    for operation_id, (kind, reply) in items:
        result = expected.results.add()
        result.id = operation_id
        _fill_result(result, kind, reply)
    assert pb.ResultBatch.FromString(built.SerializeToString()) == expected
    assert built.SerializeToString() == expected.SerializeToString()
    bounds = [bound for _, bound in converted]
    assert bounds == [convert.result_size_bound(reply) for _, (_, reply) in items]
    for bound, result in zip(bounds, expected.results, strict=True):
        assert bound >= result.ByteSize()
    assert sum(bounds) >= len(built.SerializeToString())


MAX64 = (1 << 64) - 1
BIG_VALUE = b"x" * (3 << 20)  # length prefixes of 4 bytes


@pytest.mark.parametrize("entries", [0, 1, 3])
@pytest.mark.parametrize("kind", ["get", "put", "swap", "scan", "read_tx"])
def test_the_size_bound_holds_for_the_widest_results(kind: str, entries: int) -> None:
    """Every integer at its widest (10-byte varints) and multi-byte length prefixes: the case
    random replies hardly ever reach, where the bound is tightest (a SWAP's is 12 bytes over)."""
    session = Session((MAX64,) * entries, MAX64)
    replies: dict[str, ClientReply] = {
        "get": GetReply(1, BIG_VALUE, session),
        "put": WriteReply(1, True, MAX64, session),
        "swap": SwapReply(1, BIG_VALUE, MAX64, session),
        "scan": ScanReply(1, ((b"k" * 200, BIG_VALUE),), session, b"k" * 1025,
                          SnapshotRef(MAX64 >> 32, (MAX64,) * max(entries, 1))),
        "read_tx": ReadTxReply(1, (BIG_VALUE, None), session),
    }
    reply = replies[kind]
    fields, bound = convert.result_fields(MAX64, kind, reply)
    serialized = pb.ResultBatch(results=[fields]).SerializeToString()
    assert len(serialized) <= bound <= len(serialized) + 64


@given(uint64, st.text(max_size=30), st.text(max_size=300))
def test_error_results(operation_id: int, code: str, message: str) -> None:
    fields, bound = convert.error_fields(operation_id, code, message)
    expected = pb.Result(id=operation_id)
    expected.error.code = code
    expected.error.message = message
    assert pb.ResultBatch(results=[fields]) == pb.ResultBatch(results=[expected])
    assert bound >= len(pb.ResultBatch(results=[fields]).SerializeToString())
    assert convert.result_fields(operation_id, "get", ErrorReply(1, code, message)) == (fields, bound)


def _builder_request(operation: pb.Operation, request_id: int, num_dcs: int) -> tuple[str, object] | None:
    """``operation_request`` by way of the per-kind builders the unary calls use."""
    kind = operation.WhichOneof("op")
    builders = {"get": convert.get_request, "put": convert.put_request, "swap": convert.swap_request,
                "delete": convert.delete_request, "scan": convert.scan_request, "read_tx": convert.read_tx_request}
    if kind is None:
        return None
    return kind, builders[kind](getattr(operation, kind), request_id, num_dcs)


pb_sessions = st.builds(lambda stable, dt: pb.Session(stable=stable, dt=dt), st.lists(uint64, max_size=4), uint64)
keys = st.binary(max_size=20)
operations = st.one_of(
    st.builds(lambda k, s: pb.Operation(get=pb.GetRequest(key=k, session=s)), keys, pb_sessions),
    st.builds(lambda k, v, s: pb.Operation(put=pb.PutRequest(key=k, value=v, session=s)), keys, keys, pb_sessions),
    st.builds(lambda k, v, s: pb.Operation(swap=pb.SwapRequest(key=k, value=v, session=s)), keys, keys, pb_sessions),
    st.builds(lambda k, s: pb.Operation(delete=pb.DeleteRequest(key=k, session=s)), keys, pb_sessions),
    st.builds(lambda a, b, n, s: pb.Operation(scan=pb.ScanRequest(start=a, end=b, limit=n, session=s)),
              keys, keys, st.integers(0, (1 << 32) - 1), pb_sessions),
    st.builds(lambda ks, s: pb.Operation(read_tx=pb.ReadTxRequest(keys=ks, session=s)), st.lists(keys, max_size=4),
              pb_sessions),
    st.just(pb.Operation()),
    st.builds(lambda s: pb.Operation(get=pb.GetRequest(session=s)), st.just(pb.Session())),
)


@given(operations, st.integers(1, 5), uint64)
def test_operation_request_matches_the_builders(operation: pb.Operation, num_dcs: int, request_id: int) -> None:
    """The inlined conversion is the per-kind builders' (a fresh session means zeros, limit 0 none),
    on a parsed message as the server sees it."""
    parsed = pb.Operation.FromString(operation.SerializeToString())
    converted = convert.operation_request(parsed, request_id, num_dcs)
    assert converted == _builder_request(parsed, request_id, num_dcs)
    if converted is not None:
        kind, request = converted
        wire_stable = tuple(getattr(parsed, kind).session.stable)
        assert type(request.session.stable) is tuple
        assert request.session.stable == (wire_stable or (0,) * num_dcs)
        if isinstance(request, ScanRequest):
            assert request.limit == (parsed.scan.limit or None)
