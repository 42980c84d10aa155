"""A synchronous client session on a deterministic world (``World.fixed``), for protocol tests.

Each operation is submitted to the server that owns its key (a RO-TX or SCAN to the session's
coordinator partition, or the one named), and the world runs until the reply arrives, so a test
reads like a client program while time, delays and every server are the world's. The reply is
returned as it came (``ErrorReply`` included); its session, if any, is merged into the caller's
(docs/protocol.md, "Sessions"). Several callers share one world.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    DeleteRequest,
    GetRequest,
    PutRequest,
    ReadTxRequest,
    ScanReply,
    ScanRequest,
    SnapshotRef,
    SwapRequest,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.server import PartitionServer
from okapikv.core.session import ClientSession
from okapikv.sim.world import Mailbox, World


class Caller:
    def __init__(self, world: World, dc: int = 0, coordinator: int = 0, *, limit_us: int = 5_000_000) -> None:
        """A fresh session in DC ``dc``; each call waits at most ``limit_us`` of world time for its reply."""
        if not isinstance(world.clients, Mailbox):
            raise ValueError("a Caller drives a deterministic world (World.fixed), whose client side is a Mailbox")
        self.world = world
        self.mailbox = world.clients
        self.dc = dc
        self.coordinator = coordinator
        self.limit_us = limit_us
        self.session = ClientSession(world.num_dcs)
        #: world time from the last request's submission to its reply
        self.last_latency_us = 0

    def request(self, request: ClientRequest, partition: int) -> ClientReply:
        """Submit ``request`` to this DC's ``partition`` and run the world until its reply."""
        world, mailbox = self.world, self.mailbox
        request_id = request.request_id
        started = world.now
        world.submit(self.dc * world.num_partitions + partition, request, 0)
        world.run_until(lambda: request_id in mailbox.replies, self.limit_us)
        reply, at = mailbox.replies.pop(request_id)
        self.last_latency_us = at - started
        session = getattr(reply, "session", None)
        if session is not None:
            self.session.merge(session)
        return reply

    def owner(self, key: bytes) -> PartitionServer:
        """The server of this DC that owns ``key``."""
        return self.world.servers[self.dc * self.world.num_partitions + self._partition(key)]

    def _partition(self, key: bytes) -> int:
        return partition_of(key, self.world.num_partitions)

    def put(self, key: bytes, value: bytes) -> ClientReply:
        request = PutRequest(self.mailbox.request_id(), key, value, self.session.current)
        return self.request(request, self._partition(key))

    def swap(self, key: bytes, value: bytes) -> ClientReply:
        request = SwapRequest(self.mailbox.request_id(), key, value, self.session.current)
        return self.request(request, self._partition(key))

    def delete(self, key: bytes) -> ClientReply:
        return self.request(DeleteRequest(self.mailbox.request_id(), key, self.session.current), self._partition(key))

    def get(self, key: bytes) -> ClientReply:
        return self.request(GetRequest(self.mailbox.request_id(), key, self.session.current), self._partition(key))

    def read_tx(self, keys: Iterable[bytes], coordinator: int | None = None) -> ClientReply:
        request = ReadTxRequest(self.mailbox.request_id(), tuple(keys), self.session.current)
        return self.request(request, self.coordinator if coordinator is None else coordinator)

    def scan(self, start: bytes, end: bytes, limit: int | None = None, coordinator: int | None = None,
             snapshot: SnapshotRef | None = None) -> ClientReply:
        request = ScanRequest(self.mailbox.request_id(), start, end, limit, self.session.current, snapshot)
        return self.request(request, self.coordinator if coordinator is None else coordinator)

    def scan_pages(self, start: bytes, end: bytes, limit: int | None = None, coordinator: int | None = None,
                   between: Callable[[], None] | None = None) -> list[ScanReply]:
        """A whole SCAN as a client pages it: each reply's ``resume`` and ``snapshot`` make the next
        request, until a reply has none (``between`` runs between pages). Every reply, in order."""
        pages: list[ScanReply] = []
        snapshot: SnapshotRef | None = None
        while True:
            reply = self.scan(start, end, limit, coordinator, snapshot=snapshot)
            assert isinstance(reply, ScanReply), reply
            pages.append(reply)
            if reply.resume is None:
                return pages
            start, snapshot = reply.resume, reply.snapshot
            if limit is not None:
                limit -= len(reply.items)
            if between is not None:
                between()
