"""A RESP connection's causal session, and where each of its operations runs.

One connection is one causal session of the server's DC, the same session the client library keeps
(``okapikv.client.operations.SessionState``: the stable vector and ``dt``, Okapi section 3.2): every
operation carries it and every reply's session is merged into it, so the guarantees of a client
library session (read-your-writes, monotonic reads, writes-follow-reads, causal snapshots) hold for
the commands of one connection. The connection runs its commands one after the other, each with the
session its predecessor's reply left, which is Redis's own order of a connection's commands and what
causality needs: a pipelined write must depend on what the pipelined read before it returned.

Where an operation runs, the server that holds the connection deciding (so a Redis client needs
neither routing nor cluster mode):

- a single-key operation on a key of this server's partition, a read-only transaction (MGET,
  EXISTS of several keys, MULTI/EXEC) and a range read (SCAN, KEYS, OKAPI.RANGE): on this server's
  core, through ``PartitionNode.call``, the path the gRPC servicers use; the core coordinates
  snapshot reads over the DC's partitions itself (RO-TX and SCAN slices);
- a single-key operation on a key of another partition: forwarded to that partition's server by the
  server's own client (``okapikv.client.aio.AsyncClient``, a fork that continues the session),
  over the native port, with the client's retries (at-least-once, as for any client).

``export`` and ``adopt`` move the session between connections and DCs as a token
(``okapikv.resp.tokens``), by the client library's failover rule (``okapikv.core.session.adopt``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple, TypeVar

from okapikv.client.aio import AsyncClient
from okapikv.client.operations import SCAN_RESTARTS, Expiry, SessionState
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    DeleteRequest,
    ErrorReply,
    ExpireReply,
    ExpireRequest,
    GetReply,
    GetRequest,
    IncrReply,
    IncrRequest,
    PutRequest,
    ReadTxReply,
    ReadTxRequest,
    ScanReply,
    ScanRequest,
    SwapReply,
    SwapRequest,
    WriteReply,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.session import adopt
from okapikv.errors import OkapiError
from okapikv.resp.tokens import SessionToken, encode_token
from okapikv.server.node import PartitionNode
from okapikv.wire.convert import expires

T = TypeVar("T")
#: how often a waiting adoption looks at this server's stable vector again
ADOPT_POLL_S = 0.005


class WantedExpiry(NamedTuple):
    """An expiry a command asks for: ``ttl_ms`` from now, or ``at_ms`` a Unix time, or ``persist``."""

    ttl_ms: int = 0
    at_ms: int = 0
    persist: bool = False


class CommandError(Exception):
    """A command failed and changed nothing it reports; ``str``: the RESP error (``ERR ...``)."""


class SessionOperations:
    """The operations of one connection's session (module docstring)."""

    __slots__ = ("_node", "_forwarder", "_fork", "_partitions", "_here", "state")

    def __init__(self, node: PartitionNode, forwarder: Callable[[], Awaitable[AsyncClient]]) -> None:
        """``forwarder``: the server's client of its own DC, connected (made on first use)."""
        self._node = node
        self._forwarder = forwarder
        self._fork: AsyncClient | None = None
        self._partitions = node.config.partitions
        self._here = node.id.partition
        self.state = SessionState(node.num_dcs, scalar=node.core.protocol.scalar)

    @property
    def forwarding(self) -> AsyncClient | None:
        """The session's client for keys of the DC's other partitions, which ``okapikv.resp.direct``
        sends through; None for a session that has sent no key of another partition."""
        return self._fork

    # ------------------------------------------------------------------ single keys

    async def get(self, key: bytes) -> bytes | None:
        if self.local(key):
            reply = await self._call(GetRequest(self._node.next_request_id(), key, self.state.current))
            assert type(reply) is GetReply
            return reply.value
        return await self._forward(lambda client: client.get(key))

    async def put(self, key: bytes, value: bytes, expiry: WantedExpiry | None = None) -> bool:
        """True if a value existed before. ``expiry``: the key's (forwarded, a Unix time becomes
        the time left by this server's clock)."""
        if self.local(key):
            expiring = expires(expiry.ttl_ms, expiry.at_ms) if expiry is not None else 0
            reply = await self._call(PutRequest(self._node.next_request_id(), key, value, self.state.current,
                                                expiring))
            assert type(reply) is WriteReply
            return reply.found
        ttl: float | None = None
        if expiry is not None:
            ttl_ms = expiry.ttl_ms or max(expiry.at_ms - time.time_ns() // 1_000_000, 1)
            ttl = ttl_ms / 1000
        return await self._forward(lambda client: client.put(key, value, ttl))

    async def expire(self, key: bytes, wanted: WantedExpiry | None) -> Expiry:
        """The key's value and time to live, after writing the ``wanted`` expiry when given."""
        if self.local(key):
            expiring = None if wanted is None else 0 if wanted.persist else expires(wanted.ttl_ms, wanted.at_ms)
            reply = await self._call(ExpireRequest(self._node.next_request_id(), key, expiring, self.state.current))
            assert type(reply) is ExpireReply
            return Expiry(reply.value, reply.ttl_us, reply.changed)
        if wanted is None:
            return await self._forward(lambda client: client.expire(key))
        return await self._forward(lambda client: client.expire(key, ttl_ms=wanted.ttl_ms, at_ms=wanted.at_ms,
                                                                persist=wanted.persist))

    async def swap(self, key: bytes, value: bytes) -> bytes | None:
        if self.local(key):
            reply = await self._call(SwapRequest(self._node.next_request_id(), key, value, self.state.current))
            assert type(reply) is SwapReply
            return reply.old_value
        return await self._forward(lambda client: client.swap(key, value))

    async def incr(self, key: bytes, by: int) -> int:
        """The counter's value after adding ``by`` (``okapikv.core.counters``)."""
        if self.local(key):
            reply = await self._call(IncrRequest(self._node.next_request_id(), key, by, self.state.current))
            assert type(reply) is IncrReply
            return reply.value
        return await self._forward(lambda client: client.incr(key, by))

    async def delete(self, key: bytes) -> bool:
        if self.local(key):
            reply = await self._call(DeleteRequest(self._node.next_request_id(), key, self.state.current))
            assert type(reply) is WriteReply
            return reply.found
        return await self._forward(lambda client: client.delete(key))

    # ------------------------------------------------------------------ snapshot reads (this server coordinates)

    async def read_tx(self, keys: list[bytes]) -> list[bytes | None]:
        """The values of ``keys`` (distinct) from one causal snapshot of the DC."""
        reply = await self._call(ReadTxRequest(self._node.next_request_id(), tuple(keys), self.state.current))
        assert type(reply) is ReadTxReply
        return list(reply.values)

    async def scan(self, start: bytes, end: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        """The first ``limit`` pairs with start <= key <= end, from one causal snapshot.

        The core answers a range in pages (at most ``max_scan_items`` pairs, and a page that
        examined many deleted keys may hold none) that name where the rest starts and the snapshot
        they read (docs/operations.md, "Read limits and paging"): the pages are read here at that
        snapshot until the limit or the range is done. A page whose snapshot is gone (ABORTED)
        starts the read over, at most ``SCAN_RESTARTS`` times, as the client library does."""
        items: list[tuple[bytes, bytes]] = []
        restarts = SCAN_RESTARTS
        next_start, snapshot = start, None
        while next_start <= end and len(items) < limit:
            request = ScanRequest(self._node.next_request_id(), next_start, end, limit - len(items),
                                  self.state.current, snapshot)
            reply = await self._node.call(request)
            if type(reply) is ErrorReply:
                if reply.code == "ABORTED" and snapshot is not None and restarts > 0:
                    restarts -= 1
                    items, next_start, snapshot = [], start, None
                    continue
                raise CommandError(f"ERR {reply.message}")
            assert type(reply) is ScanReply
            self.state.absorb(reply.session)
            items.extend(reply.items)
            if reply.resume is None:
                break
            next_start, snapshot = reply.resume, reply.snapshot
        return items[:limit]

    # ------------------------------------------------------------------ tokens

    def export(self) -> bytes:
        node = self._node
        return encode_token(self.state.current, node.id.dc, node.config.cluster_id)

    async def adopt(self, token: SessionToken, wait_s: float) -> None:
        """Continue the session of ``token`` here, merged with this connection's own. A session of
        another DC is adopted only once this DC has everything it depends on (the failover rule);
        ``CommandError`` if that takes longer than ``wait_s``."""
        node = self._node
        here = node.id.dc
        if token.dc == here:
            self.state.absorb(token.session)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            adoption = adopt(token.session, from_dc=token.dc, here_dc=here, stable=node.core.stable)
            if adoption.ready:
                self.state.absorb(adoption.session)
                return
            if loop.time() >= deadline:
                names = node.config.dcs
                lacks = ", ".join(f"{names[dc]} by {us / 1000:.1f} ms"
                                  for dc, us in enumerate(adoption.behind_us) if us)
                raise CommandError(
                    f"ERR session not adopted: DC {names[here]} still lacks updates of {lacks} that the "
                    f"session depends on (waited {wait_s:g} s); retry, or keep using DC {names[token.dc]}")
            await asyncio.sleep(ADOPT_POLL_S)

    # ------------------------------------------------------------------ plumbing

    def local(self, key: bytes) -> bool:
        """Whether ``key`` belongs to this server's partition (else it is forwarded)."""
        return self._partitions == 1 or partition_of(key, self._partitions) == self._here

    async def _call(self, request: ClientRequest) -> ClientReply:
        reply = await self._node.call(request)
        if type(reply) is ErrorReply:
            raise CommandError(f"ERR {reply.message}")
        self.state.absorb(reply.session)  # type: ignore[union-attr]
        return reply

    async def _forward(self, operation: Callable[[AsyncClient], Awaitable[T]]) -> T:
        fork = self._fork
        if fork is None:
            try:
                forwarder = await self._forwarder()
            except OkapiError as error:
                raise CommandError(f"ERR cannot reach the other partitions of this DC: {error}") from None
            fork = self._fork = forwarder.fork(self.state)
        try:
            return await operation(fork)
        except OkapiError as error:
            raise CommandError(f"ERR {error}") from None
