"""The partition server p(n, m) as a pure state machine (docs/protocol.md, "Operations"; docs/design.md).

``handle(message, now_us)`` and ``on_timer(now_us)`` return effects (``Send`` to a peer, ``Respond``
to a client); ``next_deadline()`` says when ``on_timer`` must run next, and ``woke`` whether the last
``handle`` moved it earlier (the server snapped back from idle pacing: drivers re-arm their timer).
``now_us`` is the server's physical clock reading (wall clock plus any injected skew), in
microseconds. The gRPC server and the
simulator are two drivers of this one class.

``PartitionServer`` holds dispatch (handlers registered typed by message: ``okapikv.core.dispatch``),
the client operations (GET, PUT, SWAP, DELETE), the replication stream between replicas
(docs/protocol.md, "Replication and heartbeats") and the waits; its shared state and the maximum
clock offset are ``okapikv.core.state``'s, the HLC and the vectors are moved by their holders alone
(``okapikv.core.clock``, ``okapikv.core.stable``), and collaborators hold the other mechanisms,
each with its own state and a view of the shared one:

- ``stabilization`` (``okapikv.core.stabilization``): how the stable vector moves, one strategy
  chosen at construction from the protocol and the options;
- ``reads`` (``okapikv.core.reads``): snapshot reads, coordinated and served;
- ``catch_up`` (``okapikv.core.catchup``): catch-up and repair after a restart;
- ``gc`` (``okapikv.core.gc``): garbage collection;
- ``pacing`` (``okapikv.core.pacing``): the idle backoff of the periodic work and its snap-back;
- ``members`` (``okapikv.core.membership``): the membership epoch, the DCs the minima count, and
  the relay of a removed DC's updates between the survivors.

Blocking (Cure's and GentleRain's waits) never sleeps here: the request is parked (``parked``),
its condition (clock >= t, or stable time >= t) is part of ``next_deadline`` or is re-checked when
stabilization advances, and the wait's duration is recorded in ``stats`` when the request resumes.

Durability hooks (the core stays pure; ``okapikv.storage`` and the gRPC driver do the I/O):
- ``track_changes`` / ``drain_changes()``: the versions inserted and garbage-collected since the last
  call, in order, with the current vectors. A durable driver writes them (one transaction per group
  of calls) before it carries out the effects of those calls, so nothing that left this server
  (a reply, a replicated update, a report) can be lost by a crash.
- ``restore(...)``: load what was recovered, restarting the HLC at a persisted upper bound of
  every local timestamp issued or announced, so none is ever issued twice.
- ``start_catch_up()``: after a restart, ask every replica for what the recovered state lacks
  (``okapikv.core.catchup``).

Invariants (tested in ``tests/unit/test_server_*.py`` and ``tests/property``):
- a refused request (``ErrorReply`` INVALID_ARGUMENT or OUT_OF_RANGE) changes nothing, not even the
  stable vector;
- every local timestamp is above the previous one and above the client's dependencies; a heartbeat
  or replication message never announces a timestamp before the updates at or below it were sent;
- ``vv``, ``gsv``, ``horizon`` and ``stable`` only grow (GentleRain: the GST, ``min(stable)``);
- a parked request is re-run once its wait may be over, and its effects leave before any heartbeat
  that covers their timestamps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import get_args

from mypy_extensions import mypyc_attr

from okapikv.core import counters, expiry, growth
from okapikv.core.catchup import CatchUp, Repair, Verify
from okapikv.core.config import CoreConfig
from okapikv.core.dispatch import Handlers
from okapikv.core.gc import GarbageCollector
from okapikv.core.membership import REMOVED, Members, Membership
from okapikv.core.messages import (
    CatchUpReply,
    CatchUpRequest,
    ClientReply,
    ClientRequest,
    DeleteRequest,
    Effect,
    ErrorCode,
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
    Message,
    PutManyReply,
    PutManyRequest,
    PutRequest,
    ReadTxRequest,
    RelayReply,
    RelayRequest,
    RepairBatch,
    ReplicaProgress,
    ReplicateBatch,
    Respond,
    Restarted,
    ScanRequest,
    ScanSlice,
    Send,
    ServerId,
    Session,
    SliceReply,
    StableTimeReport,
    SwapReply,
    SwapRequest,
    TxSlice,
    Update,
    VvReport,
    WriteReply,
)
from okapikv.core.mvstore import COUNTER_MAGIC, EXPIRY_MAGIC, RESERVED_PREFIXES, Change, MultiVersionStore, Version
from okapikv.core.pacing import Pacing
from okapikv.core.protocols.base import DC_ID_BYTES, TIMESTAMP_BYTES
from okapikv.core.reads import SnapshotReads
from okapikv.core.stabilization import stabilization_for
from okapikv.core.state import Parked, PartitionState, Wait, clock_offset_error
from okapikv.core.timestamps import (
    CLOCK_PUT_WAITS,
    LOGICAL_BITS,
    LOGICAL_MASK,
    WaitForClock,
    offset_ceiling,
    pack,
    physical_of,
)
from okapikv.core.vectors import Vector, leq, merge_max

__all__ = ["Changes", "PartitionServer", "Repair", "Verify"]

#: A changed GSV that no replication batch of this step carries leaves with a heartbeat, but at most
#: this often (``UsvFollowingVv``: the GSV moves at every step).
GSV_SHARE_MIN_US = 1_000

Outcome = list[Effect] | Wait


@dataclass(slots=True)
class _PutManyProgress:
    """How far a parked ``PutManyRequest`` got: its first ``done`` pairs are written, the newest
    at ``timestamp``; ``remote`` merges the remote dependencies of the versions they overwrote."""

    done: int
    timestamp: int
    remote: Vector


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


# Subclassable in the compiled build too (scripts/build_compiled.py): the tests' deliberately broken
# servers override its steps to show the simulator's checkers catch them; a no-op when not compiled.
@mypyc_attr(allow_interpreted_subclasses=True)
class PartitionServer(PartitionState):
    def __init__(self, config: CoreConfig, *, store: MultiVersionStore | None = None) -> None:
        super().__init__(config, store=store)
        self._outbox: list[Update] = []
        #: bulk PUTs parked part-way (Cure, GentleRain: one write per clock microsecond), by request id
        self._put_many_progress: dict[int, _PutManyProgress] = {}
        self._last_replication_send_us = 0
        self._next_heartbeat_us = 0
        self.pacing = Pacing(config)
        #: the heartbeat period now: ``heartbeat_interval_us``, or the idle interval while idle
        self._heartbeat_period_us = config.heartbeat_interval_us
        #: the last ``handle`` snapped the server back from idle: its next deadline moved earlier
        self.woke = False
        self.stabilization = stabilization_for(self, resume=self._resume_parked)
        self.catch_up = CatchUp(self, stable_moves=self.stabilization.runs)
        self.reads = SnapshotReads(self, catch_up=self.catch_up, admit=self._admit)
        self.gc = GarbageCollector(self, self.reads, universal=self.stabilization.universal)
        #: the most DCs this server may grow to (``okapikv.core.growth``): a driver sets the DCs it
        #: can reach (its config's); None: no limit (the simulator)
        self.dc_limit: int | None = None
        self.members = Members(self, grow=self.grow)
        self._view_seen = self.members.view
        #: joining DC -> what it must reach to be counted here (``_caught_up``)
        self._joining_targets: dict[int, Vector] = {}
        # the stabilization hooks on the per-message paths, looked up once
        self._follow = self.stabilization.follow
        self._take_gsv = self.stabilization.take_gsv
        self._absorb_gsv = self.stabilization.absorb_gsv
        # typed by message: a handler that does not take its message's type is a mypy error
        handlers: Handlers[Outcome] = Handlers()
        self._handlers = handlers
        handlers.register(GetRequest, self._on_get)
        handlers.register(PutRequest, self._on_put)
        handlers.register(PutManyRequest, self._on_put_many)
        handlers.register(SwapRequest, self._on_swap)
        handlers.register(DeleteRequest, self._on_delete)
        handlers.register(IncrRequest, self._on_incr)
        handlers.register(ExpireRequest, self._on_expire)
        handlers.register(ReadTxRequest, self.reads.on_read)
        handlers.register(ScanRequest, self.reads.on_read)
        handlers.register(ReplicateBatch, self._on_replicate)
        handlers.register(Heartbeat, self._on_heartbeat)
        handlers.register(VvReport, self.stabilization.on_vv_report)
        handlers.register(GsvBroadcast, self.stabilization.on_gsv_broadcast)
        handlers.register(GsvExchange, self.stabilization.on_gsv_exchange)
        handlers.register(StableTimeReport, self.stabilization.on_stable_time_report)
        handlers.register(GstBroadcast, self.stabilization.on_gst_broadcast)
        handlers.register(TxSlice, self.reads.on_slice)
        handlers.register(ScanSlice, self.reads.on_slice)
        handlers.register(SliceReply, self.reads.on_slice_reply)
        handlers.register(Restarted, self.reads.on_restarted)
        handlers.register(CatchUpRequest, self._on_catch_up_request)
        handlers.register(CatchUpReply, self.catch_up.on_reply)
        handlers.register(ReplicaProgress, self.gc.on_replica_progress)
        handlers.register(RepairBatch, self.catch_up.on_repair_batch)
        handlers.register(MembershipUpdate, self._on_membership)
        handlers.register(RelayRequest, self.members.on_relay_request)
        handlers.register(RelayReply, self._on_relay_reply)
        #: the client requests whose one vector is their session's (every single-key request):
        #: ``handle_batch`` takes them past ``_dispatch``'s checks that concern other messages
        #: (``source``, nested vectors), as these hold neither; the rest go the general way
        self._session_only = {kind: handlers.of_type(kind) for kind in get_args(ClientRequest)
                              if growth.session_only(kind)}

    # ================================================================ driver interface

    def handle(self, message: Message, now_us: int) -> list[Effect]:
        """Process one message; returns the effects to carry out."""
        return self.handle_batch((message,), now_us)

    def handle_batch(self, messages: Sequence[Message], now_us: int) -> list[Effect]:
        """Process several messages at one clock reading; local updates they create leave in one
        replication batch per peer instead of one each. A single-key client request whose session
        fits and which this server serves goes straight to its handler: ``_dispatch`` would find
        nothing else to do for it (nothing to fit, no ``source``)."""
        self.woke = False
        effects: list[Effect] = []
        session_only = self._session_only
        for message in messages:
            handler = session_only.get(type(message))
            if (handler is not None and len(message.session.stable) == self.num_dcs  # type: ignore[union-attr]
                    and self.catch_up.serving and self.members.serving):
                outcome = handler(message, now_us)
                effects.extend(outcome if isinstance(outcome, list) else self._park(message, outcome, now_us, now_us))
            else:
                effects.extend(self._dispatch(message, now_us, now_us))
        return self._send_out(effects, now_us)

    def _send_out(self, effects: list[Effect], now_us: int) -> list[Effect]:
        """After a step: where the DC's GSV follows this vv (``UsvFollowingVv``) and it moved with no
        update waiting to carry it, a heartbeat takes it (at most every ``GSV_SHARE_MIN_US`` after a
        batch, never while idle); then the step's local updates leave, one batch per peer."""
        follow = self._follow
        if (follow is not None and follow(now_us, effects) and not self._outbox and not self.pacing.idle
                and now_us - self._last_replication_send_us >= GSV_SHARE_MIN_US):
            self._heartbeat(now_us, effects)
        self._flush_outbox(effects, now_us)
        return effects

    def on_timer(self, now_us: int) -> list[Effect]:
        """Run whatever is due at ``now_us``: parked requests, stabilization, heartbeat, GC."""
        effects: list[Effect] = []
        repairing = self.catch_up.repair
        if repairing is not None and not repairing.fetching:
            self.catch_up.settle()
        if self.parked or self.next_tick:
            self._resume_parked(now_us, effects, clock_only=True)
            # Updates of resumed writes must leave before any heartbeat that covers their timestamps.
            self._flush_outbox(effects, now_us)
        pacing = self.pacing
        was_idle = pacing.idle
        waiting = bool(self.parked) or bool(self.next_tick) or bool(self.catch_up.awaited) or repairing is not None
        if pacing.settle(now_us, waiting=waiting):
            if not was_idle:
                self.stats.idle_spells += 1
                self._heartbeat_period_us = pacing.interval_us
            if now_us >= pacing.tick_us:
                self._idle_tick(now_us, effects)
            return effects
        if was_idle:
            self._snap_back(now_us)
        stabilization = self.stabilization
        stabilized = now_us >= stabilization.next_us
        if stabilized:
            stabilization.stabilize(now_us, effects, self.gc.floor(now_us))
            if self.members.joining:
                self._check_joining(now_us, effects)
        if self.num_dcs > 1 and (now_us >= self._next_heartbeat_us or (stabilized and stabilization.gsv_unshared)):
            # Due; or the GSV changed and no replication batch or heartbeat took it since: a heartbeat
            # takes it now (and heartbeats then fall on the stabilization periods: one timer, one batch).
            self._heartbeat(now_us, effects)
        gc = self.gc
        if now_us >= gc.next_pass_us:
            # Each GC interval, the snapshot reads that cannot complete fail, then a pass begins.
            self.reads.expire(now_us, effects)
            gc.start_pass(now_us, effects)
        if now_us >= gc.next_slice_us:
            gc.collect(now_us)
        self._flush_outbox(effects, now_us)
        return effects

    def next_deadline(self) -> int:
        """The clock reading at which ``on_timer`` must run next."""
        if self.pacing.idle:
            return self.pacing.tick_us  # nothing is parked while idle (a park snaps back)
        gc = self.gc
        deadline = min(gc.next_pass_us, gc.next_slice_us, self.stabilization.next_us)
        if self.num_dcs > 1:
            deadline = min(deadline, self._next_heartbeat_us)
        if self.next_tick:
            deadline = min(deadline, physical_of(self.vv[self.dc]) + 1)
        for parked in self.parked:
            if isinstance(parked.wait, WaitForClock):
                deadline = min(deadline, parked.wait.clock_us)
        return deadline

    def _idle_tick(self, now_us: int, effects: list[Effect]) -> None:
        """While idle (``okapikv.core.pacing``): the round, the heartbeat and the GC pass together,
        once per idle interval."""
        pacing = self.pacing
        tick = pacing.tick_us = now_us + pacing.interval_us
        stabilization = self.stabilization
        if stabilization.runs:
            stabilization.stabilize(now_us, effects, self.gc.floor(now_us))
            stabilization.next_us = tick
            if self.members.joining:
                self._check_joining(now_us, effects)
        if self.num_dcs > 1:
            self._heartbeat(now_us, effects)
        gc = self.gc
        self.reads.expire(now_us, effects)
        gc.start_pass(now_us, effects)
        gc.collect(now_us)
        gc.next_pass_us = gc.next_slice_us = tick

    def _wake(self, now_us: int, effects: list[Effect], *, tell: bool) -> None:
        """Activity at ``now_us`` (``okapikv.core.pacing``): when it ends an idle spell, snap back; with
        ``tell`` (a client write, a remote update, a parked request) wake the DC's other partitions
        too when ``Pacing.call_due`` says so (a heartbeat from a member of one's own DC is a wake-up
        call: it announces nothing), so that they heartbeat past this update and run their rounds at
        the busy period (docs/protocol.md, "Idle pacing")."""
        pacing = self.pacing
        calling = tell and pacing.call_due(now_us)
        if pacing.activity(now_us):
            self._snap_back(now_us)
        if calling:
            call = Heartbeat(self.id, self.vv[self.dc], None)
            for member in self.dc_members:
                if member != self.id:
                    effects.append(Send(member, call))

    def _snap_back(self, now_us: int) -> None:
        """Leave the idle pacing: the round and the heartbeat are due at once, then at the busy periods."""
        self.woke = True
        self.stats.idle_wakes += 1
        self._heartbeat_period_us = self.config.heartbeat_interval_us
        if self.stabilization.runs:
            self.stabilization.next_us = now_us
        self._next_heartbeat_us = now_us

    @property
    def parked_count(self) -> int:
        return len(self.parked) + len(self.next_tick)

    @property
    def pending_reads(self) -> int:
        """Snapshot reads this server coordinates and has not answered (running or parked)."""
        return self.reads.count

    @property
    def snapshot_leases(self) -> int:
        """Paged SCANs' snapshots held for their next page (``snapshot_lease_us``)."""
        return self.reads.leases

    def cancel_reads(self, request_ids: Iterable[int]) -> int:
        """The clients of these requests went away (a closed connection, a cancelled RPC): drop
        those that are snapshot reads still unanswered, so no work is done for them any more and
        they stop counting against the limits and holding the GC horizon back. Slices already
        sent are answered and ignored (each is bounded by the scan budgets). Returns how many."""
        return self.reads.cancel(request_ids)

    @property
    def catching_up(self) -> tuple[int, ...]:
        """DCs whose catch-up answer this server still waits for (their ``vv`` entry is frozen)."""
        return tuple(sorted(self.catch_up.awaited))

    @property
    def repairing(self) -> str | None:
        """None, or where a repair stands: "fetching" (waiting for replicas' answers) or "settling"
        (waiting for the stable vector to reach the replicas'). Client requests are refused and
        slices wait until it ends."""
        return self.catch_up.status

    @property
    def repair_waiting(self) -> tuple[int, ...]:
        """DCs whose repair answer this server still waits for."""
        repair = self.catch_up.repair
        return tuple(sorted(repair.waiting)) if repair is not None else ()

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
        hlc_floor: int,
    ) -> None:
        """Load a recovered state into a fresh server, before its first ``handle`` or ``on_timer``.

        ``hlc_floor`` must be at least every local timestamp the previous incarnation issued or
        announced (the driver persists such a bound ahead of use): the HLC restarts there, so a
        timestamp is never issued twice and no promise made by a heartbeat is broken.
        """
        for vector in (vv, stable, gsv, horizon):
            if len(vector) > self.num_dcs:
                raise ValueError(f"recovered vector {vector} has more than {self.num_dcs} entries")
        # a state written under a shorter DC list has fewer entries (``okapikv.core.growth``)
        vv, stable, gsv, horizon = (growth.fit(vector, self.num_dcs) for vector in (vv, stable, gsv, horizon))
        versions = ((key, growth.fit_version(version, self.num_dcs)) for key, version in versions)
        tracking = self.store.track_changes
        self.store.track_changes = False
        try:
            for key, version in versions:
                self.store.insert(key, version)
        finally:
            self.store.track_changes = tracking
        self.version_vector.restore(vv, hlc_floor)
        self.advance_stable(stable)
        self.advance_gsv(gsv)
        self.advance_horizon(horizon)

    def start_catch_up(self, repair: Repair | None = None, verify: Verify | None = None) -> list[Effect]:
        """Ask every replica for its DC's updates above our ``vv`` entry (call once after a restart,
        before any other effect of this incarnation leaves: the request tells the replica to stop
        trusting our old stream).

        With ``repair`` (the local data was lost or damaged; ``restore`` got what survived, if
        anything) ask every replica for everything it holds instead, this DC's versions included,
        and serve nothing until the repair ends (``okapikv.core.catchup``). With ``verify`` (a start
        that may hold less than its replicas know it had), check their answers for lost writes.

        The membership announcement goes first on each link: a server of a new DC
        (``okapikv.core.growth``) may reach a replica that has not grown yet, which learns the new
        DC from it before anything else the new DC sends."""
        members = self.members.start()
        announced = [effect for effect in members
                     if isinstance(effect, Send) and isinstance(effect.message, MembershipUpdate)]
        rest = [effect for effect in members if not (isinstance(effect, Send)
                                                     and isinstance(effect.message, MembershipUpdate))]
        return announced + self.catch_up.start(repair, verify) + rest

    # ================================================================ membership

    @property
    def membership(self) -> Membership:
        return self.members.view

    def change_membership(self, view: Membership, now_us: int) -> list[Effect]:
        """Adopt ``view`` if it is ordered after this server's membership (the admin RPC, `okapi dc
        remove`), pass it on, and start relaying what a newly removed DC sent (``okapikv.core.membership``)."""
        self.woke = False
        effects = self._membership_moved(self.members.change(view), now_us)
        return self._send_out(effects, now_us)

    def grow(self, size: int) -> None:
        """Grow to ``size`` DCs (``okapikv.core.growth``): the shared state, then what the
        collaborators keep per DC or per report (each a vector of the old length). The membership
        grows with it (``Members.change`` calls this first)."""
        if not growth.grow(self, size, self.dc_limit):
            return
        fit, fit_message = growth.fit, growth.fit_message
        self._outbox = [fit_message(update, size) for update in self._outbox]
        for progress in self._put_many_progress.values():
            progress.remote = fit(progress.remote, size)
        self._joining_targets = {dc: fit(target, size) for dc, target in self._joining_targets.items()}
        stabilization = self.stabilization
        stabilization._reports = {partition: fit_message(report, size)
                                  for partition, report in stabilization._reports.items()}
        stabilization._remote_gsvs = {dc: fit(gsv, size) for dc, gsv in stabilization._remote_gsvs.items()}
        reads = self.reads
        for read in {id(read): read for read in (*reads._reads.values(), *reads._pending.values())}.values():
            read.request = fit_message(read.request, size)
            read.snapshot = fit(read.snapshot, size) if read.snapshot else read.snapshot
            read.owed = {partition: fit_message(owed, size) for partition, owed in read.owed.items()}
            read.items = [fit_message(item, size) for item in read.items]
        reads._leases = {fit(snapshot, size): until for snapshot, until in reads._leases.items()}
        gc = self.gc
        gc._peer_vectors = {dc: fit(vector, size) for dc, vector in gc._peer_vectors.items()}
        repairing = self.catch_up.repair
        if repairing is not None:
            repairing.threshold = fit(repairing.threshold, size)
            repairing.gsvs = [fit(gsv, size) for gsv in repairing.gsvs]

    def _on_membership(self, message: MembershipUpdate, now_us: int) -> list[Effect]:
        return self._membership_moved(self.members.on_update(message, now_us), now_us)

    def _check_joining(self, now_us: int, effects: list[Effect]) -> None:
        """With each stabilization round: count the joining DCs that caught up here."""
        if self.members.check_joining(self._caught_up):
            effects.extend(self.stabilization.recount(now_us))

    def _caught_up(self, dc: int) -> bool:
        """Whether joining DC ``dc`` has caught up here (``okapikv.core.membership``): no catch-up
        with it pending, and what it reports at or above what this server had when it first
        looked: where the USV is computed here, its GSV against this server's stable vector;
        elsewhere its stream against the other counted streams. From then on every minimum here
        includes it, so nothing becomes visible here that it lacks; what was visible before waits
        for it in the stable vector, which stalls until it passes (never moves back). A target
        taken once, not the freshest figure: a DC's GSV reaches this one a WAN delay after it was
        taken, so even a DC caught up trails the freshest figure, by more where its links are
        slower."""
        if dc in self.catch_up.awaited:
            return False
        reached: Vector | None
        if self.stabilization.computes_usv:
            reached, now_target = self.stabilization.remote_gsv(dc), self.stable
        else:
            reached, now_target = (self.vv[dc],), (self.counted_min(self.vv),)
        target = self._joining_targets.setdefault(dc, now_target)
        return reached is not None and leq(target, reached)

    def _on_catch_up_request(self, message: CatchUpRequest, now_us: int) -> list[Effect]:
        if self.members.ignores(message.source.dc):  # a removed DC's server restarted
            return self.members.tell(message.source)
        # the membership first: a new DC's server (``okapikv.core.growth``), repairing from an
        # initial membership, learns that its DC is joining before its repair can end
        effects = self.members.on_restart(message.source) if message.restarted else []
        effects.extend(self.catch_up.on_request(message, now_us))
        return effects

    def _on_relay_reply(self, message: RelayReply, now_us: int) -> list[Effect]:
        return self._membership_moved(self.members.on_relay_reply(message, now_us), now_us)

    def _membership_moved(self, effects: list[Effect], now_us: int) -> list[Effect]:
        """The counted DCs may have changed: recompute the stable vector at once from the GSVs
        already here (``stabilization``), re-check what is parked, and snap back from idle. A DC
        whose state changed starts afresh: what its previous incarnation reported (its GSV, its
        replica progress) says nothing of the new one's. When this server's own DC came back, ask
        the replicas again (a catch-up, or the repair it was in)."""
        members = self.members
        self.stats.membership_changes = members.changes
        view = members.view
        if view is not self._view_seen:
            # a DC new to this server (``okapikv.core.growth``) is handled as one that was removed
            seen = self._view_seen.states + (REMOVED,) * (len(view.states) - len(self._view_seen.states))
            for dc, (old, new) in enumerate(zip(seen, view.states, strict=True)):
                if old != new and dc != self.dc:
                    self.stabilization.forget(dc)
                    self.gc.forget(dc)
                    self._joining_targets.pop(dc, None)
                    if old == REMOVED and members.serving_peers:
                        # A new incarnation, as after a restart: its stream moves vv[dc] only once it
                        # has answered (what it sent before is unknown here), and a repair it asked for
                        # while removed, and nobody answered, it asks again (``CatchUp.on_request``).
                        effects.append(self.catch_up.ask(ServerId(dc, self.id.partition)))
            self._view_seen = view
        if members.rejoined:
            members.rejoined = False
            repairing = self.catch_up.repair
            effects.extend(self.catch_up.start(None if repairing is None else Repair(repairing.salvaged)))
        stabilization = self.stabilization
        if stabilization.runs:
            effects.extend(stabilization.recount(now_us))
            self._wake(now_us, effects, tell=True)
        return effects

    # ================================================================ dispatch and waits

    def _dispatch(self, message: Message, now_us: int, since_us: int) -> list[Effect]:
        handler = self._handlers.of_type(type(message))
        if handler is None:
            raise TypeError(f"unknown message type {type(message).__name__}")
        # vectors from a client or server that knows fewer (or more) DCs (``okapikv.core.growth``)
        message = growth.fit_message(message, self.num_dcs)
        source = getattr(message, "source", None)
        if source is not None and source.dc >= self.num_dcs and type(message) is not MembershipUpdate:
            # from a DC this server does not know yet: it announces its membership first (growth),
            # so this is a stray (a message that overtook it cannot, on a FIFO link); nothing changes
            return []
        if isinstance(message, ClientRequest) and not (self.catch_up.serving and self.members.serving):
            if not self.catch_up.serving:
                return self.catch_up.refuse(message)
            self.stats.rejected_requests += 1
            return [Respond(ErrorReply(message.request_id, ErrorCode.UNAVAILABLE,
                                       f"this DC was removed from the cluster (membership epoch "
                                       f"{self.members.view.epoch}); use another DC"))]
        outcome = handler(message, now_us)
        if isinstance(outcome, list):
            return outcome
        return self._park(message, outcome, now_us, since_us)

    def _park(self, message: Message, outcome: Wait, now_us: int, since_us: int) -> list[Effect]:
        if type(outcome) is WaitForClock and outcome.reason == "clock_tick":
            self.next_tick.append(Parked(message, outcome, since_us))  # for the next microsecond
        else:
            self.parked.append(Parked(message, outcome, since_us))
        effects: list[Effect] = []
        self._wake(now_us, effects, tell=True)  # a parked request waits for the stable vector or clock
        return effects

    def _resume_parked(self, now_us: int, effects: list[Effect], *, clock_only: bool) -> None:
        """Re-run what may go at ``now_us``: the writes waiting for the next clock microsecond, one
        per microsecond the clock has passed since the partition's last timestamp, oldest first;
        then whatever else has waited long enough (``clock_only``: only what waits for the clock).

        Cure's and GentleRain's writes take one microsecond each. Each queued write is run at the
        partition's next free microsecond (``tick``, at most ``now_us``), the reading a server that
        handles one request at a time would have given it: a batch read at one clock reading is
        released in one call once the clock has moved past it, as the paper's servers would have
        timestamped its writes one by one, not one per driver round. A ready write that finds the
        microsecond taken joins ``next_tick`` without its handler running again (a backlog of n
        writes costs n handler runs, not n per microsecond)."""
        queue = self.next_tick
        while queue:
            tick = physical_of(self.vv[self.dc]) + 1  # the partition's next free microsecond
            if tick > now_us:
                break
            parked = queue.popleft()
            outcome = self._handlers(parked.message, tick)
            if isinstance(outcome, list):
                self.stats.record_wait(parked.wait.reason, tick - parked.since_us)
                effects.extend(outcome)
            elif type(outcome) is WaitForClock and outcome.reason == "clock_tick":
                queue.appendleft(parked)  # not its turn after all: first in line still
                break
            else:
                self.parked.append(Parked(parked.message, outcome, parked.since_us))
        if not self.parked:
            return
        still: list[Parked] = []
        ready: list[Parked] = []
        min_stable = min(self.stable)
        for parked in self.parked:
            wait = parked.wait
            if isinstance(wait, WaitForClock):
                (ready if now_us >= wait.clock_us else still).append(parked)
            elif not clock_only and min_stable >= wait.threshold:
                ready.append(parked)
            else:
                still.append(parked)
        self.parked = still
        spent = pack(now_us) <= self.vv[self.dc]
        for parked in ready:
            message = parked.message
            if spent and parked.wait.reason in CLOCK_PUT_WAITS:
                # Cure's and GentleRain's writes take the clock's microsecond, one write per
                # microsecond (``physical_put_timestamp``): once this one is taken, every other write
                # waits for the next, so its handler is not run again only to park it again (a
                # backlog of n writes would cost n handler runs per microsecond).
                queue.append(parked)
                continue
            if type(message) is TxSlice or type(message) is ScanSlice:  # its reply says how long it waited
                outcome = self.reads.on_slice(message, now_us, now_us - parked.since_us)
            else:
                outcome = self._handlers(message, now_us)
            if isinstance(outcome, list):
                self.stats.record_wait(parked.wait.reason, now_us - parked.since_us)
                effects.extend(outcome)
                spent = pack(now_us) <= self.vv[self.dc]
            else:
                self.parked.append(Parked(parked.message, outcome, parked.since_us))

    # ================================================================ client operations

    def _admit(self, request_id: int, session: Session, now_us: int, problem: str | None) -> list[Effect] | None:
        """The refusal of a request with ``problem``, a session that does not fit the cluster, or a
        session reaching past the clock ceiling; else None, once the session is merged (a refused
        request changes nothing)."""
        if problem is None and len(session.stable) != self.num_dcs:  # fitted at dispatch unless it cannot be
            problem = growth.session_problem(session.stable, self.num_dcs)
        if problem:
            return self.reject(request_id, problem)
        if self.offset_guard:
            # ``ceiling`` inlined: this runs for every client request
            ceiling = ((now_us + self.max_offset_us) << LOGICAL_BITS) | LOGICAL_MASK
            hlc = self.vv[self.dc]
            if hlc > ceiling:
                ceiling = hlc
            ahead = session.dt if session.dt > ceiling else max(session.stable)
            if ahead > ceiling:
                return self._refuse_offset(request_id, "the session depends on", ahead, now_us)
        if session.stable != self.stable:  # an equal vector (a session in step with this server) merges to itself
            self.advance_stable(session.stable)
        return None

    def _refuse_offset(self, request_id: int, what: str, timestamp: int, now_us: int) -> list[Effect]:
        self.stats.clock_offset_refusals += 1
        ahead_us = self.note_offset("refused a client request", "a client", physical_of(timestamp), now_us)
        message = clock_offset_error(what, ahead_us, self.config)
        return [Respond(ErrorReply(request_id, ErrorCode.OUT_OF_RANGE, message))]

    def _check_value(self, value: bytes) -> str | None:
        if len(value) > self.config.max_value_bytes:
            return f"value of {len(value)} bytes exceeds the limit of {self.config.max_value_bytes} bytes"
        # a client's value may begin with neither (``counters.reserved``, ``expiry.reserved``): one test
        if not value.startswith(RESERVED_PREFIXES):
            return None
        return counters.reserved(value) or expiry.reserved(value)

    def _visible(self, version: Version) -> bool:
        # a local version is visible under every protocol (``Protocol.visible``): no call for it
        return version.source_dc == self.dc or self.protocol.visible(version=version, stable=self.stable)

    def _read_contribution(self, version: Version | None) -> tuple[Vector, int]:
        """What a client that read ``version`` must merge into its session: the version's
        dependencies (remote entries into ``stable``, the local entry into ``dt``)."""
        if version is None:
            return self.stable, 0
        dc = self.dc
        if version.dv is None and version.source_dc == dc:  # local, depending on nothing remote: no vector
            return self.stable, version.timestamp
        dv = self._dependency_of(version)
        if self.num_dcs == 1:  # no remote entries to merge
            return self.stable, dv[0]
        return merge_max(self.stable, dv[:dc] + (0,) + dv[dc + 1 :]), dv[dc]

    def _dependency_of(self, version: Version) -> Vector:
        return version.dependency_vector(self.num_dcs)

    def _on_get(self, request: GetRequest, now_us: int) -> Outcome:
        key = request.key
        # ``check_key``'s common case inlined (a key that passes): no call per request
        problem = None if 0 < len(key) <= self.config.max_key_bytes else self.check_key(key)
        refused = self._admit(request.request_id, request.session, now_us, problem)
        if refused is not None:
            return refused
        self.stats.operations["get"] += 1
        version = self.read_newest(key, self._visible, now_us)
        stable, dt = self._read_contribution(version)
        value = version.value if version is not None else None
        return [Respond(GetReply(request.request_id, value, Session(stable, max(dt, request.session.dt))))]

    def _on_put(self, request: PutRequest, now_us: int) -> Outcome:
        problem = self.check_key(request.key) or self._check_value(request.value)
        value = request.value
        if request.expires:
            value = expiry.wrap(value, expiry.resolve(request.expires, now_us))
        return self._write("put", request.request_id, request.key, value, request.session, now_us, problem)

    def _on_delete(self, request: DeleteRequest, now_us: int) -> Outcome:
        problem = self.check_key(request.key)
        return self._write("delete", request.request_id, request.key, None, request.session, now_us, problem)

    def _on_incr(self, request: IncrRequest, now_us: int) -> Outcome:
        problem = self.check_key(request.key)
        if problem is None and not counters.INT64_MIN <= request.by <= counters.INT64_MAX:
            problem = counters.NOT_AN_INTEGER
        return self._write("incr", request.request_id, request.key, None, request.session, now_us, problem,
                           by=request.by)

    def _on_expire(self, request: ExpireRequest, now_us: int) -> Outcome:
        """TTL, PERSIST, EXPIRE and their kin (``okapikv.core.expiry``): read the key and, with
        ``expires`` and a value to keep, write that value again with the new expiry (a write like
        a PUT, depending on the version it read). PERSIST of a key without an expiry, and any
        expiry of an absent key, write nothing. A counter's expiry is part of its state
        (``okapikv.core.counters``): EXPIRE and PERSIST write the state with the new expiry."""
        request_id, key, session = request.request_id, request.key, request.session
        refused = self._admit(request_id, session, now_us, self.check_key(key))
        if refused is not None:
            return refused
        current = self.store.newest(key, self._visible)
        expires = request.expires
        if current is not None and current.value is not None and current.value.startswith(COUNTER_MAGIC):
            resolved = counters.resolve(self.store.versions(key), self._visible, self.num_dcs)
            state = resolved.state
            if state is not None:  # a counter: its expiry is part of its state (``counters.set_expiry``)
                current = counters.read_view(resolved, self.num_dcs, now_us)
                ttl_us = state.remaining_us(now_us)
                if current is None or current.value is None or expires is None or (expires == 0 and ttl_us == -1):
                    return self._expire_read(request, current, ttl_us)
                return self._write("expire", request_id, key, None, session, now_us, None,
                                   expires=expiry.resolve(expires, now_us))
            current = resolved.version  # a string or tombstone newer than the counters' epoch
        seen = expiry.view(current, now_us)
        value = seen.value if seen is not None else None
        if value is None or expires is None or (expires == 0 and expiry.remaining_us(current, now_us) == -1):
            return self._expire_read(request, current, expiry.remaining_us(current, now_us) if value is not None
                                     else -2)
        return self._write("expire", request_id, key, expiry.wrap(value, expiry.resolve(expires, now_us)), session,
                           now_us, None)

    def _expire_read(self, request: ExpireRequest, current: Version | None, ttl_us: int) -> Outcome:
        """TTL, or an EXPIRE or PERSIST that writes nothing: the value and time left read."""
        stable, dt = self._read_contribution(current)
        self.stats.operations["ttl"] += 1
        value = current.value if current is not None and ttl_us != -2 else None
        if value is not None and value.startswith(EXPIRY_MAGIC):
            value = expiry.split(value)[0]
        session = Session(stable, max(dt, request.session.dt))
        return [Respond(ExpireReply(request.request_id, value, ttl_us, False, 0, session))]

    def _on_swap(self, request: SwapRequest, now_us: int) -> Outcome:
        key, value, config = request.key, request.value, self.config
        # ``check_key``'s and ``_check_value``'s common case inlined (a key and a value that pass)
        passes = (0 < len(key) <= config.max_key_bytes and len(value) <= config.max_value_bytes
                  and not value.startswith(RESERVED_PREFIXES))
        problem = None if passes else self.check_key(key) or self._check_value(value)
        return self._write("swap", request.request_id, key, value, request.session, now_us, problem)

    def _write(
        self,
        kind: str,
        request_id: int,
        key: bytes,
        value: bytes | None,
        session: Session,
        now_us: int,
        problem: str | None,
        *,
        by: int | None = None,
        expires: int | None = None,
    ) -> Outcome:
        """A PUT, SWAP, DELETE (``value`` None) or, with ``by``, an INCR: its value is the counter's
        state after the increment (``okapikv.core.counters``); with ``expires`` (absolute, 0 for
        PERSIST), an EXPIRE of a counter: its state with that expiry."""
        stable_before = self.stable
        refused = self._admit(request_id, session, now_us, problem)
        if refused is not None:
            return refused
        dc = self.dc
        current = self.store.newest(key, self._visible)
        if current is not None and current.value is not None and current.value.startswith(EXPIRY_MAGIC):
            current = expiry.view(current, now_us)  # of any other version, the version itself
        counter: counters.CounterState | None = None
        if by is not None or expires is not None or (current is not None and current.value is not None
                                                     and current.value.startswith(COUNTER_MAGIC)):
            chain = self.store.versions(key)
            resolved = counters.resolve(chain, self._visible, self.num_dcs)
            if by is not None:
                outcome = counters.increment(chain, resolved, dc, self.num_dcs, by, now_us)
                if isinstance(outcome, str):
                    self.rollback_stable(stable_before)
                    return self.reject(request_id, outcome)
                counter = outcome
            elif expires is not None:
                counter = counters.set_expiry(chain, resolved, dc, expires)
            current = counters.read_view(resolved, self.num_dcs, now_us)
        # Every write here also reads (SWAP's old value, PUT's and DELETE's found flag), so the new
        # version depends on what it read and orders after it under last-writer-wins, even when
        # that version came from a DC whose clock runs ahead. A local version that depends on nothing
        # remote (``dv`` None: every version of a 1-DC cluster) raises the local entry alone, with
        # no vector built for it and none merged.
        local, read_dv = session.dt, None
        if current is not None:
            if current.dv is None and current.source_dc == dc:
                local = max(local, current.timestamp)
            else:
                read_dv = self._dependency_of(current)
        known = session.stable
        dependency = (local,) if self.num_dcs == 1 else known[:dc] + (local,) + known[dc + 1 :]
        if read_dv is not None:
            dependency = merge_max(dependency, read_dv)
        timestamp = self.protocol.assign_timestamp(
            previous=self.vv[dc], max_dependency=max(dependency), now_us=now_us
        )
        if isinstance(timestamp, WaitForClock):
            if self.too_long(timestamp, now_us):
                self.rollback_stable(stable_before)
                return self._refuse_offset(request_id, "the write would wait for the clock to reach",
                                           pack(timestamp.clock_us), now_us)
            return timestamp
        self.stats.operations[kind] += 1
        self.clock.issue(timestamp, now_us)
        if counter is not None:
            counter = counters.stamped(counter, (timestamp, dc))
            value = counters.encode(counter)
        version = Version(value, timestamp, dc, self.protocol.stored_dv(dependency=dependency, timestamp=timestamp))
        self.store.insert(key, version)
        if self.num_dcs > 1:
            self._outbox.append(Update(key, value, timestamp, dc, self.protocol.replicated_dv(version=version)))
        found = current is not None and current.value is not None
        # what the read contributes to the session (``_read_contribution``): nothing but the server's
        # stable vector where it read nothing or a local version without remote dependencies
        stable = self.stable if read_dv is None else self._read_contribution(current)[0]
        reply_session = Session(stable, timestamp)
        reply: ClientReply
        if kind == "swap":
            reply = SwapReply(request_id, current.value if current is not None else None, timestamp, reply_session)
        elif kind == "expire" and counter is not None:
            reply = ExpireReply(request_id, str(counter.value).encode(), counter.remaining_us(now_us), True,
                                timestamp, reply_session)
        elif counter is not None:
            reply = IncrReply(request_id, counter.value, timestamp, reply_session)
        elif kind == "expire":
            assert value is not None
            reply = ExpireReply(request_id, expiry.split(value)[0], expiry.remaining_us(version, now_us), True,
                                timestamp, reply_session)
        else:
            reply = WriteReply(request_id, found, timestamp, reply_session)
        effects: list[Effect] = [Respond(reply)]
        pacing = self.pacing
        if pacing.idle or now_us - pacing.called_us >= pacing.call_gap_us:
            self._wake(now_us, effects, tell=True)
        else:
            pacing.active_us = now_us  # ``_wake`` inlined: this runs for every write
        return effects

    def _on_put_many(self, request: PutManyRequest, now_us: int) -> Outcome:
        """A bulk load's batch: each pair written as ``_write`` writes a PUT, with one admission
        and one reply for all (``PutManyRequest``). Every pair is checked first, so a bad one
        refuses the request before anything is written. Under a physical-clock protocol a write
        may wait for the clock's next microsecond: the request parks with its progress
        (``_PutManyProgress``) and goes on from there when it resumes; a wait past the maximum
        clock offset refuses the first pair like a PUT, or stops a batch part-way with an
        OUT_OF_RANGE error that says how many pairs were written."""
        request_id, keys, values, session = request.request_id, request.keys, request.values, request.session
        progress = self._put_many_progress.pop(request_id, None)
        dc = self.dc
        stable_before = self.stable
        if progress is None:
            refused = self._admit(request_id, session, now_us, self._check_pairs(keys, values))
            if refused is not None:
                return refused
            progress = _PutManyProgress(0, 0, (0,) * self.num_dcs)
        base = session.stable[:dc] + (session.dt,) + session.stable[dc + 1 :]
        base_max = max(base)
        store, visible, clock, protocol = self.store, self._visible, self.clock, self.protocol
        outbox = self._outbox if self.num_dcs > 1 else None
        done, remote = progress.done, progress.remote
        timestamp = progress.timestamp
        for index in range(done, len(keys)):
            key = keys[index]
            value = values[index]
            current = store.newest(key, visible)
            dependency, highest = base, base_max
            if current is not None:  # it depends on what it overwrites, as ``_write``'s PUT
                found = self._dependency_of(current)
                dependency = merge_max(base, found)
                highest = max(dependency)
                remote = merge_max(remote, found[:dc] + (0,) + found[dc + 1 :])
            assigned = protocol.assign_timestamp(previous=clock.value, max_dependency=highest, now_us=now_us)
            if isinstance(assigned, WaitForClock):
                done = index
                if self.too_long(assigned, now_us):
                    written = f"{done} of {len(keys)} pairs written; " if done else ""
                    if not done:
                        self.rollback_stable(stable_before)
                    refusal = self._refuse_offset(request_id, f"{written}the write would wait for the clock to reach",
                                                  pack(assigned.clock_us), now_us)
                    self.stats.operations["put"] += done - progress.done
                    return refusal
                self.stats.operations["put"] += done - progress.done
                self._put_many_progress[request_id] = _PutManyProgress(done, timestamp, remote)
                return assigned
            timestamp = clock.issue(assigned, now_us)
            version = Version(value, timestamp, dc, protocol.stored_dv(dependency=dependency, timestamp=timestamp))
            store.insert(key, version)
            if outbox is not None:
                outbox.append(Update(key, value, timestamp, dc, protocol.replicated_dv(version=version)))
        self.stats.operations["put"] += len(keys) - progress.done
        self.stats.operations["put_many"] += 1
        stable = merge_max(self.stable, remote) if any(remote) else self.stable
        effects: list[Effect] = [Respond(PutManyReply(request_id, len(keys), timestamp, Session(stable, timestamp)))]
        self._wake(now_us, effects, tell=True)
        return effects

    def _check_pairs(self, keys: Sequence[bytes], values: Sequence[bytes]) -> str | None:
        """Why a bulk PUT's pairs are refused, or None: a count mismatch, no pairs, or the first bad
        key or value (named by its position)."""
        if len(keys) != len(values):
            return f"a bulk PUT needs one value per key, not {len(keys)} keys and {len(values)} values"
        if not keys:
            return "a bulk PUT needs at least one pair"
        max_key, max_value = self.config.max_key_bytes, self.config.max_value_bytes
        for index, key in enumerate(keys):
            value = values[index]
            if (not key or len(key) > max_key or len(value) > max_value or value.startswith(COUNTER_MAGIC)
                    or value.startswith(EXPIRY_MAGIC)):
                problem = self.check_key(key) or self._check_value(values[index])
                return f"pair {index} (key {key[:40]!r}): {problem}"
        return None

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
        self._next_heartbeat_us = now_us + self._heartbeat_period_us

    def _on_replicate(self, message: ReplicateBatch, now_us: int) -> list[Effect]:
        if self.members.ignores(message.source.dc):
            # a removed DC's stream: its vv entry stays where the relay left it
            return self.members.tell(message.source)
        vv = self.vv
        adopt = self.version_vector.adopt
        catch_up = self.catch_up
        awaited = catch_up.awaited
        dc = self.dc
        repairing = catch_up.repair
        if repairing is not None and message.source.dc in repairing.waiting:
            # Until its repair answer ends, a replica's stream may carry versions resent from before
            # this server lost its data that the replica has collected since (``RepairBatch``).
            return self._absorb_gsv(message.source.dc, message.gsv, now_us) if message.gsv is not None else []
        cap = offset_ceiling(now_us, self.config.max_clock_offset_us)
        stored = False
        for update in message.updates:
            source_dc = update.source_dc
            if source_dc == dc:  # our own versions come back only in a repair's answer
                continue
            timestamp = update.timestamp
            if timestamp <= vv[source_dc]:
                continue  # FIFO links: at or below vv[source] it is a re-delivered duplicate
            stored = True
            self.store.insert(update.key, Version(update.value, timestamp, source_dc, update.dv))
            if source_dc not in awaited:  # frozen until the catch-up answer covers the gap
                adopt(source_dc, timestamp if timestamp <= cap else self.watermark(message, source_dc, timestamp,
                                                                                     now_us))
        self.stats.replicated_updates_received += len(message.updates)
        effects = self._absorb_gsv(message.source.dc, message.gsv, now_us) if message.gsv is not None else []
        if stored:
            pacing = self.pacing
            if pacing.idle or now_us - pacing.called_us >= pacing.call_gap_us:
                self._wake(now_us, effects, tell=True)
            else:
                pacing.active_us = now_us  # ``_wake`` inlined
        return effects

    def _on_heartbeat(self, message: Heartbeat, now_us: int) -> list[Effect]:
        source = message.source.dc
        if source == self.dc:  # a wake-up call from a partition of this DC (``_wake``)
            effects: list[Effect] = []
            self._wake(now_us, effects, tell=False)
            return effects
        if self.members.ignores(source):
            return self.members.tell(message.source)
        if message.timestamp > self.vv[source] and source not in self.catch_up.awaited:
            self.version_vector.adopt(source, self.watermark(message, source, message.timestamp, now_us))
        return self._absorb_gsv(source, message.gsv, now_us) if message.gsv is not None else []

    def _heartbeat(self, now_us: int, effects: list[Effect]) -> None:
        """Promise peers no version at or below the current clock will follow, so their stable vectors
        keep moving (``on_timer``: after a heartbeat period without replication, or with the round)."""
        message = Heartbeat(self.id, self.clock.tick(now_us), self._take_gsv())
        for peer in self.peers:
            effects.append(Send(peer, message))
        self.stats.heartbeats_sent += len(self.peers)
        self.stats.heartbeat_bytes += len(self.peers) * (DC_ID_BYTES + TIMESTAMP_BYTES)
        self._last_replication_send_us = now_us
        self._next_heartbeat_us = now_us + self._heartbeat_period_us
