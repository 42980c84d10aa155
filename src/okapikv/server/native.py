"""The native port: the Pipeline RPC's batches over framed TCP (``okapikv.wire.frames`` says why).

One ``NativeConnection`` per client connection plays the part of one Pipeline call: operation
batches go to ``PartitionNode.submit_operations`` exactly as the gRPC servicer hands them over, and
results come back through the same ``PipelineSink``, written by a callback scheduled when the first
result of an event-loop turn is ready: every result of that turn (of every batch that arrived in
it, and any parked operation or commit group that completed) leaves in one frame, with no task of
its own. Writing each batch's results before ``data_received`` returned instead sent more, smaller
frames: YCSB-A with 64 sessions, median of 5 paired runs, 25.6k ops/s against 28.6k deferred.

Flow control, so that a client that stops reading cannot make the server buffer without bound:
while the transport's write buffer is above asyncio's high-water mark (``pause_writing``) results
stay in the sink, and once the sink is full (``MAX_UNSENT_RESULTS`` results or ``MAX_UNSENT_BYTES``)
the connection hands no more batches to the node (checked batch by batch: one read can bring
hundreds) and stops reading until they are written.

The preamble says which messages the connection carries (``okapikv.wire.frames``): version 2
(msgpack, ``okapikv.wire.packed``, what this project's clients speak) is decoded here and handed
to the node with ``packed.operation_request`` and answered through a ``PackedSink``; version 1
(protobuf, older clients) goes through the Pipeline RPC's own conversion and sink.

Refusals (a bad or unknown preamble, a frame over the cluster's message limit, bytes that are not
an OperationBatch) answer one id-0 error result, in the connection's version (version 1 while the
preamble is not known), after the results of the operations already handed to the node, are logged,
and close that connection only.

The frames of one read go to the node in one call (at most ``MAX_OPERATIONS_PER_CALL`` operations),
so a read of eight 8-operation frames is one core step (one clock reading, one outbox, one
replication batch per peer) instead of eight: docs/benchmarks.md, "The server's Python path".

Input budgets (``okapikv.server.budgets``): every connection reports its partial frame (announced
length) to the server's ``InputGuard`` after each read. A partial frame that does not fit in the
budget is refused (RESOURCE_EXHAUSTED); a frame not finished within ``frame_timeout_ms``, a
connection with no complete frame ``first_frame_timeout_ms`` after connecting, and one idle for
``idle_timeout_ms`` are closed (DEADLINE_EXCEEDED), each with a log line and a count. A peer link
that proved its cluster id is counted but exempt from refusal (replication must get through).
Accepted sockets get TCP keepalive and ``TCP_USER_TIMEOUT`` (``okapikv.tcp``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import deque
from typing import cast

from google.protobuf.message import DecodeError

from okapikv.core.messages import ErrorCode
from okapikv.server.admission import ADMISSION_RETRY_S
from okapikv.server.budgets import BUDGET, ConnectionInput
from okapikv.server.inbound import InboundLink, LinkRefused, PeerIntake
from okapikv.server.node import PartitionNode
from okapikv.server.pipeline import PackedSink, PipelineSink
from okapikv.tcp import set_liveness_options
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import packed
from okapikv.wire.frames import MAGIC, MAGIC_V2, PEER_MAGIC, FrameDecoder, FrameError, encode_frame

log = logging.getLogger("okapikv.server")

#: The most operations of a version 2 connection handed to the core in one call (the frames of one
#: read are merged up to this): it bounds how far one call can overfill the sink and hold the loop.
MAX_OPERATIONS_PER_CALL = 256


class NativeConnection(asyncio.Protocol):
    def __init__(self, node: PartitionNode, intake: PeerIntake) -> None:
        # Made by the loop's protocol factory, so inside the loop: held once, since every
        # ``asyncio.get_running_loop()`` costs a ``getpid`` system call (it checks for a fork).
        self._loop = asyncio.get_running_loop()
        self._node = node
        self._intake = intake
        self._admission = node.admission
        self._decoder = FrameDecoder(max_frame_bytes=node.config.max_message_bytes, expect_magic=True,
                                     preambles=(MAGIC_V2, MAGIC, PEER_MAGIC))
        self._packed = False  # a version 2 connection (MAGIC_V2): msgpack both ways
        self._incoming: InboundLink | None = None  # a peer link (PEER_MAGIC)
        self._ack_timer: asyncio.TimerHandle | None = None  # an acknowledgement held back is due
        self._sink = PipelineSink(on_ready=self._on_ready, scalar=node.core.protocol.scalar)
        self._transport: asyncio.Transport | None = None
        self._frames: deque[bytes] = deque()  # received, not handed to the node yet (sink full)
        self._flush_scheduled = False
        self._retry_scheduled = False
        self._held_since: float | None = None  # when admission control started holding batches
        self._writing_paused = False
        self._reading_paused = False
        self._peer = "?"
        self._input: ConnectionInput | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        self._peer = str(transport.get_extra_info("peername"))
        self._node.native_connections += 1
        self._input = self._node.input_guard.open(self._peer, self._expired)
        settings = self._node.config.connections
        set_liveness_options(transport.get_extra_info("socket"), keepalive_s=settings.tcp_keepalive_ms / 1000,
                             user_timeout_s=settings.tcp_user_timeout_ms / 1000)

    def data_received(self, data: bytes) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        decoder = self._decoder
        try:
            frames = decoder.feed(data)
        except FrameError as error:
            self._refuse(str(error))
            return
        connection_input = self._input
        assert connection_input is not None
        if not connection_input.progress(len(frames), decoder.pending_bytes):
            self._refuse(connection_input.refuse_message(decoder.pending_bytes),
                         reply=decoder.preamble != PEER_MAGIC, code=ErrorCode.RESOURCE_EXHAUSTED, event=BUDGET)
            return
        if decoder.preamble == PEER_MAGIC:
            self._receive_peer_batches(frames)
            return
        if decoder.preamble == MAGIC_V2 and not self._packed:  # the first bytes: no operation taken yet
            self._packed = True
            self._sink = PackedSink(on_ready=self._on_ready, scalar=self._node.core.protocol.scalar)
        self._frames.extend(frames)
        self._take_operations()

    def _receive_peer_batches(self, frames: list[bytes]) -> None:
        """A peer link (``links.NativeLinkCall``), handled by an ``InboundLink`` as the ``Peer.Link``
        RPC's are; a refusal closes the connection (the sender logs it and reconnects)."""
        transport = self._transport
        assert transport is not None
        if self._incoming is None:
            tls = self._node.config.tls
            if tls is not None and not tls.client_auth:  # no certificate was demanded of this caller
                self._refuse("peer links need a certificate: use the peer listener", reply=False)
                return
            self._incoming = self._intake.open(self._peer)
        now = self._loop.time()
        for frame in frames:
            try:
                acknowledged = self._incoming.accept(pb.PeerBatch.FromString(frame), now)
            except DecodeError:
                self._refuse("a frame is not a PeerBatch", reply=False)
                return
            except LinkRefused as refusal:
                self._refuse(f"{refusal.code.name}: {refusal.message}", reply=False)
                return
            if self._input is not None:
                self._input.exempt = True  # a peer of this cluster: never refused for the budget
            if acknowledged is not None:
                transport.write(encode_frame(pb.LinkAck(received=acknowledged).SerializeToString()))
        self._arm_ack(now)

    def _arm_ack(self, now: float) -> None:
        """An acknowledgement held back leaves by its deadline (``InboundLink.owed_in``), even if no
        batch follows."""
        if self._ack_timer is None and self._incoming is not None:
            due_s = self._incoming.owed_in(now)
            if due_s is not None:
                self._ack_timer = self._loop.call_later(due_s, self._ack_due)

    def _ack_due(self) -> None:
        self._ack_timer = None
        transport, incoming = self._transport, self._incoming
        if transport is None or transport.is_closing() or incoming is None:
            return
        now = self._loop.time()
        acknowledged = incoming.owed(now)
        if acknowledged is not None:
            transport.write(encode_frame(pb.LinkAck(received=acknowledged).SerializeToString()))
        self._arm_ack(now)

    def _take_operations(self) -> None:
        """Hand the received batches to the node until the sink is full (then stop reading)."""
        frames = self._frames
        sink = self._sink
        if frames and self._admission.backlogged():  # replication first (``okapikv.server.admission``)
            self._held_since = self._admission.hold(self._held_since)
            if self._held_since is not None:
                self._pause_reading()
                if not self._retry_scheduled:
                    self._retry_scheduled = True
                    self._loop.call_later(ADMISSION_RETRY_S, self._retry_take)
                return
        self._held_since = None
        node = self._node
        if self._packed:
            while frames and not sink.full:
                # The frames received together go to the core in one call (up to
                # ``MAX_OPERATIONS_PER_CALL``): one clock reading, one host step, one outbox and
                # one replication batch per peer for all of them, instead of one per frame.
                operations: list[packed.Operation] = []
                problem = None
                while frames and len(operations) < MAX_OPERATIONS_PER_CALL:
                    try:
                        operations += packed.decode_operations(frames.popleft()).operations
                    except packed.DecodeError as error:
                        problem = f"a frame is not an OperationBatch: {error}"
                        break
                if operations:  # those before a bad frame are served, as they were received
                    node.submit_operations(packed.OperationBatch(operations), sink, packed.operation_request)
                if problem is not None:
                    self._refuse(problem)
                    return
        else:
            while frames and not sink.full:
                try:
                    batch = pb.OperationBatch.FromString(frames.popleft())
                except DecodeError:
                    self._refuse("a frame is not an OperationBatch")
                    return
                node.submit_operations(batch, sink)
        if frames:
            self._pause_reading()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def _retry_take(self) -> None:
        self._retry_scheduled = False
        if self._transport is not None and not self._transport.is_closing():
            self._take_operations()
            self._flush()

    def _on_ready(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._node.commit_due()  # the turn's commit group first: its replies leave in this write
        self._flush_scheduled = False
        self._flush()

    def _flush(self) -> None:
        """Write the results ready now unless the transport is full; read or pause reading."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if not self._writing_paused:
            frame = self._sink.frame()
            if frame is not None:
                transport.write(frame)
        if self._frames and not self._sink.full:
            self._take_operations()
        full = self._sink.full or bool(self._frames)
        if full and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not full and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._flush()

    def _expired(self, event: str, reason: str) -> None:
        """The input guard's sweep found a deadline passed (``okapikv.server.budgets``)."""
        if self._transport is not None and not self._transport.is_closing():
            self._refuse(reason, reply=self._decoder.preamble != PEER_MAGIC, code=ErrorCode.DEADLINE_EXCEEDED,
                         event=event)

    def _refuse(self, reason: str, *, reply: bool = True, code: ErrorCode = ErrorCode.INVALID_ARGUMENT,
                event: str = "native_refused") -> None:
        """Log and close; ``reply``: first tell a client why, as an id-0 error result. ``event``:
        what the log line's event says (``native_refused``, counted here, for broken framing; the
        input guard counts its own)."""
        if event == "native_refused":
            self._node.native_refused += 1
        log.warning("native port: closed %s: %s", self._peer, reason,
                    extra={"event": event, "peer": self._peer, "reason": reason})
        assert self._transport is not None
        if reply and self._decoder.preamble != PEER_MAGIC:
            pending = self._sink.frame()  # the results of what was applied before the bad input go first
            if pending is not None:
                self._transport.write(pending)
        if reply and self._decoder.preamble == MAGIC_V2:
            self._transport.write(packed.encode_results([packed.error(0, code, reason)[0]]))
        elif reply:
            refusal = pb.ResultBatch()
            result = refusal.results.add()
            result.id = 0
            result.error.code = code
            result.error.message = reason
            self._transport.write(encode_frame(refusal.SerializeToString()))
        self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._input is not None:
            self._input.close()
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        self._sink.close()
        self._transport = None


async def start_native(node: PartitionNode, intake: PeerIntake, host: str, port: int,
                       ssl_context: ssl.SSLContext | None) -> asyncio.Server:
    """Listen on ``host:port`` (port 0: any free port) and serve native connections; peer links
    go to ``intake`` (the node's, shared with the ``Peer.Link`` RPC)."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: NativeConnection(node, intake), host, port, ssl=ssl_context)
