"""Every message and effect the core exchanges, as frozen structs (``message``; no dict-typed messages).

Three families:
- client requests and replies (GET, PUT, SWAP, DELETE, INCR, SCAN, RO-TX), each request carrying the
  client's causal ``Session`` and each reply a ``Session`` the client merges (section 3.2);
- peer messages between partition servers: replication batches and heartbeats between replicas of
  a partition in different DCs, stabilization rounds (VV report -> GSV broadcast inside a DC, or
  GentleRain's scalar stable-time report -> GST broadcast; GSV exchange between DCs for the USV),
  RO-TX / SCAN slices inside a DC, and a restarted partition's announcement to the others of its DC;
- effects returned by the state machine: ``Send`` a peer message, ``Respond`` to a client.

``request_id`` values are chosen by the driver and only echoed back, so the core never needs to
know about connections or streams.

Invariants the drivers rely on: messages are frozen (safe to share between servers and to log in a
history); the effects of one call are returned in the order they must be carried out, and every
link between two servers is FIFO, so the updates of a ``ReplicateBatch`` arrive in timestamp order
and a ``Heartbeat`` never overtakes an update at or below its timestamp (Okapi section 3.2:
``VV[i]`` covers every update from DC i up to it).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple, TypeVar, cast, dataclass_transform

import msgspec

from okapikv.core.vectors import Vector

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def message(cls: type[T]) -> type[T]:
    """The class as a frozen ``msgspec.Struct`` (fields, defaults and docstring as declared).

    Why not ``@dataclass(frozen=True, slots=True)``: a frozen dataclass's ``__init__`` sets each
    field from Python, each slot's setter called in turn (~520 ns for the two fields of a
    ``Session`` on this project's VM), and a server builds about five messages per client
    operation (request, session, reply, session, ``Respond``); a struct is built in C (~40 ns).
    Structs are not tracked by the cycle collector (``gc=False``): a message holds numbers, bytes,
    strings, tuples and other messages, never a container that could point back at it
    (docs/benchmarks.md, "The server's Python path"). Instances stay frozen (assigning an
    attribute raises ``AttributeError``), comparable, hashable, printable and picklable;
    ``replace``, ``field_types`` and ``is_message`` stand for ``dataclasses.replace``,
    ``dataclasses.fields`` and ``dataclasses.is_dataclass``.
    """
    namespace: dict[str, Any] = {
        name: value for name, value in vars(cls).items() if name not in ("__dict__", "__weakref__")}
    kind = type(cls.__name__, (msgspec.Struct,), namespace, frozen=True, gc=False)
    return cast("type[T]", kind)


def replace(message: T, **changes: Any) -> T:
    """``message`` with ``changes`` (a new message: messages are frozen)."""
    return cast(T, msgspec.structs.replace(cast(msgspec.Struct, message), **changes))


def is_message(value: object) -> bool:
    """Whether ``value`` is a message instance (made by ``message``)."""
    return isinstance(value, msgspec.Struct)


def field_types(kind: type) -> tuple[tuple[str, str], ...]:
    """A message class's fields in order, each with its declared type as written."""
    annotations = kind.__annotations__
    names: tuple[str, ...] = getattr(kind, "__struct_fields__")  # noqa: B009 (typed as plain ``type``)
    return tuple((name, str(annotations[name])) for name in names)


class ServerId(NamedTuple):
    dc: int
    partition: int


@message
class Session:
    """Causal metadata of a client session (Okapi: USV_c and dt_c).

    ``stable`` holds values known to be stable (universally stable in Okapi, stable in the DC for
    Cure, the GST repeated for GentleRain); ``dt`` is the highest timestamp of a local item the
    client depends on. Replies carry a ``Session`` the client merges entry-wise with max.
    """

    stable: Vector
    dt: int


# ---------------------------------------------------------------- client requests


@message
class GetRequest:
    request_id: int
    key: bytes
    session: Session


@message
class PutRequest:
    """``expires``: 0 none, positive an absolute expiry, negative a time to live
    (``okapikv.core.expiry.resolve``)."""

    request_id: int
    key: bytes
    value: bytes
    session: Session
    expires: int = 0


@message
class PutManyRequest:
    """A bulk load's batch: ``keys[i]`` gets ``values[i]``, each pair a PUT of ``session``.

    The pairs are concurrent writes of one session (none depends on another), so they share one
    admission and one reply (``PutManyReply``). Every pair is checked before any is written: a bad
    key or value refuses the whole request and changes nothing (docs/protocol.md, "Bulk PUT")."""

    request_id: int
    keys: tuple[bytes, ...]
    values: tuple[bytes, ...]
    session: Session


@message
class SwapRequest:
    request_id: int
    key: bytes
    value: bytes
    session: Session


@message
class DeleteRequest:
    request_id: int
    key: bytes
    session: Session


@message
class IncrRequest:
    """Add ``by`` (negative: subtract) to the counter at ``key`` (``okapikv.core.counters``)."""

    request_id: int
    key: bytes
    by: int
    session: Session


@message
class ExpireRequest:
    """Read ``key``'s value and time to live and, unless ``expires`` is None, write its value again
    with that expiry (``okapikv.core.expiry.resolve``; 0: none, PERSIST). A counter's expiry is part
    of its state (``okapikv.core.counters.set_expiry``)."""

    request_id: int
    key: bytes
    expires: int | None
    session: Session


@message
class ReadTxRequest:
    """Read-only transaction over a key set: one causally consistent snapshot (section 3.2)."""

    request_id: int
    keys: tuple[bytes, ...]
    session: Session


@message
class SnapshotRef:
    """The snapshot a paged SCAN reads, as its first page's reply hands it out: the vector and the
    DC whose servers chose it (a snapshot is only valid in its own DC)."""

    dc: int
    vector: Vector


@message
class ScanRequest:
    """Inclusive range read ``start <= key <= end`` over every partition, as one snapshot.

    A reply holds at most ``CoreConfig.max_scan_items`` pairs (and about ``max_scan_bytes``); one
    that stopped early names where the rest starts (``ScanReply.resume``) and the snapshot it read,
    and the request for the next page sends both back (``start`` = the resume key, ``snapshot``),
    so every page reads the first page's snapshot."""

    request_id: int
    start: bytes
    end: bytes
    limit: int | None
    session: Session
    snapshot: SnapshotRef | None = None


ClientRequest = (
    GetRequest | PutRequest | PutManyRequest | SwapRequest | DeleteRequest | IncrRequest | ExpireRequest
    | ReadTxRequest | ScanRequest
)


# ---------------------------------------------------------------- client replies


@message
class GetReply:
    request_id: int
    value: bytes | None
    session: Session


@message
class WriteReply:
    """Reply to PUT and DELETE: whether a visible, non-deleted value existed before."""

    request_id: int
    found: bool
    timestamp: int
    session: Session


@message
class PutManyReply:
    """Reply to ``PutManyRequest``: ``count`` pairs written; ``timestamp`` is the newest write's
    and ``session`` what the client merges (the newest write's dependency time, and the remote
    dependencies of every version the writes overwrote)."""

    request_id: int
    count: int
    timestamp: int
    session: Session


@message
class SwapReply:
    request_id: int
    old_value: bytes | None
    timestamp: int
    session: Session


@message
class IncrReply:
    """The counter's value the session sees after its increment (its own included)."""

    request_id: int
    value: int
    timestamp: int
    session: Session


@message
class ExpireReply:
    """``value``: the key's value (None: absent); ``ttl_us``: its time to live after the request
    (-2 absent, -1 none, as Redis's TTL); ``changed``: a new version was written, at ``timestamp``."""

    request_id: int
    value: bytes | None
    ttl_us: int
    changed: bool
    timestamp: int
    session: Session


@message
class ReadTxReply:
    request_id: int
    values: tuple[bytes | None, ...]
    session: Session


@message
class ScanReply:
    """One page of a SCAN. ``resume``: None when the range (or the request's limit) is done; else
    the first key of what is left (the key after the last one returned, or after the last one the
    page examined), to be read at ``snapshot``."""

    request_id: int
    items: tuple[tuple[bytes, bytes], ...]
    session: Session
    resume: bytes | None = None
    snapshot: SnapshotRef | None = None


#: How the message of a snapshot read refused for the server's load begins (RESOURCE_EXHAUSTED):
#: clients retry those with backoff (``okapikv.client.retry``).
OVERLOADED = "overloaded: "


class ErrorCode(StrEnum):
    """Why a request failed: a gRPC status name (the value is the name, as it travels in the
    Pipeline stream's ``Error.code``; ``okapikv.wire.status`` maps each to its gRPC status code).
    The core refuses with the first five; the drivers with any (a full disk, a misrouted key, ...)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"  # malformed or over a limit: retrying cannot help
    OUT_OF_RANGE = "OUT_OF_RANGE"  # a timestamp beyond the maximum clock offset
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"  # over a limit on load (with OVERLOADED: retry later) or space
    ABORTED = "ABORTED"  # a snapshot read's snapshot fell below the GC horizon: start over
    UNAVAILABLE = "UNAVAILABLE"  # repairing, shutting down, or a snapshot read timed out: retry
    FAILED_PRECONDITION = "FAILED_PRECONDITION"  # a single-key request reached a partition not holding the key
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"  # a connection's input did not arrive in time
    INTERNAL = "INTERNAL"  # the server failed on the request


@message
class ErrorReply:
    """The request was refused and changed nothing."""

    request_id: int
    code: ErrorCode
    message: str


ClientReply = (
    GetReply | WriteReply | PutManyReply | SwapReply | IncrReply | ExpireReply | ReadTxReply | ScanReply | ErrorReply
)


# ---------------------------------------------------------------- replication (between DCs)


@message
class Update:
    """A replicated version. ``dv`` travels only for protocols that need it (Cure)."""

    key: bytes
    value: bytes | None  # None is a tombstone (DELETE)
    timestamp: int
    source_dc: int
    dv: Vector | None


@message
class ReplicateBatch:
    """Updates from one replica to another, in timestamp order over a FIFO link. ``gsv``: the
    sender DC's GSV, when it changed since the replicas last got it (Okapi's USV round rides on
    the replication stream; see ``okapikv.core.stabilization.UsvOnStream``)."""

    source: ServerId
    updates: tuple[Update, ...]
    gsv: Vector | None = None


@message
class Heartbeat:
    """'I will never create a version at or below ``timestamp``' (sent after 1 ms without updates);
    ``gsv`` as in ``ReplicateBatch``."""

    source: ServerId
    timestamp: int
    gsv: Vector | None = None


# ---------------------------------------------------------------- catch-up after a restart


@message
class CatchUpRequest:
    """'Send me every update of your DC above ``after``': sent by a server that restarted (``after``
    is its recovered ``vv`` entry for the destination's DC) and by a server that learns, from such a
    request, that a replica restarted (whatever that replica had queued for it is gone).
    ``restarted`` tells which: only a restarted sender is asked back (else the two would ask each
    other forever).

    Until the answer to its latest request arrives, the requester does not advance ``vv`` from that
    replica's live stream: a heartbeat of the new incarnation would otherwise cover updates the old
    one never delivered, declaring a gap stable.

    ``repair``: the sender lost or damaged its data and rebuilds it (``PartitionServer``'s repair):
    'send me every version you hold, of every DC, mine included' (``after`` is then unused), and
    the reply carries a ``RepairAnswer``.
    """

    source: ServerId
    request_id: int
    after: int
    restarted: bool
    repair: bool = False


@message
class RepairBatch:
    """Part of the answer to a repair request (``CatchUpRequest.repair``): versions of any DC the
    sender holds. Its own type, not a ``ReplicateBatch``: the requester ignores the sender's
    replication stream until the answer ends, because that stream may still carry, resent from
    before the requester lost its data, versions the sender has since collected (superseded, or
    older than a tombstone every replica dropped); the answer is the sender's store as it is."""

    source: ServerId
    request_id: int
    updates: tuple[Update, ...]


@message
class RepairAnswer:
    """What a replica tells a server it sent everything to (a repair): its ``stable``, ``horizon``
    and ``gsv`` at the answer (the repaired server serves only once its own stable vector reaches
    them: the versions the replica collected were superseded by versions visible there)."""

    stable: Vector
    horizon: Vector
    gsv: Vector


@message
class CatchUpReply:
    """End of a catch-up answer. The ``ReplicateBatch`` messages before it on the same FIFO link hold
    every update of the sender's DC above the request's ``after`` that the sender still keeps (GC
    only drops versions every replica durably has); ``through`` is the sender's clock: no update of
    its DC at or below it is missing any more.

    ``origin_through`` is the sender's ``vv`` entry for the requester's DC: every timestamp of that
    DC it holds (updates, heartbeat promises) is at or below it, so the requester's clock must be
    above it before it issues one (a server that lost its clock bound with its disk would otherwise
    reissue timestamps, which the replica would take for duplicates and drop)."""

    source: ServerId
    request_id: int
    through: int
    origin_through: int = 0
    repair: RepairAnswer | None = None


@message
class ReplicaProgress:
    """The sender's version vector, sent to its replicas now and then by protocols without a USV.

    Entry ``m`` tells the replica in DC m how far the sender has (durably) received its updates, so
    that replica may drop versions every DC has (its catch-up log); Okapi reads the same fact from
    the USV's local entry and never sends this."""

    source: ServerId
    vv: Vector


# ---------------------------------------------------------------- stabilization


@message
class VvReport:
    """A partition's version vector, sent to its DC's aggregator (partition 0) every period.

    ``floor`` is the partition's lower bound for any snapshot it will coordinate from now on; the
    aggregator's minimum of the floors is the garbage-collection horizon.
    """

    source: ServerId
    vv: Vector
    floor: Vector


@message
class GsvBroadcast:
    """The DC's Global Stable Vector (and, when piggybacked, the USV) from the aggregator."""

    source: ServerId
    gsv: Vector
    usv: Vector | None
    horizon: Vector


@message
class StableTimeReport:
    """GentleRain's report to its DC's aggregator: one local stable time (the minimum of the
    partition's ``vv`` entries) and its snapshot floor as one time, where Okapi and Cure send the
    vectors (docs/protocol.md, "GentleRain": GentleRain's stabilization is scalar)."""

    source: ServerId
    time: int
    floor: int


@message
class GstBroadcast:
    """GentleRain's aggregator to its DC: the GST (the minimum of the partitions' local stable
    times) and the GC horizon (the minimum of their floors), one time each."""

    source: ServerId
    gst: int
    horizon: int


@message
class GsvExchange:
    """A DC's GSV sent to the other DCs so each can compute the Universal Stable Vector: between
    aggregators with ``piggyback_usv`` (otherwise the GSV rides on replication batches and heartbeats)."""

    source: ServerId
    gsv: Vector


# ---------------------------------------------------------------- snapshot reads inside a DC


@message
class ReadItem:
    """A version returned by a snapshot read slice, with what the client must depend on."""

    key: bytes
    value: bytes | None
    timestamp: int
    source_dc: int
    dv: Vector | None


@message
class TxSlice:
    source: ServerId
    tx_id: int
    snapshot: Vector
    keys: tuple[bytes, ...]


@message
class ScanSlice:
    source: ServerId
    tx_id: int
    snapshot: Vector
    start: bytes
    end: bytes
    limit: int | None


@message
class SliceReply:
    """Answer to a TxSlice or ScanSlice. ``too_old`` means the slice's snapshot is below this
    partition's garbage-collection horizon: the coordinator retries with a fresh snapshot.
    ``last_key`` (scan slices): the slice stopped at its item, byte or examination budget, and
    this is the last key it examined: the partition's keys above it are not covered.
    ``clock_ahead_us`` (not 0) means the partition refused the slice: the snapshot reaches that far
    ahead of its clock, beyond the maximum clock offset (serving it would raise its HLC there, or
    wait that long); the coordinator fails the read with the clock-offset error.
    ``waited_us``: how long the slice was parked at the partition before it was served (Cure's
    clock wait, 0 for a slice served at once): the coordinator takes the maximum over a read's
    slices as the transaction's stall (the paper's Figure 4c/d, ``SnapshotReads``)."""

    source: ServerId
    tx_id: int
    items: tuple[ReadItem, ...]
    too_old: bool = False
    last_key: bytes | None = None
    clock_ahead_us: int = 0
    waited_us: int = 0


@message
class Restarted:
    """'I am a new incarnation': sent by a restarted partition to the other partitions of its DC
    (``PartitionServer.start_catch_up``). Whatever it owed them died with the old one (a slice it
    had taken, parked, or answered into a link queue that was lost), so a coordinator re-sends
    the slices it still waits for from it at once instead of waiting out a deadline."""

    source: ServerId


# ---------------------------------------------------------------- membership (``okapikv.core.membership``)


@message
class MembershipUpdate:
    """'The cluster's membership is now this': an epoch and each DC's state ("member",
    "removed"). Flooded to the sender's DC and replicas; a server adopts it when it is ordered
    after its own and passes it on once."""

    source: ServerId
    epoch: int
    states: tuple[str, ...]


@message
class RelayRequest:
    """'Send me every update of the removed DC ``dc`` above ``after`` you hold': a survivor asks
    each other survivor for what the removed DC sent to some and not others."""

    source: ServerId
    request_id: int
    dc: int
    after: int


@message
class RelayReply:
    """End of a relay answer: the ``ReplicateBatch`` messages before it on the FIFO link hold the
    removed DC's updates above the request's ``after`` that the sender keeps; ``through`` is the
    sender's ``vv`` entry for that DC."""

    source: ServerId
    request_id: int
    dc: int
    through: int


PeerMessage = (
    ReplicateBatch
    | Heartbeat
    | VvReport
    | GsvBroadcast
    | StableTimeReport
    | GstBroadcast
    | GsvExchange
    | TxSlice
    | ScanSlice
    | SliceReply
    | Restarted
    | CatchUpRequest
    | CatchUpReply
    | RepairBatch
    | ReplicaProgress
    | MembershipUpdate
    | RelayRequest
    | RelayReply
)
Message = ClientRequest | PeerMessage


# ---------------------------------------------------------------- effects


@message
class Send:
    destination: ServerId
    message: PeerMessage


@message
class Respond:
    reply: ClientReply


Effect = Send | Respond
