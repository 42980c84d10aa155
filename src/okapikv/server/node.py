"""The driver: one ``PartitionServer`` core run on an asyncio loop (the aioquic model).

Everything the core does happens through three entry points, all called from the event loop (so
the core is never entered concurrently):

- ``handle`` / ``handle_batch`` for client requests and incoming peer batches;
- ``on_timer`` when the core's ``next_deadline()`` comes (heartbeats, stabilization, GC, parked
  requests waiting for the clock). The timer is one ``call_later`` handle, re-armed after every
  firing and moved earlier whenever a request parks;

and every effect they return is carried out right away: a ``Respond`` goes to whoever waits for
that request id (a unary call's future or a Pipeline stream), a ``Send`` goes onto the outgoing link
of its destination (``links.OutgoingLink``).

Request ids are this process's own (the core only echoes them), so the ids clients put on Pipeline
operations never reach the core and cannot collide across streams.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import random
from collections.abc import Sequence
from typing import Any

from okapikv.cluster.config import MESSAGE_OVERHEAD_BYTES, ClusterConfig
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    Effect,
    ErrorReply,
    Message,
    PeerMessage,
    ReplicateBatch,
    Respond,
    ServerId,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import physical_of
from okapikv.server.clock import EPOCH_UNIX_US, ServerClock
from okapikv.server.links import IncomingLinks, OutgoingLink
from okapikv.server.pipeline import PipelineSink
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import (
    approximate_size,
    batch_header,
    encode_peer_message,
    frame_peer_message,
    operation_request,
    peer_message_from_pb,
)

log = logging.getLogger("okapikv.server")

PipelineEntry = tuple[PipelineSink, int, str]  # (stream, the client's operation id, result kind)


class PartitionNode:
    """Partition server ``partition`` of DC ``dc`` of ``config``, running."""

    def __init__(self, config: ClusterConfig, dc: int, partition: int) -> None:
        self.config = config
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
        self._incoming = IncomingLinks()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline_us = 0
        self._last_sent: object = None
        self._last_frames: list[tuple[bytes, int]] = []
        self._max_frame_bytes = config.max_message_bytes - MESSAGE_OVERHEAD_BYTES
        self._loop: asyncio.AbstractEventLoop | None = None
        self.client_requests = 0
        self.pipeline_batches = 0
        self.peer_batches_received = 0
        self.peer_messages_received = 0
        self.handler_errors = 0
        self.oversized_dropped = 0

    # ================================================================ lifecycle

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._arm_timer()

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await asyncio.gather(*(link.close() for link in self._links.values()), return_exceptions=True)
        for entry in list(self._waiting.values()):
            if isinstance(entry, asyncio.Future) and not entry.done():
                entry.set_result(ErrorReply(0, "UNAVAILABLE", "the server is shutting down"))
        self._waiting.clear()

    # ================================================================ client requests

    def next_request_id(self) -> int:
        return next(self._request_ids)

    async def call(self, request: ClientRequest) -> ClientReply:
        """Run one request (unary RPC) and wait for its reply, however long the core parks it."""
        future: asyncio.Future[ClientReply] = asyncio.get_running_loop().create_future()
        request_id = request.request_id
        self.client_requests += 1
        problem = self._misrouted(request)
        if problem is not None:
            return ErrorReply(request_id, "FAILED_PRECONDITION", problem)
        self._waiting[request_id] = future
        try:
            self._run_core((request,))
            return await future
        finally:
            self._waiting.pop(request_id, None)

    def submit_operations(self, batch: pb.OperationBatch, sink: PipelineSink) -> None:
        """Hand a Pipeline batch to the core in one ``handle_batch`` (one replication batch per
        peer for the whole client batch); results reach ``sink`` as they are ready."""
        requests: list[Message] = []
        waiting = self._waiting
        num_dcs = self.num_dcs
        check_partition = self.config.partitions > 1
        for operation in batch.operations:
            request_id = next(self._request_ids)
            converted = operation_request(operation, request_id, num_dcs)
            if converted is None:
                sink.reject(operation.id, "INVALID_ARGUMENT", "operation names no request")
                continue
            kind, request = converted
            if check_partition:
                problem = self._misrouted(request)
                if problem is not None:
                    sink.reject(operation.id, "FAILED_PRECONDITION", problem)
                    continue
            waiting[request_id] = (sink, operation.id, kind)
            requests.append(request)
        sink.outstanding += len(requests)
        self.client_requests += len(requests)
        self.pipeline_batches += 1
        if requests:
            self._run_core(requests)

    def _misrouted(self, request: ClientRequest) -> str | None:
        """Single-key requests must reach the key's partition: a misrouted write would land where
        no correctly routed read ever looks. (RO-TX and SCAN may start at any server of the DC.)"""
        key = getattr(request, "key", None)
        if not key or self.config.partitions == 1 or len(key) > self.config.max_key_bytes:
            return None  # no key, or one the core refuses anyway (INVALID_ARGUMENT)
        owner = partition_of(key, self.config.partitions)
        if owner == self.id.partition:
            return None
        address = self.config.server(self.id.dc, owner).address
        return f"key belongs to partition {owner} ({address}); this server is partition {self.id.partition}"

    # ================================================================ peer messages

    def on_peer_batch(self, batch: pb.PeerBatch) -> int | None:
        """Hand an incoming PeerBatch to the core in order; returns the sequence number to
        acknowledge, or None if the batch leaves a gap (the stream must restart)."""
        source = ServerId(batch.source.dc, batch.source.partition)
        messages = batch.messages
        count = len(messages)
        skip = self._incoming.admit(source, batch.incarnation, batch.first_sequence, count)
        if skip is None:
            return None
        converted: list[Message] = []
        for index in range(skip, count):
            try:
                message = peer_message_from_pb(messages[index], source)
            except Exception:  # a malformed message must not stall the link with endless resends
                self.handler_errors += 1
                log.exception("%s: dropped a malformed message from %s", self.label, source)
                continue
            if message is not None:
                converted.append(message)
        self.peer_batches_received += 1
        self.peer_messages_received += len(converted)
        if converted:
            self._run_core(converted)
        return self._incoming.handled(source, batch.incarnation, batch.first_sequence, count)

    # ================================================================ core calls and effects

    def _run_core(self, messages: Sequence[Message]) -> None:
        now_us = self.clock.now_us()
        core = self.core
        try:
            effects = core.handle(messages[0], now_us) if len(messages) == 1 else core.handle_batch(messages, now_us)
        except Exception:
            self.handler_errors += 1
            log.exception("%s: the core failed on a batch of %d message(s)", self.label, len(messages))
            self._fail_requests(messages)
            return
        self._apply(effects)
        if core.parked_count:
            self._arm_timer()

    def _fail_requests(self, messages: Sequence[Message]) -> None:
        for message in messages:
            request_id = getattr(message, "request_id", None)
            if request_id is not None and request_id in self._waiting:
                self._deliver(ErrorReply(request_id, "INTERNAL", "the server failed on this request (see its log)"))

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
            sink, operation_id, kind = entry
            sink.deliver(operation_id, kind, reply)
        elif not entry.done():  # type: ignore[union-attr]
            entry.set_result(reply)  # type: ignore[union-attr]

    def _send(self, destination: ServerId, message: PeerMessage) -> None:
        if message is not self._last_sent:
            # The same replication batch goes to every other DC: encode it once.
            self._last_frames = self._encode(message)
            self._last_sent = message
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
            return [(frame_peer_message(encode_peer_message(message)), size)]
        if isinstance(message, ReplicateBatch) and len(message.updates) > 1:
            half = len(message.updates) // 2
            return self._encode(ReplicateBatch(message.source, message.updates[:half])) + self._encode(
                ReplicateBatch(message.source, message.updates[half:])
            )
        self.oversized_dropped += 1
        log.error("%s: dropped a %s of about %d bytes, above the %d-byte message limit",
                  self.label, type(message).__name__, size, limit)
        return []

    def _open_link(self, destination: ServerId) -> OutgoingLink:
        target = self.config.server(destination.dc, destination.partition)
        delay_ms = self.config.delay_ms(self.id.dc, destination.dc)
        link = OutgoingLink(
            destination=destination,
            label=target.label,
            address=target.address,
            header=self._header,
            delay_s=delay_ms / 1000,
            max_batch_bytes=self.config.max_message_bytes // 2,
            max_message_bytes=self.config.max_message_bytes,
        )
        self._links[destination] = link
        link.start()
        return link

    # ================================================================ timer

    def _arm_timer(self) -> None:
        """Make sure ``on_timer`` runs at the core's next deadline (earlier one wins)."""
        deadline = self.core.next_deadline()
        if self._timer is not None:
            if deadline >= self._timer_deadline_us:
                return
            self._timer.cancel()
        assert self._loop is not None
        delay_s = self.clock.seconds_until(deadline)
        # Event-loop timers have millisecond granularity (libuv truncates): round up, or a timer
        # due in 0.9 ms would fire at once and spin until the deadline.
        delay_s = math.ceil(delay_s * 1000) / 1000
        self._timer_deadline_us = deadline
        self._timer = self._loop.call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        try:
            effects = self.core.on_timer(self.clock.now_us())
        except Exception:
            self.handler_errors += 1
            log.exception("%s: the core failed in on_timer", self.label)
        else:
            self._apply(effects)
        self._arm_timer()

    # ================================================================ introspection

    def stats(self) -> dict[str, Any]:
        core = self.core
        now_us = self.clock.now_us()
        lag_ms: list[float | None] = [
            None if entry == 0 else round((now_us - physical_of(entry)) / 1000, 3) for entry in core.stable
        ]
        return {
            "cluster_id": self.config.cluster_id,
            "protocol": self.config.protocol,
            "dc": self.config.dcs[self.id.dc],
            "dc_index": self.id.dc,
            "partition": self.id.partition,
            "address": self.server_config.address,
            "clock_us": now_us,
            "clock_unix_us": now_us + EPOCH_UNIX_US,
            "clock_skew_us": self.clock.skew_us,
            "hlc": core.clock,
            "vv": list(core.vv),
            "stable": list(core.stable),
            "gsv": list(core.gsv),
            "horizon": list(core.horizon),
            "stable_lag_ms": lag_ms,
            "parked": core.parked_count,
            "pending_reads": core.pending_reads,
            "keys": len(core.store),
            "core": core.stats.as_dict(),
            "driver": {
                "client_requests": self.client_requests,
                "pipeline_batches": self.pipeline_batches,
                "waiting_replies": len(self._waiting),
                "peer_batches_received": self.peer_batches_received,
                "peer_messages_received": self.peer_messages_received,
                "handler_errors": self.handler_errors,
                "oversized_dropped": self.oversized_dropped,
            },
            "links": {
                link.label: {
                    "address": link.address,
                    "delay_ms": link.delay_s * 1000,
                    "connected": link.connected,
                    "queued": link.queued,
                    "unacked": link.unacked,
                    "sent_messages": link.stats.sent_messages,
                    "sent_batches": link.stats.sent_batches,
                    "resent_messages": link.stats.resent_messages,
                    "connects": link.stats.connects,
                    "failures": link.stats.failures,
                }
                for link in self._links.values()
            },
        }

    def stats_json(self) -> str:
        return json.dumps(self.stats(), separators=(",", ":"))
