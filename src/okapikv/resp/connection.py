"""One client connection of the RESP port: bytes in, commands run in order, replies out in batches.

``data_received`` parses what arrived (``okapikv.resp.parser``) and queues the commands; ``_drive``
starts them one after the other, each once its predecessor has its reply (``okapikv.resp.operations``
says why in order). A command that is one request to this server's core (``okapikv.resp.direct``:
GET, SET, DEL, INCR, ... on a key of this partition) goes to the port's ``CoreBatch`` with no task
or coroutine: the batch hands the requests of every connection of the loop turn to the core in one
call, and the reply comes back through ``deliver``, which starts the next command. Any other command
runs in a task of the connection (``okapikv.resp.commands.Executor``: forwarding, snapshot reads,
MULTI, the connection and server commands). Replies are written at the end of the batch's run (or
once ``FLUSH_BYTES`` wait): every reply ready by then leaves in one write, so a pipeline of commands
that complete at once costs one system call, however many it holds.

Bounds and deadlines: a request over a bound of ``okapikv.resp.limits.RespLimits``, or bytes that
are not RESP, get one error reply after the commands before them and the connection is closed (what
Redis does with a protocol error). The server's input guard (``okapikv.server.budgets``, shared with
the native port) counts every half-sent request against the server-wide input budget and closes,
with one error reply, a connection whose half-sent request does not fit, one whose request stays
half-sent past ``frame_timeout_ms``, one that completes no command within ``first_frame_timeout_ms``
of connecting and one idle for ``idle_timeout_ms`` (the ``[connections]`` settings).
Flow control: while the transport's buffer is above its high-water mark (``pause_writing``) no
command starts, and once ``max_queued_commands`` wait the connection stops reading, so a client
that sends without reading is pushed back by TCP instead of growing the server's memory.
Replication comes first: while the server's admission control holds client work
(``okapikv.server.admission``, the policy every port calls) a connection that has been idle holds
what it received, looking again every ``ADMISSION_RETRY_S``, as a native connection does.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from collections.abc import Callable, Sized
from typing import Any, Protocol, cast

from okapikv.client.aio import AsyncClient
from okapikv.core.messages import ClientReply, ErrorReply
from okapikv.errors import OkapiError
from okapikv.resp import replies
from okapikv.resp.batch import CoreBatch
from okapikv.resp.commands import Executor
from okapikv.resp.direct import Forward, plan
from okapikv.resp.limits import RespLimits
from okapikv.resp.parser import make_parser
from okapikv.server.admission import ADMISSION_RETRY_S
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
    def batch(self) -> CoreBatch: ...

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
        self._node = service.node
        self._batch = service.batch
        self._limits = service.limits
        self._parser = make_parser(service.limits, prefer_hiredis=service.prefer_hiredis)
        self._transport: asyncio.Transport | None = None
        self._queue: deque[list[bytes]] = deque()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._busy = False  # a command has started and has no reply yet
        self._answer: Callable[[ClientReply, bool], bytes] | None = None  # the core request's (direct)
        #: the forwarded command whose first attempt is out (``_send``): its plan, arguments, client
        self._forwarding: tuple[Forward, list[bytes], AsyncClient] | None = None
        self._touched = False  # the batch will flush this connection at the end of its run
        self._worker: asyncio.Task[None] | None = None  # runs an Executor command
        self._held_since: float | None = None  # when admission control began holding this connection
        self._retry_scheduled = False
        self._failure: str | None = None  # a protocol error: answered after the queue, then close
        self._failure_event = "resp_refused"
        self._finished = False  # the failure is answered, or QUIT: nothing more runs
        self._input: ConnectionInput | None = None  # this connection's share of the input guard
        self._reading_paused = False
        self._writing_paused = False
        self._draining = -1  # bytes still dropped after a protocol error (-1: not draining)
        self._eof = False  # the client has sent everything (half-closed): close once it is answered
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
        node = self._node
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
        if self._failure is not None or self._finished or self._transport is None:
            return
        commands, error = self._parser.feed(data)
        if commands:
            self._queue.extend(commands)
        if error is not None:
            self._fail(error)
            return
        connection_input = self._input
        assert connection_input is not None
        partial = self._parser.partial_bytes
        if not connection_input.progress(len(commands), partial):
            self._fail(connection_input.refuse_message(partial), event=BUDGET)
            return
        if len(self._queue) > self._limits.max_queued_commands:
            self._pause_reading()
        if not self._busy and self._queue:
            self._admit()

    def eof_received(self) -> bool:
        """A client that half-closes after its last command still gets every reply (then the
        connection closes); a request it left incomplete is dropped."""
        self._eof = True
        return self._busy or bool(self._queue)  # False: nothing left to answer, close now

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if not self._busy:
            self._drive()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._queue.clear()
        if self._input is not None:
            self._input.close()
        if self._worker is not None:
            self._worker.cancel()
        self._service.unregister(self)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    # ------------------------------------------------------------------ running commands

    def _admit(self) -> None:
        """An idle connection received commands: replication first (``okapikv.server.admission``),
        then run them."""
        admission = self._node.admission
        if admission.backlogged():
            self._held_since = admission.hold(self._held_since)
            if self._held_since is not None:
                if not self._retry_scheduled:
                    self._retry_scheduled = True
                    self._loop.call_later(ADMISSION_RETRY_S, self._retry_admit)
                return
        self._held_since = None
        self._drive()

    def _retry_admit(self) -> None:
        self._retry_scheduled = False
        if not self._busy and self._queue and self._transport is not None:
            self._admit()

    def _drive(self) -> None:
        """Start the queued commands in order until one waits for its reply (module docstring);
        once none is left, answer a protocol error or a half-close."""
        queue = self._queue
        executor = self.executor
        if executor is None or self._finished:
            return
        while queue and not self._busy:
            if self._writing_paused or self._transport is None:
                self._flush()
                return  # resume_writing drives again
            args = queue.popleft()
            if self._reading_paused and len(queue) <= self._limits.max_queued_commands // 2:
                self._resume_reading()
            try:
                planned = None if executor.in_block else plan(args, executor.operations, self._node.next_request_id)
                if planned is not None and not isinstance(planned, Forward):  # one core request
                    request, direct = planned
                    refused = self._batch.submit(request, self, direct.kind)
                    if refused is not None:
                        self._reply(direct.answer(refused, executor.resp3))
                        continue
                    self._busy = True
                    self._answer = direct.answer
                    return
                self._busy = True
                if isinstance(planned, Forward) and self._send(planned, args, executor):
                    return
                self._worker = self._loop.create_task(self._run(executor, args))
                return
            except Exception:  # a bug must cost one reply (this runs inside the core's effects too)
                log.exception("RESP port: command %r failed", args[0][:64])
                self._busy = False
                self._reply(replies.error("ERR internal error running this command (see the server log)"))
        if not self._busy:
            self._idle()

    def deliver(self, operation_id: int, kind: str, reply: ClientReply) -> None:
        """The core's reply to this connection's direct request (``okapikv.resp.batch``): answer
        it and start what follows. Called inside the node's handling of the core's effects, so
        it starts requests but never runs the core."""
        answer, self._answer = self._answer, None
        self._busy = False
        executor = self.executor
        if self._transport is None or answer is None or executor is None:
            return  # the connection is gone: a write taken is applied, its reply dropped
        try:
            if type(reply) is not ErrorReply:
                update = reply.session  # type: ignore[union-attr]
                state = executor.operations.state
                session = state.session
                if update.dt > session.dt or update.stable != session.stable:  # else it adds nothing
                    state.absorb(update)
            encoded = answer(reply, executor.resp3)
        except Exception:  # a bug must cost one reply, never the core's other replies
            log.exception("RESP port: answering %s failed", kind)
            encoded = replies.error("ERR internal error running this command (see the server log)")
        self._reply(encoded)
        if self._queue or self._failure is not None or self._eof:  # else _drive would find nothing to do
            self._drive()

    def _send(self, forward: Forward, args: list[bytes], executor: Executor) -> bool:
        """Send the first attempt of a forwarded command (``okapikv.resp.direct``); False when the
        client is not ready for it (the Executor runs the command). The connection itself is the
        attempt's waiter (``okapikv.client.aio.Waiter``): the pipeline hands it the result as the
        result batch arrives (``set_result``), or the attempt's failure (``set_exception``)."""
        client = executor.operations.forwarding
        assert client is not None
        self._forwarding = forward, args, client
        try:
            if client.attempt(forward.kind, forward.key, forward.value, self._loop.time(), self):
                return True
        except OkapiError:  # too large for a message: the Executor answers why
            pass
        self._forwarding = None
        return False

    def done(self) -> bool:
        """Whether no forwarded command's attempt is waiting (``okapikv.client.aio.Waiter``)."""
        return self._forwarding is None

    def set_result(self, result: Any) -> None:
        """The result of the forwarded command's attempt: its reply, then the next command; an
        error result goes to the Executor as a failure does (``set_exception``). Never raises: it
        runs inside the forwarding pipeline's handling of a result batch."""
        pending, self._forwarding = self._forwarding, None
        executor = self.executor
        if pending is None or self._transport is None or executor is None:
            return  # the connection is gone: a write sent is applied, its reply dropped
        forward, args, client = pending
        try:
            encoded = forward.answer(client.reply(forward.kind, result), executor.resp3)
        except Exception:  # an error result: the Executor sends it again (with the client's retries)
            self._worker = self._loop.create_task(self._run(executor, args))
            return
        self._busy = False
        self._reply(encoded)
        try:
            self._drive()
        except Exception:  # _drive answers a command's own failure; anything else must not reach the pipeline
            log.exception("RESP port: starting the commands after a forwarded reply failed")

    def set_exception(self, exception: BaseException) -> None:
        """The forwarded command's attempt failed (a broken or timed-out pipeline): the Executor
        runs the command, with the client's retries and errors."""
        pending, self._forwarding = self._forwarding, None
        executor = self.executor
        if pending is None or self._transport is None or executor is None:
            return
        self._worker = self._loop.create_task(self._run(executor, pending[1]))

    async def _run(self, executor: Executor, args: list[bytes]) -> None:
        """Run one command of the Executor's, then drive the rest."""
        try:
            reply = await executor.execute(args)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must cost one reply, never the server or the connection's order
            log.exception("RESP port: command %r failed", args[0][:64])
            reply = replies.error("ERR internal error running this command (see the server log)")
        self._worker = None
        self._busy = False
        self._reply(reply)
        if executor.closing:  # QUIT
            self._finished = True
            self._queue.clear()
            self._flush()
            self._drain_and_close()
            return
        self._drive()

    def _reply(self, reply: bytes) -> None:
        self._out.append(reply)
        self._out_bytes += len(reply)
        if self._out_bytes >= FLUSH_BYTES:
            self._flush()
        elif not self._touched:
            self._touched = True
            self._batch.touch(self)

    def _idle(self) -> None:
        """Every received command is answered: a protocol error found after them is answered now
        and the connection closes; a client that half-closed is closed."""
        if self._failure is not None:
            self._finished = True
            executor = self.executor
            assert executor is not None
            if self._failure_event == "resp_refused":  # the input guard counts its own
                self._node.resp_refused += 1
            log.warning("RESP port: closing %s: %s", executor.peer, self._failure,
                        extra={"event": self._failure_event, "peer": executor.peer, "reason": self._failure})
            self._out.append(replies.error(f"ERR {self._failure}"))
            self._flush()
            self._drain_and_close()
        elif self._eof:
            self._flush()
            self.close()

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

    def flush(self) -> None:
        """Write the replies waiting (the batch's end of run)."""
        self._touched = False
        self._flush()

    def _flush(self) -> None:
        if self._out and self._transport is not None:
            self._transport.write(b"".join(self._out) if len(self._out) > 1 else self._out[0])
        self._out.clear()
        self._out_bytes = 0

    # ------------------------------------------------------------------ bounds

    def _fail(self, reason: str, *, event: str = "resp_refused") -> None:
        """Stop reading; the commands queued run, then ``reason`` is answered and the connection
        closes. ``event``: what the log line says (``resp_refused``, counted in Stats, or the input
        guard's reason, which the guard counts)."""
        self._failure, self._failure_event = reason, event
        self._pause_reading()
        if self._input is not None:
            self._input.close()  # its partial request no longer holds budget; no more deadlines
        if not self._busy:
            self._drive()

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
