"""The simulator's clients: closed-loop sessions that issue the workload and record the history.

Each client is one causal session (``okapikv.core.session.ClientSession``) attached to one DC,
issuing one operation at a time (``okapikv.sim.workload``) to the partition that owns the key, and
every SCAN and RO-TX to its own server (``home``: clients spread over the partitions of their DC,
as the real clients' sessions do, ``okapikv.client.policy.Policy.session_server``; the paper's
collocated clients), thinking up to ``think_us_max`` between operations. Every operation is
recorded as an invoke and a completion in the history that
``okapikv.check`` judges. They behave as the real clients do (``okapikv.client``):

- a request lost with a crashed server (it never ran) is resent ``CLIENT_RETRY_US`` later to the
  same server, as is one refused UNAVAILABLE by a server repairing its data: so a write is applied
  once;
- once its server has been down for ``FaultPlan.failover_after_ms``, a client moves to another DC
  instead if that DC can adopt its session (``okapikv.core.session.adopt``, what the real clients'
  ``fallback`` asks ``AdoptSession``), and stays there: the checkers then judge the session
  guarantees across the move (docs/protocol.md, "Sessions");
- a snapshot read refused OVERLOADED (its server coordinates as many reads as its bounds allow:
  nothing ran) is resent after the real clients' backoff (``okapikv.core.backoff.DEFAULT_BACKOFF``)
  until ``OVERLOAD_TIMEOUT_US`` after it was issued, then fails: so a refused RO-TX is neither
  skipped nor replaced by the client's next operation, which would count the PUTs that follow
  refusals as the throughput of a mix they are not;
- a SCAN comes in pages, each read at the first page's snapshot; a later page refused ABORTED (its
  snapshot is gone) starts the scan over, at most ``SCAN_RESTARTS`` times (docs/protocol.md,
  "Snapshot reads").

Each successful workload operation issued in the measurement window (``SimConfig.warmup_s`` to
the end of the fault phase) has its latency recorded (``latencies_us``), and the completions in
the window are counted (the run's throughput). Under the cost model a client's own CPU per
operation (``CostProfile.client_us``) runs on the machine of a server of its DC.

After quiescence, ``start_final_reads`` adds convergence readers: every written key is read in
every DC (``final`` reads) for the convergence checker, each with a fresh session.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from okapikv.check.history import HistoryRecorder, Operation, decode_bytes
from okapikv.core.backoff import DEFAULT_BACKOFF
from okapikv.core.messages import (
    OVERLOADED,
    ClientReply,
    ClientRequest,
    DeleteRequest,
    ErrorCode,
    ErrorReply,
    GetReply,
    GetRequest,
    PutRequest,
    ReadTxReply,
    ReadTxRequest,
    ScanReply,
    ScanRequest,
    SwapReply,
    SwapRequest,
    WriteReply,
    replace,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.session import ClientSession, adopt
from okapikv.sim.config import SimConfig
from okapikv.sim.cpu import ClientWork
from okapikv.sim.crdt import CrdtLedger
from okapikv.sim.events import CLIENT_NEXT
from okapikv.sim.workload import Workload
from okapikv.sim.world import START_US, World

#: how long a client whose request was lost with a crashed server waits before resending it
CLIENT_RETRY_US = 10_000
#: how many times a client starts a paged SCAN over when a later page finds its snapshot gone
#: (ABORTED), as the real clients do (``okapikv.client.operations.SCAN_RESTARTS``)
SCAN_RESTARTS = 2
#: how long a client retries a snapshot read refused for load: the real clients' timeout
#: (``okapikv.client.aio``, ``timeout_s``)
OVERLOAD_TIMEOUT_US = 30_000_000
FINAL_READERS_PER_DC = 8


@dataclass(slots=True)
class Client:
    index: int
    process: str
    dc: int
    session: ClientSession
    #: the partition whose server coordinates its SCANs and RO-TXs (its session's server)
    home: int = 0
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
    turn: int = 0  # workload operations issued
    kind: str = ""  # the operation in flight
    started_us: int = 0  # when it was issued
    refusals: int = 0  # times the request in flight was refused for load


class Clients:
    """The world's client side (``okapikv.sim.world.ClientSide``) in a simulation."""

    def __init__(self, world: World, config: SimConfig, rng: random.Random, workload: Workload,
                 recorder: HistoryRecorder | None) -> None:
        self.world = world
        self.config = config
        self.rng = rng
        self.workload = workload
        self.recorder = recorder
        dcs = config.num_dcs
        self.clients = [Client(index, f"c{index}", index % dcs, ClientSession(dcs),
                               home=index // dcs % config.num_partitions)
                        for index in range(config.num_clients)]
        self.failover_us = int(config.fault_plan.failover_after_ms * 1000)
        self.failovers = 0
        #: a DC whose clients wait (a new DC not in the cluster yet, ``SimConfig.new_dc``), or None
        self.hold: int | None = None
        self.scan_restarts = 0
        self._next_request = 1
        self.operations: Counter[str] = Counter()
        self.completed: Counter[str] = Counter()
        self.stopping = False  # clients finish their operation and stop
        self.active = 0
        self.final_remaining = 0
        #: called once every workload client has stopped
        self.on_all_stopped: Callable[[], None] = lambda: None
        #: the measurement window (``SimConfig.warmup_s`` .. the end of the fault phase): the
        #: latency of each successful operation issued in it, by operation, and how many completed in it
        self.window = (START_US + round(config.warmup_s * 1_000_000), START_US + round(config.duration_s * 1_000_000))
        self.latencies_us: dict[str, list[int]] = {}
        self.window_completed = 0
        self.window_failed: Counter[str] = Counter()
        self.overload_retries = 0
        self._client_us = config.cost.client_us if config.cost is not None else 0.0
        #: counters and expiring keys in the mix (``okapikv.sim.crdt``), judged apart from the history
        self.crdt = CrdtLedger(rng) if config.mix.incr > 0 or config.mix.ttl > 0 else None

    def start(self, start_us: int) -> None:
        """Every client issues its first operation within 1 ms of ``start_us``."""
        for client in self.clients:
            self.world.push(start_us + self.rng.randint(0, 1000), CLIENT_NEXT, client.index)
            self.active += 1

    def stop(self) -> None:
        """Clients finish their current operation and stop."""
        self.stopping = True
        if self.active == 0:
            self.on_all_stopped()

    # ================================================================ issuing

    def release(self) -> None:
        """The held DC serves (``hold``): its clients start."""
        self.hold = None

    def issue(self, index: int) -> None:
        client = self.clients[index]
        if client.final_keys is not None:
            self._issue_final(client)
            return
        if self.stopping:
            self._stopped(client)
            return
        world = self.world
        if client.dc == self.hold:  # a DC not in the cluster yet: its clients wait for it
            heapq.heappush(world.heap, (world.now + CLIENT_RETRY_US, next(world.seq), CLIENT_NEXT, index, None))
            return
        now = world.now
        workload = self.workload
        f = workload.next_operation(client.turn)
        client.turn += 1
        client.kind, client.started_us = f, now
        dc = client.dc
        session = client.session.current
        rid = self._next_request
        self._next_request += 1
        partitions = world.num_partitions
        keys = workload.keys
        request: ClientRequest
        recorder = self.recorder
        op: Operation | None = None
        if f in ("get", "put", "swap", "delete"):
            key_index = workload.key_index()
            key = keys[key_index]
            partition = workload.key_partition[key_index]
            if f == "get":
                request = GetRequest(rid, key, session)
            elif f == "delete":
                request = DeleteRequest(rid, key, session)
            else:
                client.counter += 1
                value = f"{client.process}.{client.counter}".encode()
                request = (PutRequest if f == "put" else SwapRequest)(rid, key, value, session)
                if recorder is not None:
                    op = recorder.invoke(client.process, dc, f, now, key=decode_bytes(key),
                                         value=decode_bytes(value), server=(dc, partition))
            if recorder is not None and op is None:
                op = recorder.invoke(client.process, dc, f, now, key=decode_bytes(key), server=(dc, partition))
        elif f in ("incr", "ttl"):
            assert self.crdt is not None
            client.counter += 1
            request = self.crdt.request(f, rid, f"{client.process}.{client.counter}".encode(), session, now)
            partition = partition_of(request.key, partitions)  # type: ignore[union-attr]
        elif f == "rotx":
            chosen = [keys[i] for i in workload.rotx_keys()]
            partition = client.home
            request = ReadTxRequest(rid, tuple(chosen), session)
            if recorder is not None:
                op = recorder.invoke(client.process, dc, f, now, keys=tuple(decode_bytes(k) for k in chosen),
                                     server=(dc, partition))
        else:
            low, high = workload.scan_range()
            limit = self.rng.randint(1, 4) if self.rng.random() < 0.25 else None
            partition = client.home
            request = ScanRequest(rid, keys[low], keys[high], limit, session)
            if recorder is not None:
                op = recorder.invoke(client.process, dc, f, now, start=decode_bytes(keys[low]),
                                     end=decode_bytes(keys[high]), limit=limit, server=(dc, partition))
        self.operations[f] += 1
        client.op = op
        client.server = dc * partitions + partition
        if isinstance(request, ScanRequest):
            client.scan, client.scan_items, client.scan_restarts = request, [], SCAN_RESTARTS
        if self._client_us and world.cpu is not None:
            # the client's own CPU, on the machine it shares with a server of its home DC
            home = client.index % self.config.num_dcs
            world.cpu.arrive(home * partitions + (client.index // self.config.num_dcs) % partitions,
                             ClientWork(self._client_us))
        self._send(client, request)

    def _send(self, client: Client, request: ClientRequest) -> None:
        client.request_id = request.request_id
        client.request = request
        self.world.submit(client.server, request, client.index)
        if self.crdt is not None:
            self.crdt.sent(request, client.server, self.world)

    def _next_page(self, client: Client, reply: ClientReply) -> bool:
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
        self._send(client, request)
        return True

    # ================================================================ replies

    def reply(self, index: int, reply: ClientReply) -> None:
        client = self.clients[index]
        world = self.world
        if type(reply) is ErrorReply and reply.code == "UNAVAILABLE" and client.request is not None:
            # A server repairing its data refuses requests (nothing ran): the client retries, or
            # moves to another DC, as when its server is down.
            world.pending[client.request.request_id] = index
            self._retry(client)
            return
        if (type(reply) is ErrorReply and reply.code == ErrorCode.RESOURCE_EXHAUSTED
                and reply.message.startswith(OVERLOADED) and client.request is not None
                and world.now - client.started_us < OVERLOAD_TIMEOUT_US):
            client.refusals += 1
            self.overload_retries += 1
            world.pending[client.request.request_id] = index
            delay_us = round(DEFAULT_BACKOFF.delay_s(client.refusals, self.rng) * 1_000_000)
            world.send_request(client.server, client.request, delay_us)
            return
        client.lost_since = None
        client.refusals = 0
        if self._next_page(client, reply):
            return
        if client.scan is not None:
            if type(reply) is ScanReply:  # the last page: the SCAN's result is every page's pairs
                reply = replace(reply, items=(*client.scan_items, *reply.items))
            client.scan, client.scan_items = None, []
        op = client.op
        now = world.now
        if self.crdt is not None and client.request is not None and client.final_keys is None:
            self.crdt.answered(client.request, reply)
        if type(reply) is ErrorReply:
            self.completed["fail"] += 1
            if client.final_keys is None and self.window[0] <= now <= self.window[1]:
                self.window_failed[reply.code] += 1
            if op is not None and self.recorder is not None:
                self.recorder.complete(op, "fail", now, error=f"{reply.code}: {reply.message}")
        else:
            client.session.merge(reply.session)  # type: ignore[union-attr]
            self.completed["ok"] += 1
            if op is not None and self.recorder is not None:
                self.recorder.complete(op, "ok", now, **result_fields(reply))
            if client.final_keys is None:
                low, high = self.window
                if low <= client.started_us <= high:
                    self.latencies_us.setdefault(client.kind, []).append(now - client.started_us)
                if low <= now <= high:
                    self.window_completed += 1
        client.op = None
        if client.final_keys is not None:
            self.final_remaining -= 1
            if self.final_remaining == 0:
                world.done = True
                return
            self._issue_final(client)
            return
        think = self.rng.randint(0, self.config.think_us_max) if self.config.think_us_max else 0
        heapq.heappush(world.heap, (now + think, next(world.seq), CLIENT_NEXT, index, None))

    def _stopped(self, client: Client) -> None:
        if client.stopped:
            return
        client.stopped = True
        self.active -= 1
        if self.active == 0:
            self.on_all_stopped()

    # ================================================================ lost requests, failover

    def lost(self, index: int, request: ClientRequest) -> None:
        client = self.clients[index]
        if client.request is request:  # else superseded
            self._retry(client)

    def crashed(self, server: int) -> None:
        """Requests server ``server`` had taken (parked, being served) are lost with it."""
        pending = self.world.pending
        for client in self.clients:
            if client.server == server and client.request is not None and client.request.request_id in pending:
                self._retry(client)

    def _retry(self, client: Client) -> None:
        """Resend a request a crash lost, ``CLIENT_RETRY_US`` later; once the server has been down
        ``failover_after_ms`` for it, to another DC that can adopt the session, if one can."""
        now = self.world.now
        if client.lost_since is None:
            client.lost_since = now
        elif self.failover_us and now - client.lost_since >= self.failover_us and self._fail_over(client):
            return
        assert client.request is not None
        self.world.send_request(client.server, client.request, CLIENT_RETRY_US)
        if self.crdt is not None:
            self.crdt.sent(client.request, client.server, self.world)

    def _fail_over(self, client: Client) -> bool:
        """Move ``client`` to the first other DC whose server for its request is up and has every
        dependency of its session (``okapikv.core.session.adopt``, what ``AdoptSession`` answers),
        and send the request there with the adopted session; False if no DC can take it yet."""
        request = client.request
        assert request is not None
        world = self.world
        partitions, dcs, home = world.num_partitions, world.num_dcs, client.dc
        partition = client.server % partitions
        for step in range(1, dcs):
            other = (home + step) % dcs
            target = other * partitions + partition
            if world.down[target]:
                continue
            adoption = adopt(client.session.current, from_dc=home, here_dc=other, stable=world.servers[target].stable)
            if not adoption.ready:
                continue
            # the client gives up on its DC: a resend still on its way there was never sent
            world.take_payload(request)
            client.session = ClientSession(dcs)
            client.session.merge(adoption.session)
            client.dc, client.server, client.lost_since = other, target, None
            client.request = replace(request, session=adoption.session)
            if client.op is not None:
                client.op.dc, client.op.server = other, (other, partition)
            self.failovers += 1
            world.note(f"{client.process} fails over dc{home} -> dc{other}")
            world.send_request(target, client.request)
            if self.crdt is not None:
                self.crdt.sent(client.request, target, world)
            return True
        return False

    # ================================================================ convergence reads

    def start_final_reads(self) -> None:
        """Read every written key in every DC (or stop the world if there is nothing to read)."""
        world = self.world
        if self.recorder is None:
            world.done = True
            return
        written = sorted({op.key for op in self.recorder.operations if op.is_write and op.key is not None})
        keys = [k.encode("utf-8", "surrogateescape") for k in written]
        if not keys:
            world.done = True
            return
        dcs = world.num_dcs
        readers = min(FINAL_READERS_PER_DC, len(keys))
        self.final_remaining = len(keys) * dcs
        for dc in range(dcs):
            for r in range(readers):
                client = Client(len(self.clients), f"final-{dc}-{r}", dc, ClientSession(dcs),
                                final_keys=keys[r::readers])
                self.clients.append(client)
                world.push(world.now, CLIENT_NEXT, client.index)

    def _issue_final(self, client: Client) -> None:
        assert client.final_keys is not None
        if not client.final_keys:
            return
        world = self.world
        key = client.final_keys.pop(0)
        rid = self._next_request
        self._next_request += 1
        partition = partition_of(key, world.num_partitions)
        if self.recorder is not None:
            client.op = self.recorder.invoke(client.process, client.dc, "get", world.now,
                                             key=decode_bytes(key), final=True, server=(client.dc, partition))
        # Each convergence read depends on nothing: after reading a write whose timestamp is
        # legitimately ahead (a server's clock far ahead), a session is refused by the other servers.
        client.session = ClientSession(world.num_dcs)
        client.request = GetRequest(rid, key, client.session.current)
        client.server = client.dc * world.num_partitions + partition
        world.submit(client.server, client.request, client.index)

    def stuck(self) -> list[Client]:
        """Clients with an operation that never completed."""
        return [client for client in self.clients if client.op is not None]


def result_fields(reply: ClientReply) -> dict[str, object]:
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
