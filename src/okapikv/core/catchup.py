"""Catch-up and repair after a restart (docs/protocol.md, "Catch-up and repair").

Catch-up (``start``): a restarted server asks every replica for its DC's updates above the
recovered ``vv`` entry (``CatchUpRequest``). Until the answer (``CatchUpReply``) arrives, ``vv[i]``
does not move on the live stream from DC i (``awaited``: the server's replication intake leaves it
frozen): the old incarnations' link queues are gone, and a heartbeat of the new stream would cover
updates that never arrived. A replica that receives a request from a restarted server asks it back
the same way. The answer is complete because garbage collection keeps every local version some
replica may still lack (``okapikv.core.gc``: the store is the catch-up log).

Repair (``start`` with a ``Repair``): the local data was lost or damaged, so every replica is asked
for every version it holds, this DC's included; client requests are refused (UNAVAILABLE) and slices
wait until it ends: first every replica's answer (fetching), then the stable vector reaching the
replicas' (settling, ``settle``), so that no read here can miss a version a replica collected.

Invariants (tested in ``tests/unit/test_core_catchup.py`` and ``tests/unit/test_core_durability.py``):
- request ids are unique across incarnations (they start above the clock: ``_request``), and only the
  answer to the latest request to a DC ends its freeze or counts towards a repair;
- the clock never issues a timestamp a replica already holds (``origin_through``);
- a repair ends only once every replica answered and the stable vector reached the threshold; it
  keeps the salvaged local versions no replica holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from okapikv.core.messages import (
    CatchUpReply,
    CatchUpRequest,
    ClientRequest,
    Effect,
    ErrorCode,
    ErrorReply,
    RepairAnswer,
    RepairBatch,
    ReplicateBatch,
    Respond,
    Restarted,
    Send,
    ServerId,
    Update,
)
from okapikv.core.mvstore import Version
from okapikv.core.state import PartitionState
from okapikv.core.vectors import Vector, leq, merge_max, merge_min, zeros

#: Updates per ReplicateBatch of a catch-up answer (the driver splits further by bytes).
CATCH_UP_BATCH = 1_000


@dataclass(frozen=True, slots=True)
class Repair:
    """A start in repair mode (``PartitionServer.start_catch_up``): the local data was lost or
    damaged, so every replica is asked for every version it holds. ``salvaged``: this server's own
    versions read back from its damaged store; those above every replica's ``vv`` entry for this DC
    (never replicated, so nowhere else to get them) are kept, the others come back from the replicas."""

    salvaged: tuple[tuple[bytes, Version], ...] = ()


@dataclass(slots=True)
class Repairing:
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


class CatchUp:
    """A partition server's catch-up with its replicas, and its repair from them."""

    def __init__(self, state: PartitionState, *, stable_moves: bool) -> None:
        self.state = state
        # a repair settles (waits for the stable vector) only where the stable vector moves
        self._settles = stable_moves and bool(state.peers)
        #: source DC -> id of the latest CatchUpRequest sent to it and not answered yet: its ``vv``
        #: entry is frozen until then
        self.awaited: dict[int, int] = {}
        #: the repair in progress, if any
        self.repair: Repairing | None = None
        self._next_id = 0  # 0: not chosen yet (``_request``)

    @property
    def status(self) -> str | None:
        """None, or where a repair stands: "fetching" or "settling"."""
        if self.repair is None:
            return None
        return "fetching" if self.repair.fetching else "settling"

    def start(self, repair: Repair | None = None) -> list[Effect]:
        """Ask every replica for its DC's updates above our ``vv`` entry (or, with ``repair``, for
        everything it holds), and announce the restart to the DC (``PartitionServer.start_catch_up``)."""
        state = self.state
        if repair is not None:
            self.repair = Repairing(repair.salvaged, {}, zeros(state.num_dcs))
        effects: list[Effect] = []
        for peer in state.peers:
            send = self._request(peer, restarted=True, repair=repair is not None)
            if self.repair is not None:
                self.repair.waiting[peer.dc] = send.message.request_id  # type: ignore[union-attr]
            effects.append(send)
        # Reads the other partitions coordinate may wait for slices the old incarnation took.
        announcement = Restarted(state.id)
        effects.extend(Send(member, announcement) for member in state.dc_members if member != state.id)
        if self.repair is not None and not state.peers:
            effects.extend(self._end_fetch())
        return effects

    def ask(self, peer: ServerId) -> Send:
        """Ask a replica of a DC that comes back into the membership (``okapikv.core.membership``)
        for its updates, as a restarted server asks: until it answers, its stream does not move
        ``vv``, and a repair of its own that it asked for while nobody answered it asks again."""
        return self._request(peer, restarted=True)

    def _request(self, peer: ServerId, *, restarted: bool, repair: bool = False) -> Send:
        state = self.state
        # Unique across incarnations, as snapshot reads' tx ids (``okapikv.core.reads``).
        request_id = self._next_id or state.hlc + 1
        self._next_id = request_id + 1
        self.awaited[peer.dc] = request_id
        state.stats.catch_up_requests_sent += 1
        return Send(peer, CatchUpRequest(state.id, request_id, 0 if repair else state.vv[peer.dc], restarted, repair))

    def on_request(self, message: CatchUpRequest, now_us: int) -> list[Effect]:
        """Answer (``_answer``), and ask a restarted replica back.

        While this server's own repair is fetching, a plain request waits for the fetch to end: its
        answer (this DC's updates) must include those the other replicas are still sending back. A
        repair request is answered at once with what is here: the requester takes the union of
        every replica's answer, so what this server still lacks reaches it from the others."""
        source = message.source
        if not self.state.is_replica(source):
            return []
        effects: list[Effect] = []
        repairing = self.repair
        if repairing is not None and repairing.fetching and not message.repair:
            repairing.deferred.append(message)
        else:
            effects.extend(self._answer(message))
        if message.restarted:
            # Whatever we had queued for the old incarnation is gone, and it may have lost
            # replicated updates it received but had not made durable: its new stream must not
            # advance our vv entry before we have caught up with it too. (A replica that restarts
            # before answering our repair request is asked again.)
            again = repairing is not None and source.dc in repairing.waiting
            send = self._request(source, restarted=False, repair=again)
            if again:
                assert repairing is not None
                repairing.waiting[source.dc] = send.message.request_id  # type: ignore[union-attr]
            effects.append(send)
        return effects

    def _answer(self, message: CatchUpRequest) -> list[Effect]:
        """Send every update of this DC above ``after`` that the store still holds, then the reply.

        Complete because GC never drops a local version before every replica durably has a newer
        one (``GarbageCollector.replicated_floor``), and a replica's durable ``vv`` entry, hence its
        ``after``, is at least that newer version's timestamp. ``through`` is the clock: every later
        local timestamp is above it, and the effects here leave before those of any later call.

        A repair request gets every version held, of every DC (the newest version of each key is
        never collected, and a tombstone only once every replica is past it, so the union of the
        replicas' stores holds every key's newest version that reached one of them), and a
        ``RepairAnswer``."""
        state = self.state
        source = message.source
        dc = state.dc
        replicated_dv = state.protocol.replicated_dv
        effects: list[Effect]
        if message.repair:
            store = state.store
            updates = [
                Update(key, version.value, version.timestamp, version.source_dc,
                       replicated_dv(version=version) if version.source_dc == dc else version.dv)
                for key in list(store.keys()) for version in store.versions(key)
            ]
            effects = [
                Send(source, RepairBatch(state.id, message.request_id, tuple(updates[start : start + CATCH_UP_BATCH])))
                for start in range(0, len(updates), CATCH_UP_BATCH)
            ]
        else:
            updates = [
                Update(key, version.value, version.timestamp, dc, replicated_dv(version=version))
                for key, version in state.store.written_by(dc, message.after)
            ]
            effects = [
                Send(source, ReplicateBatch(state.id, tuple(updates[start : start + CATCH_UP_BATCH])))
                for start in range(0, len(updates), CATCH_UP_BATCH)
            ]
        answer = RepairAnswer(state.stable, state.horizon, state.gsv) if message.repair else None
        effects.append(Send(source, CatchUpReply(state.id, message.request_id, state.vv[dc], state.vv[source.dc],
                                                 answer)))
        state.stats.catch_up_updates_sent += len(updates)
        return effects

    def on_repair_batch(self, message: RepairBatch, now_us: int) -> list[Effect]:
        """Part of a replica's answer to this server's repair: take every version (of any DC, this
        one's included; duplicates change nothing). Only the answer to the latest repair request
        counts: an older one may predate versions the replica collected since."""
        repairing = self.repair
        if repairing is None or repairing.waiting.get(message.source.dc) != message.request_id:
            return []
        state = self.state
        store = state.store
        dc = state.dc
        for update in message.updates:
            if (store.insert(update.key, Version(update.value, update.timestamp, update.source_dc, update.dv))
                    and update.source_dc == dc):
                state.stats.repair_local_received += 1
        return []

    def on_reply(self, message: CatchUpReply, now_us: int) -> list[Effect]:
        """Every update of the source DC up to ``through`` arrived (before this, on the FIFO link).
        Any answer proves that much; only the answer to the latest request ends the freeze, since a
        restart of the replica after an older request may have cut the stream after it. The
        answer to a repair request also counts towards the repair."""
        state = self.state
        source = message.source
        if not state.is_replica(source):
            return []
        if message.through > state.vv[source.dc]:
            state.vv[source.dc] = state.watermark(message, source.dc, message.through, now_us)
        if self.awaited.get(source.dc) == message.request_id:
            del self.awaited[source.dc]
        stats = state.stats
        stats.catch_up_replies_received += 1
        stats.replica_knows_clock = max(stats.replica_knows_clock, message.origin_through)
        repairing = self.repair
        if repairing is None and message.origin_through > state.vv[state.dc]:
            # Only a server that lost its clock bound gets here (else the bound is above): never
            # issue a timestamp a replica already holds. (A repair raises it once every answer is in.)
            state.vv[state.dc] = message.origin_through
        answer = message.repair
        if (repairing is None or answer is None or repairing.waiting.get(source.dc) != message.request_id
                or any(len(vector) != state.num_dcs for vector in (answer.stable, answer.horizon, answer.gsv))):
            return []
        del repairing.waiting[source.dc]
        repairing.origin_through = max(repairing.origin_through, message.origin_through)
        repairing.threshold = merge_max(repairing.threshold, merge_max(answer.stable, answer.horizon))
        repairing.gsvs.append(answer.gsv)
        return [] if repairing.waiting else self._end_fetch()

    def _end_fetch(self) -> list[Effect]:
        """Every replica answered: keep the salvaged local versions no replica holds, restart the
        clock above every timestamp of this DC any replica holds (never reissue one), answer the
        requests that waited, and settle (``settle``).

        Why the threshold: a replica collected a version only once a newer one was visible under its
        stable vector and in every snapshot at or above its horizon; serving with a stable vector
        and a horizon at least the replicas' ones, no read here can miss such a version. The entry-
        wise minimum of the replicas' GSVs is added for Okapi: replication carries no dependency
        vector, so this DC's versions come back without theirs, whose remote entries were
        universally stable before this server died, hence at most that minimum (each GSV was taken
        after the death)."""
        repairing = self.repair
        assert repairing is not None
        state = self.state
        dc = state.dc
        kept = [(key, version) for key, version in repairing.salvaged
                if version.source_dc == dc and version.timestamp > repairing.origin_through]
        for key, version in kept:
            state.store.insert(key, version)
        state.stats.repair_local_kept += len(kept)
        state.vv[dc] = max(state.vv[dc], repairing.origin_through, *(version.timestamp for _, version in kept))
        repairing.salvaged = ()
        repairing.fetching = False
        if repairing.gsvs:
            repairing.threshold = merge_max(repairing.threshold, merge_min(repairing.gsvs))
        effects: list[Effect] = []
        for request in repairing.deferred:
            effects.extend(self._answer(request))
        repairing.deferred.clear()
        if not self._settles:
            self.repair = None
            state.stats.repairs_completed += 1
        return effects

    def settle(self) -> None:
        """End a fetched repair once the stable vector reaches the threshold; from then on snapshots
        below it are answered too_old (the horizon rises to it)."""
        repairing = self.repair
        assert repairing is not None
        state = self.state
        if leq(repairing.threshold, state.stable):
            state.horizon = merge_max(state.horizon, repairing.threshold)
            self.repair = None
            state.stats.repairs_completed += 1

    def refuse(self, request: ClientRequest) -> list[Effect]:
        """A client request while repairing: UNAVAILABLE, and where the repair stands."""
        repairing = self.repair
        assert repairing is not None
        state = self.state
        if repairing.fetching:
            where = f"waiting for {len(repairing.waiting)} of {len(state.peers)} replicas' answers"
        else:
            where = "waiting for its stable vector to reach its replicas'"
        state.stats.rejected_requests += 1
        return [Respond(ErrorReply(request.request_id, ErrorCode.UNAVAILABLE,
                                   f"this server is repairing its data from its replicas ({where}); "
                                   "retry, or use another DC"))]
