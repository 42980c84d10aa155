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

Verification (``start`` with a ``Verify``): a server that may hold less than its replicas know it
once had (it started in memory, from an empty directory, or from a disk that may be older) compares
each replica's answer to its restart request: a replica holding a timestamp of this DC above the
recovered ``vv`` entry (and below this incarnation's first, which its own first heartbeats may have
carried there) proves writes this server acknowledged are gone. Read-your-writes would break if it
served: it repairs at once (``Verify.repair``: in memory, where no repair marker has to survive a
crash) or refuses client requests until restarted with ``--repair`` (``lost``). A start with no
data at all (``Verify.hold``) also refuses them until every replica has answered, since before that
nothing says whether it lost anything.

Invariants (tested in ``tests/unit/test_core_catchup.py`` and ``tests/unit/test_core_durability.py``):
- request ids are unique across incarnations (they start above the clock: ``_request``), and only the
  answer to the latest request to a DC ends its freeze or counts towards a repair; a loss counts
  from the answer to any verifying request (a replica that restarted too is asked again);
- the clock never issues a timestamp a replica already holds (``origin_through``);
- a repair ends only once every replica answered and the stable vector reached the threshold; it
  keeps the salvaged local versions no replica holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from okapikv.core.clock import Hlc, VersionVector
from okapikv.core.messages import (
    CatchUpReply,
    CatchUpRequest,
    ClientRequest,
    Effect,
    ErrorCode,
    ErrorReply,
    Heartbeat,
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
from okapikv.core.state import ServerView
from okapikv.core.vectors import Vector, leq, merge_max, merge_min, zeros

#: Updates per ReplicateBatch of a catch-up answer (the driver splits further by bytes).
CATCH_UP_BATCH = 1_000


class CatchUpView(ServerView, Protocol):
    """What catch-up and repair read and move of the server's state: the HLC (``recover``: never
    issue a timestamp a replica holds), the replicas' ``vv`` entries (``adopt``, clamped by
    ``watermark``) and the horizon (``advance_horizon``: a settled repair's threshold)."""

    @property
    def clock(self) -> Hlc: ...
    @property
    def version_vector(self) -> VersionVector: ...
    def advance_horizon(self, vector: Vector) -> None: ...
    def watermark(self, message: ReplicateBatch | Heartbeat | CatchUpReply, dc: int, timestamp: int,
                  now_us: int) -> int: ...


@dataclass(frozen=True, slots=True)
class Repair:
    """A start in repair mode (``PartitionServer.start_catch_up``): the local data was lost or
    damaged, so every replica is asked for every version it holds. ``salvaged``: this server's own
    versions read back from its damaged store; those above every replica's ``vv`` entry for this DC
    (never replicated, so nowhere else to get them) are kept, the others come back from the replicas."""

    salvaged: tuple[tuple[bytes, Version], ...] = ()


@dataclass(frozen=True, slots=True)
class Verify:
    """A start that checks with its replicas whether it lost acknowledged writes (module docstring,
    "Verification"). ``own_from``: this incarnation's first timestamp; a replica's ``origin_through``
    at or above it may come from this incarnation's first heartbeats, not from lost data. ``hold``:
    refuse client requests until every replica has answered (a start with no data). ``repair``: on a
    loss, repair from the replicas at once; else refuse client requests (``CatchUp.refusing_lost``)."""

    own_from: int
    hold: bool = False
    repair: bool = False


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

    def __init__(self, state: CatchUpView, *, stable_moves: bool) -> None:
        self.state = state
        # a repair settles (waits for the stable vector) only where the stable vector moves
        self._settles = stable_moves and bool(state.peers)
        #: source DC -> id of the latest CatchUpRequest sent to it and not answered yet: its ``vv``
        #: entry is frozen until then
        self.awaited: dict[int, int] = {}
        #: the repair in progress, if any
        self.repair: Repairing | None = None
        self._next_id = 0  # 0: not chosen yet (``_request``)
        self._verify: Verify | None = None
        self._verify_bound = 0  # the recovered ``vv`` entry of this DC at start
        #: replica DC -> id of the restart request whose answer the verification still waits for
        self.verifying: dict[int, int] = {}
        #: replica DC -> ids of earlier verifying requests to it, superseded when it restarted too:
        #: their answers no longer end the wait, but a loss they show still counts (``on_reply``)
        self.superseded: dict[int, set[int]] = {}
        #: replica DCs the hold no longer waits for (``release``); their answers are still checked
        self.released: set[int] = set()
        #: the highest timestamp of this DC a replica held that this server had lost (0: none seen)
        self.lost_through = 0
        #: lost writes found and not repaired here (``Verify.repair`` off): refuse client requests
        self.refusing_lost = False

    @property
    def serving(self) -> bool:
        """Whether client requests and slices are served: no repair, no hold, no loss unrepaired."""
        if self.repair is not None or self.refusing_lost:
            return False
        return not (self._verify is not None and self._verify.hold and self.verifying and self.holding_for)

    @property
    def holding_for(self) -> list[int]:
        """Replica DCs whose answer a start with no data still holds client requests for."""
        return [dc for dc in self.verifying if dc not in self.released]

    def release(self, dc: int) -> None:
        """Stop holding client requests for replica ``dc``'s answer (the driver found it
        unreachable: a DC cut off must still serve). Its answer, when it comes, is still checked,
        and a loss it shows is repaired or refused then."""
        if dc in self.verifying:
            self.released.add(dc)

    @property
    def status(self) -> str | None:
        """None, or where a repair stands: "fetching" or "settling"; "checking" while a start with
        no data waits for its replicas' answers, "lost" while it refuses for lost writes."""
        if self.repair is None:
            if self.serving:
                return None
            return "lost" if self.refusing_lost else "checking"
        return "fetching" if self.repair.fetching else "settling"

    def start(self, repair: Repair | None = None, verify: Verify | None = None) -> list[Effect]:
        """Ask every replica for its DC's updates above our ``vv`` entry (or, with ``repair``, for
        everything it holds), and announce the restart to the DC (``PartitionServer.start_catch_up``).
        With ``verify`` (and no ``repair``), check the answers for lost writes (module docstring)."""
        state = self.state
        if repair is not None:
            self.repair = Repairing(repair.salvaged, {}, zeros(state.num_dcs))
        elif verify is not None:
            self._verify = verify
            self._verify_bound = state.vv[state.dc]
        effects: list[Effect] = []
        for peer in state.peers:
            send = self._request(peer, restarted=True, repair=repair is not None)
            request_id: int = send.message.request_id  # type: ignore[union-attr]
            if self.repair is not None:
                self.repair.waiting[peer.dc] = request_id
            elif self._verify is not None:
                self.verifying[peer.dc] = request_id
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
            elif source.dc in self.verifying:  # its new incarnation answers instead
                self.superseded.setdefault(source.dc, set()).add(self.verifying[source.dc])
                self.verifying[source.dc] = send.message.request_id  # type: ignore[union-attr]
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
        """Take a catch-up answer (``_on_reply``); an answer to a verifying start's request is first
        checked for lost writes, and a loss starts the repair where ``Verify.repair`` allows it."""
        verify = self._verify
        dc = message.source.dc
        latest = self.verifying.get(dc) == message.request_id
        # The answer to a request superseded when the replica restarted too (``on_request``) says
        # what it held then: after it learns this incarnation's first heartbeats from its own
        # catch-up, its answer to the latest request can no longer show a loss.
        earlier = message.request_id in self.superseded.get(dc, ())
        if verify is None or not self.state.is_replica(message.source) or not (latest or earlier):
            return self._on_reply(message, now_us)
        if latest:
            del self.verifying[dc]
        else:
            self.superseded[dc].discard(message.request_id)
        found = self._verify_bound < message.origin_through < verify.own_from
        first = found and not self.lost_through
        if found:
            self.lost_through = max(self.lost_through, message.origin_through)
        effects = self._on_reply(message, now_us)
        if first and self.repair is None:
            if verify.repair:
                effects.extend(self._start_repair())
            else:
                self.refusing_lost = True
        return effects

    def _start_repair(self) -> list[Effect]:
        """Lost writes found after the start: ask every replica for everything it holds (the store
        keeps what it has; duplicates change nothing)."""
        state = self.state
        self.repair = repairing = Repairing((), {}, zeros(state.num_dcs))
        self.verifying.clear()
        self.superseded.clear()
        effects: list[Effect] = []
        for peer in state.peers:
            send = self._request(peer, restarted=False, repair=True)
            repairing.waiting[peer.dc] = send.message.request_id  # type: ignore[union-attr]
            effects.append(send)
        return effects

    def _on_reply(self, message: CatchUpReply, now_us: int) -> list[Effect]:
        """Every update of the source DC up to ``through`` arrived (before this, on the FIFO link).
        Any answer proves that much; only the answer to the latest request ends the freeze, since a
        restart of the replica after an older request may have cut the stream after it. The
        answer to a repair request also counts towards the repair."""
        state = self.state
        source = message.source
        if not state.is_replica(source):
            return []
        if message.through > state.vv[source.dc]:
            state.version_vector.adopt(source.dc, state.watermark(message, source.dc, message.through, now_us))
        if self.awaited.get(source.dc) == message.request_id:
            del self.awaited[source.dc]
        stats = state.stats
        stats.catch_up_replies_received += 1
        stats.replica_knows_clock = max(stats.replica_knows_clock, message.origin_through)
        repairing = self.repair
        if repairing is None:
            # Only a server that lost its clock bound moves here (else the bound is above): never
            # issue a timestamp a replica already holds. (A repair raises it once every answer is in.)
            state.clock.recover(message.origin_through)
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
        state.clock.recover(max((repairing.origin_through, *(version.timestamp for _, version in kept))))
        repairing.salvaged = ()
        repairing.fetching = False
        if repairing.gsvs:
            repairing.threshold = merge_max(repairing.threshold, merge_min(repairing.gsvs))
        effects: list[Effect] = []
        for request in repairing.deferred:
            effects.extend(self._answer(request))
        repairing.deferred.clear()
        if not self._settles:
            self._repaired()
        return effects

    def _repaired(self) -> None:
        self.repair = None
        self.state.stats.repairs_completed += 1

    def settle(self) -> None:
        """End a fetched repair once the stable vector reaches the threshold; from then on snapshots
        below it are answered too_old (the horizon rises to it)."""
        repairing = self.repair
        assert repairing is not None
        state = self.state
        if leq(repairing.threshold, state.stable):
            state.advance_horizon(repairing.threshold)
            self._repaired()

    def refuse(self, request: ClientRequest) -> list[Effect]:
        """A client request while not ``serving``: UNAVAILABLE (retryable), and why."""
        repairing = self.repair
        state = self.state
        state.stats.rejected_requests += 1
        if repairing is None:
            if self.refusing_lost:
                why = (f"this server's data is older than its replicas' (they hold its writes up to "
                       f"{self.lost_through}): it must be restarted with --repair (docs/operations.md)")
            else:
                why = (f"this server started without its data and is checking that no replica holds writes it "
                       f"lost (waiting for {len(self.holding_for)} of {len(state.peers)} replicas' answers)")
            return [Respond(ErrorReply(request.request_id, ErrorCode.UNAVAILABLE,
                                       f"{why}; retry, or use another DC"))]
        if repairing.fetching:
            where = f"waiting for {len(repairing.waiting)} of {len(state.peers)} replicas' answers"
        else:
            where = "waiting for its stable vector to reach its replicas'"
        return [Respond(ErrorReply(request.request_id, ErrorCode.UNAVAILABLE,
                                   f"this server is repairing its data from its replicas ({where}); "
                                   "retry, or use another DC"))]
