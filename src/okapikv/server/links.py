"""Peer links: one FIFO, reliable, WAN-delayed stream of peer messages per destination server.

The protocol assumes FIFO links, reliable while up (docs/protocol.md, "Replication and heartbeats"):
a replica sets ``vv[i]`` to the timestamp of the last update it received from DC i and takes it as
proof that every earlier update from i is installed. A lost or reordered message would break that
silently, so each link:

- keeps one ``Peer.Link`` stream open to its destination; messages leave in the order the core
  produced them, batched (everything queued when the sender runs goes in one ``PeerBatch``, split
  below the message-size limit);
- numbers messages (per sender identity: its incarnation, or a fresh one for a link reopened after
  a membership change closed it, ``okapikv.server.peer_links``) and keeps each one until the
  receiver acknowledges it; after a broken stream it reconnects with backoff and resends the
  unacknowledged tail, and the receiver skips numbers it already handled
  (``okapikv.server.inbound``). Messages queued while the destination is down wait in the queue,
  so servers may start in any order;
- notices a connection that went silent (a network cut that drops packets without a reset):
  ``okapikv.server.liveness`` watches the acknowledgements, probes a silent receiver and declares
  the connection dead after ``[connections] link_ack_timeout_ms`` without an answer; the link then
  reconnects as after any break. Native links also set TCP keepalive and ``TCP_USER_TIMEOUT``
  (``okapikv.tcp``), gRPC ones use gRPC's keepalive;
- emulates WAN latency in the sender: a message to another DC is released at
  ``enqueue time + one-way delay``. The delay is constant per link, so release times are
  non-decreasing and FIFO order is kept.

Frames arrive already serialized (``okapikv.wire.convert``), so a replication batch sent to every
other DC is encoded once.

With TLS on, the link dials with this server's certificate (mutual TLS, ``okapikv.tls``): a peer
that does not trust our CA, or that we do not trust, fails the handshake, and the link keeps
retrying with backoff (and warns) like for any unreachable peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from okapikv.cluster.connections import ConnectionSettings
from okapikv.core.messages import ServerId
from okapikv.server.liveness import LinkLiveness, LivenessSettings, Verdict
from okapikv.tcp import set_liveness_options
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.convert import encode_batch
from okapikv.wire.frames import PEER_MAGIC, FrameDecoder, encode_frame
from okapikv.wire.stats import LinkFigures

LINK_METHOD = "/okapikv.Peer/Link"
CLUSTER_INFO_METHOD = "/okapikv.KeyValue/ClusterInfo"
NATIVE_CONNECT_TIMEOUT_S = 5.0
INITIAL_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0

log = logging.getLogger("okapikv.server.links")


def _identity(data: bytes) -> bytes:
    return data


def _serialize(message: Any) -> bytes:
    encoded: bytes = message.SerializeToString()
    return encoded


class NativeLinkCall:
    """A peer link over the destination's native port (``okapikv.wire.frames.PEER_MAGIC``): the
    same ``PeerBatch`` / ``LinkAck`` messages as the ``Peer.Link`` RPC, with the interface
    ``OutgoingLink`` uses of a grpc.aio stream call. Why: at idle, heartbeats and stabilization
    rounds are a few hundred small messages a second per server, and over gRPC an idle 3-DC x
    2-partition cluster used 0.21 cores per server (1.28 of this machine's 2)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def write(self, batch: bytes) -> None:
        self._writer.write(encode_frame(batch))
        await self._writer.drain()

    async def __aiter__(self) -> AsyncIterator[pb.LinkAck]:
        decoder = FrameDecoder()
        while True:
            chunk = await self._reader.read(1 << 16)
            if not chunk:
                return
            for frame in decoder.feed(chunk):
                yield pb.LinkAck.FromString(frame)

    async def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE  # a native link only ends when its connection does

    async def details(self) -> str:
        return "the destination closed the native link"

    def close(self) -> None:
        """Drop the connection at once: what is still unsent stays unacknowledged and is resent on
        the next connection (a graceful close would wait, on a silent peer forever, to flush it)."""
        self._writer.transport.abort()


def peer_channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """Channel options for peer links: reconnect quickly (peers restart, start late) and notice a
    dead peer on an idle link through keepalive pings."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


@dataclass(slots=True)
class LinkStats:
    sent_messages: int = 0
    sent_batches: int = 0
    resent_messages: int = 0
    connects: int = 0
    failures: int = 0
    probes: int = 0  # probes sent (empty batches the receiver answers at once)
    dead: int = 0  # connections found dead by the liveness check (no answer in time)


class OutgoingLink:
    """Messages from this server to one destination, in order, delivered at least once and handled
    exactly once (see the module docstring)."""

    def __init__(
        self,
        *,
        destination: ServerId,
        label: str,
        address: str,
        header: bytes,
        delay_s: float,
        max_batch_bytes: int,
        max_message_bytes: int,
        credentials: grpc.ChannelCredentials | None = None,
        server_name: str | None = None,
        native: bool = False,
        connections: ConnectionSettings | None = None,
    ) -> None:
        """``native``: link over the destination's native port when it has one (plaintext
        clusters; with TLS the ``Peer.Link`` RPC keeps its mutual TLS). ``connections``: the
        cluster's liveness timeouts (``[connections]``; the defaults when None)."""
        self.destination = destination
        self.label = label
        self.address = address
        self.delay_s = delay_s
        self._header = header
        self._max_batch_bytes = max_batch_bytes
        self._options: list[tuple[str, object]] = list(peer_channel_options(max_message_bytes))
        self._credentials = credentials
        if credentials is not None and server_name:
            self._options.append(("grpc.ssl_target_name_override", server_name))
        self.queued_bytes = 0  # bytes of the frames in _queue (for the replication-queue metrics)
        self.unacked_bytes = 0  # bytes of the frames in _unacked
        self._queue: deque[tuple[float, int, bytes, int]] = deque()  # (release time, sequence, frame, size)
        # (sequence, frame, size, release time): what the receiver has not acknowledged yet
        self._unacked: deque[tuple[int, bytes, int, float]] = deque()
        self._next_sequence = 1
        self._wakeup = asyncio.Event()
        self._idle = True
        self._broken = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        self.connected = False
        self._consecutive_failures = 0
        self.stats = LinkStats()
        self.held = False  # fault injection (``okapikv.server.faults``): send nothing while set
        self._native = native and credentials is None
        self.last_ack_at = 0.0  # loop time of the last acknowledgement (progress, see backlog_s)
        settings = connections or ConnectionSettings()
        self._liveness_settings = LivenessSettings(settings.link_probe_ms / 1000, settings.link_ack_timeout_ms / 1000)
        self._keepalive_s = settings.tcp_keepalive_ms / 1000
        self._user_timeout_s = settings.tcp_user_timeout_ms / 1000
        self._liveness = LinkLiveness(self._liveness_settings, self._loop.time())
        self._probe_due = False

    # ---------------------------------------------------------------- producer side

    def enqueue(self, frame: bytes, size: int) -> None:
        """Queue one framed message; called from the core's effect dispatch (never blocks)."""
        self._queue.append((self._loop.time() + self.delay_s, self._next_sequence, frame, size))
        self._next_sequence += 1
        self.queued_bytes += size
        if self._idle:
            self._idle = False
            self._wakeup.set()

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def unacked(self) -> int:
        return len(self._unacked)

    def backlog_s(self, now: float) -> float:
        """How long the oldest message that is due (its emulated WAN delay over) has waited to be
        sent and acknowledged: how far the destination is behind this server. 0 while the link is
        held or not connected: a cut or unreachable DC must never slow local clients down (nor one
        that stopped acknowledging: see ``okapikv.server.admission``)."""
        if self.held or not self.connected:
            return 0.0
        if self._unacked:
            oldest = self._unacked[0][3]
        elif self._queue:
            oldest = self._queue[0][0]
        else:
            return 0.0
        return max(0.0, now - oldest)

    def figures(self, peer_dc: str) -> LinkFigures:
        """This link's part of the node's snapshot (``okapikv.wire.stats``); ``peer_dc``: the
        destination DC's name."""
        stats = self.stats
        return LinkFigures(self.address, self.delay_s * 1000, self.connected, len(self._queue), len(self._unacked),
                           self.queued_bytes, self.unacked_bytes, stats.sent_messages, stats.sent_batches,
                           stats.resent_messages, stats.connects, stats.failures, stats.probes, stats.dead,
                           peer_dc, self.destination.partition)

    def hold(self, held: bool) -> None:
        """Fault injection: while held, the link sends nothing (messages keep queuing, in order)
        as if the network between the two DCs were cut; releasing it resumes where it stopped."""
        self.held = held
        self._wakeup.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"link->{self.label}")

    async def close(self) -> None:
        self._closed = True
        self._wakeup.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # ---------------------------------------------------------------- connection loop

    async def _run(self) -> None:
        backoff = INITIAL_BACKOFF_S
        while not self._closed:
            if self._credentials is None:
                channel = grpc.aio.insecure_channel(self.address, options=self._options)
            else:
                channel = grpc.aio.secure_channel(self.address, self._credentials, options=self._options)
            ack_reader: asyncio.Task[None] | None = None
            native: NativeLinkCall | None = None
            try:
                call: Any
                if self._native:
                    call = native = await self._open_native(channel)
                if native is None:
                    stub = channel.stream_stream(
                        LINK_METHOD, request_serializer=_identity, response_deserializer=pb.LinkAck.FromString
                    )
                    call = stub(wait_for_ready=True)
                self._broken = False
                self._probe_due = False
                self._liveness = LinkLiveness(self._liveness_settings, self._loop.time())
                ack_reader = asyncio.create_task(self._read_acks(call))
                self.stats.connects += 1
                await self._pump_while_alive(call)
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as error:
                self._report_failure(f"{error.code().name}: {error.details()}")
            except Exception as error:  # a failed write surfaces as one of several grpc.aio errors
                self._report_failure(f"{type(error).__name__}: {error}")
            finally:
                if self.connected:
                    backoff = INITIAL_BACKOFF_S  # the receiver acknowledged: it was a real connection
                self.connected = False
                if ack_reader is not None:
                    ack_reader.cancel()
                    # Let it finish now: its last act (marking the stream broken) must not land
                    # after the next connection has started. Whatever it died of, the link lives on.
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await ack_reader
                if native is not None:
                    native.close()
                await channel.close(grace=None)
            if self._closed:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _pump_while_alive(self, call: Any) -> None:
        """Run ``_pump`` until the stream breaks (its error, if any, is raised here) or the liveness
        watch finds the connection dead (then return: the caller reconnects)."""
        pump = asyncio.create_task(self._pump(call))
        watch = asyncio.create_task(self._watch())
        try:
            await asyncio.wait((pump, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, watch):
                task.cancel()
            await asyncio.gather(pump, watch, return_exceptions=True)
        error = None if pump.cancelled() else pump.exception()
        if error is not None:
            raise error

    async def _watch(self) -> None:
        """Ask ``LinkLiveness`` what to do every check interval: wake the pump to send a probe, or
        return once the connection is dead. A held link (fault injection) sends nothing on
        purpose: its silence does not count."""
        liveness = self._liveness
        settings = liveness.settings
        while not self._broken:
            await asyncio.sleep(settings.check_interval_s)
            now = self._loop.time()
            if self.held:
                liveness.reset(now)
                continue
            verdict = liveness.check(now)
            if verdict is Verdict.PROBE:
                self._probe_due = True
                self._wakeup.set()
            elif verdict is Verdict.DEAD:
                self.stats.dead += 1
                self.stats.failures += 1
                self._consecutive_failures += 1
                kept = len(self._unacked) + len(self._queue)
                log.warning("link to %s (%s) is dead: no answer for %.1f s; reconnecting (%d messages kept)",
                            self.label, self.address, now - liveness.last_heard, kept,
                            extra={"event": "link_dead", "peer": self.label, "peer_address": self.address,
                                   "silent_s": round(now - liveness.last_heard, 3), "kept_messages": kept})
                return

    async def _open_native(self, channel: grpc.aio.Channel) -> NativeLinkCall | None:
        """A connection to the destination's native port (asked through its ClusterInfo, every
        time: a restarted server listens elsewhere), or None when it has none (then gRPC)."""
        info = await channel.unary_unary(CLUSTER_INFO_METHOD, request_serializer=_serialize,
                                         response_deserializer=pb.ClusterInfoResponse.FromString)(
            pb.ClusterInfoRequest(), timeout=NATIVE_CONNECT_TIMEOUT_S, wait_for_ready=True)
        if not info.native_port:
            self._native = False
            return None
        host = self.address.rpartition(":")[0].strip("[]")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, info.native_port),
                                                NATIVE_CONNECT_TIMEOUT_S)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        set_liveness_options(sock, keepalive_s=self._keepalive_s, user_timeout_s=self._user_timeout_s)
        writer.write(PEER_MAGIC)
        return NativeLinkCall(reader, writer)

    def _report_failure(self, reason: str) -> None:
        """Log quietly: one broken stream is routine (a peer restarting, the cluster stopping); a
        peer that stays unreachable is worth a warning, repeated now and then."""
        if self._closed:
            return
        self.stats.failures += 1
        self._consecutive_failures += 1
        count = self._consecutive_failures
        if count == 1:
            log.info("link to %s (%s) broke (%s); reconnecting", self.label, self.address, reason,
                     extra={"event": "link_broken", "peer": self.label, "peer_address": self.address, "reason": reason})
        elif count == 3 or count % 100 == 0:
            kept = len(self._unacked) + len(self._queue)
            log.warning("%s (%s) still unreachable after %d attempts (%s); %d messages kept for it",
                        self.label, self.address, count, reason, kept,
                        extra={"event": "link_unreachable", "peer": self.label, "peer_address": self.address,
                               "attempts": count, "reason": reason, "kept_messages": kept})

    async def _read_acks(self, call: Any) -> None:
        try:
            async for ack in call:
                if not self.connected:
                    self.connected = True
                    if self._consecutive_failures >= 3:
                        log.warning("link to %s (%s) restored", self.label, self.address,
                                    extra={"event": "link_restored", "peer": self.label, "peer_address": self.address})
                    self._consecutive_failures = 0
                received = ack.received
                now = self.last_ack_at = self._loop.time()
                unacked = self._unacked
                while unacked and unacked[0][0] <= received:
                    self.unacked_bytes -= unacked.popleft()[2]
                self._liveness.heard(now, bool(unacked))
            status = await call.code()
            if status != grpc.StatusCode.OK and not self._closed:
                self._report_failure(f"{status.name}: {await call.details()}")
        except grpc.aio.AioRpcError as error:
            if not self._closed:
                self._report_failure(f"{error.code().name}: {error.details()}")
        except (OSError, ValueError) as error:  # a native link: reset connection, undecodable ack
            if not self._closed:
                self._report_failure(f"{type(error).__name__}: {error}")
        finally:
            self._broken = True
            self._wakeup.set()

    async def _pump(self, call: Any) -> None:
        """Resend what is unacknowledged, then write batches (and probes when the liveness watch
        asks for one) until the stream breaks."""
        while self.held and not self._broken and not self._closed:
            self._wakeup.clear()
            await self._wakeup.wait()
        liveness = self._liveness
        if self._unacked:
            pending = list(self._unacked)
            self.stats.resent_messages += len(pending)
            for chunk in self._chunks(pending):
                liveness.sent(self._loop.time())  # before the write: a write may block on a silent peer
                await call.write(encode_batch(self._header, chunk[0][0], [item[1] for item in chunk]))
        queue = self._queue
        while not self._broken and not self._closed:
            if self._probe_due and not self.held:
                # Numbered as the next message to send, so it opens no gap; it carries none.
                self._probe_due = False
                self.stats.probes += 1
                liveness.sent(self._loop.time())
                await call.write(encode_batch(self._header, queue[0][1] if queue else self._next_sequence, []))
                continue
            if not queue or self.held:
                self._idle = True
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            now = self._loop.time()
            release = queue[0][0]
            if release > now:
                # Later messages release later still (constant delay): sleep until the head is due.
                await asyncio.sleep(release - now)
                continue
            first_sequence = queue[0][1]
            frames: list[bytes] = []
            size = 0
            unacked = self._unacked
            while queue and queue[0][0] <= now and (not frames or size + queue[0][3] <= self._max_batch_bytes):
                release, sequence, frame, frame_size = queue.popleft()
                frames.append(frame)
                size += frame_size
                unacked.append((sequence, frame, frame_size, release))
            self.queued_bytes -= size
            self.unacked_bytes += size
            liveness.sent(now)
            await call.write(encode_batch(self._header, first_sequence, frames))
            self.stats.sent_batches += 1
            self.stats.sent_messages += len(frames)

    def _chunks(self, items: list[tuple[int, bytes, int, float]]) -> Iterator[list[tuple[int, bytes, int, float]]]:
        """Split (sequence, frame, size, release) items into runs below the batch size (at least one each)."""
        run: list[tuple[int, bytes, int, float]] = []
        size = 0
        for item in items:
            if run and size + item[2] > self._max_batch_bytes:
                yield run
                run, size = [], 0
            run.append(item)
            size += item[2]
        if run:
            yield run

