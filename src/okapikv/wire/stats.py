"""What a partition server reports about itself: one typed snapshot, and its JSON form.

``NodeSnapshot`` is a tree of frozen dataclasses: who the server is, its clocks, the stable
vectors and their lag, the requests in flight, the versions it stores and collected, the core's
counters (operations, waits, replication and stabilization traffic), the driver's counters
(connections of each port, admission waits), the input budget, every outgoing peer link (the
replication queue) and the storage. The server builds it (``PartitionNode.snapshot``) and three
readers render it:

- the Stats RPC sends ``to_json`` (``StatsResponse.json``), which tests, bench and fuzz read by key;
- the Prometheus collector (``okapikv.server.metrics``) exports every field declared with
  ``counter`` or ``gauge``, and the labelled families (per operation type, wait reason, link);
- `okapi status` (``okapikv.cluster.status``) reads the JSON back (``from_json``) and shows a
  selection.

So a new figure is one field: its name is its JSON key, and annotated with ``counter(help)`` or
``gauge(help)`` (``Annotated[int, counter(...)]``) it is exported as ``okapi_<name>`` (or the name
given). The JSON has the shape its readers index: a group annotated ``FLAT`` puts its fields into
its parent's object (the document's top level holds ``vv``, ``stable``, ``keys``... directly), a
field annotated ``EXPORTER_ONLY`` stays out of it (a histogram's buckets), and one annotated
``OPTIONAL`` is left out while it is None.
Reading is lenient: a key the server did not send reads as zero, empty or None, so `okapi status`
can show a server of another version.

This module is in ``wire`` because both sides read it: the server, and `okapi status`, a client of
the servers that does not import them.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple, TypeVar

Figures = TypeVar("Figures")


class MetricSpec(NamedTuple):
    """How the exporter shows a field: ``kind`` (``counter`` or ``gauge``), the metric's name and
    help, and ``convert`` from the field's value to the exported one (units)."""

    kind: str
    name: str
    help: str
    convert: Callable[[float], float] | None


def counter(help: str, name: str = "", *, convert: Callable[[float], float] | None = None) -> MetricSpec:
    """Export the field as a counter (``okapi_<field>_total`` unless ``name`` is given)."""
    return MetricSpec("counter", name, help, convert)


def gauge(help: str, name: str = "", *, convert: Callable[[float], float] | None = None) -> MetricSpec:
    """Export the field as a gauge (``okapi_<field>`` unless ``name`` is given)."""
    return MetricSpec("gauge", name, help, convert)


class _Marker(NamedTuple):
    name: str


#: A group whose fields go into its parent's JSON object.
FLAT = _Marker("flat")
#: A field left out of the JSON while it is None.
OPTIONAL = _Marker("optional")
#: A field the exporter uses and the JSON leaves out.
EXPORTER_ONLY = _Marker("exporter only")


def microseconds_as_seconds(value: float) -> float:
    return value / 1e6


def ahead_as_seconds(value: float) -> float:
    """How far ahead, in seconds, 0 when behind."""
    return max(0.0, value) / 1e6


# ================================================================ the tree


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    cluster_id: str
    protocol: str
    dc: str
    dc_index: int
    partition: int
    address: str
    pid: int = 0  # the server's process id (`okapi status`, restarting one by hand)


@dataclass(frozen=True, slots=True)
class ClockFigures:
    """The clocks (docs/operations.md, "Clocks: the maximum offset"). ``clock_us``: this server's
    clock (microseconds since the cluster epoch, skew included); ``hlc``: its hybrid clock, the
    last timestamp it issued (packed, ``okapikv.core.timestamps``)."""

    clock_us: int
    clock_unix_us: int
    clock_skew_us: int
    hlc: int
    hlc_ahead_us: Annotated[int, gauge(
        "How far this server's hybrid clock (its last timestamp) is ahead of its physical clock (0 when not ahead); "
        "above the maximum offset its writes are held back elsewhere.", "okapi_hlc_ahead_seconds",
        convert=ahead_as_seconds)]
    max_clock_offset_us: Annotated[int, gauge("The cluster's configured maximum clock offset.",
                                              "okapi_max_clock_offset_seconds", convert=microseconds_as_seconds)]
    clock_ahead_at_start_us: Annotated[int, gauge(
        "How far the recovered clock bound was ahead of the clock when this server started (a clock stepped back "
        "since the last run).", "okapi_clock_ahead_at_start_seconds", convert=microseconds_as_seconds)]


@dataclass(frozen=True, slots=True)
class StabilizationFigures:
    """The version vector, the stable vector (USV for Okapi, GSV for Cure, GST for GentleRain), the
    GSV and the GC horizon (docs/protocol.md, "Stabilization", "Garbage collection"); the stable
    vector's lag behind the clock per DC (None: nothing known from that DC yet) and its samples
    (``okapikv.server.instruments.LagSamples``); catch-up and repair (docs/protocol.md, "Catch-up
    and repair"), DCs by name."""

    vv: tuple[int, ...]
    stable: tuple[int, ...]
    gsv: tuple[int, ...]
    horizon: tuple[int, ...]
    stable_lag_ms: tuple[float | None, ...]
    stable_lag_samples: tuple[Mapping[str, int], ...]
    catching_up: tuple[str, ...]
    repairing: str | None
    repair_waiting: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MembershipFigures:
    """The server's membership (docs/protocol.md, "Membership"): its epoch, each DC's state in
    DC order ("member", "removed"), and the DCs its stable vectors' minima count, by name."""

    membership_epoch: Annotated[int, gauge("The membership epoch this server holds.")]
    dc_states: tuple[str, ...]
    counted_dcs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RequestFigures:
    parked: Annotated[int, gauge("Requests waiting for the clock or the stable vector.", "okapi_parked_requests")]
    pending_reads: Annotated[int, gauge("RO-TX and SCAN reads this server coordinates, not answered yet.")]
    snapshot_leases: Annotated[int, gauge("Paged SCANs' snapshots held for their next page.")]


@dataclass(frozen=True, slots=True)
class StoreFigures:
    keys: Annotated[int, gauge("Keys with at least one version.")]
    versions: Annotated[int, gauge("Versions held by the multi-version store.", "okapi_versions_stored")]
    versions_collected: Annotated[int, counter("Versions removed by garbage collection.")]


@dataclass(frozen=True, slots=True)
class WaitFigures:
    count: int
    total_us: int
    max_us: int
    mean_us: float


@dataclass(frozen=True, slots=True)
class CoreFigures:
    """The core's counters (``okapikv.core.stats``): operations by type, waits by reason, and
    every other counter by its name (``counters``, flat in the JSON)."""

    operations: Mapping[str, int]
    waits: Mapping[str, WaitFigures]
    counters: Annotated[Mapping[str, int], FLAT]


@dataclass(frozen=True, slots=True)
class LatencyFigures:
    """One operation type's latency, end to end through the driver (``instruments.LatencyHistograms``):
    p50 and p99 are bucket bounds (None past the last one)."""

    count: int
    mean_ms: float | None
    p50_ms: float | None
    p99_ms: float | None
    buckets: Annotated[tuple[tuple[str, float], ...], EXPORTER_ONLY] = ()  # cumulative (le, count), to +Inf
    total_s: Annotated[float, EXPORTER_ONLY] = 0.0


@dataclass(frozen=True, slots=True)
class DriverFigures:
    """The driver's own counters, each the attribute of the same name of the node's host
    (``okapikv.core.host.Host``), peer encoder or the node itself."""

    client_requests: Annotated[int, counter("Client requests received by the driver.")]
    pipeline_batches: Annotated[int, counter(
        "Pipeline and native-port operation batches handed to the core (the frames of one read of a version 2 "
        "native connection are one).")]
    waiting_replies: Annotated[int, gauge("Requests handed to the core whose reply has not been delivered.")]
    peer_batches_received: Annotated[int, counter("Peer batches received.")]
    peer_messages_received: Annotated[int, counter("Peer messages received and handed to the core.")]
    handler_errors: Annotated[int, counter("Unexpected failures in handlers (see the log).")]
    event_loop_stalls: Annotated[int, counter(
        "Times the event loop was held longer than the watchdog's threshold (see the log for the site).")]
    event_loop_stall_seconds: Annotated[float, counter("Seconds the event loop was held in those stalls.")]
    oversized_dropped: Annotated[int, counter("Peer messages dropped for exceeding the message-size limit.")]
    native_port: int
    native_connections: Annotated[int, counter("Connections accepted on the native port.")]
    native_refused: Annotated[int, counter("Native-port connections closed for breaking the framing.")]
    resp_port: int
    resp_connections: Annotated[int, counter("Connections accepted on the RESP port.")]
    resp_refused: Annotated[int, counter("RESP connections closed for breaking the protocol or a bound.")]
    admission_waits: Annotated[int, counter(
        "Client batches that waited for replication to catch up (admission control).")]
    #: a durable server's GET replies that left before effects held for a group, and those held
    #: for a group because their key had a version in flight (``okapikv.core.host``)
    get_replies_early: int = 0
    get_replies_held: int = 0
    #: CPython's cyclic collector in the server's process: passes and the seconds they held it
    #: (``okapikv.server.collector_clock``)
    collector_passes: Annotated[int, counter("Passes of the process's cyclic garbage collector.")] = 0
    collector_seconds: Annotated[float, counter("Seconds the process's cyclic garbage collector ran.")] = 0.0


@dataclass(frozen=True, slots=True)
class WireFigures:
    """Bytes handed to the peer links by kind, each destination counted (``okapikv.server.wire_bytes``):
    replication frames, their updates, the keys and values in them and the bytes of their
    ``Update`` messages; heartbeats; stabilization; snapshot-read slices; recovery."""

    replication_wire_bytes: Annotated[int, counter("Bytes of replication frames sent to peers.")]
    replication_wire_updates: Annotated[int, counter("Updates in the replication frames sent to peers.")]
    replication_wire_payload_bytes: Annotated[int, counter("Key and value bytes of the updates sent to peers.")]
    replication_wire_update_bytes: Annotated[int, counter(
        "Bytes of the Update messages in replication frames (the rest: the batch's GSV and framing).")]
    heartbeat_wire_bytes: Annotated[int, counter("Bytes of heartbeat frames sent to peers.")]
    stabilization_wire_bytes: Annotated[int, counter("Bytes of stabilization frames sent to peers.")]
    read_wire_bytes: Annotated[int, counter("Bytes of snapshot-read slices and replies sent to peers.")]
    recovery_wire_bytes: Annotated[int, counter("Bytes of catch-up, repair and progress frames sent to peers.")]


@dataclass(frozen=True, slots=True)
class InputFigures:
    """The input guard (``okapikv.server.budgets``)."""

    connections: Annotated[int, gauge("Open connections on the native port.", "okapi_input_connections")]
    partial_bytes: Annotated[int, gauge("Bytes announced by partially received frames, all connections (the input "
                                        "budget's use).", "okapi_input_partial_bytes")]
    partial_bytes_peak: Annotated[int, gauge("The most bytes partial frames held at once.",
                                             "okapi_input_partial_bytes_peak")]
    budget_bytes: Annotated[int, gauge("The input budget: most bytes partial frames may hold.",
                                       "okapi_input_budget_bytes")]
    closed: Mapping[str, int]  # reason -> connections closed


@dataclass(frozen=True, slots=True)
class LinkFigures:
    """One outgoing peer link (``okapikv.server.links.OutgoingLink``): its replication queue
    (``queued``: not sent yet, WAN delay included; ``unacked``: sent, not acknowledged) and traffic."""

    address: str
    delay_ms: float
    connected: bool
    queued: int
    unacked: int
    queued_bytes: int
    unacked_bytes: int
    sent_messages: int
    sent_batches: int
    resent_messages: int
    connects: int
    failures: int
    probes: int
    dead: int
    peer_dc: Annotated[str, EXPORTER_ONLY] = ""
    peer_partition: Annotated[int, EXPORTER_ONLY] = 0


@dataclass(frozen=True, slots=True)
class RecoveredFigures:
    """What the data directory held at start; the repair fields only when it was repaired."""

    versions: int
    keys: int
    clock_bound_us: int
    repair: Annotated[str | None, OPTIONAL] = None
    salvaged_local: Annotated[int | None, OPTIONAL] = None
    moved_aside: Annotated[tuple[str, ...] | None, OPTIONAL] = None


@dataclass(frozen=True, slots=True)
class StorageFigures:
    """The group committer (``okapikv.storage.group_commit.GroupCommitter.stats``), the effect
    groups waiting to be durable, and the recovery at start."""

    path: str
    disk_bytes: int
    groups_written: int
    versions_written: Annotated[int, counter("Versions written by commit groups.", "okapi_storage_versions_written")]
    versions_deleted: int
    mean_commit_ms: float
    max_commit_ms: float
    durable_group: int
    required_group: int
    clock_bound_us: int
    bound_waits: int
    checkpoints: int
    #: closed log segments still to fold into the checkpoint (``LoggedStore.checkpoint_backlog``)
    checkpoint_backlog: int
    disk_full: Annotated[bool, gauge("1 while less than the reserve is free: writes are refused.",
                                     "okapi_storage_disk_full", convert=float)]
    full_commits: int
    vacuumed_pages: int
    #: one per commit group (a WAL fsync each; ``okapikv.storage.commit_rates``), as counters a
    #: dashboard divides (rate(commit_seconds) / rate(fsyncs) is the mean commit latency), and the
    #: data directory's file system:
    fsyncs: Annotated[int, counter("Commit groups written, one WAL fsync each.", "okapi_storage_fsyncs")]
    commit_seconds: Annotated[float, counter("Time spent writing commit groups (transaction and WAL fsync).",
                                             "okapi_storage_commit_seconds")]
    #: from each group's append returning on the storage worker to the event loop releasing its
    #: effects (over fsyncs: the mean hand-back to the loop)
    release_lag_seconds: float
    #: groups written on the event loop's thread (the rest by the storage worker), and the times a
    #: slow write there sent the next groups to the worker (``group_commit.SLOW_WRITE_S``)
    loop_groups: int
    slow_fallbacks: int
    operations_committed: Annotated[int, counter("Client requests the server had received as of its latest commit "
                                                 "group (over fsyncs: requests per fsync).",
                                                 "okapi_storage_operations_committed")]
    filesystem_free_bytes: Annotated[int, gauge("Bytes free to the server on its data directory's file system.",
                                                "okapi_storage_filesystem_free_bytes")]
    filesystem_size_bytes: Annotated[int, gauge("Size of the data directory's file system.",
                                                "okapi_storage_filesystem_size_bytes")]
    #: over the last 10 s, for `okapi status` (the exporter leaves ratios to PromQL):
    fsyncs_per_s: float
    operations_per_fsync: float
    versions_per_fsync: float
    held_effect_groups: int
    recovered: RecoveredFigures | None


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    identity: Annotated[ServerIdentity, FLAT]
    clock: Annotated[ClockFigures, FLAT]
    stabilization: Annotated[StabilizationFigures, FLAT]
    requests: Annotated[RequestFigures, FLAT]
    store: Annotated[StoreFigures, FLAT]
    storage: StorageFigures | None
    latency: Mapping[str, LatencyFigures]
    core: CoreFigures
    driver: DriverFigures
    wire: WireFigures
    input: InputFigures
    links: Mapping[str, LinkFigures]
    membership: MembershipFigures | None = None


def copy_fields(figures: type[Figures], source: object) -> Figures:
    """``figures`` with each field taken from the attribute of the same name of ``source``."""
    return figures(**{item.name: getattr(source, item.name) for item in dataclasses.fields(figures)})  # type: ignore[arg-type]


# ================================================================ the fields' annotations


class _Field(NamedTuple):
    name: str
    kind: Any  # the type, annotations stripped
    flat: bool
    optional: bool
    json: bool
    metric: MetricSpec | None


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(kind: type) -> tuple[_Field, ...]:
    """``kind``'s fields with what their annotations say (computed once per class)."""
    found = _FIELDS.get(kind)
    if found is None:
        hints = typing.get_type_hints(kind, include_extras=True)
        items = []
        for item in dataclasses.fields(kind):
            hint = hints[item.name]
            extras: tuple[Any, ...] = ()
            if typing.get_origin(hint) is Annotated:
                hint, *rest = typing.get_args(hint)
                extras = tuple(rest)
            metric = next((extra for extra in extras if isinstance(extra, MetricSpec)), None)
            items.append(_Field(item.name, hint, FLAT in extras, OPTIONAL in extras, EXPORTER_ONLY not in extras,
                                metric))
        found = _FIELDS[kind] = tuple(items)
    return found


def _is_group(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


# ================================================================ rendering


def to_document(value: Any) -> Any:
    """``value`` as JSON-ready dicts, lists and scalars (module docstring: ``FLAT``, ``OPTIONAL``,
    ``EXPORTER_ONLY``)."""
    if _is_group(value):
        document: dict[str, Any] = {}
        for item in _fields(type(value)):
            if not item.json:
                continue
            figure = getattr(value, item.name)
            if figure is None and item.optional:
                continue
            if item.flat:
                document.update(to_document(figure))
            else:
                document[item.name] = to_document(figure)
        return document
    if isinstance(value, Mapping):
        return {key: to_document(figure) for key, figure in value.items()}
    if isinstance(value, tuple | list):
        return [to_document(figure) for figure in value]
    return value


def to_json(snapshot: NodeSnapshot) -> str:
    return json.dumps(to_document(snapshot), separators=(",", ":"))


def exported(value: Any) -> Iterator[tuple[MetricSpec, str, float]]:
    """Every field of the tree annotated with ``counter`` or ``gauge``: (spec, field name, value
    after ``convert``). Groups are walked, mappings are not (the exporter labels those itself)."""
    for item in _fields(type(value)):
        figure = getattr(value, item.name)
        spec = item.metric
        if spec is not None:
            yield spec, item.name, figure if spec.convert is None else spec.convert(figure)
        elif _is_group(figure):
            yield from exported(figure)


# ================================================================ reading back


def from_json(text: str | bytes) -> NodeSnapshot:
    """The snapshot a Stats document describes; missing keys read as zero, empty or None. Raises
    ``ValueError`` if ``text`` is not a JSON object."""
    document = json.loads(text)
    if not isinstance(document, dict):
        raise ValueError("a Stats document is a JSON object")
    snapshot: NodeSnapshot = _decode_group(NodeSnapshot, document)
    return snapshot


def _decode(kind: Any, value: Any) -> Any:
    if value is None:
        return _zero(kind)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _decode_group(kind, value if isinstance(value, dict) else {})
    origin = typing.get_origin(kind)
    if origin is types.UnionType or origin is typing.Union:
        options = [option for option in typing.get_args(kind) if option is not type(None)]
        return _decode(options[0], value)
    if origin is tuple:
        arguments = typing.get_args(kind)
        if not isinstance(value, list):
            return ()
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            return tuple(_decode(arguments[0], item) for item in value)
        return tuple(_decode(argument, item) for argument, item in zip(arguments, value, strict=False))
    if origin is Mapping or origin is dict:
        item_kind = typing.get_args(kind)[1]
        return {str(key): _decode(item_kind, item) for key, item in value.items()} if isinstance(value, dict) else {}
    if kind is float and isinstance(value, int):
        return float(value)
    return value


def _decode_group(kind: type, document: dict[str, Any]) -> Any:
    values: dict[str, Any] = {}
    for item in _fields(kind):
        if item.flat and isinstance(item.kind, type) and dataclasses.is_dataclass(item.kind):
            values[item.name] = _decode_group(item.kind, document)
        elif item.flat:  # a flat mapping: every key no other field claims
            claimed = _json_keys(kind)
            rest = {key: value for key, value in document.items() if key not in claimed}
            values[item.name] = _decode(item.kind, rest)
        elif item.json and item.name in document:
            values[item.name] = _decode(item.kind, document[item.name])
        else:
            values[item.name] = _zero(item.kind)
    return kind(**values)


def _json_keys(kind: type) -> frozenset[str]:
    """The keys ``kind``'s fields take in its JSON object (flat groups' fields included)."""
    keys: set[str] = set()
    for item in _fields(kind):
        if item.flat:
            if isinstance(item.kind, type) and dataclasses.is_dataclass(item.kind):
                keys |= _json_keys(item.kind)
        elif item.json:
            keys.add(item.name)
    return frozenset(keys)


def _zero(kind: Any) -> Any:
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _decode_group(kind, {})
    origin = typing.get_origin(kind)
    if origin is types.UnionType or origin is typing.Union:
        return None
    if origin is tuple:
        return ()
    if origin is Mapping or origin is dict:
        return {}
    return {int: 0, float: 0.0, str: "", bool: False}.get(kind)
