"""The driver: one partition server's host (``okapikv.core.host.Host``: the refusals, the
request-to-reply table, durability holding, the timer re-arm rule, the counters, with no I/O) on an
asyncio loop, as aioquic runs its ``QuicConnection``; the simulator drives the same host. This is
the plumbing around it, all on the event loop (so the core is never entered concurrently):

- client requests (``call``: unary calls; ``submit_operations``: Pipeline and native batches) and
  peer messages (``run_core``, from ``okapikv.server.inbound``) go to the host; each reply to
  whoever waits for its request id (a future, a Pipeline stream), each peer message to its
  destination's link (``peer_links``, framed by ``peer_encoding``). Request ids are this
  process's own, so the ids clients put on Pipeline operations cannot collide across streams;
- the timer (``loop_timer``) at the host's deadline;
- durability (``data_dir``): the group committer (``okapikv.storage``) is the host's committer,
  writing each turn's group on this loop at the turn's end (``on_loop``; the ports call
  ``commit_due`` before they write replies), its ``on_durable`` releases what the host held, and a
  failed commit stops the process;
- the start (``startup``): the directory recovered and the replicas asked for what this server
  missed before any other message of this incarnation leaves; a membership the core adopts is
  kept (``membership_file``) before the call's effects leave, and a removed DC's links closed;
- requests and peer messages are decoded to the DCs the core knows (``num_dcs``: it grows when
  a new DC joins, ``okapikv.server.admin.learn_config``).

Client work waits while replication lags (``admission``). What the node reports is one typed
snapshot (``node_figures``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from okapikv.cluster.config import MESSAGE_OVERHEAD_BYTES, ClusterConfig
from okapikv.core.host import Host, Outbox
from okapikv.core.membership import Membership
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    ErrorCode,
    ErrorReply,
    Message,
    ReadTxRequest,
    Respond,
    ScanRequest,
    ServerId,
)
from okapikv.core.server import PartitionServer
from okapikv.server import collector_clock, membership_file
from okapikv.server.admission import Admission
from okapikv.server.budgets import InputGuard, InputLimits
from okapikv.server.clock import ServerClock
from okapikv.server.clock_log import ClockOffsetLog
from okapikv.server.instruments import REQUEST_KINDS, LagSamples, LatencyHistograms
from okapikv.server.loop_timer import LoopTimer, run_timer
from okapikv.server.node_figures import NodeParts, driver_figures, node_snapshot
from okapikv.server.peer_encoding import PeerEncoder
from okapikv.server.peer_links import PeerLinks
from okapikv.server.pipeline import PipelineSink
from okapikv.server.startup import Startup
from okapikv.server.visibility_bound import visibility_hold
from okapikv.storage.group_commit import GroupCommitter
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import packed
from okapikv.wire.convert import operation_request
from okapikv.wire.stats import NodeSnapshot, WireFigures, copy_fields, to_json

log = logging.getLogger("okapikv.server")

#: Exit status of a server whose storage failed: it cannot make writes durable, so it stops.
EXIT_STORAGE_FAILURE = 3

class ReplySink(Protocol):
    """Who takes the replies of requests handed to the core in batches: a ``PipelineSink`` (the
    native port, gRPC Pipeline streams) or a RESP connection (``okapikv.resp.batch``)."""

    def deliver(self, operation_id: int, kind: str, reply: ClientReply) -> None: ...


# (stream, the client's operation id, result kind, time.perf_counter() when the batch arrived)
PipelineEntry = tuple[ReplySink, int, str, float]
#: The result kinds of snapshot reads: dropped from the core when their client goes away.
READ_KINDS = frozenset({"scan", "read_tx"})


class PartitionNode:
    """Partition server ``partition`` of DC ``dc`` of ``config``, running."""

    def __init__(
        self, config: ClusterConfig, dc: int, partition: int, peer_credentials: Any = None,
        data_dir: str | Path | None = None, *, repair: bool = False, integrity: str = "quick",
        disk_reserve_bytes: int | None = None,
    ) -> None:
        """``peer_credentials`` (``grpc.ChannelCredentials``): dial peers with mutual TLS.
        ``data_dir``: keep the store there (recovered now; ``okapikv.storage.DataDirError`` if it
        cannot be used); None keeps it in memory only. ``repair``: rebuild a damaged, lost or empty
        data directory from the replicas; ``integrity``: the structure check at open
        (``okapikv.storage.integrity``); ``disk_reserve_bytes``: the disk reserve (default: 16 MiB,
        at most 5% of the file system)."""
        self.config = config
        self.id = ServerId(dc, partition)
        self.server_config = config.server(dc, partition)
        self.label = self.server_config.label
        self.clock = ServerClock(round(self.server_config.clock_skew_ms * 1000))
        self.startup = Startup(config, self.id, self.label)
        if data_dir is None:
            self.core = PartitionServer(config.core_config(dc, partition))
        else:
            self.core = self.startup.open(Path(data_dir), repair, integrity, disk_reserve_bytes, self.clock.now_us())
        self.core.dc_limit = len(config.dcs)  # it grows only to DCs it has addresses for (admin.learn_config)
        self.host: Host[asyncio.Future[ClientReply] | PipelineEntry] = Host(
            self.core, address_of=lambda owner: config.server(dc, owner).address)
        self.incarnation = random.getrandbits(62) + 1
        self.peer_links = PeerLinks(config, self.id, self.incarnation, peer_credentials)
        self.encoder = PeerEncoder(self.label, config.max_message_bytes - MESSAGE_OVERHEAD_BYTES,
                                   scalar=self.core.protocol.scalar)
        self._request_ids = itertools.count(1)
        # Client work waits while replication lags (``okapikv.server.admission``).
        self.admission = Admission(self.peer_links.links, also_hold=visibility_hold(
            config, dc, self.core.protocol.uses_usv, self.clock.now_us, lambda: self.core.stable))
        self._timer: LoopTimer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._committer: GroupCommitter | None = None
        self._started_us = 0
        self._membership = self.core.membership
        self.clock_log = ClockOffsetLog(self.label)
        self.latency = LatencyHistograms()
        self.lag_samples = LagSamples(self.num_dcs)
        self.event_loop_stalls = 0  # counted by the event-loop watchdog (okapikv.server.watchdog)
        self.event_loop_stall_seconds = 0.0
        self.native_port = 0  # set by the app once the native port listens (0: none)
        self.native_connections = 0  # accepted on the native port, ever
        self.native_refused = 0  # of them, closed for breaking the framing
        self.resp_port = 0  # set by the app once the RESP port listens (0: none; okapikv.resp)
        self.resp_connections = 0  # accepted on the RESP port, ever
        self.resp_refused = 0  # of them, closed for breaking the protocol or a bound
        # Shared by every stream port of this server (``okapikv.server.budgets``).
        self.input_guard = InputGuard(InputLimits.of(config.connections), clock=time.monotonic)

    def start(self) -> None:
        """Start the timer and the catch-up. Call before the server accepts calls: the catch-up
        requests must be the first messages this incarnation sends to each replica."""
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._timer = LoopTimer(self._loop, self.clock, lambda: self._on_timer())
        self.admission.time = self._loop.time  # the links' clock
        startup = self.startup
        if startup.storage is not None:
            self._committer = GroupCommitter(startup.storage, on_durable=self._on_durable,
                                             on_failure=self._storage_failed, space=startup.space,
                                             operations=lambda: self.host.client_requests, on_loop=True)
            self._committer.open(self.core.hlc, self.clock.now_us())
            self.host.committer = self._committer
            self.host.disk = startup.disk_note()
        # What a replica holds of this DC at or above this clock reading was announced by this
        # incarnation (its first heartbeats can reach a replica before that replica answers the
        # catch-up request): only what lies below it can be a lost earlier incarnation's.
        self._started_us = self.clock.now_us()
        self._carry_out(self.host.start(startup.repair_plan, startup.verify_plan(self._started_us)))
        startup.repair_plan = None
        self.input_guard.start(self._loop)

    @property
    def checking(self) -> bool:
        """A start with no data still waiting for its replicas' answers (health: NOT_SERVING)."""
        return self.core.repairing == "checking"

    async def close(self) -> None:
        self.host.closing = True  # no core step from here on (``Host.handle``)
        self.input_guard.stop()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None  # nothing arms it any more
        if self._committer is not None:
            # The last groups, then a final clock bound just above the last timestamp issued (the
            # core is not called any more), so a clean restart does not wait out the bound's lead.
            await self._committer.close(self.core.hlc)
        await self.peer_links.close()
        for entry in list(self.host.table.values()):
            if isinstance(entry, asyncio.Future) and not entry.done():
                entry.set_result(ErrorReply(0, ErrorCode.UNAVAILABLE, "the server is shutting down"))
        self.host.table.clear()

    def _on_durable(self) -> None:
        assert self._committer is not None
        self._apply(self.host.durable())
        self.startup.durable(self._committer.durable)

    def commit_due(self) -> None:
        """A port is about to write its replies: the commit group of this loop turn is written first,
        so the replies it holds leave with the others (``GroupCommitter.commit_due``)."""
        if self._committer is not None:
            self._committer.commit_due()

    def _storage_failed(self, error: BaseException) -> None:
        """A commit failed: the writes of its group are in memory only and must never be
        acknowledged or read, so the process stops; a restart recovers the last durable group."""
        log.critical("%s: storage failed (%s: %s); stopping so that no non-durable write is served",
                     self.label, type(error).__name__, error)
        logging.shutdown()
        os._exit(EXIT_STORAGE_FAILURE)

    def next_request_id(self) -> int:
        return next(self._request_ids)

    async def call(self, request: ClientRequest) -> ClientReply:
        """Run one request (unary RPC) and wait for its reply, however long the core parks it."""
        loop = self._loop if self._loop is not None else asyncio.get_running_loop()  # a lookup is a getpid
        refused = self.host.refusal(request)
        if refused is not None:
            return refused
        future: asyncio.Future[ClientReply] = loop.create_future()
        request_id = request.request_id
        self.host.expect(request_id, future)
        started = time.perf_counter()
        try:
            self.run_core((request,))
            return await future
        finally:
            if self.host.take(request_id) is not None and isinstance(request, ReadTxRequest | ScanRequest):
                self._abandon([request_id])  # the RPC was cancelled: its client went away
            self.latency.observe(REQUEST_KINDS.get(type(request), "other"), time.perf_counter() - started)

    def submit_operations(self, batch: pb.OperationBatch | packed.OperationBatch, sink: PipelineSink,
                          convert: Callable[[Any, int, int], tuple[str, ClientRequest] | None] = operation_request,
                          ) -> None:
        """Hand a Pipeline batch to the core in one call (one replication batch per peer for the
        whole client batch); results reach ``sink`` as they are ready. ``convert``: how an
        operation becomes a core request (``packed.operation_request`` for the native port's
        version 2 batches)."""
        requests: list[Message] = []
        host = self.host
        started = time.perf_counter()
        if sink.on_close is None:
            sink.on_close = self._stream_closed
        # looked up once per batch, not per operation (docs/benchmarks.md, "The server's Python path")
        request_ids, num_dcs, expect = self._request_ids, self.num_dcs, host.table.__setitem__  # ``Host.expect``
        refusal = None if host.refuses_nothing else host.refusal  # one partition, no full disk: no call per request
        for operation in batch.operations:
            request_id = next(request_ids)
            converted = convert(operation, request_id, num_dcs)
            if converted is None:
                sink.reject(operation.id, ErrorCode.INVALID_ARGUMENT, "operation names no request")
                continue
            kind, request = converted
            if refusal is not None:
                refused = refusal(request)
                if refused is not None:
                    sink.reject(operation.id, refused.code, refused.message)
                    continue
            expect(request_id, (sink, operation.id, kind, started))
            requests.append(request)
        if refusal is None:
            host.count_requests(len(requests))
        sink.outstanding += len(requests)
        host.pipeline_batches += 1
        if requests:
            self.run_core(requests)

    def _stream_closed(self, sink: PipelineSink) -> None:
        """A Pipeline stream or native connection is gone: its snapshot reads still running have no
        one to answer, so the core drops them; its other operations finish (a write is applied
        once taken) and their replies are dropped."""
        reads = [request_id for request_id, entry in self.host.table.items()
                 if type(entry) is tuple and entry[0] is sink and entry[2] in READ_KINDS]
        sink.outstanding -= len(reads)
        if reads:
            self._abandon(reads)

    def _abandon(self, request_ids: list[int]) -> None:
        dropped = self.host.cancel(request_ids)
        if dropped:
            log.info("%s: dropped %d snapshot read(s) whose client went away", self.label, dropped,
                     extra={"event": "reads_abandoned", "count": dropped})

    def run_core(self, messages: Sequence[Message]) -> None:
        try:
            outbox = self.host.handle(messages, self.clock.now_us())
        except Exception:
            self.host.handler_errors += 1
            log.exception("%s: the core failed on a batch of %d message(s)", self.label, len(messages))
            outbox = self.host.fail(messages)
        deadline = outbox.deadline
        if deadline is not None and self.core.parked_count and Host.spins(deadline - self.clock.now_us()):
            # A write parked for the next clock microsecond (Cure's and GentleRain's one write per
            # microsecond: a batch of n writes at one reading parks n - 1) goes within this call, as
            # the clock reaches it: on the loop's next round it would wait for every other callback
            # of this round first, milliseconds at a peak, a wait the paper's servers do not have.
            outbox.deadline = None
            self._carry_out(outbox)
            run_timer(self.host, self.clock, self.clock.now_us(), self._carry_out, self.label)
        else:
            self._carry_out(outbox)
        self.clock_log.check(self.core)

    def change_membership(self, view: Membership) -> bool:
        """The admin RPC (`okapi dc remove`): adopt ``view`` if it is ordered after this server's
        membership and pass it on (``okapikv.core.membership``); whether it was adopted."""
        before = self.core.membership
        self._carry_out(self.host.change_membership(view, self.clock.now_us()))
        return self.core.membership is not before

    @property
    def num_dcs(self) -> int:
        """The DCs the core knows, not the config (one more from `okapi dc join` until the core grows:
        a GentleRain session expanded to it would name the new DC, ``okapikv.core.growth``)."""
        return self.core.num_dcs

    def _carry_out(self, outbox: Outbox) -> None:
        if outbox.removed is not None:  # the failure detector's proposal (``okapikv.core.detector``)
            membership_file.auto_removed(outbox.removed, self.config.dcs, self.label)
        if outbox.membership is not None:  # kept before the call's effects leave; its removed DCs unlinked
            before, self._membership = self._membership, outbox.membership
            membership_file.adopted(self.startup.directory, before, self._membership, self.config.dcs, self.label)
            self.peer_links.close_removed(self._membership, self._loop)
        self._apply(outbox)
        if outbox.deadline is not None and self._timer is not None:
            self._timer.arm(outbox.deadline)

    def _apply(self, outbox: Outbox) -> None:
        host, encoder, links = self.host, self.encoder, self.peer_links
        take, observe = host.table.pop, self.latency.observe  # ``Host.take``, without a call of its own
        now = time.perf_counter()  # one reading for the call's replies: they leave together
        for effect in outbox.effects:
            if type(effect) is not Respond:
                links.send(effect.destination, encoder.frames(effect.message))  # type: ignore[union-attr]
                continue
            entry = take(effect.reply.request_id, None)
            if entry is None:
                continue  # the caller went away (cancelled unary call)
            if type(entry) is tuple:
                sink, operation_id, kind, started = entry
                sink.deliver(operation_id, kind, effect.reply)
                observe(kind, now - started)
            elif not entry.done():  # type: ignore[union-attr]
                entry.set_result(effect.reply)  # type: ignore[union-attr]

    def _on_timer(self) -> None:
        now_us = self.clock.now_us()
        core = self.core
        if self.num_dcs > 1:  # before the tick's stabilization: the lag at its largest
            self.lag_samples.observe(now_us, core.stable, self.id.dc)
        now_us = run_timer(self.host, self.clock, now_us, self._carry_out, self.label)
        committer = self._committer
        if self.startup.after_timer(core, now_us - self._started_us,
                                    lambda dc: self.peer_links.connected(ServerId(dc, self.id.partition)),
                                    None if committer is None else committer.required) and committer is not None:
            self._on_durable()
        self.clock_log.check(core)

    @property
    def committer(self) -> GroupCommitter | None:
        """The group committer once started with a data directory (``okapikv.storage``), else None."""
        return self._committer

    @property
    def admission_waits(self) -> int:
        return self.admission.waits

    def snapshot(self) -> NodeSnapshot:
        """Everything this server reports, now (``okapikv.server.node_figures``)."""
        names = self.config.dcs
        links = self.peer_links.links
        return node_snapshot(self.core, NodeParts(
            self.config, self.id, self.clock.skew_us, self.startup.clock_ahead_at_start_us, self._committer,
            self.host.held_effect_groups, self.startup.recovered, self.lag_samples, self.latency,
            driver_figures(self.host, self.encoder, self, collector_clock.CLOCK),
            copy_fields(WireFigures, self.encoder.wire_bytes),
            self.input_guard.figures(),
            {link.label: link.figures(names[destination.dc]) for destination, link in sorted(links.items())},
        ), self.clock.now_us())

    def stats_json(self) -> str:
        """The Stats RPC's document (``okapikv.wire.stats.to_json``)."""
        return to_json(self.snapshot())
