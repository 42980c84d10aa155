"""Conversions between the core's frozen dataclasses (``okapikv.core.messages``) and protobuf.

This is the server's hot path: every request, reply and peer message goes through one of these
functions, so they use plain attribute access and fill protobuf messages in place (``add()``,
sub-message fields) instead of building them with keyword arguments or reflection. The exception
is the Pipeline's results (``result_fields``): plain dicts, built into one ``ResultBatch`` by a
single constructor call per batch, cost less than filling each ``Result`` in place.

Conventions shared with the client library:
- a ``Session`` with no ``stable`` entries is a fresh session: zeros for every DC (so a plain
  grpcurl call, or a client that has not learned the cluster size yet, still works);
- a missing value (absent key, tombstone) is ``found = false`` with empty bytes;
- a SCAN ``limit`` of 0 means no limit; a SCAN reply's empty ``resume`` means the scan is done;
- peer messages carry no source of their own: the ``PeerBatch`` that holds them names it;
- a scalar protocol (``Protocol.scalar``: GentleRain) sends one time where the others send a
  vector: a session's ``time`` with no ``stable`` entries, a slice's ``snapshot_time`` with no
  ``snapshot``, a SCAN snapshot's ``time`` with no ``vector``; each decodes to that time in every
  entry, which is GentleRain's stable vector and snapshot (docs/protocol.md, "GentleRain"). The
  encoder sends the minimum of the vector (its entries are equal under GentleRain; the minimum is
  the one every entry promises). The decoders accept both forms from any sender.

Peer batches are built from bytes: each core message is serialized once (a replication batch goes
to every other DC unchanged) and framed into ``PeerBatch`` by hand as field 3, which protobuf
parses exactly like a batch built with ``messages.add()``. The batch header (cluster id, source,
incarnation) is serialized once per link.
"""

from __future__ import annotations

from typing import Any

from okapikv.core.messages import (
    CatchUpReply,
    CatchUpRequest,
    ClientReply,
    ClientRequest,
    DeleteRequest,
    ErrorReply,
    ExpireReply,
    ExpireRequest,
    GetReply,
    GetRequest,
    GstBroadcast,
    GsvBroadcast,
    GsvExchange,
    Heartbeat,
    IncrReply,
    IncrRequest,
    MembershipUpdate,
    PeerMessage,
    PutManyReply,
    PutManyRequest,
    PutRequest,
    ReadItem,
    ReadTxReply,
    ReadTxRequest,
    RelayReply,
    RelayRequest,
    RepairAnswer,
    RepairBatch,
    ReplicaProgress,
    ReplicateBatch,
    Restarted,
    ScanReply,
    ScanRequest,
    ScanSlice,
    ServerId,
    Session,
    SliceReply,
    SnapshotRef,
    StableTimeReport,
    SwapReply,
    SwapRequest,
    TxSlice,
    Update,
    VvReport,
    WriteReply,
)
from okapikv.core.timestamps import EPOCH_UNIX_US
from okapikv.core.vectors import Vector
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.encoding import encode_varint

# Result kinds of the Pipeline stream: the name of the ``Operation``/``Result`` oneof case.
GET = "get"
PUT = "put"
SWAP = "swap"
DELETE = "delete"
SCAN = "scan"
READ_TX = "read_tx"
PUT_MANY = "put_many"
INCR = "incr"
EXPIRE = "expire"

# ==================================================================== sessions


def session_from_pb(message: pb.Session, num_dcs: int) -> Session:
    """The core's ``Session``; no ``stable`` entries means ``time`` (0 for a fresh session, the GST
    of a scalar protocol's) for every DC.

    Slicing copies the repeated field into a list in one upb call, where ``tuple(stable)`` goes
    through the container's iterator element by element."""
    stable = tuple(message.stable[:])  # tuple(stable) took 410 ns for 1 entry, 490 for 3; this 165 and 235
    return Session(stable or (message.time,) * num_dcs, message.dt)


def fill_session(target: pb.Session, session: Session, *, scalar: bool = False) -> None:
    if scalar:
        target.time = min(session.stable)
    else:
        target.stable.extend(session.stable)
    target.dt = session.dt


# ==================================================================== client requests


def get_request(message: pb.GetRequest, request_id: int, num_dcs: int) -> GetRequest:
    return GetRequest(request_id, message.key, session_from_pb(message.session, num_dcs))


def put_request(message: pb.PutRequest, request_id: int, num_dcs: int) -> PutRequest:
    return PutRequest(request_id, message.key, message.value, session_from_pb(message.session, num_dcs),
                      expires(message.ttl_ms, message.expire_at_ms))


def expires(ttl_ms: int, expire_at_ms: int) -> int:
    """The core's expiry (``okapikv.core.expiry.resolve``) of a request's ``ttl_ms`` (relative)
    or ``expire_at_ms`` (Unix milliseconds; a time before the cluster's epoch is at once); 0: none."""
    if ttl_ms:
        return -ttl_ms * 1000
    if expire_at_ms:
        return max(expire_at_ms * 1000 - EPOCH_UNIX_US, 1)
    return 0


def expire_request(message: pb.ExpireRequest, request_id: int, num_dcs: int) -> ExpireRequest:
    """No expiry and no ``persist``: a read of the value and time to live only."""
    expiry: int | None = expires(message.ttl_ms, message.expire_at_ms)
    if not expiry and not message.persist:
        expiry = None
    return ExpireRequest(request_id, message.key, expiry, session_from_pb(message.session, num_dcs))


def swap_request(message: pb.SwapRequest, request_id: int, num_dcs: int) -> SwapRequest:
    return SwapRequest(request_id, message.key, message.value, session_from_pb(message.session, num_dcs))


def delete_request(message: pb.DeleteRequest, request_id: int, num_dcs: int) -> DeleteRequest:
    return DeleteRequest(request_id, message.key, session_from_pb(message.session, num_dcs))


def incr_request(message: pb.IncrRequest, request_id: int, num_dcs: int) -> IncrRequest:
    return IncrRequest(request_id, message.key, message.by, session_from_pb(message.session, num_dcs))


def scan_request(message: pb.ScanRequest, request_id: int, num_dcs: int) -> ScanRequest:
    snapshot = None
    if message.HasField("snapshot"):
        ref = message.snapshot
        snapshot = SnapshotRef(ref.dc, tuple(ref.vector[:]) or (ref.time,) * num_dcs)
    return ScanRequest(
        request_id,
        message.start,
        message.end,
        message.limit or None,
        session_from_pb(message.session, num_dcs),
        snapshot,
    )


def read_tx_request(message: pb.ReadTxRequest, request_id: int, num_dcs: int) -> ReadTxRequest:
    return ReadTxRequest(request_id, tuple(message.keys[:]), session_from_pb(message.session, num_dcs))


def operation_request(operation: pb.Operation, request_id: int, num_dcs: int) -> tuple[str, ClientRequest] | None:
    """The core request of one Pipeline operation and its result kind; None if the oneof is unset.

    Every Pipeline operation passes through here, so the single-key kinds build their request in
    place rather than through ``get_request`` and the like (one call fewer, ~55 ns), most
    frequent first; SCAN and RO-TX, rarer, use the builders. ``WhichOneof`` is the cheapest way to
    find the case (200 ns; ``ListFields()`` takes 800). Spelling ``session_from_pb`` out in each
    branch too would save another ~55 ns, not worth four copies of the fresh-session rule."""
    kind = operation.WhichOneof("op")
    # With session_from_pb's slice, 4 GET + 4 SWAP, 1 DC: 3.0 -> 2.7 us per operation (submit_operations' loop).
    if kind == GET:
        get = operation.get
        return GET, GetRequest(request_id, get.key, session_from_pb(get.session, num_dcs))
    if kind == SWAP:
        swap = operation.swap
        return SWAP, SwapRequest(request_id, swap.key, swap.value, session_from_pb(swap.session, num_dcs))
    if kind == PUT:
        put = operation.put
        return PUT, PutRequest(request_id, put.key, put.value, session_from_pb(put.session, num_dcs),
                               expires(put.ttl_ms, put.expire_at_ms))
    if kind == DELETE:
        delete = operation.delete
        return DELETE, DeleteRequest(request_id, delete.key, session_from_pb(delete.session, num_dcs))
    if kind == SCAN:
        return SCAN, scan_request(operation.scan, request_id, num_dcs)
    if kind == READ_TX:
        return READ_TX, read_tx_request(operation.read_tx, request_id, num_dcs)
    if kind == PUT_MANY:
        put_many = operation.put_many
        return PUT_MANY, PutManyRequest(request_id, tuple(put_many.keys[:]), tuple(put_many.values[:]),
                                        session_from_pb(put_many.session, num_dcs))
    if kind == INCR:
        return INCR, incr_request(operation.incr, request_id, num_dcs)
    if kind == EXPIRE:
        return EXPIRE, expire_request(operation.expire, request_id, num_dcs)
    return None


# ==================================================================== client replies


# ``scalar``: the server's protocol is scalar (module docstring).


def fill_get(target: pb.GetResponse, reply: GetReply, *, scalar: bool = False) -> None:
    if reply.value is not None:
        target.found = True
        target.value = reply.value
    fill_session(target.session, reply.session, scalar=scalar)


def fill_write(target: pb.PutResponse | pb.DeleteResponse, reply: WriteReply, *, scalar: bool = False) -> None:
    target.found = reply.found
    target.timestamp = reply.timestamp
    fill_session(target.session, reply.session, scalar=scalar)


def fill_swap(target: pb.SwapResponse, reply: SwapReply, *, scalar: bool = False) -> None:
    if reply.old_value is not None:
        target.found = True
        target.old_value = reply.old_value
    target.timestamp = reply.timestamp
    fill_session(target.session, reply.session, scalar=scalar)


def fill_incr(target: pb.IncrResponse, reply: IncrReply, *, scalar: bool = False) -> None:
    target.value = reply.value
    target.timestamp = reply.timestamp
    fill_session(target.session, reply.session, scalar=scalar)


def fill_expire(target: pb.ExpireResponse, reply: ExpireReply, *, scalar: bool = False) -> None:
    if reply.value is not None:
        target.found = True
        target.value = reply.value
    target.ttl_us = reply.ttl_us
    target.changed = reply.changed
    target.timestamp = reply.timestamp
    fill_session(target.session, reply.session, scalar=scalar)


def fill_scan(target: pb.ScanResponse, reply: ScanReply, *, scalar: bool = False) -> None:
    items = target.items
    for key, value in reply.items:
        item = items.add()
        item.key = key
        item.value = value
    fill_session(target.session, reply.session, scalar=scalar)
    if reply.resume is not None:
        target.resume = reply.resume
    if reply.snapshot is not None:
        target.snapshot.dc = reply.snapshot.dc
        if scalar:
            target.snapshot.time = min(reply.snapshot.vector)
        else:
            target.snapshot.vector.extend(reply.snapshot.vector)


def fill_read_tx(target: pb.ReadTxResponse, reply: ReadTxReply, *, scalar: bool = False) -> None:
    values = target.values
    for value in reply.values:
        slot = values.add()
        if value is not None:
            slot.found = True
            slot.value = value
    fill_session(target.session, reply.session, scalar=scalar)


# Pipeline results are kept as plain dicts and become protobuf in one call per batch
# (``pb.ResultBatch(results=[...])``, see ``okapikv.server.pipeline``): upb builds the nested
# messages from dicts faster than Python can fill them field by field with ``results.add()``.

#: Upper bound on the bytes a reply's result takes in a serialized ``ResultBatch`` beyond its
#: payload (values, keys, error text) and its session vector (``STABLE_ENTRY_BOUND`` per entry):
#: the element's tag and length prefix (6), the id (11), the oneof case's tag and length (6),
#: ``found`` (2), one length-prefixed bytes field's framing (6), a timestamp (11) and the session
#: (tag and length 6, ``stable``'s tag and length 6, ``dt`` 11). Every uint64 counts 10 bytes and
#: every length prefix 5 (lengths below 32 GiB).
RESULT_BOUND = 65
#: Per ``stable`` entry: 10 bytes of varint, plus a tag should an encoder not pack the field.
STABLE_ENTRY_BOUND = 11
#: Per SCAN item (its element's framing and those of its key and value) and per RO-TX value
#: (its element's framing, ``found``, the value's framing), beyond the bytes themselves.
SCAN_ITEM_BOUND = 18
#: A SCAN page's snapshot beyond its vector's entries: its tag and length (6), ``dc`` (6), the
#: vector's tag and length (6).
SCAN_SNAPSHOT_BOUND = 18
READ_TX_VALUE_BOUND = 14


def result_fields(operation_id: int, kind: str, reply: ClientReply) -> tuple[dict[str, object], int]:
    """One Pipeline ``Result`` as the dict ``pb.Result(**fields)`` takes (``id`` included), and an
    upper bound on the bytes it takes in a serialized ``ResultBatch`` (its framing counted at its
    widest, ``RESULT_BOUND``).

    The dict parses equal to the ``Result`` the ``fill_*`` functions build; ``kind`` tells PUT
    from DELETE, whose replies are the same ``WriteReply``, and a missing value leaves ``found``
    and ``value`` out (proto3 defaults), as ``fill_get`` does. The bound stands in for the exact
    ``ByteSize()``, which needs the message built first: what a Pipeline stream may hold unsent
    is limited in bytes only so that a client that never reads cannot pin unbounded memory, and a
    bound never below the true size does that as well. Both come from one type test (a second
    pass over the reply for the bound cost ~150 ns more per result); most frequent replies first."""
    if isinstance(reply, GetReply):
        value = reply.value
        session = reply.session
        stable = session.stable
        if value is None:
            return ({"id": operation_id, "get": {"session": {"stable": stable, "dt": session.dt}}},
                    RESULT_BOUND + STABLE_ENTRY_BOUND * len(stable))
        return ({"id": operation_id, "get": {"found": True, "value": value,
                                             "session": {"stable": stable, "dt": session.dt}}},
                RESULT_BOUND + STABLE_ENTRY_BOUND * len(stable) + len(value))
    if isinstance(reply, WriteReply):
        session = reply.session
        stable = session.stable
        return ({"id": operation_id, "put" if kind == PUT else "delete": {
                    "found": reply.found, "timestamp": reply.timestamp,
                    "session": {"stable": stable, "dt": session.dt}}},
                RESULT_BOUND + STABLE_ENTRY_BOUND * len(stable))
    if isinstance(reply, SwapReply):
        value = reply.old_value
        session = reply.session
        stable = session.stable
        if value is None:
            return ({"id": operation_id, "swap": {"timestamp": reply.timestamp,
                                                  "session": {"stable": stable, "dt": session.dt}}},
                    RESULT_BOUND + STABLE_ENTRY_BOUND * len(stable))
        return ({"id": operation_id, "swap": {"found": True, "old_value": value, "timestamp": reply.timestamp,
                                              "session": {"stable": stable, "dt": session.dt}}},
                RESULT_BOUND + STABLE_ENTRY_BOUND * len(stable) + len(value))
    if isinstance(reply, ErrorReply):
        return error_fields(operation_id, reply.code, reply.message)
    if isinstance(reply, PutManyReply):
        session = reply.session
        stable = session.stable
        return ({"id": operation_id, "put_many": {"count": reply.count, "timestamp": reply.timestamp,
                                                  "session": {"stable": stable, "dt": session.dt}}},
                RESULT_BOUND + STABLE_ENTRY_BOUND * len(stable))
    if isinstance(reply, IncrReply):
        session = reply.session
        stable = session.stable
        return ({"id": operation_id, "incr": {"value": reply.value, "timestamp": reply.timestamp,
                                              "session": {"stable": stable, "dt": session.dt}}},
                RESULT_BOUND + STABLE_ENTRY_BOUND * len(stable))
    if isinstance(reply, ExpireReply):
        session = reply.session
        stable = session.stable
        body: dict[str, object] = {"ttl_us": reply.ttl_us, "changed": reply.changed, "timestamp": reply.timestamp,
                                   "session": {"stable": stable, "dt": session.dt}}
        if reply.value is not None:
            body["found"], body["value"] = True, reply.value
        return ({"id": operation_id, "expire": body},
                RESULT_BOUND + 12 + STABLE_ENTRY_BOUND * len(stable) + len(reply.value or b""))
    if isinstance(reply, ScanReply):
        session = reply.session
        stable = session.stable
        scan: dict[str, object] = {"items": [{"key": key, "value": value} for key, value in reply.items],
                                   "session": {"stable": stable, "dt": session.dt}}
        bound = (RESULT_BOUND + STABLE_ENTRY_BOUND * len(stable)
                 + sum([SCAN_ITEM_BOUND + len(key) + len(value) for key, value in reply.items]))
        if reply.resume is not None:
            scan["resume"] = reply.resume
            bound += len(reply.resume)
        if reply.snapshot is not None:
            scan["snapshot"] = {"dc": reply.snapshot.dc, "vector": reply.snapshot.vector}
            bound += SCAN_SNAPSHOT_BOUND + STABLE_ENTRY_BOUND * len(reply.snapshot.vector)
        return {"id": operation_id, "scan": scan}, bound
    if isinstance(reply, ReadTxReply):
        session = reply.session
        stable = session.stable
        return ({"id": operation_id, "read_tx": {
                    "values": [{} if value is None else {"found": True, "value": value} for value in reply.values],
                    "session": {"stable": stable, "dt": session.dt}}},
                RESULT_BOUND + STABLE_ENTRY_BOUND * len(stable)
                + sum([READ_TX_VALUE_BOUND if value is None else READ_TX_VALUE_BOUND + len(value)
                       for value in reply.values]))
    raise TypeError(f"unexpected reply type {type(reply).__name__}")


def scalar_result_fields(operation_id: int, kind: str, reply: ClientReply) -> tuple[dict[str, object], int]:
    """``result_fields`` for a scalar protocol (module docstring): the session, and a SCAN page's
    snapshot, as one time. The bound is ``result_fields``'s: one ``time`` takes at most what one
    ``stable`` entry is counted for, and a vector has at least one."""
    fields, bound = result_fields(operation_id, kind, reply)
    for case, body in fields.items():
        if case == "id" or case == "error":
            continue
        assert isinstance(body, dict)
        session = body["session"]
        body["session"] = {"time": min(session["stable"]), "dt": session["dt"]}
        snapshot = body.get("snapshot")
        if snapshot is not None:
            body["snapshot"] = {"dc": snapshot["dc"], "time": min(snapshot["vector"])}
    return fields, bound


def error_fields(operation_id: int, code: str, message: str) -> tuple[dict[str, object], int]:
    """An error ``Result`` (``code``: a gRPC status name) and its size bound, as ``result_fields``
    gives them; UTF-8 takes at most 4 bytes a character."""
    return ({"id": operation_id, "error": {"code": code, "message": message}},
            RESULT_BOUND + 4 * (len(code) + len(message)))


def result_size_bound(reply: ClientReply) -> int:
    """The bound ``result_fields`` gives with the reply's result (for sizing, and tests)."""
    return result_fields(0, PUT, reply)[1]


# ==================================================================== peer messages: core -> bytes


def _fill_vector(target: pb.Vector, vector: Vector) -> None:
    target.SetInParent()
    target.entries.extend(vector)


def _fill_updates(target: pb.ReplicateBatch | pb.RepairBatch, updates: tuple[Update, ...]) -> None:
    target.SetInParent()
    slots = target.updates
    for update in updates:
        slot = slots.add()
        slot.key = update.key
        if update.value is None:
            slot.tombstone = True
        else:
            slot.value = update.value
        slot.timestamp = update.timestamp
        slot.source_dc = update.source_dc
        if update.dv is not None:
            slot.dv.entries.extend(update.dv)


def _fill_items(target: pb.SliceReply, items: tuple[ReadItem, ...]) -> None:
    slots = target.items
    for item in items:
        slot = slots.add()
        slot.key = item.key
        if item.value is not None:
            slot.found = True
            slot.value = item.value
        slot.timestamp = item.timestamp
        slot.source_dc = item.source_dc
        if item.dv is not None:
            slot.dv.entries.extend(item.dv)


def peer_message_to_pb(message: PeerMessage, *, scalar: bool = False) -> pb.PeerMessage:
    """The protobuf form; ``scalar``: slices carry their snapshot as one time (module docstring)."""
    result = pb.PeerMessage()
    if isinstance(message, ReplicateBatch):
        _fill_updates(result.replicate, message.updates)
        if message.gsv is not None:
            _fill_vector(result.replicate.gsv, message.gsv)
    elif isinstance(message, Heartbeat):
        result.heartbeat.SetInParent()
        result.heartbeat.timestamp = message.timestamp
        if message.gsv is not None:
            _fill_vector(result.heartbeat.gsv, message.gsv)
    elif isinstance(message, VvReport):
        _fill_vector(result.vv_report.vv, message.vv)
        _fill_vector(result.vv_report.floor, message.floor)
    elif isinstance(message, GsvBroadcast):
        broadcast = result.gsv_broadcast
        _fill_vector(broadcast.gsv, message.gsv)
        _fill_vector(broadcast.horizon, message.horizon)
        if message.usv is not None:
            broadcast.has_usv = True
            _fill_vector(broadcast.usv, message.usv)
    elif isinstance(message, StableTimeReport):
        report = result.stable_time_report
        report.SetInParent()
        report.time = message.time
        report.floor = message.floor
    elif isinstance(message, GstBroadcast):
        gst = result.gst_broadcast
        gst.SetInParent()
        gst.gst = message.gst
        gst.horizon = message.horizon
    elif isinstance(message, GsvExchange):
        _fill_vector(result.gsv_exchange.gsv, message.gsv)
    elif isinstance(message, SliceReply):
        reply = result.slice_reply
        reply.SetInParent()
        reply.tx_id = message.tx_id
        reply.too_old = message.too_old
        if message.last_key is not None:
            reply.last_key = message.last_key
        reply.clock_ahead_us = message.clock_ahead_us
        reply.waited_us = message.waited_us
        _fill_items(reply, message.items)
    elif isinstance(message, TxSlice):
        tx = result.tx_slice
        tx.SetInParent()
        tx.tx_id = message.tx_id
        if scalar:
            tx.snapshot_time = min(message.snapshot)
        else:
            _fill_vector(tx.snapshot, message.snapshot)
        tx.keys.extend(message.keys)
    elif isinstance(message, ScanSlice):
        scan = result.scan_slice
        scan.SetInParent()
        scan.tx_id = message.tx_id
        if scalar:
            scan.snapshot_time = min(message.snapshot)
        else:
            _fill_vector(scan.snapshot, message.snapshot)
        scan.start = message.start
        scan.end = message.end
        if message.limit is not None:
            scan.has_limit = True
            scan.limit = message.limit
    elif isinstance(message, CatchUpRequest):
        request = result.catch_up_request
        request.request_id = message.request_id
        request.after = message.after
        request.restarted = message.restarted
        request.repair = message.repair
    elif isinstance(message, CatchUpReply):
        reply_end = result.catch_up_reply
        reply_end.request_id = message.request_id
        reply_end.through = message.through
        reply_end.origin_through = message.origin_through
        if message.repair is not None:
            answer = reply_end.repair
            _fill_vector(answer.stable, message.repair.stable)
            _fill_vector(answer.horizon, message.repair.horizon)
            _fill_vector(answer.gsv, message.repair.gsv)
    elif isinstance(message, ReplicaProgress):
        _fill_vector(result.replica_progress.vv, message.vv)
    elif isinstance(message, Restarted):
        result.restarted.SetInParent()
    elif isinstance(message, RepairBatch):
        result.repair_batch.request_id = message.request_id
        _fill_updates(result.repair_batch, message.updates)
    elif isinstance(message, MembershipUpdate):
        update = result.membership_update
        update.SetInParent()
        update.epoch = message.epoch
        update.states.extend(message.states)
    elif isinstance(message, RelayRequest):
        relay = result.relay_request
        relay.SetInParent()
        relay.request_id, relay.dc, relay.after = message.request_id, message.dc, message.after
    elif isinstance(message, RelayReply):
        relay_end = result.relay_reply
        relay_end.SetInParent()
        relay_end.request_id, relay_end.dc, relay_end.through = message.request_id, message.dc, message.through
    else:
        raise TypeError(f"not a peer message: {type(message).__name__}")
    return result


def encode_peer_message(message: PeerMessage, *, scalar: bool = False) -> bytes:
    encoded: bytes = peer_message_to_pb(message, scalar=scalar).SerializeToString()
    return encoded


def encode_replicate_batch(message: ReplicateBatch, *, scalar: bool = False) -> tuple[bytes, int]:
    """A replication batch serialized as ``encode_peer_message`` does, and the bytes its updates
    take in it (each ``Update`` with its field tag and length; the rest is the batch's piggybacked
    GSV and framing): what the stream carries per update is measured from this, not assumed
    (``okapikv.server.wire_bytes``)."""
    result = peer_message_to_pb(message, scalar=scalar)
    encoded: bytes = result.SerializeToString()
    batch = result.replicate
    other = 0
    if batch.HasField("gsv"):
        size = batch.gsv.ByteSize()
        other = 1 + len(encode_varint(size)) + size
    updates_bytes: int = batch.ByteSize() - other
    return encoded, updates_bytes


def approximate_size(message: PeerMessage) -> int:
    """Bytes a message takes on the wire, roughly (enough to split batches below the limit)."""
    if isinstance(message, ReplicateBatch | RepairBatch):
        return 16 + sum(
            48 + len(u.key) + (len(u.value) if u.value is not None else 0)
            for u in message.updates
        )
    if isinstance(message, SliceReply):
        return 16 + len(message.last_key or b"") + sum(
            48 + len(i.key) + (len(i.value) if i.value is not None else 0)
            for i in message.items
        )
    if isinstance(message, TxSlice):
        return 64 + sum(len(key) + 2 for key in message.keys)
    return 96


# ==================================================================== PeerBatch framing


_MESSAGES_TAG = b"\x1a"  # PeerBatch.messages: field 3, length-delimited
_FIRST_SEQUENCE_TAG = b"\x28"  # PeerBatch.first_sequence: field 5, varint


def frame_peer_message(encoded: bytes) -> bytes:
    """One serialized PeerMessage as an element of ``PeerBatch.messages``."""
    return _MESSAGES_TAG + encode_varint(len(encoded)) + encoded


def batch_header(cluster_id: str, source: ServerId, incarnation: int) -> bytes:
    header: bytes = pb.PeerBatch(
        cluster_id=cluster_id,
        source=pb.ServerRef(dc=source.dc, partition=source.partition),
        incarnation=incarnation,
    ).SerializeToString()
    return header


def encode_batch(header: bytes, first_sequence: int, frames: list[bytes]) -> bytes:
    """A serialized ``PeerBatch``: the link's header, the first sequence number, the frames."""
    return b"".join((header, _FIRST_SEQUENCE_TAG, encode_varint(first_sequence), *frames))


# ==================================================================== peer messages: pb -> core


def _updates(updates: Any) -> tuple[Update, ...]:
    return tuple(
        Update(u.key, None if u.tombstone else u.value, u.timestamp, u.source_dc,
               tuple(u.dv.entries[:]) if u.HasField("dv") else None)
        for u in updates
    )


def _vector(message: pb.Vector) -> Vector:
    return tuple(message.entries[:])  # a slice copies in one upb call (see session_from_pb)


def _snapshot(slice_message: pb.TxSlice | pb.ScanSlice, num_dcs: int) -> Vector:
    if slice_message.HasField("snapshot"):
        return _vector(slice_message.snapshot)
    return (slice_message.snapshot_time,) * num_dcs


def peer_message_from_pb(message: pb.PeerMessage, source: ServerId, num_dcs: int) -> PeerMessage | None:
    """The core message; None for an empty oneof (a newer peer's message this build ignores).
    ``num_dcs`` expands a scalar snapshot (module docstring)."""
    kind = message.WhichOneof("message")
    if kind == "replicate":
        replicate = message.replicate
        updates = _updates(replicate.updates)
        return ReplicateBatch(source, updates, _vector(replicate.gsv) if replicate.HasField("gsv") else None)
    if kind == "heartbeat":
        heartbeat = message.heartbeat
        return Heartbeat(source, heartbeat.timestamp, _vector(heartbeat.gsv) if heartbeat.HasField("gsv") else None)
    if kind == "vv_report":
        report = message.vv_report
        return VvReport(source, _vector(report.vv), _vector(report.floor))
    if kind == "gsv_broadcast":
        broadcast = message.gsv_broadcast
        usv = _vector(broadcast.usv) if broadcast.has_usv else None
        return GsvBroadcast(source, _vector(broadcast.gsv), usv, _vector(broadcast.horizon))
    if kind == "stable_time_report":
        report = message.stable_time_report
        return StableTimeReport(source, report.time, report.floor)
    if kind == "gst_broadcast":
        gst = message.gst_broadcast
        return GstBroadcast(source, gst.gst, gst.horizon)
    if kind == "gsv_exchange":
        return GsvExchange(source, _vector(message.gsv_exchange.gsv))
    if kind == "slice_reply":
        reply = message.slice_reply
        items = tuple(
            ReadItem(
                i.key,
                i.value if i.found else None,
                i.timestamp,
                i.source_dc,
                tuple(i.dv.entries[:]) if i.HasField("dv") else None,
            )
            for i in reply.items
        )
        return SliceReply(source, reply.tx_id, items, reply.too_old, reply.last_key or None, reply.clock_ahead_us,
                          reply.waited_us)
    if kind == "tx_slice":
        tx = message.tx_slice
        return TxSlice(source, tx.tx_id, _snapshot(tx, num_dcs), tuple(tx.keys[:]))
    if kind == "scan_slice":
        scan = message.scan_slice
        limit = scan.limit if scan.has_limit else None
        return ScanSlice(source, scan.tx_id, _snapshot(scan, num_dcs), scan.start, scan.end, limit)
    if kind == "catch_up_request":
        request = message.catch_up_request
        return CatchUpRequest(source, request.request_id, request.after, request.restarted, request.repair)
    if kind == "repair_batch":
        return RepairBatch(source, message.repair_batch.request_id, _updates(message.repair_batch.updates))
    if kind == "catch_up_reply":
        reply_end = message.catch_up_reply
        answer = None
        if reply_end.HasField("repair"):
            repair = reply_end.repair
            answer = RepairAnswer(_vector(repair.stable), _vector(repair.horizon), _vector(repair.gsv))
        return CatchUpReply(source, reply_end.request_id, reply_end.through, reply_end.origin_through, answer)
    if kind == "replica_progress":
        return ReplicaProgress(source, _vector(message.replica_progress.vv))
    if kind == "restarted":
        return Restarted(source)
    if kind == "membership_update":
        return MembershipUpdate(source, message.membership_update.epoch, tuple(message.membership_update.states))
    if kind == "relay_request":
        relay = message.relay_request
        return RelayRequest(source, relay.request_id, relay.dc, relay.after)
    if kind == "relay_reply":
        relay_end = message.relay_reply
        return RelayReply(source, relay_end.request_id, relay_end.dc, relay_end.through)
    return None
