"""The sans-I/O host: the driver contract of a ``PartitionServer``, written once for every driver.

``PartitionServer`` is the protocol; the host is what a process does around it, without any I/O
(the split of aioquic's ``QuicConnection`` from its asyncio protocol, or h11's ``Connection``).
The asyncio server (``okapikv.server.node``) and the simulator (``okapikv.sim.world``) both drive
one ``Host`` per partition server, so the rules below run in every simulated run exactly as they
run in production (``tests/unit/test_layers.py`` checks that both import this module):

- **the doors** (``refusal``, ``peer_refusal``): a single-key request must reach its key's
  partition (a misrouted write would land where no correctly routed read looks), and a full disk
  refuses writes and replication from other DCs while reads go on (docs/operations.md);
- **the request-to-reply table** (``expect``, ``take``): request ids are the driver's own; a reply
  goes to whatever waits for its id (a future, a stream, a simulated client), once;
- **durability holding** (docs/design.md, "Durability: group commit before effects"): every call's
  changes go to the ``Committer``, and the call's effects wait, in order, until the commit group
  they need is durable (``durable``), so no reply, replicated update or report reveals a version a
  crash could lose or a local timestamp above the persisted clock bound. A GET's reply is the one
  exception to the order (``_early_reads``): it reveals the versions of its one key and the
  session's timestamps, so it leaves at once when the committer says no group that inserted a
  version of that key, nor the clock bound, is still to become durable (``read_need``); otherwise
  it waits in order like any effect. Without a committer (a server kept in memory, the
  simulator's instant disk) effects leave at once;
- **the timer re-arm rule**: after a call that may have moved the core's next deadline earlier (a
  message that can park a request, a snap-back from idle pacing, a timer run, a membership change)
  the outbox carries the new deadline; a driver whose timers have millisecond granularity meets a
  deadline microseconds away without a timer (``spin_deadline``: a write parked for the next clock
  microsecond, Cure's and GentleRain's one write per microsecond, would otherwise wait a whole
  millisecond, an artefact the paper's servers do not have);
- **the failure detector** (``okapikv.core.detector``, off by default): every peer message tells
  it its sender's DC, and at the timer it may propose removing a member DC silent for longer than
  ``CoreConfig.auto_remove_after_us``, through the same change as `okapi dc remove`;
- **the driver counters** (``okapikv.wire.stats.DriverFigures``), among them the GET replies that
  overtook held effects and those held for a group (``get_replies_early``, ``get_replies_held``).

Every call takes ``now_us`` (the server's clock) and returns one ``Outbox``: the effects that may
leave now (``Send`` to a peer, ``Respond`` to whoever ``take`` names), in the order the core made
them, and the deadline to arm the timer at. Carrying them out (sockets, futures, the simulated
network) and reading the clock are the driver's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from okapikv.core.detector import Detector
from okapikv.core.membership import Membership
from okapikv.core.messages import (
    ClientRequest,
    DeleteRequest,
    Effect,
    ErrorCode,
    ErrorReply,
    ExpireRequest,
    GetReply,
    GetRequest,
    GsvExchange,
    Heartbeat,
    IncrRequest,
    Message,
    PutManyRequest,
    PutRequest,
    ReplicateBatch,
    Respond,
    ServerId,
    StableTimeReport,
    SwapRequest,
    VvReport,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.server import Changes, PartitionServer, Repair, Verify

T = TypeVar("T")

#: requests a full disk refuses (they would add versions); reads go on
WRITE_REQUESTS = (PutRequest, PutManyRequest, SwapRequest, DeleteRequest, IncrRequest, ExpireRequest)
#: handling these never moves the next deadline earlier (they park nothing) unless the core snaps
#: back from idle pacing (``PartitionServer.woke``): no deadline to look at after them otherwise
#: (they are most messages)
NO_EARLIER_DEADLINE = frozenset({Heartbeat, ReplicateBatch, VvReport, StableTimeReport, GsvExchange})
#: a deadline at most this far off is met without a timer (``spin_deadline``)
SPIN_US = 50
#: the most one timer run spends meeting such deadlines before the driver's loop runs again
SPIN_BUDGET_US = 2_000


class Space(Protocol):
    """The disk's free space: ``disk_full``, less than the reserve (``okapikv.storage.space``)."""

    @property
    def disk_full(self) -> bool: ...


class Committer(Space, Protocol):
    """Makes a call's changes durable in numbered groups (``okapikv.storage.group_commit`` on a
    server, ``okapikv.sim.disk`` in the simulator): every group numbered up to ``durable`` is on
    disk."""

    @property
    def durable(self) -> int: ...

    def stage(self, changes: Changes, hlc: int) -> int:
        """Add one call's changes; the group its effects must wait for."""
        ...

    def read_need(self, key: bytes) -> int:
        """The group a GET's reply of ``key`` must wait for, after ``stage``: the newest group
        that inserted a version of ``key`` and the one holding the clock bound of the staged calls,
        whichever is later (``durable`` or less: none)."""
        ...


@dataclass(slots=True)
class Outbox:
    """What one host call asks the driver to carry out: ``effects`` in order, and ``deadline`` (the
    core's clock) when the timer must be armed at it if that is earlier than the armed one (None:
    unchanged); ``membership``: the view the core adopted in this call, which the driver keeps
    before any of the effects leaves (None: unchanged); ``removed``: the DC the failure detector
    proposed removing in this call and how long it had been silent (µs), for the driver's log."""

    effects: list[Effect]
    deadline: int | None = None
    membership: Membership | None = None
    removed: tuple[int, int] | None = None


class Host(Generic[T]):
    """One partition server's driver rules (module docstring); ``T`` is what waits for a reply."""

    def __init__(self, core: PartitionServer, committer: Committer | None = None, *, space: Space | None = None,
                 table: dict[int, T] | None = None, address_of: Callable[[int], str] = str,
                 disk: str = "the disk has less free space than the reserve this server keeps") -> None:
        """``committer``: None where every call is durable as it returns (a server in memory, the
        simulator's instant disk): nothing waits; ``space``: the disk whose free space the doors
        check (default: the committer's); ``table``: the request-to-reply table (the simulator
        shares one among its servers: its clients keep their request ids when they fail over);
        ``address_of``: a partition of this DC, for the misrouting refusal; ``disk``: what is full,
        for the full-disk refusal."""
        self.core = core
        self.committer = committer
        self.space = space
        self.table: dict[int, T] = {} if table is None else table
        self._address_of = address_of
        self.disk = disk
        self._held: deque[tuple[int, list[Effect]]] = deque()
        self._membership = core.membership
        self.closing = False  # the driver is stopping: no core step any more (``handle``)
        after = core.config.auto_remove_after_us
        self.detector = Detector(after) if after > 0 else None
        # the driver counters (``okapikv.wire.stats.DriverFigures``)
        self.client_requests = 0
        self.pipeline_batches = 0
        self.peer_batches_received = 0
        self.peer_messages_received = 0
        self.handler_errors = 0
        #: GET replies that left before effects held in front of them (``_early_reads``), and GET
        #: replies held for a group because their key or the clock bound was not yet durable
        self.get_replies_early = 0
        self.get_replies_held = 0

    # ================================================================ the doors

    def refusal(self, request: ClientRequest) -> ErrorReply | None:
        """Count ``request`` and say why it is refused before the core sees it, or None."""
        self.client_requests += 1
        problem = self.misrouted(request)
        if problem is not None:
            return ErrorReply(request.request_id, ErrorCode.FAILED_PRECONDITION, problem)
        space = self.space if self.space is not None else self.committer
        if space is not None and space.disk_full and isinstance(request, WRITE_REQUESTS):
            return ErrorReply(request.request_id, ErrorCode.RESOURCE_EXHAUSTED,
                              f"disk full: {self.disk}; the write was not applied (reads still work)")
        return None

    @property
    def refuses_nothing(self) -> bool:
        """Whether ``refusal`` refuses no request now: one partition (nothing is misrouted) and no
        full disk (a server in memory, or a durable one with room: the disk is found full between
        a driver's batches, on its loop, never inside one). A driver then counts a batch's requests
        at once (``count_requests``) instead of asking per request."""
        if self.core.config.num_partitions != 1:
            return False
        space = self.space if self.space is not None else self.committer
        return space is None or not space.disk_full

    def count_requests(self, count: int) -> None:
        """``count`` requests passed the doors without ``refusal`` (``refuses_nothing``)."""
        self.client_requests += count

    def misrouted(self, request: ClientRequest) -> str | None:
        """Why a single-key request is at the wrong partition (RO-TX and SCAN may start at any
        server of the DC; a key the core refuses anyway, INVALID_ARGUMENT, is left to it)."""
        config = self.core.config
        partitions = config.num_partitions
        if partitions == 1:
            return None
        here, max_key = config.partition, config.max_key_bytes
        if type(request) is PutManyRequest:
            for key in request.keys:
                if key and len(key) <= max_key and (owner := partition_of(key, partitions)) != here:
                    return (f"key {key[:40]!r} belongs to partition {owner} ({self._address_of(owner)}); this "
                            f"server is partition {here}, and a bulk PUT's keys must all belong to the server it "
                            "is sent to")
            return None
        single: bytes | None = getattr(request, "key", None)
        if not single or len(single) > max_key:
            return None
        owner = partition_of(single, partitions)
        if owner == here:
            return None
        return f"key belongs to partition {owner} ({self._address_of(owner)}); this server is partition {here}"

    def peer_refusal(self, source: ServerId) -> str | None:
        """Why peer messages from ``source`` are refused now (they stay with their sender, which
        resends them once accepted), or None: on a full disk, replication from other DCs, whose
        versions need space."""
        space = self.space if self.space is not None else self.committer
        if space is not None and space.disk_full and source.dc != self.core.dc:
            return "disk full: replication to this server is paused until space is freed"
        return None

    # ================================================================ the request-to-reply table

    def expect(self, request_id: int, target: T) -> None:
        """``target`` waits for the reply to ``request_id``."""
        self.table[request_id] = target

    def take(self, request_id: int) -> T | None:
        """Who waits for the reply to ``request_id`` (forgotten now), or None: nobody any more."""
        return self.table.pop(request_id, None)

    @property
    def waiting_replies(self) -> int:
        return len(self.table)

    def cancel(self, request_ids: Iterable[int]) -> int:
        """Their callers went away: forget them, and drop those that are snapshot reads still
        running (``PartitionServer.cancel_reads``; a write is applied once taken). How many reads
        were dropped."""
        ids = list(request_ids)
        for request_id in ids:
            self.table.pop(request_id, None)
        return self.core.cancel_reads(ids)

    # ================================================================ calls into the core

    def handle(self, messages: Sequence[Message], now_us: int) -> Outbox:
        """Hand ``messages`` (one batch: one replication batch per peer for all of them) to the core."""
        if self.closing:
            # The final clock bound is being written: a core step now could announce a timestamp
            # above it (a heartbeat riding on the step), which the next start would take for a
            # write it lost. Peers resend what is dropped here through the catch-up after the restart.
            return self.fail(messages, ErrorCode.UNAVAILABLE, "the server is shutting down")
        core = self.core
        detector = self.detector
        if detector is not None:
            for message in messages:
                source = getattr(message, "source", None)
                if isinstance(source, ServerId):
                    detector.hear(source.dc, now_us)
        if len(messages) == 1:
            effects = core.handle(messages[0], now_us)
            look = core.woke or type(messages[0]) not in NO_EARLIER_DEADLINE
        else:
            effects = core.handle_batch(messages, now_us)
            look = core.woke or any(type(message) not in NO_EARLIER_DEADLINE for message in messages)
        gets = None
        if self.committer is not None:
            gets = {message.request_id: message.key for message in messages if type(message) is GetRequest}
        outbox = self._release(effects, gets)
        if look:
            outbox.deadline = core.next_deadline()
        return outbox

    def timer(self, now_us: int) -> Outbox:
        """The core's timer (its ``next_deadline`` has come), then the failure detector's rule."""
        core = self.core
        effects = core.on_timer(now_us)
        removed = None
        space = self.space if self.space is not None else self.committer
        if self.detector is not None and space is not None and space.disk_full:
            self.detector.deaf(now_us)  # it refuses the other DCs' messages: their silence proves nothing
        elif self.detector is not None and not self.closing:
            view = self.detector.proposal(core.membership, core.id, now_us)
            if view is not None:
                dc = next(dc for dc, state in enumerate(view.states) if state != core.membership.states[dc])
                removed = dc, self.detector.silent_for(dc, now_us)
                effects = [*effects, *core.change_membership(view, now_us)]
                core.stats.auto_removals += 1
        outbox = self._release(effects)
        outbox.removed = removed
        outbox.deadline = core.next_deadline()
        return outbox

    def start(self, repair: Repair | None = None, verify: Verify | None = None) -> Outbox:
        """The catch-up (or repair) of a new incarnation: its first messages to every replica."""
        core = self.core
        outbox = self._release(core.start_catch_up(repair) if verify is None else core.start_catch_up(repair, verify))
        outbox.deadline = self.core.next_deadline()
        return outbox

    def change_membership(self, view: Membership, now_us: int) -> Outbox:
        """The admin request (`okapi dc remove`): adopt ``view`` if it is newer and pass it on."""
        outbox = self._release(self.core.change_membership(view, now_us))
        outbox.deadline = self.core.next_deadline()
        return outbox

    @staticmethod
    def spins(delay_us: float) -> bool:
        """Whether a deadline ``delay_us`` away is met without a timer, by spinning up to it
        (``spin_deadline``), by a driver whose timers have millisecond granularity."""
        return delay_us <= SPIN_US

    def spin_deadline(self, now_us: int, since_us: int) -> int | None:
        """For a driver with millisecond timers, after a timer run that began at ``since_us``: the
        next deadline if it is at most ``SPIN_US`` away (run the timer again once the clock reads
        it, without a timer) and the run has not spent ``SPIN_BUDGET_US``; else None."""
        deadline = self.core.next_deadline()
        if deadline - now_us > SPIN_US or now_us >= since_us + SPIN_BUDGET_US:
            return None
        return deadline

    def fail(self, messages: Sequence[Message], code: ErrorCode = ErrorCode.INTERNAL,
             why: str = "the server failed on this request (see its log)") -> Outbox:
        """Error replies for the requests among ``messages`` that are still waited for (the core
        failed on them, or the server is stopping)."""
        effects: list[Effect] = []
        for message in messages:
            request_id = getattr(message, "request_id", None)
            if request_id is not None and request_id in self.table:
                effects.append(Respond(ErrorReply(request_id, code, why)))
        return Outbox(effects)

    # ================================================================ durability

    def _release(self, effects: list[Effect], gets: dict[int, bytes] | None = None) -> Outbox:
        """The effects of one core call that may leave now; the others wait for their group.
        ``gets``: the call's GET requests (request id -> key), whose replies may leave early."""
        outbox = Outbox(effects)
        core = self.core
        if core.membership is not self._membership:
            outbox.membership = self._membership = core.membership
        committer = self.committer
        if committer is None:
            return outbox
        need = committer.stage(core.drain_changes(), core.hlc)
        if effects and (need > committer.durable or self._held):
            early: list[Effect] = []
            rest = effects
            if gets:
                early, rest, held = self._early_reads(effects, gets, committer)
                self.get_replies_early += len(early)
                self.get_replies_held += held
            outbox.effects = early
            if rest:
                self._held.append((need, rest))
        return outbox

    @staticmethod
    def _early_reads(effects: list[Effect], gets: dict[int, bytes], committer: Committer,
                     ) -> tuple[list[Effect], list[Effect], int]:
        """Split ``effects`` into the GET replies that may leave before the effects held in front
        of them, and the rest (in order); and how many GET replies the rest holds.

        Why a GET's reply may overtake (the rule is "nothing acknowledged or revealed before it is
        durable", docs/design.md): the reply carries the value of the newest visible version of its
        key and a session, whose ``dt`` comes from that version's dependency vector and whose
        ``stable`` vector is the server's. If no group that inserted a version of the key is still
        to become durable, the version read, and the local versions its vector names (revealed to
        its writer, so durable first), survive a crash. The ``stable`` vector's remote entries cover
        versions made durable at their own DC before they were sent (a lost copy here is fetched
        again by the catch-up before a restarted server serves), and its local entry, like every
        local timestamp the reply carries, is at most the HLC, which the durable clock bound covers
        when ``read_need`` is. The overtaken effects reveal nothing the reply depends on: a write
        of the same key is the held version itself, and a session's own later writes are not in
        its read. Only replies to GETs of this call are looked at (``gets``), and peer messages
        keep their order (a heartbeat never overtakes an update)."""
        durable = committer.durable
        early: list[Effect] = []
        rest: list[Effect] = []
        held = 0
        for effect in effects:
            if type(effect) is Respond and type(effect.reply) is GetReply:
                key = gets.get(effect.reply.request_id)
                if key is not None:
                    if committer.read_need(key) <= durable:
                        early.append(effect)
                        continue
                    held += 1
            rest.append(effect)
        return early, rest, held

    def durable(self) -> Outbox:
        """The committer made more groups durable: the effects that waited for them, in order."""
        assert self.committer is not None
        durable = self.committer.durable
        held = self._held
        released: list[Effect] = []
        while held and held[0][0] <= durable:
            released.extend(held.popleft()[1])
        return Outbox(released)

    @property
    def held_effect_groups(self) -> int:
        """Calls whose effects wait for durability."""
        return len(self._held)
