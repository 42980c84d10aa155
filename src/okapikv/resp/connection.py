"""One client connection of the RESP port: bytes in, commands run in order, replies out in batches.

``data_received`` parses what arrived (``okapikv.resp.parser``) and queues the commands; one worker
task per busy connection runs them one after the other (``okapikv.resp.commands.Executor``) and
writes their replies: every reply ready before the worker has to wait (for a forwarded operation, a
read-only transaction's slices, a durable commit) or has run out of commands leaves in one write,
so a pipeline of commands that complete at once costs one system call, however many it holds.

Bounds and deadlines: a request over a bound of ``okapikv.resp.limits.RespLimits``, or bytes that
are not RESP, get one error reply after the commands before them and the connection is closed (what
Redis does with a protocol error). The server's input guard (``okapikv.server.budgets``, shared with
the native port) counts every half-sent request against the server-wide input budget and closes,
with one error reply, a connection whose half-sent request does not fit, one whose request stays
half-sent past ``frame_timeout_ms``, one that completes no command within ``first_frame_timeout_ms``
of connecting and one idle for ``idle_timeout_ms`` (the ``[connections]`` settings).
Flow control: while the transport's buffer is above its high-water mark (``pause_writing``) the
worker runs nothing, and once ``max_queued_commands`` wait the connection stops reading, so a
client that sends without reading is pushed back by TCP instead of growing the server's memory.
Replication comes first: while the server's admission control holds client work
(``okapikv.server.admission``, the policy every port calls) a connection waits before it runs
what it received, as a native batch would.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from collections.abc import Sized
from typing import Protocol, cast

from okapikv.resp import replies
from okapikv.resp.commands import Executor
from okapikv.resp.limits import RespLimits
from okapikv.resp.parser import make_parser
from okapikv.server.budgets import BUDGET, ConnectionInput
from okapikv.server.node import PartitionNode
from okapikv.tcp import set_liveness_options

log = logging.getLogger("okapikv.server")

#: replies are written once this many bytes wait, even in the middle of a pipeline
FLUSH_BYTES = 64 << 10
#: after a protocol error, what the client still sends is read and dropped for this long (or up to
#: the request limit) before the connection closes: closing with unread bytes makes the kernel
#: reset the connection, and a reset can destroy the error reply before the client reads it
DRAIN_S = 1.0


def _address(value: object) -> str:
    if isinstance(value, tuple) and len(value) >= 2:
        host = str(value[0])
        return f"[{host}]:{value[1]}" if ":" in host else f"{host}:{value[1]}"
    return str(value)


class Host(Protocol):
    """What a connection needs of its port (``okapikv.resp.service.RespService``)."""

    @property
    def node(self) -> PartitionNode: ...

    @property
    def limits(self) -> RespLimits: ...

    @property
    def prefer_hiredis(self) -> bool: ...

    @property
    def connections(self) -> Sized: ...

    def register(self, connection: RespConnection) -> int: ...

    def unregister(self, connection: RespConnection) -> None: ...

    def executor(self, connection_id: int, peer: str, local: str) -> Executor: ...


class RespConnection(asyncio.Protocol):
    def __init__(self, service: Host) -> None:
        # Made by the loop's protocol factory, so inside the loop: held once, since every
        # ``asyncio.get_running_loop()`` costs a ``getpid`` system call (it checks for a fork).
        self._loop = asyncio.get_running_loop()
        self._service = service
        self._limits = service.limits
        self._parser = make_parser(service.limits, prefer_hiredis=service.prefer_hiredis)
        self._transport: asyncio.Transport | None = None
        self._queue: deque[list[bytes]] = deque()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._worker: asyncio.Task[None] | None = None
        self._failure: str | None = None  # a protocol error: answered after the queue, then close
        self._failure_event = "resp_refused"
        self._input: ConnectionInput | None = None  # this connection's share of the input guard
        self._reading_paused = False
        self._draining = -1  # bytes still dropped after a protocol error (-1: not draining)
        self._eof = False  # the client has sent everything (half-closed): close once it is answered
        self._writable: asyncio.Future[None] | None = None  # set while the transport is full
        self.executor: Executor | None = None
        self.id = 0

    # ------------------------------------------------------------------ transport events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if len(self._service.connections) >= self._limits.max_connections:
            self._transport.write(replies.error("ERR max number of clients reached"))
            self._transport.close()
            self._transport = None
            return
        self.id = self._service.register(self)
        peer = _address(transport.get_extra_info("peername"))
        self.executor = self._service.executor(self.id, peer, _address(transport.get_extra_info("sockname")))
        node = self._service.node
        self._input = node.input_guard.open(f"resp {peer}", self._expired)
        settings = node.config.connections
        set_liveness_options(sock, keepalive_s=settings.tcp_keepalive_ms / 1000,
                             user_timeout_s=settings.tcp_user_timeout_ms / 1000)

    def data_received(self, data: bytes) -> None:
        if self._draining >= 0:
            self._draining -= len(data)
            if self._draining < 0:
                self.close()
            return
        if self._failure is not None or self._transport is None:
            return
        commands, error = self._parser.feed(data)
        if commands:
            self._queue.extend(commands)
        if error is not None:
            self._fail(error)
        else:
            connection_input = self._input
            assert connection_input is not None
            partial = self._parser.partial_bytes
            if not connection_input.progress(len(commands), partial):
                self._fail(connection_input.refuse_message(partial), event=BUDGET)
            elif len(self._queue) > self._limits.max_queued_commands:
                self._pause_reading()
        if self._worker is None and self._queue:
            self._worker = self._loop.create_task(self._run())

    def eof_received(self) -> bool:
        """A client that half-closes after its last command still gets every reply (then the
        connection closes); a request it left incomplete is dropped."""
        self._eof = True
        return self._worker is not None  # False: nothing left to answer, close now

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._input is not None:
            self._input.close()
        if self._worker is not None:
            self._worker.cancel()
        self.resume_writing()
        self._service.unregister(self)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    # ------------------------------------------------------------------ the worker

    async def _run(self) -> None:
        executor = self.executor
        assert executor is not None
        queue = self._queue
        try:
            await self._admit()
            while queue:
                if self._writable is not None:
                    self._flush()
                    await self._writable
                args = queue.popleft()
                try:
                    reply = await executor.execute(args)
                except asyncio.CancelledError:
                    raise
                except Exception:  # a bug must cost one reply, never the server or the connection's order
                    log.exception("RESP port: command %r failed", args[0][:64])
                    reply = replies.error("ERR internal error running this command (see the server log)")
                self._out.append(reply)
                self._out_bytes += len(reply)
                if executor.closing:  # QUIT
                    self._flush()
                    self._drain_and_close()
                    return
                if self._out_bytes >= FLUSH_BYTES:
                    self._flush()
                if self._reading_paused and len(queue) <= self._limits.max_queued_commands // 2:
                    self._resume_reading()
            if self._failure is not None:
                if self._failure_event == "resp_refused":  # the input guard counts its own
                    self._service.node.resp_refused += 1
                log.warning("RESP port: closing %s: %s", executor.peer, self._failure,
                            extra={"event": self._failure_event, "peer": executor.peer, "reason": self._failure})
                self._out.append(replies.error(f"ERR {self._failure}"))
                self._flush()
                self._drain_and_close()
                return
            self._flush()
            if self._eof:
                self.close()
        finally:
            self._worker = None

    async def _admit(self) -> None:
        """Wait while replication lags (``okapikv.server.admission``)."""
        admission = self._service.node.admission
        if admission.backlogged():
            await admission.wait()

    def _drain_and_close(self) -> None:
        """Close once the error reply is out (module docstring, ``DRAIN_S``): half-close now, drop
        what still arrives, close at the deadline or when the client closes."""
        transport = self._transport
        if transport is None:
            return
        if not transport.can_write_eof():  # TLS: no half-close
            self.close()
            return
        transport.write_eof()
        self._draining = self._limits.max_request_bytes
        self._reading_paused = False
        transport.resume_reading()
        self._loop.call_later(DRAIN_S, self.close)

    def _flush(self) -> None:
        if self._out and self._transport is not None:
            self._transport.write(b"".join(self._out) if len(self._out) > 1 else self._out[0])
        self._out.clear()
        self._out_bytes = 0

    # ------------------------------------------------------------------ bounds

    def _fail(self, reason: str, *, event: str = "resp_refused") -> None:
        """Stop reading; the worker answers ``reason`` after the queued commands and closes.
        ``event``: what the log line says (``resp_refused``, counted in Stats, or the input guard's
        reason, which the guard counts)."""
        self._failure, self._failure_event = reason, event
        self._pause_reading()
        if self._input is not None:
            self._input.close()  # its partial request no longer holds budget; no more deadlines
        if self._worker is None:
            self._worker = self._loop.create_task(self._run())

    def _expired(self, event: str, reason: str) -> None:
        """The input guard's sweep found a deadline passed (``okapikv.server.budgets``)."""
        if self._transport is not None and self._failure is None and self._draining < 0:
            self._fail(reason, event=event)

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self._transport is not None and self._failure is None:
            self._reading_paused = False
            self._transport.resume_reading()
