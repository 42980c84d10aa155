"""The native port's version 2 messages (``okapikv.wire.packed``): every message survives
encoding and decoding unchanged, says exactly what its protobuf counterpart says (requests into the
core, replies out of it, the clients' carry-over from protobuf), stays within the size bound the
sink counts, and bad input gets ``msgspec.DecodeError`` and nothing else."""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from okapikv.core import messages as core
from okapikv.wire import convert, packed
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import result_fields, scalar_result_fields

U64 = st.integers(0, (1 << 64) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
U32 = st.integers(0, (1 << 32) - 1)
KEYS = st.binary(max_size=24)
VECTORS = st.lists(U64, min_size=1, max_size=3).map(tuple)


@st.composite
def wire_sessions(draw: st.DrawFn) -> packed.Session:
    if draw(st.booleans()):
        return packed.Session((), draw(U64), draw(U64))  # fresh, or a scalar protocol's time
    return packed.Session(draw(VECTORS), draw(U64))


SESSIONS = wire_sessions()
SNAPSHOTS = st.none() | st.builds(packed.ScanSnapshot, U32, VECTORS) | st.builds(packed.ScanSnapshot, U32,
                                                                                   st.just(()), U64)
OPERATIONS = st.one_of(
    st.builds(packed.Get, U64, KEYS, SESSIONS),
    st.builds(packed.Put, U64, KEYS, KEYS, SESSIONS, U64, U64),
    st.builds(packed.Swap, U64, KEYS, KEYS, SESSIONS),
    st.builds(packed.Delete, U64, KEYS, SESSIONS),
    st.builds(packed.Scan, U64, KEYS, KEYS, U32, SESSIONS, SNAPSHOTS),
    st.builds(packed.ReadTx, U64, st.lists(KEYS, max_size=4).map(tuple), SESSIONS),
    st.builds(packed.PutMany, U64, st.lists(KEYS, max_size=3).map(tuple), st.lists(KEYS, max_size=3).map(tuple),
              SESSIONS),
    st.builds(packed.Incr, U64, KEYS, I64, SESSIONS),
    st.builds(packed.Expire, U64, KEYS, U64, U64, st.booleans(), SESSIONS),
)


def _pb_session(session: packed.Session) -> pb.Session:
    return pb.Session(stable=session.stable, dt=session.dt, time=session.time)


def _pb_operation(operation: packed.Operation) -> pb.Operation:
    """The protobuf operation saying what ``operation`` says (the proto's field names)."""
    message = pb.Operation(id=operation.id)
    case = {packed.Get: "get", packed.Put: "put", packed.Swap: "swap", packed.Delete: "delete", packed.Scan: "scan",
            packed.ReadTx: "read_tx", packed.PutMany: "put_many", packed.Incr: "incr",
            packed.Expire: "expire"}[type(operation)]
    body = getattr(message, case)
    for name in operation.__struct_fields__:
        value = getattr(operation, name)
        if name == "id" or value is None:
            continue
        if name == "session":
            body.session.CopyFrom(_pb_session(value))
        elif name == "snapshot":
            body.snapshot.CopyFrom(pb.ScanSnapshot(dc=value.dc, vector=value.vector, time=value.time))
        elif isinstance(value, tuple):
            getattr(body, name).extend(value)
        else:
            setattr(body, name, value)
    return message


@settings(max_examples=200, deadline=None)
@given(operations=st.lists(OPERATIONS, max_size=6))
def test_operations_round_trip_and_mean_what_their_protobuf_counterparts_mean(
        operations: list[packed.Operation]) -> None:
    batch = packed.OperationBatch(operations)
    decoded = packed.decode_operations(packed.encode(batch))
    assert decoded == batch
    for operation in decoded.operations:
        protobuf = _pb_operation(operation)
        assert packed.operation_request(operation, 9, 2) == convert.operation_request(protobuf, 9, 2)
        assert packed.operation_from_pb(protobuf) == operation  # the clients' carry-over
    # a pipeline's batch: operations queued as protobuf elements and in msgpack already, mixed
    elements = [pb.OperationBatch(operations=[_pb_operation(o)]).SerializeToString() if index % 2
                else msgspec.msgpack.encode(o) for index, o in enumerate(operations)]
    if elements:
        framed = packed.frame_of(elements)
        assert packed.decode_operations(framed[4:]) == batch and len(framed) - 4 == int.from_bytes(framed[:4], "big")


def test_an_operation_built_from_its_fields_is_its_struct() -> None:
    session = (5, 6), 7  # ``SessionState.packed_session``: its ``time`` left out
    assert packed.decode_operations(packed.batch_of([packed.operation((packed.tag_of["get"], 3, b"k", session))])
                                    ) == packed.OperationBatch([packed.Get(3, b"k", packed.Session((5, 6), 7))])
    assert packed.decode_operations(packed.batch_of([packed.operation((packed.tag_of["put"], 4, b"k", b"v", session)),
                                                     packed.operation((packed.tag_of["delete"], 5, b"k", session))])
                                    ) == packed.OperationBatch([packed.Put(4, b"k", b"v", packed.Session((5, 6), 7)),
                                                                packed.Delete(5, b"k", packed.Session((5, 6), 7))])


def _core_sessions() -> st.SearchStrategy[core.Session]:
    return st.builds(core.Session, VECTORS, U64)


REPLIES = st.one_of(
    st.tuples(st.just("get"), st.builds(core.GetReply, st.just(0), st.none() | KEYS, _core_sessions())),
    st.tuples(st.sampled_from(["put", "delete"]), st.builds(core.WriteReply, st.just(0), st.booleans(), U64,
                                                            _core_sessions())),
    st.tuples(st.just("swap"), st.builds(core.SwapReply, st.just(0), st.none() | KEYS, U64, _core_sessions())),
    st.tuples(st.just("put_many"), st.builds(core.PutManyReply, st.just(0), U32, U64, _core_sessions())),
    st.tuples(st.just("incr"), st.builds(core.IncrReply, st.just(0), I64, U64, _core_sessions())),
    st.tuples(st.just("expire"), st.builds(core.ExpireReply, st.just(0), st.none() | KEYS, I64, st.booleans(), U64,
                                           _core_sessions())),
    st.tuples(st.just("scan"), st.builds(
        core.ScanReply, st.just(0), st.lists(st.tuples(KEYS, KEYS), max_size=4).map(tuple), _core_sessions(),
        st.none() | KEYS.filter(bool), st.none() | st.builds(core.SnapshotRef, U32, VECTORS))),
    st.tuples(st.just("read_tx"), st.builds(core.ReadTxReply, st.just(0), st.lists(st.none() | KEYS, max_size=4)
                                            .map(tuple), _core_sessions())),
    st.tuples(st.just("error"), st.builds(core.ErrorReply, st.just(0), st.sampled_from(["INVALID_ARGUMENT",
                                                                                         "UNAVAILABLE"]),
                                          st.text(max_size=40))),
)


def _same(wire: Any, protobuf: Any) -> None:
    """``wire`` (a decoded struct) reads as ``protobuf`` (the message the gRPC path builds) does."""
    if isinstance(wire, msgspec.Struct):
        for name in wire.__struct_fields__:
            value = getattr(wire, name)
            if name == "id":  # a result's: the protobuf Result's, compared by the caller
                continue
            if name == "snapshot" and value is None:
                assert not protobuf.HasField(name)
            else:
                _same(value, getattr(protobuf, name))
    elif isinstance(wire, tuple):
        assert len(wire) == len(protobuf)
        for item, counterpart in zip(wire, protobuf, strict=True):
            _same(item, counterpart)
    else:
        assert wire == protobuf


@settings(max_examples=300, deadline=None)
@given(case=REPLIES, operation_id=U64, scalar=st.booleans())
def test_results_say_what_the_grpc_results_say_within_the_size_bound(case: tuple[str, Any], operation_id: int,
                                                                     scalar: bool) -> None:
    kind, reply = case
    result, bound = (packed.scalar_result if scalar else packed.result)(operation_id, kind, reply)
    encoded = packed.encode_results([result])
    assert len(encoded) - 4 - 2 <= bound  # the frame's length prefix and the batch's two array headers
    (decoded,) = packed.decode_results(encoded[4:]).results
    fields, _ = (scalar_result_fields if scalar else result_fields)(operation_id, kind, reply)
    protobuf = pb.Result(**fields)  # type: ignore[arg-type]
    which, body = packed.case_of(decoded)
    assert which is not None and which == protobuf.WhichOneof("result") == packed.case_of(protobuf)[0]
    assert decoded.id == protobuf.id
    _same(body, getattr(protobuf, which))


@pytest.mark.parametrize("frame, complaint", [
    (b"", "truncated"),
    (b"\x91\x91\x93\x02\xff\xa1k", "Expected `int` >= 0"),  # a negative id
    (b"\x91\x91\x93\x63\x01\xc4\x01k", "Invalid value 99"),  # no operation has tag 99
    (b"\x91\x91\x92\x02\x01", "Expected `array` of at least length 3"),  # a GET without its key
    (b"\x91\x91\x94\x09\x01\xc4\x01k\xcf\xff\xff\xff\xff\xff\xff\xff\xff", "<= 9223372036854775807"),  # INCR by 2**64-1
    (b"\x91\xdd\xff\xff\xff\xff", "truncated"),  # four billion operations announced in six bytes
    (b"\x91\x91\x94\x02\x01\xc6\xff\xff\xff\xff", "truncated"),  # a 4 GiB key announced
    (b"\x91\x90\x00", "trailing characters"),
])
def test_bad_frames_get_a_clear_decode_error(frame: bytes, complaint: str) -> None:
    with pytest.raises(msgspec.DecodeError, match=complaint):
        packed.decode_operations(frame)


@settings(max_examples=300, deadline=None)
@given(frame=st.binary(max_size=200))
def test_any_bytes_decode_or_raise_decode_error_only(frame: bytes) -> None:
    for decode in (packed.decode_operations, packed.decode_results):
        with contextlib.suppress(msgspec.DecodeError):
            decode(frame)


def test_an_unencodable_reply_costs_its_own_result_only() -> None:
    from okapikv.server.pipeline import PackedSink

    sink = PackedSink()
    session = core.Session((1,), 1)
    sink.deliver(1, "get", core.GetReply(1, b"v", session))
    sink.deliver(2, "put", core.WriteReply(2, False, 1 << 70, session))  # no msgpack integer holds it
    frame = sink.frame()
    assert frame is not None
    first, second = packed.decode_results(frame[4:]).results
    assert isinstance(first, packed.GetResult) and first.value == b"v"
    assert isinstance(second, packed.Error) and second.id == 2 and second.code == "INTERNAL"
