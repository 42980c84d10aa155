"""Version 2 of the native port's messages: the Pipeline's operations and results as msgpack.

Why not protobuf here: turning protobuf requests into core messages and core replies into protobuf
results costs a server about a quarter of its CPU per operation in memory; decoding and encoding
these with msgspec takes x0.73 of the CPU per operation in all (docs/design.md, "The native
port's versions"; docs/benchmarks.md, "The native port's wire: protobuf against msgpack"). gRPC
keeps protobuf as the API of record (``okapikv.proto``); the native port, a transport of this
project's own clients only, carries the same operations and results in this form after the
``MAGIC_V2`` preamble (``okapikv.wire.frames``), and keeps serving version 1 (protobuf) to older
clients.

The messages mirror ``Operation`` and ``Result`` of the proto file field for field, in the same
order, as msgpack arrays (``array_like``) whose first element is the case's field number in the
proto's ``oneof`` (``tag``): ``[2, id, key, session]`` is a GET. A frame holds one
``OperationBatch`` (``[[operation, ...]]``) from the client, one ``ResultBatch`` back. The proto's
conventions hold: a session with no ``stable`` entries is ``time`` in every entry (0: a fresh
session), ``found = false`` with empty bytes is a missing value, a SCAN ``limit`` of 0 is none.

Parser bounds: a frame is decoded whole, after ``FrameDecoder`` has it complete, and a frame is at
most the cluster's ``max_message_bytes`` (refused from its length prefix before its bytes are
buffered). msgspec decodes into the types below and never allocates from a count the peer
announced ahead of the elements themselves: each element of an array takes at least one byte of
the frame, so the work and memory of a decode are bounded by the frame's size. Whatever is not a
well-formed message of these types (a wrong tag, a negative or oversized integer, a missing field)
raises ``msgspec.ValidationError``/``DecodeError``, which the server answers with a refusal.

Everything here is pure (bytes and core messages in, bytes and core messages out).
"""

from __future__ import annotations

import struct
from typing import Annotated, Any, ClassVar

import msgspec

from okapikv.core import messages as core
from okapikv.wire import convert
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import (
    DELETE,
    EXPIRE,
    GET,
    INCR,
    PUT,
    PUT_MANY,
    READ_TX,
    READ_TX_VALUE_BOUND,
    RESULT_BOUND,
    SCAN,
    SCAN_ITEM_BOUND,
    SCAN_SNAPSHOT_BOUND,
    STABLE_ENTRY_BOUND,
    SWAP,
    expires,
)

U64 = Annotated[int, msgspec.Meta(ge=0)]  # msgpack's integers end at 2**64 - 1
U32 = Annotated[int, msgspec.Meta(ge=0, le=(1 << 32) - 1)]
I64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]

# gc=False: these hold only ints, bytes, strings, tuples and each other (no cycles), so the
# collector need not track the thousands made per second.


class Session(msgspec.Struct, array_like=True, frozen=True, gc=False):
    stable: tuple[U64, ...] = ()
    dt: U64 = 0
    time: U64 = 0


class ScanSnapshot(msgspec.Struct, array_like=True, frozen=True, gc=False):
    dc: U32
    vector: tuple[U64, ...] = ()
    time: U64 = 0

    def SerializeToString(self) -> bytes:  # the protobuf name the client's pager calls
        """The snapshot as the protobuf ``ScanSnapshot`` a next page's request carries."""
        encoded: bytes = pb.ScanSnapshot(dc=self.dc, vector=self.vector, time=self.time).SerializeToString()
        return encoded


class Get(msgspec.Struct, tag=2, array_like=True, gc=False):
    id: U64
    key: bytes
    session: Session = Session()

    def request(self, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
        return GET, core.GetRequest(request_id, self.key, _session(self.session, num_dcs))


class Put(msgspec.Struct, tag=3, array_like=True, gc=False):
    id: U64
    key: bytes
    value: bytes
    session: Session = Session()
    ttl_ms: U64 = 0
    expire_at_ms: U64 = 0

    def request(self, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
        return PUT, core.PutRequest(request_id, self.key, self.value, _session(self.session, num_dcs),
                                    expires(self.ttl_ms, self.expire_at_ms))


class Swap(msgspec.Struct, tag=4, array_like=True, gc=False):
    id: U64
    key: bytes
    value: bytes
    session: Session = Session()

    def request(self, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
        return SWAP, core.SwapRequest(request_id, self.key, self.value, _session(self.session, num_dcs))


class Delete(msgspec.Struct, tag=5, array_like=True, gc=False):
    id: U64
    key: bytes
    session: Session = Session()

    def request(self, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
        return DELETE, core.DeleteRequest(request_id, self.key, _session(self.session, num_dcs))


class Scan(msgspec.Struct, tag=6, array_like=True, gc=False):
    id: U64
    start: bytes
    end: bytes
    limit: U32 = 0
    session: Session = Session()
    snapshot: ScanSnapshot | None = None

    def request(self, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
        ref = self.snapshot
        snapshot = None if ref is None else core.SnapshotRef(ref.dc, ref.vector or (ref.time,) * num_dcs)
        return SCAN, core.ScanRequest(request_id, self.start, self.end, self.limit or None,
                                      _session(self.session, num_dcs), snapshot)


class ReadTx(msgspec.Struct, tag=7, array_like=True, gc=False):
    id: U64
    keys: tuple[bytes, ...]
    session: Session = Session()

    def request(self, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
        return READ_TX, core.ReadTxRequest(request_id, self.keys, _session(self.session, num_dcs))


class PutMany(msgspec.Struct, tag=8, array_like=True, gc=False):
    id: U64
    keys: tuple[bytes, ...]
    values: tuple[bytes, ...]
    session: Session = Session()

    def request(self, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
        return PUT_MANY, core.PutManyRequest(request_id, self.keys, self.values, _session(self.session, num_dcs))


class Incr(msgspec.Struct, tag=9, array_like=True, gc=False):
    id: U64
    key: bytes
    by: I64
    session: Session = Session()

    def request(self, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
        return INCR, core.IncrRequest(request_id, self.key, self.by, _session(self.session, num_dcs))


class Expire(msgspec.Struct, tag=10, array_like=True, gc=False):
    id: U64
    key: bytes
    ttl_ms: U64 = 0
    expire_at_ms: U64 = 0
    persist: bool = False
    session: Session = Session()

    def request(self, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
        """No expiry and no ``persist``: a read of the value and time to live only (``convert.expire_request``)."""
        expiry: int | None = expires(self.ttl_ms, self.expire_at_ms)
        if not expiry and not self.persist:
            expiry = None
        return EXPIRE, core.ExpireRequest(request_id, self.key, expiry, _session(self.session, num_dcs))


Operation = Get | Put | Swap | Delete | Scan | ReadTx | PutMany | Incr | Expire


class OperationBatch(msgspec.Struct, array_like=True, gc=False):
    operations: list[Operation]


# ------------------------------------------------------------------ results
# ``case``: the name of the ``Result`` oneof case, as protobuf's ``WhichOneof("result")`` gives it.


class KeyValuePair(msgspec.Struct, array_like=True, frozen=True, gc=False):
    key: bytes
    value: bytes


class MaybeValue(msgspec.Struct, array_like=True, frozen=True, gc=False):
    found: bool = False
    value: bytes = b""


class GetResult(msgspec.Struct, tag=2, array_like=True, gc=False):
    case: ClassVar[str] = GET
    id: U64
    found: bool
    value: bytes
    session: Session


class PutResult(msgspec.Struct, tag=3, array_like=True, gc=False):
    case: ClassVar[str] = PUT
    id: U64
    found: bool
    timestamp: U64
    session: Session


class SwapResult(msgspec.Struct, tag=4, array_like=True, gc=False):
    case: ClassVar[str] = SWAP
    id: U64
    found: bool
    old_value: bytes
    timestamp: U64
    session: Session


class DeleteResult(msgspec.Struct, tag=5, array_like=True, gc=False):
    case: ClassVar[str] = DELETE
    id: U64
    found: bool
    timestamp: U64
    session: Session


class ScanResult(msgspec.Struct, tag=6, array_like=True, gc=False):
    case: ClassVar[str] = SCAN
    id: U64
    items: tuple[KeyValuePair, ...]
    session: Session
    resume: bytes = b""
    snapshot: ScanSnapshot | None = None

    def HasField(self, name: str) -> bool:  # the protobuf name the client's pager calls
        return getattr(self, name) is not None


class ReadTxResult(msgspec.Struct, tag=7, array_like=True, gc=False):
    case: ClassVar[str] = READ_TX
    id: U64
    values: tuple[MaybeValue, ...]
    session: Session


class Error(msgspec.Struct, tag=8, array_like=True, gc=False):
    case: ClassVar[str] = "error"
    id: U64
    code: str
    message: str


class PutManyResult(msgspec.Struct, tag=9, array_like=True, gc=False):
    case: ClassVar[str] = PUT_MANY
    id: U64
    count: U32
    timestamp: U64
    session: Session


class IncrResult(msgspec.Struct, tag=10, array_like=True, gc=False):
    case: ClassVar[str] = INCR
    id: U64
    value: I64
    timestamp: U64
    session: Session


class ExpireResult(msgspec.Struct, tag=11, array_like=True, gc=False):
    case: ClassVar[str] = EXPIRE
    id: U64
    found: bool
    value: bytes
    ttl_us: I64
    changed: bool
    timestamp: U64
    session: Session


Result = (GetResult | PutResult | SwapResult | DeleteResult | ScanResult | ReadTxResult | Error | PutManyResult
          | IncrResult | ExpireResult)


class ResultBatch(msgspec.Struct, array_like=True, gc=False):
    results: list[Result]



def _tag(kind: Any) -> int:
    tag: int = kind.__struct_config__.tag
    return tag


# Each result struct's tag (the first element of its encoding).
_GET, _PUT, _SWAP, _DELETE, _SCAN, _READ_TX, _ERROR, _PUT_MANY, _INCR, _EXPIRE = map(_tag, (
    GetResult, PutResult, SwapResult, DeleteResult, ScanResult, ReadTxResult, Error, PutManyResult, IncrResult,
    ExpireResult))


# One of each per process: msgspec's encoders and decoders keep no state between calls.
_encoder = msgspec.msgpack.Encoder()
_operations = msgspec.msgpack.Decoder(OperationBatch)
_results = msgspec.msgpack.Decoder(ResultBatch)
_LENGTH = struct.Struct(">I")
#: What a decoder raises on anything but a well-formed message (``msgspec.ValidationError`` included).
DecodeError = msgspec.DecodeError


def decode_operations(frame: bytes) -> OperationBatch:
    """A client's frame. Raises ``DecodeError``."""
    return _operations.decode(frame)


def decode_results(frame: bytes) -> ResultBatch:
    """A server's frame. Raises ``DecodeError``."""
    return _results.decode(frame)


def encode(message: OperationBatch | ResultBatch) -> bytes:
    return _encoder.encode(message)


def encode_frame(message: OperationBatch | ResultBatch | tuple[Any, ...]) -> bytes:
    """``message`` framed as ``okapikv.wire.frames.encode_frame`` frames it, without the copy."""
    buffer = bytearray(_LENGTH.size)
    _encoder.encode_into(message, buffer, _LENGTH.size)
    _LENGTH.pack_into(buffer, 0, len(buffer) - _LENGTH.size)
    return bytes(buffer)


def encode_id(operation_id: int) -> bytes:
    """An operation id as its bytes in an encoded operation (``split_id``)."""
    return _encoder.encode(operation_id)


def split_id(operation: Operation) -> tuple[bytes, bytes]:
    """An encoded operation whose id is 0 as the bytes before and after its id, so that a load
    generator encodes an operation once and sends it under any id: ``before + encode_id(id) +
    after``. (The array header and the tag take one byte each: at most 15 fields, tags below 128.)"""
    encoded = _encoder.encode(operation)
    return encoded[:2], encoded[3:]


def batch_of(operations: list[bytes]) -> bytes:
    """An ``OperationBatch`` of already encoded operations."""
    count = len(operations)
    if count < 16:
        header = bytes((0x90 | count,))
    elif count < 1 << 16:
        header = b"\xdc" + count.to_bytes(2, "big")
    else:
        header = b"\xdd" + count.to_bytes(4, "big")
    return b"\x91" + header + b"".join(operations)


# ------------------------------------------------------------------ the server: operations in


def _session(session: Session, num_dcs: int) -> core.Session:
    return core.Session(session.stable or (session.time,) * num_dcs, session.dt)


def operation_request(operation: Operation, request_id: int, num_dcs: int) -> tuple[str, core.ClientRequest]:
    """The core request of one operation and its result kind (``convert.operation_request``'s
    counterpart; decoding already checked every field's type and range). Each message class
    builds its own (``request``): one method call instead of a chain of type tests."""
    return operation.request(request_id, num_dcs)


# ------------------------------------------------------------------ the server: results out
# Each result is built as the plain tuple its struct encodes to (``[tag, id, ...]``), not as the
# struct: a tuple costs a third of a struct to make, and the client decodes the same bytes into
# the structs above. Sessions likewise: ``(stable, dt)``, or ``((), dt, time)`` when scalar.


def _reply_session(session: core.Session, scalar: bool) -> tuple[Any, ...]:
    if scalar:
        return (), session.dt, min(session.stable)
    return session.stable, session.dt


def scalar_result(operation_id: int, kind: str, reply: core.ClientReply) -> tuple[tuple[Any, ...], int]:
    """``result`` for a scalar protocol (sessions and SCAN snapshots as one time, ``okapikv.wire.convert``)."""
    return result(operation_id, kind, reply, True)


def result(operation_id: int, kind: str, reply: core.ClientReply, scalar: bool = False,
           ) -> tuple[tuple[Any, ...], int]:
    """One result, encodable as its struct, and an upper bound on its encoded size:
    ``convert.result_fields``'s bound, which holds here too (a msgpack integer takes at most 9
    bytes where protobuf's bound counts 10, a length or count at most 5 as there, a field's tag
    none). Most frequent replies first. The sink calls it once per result, directly (no wrapper)."""
    reply_type = type(reply)
    if reply_type is core.ErrorReply:
        assert isinstance(reply, core.ErrorReply)
        return error(operation_id, reply.code, reply.message)
    session = reply.session  # type: ignore[union-attr]
    bound = RESULT_BOUND + STABLE_ENTRY_BOUND * len(session.stable)
    wire = ((), session.dt, min(session.stable)) if scalar else (session.stable, session.dt)
    if reply_type is core.GetReply:
        assert isinstance(reply, core.GetReply)
        value = reply.value
        if value is None:
            return (_GET, operation_id, False, b"", wire), bound
        return (_GET, operation_id, True, value, wire), bound + len(value)
    if reply_type is core.WriteReply:
        assert isinstance(reply, core.WriteReply)
        return (_PUT if kind == PUT else _DELETE, operation_id, reply.found, reply.timestamp, wire), bound
    if reply_type is core.SwapReply:
        assert isinstance(reply, core.SwapReply)
        old = reply.old_value
        if old is None:
            return (_SWAP, operation_id, False, b"", reply.timestamp, wire), bound
        return (_SWAP, operation_id, True, old, reply.timestamp, wire), bound + len(old)
    if reply_type is core.PutManyReply:
        assert isinstance(reply, core.PutManyReply)
        return (_PUT_MANY, operation_id, reply.count, reply.timestamp, wire), bound
    if reply_type is core.IncrReply:
        assert isinstance(reply, core.IncrReply)
        return (_INCR, operation_id, reply.value, reply.timestamp, wire), bound
    if reply_type is core.ExpireReply:
        assert isinstance(reply, core.ExpireReply)
        value = reply.value
        return ((_EXPIRE, operation_id, value is not None, value or b"", reply.ttl_us, reply.changed,
                 reply.timestamp, wire), bound + 12 + len(value or b""))
    if reply_type is core.ScanReply:
        assert isinstance(reply, core.ScanReply)
        bound += sum([SCAN_ITEM_BOUND + len(key) + len(value) for key, value in reply.items])
        snapshot: tuple[Any, ...] | None = None
        if reply.snapshot is not None:
            vector = reply.snapshot.vector
            snapshot = (reply.snapshot.dc, (), min(vector)) if scalar else (reply.snapshot.dc, vector)
            bound += SCAN_SNAPSHOT_BOUND + STABLE_ENTRY_BOUND * len(vector)
        resume = reply.resume or b""
        return (_SCAN, operation_id, reply.items, wire, resume, snapshot), bound + len(resume)
    if reply_type is core.ReadTxReply:
        assert isinstance(reply, core.ReadTxReply)
        values = [(False, b"") if value is None else (True, value) for value in reply.values]
        bound += sum([READ_TX_VALUE_BOUND + len(value or b"") for value in reply.values])
        return (_READ_TX, operation_id, values, wire), bound
    raise TypeError(f"unexpected reply type {reply_type.__name__}")


def error(operation_id: int, code: str, message: str) -> tuple[tuple[Any, ...], int]:
    """An error result (``code``: a gRPC status name) and its size bound (``convert.error_fields``)."""
    return (_ERROR, operation_id, code, message), convert.error_fields(operation_id, code, message)[1]


def encode_results(results: list[tuple[Any, ...]]) -> bytes:
    """A framed ``ResultBatch`` of results made by ``result`` and ``error``."""
    return encode_frame((results,))


# ------------------------------------------------------------------ the clients: protobuf requests in


def _wire_session(message: pb.Session) -> Session:
    return Session(tuple(message.stable[:]), message.dt, message.time)


def operation_from_pb(operation: pb.Operation) -> Operation | None:
    """One Pipeline ``Operation`` as its version 2 form (None: no case set).

    The clients build their requests as protobuf bytes once (the unary RPCs and the gRPC stream
    send them as they are, ``okapikv.client.operations``); on a version 2 connection each batch is
    carried over here."""
    which = operation.WhichOneof("op")
    operation_id = operation.id
    if which == GET:
        get = operation.get
        return Get(operation_id, get.key, _wire_session(get.session))
    if which == SWAP:
        swap = operation.swap
        return Swap(operation_id, swap.key, swap.value, _wire_session(swap.session))
    if which == PUT:
        put = operation.put
        return Put(operation_id, put.key, put.value, _wire_session(put.session), put.ttl_ms, put.expire_at_ms)
    if which == DELETE:
        delete = operation.delete
        return Delete(operation_id, delete.key, _wire_session(delete.session))
    if which == SCAN:
        scan = operation.scan
        ref = scan.snapshot
        snapshot = ScanSnapshot(ref.dc, tuple(ref.vector[:]), ref.time) if scan.HasField("snapshot") else None
        return Scan(operation_id, scan.start, scan.end, scan.limit, _wire_session(scan.session), snapshot)
    if which == READ_TX:
        read_tx = operation.read_tx
        return ReadTx(operation_id, tuple(read_tx.keys[:]), _wire_session(read_tx.session))
    if which == PUT_MANY:
        put_many = operation.put_many
        return PutMany(operation_id, tuple(put_many.keys[:]), tuple(put_many.values[:]),
                       _wire_session(put_many.session))
    if which == INCR:
        incr = operation.incr
        return Incr(operation_id, incr.key, incr.by, _wire_session(incr.session))
    if which == EXPIRE:
        expire = operation.expire
        return Expire(operation_id, expire.key, expire.ttl_ms, expire.expire_at_ms, expire.persist,
                      _wire_session(expire.session))
    return None


#: the first byte of a protobuf ``OperationBatch`` element (field 1, length-delimited); an operation
#: encoded here starts with an array header (0x90-0x9f), never with it
_PB_ELEMENT = 0x0A


def operation(fields: tuple[Any, ...]) -> bytes:
    """One operation as a version 2 batch carries it, from the fields of its struct in order, its
    tag first (``(tag_of[GET], id, key, session)``: a ``Get``), without making the struct."""
    return _encoder.encode(fields)


#: each operation's tag by its case name (``OperationKind.field`` in the clients)
tag_of: dict[str, int] = {GET: _tag(Get), PUT: _tag(Put), SWAP: _tag(Swap), DELETE: _tag(Delete), SCAN: _tag(Scan),
                          READ_TX: _tag(ReadTx), PUT_MANY: _tag(PutMany), INCR: _tag(Incr), EXPIRE: _tag(Expire)}


def frame_of(elements: list[bytes]) -> bytes:
    """A version 2 frame of one ``OperationBatch``: ``elements`` in order, each an operation
    encoded here (``operation``) or a serialized protobuf ``OperationBatch`` element, as the
    clients build most requests (the unary RPCs and the gRPC stream send them as they are,
    ``okapikv.client.operations``), carried over to this form."""
    if any(element[0] == _PB_ELEMENT for element in elements):
        elements = [_encoder.encode(operation_from_pb(pb.OperationBatch.FromString(element).operations[0]))
                    if element[0] == _PB_ELEMENT else element for element in elements]
    body = batch_of(elements)
    return _LENGTH.pack(len(body)) + body


def case_of(result: Any) -> tuple[str | None, Any]:
    """The case of a result of either version and its body (``pb.Result``: ``WhichOneof`` and that
    field; a version 2 result is its own body)."""
    if type(result) is pb.Result:
        which = result.WhichOneof("result")
        return which, None if which is None else getattr(result, which)
    return result.case, result
