"""The client's requests in protobuf's wire format, written out by hand.

Why by hand: a pipelined client builds one ``Operation`` per call, and building it with protobuf
(``pb.Operation(id=n, swap={...})`` holding a ``pb.Session``, then ``SerializeToString``) cost
2.9 us per SWAP on the 2-core VM against 1.5 us for the same bytes joined here, with the session
serialized once per change of the session instead of once per request (~10% of the async client's
CPU per operation under YCSB-A).

Every function returns the bytes protobuf's serializer gives for the same message (fields in
number order, proto3 defaults left out), so the servers parse them with the generated classes
like any other client's; ``tests/unit/test_wire_encoding.py`` checks each against protobuf.
The session is the last field of a request (it has the highest field number) but for a later SCAN
page's snapshot, which follows it: a request is built from its fixed fields and the session's
cached bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from okapikv.wire.okapikv_pb2 import Session as _Session

_SMALL = tuple(bytes((value,)) for value in range(128))


def encode_varint(value: int) -> bytes:
    """A non-negative integer as a protobuf varint."""
    if value < 128:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bytes_field(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field, left out when empty (proto3)."""
    return tag + encode_varint(len(data)) + data if data else b""


def session(stable: Sequence[int], dt: int, *, scalar: bool = False) -> bytes:
    """A serialized ``Session``: ``stable`` packed (field 1), ``dt`` (field 2); ``scalar`` (a scalar
    protocol, ``okapikv.wire.convert``): no entries and ``time`` = the least entry (field 3).

    Built by upb, not by hand as the requests are: a session is one C call there, against a varint
    loop per entry here (1.0 against 2.4 us for one entry; a client whose replies arrive as msgpack,
    ``okapikv.wire.packed``, encodes its session again after each write)."""
    if scalar:
        encoded: bytes = _Session(dt=dt, time=min(stable)).SerializeToString()
    else:
        encoded = _Session(stable=stable, dt=dt).SerializeToString()
    return encoded


def session_field(serialized_session: bytes) -> bytes:
    """A serialized ``Session`` as the value of a request's session field (its length first): what
    the request encoders below append after the field's tag."""
    return encode_varint(len(serialized_session)) + serialized_session


# Each request message's fields, then its session field (tag and length-prefixed ``Session``).


def get_request(key: bytes, session_value: bytes) -> bytes:
    return _bytes_field(b"\x0a", key) + b"\x12" + session_value


def write_request(key: bytes, value: bytes, session_value: bytes) -> bytes:
    """``PutRequest`` and ``SwapRequest`` (same fields)."""
    return _bytes_field(b"\x0a", key) + _bytes_field(b"\x12", value) + b"\x1a" + session_value


def delete_request(key: bytes, session_value: bytes) -> bytes:
    return _bytes_field(b"\x0a", key) + b"\x12" + session_value


def scan_request(start: bytes, end: bytes, limit: int, session_value: bytes, snapshot: bytes | None = None) -> bytes:
    """``snapshot``: a serialized ``ScanSnapshot`` (a later page's; field 5, after the session)."""
    limit_field = b"\x18" + encode_varint(limit) if limit else b""
    request = _bytes_field(b"\x0a", start) + _bytes_field(b"\x12", end) + limit_field + b"\x22" + session_value
    if snapshot is None:
        return request
    return request + b"\x2a" + encode_varint(len(snapshot)) + snapshot


def read_tx_request(keys: Iterable[bytes], session_value: bytes) -> bytes:
    # A repeated bytes field keeps empty elements (unlike a singular one).
    fields = b"".join([b"\x0a" + encode_varint(len(key)) + key for key in keys])
    return fields + b"\x12" + session_value


def put_many_pair(key: bytes, value: bytes) -> bytes:
    """One pair of a ``PutManyRequest``: an element of ``keys`` (field 1) and one of ``values``
    (field 2). Repeated fields may interleave on the wire (each keeps its own order), so a request
    is its pairs' encodings one after the other, then ``put_many_session``; empty elements are kept."""
    return b"\x0a" + encode_varint(len(key)) + key + b"\x12" + encode_varint(len(value)) + value


def put_many_session(session_value: bytes) -> bytes:
    """A ``PutManyRequest``'s session field (3), to follow its pairs."""
    return b"\x1a" + session_value


def operation(operation_id: int, tag: bytes, request: bytes) -> bytes:
    """A serialized ``Operation``: its id, then ``request`` in the oneof case ``tag`` names."""
    head = b"\x08" + encode_varint(operation_id) if operation_id else b""
    return head + tag + encode_varint(len(request)) + request


def batch_element(encoded_operation: bytes) -> bytes:
    """One serialized ``Operation`` as an element of ``OperationBatch.operations`` (field 1): a
    batch is then the concatenation of its elements."""
    return b"\x0a" + encode_varint(len(encoded_operation)) + encoded_operation
