"""The simulator's world: the real partition servers, their clocks and the network, under virtual time.

The partition servers are the production ``okapikv.core.server.PartitionServer``, each driven by
the production host (``okapikv.core.host.Host``: the misrouting and full-disk refusals, the
request-to-reply table, durability holding behind a simulated disk, ``okapikv.sim.disk``, and the
timer re-arm rule, exactly as the asyncio server runs them); the world only carries out the host's
outbox (the h11 / aioquic model: the core takes ``now_us`` and returns effects):

- every server has its own ``ClockModel``; ``handle``/``on_timer`` get that server's clock reading,
  and its ``next_deadline`` (in its clock) is turned back into true time to schedule its timer;
- its ``Send`` effects go on the ``Network`` (FIFO links with delays, cuts), its ``Respond`` effects
  back to the client that sent the request (``pending``);
- a server may be *slow* (every message costs it ``service_us``, and ``work_us`` what a message
  costs beyond, e.g. a large scan's slice: ``okapikv.sim.scans``; a backlog queues), *paused*
  (SIGSTOP: messages queue in its inbox, timers wait; ``resume`` processes them with its state
  intact) or *crashed* (``crash``: kill -9; ``restart``: a new incarnation from what was durable).

A crash is what ``kill -9`` does to a durable server (``okapikv.server`` over ``okapikv.storage``):
everything in memory is gone, what it had made durable is not. The durable driver writes each
call's changes before it releases that call's effects, so the disk holds exactly the store and
vectors of the last call that ran: by default the restart builds a fresh ``PartitionServer`` from
them (``restore``, with the clock floor at the old clock + 1, the least a persisted bound may be)
and carries out its ``start_catch_up`` (docs/protocol.md, "Catch-up and repair"); with a ``Repair``
the disk was lost and the new incarnation starts empty and repairs from its replicas. Lost with
the process: what it had taken but not finished (parked requests, reads waiting for slices), and
its link queues behind a cut; what it had already sent stays on the wire. Peer messages it had not
handled are not lost: their senders keep them unacknowledged and resend them, in order, to the new
incarnation (``Network.resend``). Client requests are lost with their connection: the client side
hears of it (``ClientSide.lost``, ``ClientSide.crashed``) and resends.

Two ways to drive a world:

- the simulation (``okapikv.sim.engine``) attaches closed-loop clients (``okapikv.sim.clients``), the
  invariant checks (a ``Monitor``: ``okapikv.sim.invariants``) and a nemesis, and calls ``run()``;
- the deterministic mode (``World.fixed``: fixed delays, fixed clock offsets, nothing random) is
  driven by protocol tests step by step: ``deliver`` a message to a server now, ``submit`` a
  client request (``okapikv.sim.caller.Caller`` wraps it as a synchronous client session),
  ``step`` to the next instant, ``advance`` time, ``tick`` to the next timer, ``crash`` and
  ``restart`` a server, cut links (``network``), and inspect ``servers``, the event ``heap`` and
  ``network``.
"""

from __future__ import annotations

import heapq
import random as random_module
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, get_args

from okapikv.core.config import CoreConfig
from okapikv.core.host import Host
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    Effect,
    Heartbeat,
    Message,
    ReplicateBatch,
    Respond,
    Send,
    ServerId,
    SwapReply,
    WriteReply,
)
from okapikv.core.server import PartitionServer, Repair
from okapikv.core.timestamps import physical_of
from okapikv.core.vectors import Vector
from okapikv.sim.clock import ClockModel
from okapikv.sim.cpu import TIMER_RUN, Cpu
from okapikv.sim.disk import SimDisk
from okapikv.sim.events import (
    CLIENT_NEXT,
    CONTROL,
    CPU_FREE,
    DELIVER,
    INFINITY,
    PROCESS,
    RELEASE,
    REPLY,
    TIMER,
    Events,
)
from okapikv.sim.network import Network

START_US = 1_000_000
#: the client requests (checked at the host's door, ``Host.refusal``)
_CLIENT_REQUESTS = frozenset(get_args(ClientRequest))

ServerFactory = Callable[[CoreConfig], PartitionServer]


class ClientSide(Protocol):
    """Whoever sent the client requests: told of replies, of its own timers, and of lost requests."""

    def reply(self, client: int, reply: ClientReply) -> None: ...

    def issue(self, client: int) -> None:
        """A ``CLIENT_NEXT`` event for ``client`` is due."""

    def lost(self, client: int, request: ClientRequest) -> None:
        """``request`` of ``client`` reached a crashed server: it never ran."""

    def crashed(self, index: int) -> None:
        """Server ``index`` crashed: requests it had taken and not answered are lost."""


class Monitor(Protocol):
    """The invariant checks (``okapikv.sim.invariants.Invariants``).

    After every call into a server the world checks the clock bound inline (it runs after every
    message: a call per message would cost the simulator a few percent): the server's HLC may run
    ahead of its clock by ``drag_us`` at most, or up to ``floors[index]``, the bound its incarnation
    restarted above; ``clock_dragged`` is told when it runs further."""

    #: whether the per-call checks run (``heartbeat``, the clock bound, ``stable_changed``)
    checking: bool
    drag_us: int
    floors: list[int]

    def heartbeat(self, index: int, heartbeat: Heartbeat) -> None:
        """Server ``index`` handled ``heartbeat``."""

    def clock_dragged(self, index: int, message: Message | None, now_us: int) -> None:
        """Server ``index``'s HLC passed its bound handling ``message`` (None: its timer) at ``now_us``."""

    def stable_changed(self, index: int, previous: Vector) -> None: ...

    def duplicate(self, index: int, reply: ClientReply) -> None:
        """Server ``index`` answered a request that is not pending."""

    def restarted(self, index: int, old: PartitionServer) -> None: ...


@dataclass(slots=True)
class FaultRecord:
    """One line of the run's timeline: a fault injected or repaired, a phase, a failover."""

    time_us: int
    description: str


class Mailbox:
    """The deterministic mode's client side: each reply is kept, by request id, with the time it
    arrived, until taken (``Caller``); requests lost with a crashed server are only counted."""

    def __init__(self, events: Events) -> None:
        self.events = events
        self.replies: dict[int, tuple[ClientReply, int]] = {}
        self.lost_requests = 0
        self._next_request_id = 1

    def request_id(self) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        return request_id

    def reply(self, client: int, reply: ClientReply) -> None:
        self.replies[reply.request_id] = (reply, self.events.now)

    def issue(self, client: int) -> None:
        raise AssertionError("the deterministic mode schedules no client operations")

    def lost(self, client: int, request: ClientRequest) -> None:
        self.lost_requests += 1

    def crashed(self, index: int) -> None:
        pass


class World(Events):
    """The event queue (``Events``: ``now``, ``heap``) with the servers, clocks and network on it."""

    def __init__(
        self,
        servers: list[PartitionServer],
        clocks: list[ClockModel],
        *,
        num_partitions: int,
        wan_us: list[list[int]],
        lan_us: tuple[int, int],
        client_us: tuple[int, int],
        jitter: float = 0.0,
        jitter_us: float = 0.0,
        link_extra: list[int] | None = None,
        random: Callable[[], float] = lambda: 0.0,
        factory: ServerFactory = PartitionServer,
        start_us: int = START_US,
        commit_us: int = 0,
    ) -> None:
        """Servers are numbered ``dc * num_partitions + partition``; ``factory`` builds restarted
        incarnations; ``commit_us``: how long each server's commit groups take (``okapikv.sim.disk``).
        Attach a client side (``clients``) before running; a ``Mailbox`` until then."""
        count_servers = len(servers)
        if len(clocks) != count_servers or count_servers != len(wan_us) * num_partitions:
            raise ValueError("one server and one clock per (DC, partition)")
        self.servers = servers
        self.clocks = clocks
        self.num_partitions = num_partitions
        self.num_dcs = len(wan_us)
        self.factory = factory
        super().__init__(start_us)
        self.paused = [False] * count_servers
        self.down = [False] * count_servers  # crashed, not restarted yet
        self.network = Network(
            self, self.down, num_partitions, wan_us=wan_us, lan_us=lan_us, client_us=client_us,
            jitter=jitter, jitter_us=jitter_us, link_extra=link_extra or [0] * (count_servers * count_servers),
            random=random)
        self.retired: list[PartitionServer] = []  # crashed incarnations (their counters count)
        self.inbox: list[list[Message]] = [[] for _ in range(count_servers)]
        self.service_us = [0] * count_servers
        #: extra service time a message costs the server it reaches (``okapikv.sim.scans.ScanCost``)
        self.work_us: Callable[[int, Message], int] | None = None
        self.busy_until = [0] * count_servers
        self.timer_at = [INFINITY] * count_servers
        self.timer_gen = [0] * count_servers
        self.last_stable = [server.stable for server in servers]
        #: request id -> the client waiting for its reply: every host's request-to-reply table (a
        #: client keeps its request id when it fails over to another server)
        self.pending: dict[int, int] = {}
        self.commit_us = commit_us
        self.disks: list[SimDisk] = []
        self.hosts: list[Host[int]] = [self._host(index, server) for index, server in enumerate(servers)]
        self.clients: ClientSide = Mailbox(self)
        self.monitor: Monitor | None = None
        self.checking = False
        self.drag_us = INFINITY
        self.floors = [0] * count_servers
        #: told of every write reply (the visibility measurements), and of every stable vector change
        self.on_write: Callable[[int, int, WriteReply | SwapReply], None] | None = None
        self.on_stable: Callable[[int], None] | None = None
        self.faults: list[FaultRecord] = []
        #: the cost model's CPU queues (``okapikv.sim.cpu``); None: calls cost no time
        self.cpu: Cpu | None = None
        self.done = False  # set to stop ``run``
        self.events_processed = 0

    @classmethod
    def fixed(
        cls,
        num_dcs: int,
        num_partitions: int,
        protocol: str = "okapi",
        *,
        lan_us: int = 200,
        wan_us: int | Sequence[Sequence[int]] = 20_000,
        client_us: int = 0,
        link_extra_us: Mapping[tuple[ServerId, ServerId], int] | None = None,
        skew_us: Mapping[ServerId, int] | None = None,
        start_us: int = START_US,
        server_factory: ServerFactory = PartitionServer,
        commit_us: int = 0,
        **options: Any,
    ) -> World:
        """The deterministic mode: every delay fixed (``lan_us`` inside a DC, ``wan_us`` between DCs,
        one number or a matrix, plus ``link_extra_us`` on the links named; ``client_us`` between a
        client and its server), every clock off by a fixed ``skew_us`` (default 0), no randomness.
        ``options`` are ``CoreConfig`` fields; ``commit_us``: how long a commit group takes
        (``okapikv.sim.disk``). Every server's timer is armed: stabilization, heartbeats and GC run
        as time advances."""
        if isinstance(wan_us, int):
            wan = [[0 if i == j else wan_us for j in range(num_dcs)] for i in range(num_dcs)]
        else:
            wan = [list(row) for row in wan_us]
        servers = [
            server_factory(CoreConfig(dc=dc, partition=p, num_dcs=num_dcs, num_partitions=num_partitions,
                                      protocol=protocol, **options))
            for dc in range(num_dcs)
            for p in range(num_partitions)
        ]
        skews = skew_us or {}
        clocks = [ClockModel(skews.get(server.id, 0), 0.0, start_us) for server in servers]
        count_servers = len(servers)
        extra = [0] * (count_servers * count_servers)
        for (source, destination), delay in (link_extra_us or {}).items():
            if source.dc == destination.dc:
                raise ValueError("links inside a DC all take lan_us: link_extra_us names links between DCs")
            extra[(source.dc * num_partitions + source.partition) * count_servers
                  + destination.dc * num_partitions + destination.partition] = delay
        world = cls(servers, clocks, num_partitions=num_partitions, wan_us=wan, lan_us=(lan_us, lan_us),
                    client_us=(client_us, client_us), link_extra=extra, factory=server_factory, start_us=start_us,
                    commit_us=commit_us)
        world.start()
        return world

    @classmethod
    def seeded(
        cls,
        rng: random_module.Random,
        servers: list[PartitionServer],
        *,
        offsets_us: Sequence[int],
        drift_ppm_max: float,
        wan_ms: Sequence[Sequence[float]],
        lan_us: tuple[int, int],
        jitter: float,
        jitter_ms: float,
        link_spread_ms: float,
        factory: ServerFactory,
        start_us: int = START_US,
    ) -> World:
        """The simulation's world: each server's clock offset from ``offsets_us`` (drawn by the
        caller under its skew model, ``okapikv.core.skew``), drifts uniform within ``drift_ppm_max``,
        and per-link extra delays between DCs uniform in [0, ``link_spread_ms``], drawn from ``rng``
        in that order; the same ``rng`` draws every delay of the run."""
        if len(offsets_us) != len(servers):
            raise ValueError(f"{len(offsets_us)} clock offsets for {len(servers)} servers")
        clocks = [
            ClockModel(
                offset_us,
                rng.uniform(-drift_ppm_max, drift_ppm_max) if drift_ppm_max else 0.0,
                start_us,
            )
            for offset_us in offsets_us
        ]
        count_servers = len(servers)
        partitions = count_servers // len(wan_ms)
        spread_us = int(link_spread_ms * 1000)
        link_extra = [
            rng.randint(0, spread_us) if spread_us and (src // partitions) != (dst // partitions) else 0
            for src in range(count_servers)
            for dst in range(count_servers)
        ]
        wan_us = [[int(ms * 1000) for ms in row] for row in wan_ms]
        return cls(servers, clocks, num_partitions=partitions, wan_us=wan_us, lan_us=lan_us, client_us=lan_us,
                   jitter=jitter, jitter_us=jitter_ms * 1000, link_extra=link_extra, random=rng.random,
                   factory=factory, start_us=start_us)

    def watch(self, monitor: Monitor) -> None:
        """Report to ``monitor`` from now on (after every call into a server if it is ``checking``)."""
        self.monitor = monitor
        self.checking = monitor.checking
        self.drag_us = monitor.drag_us
        self.floors = monitor.floors

    # ================================================================ hosts and disks

    def _host(self, index: int, server: PartitionServer) -> Host[int]:
        """The production host of server ``index``'s (new) incarnation, on a new simulated disk."""
        disk = SimDisk(self.commit_us, lambda group, after_us: self.at(
            self.now + after_us, lambda: self._committed(index, disk, group)))
        if index < len(self.disks):
            self.disks[index] = disk
        else:
            self.disks.append(disk)
        if self.commit_us:
            server.track_changes = True
        dc = index // self.num_partitions
        return Host(server, disk if self.commit_us else None, space=disk, table=self.pending,
                    address_of=lambda partition: f"dc{dc}/p{partition}",
                    disk=f"the simulated disk of {self.name(index)} is full")

    def _committed(self, index: int, disk: SimDisk, group: int) -> None:
        """A commit group of server ``index`` is durable: the effects that waited for it leave."""
        if self.disks[index] is not disk or self.down[index]:
            return  # the incarnation it belonged to crashed
        disk.finished(group)
        self._apply(index, self.hosts[index].durable().effects)

    def fill_disk(self, index: int, full: bool = True) -> None:
        """Server ``index``'s disk is full (``Host.refusal``: client writes refused;
        ``Host.peer_refusal``: links from other DCs end, ``Network.refuse``) or has space again (the
        refused links resend). Not with the cost model, whose queues hold messages apart."""
        if self.cpu is not None:
            raise ValueError("a full disk is not simulated with the cost model")
        self.disks[index].disk_full = full
        if not full:
            self._accept_peers(index)

    def _refuses(self, index: int, message: Message) -> bool:
        """Whether server ``index`` refuses peer ``message``: its link was refused and has not
        resent yet, or the host refuses it now (a full disk). The link keeps it."""
        source: ServerId = message.source  # type: ignore[union-attr]
        network = self.network
        if not network.refusing(index, source) and self.hosts[index].peer_refusal(source) is None:
            return False
        network.refuse(index, source, message)
        return True

    def _accept_peers(self, index: int) -> None:
        """Server ``index`` takes peer messages again: its refused links resend what they kept and
        what was on its way to it after the refusal, in order."""
        network = self.network
        if not any(link % len(self.servers) == index for link in network.refused):
            return
        in_flight = []
        for event in self.take(index, (DELIVER, PROCESS)):
            message = event[4]
            source = getattr(message, "source", None)
            if isinstance(source, ServerId) and network.refusing(index, source):
                in_flight.append(message)
            else:
                heapq.heappush(self.heap, event)
        network.accepted(index, in_flight)  # type: ignore[arg-type]

    # ================================================================ naming and inspection

    def index(self, server: ServerId) -> int:
        return server.dc * self.num_partitions + server.partition

    def server(self, server: ServerId) -> PartitionServer:
        return self.servers[self.index(server)]

    def name(self, index: int) -> str:
        return f"dc{index // self.num_partitions}/p{index % self.num_partitions}"

    def read_clock(self, index: int) -> int:
        """Server ``index``'s clock reading now."""
        return self.clocks[index].read(self.now)

    def note(self, description: str) -> None:
        """Add a line to the run's timeline (``faults``)."""
        self.faults.append(FaultRecord(self.now, description))

    # ================================================================ scheduling

    def at(self, time_us: int, action: Callable[[], None]) -> None:
        """Run ``action`` at true time ``time_us``."""
        self.push(time_us, CONTROL, 0, action)

    def start(self) -> None:
        """Arm every server's timer."""
        for index in range(len(self.servers)):
            self._arm(index)

    def _arm(self, index: int, deadline: int | None = None) -> None:
        """Schedule server ``index``'s timer at ``deadline`` (its clock; default: its next
        deadline), in true time, if that is earlier than the one armed."""
        if deadline is None:
            deadline = self.servers[index].next_deadline()
        clock = self.clocks[index]
        now = self.now
        if clock.drift_ppm:
            at = clock.true_time_for(deadline, now)
        else:
            at = deadline - clock.offset_us - clock.stepped_us
            if at < now:
                at = now
        if at < self.timer_at[index]:
            self.timer_gen[index] += 1
            self.timer_at[index] = at
            heapq.heappush(self.heap, (at, next(self.seq), TIMER, index, self.timer_gen[index]))

    def _rearm(self, index: int) -> None:
        """Re-arm a timer whose deadline may have moved later (a clock step, a resume, a restart)."""
        self.timer_at[index] = INFINITY
        self._arm(index)

    # ================================================================ clients' requests

    def submit(self, server: int, request: ClientRequest, client: int) -> None:
        """``client`` sends ``request`` to server ``server``: its reply goes back to ``client``."""
        self.pending[request.request_id] = client
        heapq.heappush(self.heap, (self.now + self.network.client_delay(), next(self.seq), DELIVER, server,
                                     request))

    def send_request(self, server: int, request: ClientRequest, after_us: int | None = None) -> None:
        """Put a (pending) request on its way to ``server``: after the client delay, or ``after_us``."""
        delay = self.network.client_delay() if after_us is None else after_us
        heapq.heappush(self.heap, (self.now + delay, next(self.seq), DELIVER, server, request))

    # ================================================================ carrying out effects

    def deliver(self, server: int, message: Message, client: int | None = None) -> None:
        """Server ``server`` handles ``message`` now, off the network; its effects are carried out.
        A client request's reply goes to ``client`` (a request no client waits for is answered
        to nobody: the world takes that for a duplicate)."""
        if client is not None and isinstance(message, ClientRequest):
            self.pending[message.request_id] = client
        self._process(server, message)

    def _apply(self, index: int, effects: list[Effect]) -> None:
        cpu = self.cpu
        if cpu is not None and cpu.deferring:  # they leave once the call's CPU time has elapsed
            cpu.deferred.extend(effects)
            return
        partitions = self.num_partitions
        network = self.network
        host = self.hosts[index]
        for effect in effects:
            if type(effect) is Send:
                destination = effect.destination
                network.send(index, destination.dc * partitions + destination.partition, effect.message)
            else:
                assert isinstance(effect, Respond)
                reply = effect.reply
                client = host.take(reply.request_id)
                if client is None:
                    # a request is resent only once lost, so each runs once: a second answer means
                    # the world delivered a request twice (a write would be applied twice)
                    if self.monitor is None:
                        raise AssertionError(f"{self.name(index)} answered request {reply.request_id} again")
                    self.monitor.duplicate(index, reply)
                    continue
                if self.on_write is not None and isinstance(reply, WriteReply | SwapReply):
                    self.on_write(index, client, reply)
                heapq.heappush(self.heap, (self.now + network.client_delay(), next(self.seq), REPLY,
                                             client, reply))

    def _process(self, index: int, message: Message) -> None:
        host = self.hosts[index]
        kind = type(message)
        if kind in _CLIENT_REQUESTS:
            refused = host.refusal(message)  # type: ignore[arg-type]
            if refused is not None:
                self._apply(index, [Respond(refused)])
                return
        elif (self.network.refused or self.disks[index].disk_full) and self._refuses(index, message):
            return
        elif kind is ReplicateBatch:
            self.network.batch_arrived(message, index)  # type: ignore[arg-type]
        server = host.core
        now_us = self.clocks[index].read(self.now)
        outbox = host.handle((message,), now_us)
        if self.checking:
            if kind is Heartbeat:
                self.monitor.heartbeat(index, message)  # type: ignore[union-attr, arg-type]
            if physical_of(server.vv[server.dc]) > max(now_us + self.drag_us, self.floors[index]):
                self.monitor.clock_dragged(index, message, now_us)  # type: ignore[union-attr]
        if outbox.effects:
            self._apply(index, outbox.effects)
        if server.stable is not self.last_stable[index]:
            self._stable_changed(index)
        if outbox.deadline is not None:
            self._arm(index, outbox.deadline)

    def _on_timer(self, index: int) -> None:
        self.timer_at[index] = INFINITY
        host = self.hosts[index]
        server = host.core
        now_us = self.clocks[index].read(self.now)
        outbox = host.timer(now_us)
        if self.checking and physical_of(server.vv[server.dc]) > max(now_us + self.drag_us, self.floors[index]):
            self.monitor.clock_dragged(index, None, now_us)  # type: ignore[union-attr]
        if outbox.effects:
            self._apply(index, outbox.effects)
        if server.stable is not self.last_stable[index]:
            self._stable_changed(index)
        self._arm(index, outbox.deadline)

    def _stable_changed(self, index: int) -> None:
        previous = self.last_stable[index]
        self.last_stable[index] = self.servers[index].stable
        if self.checking:
            self.monitor.stable_changed(index, previous)  # type: ignore[union-attr]
        if self.on_stable is not None:
            self.on_stable(index)

    # ================================================================ running

    def run(self, until_us: int | None = None) -> None:
        """Process events in time order until none is left, ``done`` is set, or the next one is due
        after ``until_us``."""
        heap = self.heap
        pop = heapq.heappop
        push = heapq.heappush
        seq = self.seq
        paused = self.paused
        busy_until = self.busy_until
        service_us = self.service_us
        timer_gen = self.timer_gen
        clients = self.clients
        cpu = self.cpu
        work_us = self.work_us
        events = 0
        while heap and not self.done:
            if until_us is not None and heap[0][0] > until_us:
                break
            at, _, kind, target, payload = pop(heap)
            self.now = at
            events += 1
            if kind == DELIVER:
                if cpu is not None:
                    if paused[target]:
                        self._hold(target, payload)  # type: ignore[arg-type]
                    else:
                        cpu.arrive(target, payload)  # type: ignore[arg-type]
                    continue
                extra = work_us(target, payload) if work_us is not None else 0  # type: ignore[arg-type]
                if busy_until[target] >= at or service_us[target] or extra:
                    # Behind the backlog, even one that ends at this very instant: a message whose
                    # processing ends now may still wait in the heap behind this delivery (it was
                    # queued later), and the server handles what reached it in arrival order.
                    start = max(at, busy_until[target]) + service_us[target] + extra
                    busy_until[target] = start
                    push(heap, (start, next(seq), PROCESS, target, payload))
                    continue
                if paused[target]:
                    self._hold(target, payload)  # type: ignore[arg-type]
                else:
                    self._process(target, payload)  # type: ignore[arg-type]
            elif kind == TIMER:
                if payload == timer_gen[target] and not paused[target]:
                    if cpu is None:
                        self._on_timer(target)
                    else:
                        cpu.arrive(target, TIMER_RUN)
            elif kind == REPLY:
                clients.reply(target, payload)  # type: ignore[arg-type]
            elif kind == CLIENT_NEXT:
                clients.issue(target)
            elif kind == PROCESS:
                if paused[target]:
                    self._hold(target, payload)  # type: ignore[arg-type]
                else:
                    self._process(target, payload)  # type: ignore[arg-type]
            elif kind == RELEASE:
                cpu.release(target, payload)  # type: ignore[union-attr, arg-type]
            elif kind == CPU_FREE:
                cpu.wake(target)  # type: ignore[union-attr]
            else:
                payload()  # type: ignore[operator]
        self.events_processed += events

    def step(self, until_us: int = INFINITY) -> bool:
        """Run the next instant: every event due at the earliest pending time, if that is at or
        before ``until_us``. False when there is none."""
        heap = self.heap
        if not heap or heap[0][0] > until_us:
            return False
        self.run(heap[0][0])
        return True

    def advance(self, duration_us: int) -> None:
        """Let ``duration_us`` of true time pass, running everything due meanwhile."""
        end = self.now + duration_us
        self.run(end)
        self.now = max(self.now, end)

    def tick(self) -> None:
        """Run until the earliest server timer: time moves to it, and everything due by then runs."""
        at = min(self.timer_at)
        self.run(at)
        self.now = max(self.now, at)

    def run_until(self, condition: Callable[[], bool], limit_us: int = 5_000_000) -> None:
        """Step until ``condition()`` holds; TimeoutError if it does not within ``limit_us``."""
        deadline = self.now + limit_us
        while not condition():
            if not self.step(deadline):
                raise TimeoutError(f"condition not met within {limit_us} us")

    # ================================================================ slow, paused, crashed

    def _hold(self, index: int, message: Message) -> None:
        """A message for a paused server waits in its inbox. One for a crashed server: a client's
        request is lost (the client side resends it); a peer's stays unacknowledged in the peer's
        link, which resends it to the new incarnation (``okapikv.server.links``), unless its sender
        is down too: a dead sender's link resends nothing."""
        if not self.down[index]:
            self.inbox[index].append(message)
        elif isinstance(message, ClientRequest):
            client = self.pending.get(message.request_id)
            if client is not None:
                self.clients.lost(client, message)
        elif self.down[self.index(message.source)]:
            self.network.lost_on_link(self.index(message.source), index, message)
        else:
            self.network.keep_for(index, message.source, message)

    def requeue(self, index: int) -> None:
        """Serve the backlog of a server whose service time changed at its new speed, in order.
        Each message was given its service time when it arrived: without this a backlog built up
        at the slow speed (a burst of held messages on a repair) stayed slow for seconds after."""
        backlog = self.take(index, (PROCESS,))
        if not backlog:
            return
        at, service = self.now, self.service_us[index]
        for event in backlog:
            message: Message = event[4]  # type: ignore[assignment]
            if service:
                at += service
                heapq.heappush(self.heap, (at, next(self.seq), PROCESS, index, message))
            elif self.paused[index]:  # served now, in order: what arrives at this instant comes after
                self._hold(index, message)
            else:
                self._process(index, message)
        self.busy_until[index] = at

    def pause(self, index: int) -> None:
        """SIGSTOP: server ``index`` handles nothing until ``resume``; messages queue in its inbox."""
        self.paused[index] = True
        if self.cpu is not None:
            self.inbox[index].extend(self.cpu.paused(index))

    def resume(self, index: int) -> None:
        self.paused[index] = False
        queued, self.inbox[index] = self.inbox[index], []
        cpu = self.cpu
        for message in queued:
            if cpu is None:
                self._process(index, message)
            else:
                cpu.arrive(index, message)
        if cpu is not None:
            cpu.pump_server(index)
        self._rearm(index)

    def step_clock(self, index: int, forward_us: int) -> None:
        """Server ``index``'s clock jumps ahead by ``forward_us``."""
        self.clocks[index].step(forward_us)
        self._rearm(index)

    def crash(self, index: int) -> None:
        """``kill -9`` of server ``index`` (module docstring); ``restart`` brings it back."""
        cpu = self.cpu
        if cpu is not None:
            cpu.flush(index)
        self.paused[index] = self.down[index] = True  # paused: the event loop skips it; down: see _hold
        mine = self.take(index, (DELIVER, PROCESS))
        queued = cpu.drop(index) if cpu is not None else []
        for message in [*self.inbox[index], *queued, *(event[4] for event in mine)]:
            if not isinstance(message, ClientRequest):  # requests: resent once each, by the client side
                self._hold(index, message)  # type: ignore[arg-type]
        self.inbox[index] = []
        self.network.drop_queues_from(index)
        self.busy_until[index] = self.now
        self.clients.crashed(index)

    def restart(self, index: int, *, repair: Repair | None = None, clock_step_us: int = 0,
                server: PartitionServer | None = None) -> PartitionServer:
        """A new incarnation of crashed server ``index``: ``server`` if given (already restored by
        the caller), else one restored from the old incarnation's durable state, or with ``repair``
        one with an empty disk and no clock bound. Its clock first moves by ``clock_step_us`` (a new
        process reads the clock afresh); then it catches up (or repairs), and its peers' links
        resend what it had not acknowledged."""
        old = self.servers[index]
        new = server
        if new is None:
            new = self.factory(old.config)
            if repair is not None:
                zeros = (0,) * old.num_dcs
                new.restore((), vv=zeros, stable=zeros, gsv=zeros, horizon=zeros, hlc_floor=0)
            else:
                new.restore(((key, version) for key in list(old.store.keys()) for version in old.store.versions(key)),
                            vv=tuple(old.vv), stable=old.stable, gsv=old.gsv, horizon=old.horizon,
                            hlc_floor=old.hlc + 1)
                new.members.restore(old.membership)  # kept with the durable state (``membership_file``)
        if repair is not None:
            self.last_stable[index] = new.stable  # a new server: it serves nothing until repaired
        self.retired.append(old)
        self.servers[index] = new
        host = self.hosts[index] = self._host(index, new)
        if self.monitor is not None:
            self.monitor.restarted(index, old)
        self.paused[index] = self.down[index] = False
        if clock_step_us:
            self.clocks[index].restart(clock_step_us)
        self._apply(index, host.start(repair).effects)
        self._accept_peers(index)  # a new disk: refused links resend first, what reached the crash after
        unacked, self.network.unacked[index] = self.network.unacked[index], {}
        for source, messages in unacked.items():
            self.network.resend(source, index, messages)
        self._stable_changed(index)
        self._rearm(index)
        return new
