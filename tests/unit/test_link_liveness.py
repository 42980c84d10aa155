"""Link liveness (``okapikv.server.liveness``): a silent connection is probed, then declared dead;
answers, however late within the timeout, and a stalled event loop never make it so. Then the whole
outgoing link over the native port against a receiver that goes silent without closing: it
reconnects and resends, losing and duplicating nothing."""

from __future__ import annotations

import asyncio
import time

import grpc
import grpc.aio

from okapikv.cluster.connections import ConnectionSettings
from okapikv.core.messages import Heartbeat, ServerId
from okapikv.server.inbound import SequenceTable
from okapikv.server.links import OutgoingLink
from okapikv.server.liveness import LinkLiveness, LivenessSettings, Verdict
from okapikv.wire import convert
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.frames import PEER_MAGIC, FrameDecoder, encode_frame

SETTINGS = LivenessSettings(probe_s=1.0, ack_timeout_s=4.0)
STEP = SETTINGS.check_interval_s


def _run(liveness: LinkLiveness, start: float, end: float) -> list[tuple[float, Verdict]]:
    """Check every interval from ``start`` to ``end``; the verdicts other than ALIVE, with times."""
    verdicts = []
    now = start
    while now <= end + 1e-9:
        verdict = liveness.check(now)
        if verdict is not Verdict.ALIVE:
            verdicts.append((round(now, 3), verdict))
        now += STEP
    return verdicts


def test_a_link_that_is_answered_is_never_probed_nor_dead() -> None:
    liveness = LinkLiveness(SETTINGS, 0.0)
    now = 0.0
    for _ in range(400):  # a message every 5 ms, an acknowledgement every 50 ms, for 20 s
        liveness.sent(now)
        if round(now * 1000) % 50 == 0:
            liveness.heard(now + 0.003, outstanding=True)
        now += 0.005
        if round(now * 1000) % 250 == 0:
            assert liveness.check(now) is Verdict.ALIVE


def test_outstanding_messages_without_an_answer_are_probed_then_dead() -> None:
    liveness = LinkLiveness(SETTINGS, 0.0)
    liveness.heard(0.0, outstanding=False)
    liveness.sent(0.5)  # written, never answered
    verdicts = _run(liveness, STEP, 6.0)
    # silent since 0.0: probes every second from 1.0, dead 4 s after the unanswered write
    assert verdicts[:3] == [(1.0, Verdict.PROBE), (2.0, Verdict.PROBE), (3.0, Verdict.PROBE)]
    assert [when for when, verdict in verdicts if verdict is Verdict.DEAD][0] == 4.5
    assert all(verdict is Verdict.PROBE for when, verdict in verdicts if when < 4.5)


def test_a_late_answer_within_the_timeout_keeps_the_link() -> None:
    liveness = LinkLiveness(SETTINGS, 0.0)
    liveness.sent(0.0)
    assert Verdict.DEAD not in [verdict for _, verdict in _run(liveness, STEP, 3.75)]
    liveness.heard(3.9, outstanding=True)  # 3.9 s late, still below 4 s: alive, waiting afresh
    verdicts = _run(liveness, 4.0, 7.75)
    assert Verdict.DEAD not in [verdict for _, verdict in verdicts]
    assert verdicts[0] == (5.0, Verdict.PROBE)
    assert liveness.check(7.9) is Verdict.DEAD


def test_an_idle_link_probes_and_is_dead_only_when_the_probe_goes_unanswered() -> None:
    liveness = LinkLiveness(SETTINGS, 0.0)
    assert _run(liveness, STEP, 0.75) == []
    assert liveness.check(1.0) is Verdict.PROBE
    liveness.sent(1.0)  # the probe
    liveness.heard(1.1, outstanding=False)  # answered: idle and fine
    assert _run(liveness, 1.25, 2.0) == []
    assert liveness.check(2.25) is Verdict.PROBE
    liveness.sent(2.25)  # this probe is never answered
    verdicts = _run(liveness, 2.5, 7.0)
    assert [when for when, verdict in verdicts if verdict is Verdict.DEAD][0] == 6.25


def test_a_stalled_event_loop_gives_no_verdict() -> None:
    """Answers may wait unread in the socket while this server's loop was blocked: the first check
    after a stall passes, the next one (on time) judges."""
    liveness = LinkLiveness(SETTINGS, 0.0)
    liveness.sent(0.0)
    assert liveness.check(0.25) is Verdict.ALIVE
    assert liveness.check(9.0) is Verdict.ALIVE  # the loop was blocked for 8.75 s
    liveness.heard(9.01, outstanding=True)  # the acknowledgements read right after
    assert liveness.check(9.25) is Verdict.ALIVE


def test_reset_forgets_the_silence_of_a_held_link() -> None:
    liveness = LinkLiveness(SETTINGS, 0.0)
    liveness.sent(0.0)
    for step in range(1, 40):  # held for 10 s: the watcher resets instead of checking
        liveness.reset(step * STEP)
    assert _run(liveness, 10.0, 11.0) == [(10.75, Verdict.PROBE)]  # silent for a probe interval since


# ---------------------------------------------------------------- the link, over the native port


class SilentReceiver:
    """A native-port peer receiver (``PEER_MAGIC``, ``PeerBatch`` in, ``LinkAck`` out) whose first
    connection goes silent after ``answer_first`` batches: it reads on but answers nothing and
    never closes, as if the network dropped every packet. Later connections answer normally."""

    def __init__(self, answer_first: int) -> None:
        self.links = SequenceTable()
        self.handled: list[int] = []
        self.connections = 0
        self.connected_at: list[float] = []
        self.answer_first = answer_first
        self.silent_since: float | None = None
        self.probes = 0
        self._writers: list[asyncio.StreamWriter] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.connected_at.append(asyncio.get_running_loop().time())
        self._writers.append(writer)
        decoder = FrameDecoder(expect_magic=True, preambles=(PEER_MAGIC,))
        answered = 0
        while data := await reader.read(1 << 16):
            for frame in decoder.feed(data):
                if number == 1 and answered >= self.answer_first:
                    if self.silent_since is None:
                        self.silent_since = asyncio.get_running_loop().time()
                    continue  # a black hole: what was sent is lost, nothing comes back
                batch = pb.PeerBatch.FromString(frame)
                self.probes += not batch.messages
                source = ServerId(batch.source.dc, batch.source.partition)
                skip = self.links.admit(source, batch.incarnation, batch.first_sequence, len(batch.messages))
                assert skip is not None, "a gap in the message numbers"
                self.handled += [message.heartbeat.timestamp for message in batch.messages[skip:]]
                last = self.links.handled(source, batch.incarnation, batch.first_sequence, len(batch.messages))
                writer.write(encode_frame(pb.LinkAck(received=last).SerializeToString()))
                answered += 1

    def close(self) -> None:
        for writer in self._writers:
            writer.transport.abort()


async def _cluster_info_server(native_port: int) -> tuple[grpc.aio.Server, int]:
    """A gRPC server answering only ClusterInfo, advertising ``native_port`` (how a link finds it)."""

    async def cluster_info(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return pb.ClusterInfoResponse(native_port=native_port).SerializeToString()

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("okapikv.KeyValue", {
        "ClusterInfo": grpc.unary_unary_rpc_method_handler(cluster_info),
    }),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


async def _heartbeats(link: OutgoingLink, first: int, last: int, pause_s: float) -> None:
    for timestamp in range(first, last + 1):
        frame = convert.frame_peer_message(convert.encode_peer_message(Heartbeat(ServerId(0, 0), timestamp)))
        link.enqueue(frame, 16)
        await asyncio.sleep(pause_s)


async def _native_link(receiver: SilentReceiver, settings: ConnectionSettings) -> tuple[OutgoingLink, list[object]]:
    native = await asyncio.start_server(receiver.serve, "127.0.0.1", 0)
    info, port = await _cluster_info_server(native.sockets[0].getsockname()[1])
    link = OutgoingLink(destination=ServerId(1, 0), label="b/0", address=f"127.0.0.1:{port}",
                        header=convert.batch_header("c", ServerId(0, 0), 5), delay_s=0.0,
                        max_batch_bytes=1 << 20, max_message_bytes=4 << 20, native=True, connections=settings)
    link.start()
    return link, [native, info]


async def _stop(link: OutgoingLink, receiver: SilentReceiver, servers: list[object]) -> None:
    await link.close()
    receiver.close()
    native, info = servers
    native.close()  # type: ignore[attr-defined]
    await info.stop(None)  # type: ignore[attr-defined]


def test_a_native_link_whose_receiver_goes_silent_reconnects_and_resends() -> None:
    settings = ConnectionSettings(link_probe_ms=200, link_ack_timeout_ms=800)

    async def scenario() -> tuple[OutgoingLink, SilentReceiver]:
        receiver = SilentReceiver(answer_first=10)
        link, servers = await _native_link(receiver, settings)
        try:
            await _heartbeats(link, 1, 60, pause_s=0.02)
            for _ in range(200):
                if receiver.handled[-1:] == [60] and not link.unacked:
                    break
                await asyncio.sleep(0.02)
        finally:
            await _stop(link, receiver, servers)
        return link, receiver

    link, receiver = asyncio.run(scenario())
    assert receiver.handled == list(range(1, 61))  # nothing lost, nothing handled twice
    assert receiver.connections == 2 and link.stats.dead == 1
    assert receiver.silent_since is not None
    detected_after = receiver.connected_at[1] - receiver.silent_since
    assert 0.8 <= detected_after < 0.8 + 1.0, detected_after  # the timeout, plus backoff and slack


def test_an_idle_or_slowly_answered_link_is_not_declared_dead() -> None:
    """Idle for 2 s (answered probes keep it alive), then a blocked event loop for longer than the
    timeout while messages are outstanding: the link keeps its connection."""
    settings = ConnectionSettings(link_probe_ms=200, link_ack_timeout_ms=800)

    async def scenario() -> tuple[OutgoingLink, SilentReceiver]:
        receiver = SilentReceiver(answer_first=1 << 30)
        link, servers = await _native_link(receiver, settings)
        try:
            await _heartbeats(link, 1, 5, pause_s=0.01)
            await asyncio.sleep(2.0)  # idle
            await _heartbeats(link, 6, 10, pause_s=0.0)
            time.sleep(1.5)  # this loop is stalled: the answers wait in the socket
            await asyncio.sleep(1.0)
        finally:
            await _stop(link, receiver, servers)
        return link, receiver

    link, receiver = asyncio.run(scenario())
    assert receiver.handled == list(range(1, 11))
    assert link.stats.dead == 0 and receiver.connections == 1
    assert receiver.probes >= 3 and link.stats.probes == receiver.probes
