"""One client connection of the RESP port: bytes in, commands run in order, replies out in batches.

``data_received`` parses what arrived (``okapikv.resp.parser``) and queues the commands; one worker
task per busy connection runs them one after the other (``okapikv.resp.commands.Executor``) and
writes their replies: every reply ready before the worker has to wait (for a forwarded operation, a
read-only transaction's slices, a durable commit) or has run out of commands leaves in one write,
so a pipeline of commands that complete at once costs one system call, however many it holds.

Bounds and deadlines (``okapikv.resp.limits.RespLimits``): a request over a bound, or bytes that are
not RESP, get one error reply after the commands before them and the connection is closed (what
Redis does with a protocol error); a request that stays half-sent for ``frame_timeout_s`` likewise.
Flow control: while the transport's buffer is above its high-water mark (``pause_writing``) the
worker runs nothing, and once ``max_queued_commands`` wait the connection stops reading, so a
client that sends without reading is pushed back by TCP instead of growing the server's memory.
Replication comes first: while ``PartitionNode.backlogged`` holds client work (the native port's
admission control) a connection waits as a native batch would, at most ``ADMISSION_MAX_WAIT_S``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from typing import TYPE_CHECKING, cast

from okapikv.resp import replies
from okapikv.resp.commands import Executor
from okapikv.resp.parser import make_parser
from okapikv.server.node import ADMISSION_MAX_WAIT_S, ADMISSION_RETRY_S

if TYPE_CHECKING:
    from okapikv.resp.service import RespService

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


class RespConnection(asyncio.Protocol):
    def __init__(self, service: RespService) -> None:
        self._service = service
        self._limits = service.limits
        self._parser = make_parser(service.limits, prefer_hiredis=service.prefer_hiredis)
        self._transport: asyncio.Transport | None = None
        self._queue: deque[list[bytes]] = deque()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._worker: asyncio.Task[None] | None = None
        self._failure: str | None = None  # a protocol error: answered after the queue, then close
        self._frame_timer: asyncio.TimerHandle | None = None
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
        self.executor = self._service.executor(self.id, _address(transport.get_extra_info("peername")),
                                               _address(transport.get_extra_info("sockname")))

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
            self._watch_frame(restart=bool(commands))
            if len(self._queue) > self._limits.max_queued_commands:
                self._pause_reading()
        if self._worker is None and (self._queue or self._failure is not None):
            self._worker = asyncio.get_running_loop().create_task(self._run())

    def eof_received(self) -> bool:
        """A client that half-closes after its last command still gets every reply (then the
        connection closes); a request it left incomplete is dropped."""
        self._eof = True
        return self._worker is not None  # False: nothing left to answer, close now

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._frame_timer is not None:
            self._frame_timer.cancel()
            self._frame_timer = None
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
                self._service.node.resp_refused += 1
                log.warning("RESP port: closing %s: %s", executor.peer, self._failure,
                            extra={"event": "resp_refused", "peer": executor.peer, "reason": self._failure})
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
        """Wait while replication lags (``PartitionNode.backlogged``), at most ``ADMISSION_MAX_WAIT_S``."""
        node = self._service.node
        if not node.backlogged():
            return
        node.admission_waits += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ADMISSION_MAX_WAIT_S
        while node.backlogged() and loop.time() < deadline:
            await asyncio.sleep(ADMISSION_RETRY_S)

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
        asyncio.get_running_loop().call_later(DRAIN_S, self.close)

    def _flush(self) -> None:
        if self._out and self._transport is not None:
            self._transport.write(b"".join(self._out) if len(self._out) > 1 else self._out[0])
        self._out.clear()
        self._out_bytes = 0

    # ------------------------------------------------------------------ bounds

    def _fail(self, reason: str) -> None:
        """Stop reading; the worker answers ``reason`` after the queued commands and closes."""
        self._failure = reason
        self._pause_reading()
        if self._frame_timer is not None:
            self._frame_timer.cancel()
            self._frame_timer = None

    def _watch_frame(self, *, restart: bool) -> None:
        """A half-sent request starts the frame deadline; a complete one stops it (``restart``: a
        request completed, so the one now half-sent is another, with a deadline of its own)."""
        partial = self._parser.partial
        if restart and self._frame_timer is not None:
            self._frame_timer.cancel()
            self._frame_timer = None
        if partial and self._frame_timer is None:
            self._frame_timer = asyncio.get_running_loop().call_later(self._limits.frame_timeout_s,
                                                                      self._frame_timed_out)
        elif not partial and self._frame_timer is not None:
            self._frame_timer.cancel()
            self._frame_timer = None

    def _frame_timed_out(self) -> None:
        self._frame_timer = None
        if self._transport is None or not self._parser.partial or self._failure is not None:
            return
        self._fail(f"Protocol error: a request stayed incomplete for {self._limits.frame_timeout_s:g} s")
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run())

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self._transport is not None and self._failure is None:
            self._reading_paused = False
            self._transport.resume_reading()
