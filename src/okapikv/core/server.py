"""The partition server p(n, m) as a pure state machine (docs/protocol.md; docs/design.md).

``handle(message, now_us)`` and ``on_timer(now_us)`` return effects (``Send`` to a peer, ``Respond``
to a client); ``next_deadline()`` says when ``on_timer`` must run next. ``now_us`` is the server's
physical clock reading (wall clock plus any injected skew), in microseconds. The gRPC server and the
simulator are two drivers of this one class.

Blocking (Cure's and GentleRain's waits) never sleeps here: the request is parked,
its condition (clock >= t, or stable time >= t) is part of ``next_deadline`` or is re-checked when
stabilization advances, and the wait's duration is recorded in ``stats`` when the request resumes.

State (per the paper's notation):
- ``vv``: version vector. ``vv[m]`` is the local clock (the HLC for Okapi), ``vv[i]`` the timestamp of
  the latest update or heartbeat received from replica i. Replica links are FIFO, so ``vv[i]`` only
  grows and every update from i at or below it has been installed.
- ``stable``: what this server knows to be stable, used for visibility (Okapi: the USV; Cure: the
  GSV; GentleRain: the GST in every entry). Never moves backwards.
- ``horizon``: garbage-collection horizon, a lower bound of every snapshot any server of the DC will
  still read; a slice whose snapshot is below it is answered ``too_old`` and retried.

Stabilization (section 3.3): every period each partition sends its ``vv`` to its DC's aggregator
(partition 0), which computes the GSV (entry-wise min) and broadcasts it. For the USV, each partition
tells its replicas in the other DCs its DC's GSV (as a field of its replication stream:
``_take_gsv``) and takes the entry-wise min of theirs; with ``piggyback_usv`` only the aggregators
exchange GSVs (``GsvExchange``) and the USV rides on the GSV broadcast.

Durability hooks (the core stays pure; ``okapikv.storage`` and the gRPC driver do the I/O):
- ``track_changes`` / ``drain_changes()``: the versions inserted and garbage-collected since the last
  call, in order, with the current vectors. A durable driver writes them (one transaction per group
  of calls) before it carries out the effects of those calls, so nothing that left this server
  (a reply, a replicated update, a report) can be lost by a crash.
- ``restore(...)``: load what was recovered, restarting the clock at a persisted upper bound of
  every local timestamp issued or announced, so none is ever issued twice.
- ``start_catch_up()``: after a restart, ask every replica for its DC's updates above the recovered
  ``vv`` entry (``CatchUpRequest``). Until the answer (``CatchUpReply``) arrives, ``vv[i]`` does not
  move on the live stream from DC i: the old incarnations' link queues are gone, and a heartbeat of
  the new stream would cover updates that never arrived. A replica that receives a request from a
  restarted server asks it back the same way.
- Garbage collection also keeps every local version some replica may still lack
  (``_replicated_floor``): the store is the catch-up log, trimmed by the USV's local entry (Okapi)
  or by the replicas' reported ``vv`` entries (``ReplicaProgress``, the other protocols).

The maximum clock offset (``CoreConfig.max_clock_offset_us``; the HLC paper's epsilon, CockroachDB's
max offset; docs/operations.md, "Clocks: the maximum offset"). Without it one clock an hour ahead
drags every HLC an hour ahead: its timestamps become stable, enter every session, and each PUT then
takes ``max(dependencies) + 1``. So nothing from elsewhere may move this server's state past its
``_ceiling``: its clock plus the offset (or its own HLC, if that is higher already: a restart above a
persisted clock bound). A client request whose session reaches past it is refused (``OUT_OF_RANGE``)
and changes nothing; so is a snapshot slice (``SliceReply.clock_ahead_us``), and a request that would
wait longer than the offset for the clock (the baselines' waits). A peer's watermark (a replication
batch's timestamps, a heartbeat, a catch-up answer) beyond the clock plus the offset is adopted into
``vv[i]`` only up to that point (``_watermark``): the updates are stored, and the clamped value stays
a valid lower bound (FIFO: everything of DC i below the message's timestamp has arrived), so nothing
is lost and the stable vector never runs more than the offset ahead of this clock (GSVs from other
DCs and the reports and broadcasts inside the DC need no clamp: the GSV and the USV are minimums that
include this server's own, clamped, vector). A server whose
clock is far ahead thus keeps its own writes invisible elsewhere until the others' clocks catch up;
one whose clock is far behind holds back the stability of everyone's (the min of the vectors), as a
server that is down does. Both are counted (``stats``) and ``last_clock_offset`` describes the latest.

Invariants (tested in ``tests/unit/test_server_*.py`` and ``tests/property``):
- a refused request (``ErrorReply`` INVALID_ARGUMENT or OUT_OF_RANGE) changes nothing, not even the
  stable vector;
- the HLC never exceeds ``max(restored clock floor, clock + max offset)`` plus the logical carry;
- every local timestamp is above the previous one and above the client's dependencies; a heartbeat
  or replication message never announces a timestamp before the updates at or below it were sent;
- ``vv``, ``gsv``, ``horizon`` and ``stable`` only grow (GentleRain: the GST, ``min(stable)``);
- garbage collection removes only what no GET and no snapshot at or above the horizon can read, and
  keeps a tombstone until no older concurrent write can still arrive (``_settled``);
- a snapshot read's work is bounded (admission, pages, retries, deadlines: the section "snapshot
  reads" below, docs/operations.md "Read limits and paging"), and every page of a SCAN reads its
  first page's snapshot or fails.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    OVERLOADED,
    CatchUpReply,
    CatchUpRequest,
    ClientReply,
    ClientRequest,
    DeleteRequest,
    Effect,
    ErrorReply,
    GetReply,
    GetRequest,
    GsvBroadcast,
    GsvExchange,
    Heartbeat,
    Message,
    PutRequest,
    ReadItem,
    ReadTxReply,
    ReadTxRequest,
    RepairAnswer,
    RepairBatch,
    ReplicaProgress,
    ReplicateBatch,
    Respond,
    Restarted,
    ScanReply,
    ScanRequest,
    ScanSlice,
    Send,
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
from okapikv.core.mvstore import Change, MultiVersionStore, Version
from okapikv.core.partitioning import partition_of
from okapikv.core.protocols import WaitForStable, create_protocol
from okapikv.core.protocols.base import DC_ID_BYTES, TIMESTAMP_BYTES
from okapikv.core.stats import ServerStats
from okapikv.core.timestamps import LOGICAL_BITS, LOGICAL_MASK, WaitForClock, offset_ceiling, pack, physical_of
from okapikv.core.vectors import Vector, leq, merge_max, merge_min, zeros

NEVER = 1 << 62
#: Above every timestamp (64-bit): the replicated floor of a server without replicas.
ALL_TIMESTAMPS = 1 << 64
#: Updates per ReplicateBatch of a catch-up answer (the driver splits further by bytes).
CATCH_UP_BATCH = 1_000
GSV_SHARE_MIN_US = 1_000
#: Each GC interval's keys are examined in this many equal slices (see ``on_timer``).
GC_SLICES = 10
#: A slice that reaches a server still repairing its data waits this long before it looks again.
REPAIR_POLL_US = 10_000
#: A scan slice examines at most this many keys per item it may return: a range of tombstones or of
#: versions its snapshot cannot see costs a bounded page (with a resume key) instead of a whole pass.
SCAN_EXAMINE_FACTOR = 4
#: A scan slice may return its share of the page (the page's cap over the partitions) plus this
#: many pairs, and never more than the page's cap: a small page (YCSB-E's 1-100 pairs) is one round
#: whatever the partitions, and a large one (hashing spreads keys evenly) comes out at the cap while
#: the partitions read little more than the page itself.
SCAN_SLICE_MARGIN = 64
#: Bytes a returned pair counts beyond its key and value (its framing in a reply, roughly).
SCAN_ITEM_OVERHEAD_BYTES = 48
#: Snapshots of paged SCANs held for their next page, at most (the oldest to expire goes first).
MAX_SNAPSHOT_LEASES = 1_024

Wait = WaitForClock | WaitForStable
Outcome = list[Effect] | Wait


def clock_offset_error(what: str, ahead_us: int, config: CoreConfig) -> str:
    """The message of an ``OUT_OF_RANGE`` refusal: what reached how far past the clock, and the rule."""
    return (f"{what} a timestamp {ahead_us / 1000:.1f} ms ahead of this server's clock, beyond the cluster's "
            f"maximum clock offset of {config.max_clock_offset_us / 1000:g} ms: some server's clock is ahead, or "
            "this one's is behind; nothing was changed (docs/operations.md, \"Clocks: the maximum offset\")")


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed since the last ``drain_changes``: the store's inserts and GC removals in order,
    and the vectors now. Writing the vectors with the versions keeps the recovered state coherent:
    the ``vv`` covers exactly the versions written with it, and the ``stable`` vector and
    ``horizon`` are at least those the written removals relied on (both only grow)."""

    store: list[Change]
    vv: Vector
    stable: Vector
    gsv: Vector
    horizon: Vector


@dataclass(slots=True)
class _Parked:
    message: Message
    wait: Wait
    since_us: int


class _Read:
    """A RO-TX or SCAN page this server coordinates, from its admission to its reply: while an
    attempt runs (``tx_id``) it waits for the slices in ``owed``; between attempts (``tx_id`` 0) its
    request is parked (a snapshot wait, or a retry after a slice came back too old). A plain class:
    one is made per RO-TX, and the dataclass with default factories took 1.3 us to make against
    0.75 (timeit, 2026-12-01, this 2-core VM)."""

    __slots__ = ("request", "since_us", "cost", "attempts", "tx_id", "snapshot", "owed", "items", "last_keys",
                 "sent_us")

    def __init__(self, request: ReadTxRequest | ScanRequest, since_us: int, cost: int) -> None:
        self.request = request
        self.since_us = since_us
        self.cost = cost  # what it counts against ``max_read_items``
        self.attempts = 0  # snapshots tried
        self.tx_id = 0
        self.snapshot: Vector = ()
        self.owed: dict[int, TxSlice | ScanSlice] = {}  # partition -> its slice, not answered yet
        self.items: list[ReadItem] = []
        self.last_keys: list[bytes] = []  # of the scan slices that stopped early
        self.sent_us = 0  # when the current attempt's slices left


@dataclass(frozen=True, slots=True)
class Repair:
    """A start in repair mode (``start_catch_up``): the local data was lost or damaged, so every
    replica is asked for every version it holds. ``salvaged``: this server's own versions read back
    from its damaged store; those above every replica's ``vv`` entry for this DC (never replicated,
    so nowhere else to get them) are kept, the others come back from the replicas."""

    salvaged: tuple[tuple[bytes, Version], ...] = ()


@dataclass(slots=True)
class _Repairing:
    """A repair in progress. Fetching: waiting for the replicas' answers (``waiting``: replica DC
    -> id of the repair request it has not answered). Settling: everything arrived, waiting for the
    stable vector to reach ``threshold`` before serving."""

    salvaged: tuple[tuple[bytes, Version], ...]
    waiting: dict[int, int]
    threshold: Vector
    origin_through: int = 0
    gsvs: list[Vector] = field(default_factory=list)
    deferred: list[CatchUpRequest] = field(default_factory=list)
    fetching: bool = True


class PartitionServer:
    def __init__(self, config: CoreConfig) -> None:
        self.config = config
        self.id = ServerId(config.dc, config.partition)
        self.dc = config.dc
        self.num_dcs = config.num_dcs
        self.protocol = create_protocol(config.protocol, dc=config.dc, num_dcs=config.num_dcs)
        self.store = MultiVersionStore()
        self.stats = ServerStats()
        self.vv: list[int] = [0] * config.num_dcs
        self.stable: Vector = zeros(config.num_dcs)
        self.gsv: Vector = zeros(config.num_dcs)
        self.horizon: Vector = (
            zeros(config.num_dcs)
            if self.protocol.stabilizes
            else self.protocol.snapshot_floor(stable=self.stable, now_us_packed=0)
        )
        self.peers = [ServerId(dc, config.partition) for dc in range(config.num_dcs) if dc != config.dc]
        self.dc_members = [ServerId(config.dc, p) for p in range(config.num_partitions)]
        self.is_aggregator = config.partition == 0
        # aggregator state: latest report of each partition of the DC
        self._reports: dict[int, VvReport] = {}
        # latest GSV received from each other DC (USV round)
        self._remote_gsvs: dict[int, Vector] = {}
        # this DC's GSV changed since it last went to the replicas (Okapi without piggyback_usv)
        self._gsv_unshared = False
        # one partition per DC: the DC's GSV is this partition's vv, followed at every step
        self._gsv_follows_vv = (
            config.num_partitions == 1 and self.protocol.uses_usv and not config.piggyback_usv and bool(self.peers)
        )
        self._parked: list[_Parked] = []
        # snapshot reads this server coordinates: every admitted one by request id, the running
        # attempts by tx id, and what they count against the limits (``_admit_read``)
        self._reads: dict[int, _Read] = {}
        self._pending: dict[int, _Read] = {}
        self._read_items = 0
        # paged SCANs' snapshots -> until when they hold the GC horizon back for the next page
        self._leases: dict[Vector, int] = {}
        # partition of this DC -> when it last sent this server anything (a slice's silence deadline)
        self._heard: dict[int, int] = {}
        # 0: not chosen yet; the first read of this incarnation picks it (``_start_read``)
        self._next_tx_id = 0
        self._outbox: list[Update] = []
        self._last_replication_send_us = 0
        self._next_heartbeat_us = 0
        self._next_stabilization_us = 0
        self._next_gc_us = config.gc_interval_us
        self._next_collect_us = config.gc_interval_us // GC_SLICES
        self._gc_quota = 0  # keys the current GC interval may still examine
        self._gc_slice = 0  # ... and per slice
        # catch-up: source DC -> id of the latest CatchUpRequest sent to it and not answered yet
        self._catching_up: dict[int, int] = {}
        self._next_catch_up_id = 0  # as ``_next_tx_id``
        # the latest vv entry for this DC that each replica reported (ReplicaProgress), and its vector
        self._peer_progress: dict[int, int] = {}
        self._peer_vectors: dict[int, Vector] = {}
        self._progress_sent: dict[int, int] = {}
        self._gc_floor = 0
        self._repair: _Repairing | None = None
        #: the latest input held off by the maximum clock offset: (what, from where, how far ahead
        #: of the clock in us), for the driver's log
        self.last_clock_offset: tuple[str, str, int] | None = None
        self._max_offset_us = config.max_clock_offset_us
        # Eventual takes nothing from a session (its snapshots read everything): nothing to guard
        self._guard_sessions = self.protocol.stabilizes
        self._handlers: dict[type, Callable[[object, int], Outcome]] = {
            GetRequest: self._on_get,  # type: ignore[dict-item]
            PutRequest: self._on_put,  # type: ignore[dict-item]
            SwapRequest: self._on_swap,  # type: ignore[dict-item]
            DeleteRequest: self._on_delete,  # type: ignore[dict-item]
            ReadTxRequest: self._on_read,  # type: ignore[dict-item]
            ScanRequest: self._on_read,  # type: ignore[dict-item]
            ReplicateBatch: self._on_replicate,  # type: ignore[dict-item]
            Heartbeat: self._on_heartbeat,  # type: ignore[dict-item]
            VvReport: self._on_vv_report,  # type: ignore[dict-item]
            GsvBroadcast: self._on_gsv_broadcast,  # type: ignore[dict-item]
            GsvExchange: self._on_gsv_exchange,  # type: ignore[dict-item]
            TxSlice: self._on_slice,  # type: ignore[dict-item]
            ScanSlice: self._on_slice,  # type: ignore[dict-item]
            SliceReply: self._on_slice_reply,  # type: ignore[dict-item]
            Restarted: self._on_restarted,  # type: ignore[dict-item]
            CatchUpRequest: self._on_catch_up_request,  # type: ignore[dict-item]
            CatchUpReply: self._on_catch_up_reply,  # type: ignore[dict-item]
            ReplicaProgress: self._on_replica_progress,  # type: ignore[dict-item]
            RepairBatch: self._on_repair_batch,  # type: ignore[dict-item]
        }

    # ================================================================ driver interface

    @property
    def clock(self) -> int:
        """The local entry of the version vector: the HLC for Okapi, the last physical timestamp
        issued or announced for the baselines."""
        return self.vv[self.dc]

    def handle(self, message: Message, now_us: int) -> list[Effect]:
        """Process one message; returns the effects to carry out."""
        effects = self._dispatch(message, now_us, now_us)
        if self._gsv_follows_vv:
            self._follow_vv(now_us, effects)
        self._flush_outbox(effects, now_us)
        return effects

    def handle_batch(self, messages: Sequence[Message], now_us: int) -> list[Effect]:
        """Process several messages at one clock reading; local updates they create leave in one
        replication batch per peer instead of one each."""
        effects: list[Effect] = []
        for message in messages:
            effects.extend(self._dispatch(message, now_us, now_us))
        if self._gsv_follows_vv:
            self._follow_vv(now_us, effects)
        self._flush_outbox(effects, now_us)
        return effects

    def on_timer(self, now_us: int) -> list[Effect]:
        """Run whatever is due at ``now_us``: parked requests, heartbeat, stabilization, GC."""
        effects: list[Effect] = []
        if self._repair is not None and not self._repair.fetching:
            self._settle_repair()
        if self._parked:
            self._resume_parked(now_us, effects, clock_only=True)
            # Updates of resumed writes must leave before any heartbeat that covers their timestamps.
            self._flush_outbox(effects, now_us)
        if self.protocol.stabilizes and now_us >= self._next_stabilization_us:
            self._next_stabilization_us = now_us + self.config.stabilization_interval_us
            self._stabilize(now_us, effects)  # first: a heartbeat it sends makes the next one not due
        if self.num_dcs > 1 and now_us >= self._next_heartbeat_us:
            self._heartbeat(now_us, effects)
        if now_us >= self._next_gc_us:
            self._next_gc_us = now_us + self.config.gc_interval_us
            self._expire_reads(now_us, effects)
            if self.peers and not self.protocol.uses_usv:
                self._send_progress(effects)
            self._gc_floor = self._replicated_floor()
            self._gc_quota = min(self.config.gc_budget, self.store.collectable_count)
            self._gc_slice = -(-self._gc_quota // GC_SLICES)
        if now_us >= self._next_collect_us:
            # A GC pass in GC_SLICES slices over its interval: the keys a pass examines (at most
            # the budget, each key at most once) spread out, with no single stall of a whole pass.
            # Under PUT load on 10k keys a 2,000-key pass took 6-10 ms every 50 ms, delaying
            # replication and stabilization by as much (3 DCs x 1 partition at saturation: remote
            # visibility lag p99 ~20 ms over the UST bound -> 2-6). Slices of a tenth of the
            # budget instead examined keys waiting to become collectable up to 10x as often, when
            # the queue was short (RO-TX + PUT 3 DCs x 2 partitions: ~15% of the throughput).
            self._next_collect_us = now_us + self.config.gc_interval_us // GC_SLICES
            count = min(self._gc_slice, self._gc_quota)
            if count:
                self._gc_quota -= count
                self.store.collect_some(self._universally_visible, count, tombstone_removable=self._settled)
        self._flush_outbox(effects, now_us)
        return effects

    def next_deadline(self) -> int:
        """The clock reading at which ``on_timer`` must run next."""
        deadline = min(self._next_gc_us, self._next_collect_us)
        if self.num_dcs > 1:
            deadline = min(deadline, self._next_heartbeat_us)
        if self.protocol.stabilizes:
            deadline = min(deadline, self._next_stabilization_us)
        for parked in self._parked:
            if isinstance(parked.wait, WaitForClock):
                deadline = min(deadline, parked.wait.clock_us)
        return deadline

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    @property
    def pending_reads(self) -> int:
        """Snapshot reads this server coordinates and has not answered (running or parked)."""
        return len(self._reads)

    @property
    def snapshot_leases(self) -> int:
        """Paged SCANs' snapshots held for their next page (``snapshot_lease_us``)."""
        return len(self._leases)

    def cancel_reads(self, request_ids: Iterable[int]) -> int:
        """The clients of these requests went away (a closed connection, a cancelled RPC): drop
        those that are snapshot reads still unanswered, so no work is done for them any more and
        they stop counting against the limits and holding the GC horizon back. Slices already
        sent are answered and ignored (each is bounded by the scan budgets). Returns how many."""
        dropped = 0
        for request_id in request_ids:
            read = self._reads.get(request_id)
            if read is not None:
                self._unpark(read)
                self._drop(read)
                dropped += 1
        self.stats.reads_abandoned += dropped
        return dropped

    @property
    def catching_up(self) -> tuple[int, ...]:
        """DCs whose catch-up answer this server still waits for (their ``vv`` entry is frozen)."""
        return tuple(sorted(self._catching_up))

    @property
    def repairing(self) -> str | None:
        """None, or where a repair stands: "fetching" (waiting for replicas' answers) or "settling"
        (waiting for the stable vector to reach the replicas'). Client requests are refused and
        slices wait until it ends."""
        if self._repair is None:
            return None
        return "fetching" if self._repair.fetching else "settling"

    @property
    def repair_waiting(self) -> tuple[int, ...]:
        """DCs whose repair answer this server still waits for."""
        return tuple(sorted(self._repair.waiting)) if self._repair is not None else ()

    # ================================================================ durability hooks

    @property
    def track_changes(self) -> bool:
        return self.store.track_changes

    @track_changes.setter
    def track_changes(self, enabled: bool) -> None:
        self.store.track_changes = enabled

    def drain_changes(self) -> Changes:
        """The changes since the last call (see ``Changes``); the store part is empty unless
        ``track_changes`` is on."""
        return Changes(self.store.drain_changes(), tuple(self.vv), self.stable, self.gsv, self.horizon)

    def restore(
        self,
        versions: Iterable[tuple[bytes, Version]],
        *,
        vv: Vector,
        stable: Vector,
        gsv: Vector,
        horizon: Vector,
        clock_floor: int,
    ) -> None:
        """Load a recovered state into a fresh server, before its first ``handle`` or ``on_timer``.

        ``clock_floor`` must be at least every local timestamp the previous incarnation issued or
        announced (the driver persists such a bound ahead of use): the clock restarts there, so a
        timestamp is never issued twice and no promise made by a heartbeat is broken.
        """
        for vector in (vv, stable, gsv, horizon):
            if len(vector) != self.num_dcs:
                raise ValueError(f"recovered vector {vector} does not have {self.num_dcs} entries")
        tracking = self.store.track_changes
        self.store.track_changes = False
        try:
            for key, version in versions:
                self.store.insert(key, version)
        finally:
            self.store.track_changes = tracking
        self.vv = list(merge_max(tuple(self.vv), vv))
        self.vv[self.dc] = max(self.vv[self.dc], clock_floor)
        self.stable = merge_max(self.stable, stable)
        self.gsv = merge_max(self.gsv, gsv)
        self.horizon = merge_max(self.horizon, horizon)

    def start_catch_up(self, repair: Repair | None = None) -> list[Effect]:
        """Ask every replica for its DC's updates above our ``vv`` entry (call once after a restart,
        before any other effect of this incarnation leaves: the request tells the replica to stop
        trusting our old stream).

        With ``repair`` (the local data was lost or damaged; ``restore`` got what survived, if
        anything) ask every replica for everything it holds instead, this DC's versions included,
        and serve nothing until the repair ends (``_on_catch_up_reply``, ``_settle_repair``)."""
        if repair is not None:
            self._repair = _Repairing(repair.salvaged, {}, zeros(self.num_dcs))
        effects: list[Effect] = []
        for peer in self.peers:
            send = self._request_catch_up(peer, restarted=True, repair=repair is not None)
            if self._repair is not None:
                self._repair.waiting[peer.dc] = send.message.request_id  # type: ignore[union-attr]
            effects.append(send)
        # Reads the other partitions coordinate may wait for slices the old incarnation took.
        announcement = Restarted(self.id)
        effects.extend(Send(member, announcement) for member in self.dc_members if member != self.id)
        if self._repair is not None and not self.peers:
            effects.extend(self._end_repair_fetch())
        return effects

    # ================================================================ dispatch and waits

    def _dispatch(self, message: Message, now_us: int, since_us: int) -> list[Effect]:
        handler = self._handlers.get(type(message))
        if handler is None:
            raise TypeError(f"unknown message type {type(message).__name__}")
        if self._repair is not None and isinstance(message, ClientRequest):
            return self._refuse_while_repairing(message)
        outcome = handler(message, now_us)
        if isinstance(outcome, list):
            return outcome
        self._parked.append(_Parked(message, outcome, since_us))
        return []

    def _resume_parked(self, now_us: int, effects: list[Effect], *, clock_only: bool) -> None:
        still: list[_Parked] = []
        ready: list[_Parked] = []
        min_stable = min(self.stable)
        for parked in self._parked:
            wait = parked.wait
            if isinstance(wait, WaitForClock):
                (ready if now_us >= wait.clock_us else still).append(parked)
            elif not clock_only and min_stable >= wait.threshold:
                ready.append(parked)
            else:
                still.append(parked)
        self._parked = still
        for parked in ready:
            outcome = self._handlers[type(parked.message)](parked.message, now_us)
            if isinstance(outcome, list):
                self.stats.record_wait(parked.wait.reason, now_us - parked.since_us)
                effects.extend(outcome)
            else:
                self._parked.append(_Parked(parked.message, outcome, parked.since_us))

    # ================================================================ client operations

    def _reject(self, request_id: int, message: str) -> list[Effect]:
        self.stats.rejected_requests += 1
        return [Respond(ErrorReply(request_id, "INVALID_ARGUMENT", message))]

    def _admit(self, request_id: int, session: Session, now_us: int, problem: str | None) -> list[Effect] | None:
        """The refusal of a request with ``problem``, a session that does not fit the cluster, or a
        session reaching past the clock ceiling; else None, once the session is merged (a refused
        request changes nothing)."""
        if problem is None and len(session.stable) != self.num_dcs:
            problem = f"session vector has {len(session.stable)} entries, the cluster has {self.num_dcs} DCs"
        if problem:
            return self._reject(request_id, problem)
        if self._guard_sessions:
            # ``_ceiling`` inlined: this runs for every client request
            ceiling = ((now_us + self._max_offset_us) << LOGICAL_BITS) | LOGICAL_MASK
            hlc = self.vv[self.dc]
            if hlc > ceiling:
                ceiling = hlc
            ahead = session.dt if session.dt > ceiling else max(session.stable)
            if ahead > ceiling:
                return self._refuse_offset(request_id, "the session depends on", ahead, now_us)
        self.stable = merge_max(self.stable, session.stable)
        return None

    def _ceiling(self, now_us: int) -> int:
        """The highest timestamp this server takes from a client or a slice: its clock plus the
        maximum offset, or its own HLC when that is higher (a dependency at or below it moves
        nothing: after a restart above a persisted bound the HLC is ahead of the clock)."""
        return max(self.vv[self.dc], offset_ceiling(now_us, self.config.max_clock_offset_us))

    def _note_offset(self, what: str, source: str, timestamp_us: int, now_us: int) -> int:
        """Remember an input held off by the offset bound (for the driver's log); returns how far
        ahead of the clock it was, in us."""
        ahead_us = timestamp_us - now_us
        self.last_clock_offset = (what, source, ahead_us)
        return ahead_us

    def _refuse_offset(self, request_id: int, what: str, timestamp: int, now_us: int) -> list[Effect]:
        self.stats.clock_offset_refusals += 1
        ahead_us = self._note_offset("refused a client request", "a client", physical_of(timestamp), now_us)
        return [Respond(ErrorReply(request_id, "OUT_OF_RANGE", clock_offset_error(what, ahead_us, self.config)))]

    def _too_long(self, wait: WaitForClock, now_us: int) -> bool:
        """Whether a wait for the clock outlasts the maximum offset: the clock is then not slightly
        behind but far off, and waiting would park the request for as long (an hour after a step)."""
        return wait.clock_us - now_us > self.config.max_clock_offset_us

    def _check_key(self, key: bytes) -> str | None:
        if not key:
            return "key must not be empty"
        if len(key) > self.config.max_key_bytes:
            return f"key of {len(key)} bytes exceeds the limit of {self.config.max_key_bytes} bytes"
        return None

    def _check_value(self, value: bytes) -> str | None:
        if len(value) > self.config.max_value_bytes:
            return f"value of {len(value)} bytes exceeds the limit of {self.config.max_value_bytes} bytes"
        return None

    def _owns(self, key: bytes) -> bool:
        return partition_of(key, self.config.num_partitions) == self.id.partition

    def _visible(self, version: Version) -> bool:
        return self.protocol.visible(version, self.stable)

    def _read_contribution(self, version: Version | None) -> tuple[Vector, int]:
        """What a client that read ``version`` must merge into its session: the version's
        dependencies (remote entries into ``stable``, the local entry into ``dt``)."""
        if version is None:
            return self.stable, 0
        dv = self._dependency_of(version)
        dc = self.dc
        if self.num_dcs == 1:  # no remote entries to merge
            return self.stable, dv[0]
        return merge_max(self.stable, dv[:dc] + (0,) + dv[dc + 1 :]), dv[dc]

    def _dependency_of(self, version: Version) -> Vector:
        return version.dependency_vector(self.num_dcs)

    def _on_get(self, request: GetRequest, now_us: int) -> Outcome:
        refused = self._admit(request.request_id, request.session, now_us, self._check_key(request.key))
        if refused is not None:
            return refused
        self.stats.operations["get"] += 1
        version = self.store.newest(request.key, self._visible)
        stable, dt = self._read_contribution(version)
        value = version.value if version is not None else None
        return [Respond(GetReply(request.request_id, value, Session(stable, max(dt, request.session.dt))))]

    def _on_put(self, request: PutRequest, now_us: int) -> Outcome:
        problem = self._check_key(request.key) or self._check_value(request.value)
        return self._write("put", request.request_id, request.key, request.value, request.session, now_us, problem)

    def _on_delete(self, request: DeleteRequest, now_us: int) -> Outcome:
        problem = self._check_key(request.key)
        return self._write("delete", request.request_id, request.key, None, request.session, now_us, problem)

    def _on_swap(self, request: SwapRequest, now_us: int) -> Outcome:
        problem = self._check_key(request.key) or self._check_value(request.value)
        return self._write("swap", request.request_id, request.key, request.value, request.session, now_us, problem)

    def _write(
        self,
        kind: str,
        request_id: int,
        key: bytes,
        value: bytes | None,
        session: Session,
        now_us: int,
        problem: str | None,
    ) -> Outcome:
        stable_before = self.stable
        refused = self._admit(request_id, session, now_us, problem)
        if refused is not None:
            return refused
        dc = self.dc
        current = self.store.newest(key, self._visible)
        dependency = session.stable[:dc] + (session.dt,) + session.stable[dc + 1 :]
        if current is not None:
            # Every write here also reads (SWAP's old value, PUT's and DELETE's found flag), so the new
            # version depends on what it read and orders after it under last-writer-wins, even when
            # that version came from a DC whose clock runs ahead.
            dependency = merge_max(dependency, self._dependency_of(current))
        timestamp = self.protocol.assign_timestamp(
            previous=self.vv[dc], max_dependency=max(dependency), now_us=now_us
        )
        if isinstance(timestamp, WaitForClock):
            if self._too_long(timestamp, now_us):
                self.stable = stable_before
                return self._refuse_offset(request_id, "the write would wait for the clock to reach",
                                           pack(timestamp.clock_us), now_us)
            return timestamp
        self.stats.operations[kind] += 1
        self.vv[dc] = timestamp
        version = Version(value, timestamp, dc, self.protocol.stored_dv(dependency=dependency, timestamp=timestamp))
        self.store.insert(key, version)
        if self.num_dcs > 1:
            self._outbox.append(Update(key, value, timestamp, dc, self.protocol.replicated_dv(version)))
        found = current is not None and current.value is not None
        stable, _ = self._read_contribution(current)
        reply_session = Session(stable, timestamp)
        reply: ClientReply
        if kind == "swap":
            reply = SwapReply(request_id, current.value if current is not None else None, timestamp, reply_session)
        else:
            reply = WriteReply(request_id, found, timestamp, reply_session)
        return [Respond(reply)]

    # ================================================================ snapshot reads (RO-TX, SCAN)
    #
    # Bounded work per read (docs/operations.md, "Read limits and paging"):
    # - admission (``_admit_read``): at most ``max_concurrent_reads`` reads coordinated at once, counting
    #   together at most ``max_read_items`` keys (a RO-TX) or page caps (a SCAN); beyond that a read
    #   is refused at once (RESOURCE_EXHAUSTED), so reads cannot queue up work without bound in
    #   front of a partition's PUTs and GETs. Slices are bounded with them: each partition receives
    #   from each coordinator at most its share of that coordinator's ``max_read_items``.
    # - pages: a SCAN reply holds at most ``max_scan_items`` pairs (and about ``max_scan_bytes``), and
    #   a slice examines at most SCAN_EXAMINE_FACTOR keys per pair it may return; a scan that stopped
    #   early names where it goes on and the snapshot it read (``ScanReply.resume``, ``snapshot``).
    #   Later pages read that snapshot, which the coordinator keeps above the GC horizon for
    #   ``snapshot_lease_us`` after each page (``_lease``); below the horizon a later page fails
    #   (ABORTED) rather than mix snapshots, and the client starts the scan over.
    # - retries: a slice below the GC horizon (``too_old``) makes a first page or RO-TX retry with a
    #   fresh snapshot at most ``max_snapshot_retries`` times, then fail (ABORTED).
    # - deadlines: a partition that restarted announces it (``Restarted``) and gets its slices again
    #   at once; one that stays silent (sends this server nothing) for ``read_timeout_us`` fails the
    #   read (UNAVAILABLE) without a re-run, which under load would multiply the work; a slow one
    #   that keeps talking is waited for, up to ``read_deadline_us`` for the whole read.
    # - cancellation: a read whose client went away is dropped (``cancel_reads``).

    def _on_read(self, request: ReadTxRequest | ScanRequest, now_us: int) -> Outcome:
        read = self._reads.get(request.request_id)
        if read is None:
            admitted = self._admit_read(request, now_us)
            if not isinstance(admitted, _Read):
                return admitted
            read = admitted
        elif read.request is not request:  # a driver that reused a request id: refuse the newcomer
            return self._reject(request.request_id, f"request id {request.request_id} is already in use")
        page = request.snapshot if isinstance(request, ScanRequest) else None
        if page is not None:
            if not leq(self.horizon, page.vector):
                return self._give_up(read, "the scan's snapshot fell below the garbage-collection horizon between "
                                           "pages (it was held for snapshot_lease_us after the last page); start over")
            return self._start_read(read, page.vector, now_us)
        snapshot = self.protocol.snapshot(stable=self.stable, dt=request.session.dt, now_us=now_us)
        if isinstance(snapshot, WaitForStable):
            return snapshot
        return self._start_read(read, snapshot, now_us)

    def _read_problem(self, request: ReadTxRequest | ScanRequest) -> str | None:
        config = self.config
        if isinstance(request, ReadTxRequest):
            if len(request.keys) > config.max_read_keys:
                return f"a read transaction may name at most {config.max_read_keys} keys, not {len(request.keys)}"
            for key in request.keys:
                problem = self._check_key(key)
                if problem:
                    return problem
            return None
        if request.limit is not None and request.limit < 0:
            return "scan limit must not be negative"
        page = request.snapshot
        if page is not None and len(page.vector) != self.num_dcs:
            return f"scan snapshot has {len(page.vector)} entries, the cluster has {self.num_dcs} DCs"
        return None

    def _page_cap(self, limit: int | None) -> int:
        cap = self.config.max_scan_items
        return cap if limit is None else min(limit, cap)

    def _admit_read(self, request: ReadTxRequest | ScanRequest, now_us: int) -> _Read | list[Effect]:
        """A new read, within the limits and the clock ceiling (``_admit``); or its refusal, which
        changes nothing."""
        problem = self._read_problem(request)
        if problem:
            return self._reject(request.request_id, problem)
        request_id = request.request_id
        if isinstance(request, ScanRequest):
            page = request.snapshot
            if page is not None and page.dc != self.dc:
                # A client that moved to another DC mid-scan: that snapshot means nothing here.
                self.stats.reads_given_up += 1
                message = f"the scan's snapshot belongs to DC {page.dc}, this is DC {self.dc}; start over"
                return [Respond(ErrorReply(request_id, "ABORTED", message))]
            cost = self._page_cap(request.limit)
        else:
            cost = len(request.keys)
        config = self.config
        if len(self._reads) >= config.max_concurrent_reads or (
            self._reads and self._read_items + cost > config.max_read_items
        ):
            self.stats.reads_refused += 1
            message = (f"{OVERLOADED}this server already coordinates {len(self._reads)} snapshot reads of "
                       f"{self._read_items} keys (max_concurrent_reads {config.max_concurrent_reads}, "
                       f"max_read_items {config.max_read_items}); retry later")
            return [Respond(ErrorReply(request_id, "RESOURCE_EXHAUSTED", message))]
        refused = self._admit(request_id, request.session, now_us, None)
        if refused is not None:
            return refused
        read = _Read(request, now_us, cost)
        self._reads[request_id] = read
        self._read_items += cost
        self.stats.operations["scan" if isinstance(request, ScanRequest) else "read_tx"] += 1
        return read

    def _start_read(self, read: _Read, snapshot: Vector, now_us: int) -> list[Effect]:
        # An incarnation's ids start at its clock when it first needs one, so they are above every id
        # of an earlier incarnation of this server (whose ids grew by one per read while its clock
        # grew by 2**16 per microsecond): a peer's link resends what a crashed server had not
        # acknowledged to its new incarnation (``okapikv.server.links``), and an old read's slice
        # answer must not complete a new read of the same id (``_on_slice_reply``).
        tx_id = self._next_tx_id or max(pack(now_us), self.clock + 1)
        self._next_tx_id = tx_id + 1
        request = read.request
        slices: dict[int, TxSlice | ScanSlice] = {}
        if isinstance(request, ReadTxRequest):
            by_partition: dict[int, list[bytes]] = {}
            for key in dict.fromkeys(request.keys):
                by_partition.setdefault(partition_of(key, self.config.num_partitions), []).append(key)
            for partition, keys in by_partition.items():
                slices[partition] = TxSlice(self.id, tx_id, snapshot, tuple(keys))
        else:
            # Each partition returns about its share of the page (SCAN_SLICE_MARGIN); the page is
            # cut where the first slice that stopped early stopped (``_finish_read``).
            partitions = self.config.num_partitions
            cap = self._page_cap(request.limit)
            per_slice = min(cap, -(-cap // partitions) + SCAN_SLICE_MARGIN)
            for partition in range(partitions):
                slices[partition] = ScanSlice(self.id, tx_id, snapshot, request.start, request.end, per_slice)
        read.attempts += 1
        read.tx_id = tx_id
        read.snapshot = snapshot
        read.owed = slices
        if read.items or read.last_keys:  # a retry: forget the abandoned attempt's answers
            read.items = []
            read.last_keys = []
        read.sent_us = now_us
        self._pending[tx_id] = read
        dc = self.dc
        here = self.id.partition
        effects: list[Effect] = [Send(ServerId(dc, partition), slice_message)
                                 for partition, slice_message in slices.items() if partition != here]
        own = slices.get(here)
        if own is not None:
            effects.extend(self._dispatch(own, now_us, now_us))
        elif not slices:
            effects.extend(self._finish_read(read, now_us))
        return effects

    def _on_slice(self, message: TxSlice | ScanSlice, now_us: int) -> Outcome:
        if self._repair is not None:  # the store may still lack what the snapshot reads
            return WaitForClock(now_us + REPAIR_POLL_US, "repair")
        snapshot = message.snapshot
        if not leq(self.horizon, snapshot):
            # Versions this snapshot could read may already be collected: the coordinator retries.
            return self._slice_reply(message, (), too_old=True, now_us=now_us)
        if self.protocol.stabilizes and max(snapshot) > self._ceiling(now_us):
            return self._refuse_slice(message, max(snapshot), now_us)
        wait = self.protocol.slice_wait(snapshot=snapshot, now_us=now_us)
        if wait is not None:
            return self._refuse_slice(message, pack(wait.clock_us), now_us) if self._too_long(wait, now_us) else wait
        dc = self.dc
        if self.protocol.raises_clock_on_slice and snapshot[dc] > self.vv[dc]:
            self.vv[dc] = snapshot[dc]  # updateClockOnTx: never create a version this snapshot misses
        self.stable = merge_max(self.stable, snapshot[:dc] + (self.stable[dc],) + snapshot[dc + 1 :])
        visible = self.protocol.visible_in_snapshot

        def in_snapshot(version: Version) -> bool:
            return visible(version, snapshot)

        newest = self.store.newest
        read_item = self._read_item
        items: list[ReadItem] = []
        if isinstance(message, TxSlice):
            for key in message.keys:
                items.append(read_item(key, newest(key, in_snapshot)))
            return self._slice_reply(message, tuple(items), too_old=False, now_us=now_us)
        config = self.config
        limit = self._page_cap(message.limit)
        budget = max(config.max_scan_bytes // config.num_partitions, 1)
        room = SCAN_EXAMINE_FACTOR * limit  # keys it may still examine
        full = limit <= 0
        size = 0
        previous: bytes | None = None
        last_key: bytes | None = None
        for key in self.store.keys_in_range(message.start, message.end):
            if full or not room:
                last_key = previous  # a key is left: everything up to ``previous`` is covered
                break
            room -= 1
            previous = key
            version = newest(key, in_snapshot)
            if version is not None and (value := version.value) is not None:
                items.append(read_item(key, version))
                size += len(key) + len(value) + SCAN_ITEM_OVERHEAD_BYTES
                full = len(items) >= limit or size >= budget
        return self._slice_reply(message, tuple(items), too_old=False, now_us=now_us, last_key=last_key)

    def _refuse_slice(self, message: TxSlice | ScanSlice, timestamp: int, now_us: int) -> list[Effect]:
        """A slice whose snapshot reaches past the ceiling (or would wait that long): serving it
        would raise this partition's HLC to the snapshot (updateClockOnTx), so the read fails."""
        self.stats.clock_offset_refusals += 1
        source = f"dc{message.source.dc}/p{message.source.partition}"
        ahead_us = self._note_offset("refused a snapshot slice", source, physical_of(timestamp), now_us)
        reply = SliceReply(self.id, message.tx_id, (), clock_ahead_us=max(ahead_us, 1))
        if message.source == self.id:
            return self._on_slice_reply(reply, now_us)
        return [Send(message.source, reply)]

    def _read_item(self, key: bytes, version: Version | None) -> ReadItem:
        if version is None:
            return ReadItem(key, None, 0, self.dc, None)
        return ReadItem(key, version.value, version.timestamp, version.source_dc, self._dependency_of(version))

    def _slice_reply(
        self, message: TxSlice | ScanSlice, items: tuple[ReadItem, ...], *, too_old: bool, now_us: int,
        last_key: bytes | None = None,
    ) -> list[Effect]:
        reply = SliceReply(self.id, message.tx_id, items, too_old, last_key)
        if message.source == self.id:
            return self._on_slice_reply(reply, now_us)
        return [Send(message.source, reply)]

    def _on_slice_reply(self, reply: SliceReply, now_us: int) -> list[Effect]:
        source = reply.source
        if source.dc != self.dc:
            return []
        self._heard[source.partition] = now_us
        read = self._pending.get(reply.tx_id)
        if read is None or source.partition not in read.owed:
            return []  # a late reply of an abandoned attempt, or a second answer to a re-sent slice
        if reply.clock_ahead_us:
            message = clock_offset_error(f"partition {source.partition} refused the snapshot: it reaches",
                                         reply.clock_ahead_us, self.config)
            return self._fail(read, "OUT_OF_RANGE", message)
        if reply.too_old:
            self._end_attempt(read)
            return self._retry(read, now_us)
        del read.owed[source.partition]
        read.items.extend(reply.items)
        if reply.last_key is not None:
            read.last_keys.append(reply.last_key)
        if read.owed:
            return []
        return self._finish_read(read, now_us)

    def _on_restarted(self, message: Restarted, now_us: int) -> list[Effect]:
        """A partition of this DC restarted: re-send it the slices it owes (the new incarnation
        never saw them, or its answer was lost with the old one). A second answer is ignored."""
        source = message.source
        if source.dc != self.dc or source == self.id:
            return []
        self._heard[source.partition] = now_us
        effects: list[Effect] = []
        for read in self._pending.values():
            slice_message = read.owed.get(source.partition)
            if slice_message is not None:
                effects.append(Send(source, slice_message))
                read.sent_us = now_us
        self.stats.slices_resent += len(effects)
        return effects

    def _retry(self, read: _Read, now_us: int) -> list[Effect]:
        """A slice came back too old: a first page or RO-TX tries a fresh snapshot, a bounded number
        of times; a later page cannot (its snapshot is the scan's)."""
        if isinstance(read.request, ScanRequest) and read.request.snapshot is not None:
            return self._give_up(read, "the scan's snapshot fell below the garbage-collection horizon between pages; "
                                       "start over")
        if read.attempts > self.config.max_snapshot_retries:
            return self._give_up(read, f"the snapshot fell below the garbage-collection horizon on each of "
                                       f"{read.attempts} attempts; retry later")
        self.stats.snapshot_retries += 1
        # Retry from the timer with a fresh snapshot rather than recursively from here.
        self._parked.append(_Parked(read.request, WaitForClock(now_us + 1, "snapshot_retry"), read.since_us))
        return []

    def _give_up(self, read: _Read, message: str) -> list[Effect]:
        self.stats.reads_given_up += 1
        return self._fail(read, "ABORTED", message)

    def _fail(self, read: _Read, code: str, message: str) -> list[Effect]:
        self._drop(read)
        return [Respond(ErrorReply(read.request.request_id, code, message))]

    def _end_attempt(self, read: _Read) -> None:
        if read.tx_id:
            self._pending.pop(read.tx_id, None)
            read.tx_id = 0
            read.owed = {}

    def _drop(self, read: _Read) -> None:
        if self._reads.pop(read.request.request_id, None) is None:
            return
        self._end_attempt(read)
        self._read_items -= read.cost

    def _unpark(self, read: _Read) -> None:
        """Take a read between attempts out of the parked requests."""
        if not read.tx_id:
            request = read.request
            self._parked = [parked for parked in self._parked if parked.message is not request]

    def _lease(self, snapshot: Vector, now_us: int) -> None:
        """Hold ``snapshot`` above the GC horizon until the next page can come (``_stabilize``)."""
        leases = self._leases
        if snapshot not in leases and len(leases) >= MAX_SNAPSHOT_LEASES:
            del leases[min(leases, key=leases.__getitem__)]
        leases[snapshot] = now_us + self.config.snapshot_lease_us

    def _finish_read(self, read: _Read, now_us: int) -> list[Effect]:
        self._drop(read)
        request = read.request
        if isinstance(request, ReadTxRequest):
            by_key = {item.key: item.value for item in read.items}
            values = tuple(by_key.get(key) for key in request.keys)
            return [Respond(ReadTxReply(request.request_id, values, self._session_after(request, read.items)))]
        # Scan slices return only visible pairs; keys are distinct across partitions.
        page = sorted([(item.key, value) for item in read.items if (value := item.value) is not None])
        whole = len(page)
        boundary = min(read.last_keys) if read.last_keys else None
        if boundary is not None:
            # A partition whose slice stopped early has not covered the keys above its last one.
            page = page[: bisect_right(page, boundary, key=itemgetter(0))]
        cut = min(len(page), self._page_cap(request.limit))
        budget = self.config.max_scan_bytes
        if sum([len(key) + len(value) for key, value in page[:cut]]) + SCAN_ITEM_OVERHEAD_BYTES * cut > budget:
            size = 0
            for index, (key, value) in enumerate(page[:cut]):
                size += len(key) + len(value) + SCAN_ITEM_OVERHEAD_BYTES
                if index and size > budget:
                    cut = index
                    break
        if cut < len(page):
            page = page[:cut]
            boundary = page[-1][0] if page else boundary
        done = (boundary is None or boundary >= request.end
                or (request.limit is not None and len(page) >= request.limit))
        pairs = tuple(page)
        if len(page) == whole:
            session = self._session_after(request, read.items)
        else:  # only what the page returns counts
            last = page[-1][0] if page else b""
            session = self._session_after(request, [item for item in read.items if item.key <= last] if page else ())
        if done:
            if request.snapshot is not None:
                self._leases.pop(read.snapshot, None)
            return [Respond(ScanReply(request.request_id, pairs, session))]
        assert boundary is not None
        self.stats.scan_pages += 1
        self._lease(read.snapshot, now_us)
        # The smallest key above ``boundary`` in byte order: the next page starts there.
        resume = boundary + b"\x00"
        return [Respond(ScanReply(request.request_id, pairs, session, resume, SnapshotRef(self.dc, read.snapshot)))]

    def _session_after(self, request: ReadTxRequest | ScanRequest, items: Iterable[ReadItem]) -> Session:
        """The client's session after reading ``items``: their dependencies merged in."""
        stable = self.stable
        dt = request.session.dt
        dc = self.dc
        for item in items:
            if item.dv is not None:
                stable = merge_max(stable, item.dv[:dc] + (0,) + item.dv[dc + 1 :])
                dt = max(dt, item.dv[dc])
        return Session(stable, dt)

    # ================================================================ replication

    def _flush_outbox(self, effects: list[Effect], now_us: int) -> None:
        if not self._outbox:
            return
        batch = tuple(self._outbox)
        self._outbox = []
        message = ReplicateBatch(self.id, batch, self._take_gsv())
        for peer in self.peers:
            effects.append(Send(peer, message))
        stats = self.stats
        per_update = self.protocol.update_metadata_bytes()
        count = len(batch) * len(self.peers)
        stats.replicated_updates_sent += count
        stats.replication_metadata_bytes += per_update * count
        stats.replication_payload_bytes += len(self.peers) * sum(
            len(u.key) + (len(u.value) if u.value is not None else 0) for u in batch
        )
        self._last_replication_send_us = now_us
        self._next_heartbeat_us = now_us + self.config.heartbeat_interval_us

    def _on_replicate(self, message: ReplicateBatch, now_us: int) -> list[Effect]:
        vv = self.vv
        catching_up = self._catching_up
        dc = self.dc
        repairing = self._repair
        if repairing is not None and message.source.dc in repairing.waiting:
            # Until its repair answer ends, a replica's stream may carry versions resent from before
            # this server lost its data that the replica has collected since (``RepairBatch``).
            return self._absorb_gsv(message.source.dc, message.gsv, now_us) if message.gsv is not None else []
        cap = offset_ceiling(now_us, self.config.max_clock_offset_us)
        for update in message.updates:
            source_dc = update.source_dc
            if source_dc == dc:  # our own versions come back only in a repair's answer
                continue
            timestamp = update.timestamp
            if timestamp <= vv[source_dc]:
                continue  # FIFO links: at or below vv[source] it is a re-delivered duplicate
            self.store.insert(update.key, Version(update.value, timestamp, source_dc, update.dv))
            if source_dc not in catching_up:  # frozen until the catch-up answer covers the gap
                vv[source_dc] = timestamp if timestamp <= cap else self._watermark(message, source_dc, timestamp,
                                                                                     now_us)
        self.stats.replicated_updates_received += len(message.updates)
        return self._absorb_gsv(message.source.dc, message.gsv, now_us) if message.gsv is not None else []

    def _on_heartbeat(self, message: Heartbeat, now_us: int) -> list[Effect]:
        source = message.source.dc
        if message.timestamp > self.vv[source] and source not in self._catching_up:
            self.vv[source] = self._watermark(message, source, message.timestamp, now_us)
        return self._absorb_gsv(source, message.gsv, now_us) if message.gsv is not None else []

    # ================================================================ catch-up after a restart

    def _request_catch_up(self, peer: ServerId, *, restarted: bool, repair: bool = False) -> Send:
        request_id = self._next_catch_up_id or self.clock + 1  # unique across incarnations: ``_start_read``
        self._next_catch_up_id = request_id + 1
        self._catching_up[peer.dc] = request_id
        self.stats.catch_up_requests_sent += 1
        return Send(peer, CatchUpRequest(self.id, request_id, 0 if repair else self.vv[peer.dc], restarted, repair))

    def _is_replica(self, source: ServerId) -> bool:
        return source.dc != self.dc and source.partition == self.id.partition and 0 <= source.dc < self.num_dcs

    def _on_catch_up_request(self, message: CatchUpRequest, now_us: int) -> list[Effect]:
        """Answer (``_catch_up_answer``), and ask a restarted replica back.

        While this server's own repair is fetching, a plain request waits for the fetch to end: its
        answer (this DC's updates) must include those the other replicas are still sending back. A
        repair request is answered at once with what is here: the requester takes the union of
        every replica's answer, so what this server still lacks reaches it from the others."""
        source = message.source
        if not self._is_replica(source):
            return []
        effects: list[Effect] = []
        repairing = self._repair
        if repairing is not None and repairing.fetching and not message.repair:
            repairing.deferred.append(message)
        else:
            effects.extend(self._catch_up_answer(message))
        if message.restarted:
            # Whatever we had queued for the old incarnation is gone, and it may have lost
            # replicated updates it received but had not made durable: its new stream must not
            # advance our vv entry before we have caught up with it too. (A replica that restarts
            # before answering our repair request is asked again.)
            again = repairing is not None and source.dc in repairing.waiting
            send = self._request_catch_up(source, restarted=False, repair=again)
            if again:
                assert repairing is not None
                repairing.waiting[source.dc] = send.message.request_id  # type: ignore[union-attr]
            effects.append(send)
        return effects

    def _catch_up_answer(self, message: CatchUpRequest) -> list[Effect]:
        """Send every update of this DC above ``after`` that the store still holds, then the reply.

        Complete because GC never drops a local version before every replica durably has a newer
        one (``_replicated_floor``), and a replica's durable ``vv`` entry, hence its ``after``, is
        at least that newer version's timestamp. ``through`` is the clock: every later local
        timestamp is above it, and the effects here leave before those of any later call.

        A repair request gets every version held, of every DC (the newest version of each key is
        never collected, and a tombstone only once every replica is past it, so the union of the
        replicas' stores holds every key's newest version that reached one of them), and a
        ``RepairAnswer``."""
        source = message.source
        dc = self.dc
        replicated_dv = self.protocol.replicated_dv
        effects: list[Effect]
        if message.repair:
            store = self.store
            updates = [
                Update(key, version.value, version.timestamp, version.source_dc,
                       replicated_dv(version) if version.source_dc == dc else version.dv)
                for key in list(store.keys()) for version in store.versions(key)
            ]
            effects = [
                Send(source, RepairBatch(self.id, message.request_id, tuple(updates[start : start + CATCH_UP_BATCH])))
                for start in range(0, len(updates), CATCH_UP_BATCH)
            ]
        else:
            updates = [
                Update(key, version.value, version.timestamp, dc, replicated_dv(version))
                for key, version in self.store.written_by(dc, message.after)
            ]
            effects = [
                Send(source, ReplicateBatch(self.id, tuple(updates[start : start + CATCH_UP_BATCH])))
                for start in range(0, len(updates), CATCH_UP_BATCH)
            ]
        answer = RepairAnswer(self.stable, self.horizon, self.gsv) if message.repair else None
        effects.append(Send(source, CatchUpReply(self.id, message.request_id, self.vv[dc], self.vv[source.dc], answer)))
        self.stats.catch_up_updates_sent += len(updates)
        return effects

    def _on_repair_batch(self, message: RepairBatch, now_us: int) -> list[Effect]:
        """Part of a replica's answer to this server's repair: take every version (of any DC, this
        one's included; duplicates change nothing). Only the answer to the latest repair request
        counts: an older one may predate versions the replica collected since."""
        repairing = self._repair
        if repairing is None or repairing.waiting.get(message.source.dc) != message.request_id:
            return []
        store = self.store
        dc = self.dc
        for update in message.updates:
            if (store.insert(update.key, Version(update.value, update.timestamp, update.source_dc, update.dv))
                    and update.source_dc == dc):
                self.stats.repair_local_received += 1
        return []

    def _on_catch_up_reply(self, message: CatchUpReply, now_us: int) -> list[Effect]:
        """Every update of the source DC up to ``through`` arrived (before this, on the FIFO link).
        Any answer proves that much; only the answer to the latest request ends the freeze, since a
        restart of the replica after an older request may have cut the stream after it. The
        answer to a repair request also counts towards the repair."""
        source = message.source
        if not self._is_replica(source):
            return []
        if message.through > self.vv[source.dc]:
            self.vv[source.dc] = self._watermark(message, source.dc, message.through, now_us)
        if self._catching_up.get(source.dc) == message.request_id:
            del self._catching_up[source.dc]
        self.stats.catch_up_replies_received += 1
        self.stats.replica_knows_clock = max(self.stats.replica_knows_clock, message.origin_through)
        repairing = self._repair
        if repairing is None and message.origin_through > self.vv[self.dc]:
            # Only a server that lost its clock bound gets here (else the bound is above): never
            # issue a timestamp a replica already holds. (A repair raises it once every answer is in.)
            self.vv[self.dc] = message.origin_through
        answer = message.repair
        if (repairing is None or answer is None or repairing.waiting.get(source.dc) != message.request_id
                or any(len(vector) != self.num_dcs for vector in (answer.stable, answer.horizon, answer.gsv))):
            return []
        del repairing.waiting[source.dc]
        repairing.origin_through = max(repairing.origin_through, message.origin_through)
        repairing.threshold = merge_max(repairing.threshold, merge_max(answer.stable, answer.horizon))
        repairing.gsvs.append(answer.gsv)
        return [] if repairing.waiting else self._end_repair_fetch()

    def _end_repair_fetch(self) -> list[Effect]:
        """Every replica answered: keep the salvaged local versions no replica holds, restart the
        clock above every timestamp of this DC any replica holds (never reissue one), answer the
        requests that waited, and settle (``_settle_repair``).

        Why the threshold: a replica collected a version only once a newer one was visible under its
        stable vector and in every snapshot at or above its horizon; serving with a stable vector
        and a horizon at least the replicas' ones, no read here can miss such a version. The entry-
        wise minimum of the replicas' GSVs is added for Okapi: replication carries no dependency
        vector, so this DC's versions come back without theirs, whose remote entries were
        universally stable before this server died, hence at most that minimum (each GSV was taken
        after the death)."""
        repairing = self._repair
        assert repairing is not None
        dc = self.dc
        kept = [(key, version) for key, version in repairing.salvaged
                if version.source_dc == dc and version.timestamp > repairing.origin_through]
        for key, version in kept:
            self.store.insert(key, version)
        self.stats.repair_local_kept += len(kept)
        self.vv[dc] = max(self.vv[dc], repairing.origin_through, *(version.timestamp for _, version in kept))
        repairing.salvaged = ()
        repairing.fetching = False
        if repairing.gsvs:
            repairing.threshold = merge_max(repairing.threshold, merge_min(repairing.gsvs))
        effects: list[Effect] = []
        for request in repairing.deferred:
            effects.extend(self._catch_up_answer(request))
        repairing.deferred.clear()
        if not self.protocol.stabilizes or not self.peers:
            self._repair = None
            self.stats.repairs_completed += 1
        return effects

    def _settle_repair(self) -> None:
        """End the repair once the stable vector reaches the threshold; from then on snapshots below
        it are answered too_old (the horizon rises to it)."""
        repairing = self._repair
        assert repairing is not None
        if leq(repairing.threshold, self.stable):
            self.horizon = merge_max(self.horizon, repairing.threshold)
            self._repair = None
            self.stats.repairs_completed += 1

    def _refuse_while_repairing(self, request: ClientRequest) -> list[Effect]:
        repairing = self._repair
        assert repairing is not None
        if repairing.fetching:
            where = f"waiting for {len(repairing.waiting)} of {len(self.peers)} replicas' answers"
        else:
            where = "waiting for its stable vector to reach its replicas'"
        self.stats.rejected_requests += 1
        return [Respond(ErrorReply(request.request_id, "UNAVAILABLE",
                                   f"this server is repairing its data from its replicas ({where}); "
                                   "retry, or use another DC"))]

    def _watermark(self, message: ReplicateBatch | Heartbeat | CatchUpReply, dc: int, timestamp: int,
                   now_us: int) -> int:
        """What ``vv[dc]`` may become on a peer's ``timestamp`` (above the current ``vv[dc]``): the
        timestamp itself, or at most the clock plus the maximum offset. The clamped value is a valid
        lower bound (FIFO: every update of the DC below the message's timestamp has arrived) and moves
        up with this clock as later messages come; updates above it are stored all the same."""
        cap = offset_ceiling(now_us, self.config.max_clock_offset_us)
        if timestamp <= cap:
            return timestamp
        self.stats.clock_offset_clamps += 1
        self._note_offset(f"held back a {type(message).__name__} watermark", f"dc{dc}/p{message.source.partition}",
                          physical_of(timestamp), now_us)
        return max(self.vv[dc], cap)

    def _send_progress(self, effects: list[Effect]) -> None:
        """Tell the replicas how far we have their updates, when that moved since the last time."""
        vv = tuple(self.vv)
        if all(vv[peer.dc] == self._progress_sent.get(peer.dc, 0) for peer in self.peers):
            return
        self._progress_sent = {peer.dc: vv[peer.dc] for peer in self.peers}
        message = ReplicaProgress(self.id, vv)
        for peer in self.peers:
            effects.append(Send(peer, message))
        self.stats.progress_messages_sent += len(self.peers)

    def _on_replica_progress(self, message: ReplicaProgress, now_us: int) -> list[Effect]:
        source = message.source
        if self._is_replica(source) and len(message.vv) == self.num_dcs:
            received = message.vv[self.dc]
            if received > self._peer_progress.get(source.dc, 0):
                self._peer_progress[source.dc] = received
            previous = self._peer_vectors.get(source.dc)
            self._peer_vectors[source.dc] = message.vv if previous is None else merge_max(previous, message.vv)
        return []

    def _replicated_floor(self) -> int:
        """The highest local timestamp every replica is known to hold durably: what GC may trim of
        the local versions (the catch-up log). Okapi: the USV's local entry (each replica's durable
        vv entry is at least it: reports leave only after what they cover is written). Others: the
        minimum of the replicas' ``ReplicaProgress``."""
        if not self.peers:
            return ALL_TIMESTAMPS
        if self.protocol.uses_usv:
            return self.stable[self.dc]
        return min(self._peer_progress.get(peer.dc, 0) for peer in self.peers)

    def _heartbeat(self, now_us: int, effects: list[Effect], *, due: bool = True) -> None:
        """After a heartbeat interval without replication (or now, when not ``due``), promise peers
        no version at or below the current clock will follow, so their stable vectors keep moving."""
        self._next_heartbeat_us = self._last_replication_send_us + self.config.heartbeat_interval_us
        if due and now_us < self._next_heartbeat_us:
            return
        dc = self.dc
        if pack(now_us) > self.vv[dc]:
            self.vv[dc] = pack(now_us)
        message = Heartbeat(self.id, self.vv[dc], self._take_gsv())
        for peer in self.peers:
            effects.append(Send(peer, message))
        self.stats.heartbeats_sent += len(self.peers)
        self.stats.heartbeat_bytes += len(self.peers) * (DC_ID_BYTES + TIMESTAMP_BYTES)
        self._last_replication_send_us = now_us
        self._next_heartbeat_us = now_us + self.config.heartbeat_interval_us

    # ================================================================ stabilization

    def _stabilize(self, now_us: int, effects: list[Effect]) -> None:
        dc = self.dc
        if pack(now_us) > self.vv[dc]:
            self.vv[dc] = pack(now_us)
        floor = self.protocol.snapshot_floor(stable=self.stable, now_us_packed=pack(now_us))
        if self._pending or self._leases:
            # Snapshot reads this server coordinates hold the horizon back until they finish;
            # otherwise a slice that waits (Cure's tx_clock) longer than a stabilization period is
            # answered too_old, retried with a new snapshot that waits as long, and so on. Paged
            # SCANs' snapshots are held between pages too (``_lease``).
            floor = merge_min([floor, *(read.snapshot for read in self._pending.values()), *self._leases])
        report = VvReport(self.id, tuple(self.vv), floor)
        vector_bytes = TIMESTAMP_BYTES * self.num_dcs
        if self.is_aggregator:
            self._reports[self.id.partition] = report
            self._aggregate(now_us, effects)
        else:
            effects.append(Send(self.dc_members[0], report))
            self._count_stabilization(DC_ID_BYTES + vector_bytes, gc_bytes=vector_bytes)
        if self._gsv_unshared:
            # No replication batch or heartbeat took the GSV since it changed: a heartbeat takes
            # it now (and heartbeats then fall on the stabilization periods: one timer, one batch).
            self._heartbeat(now_us, effects, due=False)

    def _follow_vv(self, now_us: int, effects: list[Effect]) -> None:
        """One partition per DC: the DC's GSV (entry-wise min of its partitions' vv) is this vv, so
        it moves with every step instead of at the next stabilization period, and the changed GSV
        leaves with the replication batch this step sends. Why: under PUT load a DC's knowledge of
        another's updates otherwise waited up to a period at each DC on the UST path before the
        next hop took it (3 DCs x 1 partition, PUTs at saturation: see ``okapikv.bench.fast``)."""
        vv = tuple(self.vv)
        if vv != self.gsv:
            effects.extend(self._on_gsv_broadcast(GsvBroadcast(self.id, vv, None, self.horizon), now_us))
            if not self._outbox and now_us - self._last_replication_send_us >= GSV_SHARE_MIN_US:
                self._heartbeat(now_us, effects, due=False)

    def _take_gsv(self) -> Vector | None:
        """This DC's GSV for the batch or heartbeat about to leave for the replicas, if it changed
        since they last got it; else None. Okapi's USV round (each partition tells its replicas its
        DC's GSV) rides on the replication stream instead of a GsvExchange message per replica
        and period: under RO-TX + PUT load (3 DCs x 2 partitions) the cluster's stabilization
        messages fell from ~2,750 to ~920 a second (each costs a message's encoding, decoding and
        dispatch; stabilizing every 50 ms instead of 5 had bought Okapi ~5% throughput, half its
        gap to ``eventual``). A changed GSV leaves with the next replication batch, or at the
        latest with a heartbeat at the next stabilization period: never later than a per-period
        exchange did (idle 3x2 cluster: the same visibility lag)."""
        if not self._gsv_unshared:
            return None
        self._gsv_unshared = False
        self.stats.stabilization_bytes += TIMESTAMP_BYTES * self.num_dcs * len(self.peers)
        return self.gsv

    def _count_stabilization(self, size: int, gc_bytes: int = 0) -> None:
        self.stats.stabilization_messages_sent += 1
        self.stats.stabilization_bytes += size
        self.stats.gc_bytes += gc_bytes

    def _on_vv_report(self, report: VvReport, now_us: int) -> list[Effect]:
        if report.source.dc == self.dc:
            self._heard[report.source.partition] = now_us
        if self.is_aggregator and report.source.dc == self.dc:
            self._reports[report.source.partition] = report
        return []

    def _aggregate(self, now_us: int, effects: list[Effect]) -> None:
        """Aggregator: GSV = entry-wise min of every partition's vv; horizon = min of the floors."""
        if len(self._reports) < self.config.num_partitions:
            return
        reports = self._reports.values()
        gsv = merge_min(report.vv for report in reports)
        horizon = merge_min(report.floor for report in reports)
        usv: Vector | None = None
        vector_bytes = TIMESTAMP_BYTES * self.num_dcs
        if self.protocol.uses_usv and self.config.piggyback_usv:
            exchange = GsvExchange(self.id, gsv)
            for peer in self.peers:
                effects.append(Send(peer, exchange))
                self._count_stabilization(DC_ID_BYTES + vector_bytes)
            usv = self._usv_from(gsv)
        broadcast = GsvBroadcast(self.id, gsv, usv, horizon)
        for member in self.dc_members:
            if member != self.id:
                effects.append(Send(member, broadcast))
                usv_bytes = vector_bytes if usv is not None else 0
                self._count_stabilization(DC_ID_BYTES + vector_bytes + usv_bytes, gc_bytes=vector_bytes)
        effects.extend(self._on_gsv_broadcast(broadcast, now_us))

    def _usv_from(self, gsv: Vector) -> Vector | None:
        if len(self._remote_gsvs) < self.num_dcs - 1:
            return None
        return merge_min([gsv, *self._remote_gsvs.values()])

    def _on_gsv_broadcast(self, message: GsvBroadcast, now_us: int) -> list[Effect]:
        if message.source.dc != self.dc:
            return []
        self._heard[message.source.partition] = now_us
        gsv = merge_max(self.gsv, message.gsv)
        if gsv != self.gsv:
            self.gsv = gsv
            self._gsv_unshared = self.protocol.uses_usv and not self.config.piggyback_usv and bool(self.peers)
        usv = message.usv
        if self.protocol.uses_usv and not self.config.piggyback_usv:
            usv = self._usv_from(self.gsv)
        self.stable = self.protocol.on_stabilized(stable=self.stable, gsv=self.gsv, usv=usv)
        self.horizon = merge_max(self.horizon, message.horizon)
        effects: list[Effect] = []
        if self._parked:
            self._resume_parked(now_us, effects, clock_only=False)
        return effects

    def _on_gsv_exchange(self, message: GsvExchange, now_us: int) -> list[Effect]:
        return self._absorb_gsv(message.source.dc, message.gsv, now_us)

    def _absorb_gsv(self, source: int, gsv: Vector, now_us: int) -> list[Effect]:
        """A replica DC's GSV (a ``GsvExchange``, or riding on its replication stream)."""
        if source == self.dc:
            return []
        previous = self._remote_gsvs.get(source)
        self._remote_gsvs[source] = gsv if previous is None else merge_max(previous, gsv)
        if not self.protocol.uses_usv or self.config.piggyback_usv:
            return []
        # Raise the USV now instead of at the next GSV broadcast: remote updates become visible up
        # to a stabilization period sooner (idle 3-DC cluster, realistic WAN: visibility lag p99
        # from the UST path + 15.3 ms to + ~11). The USV is a min of valid lower bounds either way.
        self.stable = self.protocol.on_stabilized(stable=self.stable, gsv=self.gsv, usv=self._usv_from(self.gsv))
        effects: list[Effect] = []
        if self._parked:
            self._resume_parked(now_us, effects, clock_only=False)
        return effects

    # ================================================================ garbage collection

    def _settled(self, version: Version) -> bool:
        """No version ordered below ``version`` can still arrive: every replica's FIFO stream (and
        the local clock) is past its timestamp. Only then may a tombstone be dropped; otherwise a
        late concurrent write with a smaller timestamp would become the newest version here, while
        the replicas that kept the tombstone keep the key deleted (divergence).

        And a remote tombstone stays until every other replica has it too. Under Okapi its
        universal visibility already says so (the USV); the other protocols' stable vectors speak
        for their own DC only, so their replicas' ``ReplicaProgress`` vectors must. Why: the origin
        keeps its tombstone until every replica has it (``_replicated_floor``), but an origin that
        loses its disk is repaired from its replicas' stores (``_catch_up_answer``), and a replica
        that lacked the tombstone would otherwise never get it."""
        timestamp = version.timestamp
        if timestamp > min(self.vv):
            return False
        source = version.source_dc
        if self.protocol.uses_usv or source == self.dc:
            return True
        vectors = self._peer_vectors
        return all(peer.dc == source or (peer.dc in vectors and vectors[peer.dc][source] >= timestamp)
                   for peer in self.peers)

    def _universally_visible(self, version: Version) -> bool:
        """Visible in every snapshot at or above the horizon, and to every GET here; and at or below
        the replicated floor, so every local version it makes collectable (all older ones in its
        chain) is at every replica already and a catch-up never needs it."""
        return (
            version.timestamp <= self._gc_floor
            and self.protocol.visible_in_snapshot(version, self.horizon)
            and self.protocol.visible(version, self.stable)
        )

    def _expire_reads(self, now_us: int, effects: list[Effect]) -> None:
        """Fail the snapshot reads that cannot complete (UNAVAILABLE), and let go of expired leases.

        A read fails when a partition that owes it a slice has sent this server nothing for
        ``read_timeout_us`` (stopped or cut off: a restarted one announces itself, ``Restarted``),
        or when it is ``read_deadline_us`` old whatever its partitions do. It is not re-run: a
        partition that cannot answer one attempt in that time cannot answer another, and under
        overload each re-run would add the whole read's work again. A partition that stays in
        touch (its slice replies to other reads, its stabilization messages) is slow, not lost,
        and is waited for."""
        config = self.config
        silence_limit = now_us - config.read_timeout_us
        for read in list(self._reads.values()):
            if now_us - read.since_us > config.read_deadline_us:
                problem = f"not answered within read_deadline_us ({config.read_deadline_us / 1e6:g} s)"
            elif read.tx_id:
                sent_us = read.sent_us
                silent = [partition for partition in read.owed if partition != self.id.partition
                          and max(sent_us, self._heard.get(partition, 0)) < silence_limit]
                if not silent:
                    continue
                problem = (f"partition {silent[0]} owes a slice and has sent nothing for read_timeout_us "
                           f"({config.read_timeout_us / 1e6:g} s)")
            else:
                continue
            self.stats.read_timeouts += 1
            self._unpark(read)
            effects.extend(self._fail(read, "UNAVAILABLE", f"snapshot read failed: {problem}; retry later"))
        if self._leases:
            for snapshot in [snapshot for snapshot, until in self._leases.items() if until <= now_us]:
                del self._leases[snapshot]
