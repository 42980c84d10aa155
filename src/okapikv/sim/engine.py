"""The deterministic discrete-event simulator: the real core under virtual time and injected faults.

One run (TigerBeetle VOPR style): virtual *true* time in microseconds, a heap of events, and ONE
``random.Random(seed)`` for every draw (delays, clocks, workload, faults), so a seed replays a run
exactly. The partition servers are the production ``okapikv.core.server.PartitionServer``; this
module only carries out their effects:

- every server has its own ``ClockModel``; ``handle``/``on_timer`` get that server's clock reading,
  and its ``next_deadline`` (in its clock) is turned back into true time to schedule its timer;
- links are FIFO and reliable (docs/protocol.md, "Replication and heartbeats"): each message gets a delay
  (WAN matrix plus jitter between DCs, 0.1-0.5 ms inside a DC) but is never delivered before an
  earlier message of the same link;
- clients are closed-loop sessions (``ClientSession``) attached to one DC, talking to the partition
  that owns the key (any partition of the DC coordinates a SCAN or RO-TX).

Faults (``FaultPlan``): *partition* a DC or the link between two DCs (messages are held, in FIFO
order, and delivered on *repair*: links are reliable); *crash* a server and *restart* it later;
*pause* a server (SIGSTOP: it stops processing messages and timers while messages queue for it, then
resumes with its state intact); *slow* a server (every message costs it extra service time); *step*
a clock forward; clocks also drift. With ``clock_jumps`` clocks also go far wrong, by minutes to
hours: a running server's clock *jumps* ahead and stays there; a server is killed and *restarts
with its clock stepped back* (its recovered clock bound, hence its HLC, ahead of its clock), fixed
at the heal; a server is killed and *restarts with its clock ahead*, and stays so.

A crash is what ``kill -9`` does to a durable server (``okapikv.server`` over ``okapikv.storage``):
everything in memory is gone, what it had made durable is not. The durable driver writes each
call's changes before it releases that call's effects, so the disk holds exactly the store and
vectors of the last call that ran: the restart builds a fresh ``PartitionServer`` from them
(``restore``, with the clock floor at the old clock + 1, the least a persisted bound may be) and
carries out its ``start_catch_up``. With ``FaultPlan.lose_disk_share`` a crash may lose the disk too:
the restart then restores nothing, not even a clock bound, and repairs from the replicas
(``PartitionServer``'s repair), which the checkers judge like any run. Lost with the process: what
it had taken but not finished (parked requests, reads waiting for slices), and what it had queued
for others behind a cut link
(its link queues); what it had already sent stays on the wire. Peer messages it had not handled
(in flight to it, arriving while it is down, in its inbox) are not lost: as the production links
do, their senders keep them unacknowledged and resend them, in order, to the new incarnation,
which must tell them from its own (``okapikv.core.reads``: tx ids). Client requests are lost with
their connection: the client resends its request (``CLIENT_RETRY_US`` later, on the same server,
until it serves), which never ran, so a write is applied once. Once its server has been down for
``FaultPlan.failover_after_ms``, a client moves to another DC instead if that DC can adopt its
session (``okapikv.core.session.adopt``, what the real clients' ``fallback`` asks ``AdoptSession``),
and stays there: the checkers then judge the session guarantees across the move.

A run is a fault phase (``duration_s``: clients run, faults strike) then a heal-and-converge phase:
every fault is repaired, clients run on for ``liveness_s`` (the part the liveness checker judges:
every operation completes and every write becomes visible in every DC within bounds; the history's
meta ``liveness`` and its ``visible`` events), then finish their current operation and stop, the
system runs until quiescence (no replication in flight, every server's stable vector past every
write it can be past: a timestamp legitimately ahead of other clocks is held back until they come
within the maximum clock offset of it), and then every written key is read in every DC (``final``
reads) for the convergence checker.

While running, the simulator also checks two internal invariants the histories cannot show:
replication promises (a server's ``vv[i]`` never covers an update from DC i that is still in flight
to it: FIFO links plus heartbeats must not run ahead of updates), stability (a server's stable
vector never exceeds what the servers it summarises have received, and never moves backwards) and
the clock bound (``ClockDragged``: a server's HLC never runs further ahead of its own clock than the
maximum offset, or than the clock bound it restarted above: nothing received drags it).
"""

from __future__ import annotations

import heapq
import random
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import count

from okapikv.check.anomalies import Anomaly
from okapikv.check.history import History, HistoryRecorder, Operation, decode_bytes
from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    DeleteRequest,
    Effect,
    ErrorReply,
    GetReply,
    GetRequest,
    GsvExchange,
    Heartbeat,
    Message,
    PutRequest,
    ReadTxReply,
    ReadTxRequest,
    ReplicateBatch,
    Respond,
    ScanReply,
    ScanRequest,
    Send,
    SwapReply,
    SwapRequest,
    VvReport,
    WriteReply,
)
from okapikv.core.mvstore import Version
from okapikv.core.partitioning import partition_of
from okapikv.core.server import PartitionServer, Repair
from okapikv.core.session import ClientSession, adopt
from okapikv.core.stats import WaitStats
from okapikv.core.timestamps import pack, physical_of
from okapikv.sim.clock import ClockModel
from okapikv.sim.config import SimConfig, dc_names
from okapikv.sim.workload import Workload

START_US = 1_000_000
#: handling these never moves a server's next deadline earlier (they park nothing), so the
#: simulator skips re-arming the timer after them (a measurable saving: they are most messages)
_NO_EARLIER_DEADLINE = frozenset({Heartbeat, ReplicateBatch, VvReport, GsvExchange})
INFINITY = 1 << 62
QUIESCENCE_POLL_US = 5_000
#: how long a client whose request was lost with a crashed server waits before resending it
CLIENT_RETRY_US = 10_000
#: how many times a client starts a paged SCAN over when a later page finds its snapshot gone
#: (ABORTED), as the real clients do (``okapikv.client.operations.SCAN_RESTARTS``)
SCAN_RESTARTS = 2
FINAL_READERS_PER_DC = 8
#: what the HLC may run ahead of the clock plus the maximum offset (the logical carry: 1 us per
#: 65,536 timestamps within one microsecond) before the simulator reports ``ClockDragged``
DRAG_SLACK_US = 1_000
#: a write held back (``held_until_us``) by less than this past its completion is not marked
HELD_MIN_US = 100_000

# event kinds (ints compare fast; the heap entry is (time, seq, kind, target, payload))
DELIVER = 0  # payload: message for server ``target`` (arrives: may queue behind a slow server)
PROCESS = 1  # payload: message for server ``target`` whose service time has elapsed
TIMER = 2  # payload: timer generation
REPLY = 3  # payload: reply for client ``target``
CLIENT_NEXT = 4  # client ``target`` issues its next operation
CONTROL = 5  # payload: a callable (faults, phases)

Event = tuple[int, int, int, int, object]


@dataclass(slots=True)
class _Client:
    index: int
    process: str
    dc: int
    session: ClientSession
    final_keys: list[bytes] | None = None  # a final convergence reader: its keys, in order
    op: Operation | None = None
    request_id: int = 0
    request: ClientRequest | None = None  # the request in flight, resent if a crash loses it
    server: int = 0  # the server it was sent to
    lost_since: int | None = None  # when a crash first lost the request in flight
    # a paged SCAN in progress: its first request, the pairs of its pages so far, restarts left
    scan: ScanRequest | None = None
    scan_items: list[tuple[bytes, bytes]] = field(default_factory=list)
    scan_restarts: int = 0
    counter: int = 0
    stopped: bool = False


@dataclass(slots=True)
class FaultRecord:
    time_us: int
    description: str


@dataclass(slots=True)
class SimResult:
    config: SimConfig
    history: History | None
    operations: Counter[str]
    completed: Counter[str]
    waits: dict[str, WaitStats]
    waits_by_dc: dict[int, dict[str, WaitStats]]
    server_operations: dict[int, Counter[str]]
    visibility_us: dict[tuple[int, int], list[int]]
    anomalies: list[Anomaly]
    faults: list[FaultRecord]
    simulated_us: int
    fault_phase_end_us: int
    quiescent_us: int | None
    wall_s: float
    events: int
    snapshot_retries: int = 0
    messages: Counter[str] = field(default_factory=Counter)
    scan_restarts: int = 0


class Simulation:
    """One seeded run. ``run()`` returns a ``SimResult`` (history unchecked: see ``sim.runner``)."""

    def __init__(self, config: SimConfig, *, server_factory: Callable[[CoreConfig], PartitionServer] | None = None
                 ) -> None:
        """``server_factory`` builds each partition server (tests inject deliberately broken ones)."""
        config.validate()
        factory = self.factory = server_factory or PartitionServer
        self.config = config
        self.invariants = config.invariants
        self.rng = random.Random(config.seed)
        rng = self.rng
        dcs, partitions = config.num_dcs, config.num_partitions
        self.num_partitions = partitions
        self.servers = [
            factory(
                CoreConfig(
                    dc=dc,
                    partition=p,
                    num_dcs=dcs,
                    num_partitions=partitions,
                    protocol=config.protocol,
                    piggyback_usv=config.piggyback_usv,
                    **({"max_scan_items": config.scan_page_items} if config.scan_page_items else {}),
                    max_clock_offset_us=round(config.max_clock_offset_ms * 1000),
                )
            )
            for dc in range(dcs)
            for p in range(partitions)
        ]
        count_servers = self.count_servers = len(self.servers)
        skew_us = int(config.clock_skew_ms * 1000)
        drift_max = config.fault_plan.drift_ppm_max if config.faults else 0.0
        self.clocks = [
            ClockModel(
                rng.randint(0, skew_us) if skew_us else 0,
                rng.uniform(-drift_max, drift_max) if drift_max else 0.0,
                START_US,
            )
            for _ in range(count_servers)
        ]
        self.offset_us = round(config.max_clock_offset_ms * 1000)
        self.drag_us = self.offset_us + DRAG_SLACK_US
        self.dragged = [False] * count_servers  # reported ClockDragged once
        #: per server, the clock floor its current incarnation restarted above, in physical us plus
        #: ``DRAG_SLACK_US`` (``ClockDragged``)
        self.floors = [0] * count_servers
        self.heap: list[Event] = []
        self._seq = count()
        self.now = START_US
        self.events = 0
        # network
        self.wan_us = [[int(ms * 1000) for ms in row] for row in config.wan()]
        self.lan_low, lan_high = config.lan_us
        self.lan_span = lan_high - self.lan_low + 1
        self.wan_jitter = config.wan_jitter
        self.wan_jitter_us = config.wan_jitter_ms * 1000
        self._random = rng.random
        self.link_last = [0] * (count_servers * count_servers)
        spread_us = int(config.wan_link_spread_ms * 1000)
        self.link_extra = [
            rng.randint(0, spread_us) if spread_us and (src // partitions) != (dst // partitions) else 0
            for src in range(count_servers)
            for dst in range(count_servers)
        ]
        self.dc_down = [0] * dcs
        self.pair_down: Counter[tuple[int, int]] = Counter()
        self.held: dict[int, list[Message]] = {}
        self.inflight: dict[int, deque[int]] = {}  # cross-DC link -> first new timestamps of batches in flight
        self.carried: dict[int, int] = {}  # cross-DC link -> highest update timestamp it has carried
        self.replication_inflight = 0
        # servers
        self.paused = [False] * count_servers
        self.down = [False] * count_servers  # crashed, not restarted yet
        #: per crashed server, per source server: the peer messages its links will resend to it
        self.unacked: list[dict[int, list[Message]]] = [{} for _ in range(count_servers)]
        self.retired: list[PartitionServer] = []  # crashed incarnations (their counters count)
        self.inbox: list[list[Message]] = [[] for _ in range(count_servers)]
        self.service_us = [config.service_us] * count_servers
        self.busy_until = [0] * count_servers
        self.timer_at = [INFINITY] * count_servers
        self.timer_gen = [0] * count_servers
        self.last_stable = [server.stable for server in self.servers]
        # clients
        self.workload = Workload(config, rng)
        self.recorder = HistoryRecorder(self._meta()) if config.record else None
        self.clients: list[_Client] = []
        for index in range(config.num_clients):
            self.clients.append(_Client(index, f"c{index}", index % dcs, ClientSession(dcs)))
        self.pending: dict[int, int] = {}
        self.failover_us = int(config.fault_plan.failover_after_ms * 1000)
        self.failovers = 0
        self.scan_restarts = 0
        self._next_request = 1
        self.operations: Counter[str] = Counter()
        self.completed: Counter[str] = Counter()
        self.message_counts: dict[type, int] = {}
        # phases
        self.fault_phase_end = START_US + int(config.duration_s * 1_000_000)
        self.liveness_end = self.fault_phase_end + int(config.liveness_s * 1_000_000)
        self.healed = False  # every fault repaired; no new one strikes
        self.stopping = False  # clients finish their operation and stop
        self.quiescent_at: int | None = None
        self.done = False
        self.active_clients = 0
        self.final_remaining = 0
        self.write_target = 0
        self.anomalies: list[Anomaly] = []
        self.faults: list[FaultRecord] = []
        self.fault_undo: list[Callable[[], None]] = []
        # measurements
        self.visibility: dict[tuple[int, int], list[int]] = {}
        #: per replica, per source DC: (version, written at, operation whose visibility the history
        #: records or None, sampled for the latency figures)
        self.visibility_pending: list[dict[int, deque[tuple[Version, int, Operation | None, bool]]]] = [
            {} for _ in range(count_servers)]
        self._invariant_reports = 0
        self.watch_writes = bool(config.visibility_sample or config.liveness_s or config.clock_jumps)

    def _meta(self) -> dict[str, object]:
        c = self.config
        return {
            "source": "sim",
            "seed": c.seed,
            "protocol": c.protocol,
            "dcs": c.num_dcs,
            "dc_names": list(dc_names(c.num_dcs)),
            "partitions": c.num_partitions,
            "clients": c.num_clients,
            "duration_s": c.duration_s,
            "faults": c.faults,
            "clock_skew_ms": c.clock_skew_ms,
            "clock_jumps": c.clock_jumps,
            "liveness_s": c.liveness_s,
            "max_clock_offset_ms": c.max_clock_offset_ms,
            "time": "virtual true time (us)",
        }

    # ================================================================ scheduling

    def _push(self, at: int, kind: int, target: int, payload: object = None) -> None:
        heapq.heappush(self.heap, (at, next(self._seq), kind, target, payload))

    def _lan(self) -> int:
        return self.lan_low + int(self._random() * self.lan_span)

    def _wan_delay(self, src_dc: int, dst_dc: int) -> int:
        """One-way delay between two DCs: the matrix entry, plus relative and absolute jitter."""
        random = self._random
        base = self.wan_us[src_dc][dst_dc]
        return base + int(base * self.wan_jitter * random()) + int(self.wan_jitter_us * random())

    def _link_up(self, a: int, b: int) -> bool:
        if a == b:
            return True
        return not (self.dc_down[a] or self.dc_down[b] or self.pair_down[(min(a, b), max(a, b))])

    def _send(self, source: int, destination: int, message: Message) -> None:
        partitions = self.num_partitions
        src_dc, dst_dc = source // partitions, destination // partitions
        link = source * self.count_servers + destination
        kind = type(message)
        counts = self.message_counts
        counts[kind] = counts.get(kind, 0) + 1
        if src_dc == dst_dc:
            # inside a DC: the common case (slices, stabilization), kept short
            if self.down[destination]:
                self.unacked[destination].setdefault(source, []).append(message)
                return
            at = self.now + self.lan_low + int(self._random() * self.lan_span)
            if at < self.link_last[link]:
                at = self.link_last[link]
            self.link_last[link] = at
            heapq.heappush(self.heap, (at, next(self._seq), DELIVER, destination, message))
            return
        if kind is ReplicateBatch:
            self._track_batch(link, message)  # type: ignore[arg-type]
        if not self._link_up(src_dc, dst_dc):
            self.held.setdefault(link, []).append(message)
            return
        self._transmit(link, src_dc, dst_dc, destination, message)

    def _track_batch(self, link: int, batch: ReplicateBatch) -> None:
        """Count a replication batch in flight, with the lowest timestamp in it that the link has not
        carried yet (what the replication promise is checked against, ``_check_promise``): a
        catch-up answer resends updates the link carried before (``CatchUpRequest``), which a
        heartbeat sent before it may rightly cover; a batch with nothing new is recorded as
        ``INFINITY``."""
        updates = batch.updates
        first, last = updates[0].timestamp, updates[-1].timestamp
        carried = self.carried.get(link, 0)
        if first <= carried:
            first = min((u.timestamp for u in updates if u.timestamp > carried), default=INFINITY)
        if last > carried:
            self.carried[link] = last
        self.inflight.setdefault(link, deque()).append(first)
        self.replication_inflight += 1

    def _transmit(self, link: int, src_dc: int, dst_dc: int, destination: int, message: Message) -> None:
        """Put a cross-DC message on its link: never delivered before the link's previous message.
        Nothing leaves for a crashed server: the link waits to resend it to the next incarnation."""
        if self.down[destination]:
            self.unacked[destination].setdefault(link // self.count_servers, []).append(message)
            return
        at = self.now + self._wan_delay(src_dc, dst_dc) + self.link_extra[link]
        last = self.link_last[link]
        if at < last:
            at = last
        self.link_last[link] = at
        heapq.heappush(self.heap, (at, next(self._seq), DELIVER, destination, message))

    def _arm(self, index: int) -> None:
        """Schedule server ``index``'s timer at its next deadline (true time)."""
        deadline = self.servers[index].next_deadline()
        clock = self.clocks[index]
        if clock.drift_ppm:
            at = clock.true_time_for(deadline, self.now)
        else:
            at = deadline - clock.offset_us - clock.stepped_us
            if at < self.now:
                at = self.now
        if at < self.timer_at[index]:
            self.timer_gen[index] += 1
            self.timer_at[index] = at
            heapq.heappush(self.heap, (at, next(self._seq), TIMER, index, self.timer_gen[index]))

    # ================================================================ carrying out effects

    def _apply(self, index: int, effects: list[Effect]) -> None:
        partitions = self.num_partitions
        for effect in effects:
            if type(effect) is Send:
                destination = effect.destination
                self._send(index, destination.dc * partitions + destination.partition, effect.message)
            else:
                assert isinstance(effect, Respond)
                reply = effect.reply
                client = self.pending.pop(reply.request_id, None)
                if client is None:
                    # a request is resent only once lost, so each runs once: a second answer means
                    # the simulator delivered a request twice (a write would be applied twice)
                    self._invariant("DuplicateRequest", f"{self._name(index)} answered request "
                                                        f"{reply.request_id} again")
                    continue
                if self.watch_writes and isinstance(reply, WriteReply | SwapReply):
                    self._watch_write(index, client, reply)
                heapq.heappush(self.heap, (self.now + self._lan(), next(self._seq), REPLY, client, reply))

    def _process(self, index: int, message: Message) -> None:
        server = self.servers[index]
        kind = type(message)
        if kind is ReplicateBatch:
            source = message.source  # type: ignore[union-attr]
            link = (source.dc * self.num_partitions + source.partition) * len(self.servers) + index
            queue = self.inflight.get(link)
            if queue:
                queue.popleft()
                self.replication_inflight -= 1
        now_us = self.clocks[index].read(self.now)
        effects = server.handle(message, now_us)
        if self.invariants:
            if kind is Heartbeat:
                self._check_promise(index, message)  # type: ignore[arg-type]
            if physical_of(server.vv[server.dc]) > max(now_us + self.drag_us, self.floors[index]):
                self._clock_dragged(index, message, now_us)
        if effects:
            self._apply(index, effects)
        if server.stable is not self.last_stable[index]:
            self._stable_changed(index)
        if kind not in _NO_EARLIER_DEADLINE:
            self._arm(index)

    def _on_timer(self, index: int) -> None:
        self.timer_at[index] = INFINITY
        server = self.servers[index]
        now_us = self.clocks[index].read(self.now)
        effects = server.on_timer(now_us)
        if self.invariants and physical_of(server.vv[server.dc]) > max(now_us + self.drag_us, self.floors[index]):
            self._clock_dragged(index, None, now_us)
        if effects:
            self._apply(index, effects)
        if server.stable is not self.last_stable[index]:
            self._stable_changed(index)
        self._arm(index)

    # ================================================================ the event loop

    def run(self) -> SimResult:
        started = time.perf_counter()
        for index in range(len(self.servers)):
            self._arm(index)
        for client in self.clients:
            self._push(START_US + self.rng.randint(0, 1000), CLIENT_NEXT, client.index)
            self.active_clients += 1
        if self.config.faults:
            self._schedule_faults()
        self._push(self.fault_phase_end, CONTROL, 0, self._end_fault_phase)
        timeout_us = int(self.config.converge_timeout_s * 1_000_000)
        self._push(self.liveness_end + timeout_us, CONTROL, 0, self._check_clients_stopped)
        self._push(self.liveness_end + 2 * timeout_us, CONTROL, 0, self._give_up)
        heap = self.heap
        pop = heapq.heappop
        paused = self.paused
        busy_until = self.busy_until
        service_us = self.service_us
        timer_gen = self.timer_gen
        events = 0
        while heap and not self.done:
            at, _, kind, target, payload = pop(heap)
            self.now = at
            events += 1
            if kind == DELIVER:
                if busy_until[target] > at or service_us[target]:
                    start = max(at, busy_until[target]) + service_us[target]
                    busy_until[target] = start
                    if start > at:
                        heapq.heappush(heap, (start, next(self._seq), PROCESS, target, payload))
                        continue
                if paused[target]:
                    self._hold(target, payload)  # type: ignore[arg-type]
                else:
                    self._process(target, payload)  # type: ignore[arg-type]
            elif kind == TIMER:
                if payload == timer_gen[target] and not paused[target]:
                    self._on_timer(target)
            elif kind == REPLY:
                self._on_reply(target, payload)  # type: ignore[arg-type]
            elif kind == CLIENT_NEXT:
                self._issue(self.clients[target])
            elif kind == PROCESS:
                if paused[target]:
                    self._hold(target, payload)  # type: ignore[arg-type]
                else:
                    self._process(target, payload)  # type: ignore[arg-type]
            else:
                payload()  # type: ignore[operator]
        self.events = events
        return self._result(time.perf_counter() - started)

    # ================================================================ clients

    def _issue(self, client: _Client) -> None:
        if client.final_keys is not None:
            self._issue_final(client)
            return
        if self.stopping:
            self._client_stopped(client)
            return
        workload = self.workload
        f = workload.operation()
        dc = client.dc
        session = client.session.current
        rid = self._next_request
        self._next_request += 1
        partitions = self.num_partitions
        keys = workload.keys
        request: ClientRequest
        recorder = self.recorder
        op: Operation | None = None
        if f in ("get", "put", "swap", "delete"):
            index = workload.key_index()
            key = keys[index]
            partition = workload.key_partition[index]
            if f == "get":
                request = GetRequest(rid, key, session)
            elif f == "delete":
                request = DeleteRequest(rid, key, session)
            else:
                client.counter += 1
                value = f"{client.process}.{client.counter}".encode()
                request = (PutRequest if f == "put" else SwapRequest)(rid, key, value, session)
                if recorder is not None:
                    op = recorder.invoke(client.process, dc, f, self.now, key=decode_bytes(key),
                                         value=decode_bytes(value), server=(dc, partition))
            if recorder is not None and op is None:
                op = recorder.invoke(client.process, dc, f, self.now, key=decode_bytes(key), server=(dc, partition))
        elif f == "rotx":
            chosen = [keys[i] for i in workload.rotx_keys()]
            partition = self.rng.randrange(partitions)
            request = ReadTxRequest(rid, tuple(chosen), session)
            if recorder is not None:
                op = recorder.invoke(client.process, dc, f, self.now, keys=tuple(decode_bytes(k) for k in chosen),
                                     server=(dc, partition))
        else:
            low, high = workload.scan_range()
            limit = self.rng.randint(1, 4) if self.rng.random() < 0.25 else None
            partition = self.rng.randrange(partitions)
            request = ScanRequest(rid, keys[low], keys[high], limit, session)
            if recorder is not None:
                op = recorder.invoke(client.process, dc, f, self.now, start=decode_bytes(keys[low]),
                                     end=decode_bytes(keys[high]), limit=limit, server=(dc, partition))
        self.operations[f] += 1
        client.op = op
        client.server = dc * partitions + partition
        if isinstance(request, ScanRequest):
            client.scan, client.scan_items, client.scan_restarts = request, [], SCAN_RESTARTS
        self._send_request(client, request)

    def _send_request(self, client: _Client, request: ClientRequest) -> None:
        client.request_id = request.request_id
        client.request = request
        self.pending[request.request_id] = client.index
        heapq.heappush(self.heap, (self.now + self._lan(), next(self._seq), DELIVER, client.server, request))

    def _next_page(self, client: _Client, reply: ClientReply) -> bool:
        """A paged SCAN goes on as the real clients page it: a reply with a resume key asks for the
        next page at its snapshot; a later page refused ABORTED (its snapshot is gone, or the client
        moved DC) starts the scan over, at most SCAN_RESTARTS times. True when a request left."""
        first = client.scan
        if first is None:
            return False
        if type(reply) is ScanReply and reply.resume is not None:
            client.session.merge(reply.session)
            client.scan_items += reply.items
            limit = None if first.limit is None else first.limit - len(client.scan_items)
            request = replace(first, request_id=self._next_request, start=reply.resume, limit=limit,
                              session=client.session.current, snapshot=reply.snapshot)
        elif type(reply) is ErrorReply and reply.code == "ABORTED" and client.scan_restarts:
            client.scan_restarts -= 1
            client.scan_items = []
            request = replace(first, request_id=self._next_request, session=client.session.current)
            self.scan_restarts += 1
        else:
            return False
        self._next_request += 1
        self._send_request(client, request)
        return True

    def _on_reply(self, index: int, reply: ClientReply) -> None:
        client = self.clients[index]
        if type(reply) is ErrorReply and reply.code == "UNAVAILABLE" and client.request is not None:
            # A server repairing its data refuses requests (nothing ran): the client retries, or
            # moves to another DC, as when its server is down.
            self.pending[client.request.request_id] = index
            self._retry(client)
            return
        client.lost_since = None
        if self._next_page(client, reply):
            return
        if client.scan is not None:
            if type(reply) is ScanReply:  # the last page: the SCAN's result is every page's pairs
                reply = replace(reply, items=(*client.scan_items, *reply.items))
            client.scan, client.scan_items = None, []
        op = client.op
        now = self.now
        if type(reply) is ErrorReply:
            self.completed["fail"] += 1
            if op is not None and self.recorder is not None:
                self.recorder.complete(op, "fail", now, error=f"{reply.code}: {reply.message}")
        else:
            client.session.merge(reply.session)  # type: ignore[union-attr]
            self.completed["ok"] += 1
            if op is not None and self.recorder is not None:
                self.recorder.complete(op, "ok", now, **_result_fields(reply))
        client.op = None
        if client.final_keys is not None:
            self.final_remaining -= 1
            if self.final_remaining == 0:
                self.done = True
                return
            self._issue_final(client)
            return
        think = self.rng.randint(0, self.config.think_us_max) if self.config.think_us_max else 0
        heapq.heappush(self.heap, (now + think, next(self._seq), CLIENT_NEXT, index, None))

    def _client_stopped(self, client: _Client) -> None:
        if client.stopped:
            return
        client.stopped = True
        self.active_clients -= 1
        if self.active_clients == 0:
            self._all_clients_stopped()

    # ================================================================ phases

    def _end_fault_phase(self) -> None:
        """Heal everything; the clients run on for ``liveness_s``, then stop; then wait for quiescence."""
        self.healed = True
        for undo in list(self.fault_undo):
            undo()
        self.fault_undo.clear()
        liveness_s = self.config.liveness_s
        if not liveness_s:
            self.faults.append(FaultRecord(self.now, "heal: all faults repaired, clients stop"))
            self._stop_clients()
            return
        self.faults.append(FaultRecord(self.now, f"heal: all faults repaired, clients run {liveness_s:g} s more"))
        if self.recorder is not None:
            self.recorder.meta["liveness"] = {
                "heal_us": self.now,
                "operation_bound_us": round(self.config.liveness_operation_bound_ms * 1000),
                "visibility_bound_us": round(self.config.liveness_visibility_bound_ms * 1000),
                # every write started after the heal has its ``visible`` events
                "visibility": self.config.num_dcs > 1 and self.servers[0].protocol.stabilizes,
            }
        self._push(self.liveness_end, CONTROL, 0, self._stop_clients)

    def _stop_clients(self) -> None:
        self.stopping = True
        if self.config.liveness_s:
            self.faults.append(FaultRecord(self.now, "heal: clients stop"))
        if self.active_clients == 0:
            self._all_clients_stopped()

    def _all_clients_stopped(self) -> None:
        # Every timestamp issued, except what is legitimately ahead of the other clocks (a server's
        # clock or clock bound ahead): stable vectors pass it only once those clocks come within the
        # maximum offset of it (its writes then carry ``held_until_us``).
        cap = pack(min(clock.read(self.now) for clock in self.clocks) + self.offset_us)
        self.write_target = max(min(server.hlc, cap) for server in self.servers)
        self._push(self.now, CONTROL, 0, self._poll_quiescence)

    def _quiescent(self) -> bool:
        if self.replication_inflight or self.held:
            return False
        if not self.servers[0].protocol.stabilizes:
            return all(not self.inbox[i] for i in range(len(self.servers)))
        target = self.write_target
        return all(min(server.stable) >= target for server in self.servers) and not self._visibility_due()

    def _visibility_due(self) -> bool:
        """Whether a write the liveness checker follows is not visible somewhere yet and still within
        its bound (not held back: ``held_until_us``): the run waits for it, or for its deadline to
        pass, so that the history shows which."""
        if not self.config.liveness_s:
            return False
        bound = round(self.config.liveness_visibility_bound_ms * 1000)
        for pending in self.visibility_pending:
            for queue in pending.values():
                for _, written_at, op, _ in queue:
                    if op is not None and op.held_until_us is None and written_at + bound >= self.now:
                        return True
        return False

    def _poll_quiescence(self) -> None:
        if self._quiescent():
            self.quiescent_at = self.now
            self._start_final_reads()
            return
        if self.now - self.liveness_end > int(self.config.converge_timeout_s * 1_000_000):
            lagging = [
                f"dc{s.dc}/p{s.id.partition} stable={s.stable}"
                for s in self.servers
                if min(s.stable) < self.write_target
            ][:6]
            self.anomalies.append(
                Anomaly(
                    "NotQuiescent",
                    "sim",
                    f"{self.config.converge_timeout_s} s after the faults were healed the replicas were still not "
                    f"quiescent (replication in flight: {self.replication_inflight}; servers whose stable vector "
                    f"lags the last write timestamp {self.write_target}: {', '.join(lagging) or 'none'})",
                )
            )
            self._start_final_reads()
            return
        self._push(self.now + QUIESCENCE_POLL_US, CONTROL, 0, self._poll_quiescence)

    def _start_final_reads(self) -> None:
        if self.recorder is None:
            self.done = True
            return
        written = sorted({op.key for op in self.recorder.operations if op.is_write and op.key is not None})
        keys = [k.encode("utf-8", "surrogateescape") for k in written]
        if not keys:
            self.done = True
            return
        dcs = self.config.num_dcs
        readers = min(FINAL_READERS_PER_DC, len(keys))
        self.final_remaining = len(keys) * dcs
        for dc in range(dcs):
            for r in range(readers):
                client = _Client(len(self.clients), f"final-{dc}-{r}", dc, ClientSession(dcs), keys[r::readers])
                self.clients.append(client)
                self._push(self.now, CLIENT_NEXT, client.index)

    def _issue_final(self, client: _Client) -> None:
        assert client.final_keys is not None
        if not client.final_keys:
            return
        key = client.final_keys.pop(0)
        rid = self._next_request
        self._next_request += 1
        partition = partition_of(key, self.num_partitions)
        if self.recorder is not None:
            client.op = self.recorder.invoke(client.process, client.dc, "get", self.now, key=decode_bytes(key),
                                             final=True, server=(client.dc, partition))
        self.pending[rid] = client.index
        # Each convergence read depends on nothing: after reading a write whose timestamp is
        # legitimately ahead (a server's clock far ahead), a session is refused by the other servers.
        client.session = ClientSession(self.config.num_dcs)
        client.request = GetRequest(rid, key, client.session.current)
        client.server = client.dc * self.num_partitions + partition
        self._push(self.now + self._lan(), DELIVER, client.server, client.request)

    def _check_clients_stopped(self) -> None:
        """Clients must finish their last operation within the convergence timeout of the heal."""
        if self.active_clients > 0:
            self._give_up()

    def _give_up(self) -> None:
        stuck = [c for c in self.clients if c.op is not None]
        if stuck:
            described = "; ".join(c.op.describe() for c in stuck[:5] if c.op is not None)
            self.anomalies.append(
                Anomaly(
                    "StuckOperation",
                    "sim",
                    f"{len(stuck)} operation(s) never completed (a wait that is never released?): {described}",
                    tuple(c.op.id for c in stuck[:20] if c.op is not None),
                )
            )
        elif self.quiescent_at is None and not any(a.name == "NotQuiescent" for a in self.anomalies):
            self.anomalies.append(Anomaly("NotQuiescent", "sim", "the run hit its time limit before quiescence"))
        self.done = True

    # ================================================================ faults

    def _schedule_faults(self) -> None:
        plan = self.config.fault_plan
        rng = self.rng
        mix = plan.kinds + (plan.jump_kinds if self.config.clock_jumps else ())
        kinds = [k for k, w in mix if w > 0]
        weights = [w for _, w in mix if w > 0]
        at = START_US
        while True:
            at += int(rng.expovariate(1.0 / (plan.mean_interval_ms * 1000)))
            if at >= self.fault_phase_end:
                break
            kind = rng.choices(kinds, weights)[0]
            self._push(at, CONTROL, 0, self._fault_action(kind))

    def _fault_action(self, kind: str) -> Callable[[], None]:
        """Draw the fault's parameters now (at schedule time) so the RNG sequence stays fixed."""
        plan = self.config.fault_plan
        rng = self.rng
        dcs = self.config.num_dcs
        servers = len(self.servers)
        if kind.startswith("partition") and dcs < 2:
            kind = "crash"  # nothing to cut off with one DC
        if kind == "partition_dc":
            dc = rng.randrange(dcs)
            length = int(rng.uniform(*plan.partition_ms) * 1000)
            return lambda: self._partition_dc(dc, length)
        if kind == "partition_link":
            a, b = rng.sample(range(dcs), 2)
            length = int(rng.uniform(*plan.partition_ms) * 1000)
            return lambda: self._partition_link(a, b, length)
        if kind == "pause":
            index = rng.randrange(servers)
            length = int(rng.uniform(*plan.crash_ms) * 1000)
            return lambda: self._pause(index, length)
        if kind == "crash":
            index = rng.randrange(servers)
            length = int(rng.uniform(*plan.crash_ms) * 1000)
            lose_disk = plan.lose_disk_share > 0 and dcs > 1 and rng.random() < plan.lose_disk_share
            return lambda: self._crash(index, length, lose_disk=lose_disk)
        if kind == "slow":
            index = rng.randrange(servers)
            length = int(rng.uniform(*plan.slow_ms) * 1000)
            service = rng.randint(*plan.slow_service_us)
            return lambda: self._slow(index, length, service)
        if kind in ("clock_jump", "restart_clock_back", "restart_clock_ahead"):
            index = rng.randrange(servers)
            jump = int(rng.uniform(*plan.clock_jump_s) * 1_000_000)
            if kind == "clock_jump":
                return lambda: self._clock_step(index, jump)
            length = int(rng.uniform(*plan.crash_ms) * 1000)
            step = -jump if kind == "restart_clock_back" else jump
            return lambda: self._crash(index, length, clock_step_us=step)
        index = rng.randrange(servers)
        step = int(rng.uniform(*plan.clock_step_ms) * 1000)
        return lambda: self._clock_step(index, step)

    def _timed(self, length_us: int, undo: Callable[[], None]) -> None:
        """Undo a fault after ``length_us`` or at the heal, whichever comes first (exactly once)."""
        done = [False]

        def once() -> None:
            if not done[0]:
                done[0] = True
                undo()

        self.fault_undo.append(once)
        self._push(self.now + length_us, CONTROL, 0, once)

    def _partition_dc(self, dc: int, length_us: int) -> None:
        if self.healed:
            return
        self.dc_down[dc] += 1
        self.faults.append(FaultRecord(self.now, f"partition dc{dc} for {length_us / 1000:.0f} ms"))

        def repair() -> None:
            self.dc_down[dc] -= 1
            self.faults.append(FaultRecord(self.now, f"repair dc{dc}"))
            self._release_held()

        self._timed(length_us, repair)

    def _partition_link(self, a: int, b: int, length_us: int) -> None:
        if self.healed:
            return
        pair = (min(a, b), max(a, b))
        self.pair_down[pair] += 1
        described = f"partition link dc{pair[0]}-dc{pair[1]} for {length_us / 1000:.0f} ms"
        self.faults.append(FaultRecord(self.now, described))

        def repair() -> None:
            self.pair_down[pair] -= 1
            self.faults.append(FaultRecord(self.now, f"repair link dc{pair[0]}-dc{pair[1]}"))
            self._release_held()

        self._timed(length_us, repair)

    def _release_held(self) -> None:
        """Deliver, in FIFO order, what every link that is up again was holding."""
        count_servers = len(self.servers)
        partitions = self.num_partitions
        for link in sorted(self.held):
            source, destination = divmod(link, count_servers)
            src_dc, dst_dc = source // partitions, destination // partitions
            if not self._link_up(src_dc, dst_dc):
                continue
            for message in self.held.pop(link):
                self._transmit(link, src_dc, dst_dc, destination, message)

    def _pause(self, index: int, length_us: int) -> None:
        if self.healed or self.paused[index]:
            return
        self.paused[index] = True
        self.faults.append(FaultRecord(self.now, f"pause {self._name(index)} for {length_us / 1000:.0f} ms"))

        def resume() -> None:
            self.paused[index] = False
            self.faults.append(FaultRecord(self.now, f"resume {self._name(index)}"))
            queued, self.inbox[index] = self.inbox[index], []
            for message in queued:
                self._process(index, message)
            self.timer_at[index] = INFINITY
            self._arm(index)

        self._timed(length_us, resume)

    def _crash(self, index: int, length_us: int, clock_step_us: int = 0, *, lose_disk: bool = False) -> None:
        """``kill -9`` of server ``index``, restarted from its disk after ``length_us`` (module docstring),
        with its clock moved by ``clock_step_us`` (a clock stepped back is fixed at the heal; one
        restarting after the heal restarts with its clock right), or with ``lose_disk`` from an empty
        disk, in repair mode, when that loses nothing acknowledged."""
        if self.healed or self.paused[index]:
            return
        self.paused[index] = self.down[index] = True  # paused: the event loop skips it; down: see _hold
        stepped = f", restarting with its clock {clock_step_us / 1e6:+.0f} s" if clock_step_us else ""
        self.faults.append(FaultRecord(self.now, f"crash {self._name(index)} for {length_us / 1000:.0f} ms{stepped}"))
        mine = sorted(event for event in self.heap if event[3] == index and event[2] in (DELIVER, PROCESS))
        self.heap[:] = [event for event in self.heap if not (event[3] == index and event[2] in (DELIVER, PROCESS))]
        heapq.heapify(self.heap)  # in place: the event loop holds the list
        for message in [*self.inbox[index], *(event[4] for event in mine)]:
            if not isinstance(message, ClientRequest):  # requests: resent once each, below
                self._hold(index, message)  # type: ignore[arg-type]
        self.inbox[index] = []
        count_servers = self.count_servers
        for link in [link for link in self.held if link // count_servers == index]:
            for message in self.held.pop(link):  # its own link queues die with it
                if type(message) is ReplicateBatch:
                    self.inflight[link].pop()
                    self.replication_inflight -= 1
        self.busy_until[index] = self.now
        for client in self.clients:  # requests it had taken (parked, being served) are lost too
            if client.server == index and client.request is not None and client.request.request_id in self.pending:
                self._retry(client)

        def restart() -> None:
            old = self.servers[index]
            new = self.factory(old.config)
            repair = lose_disk and self._replicated_somewhere(index)
            if repair:
                zeros = (0,) * old.num_dcs
                new.restore((), vv=zeros, stable=zeros, gsv=zeros, horizon=zeros, hlc_floor=0)
                self.last_stable[index] = new.stable  # a new server: it serves nothing until repaired
            else:
                new.restore(((key, version) for key in list(old.store.keys()) for version in old.store.versions(key)),
                            vv=tuple(old.vv), stable=old.stable, gsv=old.gsv, horizon=old.horizon,
                            hlc_floor=old.hlc + 1)
            self.retired.append(old)
            self.servers[index] = new
            self.floors[index] = physical_of(old.hlc + 1) + DRAG_SLACK_US
            self.paused[index] = self.down[index] = False
            self.faults.append(FaultRecord(self.now, f"restart {self._name(index)}"
                                                     + (" on an empty disk, repairing" if repair else "")))
            if clock_step_us and not self.healed:
                self.clocks[index].restart(clock_step_us)
                if clock_step_us < 0:
                    self.fault_undo.append(lambda: self._fix_clock(index, -clock_step_us))
            self._apply(index, new.start_catch_up(Repair() if repair else None))
            unacked, self.unacked[index] = self.unacked[index], {}
            for source, messages in unacked.items():
                self._resend(source, index, messages)
            self._stable_changed(index)
            self.timer_at[index] = INFINITY
            self._arm(index)

        self._timed(length_us, restart)

    def _replicated_somewhere(self, index: int) -> bool:
        """Whether losing server ``index``'s disk loses nothing a repair can not bring back: every
        version it wrote has reached one of its replicas, and none of them is down or repairing
        (their disk may hold the only other copy of a version, lost too if theirs is lost)."""
        server = self.servers[index]
        dc, partition = server.dc, index % self.num_partitions
        newest = max((version.timestamp for _, version in server.store.written_by(dc, 0)), default=0)
        others = [other * self.num_partitions + partition for other in range(self.config.num_dcs) if other != dc]
        if any(self.down[other] or self.servers[other].repairing is not None for other in others):
            return False
        return any(self.servers[other].vv[dc] >= newest for other in others)

    def _hold(self, index: int, message: Message) -> None:
        """A message for a paused server waits in its inbox. One for a crashed server: a client's
        request is lost (the client resends it); a peer's stays unacknowledged in the peer's link,
        which resends it to the new incarnation (``okapikv.server.links``)."""
        if not self.down[index]:
            self.inbox[index].append(message)
        elif isinstance(message, ClientRequest):
            client = self.pending.get(message.request_id)
            if client is not None and self.clients[client].request is message:  # else superseded
                self._retry(self.clients[client])
        else:
            source = message.source
            self.unacked[index].setdefault(source.dc * self.num_partitions + source.partition, []).append(message)

    def _resend(self, source: int, destination: int, messages: list[Message]) -> None:
        """A link's unacknowledged tail, resent in order to a restarted server, ahead of anything
        the link sends later (and ahead of what it holds, if it is cut)."""
        partitions = self.num_partitions
        src_dc, dst_dc = source // partitions, destination // partitions
        link = source * self.count_servers + destination
        if not self._link_up(src_dc, dst_dc):
            self.held[link] = messages + self.held.get(link, [])
            return
        for message in messages:
            if src_dc == dst_dc:
                at = max(self.now + self._lan(), self.link_last[link])
                self.link_last[link] = at
                heapq.heappush(self.heap, (at, next(self._seq), DELIVER, destination, message))
            else:
                self._transmit(link, src_dc, dst_dc, destination, message)

    def _retry(self, client: _Client) -> None:
        """Resend a request a crash lost, ``CLIENT_RETRY_US`` later; once the server has been down
        ``failover_after_ms`` for it, to another DC that can adopt the session, if one can."""
        if client.lost_since is None:
            client.lost_since = self.now
        elif (self.failover_us and self.now - client.lost_since >= self.failover_us
              and self._fail_over(client)):
            return
        heapq.heappush(self.heap, (self.now + CLIENT_RETRY_US, next(self._seq), DELIVER, client.server,
                                   client.request))

    def _fail_over(self, client: _Client) -> bool:
        """Move ``client`` to the first other DC whose server for its request is up and has every
        dependency of its session (``okapikv.core.session.adopt``, what ``AdoptSession`` answers),
        and send the request there with the adopted session; False if no DC can take it yet."""
        request = client.request
        assert request is not None
        partitions, dcs, home = self.num_partitions, self.config.num_dcs, client.dc
        partition = client.server % partitions
        for step in range(1, dcs):
            other = (home + step) % dcs
            target = other * partitions + partition
            if self.down[target]:
                continue
            adoption = adopt(client.session.current, from_dc=home, here_dc=other, stable=self.servers[target].stable)
            if not adoption.ready:
                continue
            # the client gives up on its DC: a resend still on its way there was never sent
            stale = [event for event in self.heap if event[4] is request]
            if stale:
                self.heap[:] = [event for event in self.heap if event[4] is not request]
                heapq.heapify(self.heap)
            client.session = ClientSession(dcs)
            client.session.merge(adoption.session)
            client.dc, client.server, client.lost_since = other, target, None
            client.request = replace(request, session=adoption.session)
            if client.op is not None:
                client.op.dc, client.op.server = other, (other, partition)
            self.failovers += 1
            self.faults.append(FaultRecord(self.now, f"{client.process} fails over dc{home} -> dc{other}"))
            heapq.heappush(self.heap, (self.now + self._lan(), next(self._seq), DELIVER, target, client.request))
            return True
        return False

    def _slow(self, index: int, length_us: int, service_us: int) -> None:
        if self.healed:
            return
        self.service_us[index] += service_us
        self.faults.append(FaultRecord(self.now, f"slow {self._name(index)} (+{service_us} us per message) "
                                                 f"for {length_us / 1000:.0f} ms"))

        def recover() -> None:
            self.service_us[index] -= service_us
            self.faults.append(FaultRecord(self.now, f"recover {self._name(index)}"))
            self._requeue(index)

        self._timed(length_us, recover)

    def _requeue(self, index: int) -> None:
        """Serve the backlog of a server that recovered from slowness at its new speed, in order.
        Each message was given its service time when it arrived: without this a backlog built up
        at the slow speed (a burst of held messages on a repair) stayed slow for seconds after."""
        backlog = sorted(event for event in self.heap if event[2] == PROCESS and event[3] == index)
        if not backlog:
            return
        self.heap[:] = [event for event in self.heap if not (event[2] == PROCESS and event[3] == index)]
        heapq.heapify(self.heap)
        at, service = self.now, self.service_us[index]
        for event in backlog:
            message: Message = event[4]  # type: ignore[assignment]
            if service:
                at += service
                heapq.heappush(self.heap, (at, next(self._seq), PROCESS, index, message))
            elif self.paused[index]:  # served now, in order: what arrives at this instant comes after
                self._hold(index, message)
            else:
                self._process(index, message)
        self.busy_until[index] = at

    def _clock_step(self, index: int, step_us: int) -> None:
        if self.healed:
            return
        self.clocks[index].step(step_us)
        self.faults.append(FaultRecord(self.now, f"clock step {self._name(index)} +{step_us / 1000:.1f} ms"))
        self.timer_at[index] = INFINITY
        self._arm(index)

    def _clock_dragged(self, index: int, message: Message | None, now_us: int) -> None:
        """``ClockDragged``: server ``index``'s HLC ran further ahead of its clock than the maximum
        offset and above the clock bound it restarted at (reported once per server)."""
        if self.dragged[index]:
            return
        self.dragged[index] = True
        hlc = self.servers[index].hlc
        cause = f"handling a {type(message).__name__}" if message is not None else "its timer"
        ahead_ms = (physical_of(hlc) - now_us) / 1000
        self._invariant("ClockDragged", f"{self._name(index)}'s HLC {physical_of(hlc)} is "
                                        f"{ahead_ms:.1f} ms ahead of its clock after {cause}, "
                                        f"beyond the maximum clock offset ({self.config.max_clock_offset_ms:g} ms) "
                                        f"and above the clock bound it restarted at: a timestamp it took from "
                                        f"elsewhere dragged it")

    def _fix_clock(self, index: int, step_us: int) -> None:
        """The heal of a clock stepped back at a restart: it steps forward to the right time."""
        self.clocks[index].step(step_us)
        self.faults.append(FaultRecord(self.now, f"fix clock {self._name(index)} +{step_us / 1e6:.0f} s"))
        self.timer_at[index] = INFINITY
        self._arm(index)

    def _name(self, index: int) -> str:
        return f"dc{index // self.num_partitions}/p{index % self.num_partitions}"

    # ================================================================ invariants and measurements

    def _check_promise(self, index: int, heartbeat: Heartbeat) -> None:
        """After a heartbeat, vv[i] must stay below every update from that replica still in flight."""
        source = heartbeat.source
        link = (source.dc * self.num_partitions + source.partition) * len(self.servers) + index
        queue = self.inflight.get(link)
        server = self.servers[index]
        first = min(queue) if queue else INFINITY  # not queue[0]: catch-up answers resend older updates
        if server.vv[source.dc] >= first:
            self._invariant(
                "ReplicationPromise",
                f"{self._name(index)} received a heartbeat from {self._name(link // len(self.servers))} that sets "
                f"vv[{source.dc}]={server.vv[source.dc]} while an update with timestamp {first} from it is "
                f"still in flight: the heartbeat overtook the update, so stability may cover a missing version",
            )

    def _invariant(self, name: str, text: str) -> None:
        self._invariant_reports += 1
        if self._invariant_reports <= 20:
            self.anomalies.append(Anomaly(name, "sim", f"at {self.now} us: {text}"))

    def _stable_changed(self, index: int) -> None:
        server = self.servers[index]
        previous = self.last_stable[index]
        current = server.stable
        self.last_stable[index] = current
        if self.config.invariants and any(c < p for c, p in zip(current, previous, strict=True)):
            self._invariant("StableRegressed", f"{self._name(index)} stable vector moved backwards: "
                                               f"{previous} -> {current}")
        pending = self.visibility_pending[index]
        if not pending:
            return
        visible = server.protocol.visible
        recorder = self.recorder
        for source_dc, queue in pending.items():
            while queue and visible(version=queue[0][0], stable=current):
                _, written_at, op, sampled = queue.popleft()
                if sampled:
                    self.visibility.setdefault((source_dc, server.dc), []).append(self.now - written_at)
                if op is not None and recorder is not None:
                    recorder.visible(op, server.dc, self.now)

    def _watch_write(self, index: int, client: int, reply: WriteReply | SwapReply) -> None:
        """Follow a write's remote visibility: for the latency figures (a ``visibility_sample``), and
        for the liveness checker (every write started after the heal: ``visible`` events); and mark
        a write held back by a timestamp legitimately ahead of other clocks (``held_until_us``)."""
        config = self.config
        sampled = bool(config.visibility_sample) and self.rng.random() < config.visibility_sample
        if config.num_dcs < 2:
            return
        server = self.servers[index]
        op = self.clients[client].op
        if op is None or op.key is None:
            return
        if config.clock_jumps:
            op.held_until_us = self._held_until(index, reply.timestamp)
        tracked = self.healed and config.liveness_s > 0 and op.invoke_us >= self.fault_phase_end
        if not server.protocol.stabilizes or not (sampled or tracked):
            return
        key = op.key.encode("utf-8", "surrogateescape")
        timestamp, dc = reply.timestamp, server.dc
        version = server.store.newest(key, lambda v: v.timestamp == timestamp and v.source_dc == dc)
        if version is None:
            return
        partition = index % self.num_partitions
        for other in range(self.config.num_dcs):
            if other != dc:
                pending = self.visibility_pending[other * self.num_partitions + partition]
                pending.setdefault(dc, deque()).append((version, self.now, op if tracked else None, sampled))

    def _held_until(self, index: int, timestamp: int) -> int | None:
        """When a write of server ``index`` with ``timestamp`` may first be visible in every other DC,
        if its timestamp is legitimately ahead of other clocks (its server's own clock or restart
        floor put it there) and that is more than ``HELD_MIN_US`` from now; else None. Every server
        of another DC holds a peer's watermark at its clock plus the maximum offset, and the other
        partitions of its own DC announce no more than their clocks (or HLCs) in the DC's GSV, so the
        write waits for each of those clocks to reach it (``okapikv.check.liveness``)."""
        physical = physical_of(timestamp)
        own = self.clocks[index].read(self.now)
        if physical > max(self.floors[index], own + self.drag_us):
            return None  # dragged, not legitimately ahead: no exemption (ClockDragged reports it)
        partitions = self.num_partitions
        dc = index // partitions
        latest = self.now
        for other, clock in enumerate(self.clocks):
            if other == index:
                continue
            target = physical if other // partitions == dc else physical - self.offset_us
            if clock.read(self.now) < target:
                latest = max(latest, clock.true_time_for(target, self.now))
        return latest if latest - self.now > HELD_MIN_US else None

    def check_stability(self) -> None:
        """Stable vectors never exceed what the servers they summarise have received (run at the end
        and by tests; Okapi's USV summarises every DC, the baselines' vectors their own DC)."""
        if not self.servers[0].protocol.stabilizes:
            return
        partitions = self.num_partitions
        dcs = self.config.num_dcs
        everywhere = [min(s.vv[i] for s in self.servers) for i in range(dcs)]
        per_dc = [[min(s.vv[i] for s in self.servers[d * partitions:(d + 1) * partitions]) for i in range(dcs)]
                  for d in range(dcs)]
        universal = self.servers[0].protocol.uses_usv
        for index, server in enumerate(self.servers):
            bound = everywhere if universal else per_dc[server.dc]
            if server.protocol.name == "gentlerain":
                # only the GST, min(stable), is a promise (other entries may hold merged dependencies)
                claims = [(0, min(server.stable), min(bound))]
            else:
                claims = [(i, server.stable[i], bound[i]) for i in range(dcs)]
            for i, claimed, actual in claims:
                if claimed > actual:
                    self._invariant("StabilityInvariant", f"{self._name(index)} stable[{i}]={claimed} exceeds "
                                                          f"the version vectors it summarises ({actual})")

    def _result(self, wall_s: float) -> SimResult:
        if self.config.invariants:
            self.check_stability()
        waits: dict[str, WaitStats] = {}
        waits_by_dc: dict[int, dict[str, WaitStats]] = {}
        server_operations: dict[int, Counter[str]] = {}
        retries = 0
        for server in self.retired + self.servers:
            retries += server.stats.snapshot_retries
            server_operations.setdefault(server.dc, Counter()).update(server.stats.operations)
            for reason, stats in server.stats.waits.items():
                for table in (waits, waits_by_dc.setdefault(server.dc, {})):
                    total = table.setdefault(reason, WaitStats())
                    total.count += stats.count
                    total.total_us += stats.total_us
                    total.max_us = max(total.max_us, stats.max_us)
        return SimResult(
            config=self.config,
            history=self.recorder.history() if self.recorder is not None else None,
            operations=self.operations,
            completed=self.completed,
            waits=waits,
            waits_by_dc=waits_by_dc,
            server_operations=server_operations,
            visibility_us=self.visibility,
            anomalies=self.anomalies,
            faults=self.faults,
            simulated_us=self.now - START_US,
            fault_phase_end_us=self.fault_phase_end - START_US,
            quiescent_us=None if self.quiescent_at is None else self.quiescent_at - START_US,
            wall_s=wall_s,
            events=self.events,
            snapshot_retries=retries,
            scan_restarts=self.scan_restarts,
            messages=Counter({kind.__name__: n for kind, n in self.message_counts.items()}),
        )


def _result_fields(reply: ClientReply) -> dict[str, object]:
    """History result fields of a successful reply."""
    kind = type(reply)
    if kind is GetReply:
        assert isinstance(reply, GetReply)
        return {"read": None if reply.value is None else decode_bytes(reply.value)}
    if kind is WriteReply:
        assert isinstance(reply, WriteReply)
        return {"found": reply.found, "timestamp": reply.timestamp}
    if kind is SwapReply:
        assert isinstance(reply, SwapReply)
        return {"old": None if reply.old_value is None else decode_bytes(reply.old_value), "timestamp": reply.timestamp}
    if kind is ReadTxReply:
        assert isinstance(reply, ReadTxReply)
        return {"values": tuple(None if v is None else decode_bytes(v) for v in reply.values)}
    assert isinstance(reply, ScanReply)
    return {"items": tuple((decode_bytes(k), decode_bytes(v)) for k, v in reply.items)}
