"""The core requests of a RESP port's connections, handed to the core together once per loop turn.

Each connection sends its commands one at a time, each with the session its predecessor's reply
left (``okapikv.resp.operations``). Many connections do so at once: the requests they make in one
turn of the event loop (``okapikv.resp.direct``) gather here and go to the core in one call when the
turn's callbacks are done (``PartitionNode.run_core``, as the native port hands a client batch:
one replication batch per peer, one clock reading, one commit stage for all of them). A reply the
core gives at once reaches its connection inside that call (``RespConnection.deliver``, through the
node's reply table), and the connection's next command joins the next call of the same run; a
reply the core holds (a durable write waiting for its group, a read waiting for stability) arrives
later the same way. At the end of the run the run's commit group is written (a durable server's, on
the event loop: ``GroupCommitter.commit_due``), releasing the replies it held, and every connection
that received a reply writes what it has, so each connection costs one write per run, however many
of its pipelined commands ran, reads and writes together.

Bounds: one core call takes at most ``MAX_CALL`` requests, and one run makes at most
``MAX_CALLS`` calls before it lets the loop serve I/O and timers (the rest wait for the next turn),
so no connection's pipeline holds the loop for longer than that.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from okapikv.core.messages import ClientReply, ClientRequest, ErrorReply, Message
from okapikv.server.node import PartitionNode

#: the most requests one core call takes (a larger run is split: the core's handling of a call
#: must stay short, as a native batch's does)
MAX_CALL = 256
#: the most core calls of one run before the loop serves others (I/O, timers, the peers)
MAX_CALLS = 64


class Connection(Protocol):
    """What the batch asks of a connection (``okapikv.resp.connection.RespConnection``)."""

    def deliver(self, operation_id: int, kind: str, reply: ClientReply) -> None: ...

    def flush(self) -> None: ...


class CoreBatch:
    """Shared by the connections of one server's RESP port (module docstring)."""

    __slots__ = ("_node", "_loop", "_pending", "_touched", "_scheduled", "calls", "requests")

    def __init__(self, node: PartitionNode, loop: asyncio.AbstractEventLoop) -> None:
        self._node = node
        self._loop = loop
        self._pending: list[Message] = []
        self._touched: list[Connection] = []  # connections with replies to write at the end of the run
        self._scheduled = False
        self.calls = 0  # core calls made, and the requests they carried (tests, figures)
        self.requests = 0

    def submit(self, request: ClientRequest, connection: Connection, kind: str) -> ErrorReply | None:
        """Queue ``request`` for the run at the end of this turn, its reply for ``connection``;
        the server's refusal instead, at once, when it refuses it before the core (a full disk)."""
        host = self._node.host
        refused = host.refusal(request)
        if refused is not None:
            return refused
        host.expect(request.request_id, (connection, request.request_id, kind, time.perf_counter()))
        self._pending.append(request)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run)
        return None

    def touch(self, connection: Connection) -> None:
        """``connection`` has replies to write: at the end of the run (once per connection: it
        remembers that it was touched, ``RespConnection.flush`` forgets)."""
        self._touched.append(connection)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run)

    def _run(self) -> None:
        node = self._node
        calls = 0
        try:
            while self._pending and calls < MAX_CALLS:
                pending = self._pending
                if len(pending) > MAX_CALL:
                    batch, self._pending = pending[:MAX_CALL], pending[MAX_CALL:]
                else:
                    batch, self._pending = pending, []
                calls += 1
                self.requests += len(batch)
                node.run_core(batch)  # the replies given at once reach their connections in here
        finally:  # (a failure past the core's own guard is logged by the loop; the port goes on)
            self.calls += calls
            node.commit_due()  # the run's commit group: the replies it holds join this run's writes
            touched, self._touched = self._touched, []
            for connection in touched:
                connection.flush()
            if self._pending or self._touched:
                self._loop.call_soon(self._run)
            else:
                self._scheduled = False


__all__ = ["MAX_CALL", "MAX_CALLS", "CoreBatch"]
