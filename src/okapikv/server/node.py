"""The driver: one ``PartitionServer`` core run on an asyncio loop (the aioquic model).

Everything the core does happens through three entry points, all called from the event loop (so
the core is never entered concurrently):

- ``call`` / ``submit_operations`` for client requests (unary calls, Pipeline and native batches)
  and ``run_core`` for incoming peer messages (``okapikv.server.inbound``);
- ``on_timer`` when the core's ``next_deadline()`` comes (heartbeats, stabilization, GC, parked
  requests waiting for the clock). The timer is one ``call_later`` handle, re-armed after every
  firing and moved earlier whenever a request parks or the core snaps back from its idle pacing
  (``okapikv.core.pacing``);

and every effect they return is carried out right away: a ``Respond`` goes to whoever waits for
that request id (a unary call's future or a Pipeline stream), a ``Send`` goes onto the outgoing link
of its destination (``links.OutgoingLink``).

Request ids are this process's own (the core only echoes them), so the ids clients put on Pipeline
operations never reach the core and cannot collide across streams.

Durability (``data_dir``, ``okapikv.storage``): the core's changes after every call go to the group
committer, and the call's effects wait in ``_held``, in order, until the commit group they need is
durable (``_carry_out``): a reply, a replicated update or a report never reveals a version a crash
could lose, and never carries a local timestamp above the persisted clock bound. Peer-link
acknowledgements wait the same way (``okapikv.server.inbound.PeerIntake.durable_ack``): a sender
forgets a message only once what it carried is on disk here. Without a data directory effects are
carried out at once (in memory).
On start the node recovers the directory and asks every replica for what it missed
(``PartitionServer.start_catch_up``) before any other message of this incarnation leaves. Damaged
data stops the start with a one-line error (``okapikv.storage.recovery``); in repair mode
(``repair``) the directory is rebuilt from the replicas instead, and the core refuses client
requests until the repair ends. The membership (``okapikv.core.membership``) is kept in the data directory
(``okapikv.server.membership_file``), written before the effects of the call that changed it
leave; links to a removed DC's servers are closed and their queues dropped (nothing goes there
any more). On a full disk (``okapikv.storage.space``) client writes are refused
with RESOURCE_EXHAUSTED and peer links from other DCs are refused (they resend later) while reads go on.

Client work waits while replication lags (``admission``: one ``Admission`` policy that every port
calls). What the node reports is one typed snapshot (``snapshot``, ``okapikv.wire.stats``), rendered
by the Stats RPC, the Prometheus collector and `okapi status`; the instruments it updates as it runs
(latency histograms, lag samples) are ``okapikv.server.instruments``.

Clocks (docs/operations.md, "Clocks: the maximum offset"): the core refuses or holds back what
reaches more than the maximum clock offset past this server's clock and counts it; the node logs
those events, at most one warning line per ``CLOCK_LOG_INTERVAL_S`` with the counts and the latest
figure, and warns once at start when the recovered clock bound (hence the HLC) is further ahead of
the clock than the offset plus the bound's lead: the clock stepped back since the last run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import math
import os
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from okapikv.cluster.config import MESSAGE_OVERHEAD_BYTES, ClusterConfig
from okapikv.core.membership import Membership
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    DeleteRequest,
    Effect,
    ErrorCode,
    ErrorReply,
    ExpireRequest,
    GetRequest,
    IncrRequest,
    Message,
    PeerMessage,
    PutManyRequest,
    PutRequest,
    ReadTxRequest,
    RepairBatch,
    ReplicateBatch,
    Respond,
    ScanRequest,
    ServerId,
    SwapRequest,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.server import PartitionServer, Repair, Verify
from okapikv.core.stats import ServerStats
from okapikv.core.timestamps import EPOCH_UNIX_US, pack, physical_of
from okapikv.server import membership_file
from okapikv.server.admission import Admission
from okapikv.server.budgets import InputGuard, InputLimits
from okapikv.server.clock import ServerClock
from okapikv.server.instruments import LagSamples, LatencyHistograms
from okapikv.server.links import OutgoingLink
from okapikv.server.pipeline import PipelineSink
from okapikv.server.visibility_bound import visibility_hold
from okapikv.server.wire_bytes import PeerWireBytes
from okapikv.storage.errors import DataDirError
from okapikv.storage.group_commit import DEFAULT_CLOCK_LEAD_US, GroupCommitter
from okapikv.storage.integrity import describe_timestamp
from okapikv.storage.logged_store import LoggedStore
from okapikv.storage.recovery import mark_behind, open_and_recover, repair_finished
from okapikv.storage.space import DiskSpace
from okapikv.storage.sqlite import Identity
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import packed
from okapikv.wire.convert import (
    approximate_size,
    batch_header,
    encode_peer_message,
    encode_replicate_batch,
    frame_peer_message,
    operation_request,
)
from okapikv.wire.stats import (
    ClockFigures,
    CoreFigures,
    DriverFigures,
    MembershipFigures,
    NodeSnapshot,
    RecoveredFigures,
    RequestFigures,
    ServerIdentity,
    StabilizationFigures,
    StorageFigures,
    StoreFigures,
    WaitFigures,
    WireFigures,
    copy_fields,
    to_json,
)

log = logging.getLogger("okapikv.server")

#: Exit status of a server whose storage failed: it cannot make writes durable, so it stops.
EXIT_STORAGE_FAILURE = 3
#: a core deadline at most this far off is met by running the timer again at once (``_on_timer``)
SPIN_US = 50
#: the most one timer callback spends on such deadlines before the event loop runs again
SPIN_BUDGET_US = 2_000
#: At most one warning per this many seconds about inputs the maximum clock offset held off.
CLOCK_LOG_INTERVAL_S = 10.0
#: How long a start with no data holds client requests for a replica its link has not reached
#: (``PartitionNode._release_unreachable``); a reached replica's answer is always waited for.
UNREACHABLE_HOLD_US = 3_000_000


# (stream, the client's operation id, result kind, time.perf_counter() when the batch arrived)
PipelineEntry = tuple[PipelineSink, int, str, float]
# Operation type names of the latency histograms (the same as the Pipeline result kinds).
#: requests a full disk refuses (they would add versions); reads go on
WRITE_REQUESTS = (PutRequest, PutManyRequest, SwapRequest, DeleteRequest, IncrRequest, ExpireRequest)
REQUEST_KINDS: dict[type, str] = {
    GetRequest: "get", PutRequest: "put", PutManyRequest: "put_many", SwapRequest: "swap", DeleteRequest: "delete",
    ScanRequest: "scan", ReadTxRequest: "read_tx", IncrRequest: "incr", ExpireRequest: "expire",
}
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
        self._peer_credentials = peer_credentials
        self.id = ServerId(dc, partition)
        self.server_config = config.server(dc, partition)
        self.label = self.server_config.label
        self.core = PartitionServer(config.core_config(dc, partition))
        self.num_dcs = len(config.dcs)
        self.clock = ServerClock(round(self.server_config.clock_skew_ms * 1000))
        self.incarnation = random.getrandbits(62) + 1
        self._header = batch_header(config.cluster_id, self.id, self.incarnation)
        self._request_ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[ClientReply] | PipelineEntry] = {}
        self._links: dict[ServerId, OutgoingLink] = {}
        #: destinations this incarnation has opened a link to (``_open_link``)
        self._linked: set[ServerId] = set()
        # Client work waits while replication lags (``okapikv.server.admission``).
        self.admission = Admission(self._links, also_hold=visibility_hold(
            config, dc, self.core.protocol.uses_usv, self.clock.now_us, lambda: self.core.stable))
        self._timer: asyncio.Handle | None = None  # a TimerHandle, or a call_soon's Handle
        self._timer_deadline_us = 0
        self._last_sent: object = None
        self._last_frames: list[tuple[bytes, int]] = []
        self._last_measured: tuple[int, ...] = ()
        self._encoded_update_bytes = 0  # of the replication batch ``_encode`` last encoded
        self.wire_bytes = PeerWireBytes()
        self._max_frame_bytes = config.max_message_bytes - MESSAGE_OVERHEAD_BYTES
        self._scalar = self.core.protocol.scalar  # slices carry one time (okapikv.wire.convert)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.client_requests = 0
        self.pipeline_batches = 0
        self.peer_batches_received = 0
        self.peer_messages_received = 0
        self.handler_errors = 0
        self.event_loop_stalls = 0  # counted by the event-loop watchdog (okapikv.server.watchdog)
        self.event_loop_stall_seconds = 0.0
        self.oversized_dropped = 0
        self.latency = LatencyHistograms()
        self.lag_samples = LagSamples(self.num_dcs)
        self._storage: LoggedStore | None = None
        self._committer: GroupCommitter | None = None
        self._held: deque[tuple[int, list[Effect]]] = deque()
        self.recovered: RecoveredFigures | None = None
        self._space: DiskSpace | None = None
        self._repair_plan: Repair | None = None
        self._repair_logged = True
        self._repair_durable_group: int | None = None  # the marker goes once this group is durable
        self._fresh_start = False  # an empty data directory, started without --repair
        self._lost_logged = False  # the data_lost error (``okapikv.core.catchup``, Verification)
        self._repair_asked = False  # --repair given (an intact directory may still be an older copy)
        self._closing = False  # ``close`` began: the core is not called any more
        self._started_us = 0
        self._held_dcs: set[int] = set()  # fault injection: DCs our links are cut from
        self.native_port = 0  # set by the app once the native port listens (0: none)
        self.native_connections = 0  # accepted on the native port, ever
        self.native_refused = 0  # of them, closed for breaking the framing
        self.resp_port = 0  # set by the app once the RESP port listens (0: none; okapikv.resp)
        self.resp_connections = 0  # accepted on the RESP port, ever
        self.resp_refused = 0  # of them, closed for breaking the protocol or a bound
        limits = config.connections
        # Shared by every stream port of this server (``okapikv.server.budgets``).
        self.input_guard = InputGuard(InputLimits(limits.input_budget_bytes, limits.frame_timeout_ms / 1000,
                                                  limits.first_frame_timeout_ms / 1000, limits.idle_timeout_ms / 1000),
                                      clock=time.monotonic)
        self.clock_ahead_at_start_us = 0  # how far the recovered HLC was ahead of the clock
        self._clock_events_seen = 0  # core refusals + clamps already looked at (``_log_clock_offsets``)
        self._clock_logged = (0, 0)  # ... and already reported
        self._clock_logged_at = -math.inf
        self._membership_dir: Path | None = None
        if data_dir is not None:
            self._open_storage(Path(data_dir), repair, integrity, disk_reserve_bytes)
            self._membership_dir = Path(data_dir)
            try:
                self.core.members.restore(membership_file.load(self._membership_dir, self.num_dcs))
            except ValueError as error:
                raise DataDirError(str(error)) from None
        self._membership = self.core.membership

    # ================================================================ lifecycle

    def _open_storage(self, directory: Path, repair: bool, integrity: str, reserve_bytes: int | None) -> None:
        config = self.config
        identity = Identity(config.cluster_id, tuple(config.dcs), config.partitions, config.protocol,
                            config.dcs[self.id.dc], self.id.partition)
        core_config = config.core_config(self.id.dc, self.id.partition)
        space = DiskSpace(directory, reserve_bytes)
        space.prepare()  # before the database and before listening: a full disk fails the start
        self.core, store, recovered = open_and_recover(
            lambda: PartitionServer(core_config), directory, identity, integrity=integrity, repair=repair,
            now_us=self.clock.now_us())
        self._storage = store
        self._space = space
        self.recovered = RecoveredFigures(recovered.versions, recovered.keys, recovered.clock_bound_us)
        if store.migrated_versions is not None:
            log.warning("%s: migrated %s to data format 2: %d version(s) checksummed as they stood", self.label,
                        store.path, store.migrated_versions, extra={"event": "data_migrated"})
        self._fresh_start = store.fresh and recovered.repair is None
        self._repair_asked = repair
        if recovered.repair is None:
            log.info("%s: recovered %d version(s) of %d key(s) from %s", self.label, recovered.versions,
                     recovered.keys, directory)
            if repair:
                log.info("%s: --repair: %s is intact, nothing to repair", self.label, directory)
            self._check_recovered_clock()
            return
        self._repair_plan = recovered.repair
        self._repair_logged = False
        self.recovered = dataclasses.replace(self.recovered, repair=recovered.damage, salvaged_local=recovered.salvaged,
                                             moved_aside=tuple(str(path) for path in recovered.moved_aside))
        moved = ""
        if recovered.moved_aside:
            moved = f"; damaged files moved aside: {', '.join(map(str, recovered.moved_aside))}"
        log.warning("%s: repairing %s from its %d replica(s): %s%s; %d local version(s) salvaged, clock restarts "
                    "after %s; client requests are refused until the repair ends", self.label, directory,
                    len(self.core.peers), recovered.damage, moved, recovered.salvaged,
                    describe_timestamp(pack(recovered.clock_bound_us)), extra={"event": "repair_started"})
        self._check_recovered_clock()

    def _release_unreachable(self) -> None:
        """A start with no data waits for every replica's answer, but not for ever for one its link
        has not reached in ``UNREACHABLE_HOLD_US``: a DC cut off from the others must still serve.
        Said loudly, since what that replica holds of this server's is unchecked until it answers."""
        catch_up = self.core.catch_up
        for dc in catch_up.holding_for:
            link = self._links.get(ServerId(dc, self.id.partition))
            if link is not None and link.connected:
                continue  # reached: its answer is on the way
            catch_up.release(dc)
            log.warning("%s: started without its data and cannot reach its replica in DC %s after %.0f s: serving "
                        "without its answer; if it holds writes this server acknowledged before, they are missing "
                        "here until it answers (then repaired, or refused until --repair)", self.label,
                        self.config.dcs[dc], UNREACHABLE_HOLD_US / 1e6, extra={"event": "unchecked_start"})

    def _log_lost(self, lost: int) -> None:
        """A replica holds writes of this server that it does not: say so loudly, once, and mark a
        data directory as one to repair (``mark_behind``: until the repair ends, for ``--repair``)."""
        held = describe_timestamp(lost)
        if self._storage is not None:
            try:
                mark_behind(self._storage.directory)
            except DataDirError as error:
                log.error("%s: %s", self.label, error)
        if self._storage is not None and self._repair_asked:
            self._repair_logged = False
            log.warning("%s: --repair: the data directory is older than its replicas know (they hold updates of this "
                        "server up to %s): repairing from the replicas; client requests are refused until the repair "
                        "ends", self.label, held, extra={"event": "repair_started"})
            return
        if self._storage is None:
            self._repair_logged = False  # the repair under way ends with "repair complete"
            log.error("%s: started in memory, but a replica holds updates of this server up to %s: its data was lost "
                      "with the last run. Repairing from the replicas; client requests are refused until the repair "
                      "ends (start servers with --data-dir DIR to keep their data)", self.label, held,
                      extra={"event": "data_lost"})
            return
        what = "was empty" if self._fresh_start else "is older than its replicas know"
        log.error("%s: the data directory %s, but a replica holds updates of this server up to %s: its data was "
                  "lost. Restart it with --repair to fetch its own writes back from the replicas "
                  "(docs/operations.md); client requests are refused until then", self.label, what, held,
                  extra={"event": "data_lost"})

    def _check_recovered_clock(self) -> None:
        """Warn once, loudly, when the recovered HLC (restarted at the clock bound kept on disk) is
        ahead of the clock by more than the maximum offset plus the bound's lead: the clock stepped
        back since the last run (or was ahead then). Timestamps must continue above the bound, so
        this server's writes run ahead of every other clock until its own catches up."""
        ahead_us = physical_of(self.core.hlc) - self.clock.now_us()
        self.clock_ahead_at_start_us = max(0, ahead_us)
        max_offset_us = self.core.config.max_clock_offset_us
        if ahead_us <= max_offset_us + DEFAULT_CLOCK_LEAD_US:
            return
        log.warning(
            "%s: CLOCK BEHIND ITS RECOVERED BOUND: the timestamps of the last run reach %.3f s ahead of this "
            "server's clock (maximum clock offset %g ms). The clock stepped back since the last run, or was "
            "ahead then. Timestamps continue above the bound, so for the next %.0f s this server's writes are "
            "held back by the other DCs (their clocks plus the offset) and sessions that read them are refused "
            "by other servers; fix the clock (docs/operations.md, \"Clocks: the maximum offset\")",
            self.label, ahead_us / 1e6, max_offset_us / 1000, ahead_us / 1e6,
            extra={"event": "clock_behind_bound", "ahead_ms": round(ahead_us / 1000, 3)})

    def start(self) -> None:
        """Start the timer and the catch-up. Call before the server accepts calls: the catch-up
        requests must be the first messages this incarnation sends to each replica."""
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self.admission.time = self._loop.time  # the links' clock
        if self._storage is not None:
            self._committer = GroupCommitter(self._storage, on_durable=self._on_durable,
                                             on_failure=self._storage_failed, space=self._space,
                                             operations=lambda: self.client_requests)
            self._committer.open(self.core.hlc, self.clock.now_us())
        # What a replica holds of this DC at or above this clock reading was announced by this
        # incarnation (its first heartbeats can reach a replica before that replica answers the
        # catch-up request): only what lies below it can be a lost earlier incarnation's.
        self._started_us = self.clock.now_us()
        self._carry_out(self.core.start_catch_up(self._repair_plan, self._verify_plan()))
        self._repair_plan = None
        self._arm_timer()
        self.input_guard.start(self._loop)

    def _verify_plan(self) -> Verify | None:
        """How this start checks with its replicas for writes it lost (``okapikv.core.catchup``,
        Verification): a start with no data (in memory, an empty directory) holds client requests
        until every replica has answered; in memory, a loss is repaired at once (nothing on disk to
        mark), while a directory that lost writes needs ``--repair``. With ``--repair`` on an intact
        directory (perhaps an older copy) both: it holds, and repairs a loss the answers show."""
        if self._repair_plan is not None:
            return None
        fresh = self._storage is None or self._fresh_start
        asked = self._storage is None or self._repair_asked
        return Verify(pack(self._started_us), hold=fresh or self._repair_asked, repair=asked)

    @property
    def checking(self) -> bool:
        """A start with no data still waiting for its replicas' answers (health: NOT_SERVING)."""
        return self.core.repairing == "checking"

    async def close(self) -> None:
        self._closing = True  # no core step from here on (``run_core``)
        self.input_guard.stop()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._committer is not None:
            # The last groups, then a final clock bound just above the last timestamp issued (the
            # core is not called any more), so a clean restart does not wait out the bound's lead.
            await self._committer.close(self.core.hlc)
        await asyncio.gather(*(link.close() for link in self._links.values()), return_exceptions=True)
        for entry in list(self._waiting.values()):
            if isinstance(entry, asyncio.Future) and not entry.done():
                entry.set_result(ErrorReply(0, ErrorCode.UNAVAILABLE, "the server is shutting down"))
        self._waiting.clear()

    # ================================================================ client requests

    def next_request_id(self) -> int:
        return next(self._request_ids)

    async def call(self, request: ClientRequest) -> ClientReply:
        """Run one request (unary RPC) and wait for its reply, however long the core parks it."""
        loop = self._loop if self._loop is not None else asyncio.get_running_loop()  # a lookup is a getpid
        future: asyncio.Future[ClientReply] = loop.create_future()
        request_id = request.request_id
        self.client_requests += 1
        problem = self._misrouted(request)
        if problem is not None:
            return ErrorReply(request_id, ErrorCode.FAILED_PRECONDITION, problem)
        full = self._disk_full(request)
        if full is not None:
            return ErrorReply(request_id, ErrorCode.RESOURCE_EXHAUSTED, full)
        self._waiting[request_id] = future
        started = time.perf_counter()
        try:
            self.run_core((request,))
            return await future
        finally:
            if self._waiting.pop(request_id, None) is not None and isinstance(request, ReadTxRequest | ScanRequest):
                self._abandon([request_id])  # the RPC was cancelled: its client went away
            self.latency.observe(REQUEST_KINDS.get(type(request), "other"), time.perf_counter() - started)

    def submit_operations(self, batch: pb.OperationBatch | packed.OperationBatch, sink: PipelineSink,
                          convert: Callable[[Any, int, int], tuple[str, ClientRequest] | None] = operation_request,
                          ) -> None:
        """Hand a Pipeline batch to the core in one ``handle_batch`` (one replication batch per
        peer for the whole client batch); results reach ``sink`` as they are ready. ``convert``:
        how an operation becomes a core request (``packed.operation_request`` for the native
        port's version 2 batches)."""
        requests: list[Message] = []
        waiting = self._waiting
        num_dcs = self.num_dcs
        check_partition = self.config.partitions > 1
        started = time.perf_counter()
        if sink.on_close is None:
            sink.on_close = self._stream_closed
        for operation in batch.operations:
            request_id = next(self._request_ids)
            converted = convert(operation, request_id, num_dcs)
            if converted is None:
                sink.reject(operation.id, ErrorCode.INVALID_ARGUMENT, "operation names no request")
                continue
            kind, request = converted
            if check_partition:
                problem = self._misrouted(request)
                if problem is not None:
                    sink.reject(operation.id, ErrorCode.FAILED_PRECONDITION, problem)
                    continue
            full = self._disk_full(request)
            if full is not None:
                sink.reject(operation.id, ErrorCode.RESOURCE_EXHAUSTED, full)
                continue
            waiting[request_id] = (sink, operation.id, kind, started)
            requests.append(request)
        sink.outstanding += len(requests)
        self.client_requests += len(requests)
        self.pipeline_batches += 1
        if requests:
            self.run_core(requests)

    def _stream_closed(self, sink: PipelineSink) -> None:
        """A Pipeline stream or native connection is gone: its snapshot reads still running have no
        one to answer, so the core drops them (``PartitionServer.cancel_reads``); its other
        operations finish (a write is applied once taken) and their replies are dropped."""
        reads = [request_id for request_id, entry in self._waiting.items()
                 if type(entry) is tuple and entry[0] is sink and entry[2] in READ_KINDS]
        for request_id in reads:
            del self._waiting[request_id]
        sink.outstanding -= len(reads)
        if reads:
            self._abandon(reads)

    def _abandon(self, request_ids: list[int]) -> None:
        dropped = self.core.cancel_reads(request_ids)
        if dropped:
            log.info("%s: dropped %d snapshot read(s) whose client went away", self.label, dropped,
                     extra={"event": "reads_abandoned", "count": dropped})

    def _disk_full(self, request: ClientRequest) -> str | None:
        """Why a write is refused on a full disk (``okapikv.storage.space``), or None."""
        committer = self._committer
        if committer is None or not committer.disk_full or not isinstance(request, WRITE_REQUESTS):
            return None
        assert self._space is not None
        return (f"disk full: {self._space.directory} has less than the {self._space.reserve_bytes} bytes this server "
                "keeps free; the write was not applied (reads still work)")

    def _misrouted(self, request: ClientRequest) -> str | None:
        """Single-key requests must reach the key's partition: a misrouted write would land where
        no correctly routed read ever looks. (RO-TX and SCAN may start at any server of the DC.)"""
        if type(request) is PutManyRequest:
            return self._misrouted_pairs(request)
        key = getattr(request, "key", None)
        if not key or self.config.partitions == 1 or len(key) > self.config.max_key_bytes:
            return None  # no key, or one the core refuses anyway (INVALID_ARGUMENT)
        owner = partition_of(key, self.config.partitions)
        if owner == self.id.partition:
            return None
        address = self.config.server(self.id.dc, owner).address
        return f"key belongs to partition {owner} ({address}); this server is partition {self.id.partition}"

    def _misrouted_pairs(self, request: PutManyRequest) -> str | None:
        """A bulk PUT is refused whole when any of its keys belongs to another partition."""
        partitions = self.config.partitions
        if partitions == 1:
            return None
        here, max_key = self.id.partition, self.config.max_key_bytes
        for key in request.keys:
            if key and len(key) <= max_key and partition_of(key, partitions) != here:
                owner = partition_of(key, partitions)
                address = self.config.server(self.id.dc, owner).address
                return (f"key {key[:40]!r} belongs to partition {owner} ({address}); this server is partition "
                        f"{here}, and a bulk PUT's keys must all belong to the server it is sent to")
        return None

    # ================================================================ core calls and effects

    def run_core(self, messages: Sequence[Message]) -> None:
        if self._closing:
            # The final clock bound is being written: a core step now could announce a timestamp
            # above it (a heartbeat riding on the step), which the next start would take for a write
            # it lost. Peers resend what is dropped here through the catch-up after the restart.
            self._fail_requests(messages, ErrorCode.UNAVAILABLE, "the server is shutting down")
            return
        now_us = self.clock.now_us()
        core = self.core
        try:
            effects = core.handle(messages[0], now_us) if len(messages) == 1 else core.handle_batch(messages, now_us)
        except Exception:
            self.handler_errors += 1
            log.exception("%s: the core failed on a batch of %d message(s)", self.label, len(messages))
            self._fail_requests(messages)
            return
        self._carry_out(effects)
        if core.parked_count or core.woke:  # a parked request's wait, or the end of an idle spell
            self._arm_timer()
        stats = core.stats
        if stats.clock_offset_refusals + stats.clock_offset_clamps != self._clock_events_seen:
            self._log_clock_offsets()

    def _log_clock_offsets(self) -> None:
        """One warning line for the inputs the maximum clock offset held off since the last one, at
        most every ``CLOCK_LOG_INTERVAL_S`` (a far-ahead peer trips it with every message)."""
        stats = self.core.stats
        self._clock_events_seen = stats.clock_offset_refusals + stats.clock_offset_clamps
        now = time.monotonic()
        if now - self._clock_logged_at < CLOCK_LOG_INTERVAL_S or self.core.last_clock_offset is None:
            return
        refused = stats.clock_offset_refusals - self._clock_logged[0]
        clamped = stats.clock_offset_clamps - self._clock_logged[1]
        self._clock_logged = (stats.clock_offset_refusals, stats.clock_offset_clamps)
        self._clock_logged_at = now
        what, source, ahead_us = self.core.last_clock_offset
        log.warning(
            "%s: CLOCK OFFSET EXCEEDED: %d request(s) or slice(s) refused and %d peer timestamp(s) held back "
            "since the last report; latest: %s from %s, %.1f ms ahead of this server's clock (maximum clock "
            "offset %g ms). A clock is ahead, or this one is behind (docs/operations.md, \"Clocks: the "
            "maximum offset\")", self.label, refused, clamped, what, source, ahead_us / 1000,
            self.core.config.max_clock_offset_us / 1000,
            extra={"event": "clock_offset", "refused": refused, "held_back": clamped,
                   "ahead_ms": round(ahead_us / 1000, 3), "source": source})

    def _fail_requests(self, messages: Sequence[Message], code: ErrorCode = ErrorCode.INTERNAL,
                       why: str = "the server failed on this request (see its log)") -> None:
        for message in messages:
            request_id = getattr(message, "request_id", None)
            if request_id is not None and request_id in self._waiting:
                self._deliver(ErrorReply(request_id, code, why))

    def _carry_out(self, effects: list[Effect]) -> None:
        """Carry out the effects of one core call now, or once what they need is durable."""
        if self.core.membership is not self._membership:
            self._membership_changed()
        committer = self._committer
        if committer is None:
            self._apply(effects)
            return
        need = committer.stage(self.core.drain_changes(), self.core.hlc)
        if not effects:
            return
        if need <= committer.durable and not self._held:
            self._apply(effects)
        else:
            self._held.append((need, effects))

    def change_membership(self, view: Membership) -> bool:
        """The admin RPC (`okapi dc remove`): adopt ``view`` if it is ordered after this server's
        membership and pass it on (``okapikv.core.membership``); whether it was adopted."""
        before = self.core.membership
        self._carry_out(self.core.change_membership(view, self.clock.now_us()))
        self._arm_timer()
        return self.core.membership is not before

    def _membership_changed(self) -> None:
        """The core adopted a membership: keep it (before the call's effects leave), close the
        links to removed DCs' servers (their queues would only grow), log and count it."""
        before, view = self._membership, self.core.membership
        self._membership = view
        if self._membership_dir is not None:
            membership_file.save(self._membership_dir, view)
        names = self.config.dcs
        for destination in [d for d in self._links if view.states[d.dc] != "member"]:
            link = self._links.pop(destination)
            if self._loop is not None:
                self._loop.create_task(link.close())
        changes = ", ".join(f"{names[dc]} {old} -> {new}"
                            for dc, (old, new) in enumerate(zip(before.states, view.states, strict=True)) if old != new)
        log.warning("%s: membership epoch %d -> %d: %s", self.label, before.epoch, view.epoch, changes or "no change",
                    extra={"event": "membership_changed", "epoch": view.epoch,
                           "dc_states": dict(zip(names, view.states, strict=True))})

    def _on_durable(self) -> None:
        assert self._committer is not None
        durable = self._committer.durable
        held = self._held
        while held and held[0][0] <= durable:
            self._apply(held.popleft()[1])
        if self._repair_durable_group is not None and durable >= self._repair_durable_group:
            self._repair_durable_group = None
            assert self._storage is not None
            try:
                repair_finished(self._storage.directory)
            except OSError as error:
                log.error("%s: cannot remove the repair marker: %s", self.label, error)

    def _storage_failed(self, error: BaseException) -> None:
        """A commit failed: the writes of its group are in memory only and must never be
        acknowledged or read, so the process stops; a restart recovers the last durable group."""
        log.critical("%s: storage failed (%s: %s); stopping so that no non-durable write is served",
                     self.label, type(error).__name__, error)
        logging.shutdown()
        os._exit(EXIT_STORAGE_FAILURE)

    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if type(effect) is Respond:
                self._deliver(effect.reply)
            else:
                self._send(effect.destination, effect.message)  # type: ignore[union-attr]

    def _deliver(self, reply: ClientReply) -> None:
        entry = self._waiting.pop(reply.request_id, None)
        if entry is None:
            return  # the caller went away (cancelled unary call)
        if type(entry) is tuple:
            sink, operation_id, kind, started = entry
            sink.deliver(operation_id, kind, reply)
            self.latency.observe(kind, time.perf_counter() - started)
        elif not entry.done():  # type: ignore[union-attr]
            entry.set_result(reply)  # type: ignore[union-attr]

    def _send(self, destination: ServerId, message: PeerMessage) -> None:
        if message is not self._last_sent:
            # The same replication batch goes to every other DC: encode it once.
            self._encoded_update_bytes = 0
            self._last_frames = self._encode(message)
            self._last_sent = message
            self._last_measured = PeerWireBytes.measure(
                message, sum([len(frame) for frame, _ in self._last_frames]), self._encoded_update_bytes)
        self.wire_bytes.add(self._last_measured)
        link = self._links.get(destination)
        if link is None:
            link = self._open_link(destination)
        for frame, size in self._last_frames:
            link.enqueue(frame, size)

    def _encode(self, message: PeerMessage) -> list[tuple[bytes, int]]:
        """Framed message(s) for the wire, each below the message-size limit. A receiver refuses
        an oversized message, and the link would resend it forever, stalling everything behind
        it: a large replication batch is split (its updates install one by one anyway); a slice
        reply too large to send is dropped and logged (its read then fails by the client's
        timeout instead of blocking the link)."""
        size = approximate_size(message)
        limit = self._max_frame_bytes
        if size <= limit:
            if isinstance(message, ReplicateBatch):
                encoded, update_bytes = encode_replicate_batch(message, scalar=self._scalar)
                self._encoded_update_bytes += update_bytes
                return [(frame_peer_message(encoded), size)]
            return [(frame_peer_message(encode_peer_message(message, scalar=self._scalar)), size)]
        if isinstance(message, ReplicateBatch) and len(message.updates) > 1:
            half = len(message.updates) // 2
            return self._encode(ReplicateBatch(message.source, message.updates[:half])) + self._encode(
                ReplicateBatch(message.source, message.updates[half:], message.gsv)
            )
        if isinstance(message, RepairBatch) and len(message.updates) > 1:
            half = len(message.updates) // 2
            return self._encode(RepairBatch(message.source, message.request_id, message.updates[:half])) + (
                self._encode(RepairBatch(message.source, message.request_id, message.updates[half:])))
        self.oversized_dropped += 1
        log.error("%s: dropped a %s of about %d bytes, above the %d-byte message limit",
                  self.label, type(message).__name__, size, limit)
        return []

    def _open_link(self, destination: ServerId) -> OutgoingLink:
        """A link numbers its messages from 1, and the receiver skips the numbers it already handled
        from the same sender identity (``okapikv.server.inbound.SequenceTable``). So a link that
        replaces one closed by a membership change (``_membership_changed``) goes out under a
        fresh identity, as a restarted server's would: under this incarnation's, its first messages
        would be skipped as already handled, silently (a repair answered without its versions)."""
        target = self.config.server(destination.dc, destination.partition)
        header = self._header
        if destination in self._linked:
            header = batch_header(self.config.cluster_id, self.id, random.getrandbits(62) + 1)
        self._linked.add(destination)
        delay_ms = self.config.delay_ms(self.id.dc, destination.dc)
        link = OutgoingLink(
            destination=destination,
            label=target.label,
            address=target.peer_target,
            header=header,
            delay_s=delay_ms / 1000,
            max_batch_bytes=self.config.max_message_bytes // 2,
            max_message_bytes=self.config.max_message_bytes,
            credentials=self._peer_credentials,
            server_name=self.config.tls.server_name if self.config.tls is not None else None,
            # The native port listens on the host of ``address``: not for a separate peer listener.
            native=self.config.native and self.config.tls is None and target.peer_address is None,
            connections=self.config.connections,
        )
        self._links[destination] = link
        if destination.dc in self._held_dcs:
            link.hold(True)
        link.start()
        return link

    def hold_peer_links(self, dcs: set[int]) -> None:
        """Fault injection (``okapikv.server.faults``): cut our outgoing links to the servers of
        ``dcs`` (their messages queue up) and release every other link."""
        self._held_dcs = set(dcs)
        for destination, link in self._links.items():
            link.hold(destination.dc in self._held_dcs)

    # ================================================================ timer

    def _core_timer(self, now_us: int) -> None:
        try:
            effects = self.core.on_timer(now_us)
        except Exception:
            self.handler_errors += 1
            log.exception("%s: the core failed in on_timer", self.label)
        else:
            self._carry_out(effects)

    def _arm_timer(self) -> None:
        """Make sure ``on_timer`` runs at the core's next deadline (earlier one wins)."""
        deadline = self.core.next_deadline()
        if self._timer is not None:
            if deadline >= self._timer_deadline_us:
                return
            self._timer.cancel()
        assert self._loop is not None
        self._timer_deadline_us = deadline
        delay_s = self.clock.seconds_until(deadline)
        if delay_s * 1_000_000 <= SPIN_US:
            # A write parked for the next clock microsecond (Cure, GentleRain), wherever it was
            # parked (a client batch, a peer's message, a timer): ``_on_timer`` spins up to it on
            # the loop's next round; a millisecond timer would hold it a whole millisecond, a
            # same-microsecond artefact the paper's servers do not have.
            self._timer = self._loop.call_soon(self._on_timer)
            return
        # Event-loop timers have millisecond granularity (libuv truncates): round up, or a timer
        # due in 0.9 ms would fire at once and spin until the deadline.
        delay_s = math.ceil(delay_s * 1000) / 1000
        self._timer = self._loop.call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now_us = self.clock.now_us()
        if self.num_dcs > 1:  # before the tick's stabilization: the lag at its largest
            self.lag_samples.observe(now_us, self.core.stable, self.id.dc)
        self._core_timer(now_us)
        # A deadline microseconds away (Cure's and GentleRain's writes take one clock microsecond
        # each, so a batch of n writes at one reading leaves n - 1 waiting for the next ones) is met
        # here, not by an event-loop timer, whose millisecond granularity would hold each of those
        # writes a millisecond; bounded by SPIN_BUDGET_US per callback.
        spin_until_us = now_us + SPIN_BUDGET_US
        while True:
            deadline = self.core.next_deadline()
            now_us = self.clock.now_us()
            if deadline - now_us > SPIN_US or now_us >= spin_until_us:
                break
            while now_us < deadline:
                now_us = self.clock.now_us()
            self._core_timer(now_us)
        catch_up = self.core.catch_up
        if catch_up.lost_through and not self._lost_logged:
            self._lost_logged = True
            self._log_lost(catch_up.lost_through)
        if catch_up.holding_for and now_us - self._started_us >= UNREACHABLE_HOLD_US:
            self._release_unreachable()
        if not self._repair_logged and self.core.repairing is None:
            self._repair_logged = True
            if self._committer is not None:
                self._repair_durable_group = self._committer.required
                self._on_durable()
            stats = self.core.stats
            log.warning("%s: repair complete: %d version(s) of %d key(s) held, %d of this DC's own fetched back from "
                        "the replicas, %d kept from the damaged store; serving", self.label,
                        self.core.store.version_count, len(self.core.store), stats.repair_local_received,
                        stats.repair_local_kept, extra={"event": "repair_complete"})
        self._arm_timer()
        stats = self.core.stats
        if stats.clock_offset_refusals + stats.clock_offset_clamps != self._clock_events_seen:
            self._log_clock_offsets()

    # ================================================================ introspection

    @property
    def committer(self) -> GroupCommitter | None:
        """The group committer once started with a data directory (``okapikv.storage``), else None."""
        return self._committer

    @property
    def waiting_replies(self) -> int:
        return len(self._waiting)

    @property
    def admission_waits(self) -> int:
        return self.admission.waits

    def stable_lag_ms(self, now_us: int) -> tuple[float | None, ...]:
        """How far the stable vector trails this server's clock, per DC (None: nothing known yet)."""
        return tuple(None if entry == 0 else round((now_us - physical_of(entry)) / 1000, 3)
                     for entry in self.core.stable)

    def snapshot(self) -> NodeSnapshot:
        """Everything this server reports, now (``okapikv.wire.stats``: the Stats RPC, the
        Prometheus collector and `okapi status` render it)."""
        core = self.core
        config = self.config
        now_us = self.clock.now_us()
        names = config.dcs
        committer = self._committer
        return NodeSnapshot(
            identity=ServerIdentity(config.cluster_id, config.protocol, names[self.id.dc], self.id.dc,
                                    self.id.partition, self.server_config.address, os.getpid()),
            clock=ClockFigures(now_us, now_us + EPOCH_UNIX_US, self.clock.skew_us, core.hlc,
                               physical_of(core.hlc) - now_us, core.config.max_clock_offset_us,
                               self.clock_ahead_at_start_us),
            stabilization=StabilizationFigures(
                tuple(core.vv), tuple(core.stable), tuple(core.gsv), tuple(core.horizon), self.stable_lag_ms(now_us),
                tuple(self.lag_samples.snapshot()), tuple(names[dc] for dc in core.catching_up), core.repairing,
                tuple(names[dc] for dc in core.repair_waiting)),
            requests=RequestFigures(core.parked_count, core.pending_reads, core.snapshot_leases),
            store=StoreFigures(len(core.store), core.store.version_count, core.store.collected_count),
            storage=None if committer is None else StorageFigures(
                **committer.stats(), held_effect_groups=len(self._held), recovered=self.recovered),  # type: ignore[arg-type]
            latency=self.latency.figures(),
            core=_core_figures(core.stats),
            driver=copy_fields(DriverFigures, self),
            wire=copy_fields(WireFigures, self.wire_bytes),
            input=self.input_guard.figures(),
            links={link.label: link.figures(names[destination.dc])
                   for destination, link in sorted(self._links.items())},
            membership=MembershipFigures(core.membership.epoch, core.membership.states,
                                         tuple(names[dc] for dc in core.counted)),
        )

    def stats_json(self) -> str:
        """The Stats RPC's document (``okapikv.wire.stats.to_json``)."""
        return to_json(self.snapshot())


def _core_figures(stats: ServerStats) -> CoreFigures:
    """The core's counters: operations, waits, and every other integer field of ``ServerStats``
    under its own name (a counter the core gains appears without an edit here)."""
    counters = {item.name: value for item in dataclasses.fields(stats)
                if type(value := getattr(stats, item.name)) is int}
    waits = {reason: WaitFigures(wait.count, wait.total_us, wait.max_us, wait.mean_us)
             for reason, wait in stats.waits.items()}
    return CoreFigures(dict(stats.operations), waits, counters)
