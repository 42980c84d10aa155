"""Partition servers of one DC wired together by hand, synchronously (unit and property tests only).

Every ``Send`` to a partition of the same DC is delivered at once, at the current time, so a request
either gets its reply inside ``request`` or is parked by the core (a Cure/GentleRain wait);
``request`` then advances time to the earliest ``next_deadline`` and runs every server's
timer until the reply comes. Sends to other DCs are kept in ``outbound`` for the test to look at.

This is deliberately smaller than ``tests/harness.py`` (no delays, no skew, one DC): it exists to
state single-DC semantics and to back the hypothesis state machine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    DeleteRequest,
    Effect,
    GetRequest,
    PutRequest,
    ReadTxRequest,
    Respond,
    ScanReply,
    ScanRequest,
    Send,
    SnapshotRef,
    SwapRequest,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.server import PartitionServer
from okapikv.core.session import ClientSession

START_US = 1_000_000


class HandWiredDC:
    def __init__(
        self,
        num_partitions: int = 1,
        protocol: str = "okapi",
        *,
        dc: int = 0,
        num_dcs: int = 1,
        start_us: int = START_US,
        **config: Any,
    ) -> None:
        self.dc = dc
        self.num_partitions = num_partitions
        self.servers = [
            PartitionServer(
                CoreConfig(
                    dc=dc,
                    partition=partition,
                    num_dcs=num_dcs,
                    num_partitions=num_partitions,
                    protocol=protocol,
                    **config,
                )
            )
            for partition in range(num_partitions)
        ]
        self.now_us = start_us
        self.outbound: list[Send] = []
        self.replies: list[ClientReply] = []
        self.session = ClientSession(num_dcs)
        self._next_request_id = 1

    # ------------------------------------------------------------------ delivery

    def deliver(self, effects: Iterable[Effect]) -> None:
        """Carry out effects: local sends are handled at once (recursively), replies collected."""
        queue: deque[Effect] = deque(effects)
        while queue:
            effect = queue.popleft()
            if isinstance(effect, Respond):
                self.replies.append(effect.reply)
            elif effect.destination.dc == self.dc:
                queue.extend(self.servers[effect.destination.partition].handle(effect.message, self.now_us))
            else:
                self.outbound.append(effect)

    def tick(self, now_us: int | None = None) -> None:
        """Advance time (to the earliest deadline by default) and run every server's timer."""
        if now_us is None:
            now_us = min(server.next_deadline() for server in self.servers)
        self.now_us = max(self.now_us, now_us)
        for server in self.servers:
            self.deliver(server.on_timer(self.now_us))

    # ------------------------------------------------------------------ client side

    def next_request_id(self) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        return request_id

    def owner(self, key: bytes) -> PartitionServer:
        return self.servers[partition_of(key, self.num_partitions)]

    def send(
        self, message: ClientRequest, partition: int, *, session: ClientSession | None = None, max_ticks: int = 1_000
    ) -> ClientReply:
        """Hand ``message`` to a partition and run the DC until its reply arrives; the reply's session
        is merged into ``session`` (the DC's default client session unless another is given)."""
        request_id = message.request_id
        self.deliver(self.servers[partition].handle(message, self.now_us))
        for _ in range(max_ticks):
            for index, reply in enumerate(self.replies):
                if reply.request_id == request_id:
                    del self.replies[index]
                    returned = getattr(reply, "session", None)
                    if returned is not None:
                        (session or self.session).merge(returned)
                    return reply
            self.tick()
        raise AssertionError(f"no reply to request {request_id} after {max_ticks} timer rounds")

    def _route(self, key: bytes) -> int:
        return partition_of(key, self.num_partitions)

    def put(self, key: bytes, value: bytes, session: ClientSession | None = None) -> ClientReply:
        current = (session or self.session).current
        return self.send(PutRequest(self.next_request_id(), key, value, current), self._route(key), session=session)

    def swap(self, key: bytes, value: bytes, session: ClientSession | None = None) -> ClientReply:
        current = (session or self.session).current
        return self.send(SwapRequest(self.next_request_id(), key, value, current), self._route(key), session=session)

    def delete(self, key: bytes, session: ClientSession | None = None) -> ClientReply:
        current = (session or self.session).current
        return self.send(DeleteRequest(self.next_request_id(), key, current), self._route(key), session=session)

    def get(self, key: bytes, session: ClientSession | None = None) -> ClientReply:
        current = (session or self.session).current
        return self.send(GetRequest(self.next_request_id(), key, current), self._route(key), session=session)

    def read_tx(
        self, keys: Iterable[bytes], coordinator: int = 0, session: ClientSession | None = None
    ) -> ClientReply:
        current = (session or self.session).current
        request = ReadTxRequest(self.next_request_id(), tuple(keys), current)
        return self.send(request, coordinator, session=session)

    def scan(
        self,
        start: bytes,
        end: bytes,
        limit: int | None = None,
        coordinator: int = 0,
        session: ClientSession | None = None,
        snapshot: SnapshotRef | None = None,
    ) -> ClientReply:
        current = (session or self.session).current
        request = ScanRequest(self.next_request_id(), start, end, limit, current, snapshot)
        return self.send(request, coordinator, session=session)

    def scan_pages(
        self, start: bytes, end: bytes, limit: int | None = None, coordinator: int = 0,
        between: Callable[[], None] | None = None,
    ) -> list[ScanReply]:
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
