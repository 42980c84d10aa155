"""What each client operation sends and how its reply is read, shared by the async and sync clients.

Both clients speak the same protocol over different gRPC flavours (grpc.aio with pipelining, plain
sync stubs for low one-at-a-time latency). Everything that does not depend on the flavour lives here
so the two can never disagree: key coercion, request construction with the causal session, decoding
of replies, and the merge of each reply's session into the client's ``ClientSession`` (docs/protocol.md,
"Sessions": every request carries the session, every reply returns one that
the client merges entry-wise with max, so the session never moves backwards).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sized
from dataclasses import dataclass
from typing import Any, NamedTuple

from okapikv.core.messages import Session
from okapikv.core.session import ClientSession
from okapikv.wire import encoding, packed
from okapikv.wire import okapikv_pb2 as pb

KeyLike = str | bytes | bytearray | memoryview

MAX_SCAN_LIMIT = (1 << 32) - 1  # the wire field is a uint32
#: How many times ``scan`` starts a paged SCAN over when a later page finds its snapshot gone
#: (``SnapshotTooOld``): a scan slower than the servers' ``snapshot_lease_ms`` per page would
#: otherwise go on forever.
SCAN_RESTARTS = 2


#: A serialized request message (``GetRequest``, ``SwapRequest``, ...), session last, built by hand
#: (``okapikv.wire.encoding``): a Pipeline operation wraps it as it is, a unary call parses it back.
Request = bytes


@dataclass(frozen=True, slots=True)
class OperationKind:
    """How one operation is named on the wire.

    ``method`` is the unary RPC of service KeyValue and ``message`` its request type; ``field`` is
    the name of the operation's case in the ``Operation``/``Result`` oneofs of the Pipeline stream
    and ``tag`` that case's field tag in ``Operation``.
    ``writes`` marks operations that are not idempotent: retrying them after a lost reply may apply
    them twice (at-least-once), which callers can see as ``found=True`` on a key they created
    themselves. ``once`` marks those never retried after they may have been applied, whatever the
    client's ``at_most_once``: an increment applied twice would count twice.
    """

    method: str
    field: str
    writes: bool
    message: Any  # the protobuf request class
    tag: bytes
    once: bool = False

    def unary(self, stub: Any, request: Request, timeout_s: float) -> Any:
        """The operation as a unary call on ``stub`` (a call object for grpc.aio, the reply for sync)."""
        return getattr(stub, self.method)(self.message.FromString(request), timeout=timeout_s)

    def operation(self, operation_id: int, request: Request) -> bytes:
        """The operation as one element of a Pipeline ``OperationBatch``, serialized and framed."""
        return encoding.batch_element(encoding.operation(operation_id, self.tag, request))

    def with_session(self, request: Request, session: pb.Session) -> Request:
        """``request`` with its session replaced (a client that moved to another DC resends it)."""
        message = self.message.FromString(request)
        message.session.CopyFrom(session)
        encoded: bytes = message.SerializeToString()
        return encoded


GET = OperationKind("Get", "get", writes=False, message=pb.GetRequest, tag=b"\x12")
PUT = OperationKind("Put", "put", writes=True, message=pb.PutRequest, tag=b"\x1a")
SWAP = OperationKind("Swap", "swap", writes=True, message=pb.SwapRequest, tag=b"\x22")
DELETE = OperationKind("Delete", "delete", writes=True, message=pb.DeleteRequest, tag=b"\x2a")
SCAN = OperationKind("Scan", "scan", writes=False, message=pb.ScanRequest, tag=b"\x32")
READ_TX = OperationKind("ReadTx", "read_tx", writes=False, message=pb.ReadTxRequest, tag=b"\x3a")
INCR = OperationKind("Incr", "incr", writes=True, message=pb.IncrRequest, tag=b"\x4a", once=True)
EXPIRE = OperationKind("Expire", "expire", writes=True, message=pb.ExpireRequest, tag=b"\x52")


def to_bytes(value: KeyLike) -> bytes:
    """Keys and values are bytes on the wire; ``str`` is encoded as UTF-8 for convenience."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"keys and values must be str or bytes, not {type(value).__name__}")


class SessionState:
    """A ``ClientSession`` plus its wire form, rebuilt only when the session changes.

    ``wire()`` is the session as the value of a request's session field (``encoding.session_field``),
    which every request appends as it is. Most replies leave the session unchanged (a read of an
    old key), and the others usually carry exactly the session that results (the server merged the
    request's session into its reply): ``merge`` tells both cases apart by the reply session's
    serialized bytes (0.3 us) before decoding its vector (1.4 us), and adopts those bytes as the
    new wire form instead of encoding the merged session again. ``packed_session()`` is the session in the
    native port's version 2 form (``okapikv.wire.packed``), likewise kept until the session changes.
    """

    __slots__ = ("session", "_serialized", "_wire", "_packed", "_scalar")

    def __init__(self, num_dcs: int, *, scalar: bool = False) -> None:
        """``scalar``: the cluster's protocol sends sessions as one time (GentleRain,
        ``okapikv.core.protocols.is_scalar``); this one does too."""
        self.session = ClientSession(num_dcs)
        self._serialized: bytes | None = None  # the session as a serialized ``Session``
        self._wire: bytes | None = None
        self._packed: tuple[Any, ...] | None = None
        self._scalar = scalar

    def wire(self) -> bytes:
        wire = self._wire
        if wire is None:
            if self._serialized is None:
                self._serialized = encoding.session(self.session.stable, self.session.dt, scalar=self._scalar)
            wire = self._wire = encoding.session_field(self._serialized)
        return wire

    def packed_session(self) -> tuple[Any, ...]:
        """The session as a version 2 operation carries it (``packed.Session``'s fields, as a tuple)."""
        fields = self._packed
        if fields is None:
            session = self.session
            fields = ((), session.dt, min(session.stable)) if self._scalar else (session.stable, session.dt)
            self._packed = fields
        return fields

    def message(self) -> pb.Session:
        """The session as a protobuf message (for the RPCs that are not built by hand)."""
        if self._scalar:
            return pb.Session(time=min(self.session.stable), dt=self.session.dt)
        return pb.Session(stable=self.session.stable, dt=self.session.dt)

    def merge(self, reply: pb.Session | packed.Session) -> None:
        """Merge a reply's session (entry-wise max); a reply without a session changes nothing.
        A ``packed`` session (the native port) is compared by its values, as cheap as the bytes."""
        if type(reply) is packed.Session:
            self._merge(reply.stable, reply.dt, reply.time, None)
            return
        assert isinstance(reply, pb.Session)
        serialized = reply.SerializeToString()
        if serialized == self._serialized:
            return
        self._merge(tuple(reply.stable[:]), reply.dt, reply.time, serialized)

    def _merge(self, stable: tuple[int, ...], dt: int, time: int, serialized: bytes | None) -> None:
        if not stable and time:  # a scalar protocol's session: the time in every entry
            stable = (time,) * len(self.session.stable)
        session = self.session
        if dt <= session.dt and (stable == session.stable or not stable):
            return
        session.merge(Session(stable, dt))
        self._packed = None
        if serialized is not None and session.stable == stable and session.dt == dt:
            self._serialized = serialized  # the reply's session is the session now
            self._wire = None
        elif self._serialized is not None:
            self._serialized = self._wire = None

    def absorb(self, update: Session) -> None:
        """Merge a session in the core's form: the reply of a server in the same process (the RESP
        port runs its connections' local operations on the server's core directly)."""
        session = self.session
        before = (session.stable, session.dt)
        session.merge(update)
        if (session.stable, session.dt) != before:
            self._serialized = self._wire = self._packed = None

    def replace(self, adopted: pb.Session) -> None:
        """Become the session another DC adopted (failover): not a merge, the entries of the old
        DC's session are not valid there (``okapikv.core.session.adopt``)."""
        self.session = ClientSession(len(self.session.stable))
        self._serialized = self._wire = self._packed = None
        self.merge(adopted)

    @property
    def current(self) -> Session:
        return self.session.current


# ------------------------------------------------------------------ requests


def get_request(key: bytes, session: bytes) -> Request:
    """``session``: ``SessionState.wire()``."""
    return encoding.get_request(key, session)


def put_request(key: bytes, value: bytes, session: bytes, ttl_ms: int = 0) -> Request:
    """``ttl_ms`` (``ttl_to_ms``): the key expires that long after its server writes it; 0 never."""
    request = encoding.write_request(key, value, session)
    return request + b"\x20" + encoding.encode_varint(ttl_ms) if ttl_ms else request


def ttl_to_ms(ttl: float | None) -> int:
    """A time to live in seconds (None: none) as whole milliseconds on the wire, rounded up."""
    if ttl is None:
        return 0
    if not ttl > 0 or math.isinf(ttl):
        raise ValueError(f"a time to live is a positive number of seconds, not {ttl}")
    return max(math.ceil(ttl * 1000), 1)


class Expiry(NamedTuple):
    """A key's value and time to live as an expiry request left them (``ttl_us``: -2 absent, -1
    none, as Redis's TTL); ``changed``: the request wrote a new version."""

    value: bytes | None
    ttl_us: int
    changed: bool


def expire_request(key: bytes, ttl_ms: int, at_ms: int, persist: bool, session: bytes) -> Request:
    fields: bytes = pb.ExpireRequest(key=key, ttl_ms=ttl_ms, expire_at_ms=at_ms, persist=persist).SerializeToString()
    return fields + b"\x2a" + session


swap_request = put_request  # the same fields


def delete_request(key: bytes, session: bytes) -> Request:
    return encoding.delete_request(key, session)


def incr_request(key: bytes, by: int, session: bytes) -> Request:
    """An ``IncrRequest`` (``by`` a signed 64-bit integer, else ``ValueError``)."""
    if not -(1 << 63) <= by < (1 << 63):
        raise ValueError(f"an increment is a signed 64-bit integer, not {by}")
    fields: bytes = pb.IncrRequest(key=key, by=by).SerializeToString()
    return fields + b"\x1a" + session


def scan_request(start: bytes, end: bytes, wire_limit: int, session: bytes) -> Request:
    """``wire_limit`` is ``encode_limit(limit)``: clients validate the limit before anything else."""
    return encoding.scan_request(start, end, wire_limit, session)


class ScanPager:
    """The pages of one SCAN, as both clients read them (docs/operations.md, "Read limits and paging").

    A server's reply holds at most its ``max_scan_items`` pairs; one that stopped early carries the
    key the rest starts at and the snapshot it read. The next page is the same request from that
    key, with that snapshot (opaque here: the serialized ``ScanSnapshot``) and what is left of the
    limit, so all pages read one snapshot. ``restart()`` starts over with a fresh snapshot (after a
    page found the snapshot gone), at most ``SCAN_RESTARTS`` times.
    """

    __slots__ = ("start", "end", "limit", "restarts_left", "next_start", "snapshot", "remaining", "done")

    def __init__(self, start: bytes, end: bytes, limit: int | None, restarts: int = SCAN_RESTARTS) -> None:
        encode_limit(limit)  # refuse a bad limit before anything is sent
        self.start = start
        self.end = end
        self.limit = limit
        self.restarts_left = restarts
        self.next_start = start
        self.snapshot: bytes | None = None
        self.remaining = limit
        self.done = start > end

    def request(self, session: bytes) -> Request:
        """The next page's request (``session``: ``SessionState.wire()``)."""
        return encoding.scan_request(self.next_start, self.end, encode_limit(self.remaining), session, self.snapshot)

    def take(self, reply: Any) -> list[tuple[bytes, bytes]]:
        """A page's pairs; ``done`` once the range or the limit is finished."""
        items = decode_scan(reply)
        remaining = self.remaining
        if remaining is not None:
            remaining -= len(items)
        if not reply.resume or remaining is not None and remaining <= 0:
            self.done = True
            return items if remaining is None or remaining >= 0 else items[: self.remaining]
        if not reply.HasField("snapshot"):
            from okapikv.errors import ProtocolMismatch

            raise ProtocolMismatch("a SCAN page stopped early without the snapshot to read the rest at")
        self.next_start = bytes(reply.resume)
        self.snapshot = reply.snapshot.SerializeToString()
        self.remaining = remaining
        return items

    def restart(self) -> bool:
        """Start over with a fresh snapshot; False when the restarts are used up."""
        if self.restarts_left <= 0:
            return False
        self.restarts_left -= 1
        self.next_start, self.snapshot, self.remaining = self.start, None, self.limit
        return True


def read_tx_request(keys: Iterable[bytes], session: bytes) -> Request:
    return encoding.read_tx_request(keys, session)


def encode_limit(limit: int | None) -> int:
    """``None`` means no limit (0 on the wire); a limit must be positive."""
    if limit is None:
        return 0
    if limit < 1:
        raise ValueError(f"scan limit must be positive or None, not {limit}")
    return min(limit, MAX_SCAN_LIMIT)


def unique_keys(keys: Iterable[KeyLike], max_keys: int = 0) -> tuple[list[bytes], list[bytes]]:
    """The keys as bytes in the caller's order, and the distinct ones to send (first occurrence order).

    A transaction may name a key twice; the server only needs it once, and both positions get the
    same value from the one snapshot. ``max_keys`` (the servers' ``max_read_keys``, from
    ClusterInfo; 0: unknown): ``InvalidArgument``, with the server's own message, as soon as more
    distinct keys than that are seen, before the rest is even converted: a RO-TX the servers would
    refuse is refused at once, not after its keys crossed the network to a busy server.
    """
    if not max_keys or (isinstance(keys, Sized) and len(keys) <= max_keys):
        ordered = [to_bytes(key) for key in keys]
        return ordered, list(dict.fromkeys(ordered))
    ordered = []
    distinct: dict[bytes, None] = {}
    for key in keys:
        key_bytes = to_bytes(key)
        ordered.append(key_bytes)
        distinct[key_bytes] = None
        if len(distinct) > max_keys:
            from okapikv.errors import InvalidArgument

            count = f"{len(keys)}" if isinstance(keys, Sized) else f"more than {max_keys}"
            raise InvalidArgument(f"a read transaction may name at most {max_keys} keys, not {count}")
    return ordered, list(distinct)


# ------------------------------------------------------------------ replies


def decode_get(reply: Any) -> bytes | None:
    return bytes(reply.value) if reply.found else None


def decode_found(reply: Any) -> bool:
    return bool(reply.found)


def decode_timestamp(reply: Any) -> int:
    """The write timestamp of a PUT, SWAP or DELETE reply."""
    return int(reply.timestamp)


def decode_incr(reply: Any) -> int:
    return int(reply.value)


def decode_expire(reply: Any) -> Expiry:
    return Expiry(bytes(reply.value) if reply.found else None, int(reply.ttl_us), bool(reply.changed))


def decode_swap(reply: Any) -> bytes | None:
    return bytes(reply.old_value) if reply.found else None


def decode_scan(reply: Any) -> list[tuple[bytes, bytes]]:
    return [(bytes(item.key), bytes(item.value)) for item in reply.items]


def decode_read_tx(reply: Any, ordered: list[bytes], sent: list[bytes]) -> list[bytes | None]:
    """Map the values of the distinct keys sent back onto the caller's key order."""
    values = reply.values
    if len(values) != len(sent):
        from okapikv.errors import ProtocolMismatch

        raise ProtocolMismatch(f"ReadTx sent {len(sent)} keys but got {len(values)} values back")
    by_key = {key: (bytes(value.value) if value.found else None) for key, value in zip(sent, values, strict=True)}
    return [by_key[key] for key in ordered]
