"""A small in-memory harness (tests only) that wires N partitions x M DCs of the pure core together.

Links are FIFO queues with a fixed one-way delay (one for links inside a DC, one per pair of DCs),
each server has its own clock offset from the harness's true time, and time only advances when a
test asks. Tests drive it step by step, so a scenario can stop in any state and look.

This is deliberately simpler than ``okapikv.sim`` (no randomness, no faults beyond cutting links):
it exists to state the protocol's properties in small, readable tests.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    ClientReply,
    DeleteRequest,
    ErrorReply,
    GetReply,
    GetRequest,
    Message,
    PutRequest,
    ReadTxReply,
    ReadTxRequest,
    Respond,
    ScanReply,
    ScanRequest,
    Send,
    ServerId,
    SwapReply,
    SwapRequest,
    WriteReply,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.server import PartitionServer
from okapikv.core.session import ClientSession

START_US = 1_000_000_000  # true time starts at 1000 s so skews can be negative


@dataclass(order=True)
class _Event:
    time_us: int
    sequence: int
    destination: ServerId = field(compare=False)
    message: Message = field(compare=False)


class Harness:
    def __init__(
        self,
        num_dcs: int,
        num_partitions: int,
        protocol: str = "okapi",
        *,
        intra_dc_delay_us: int = 200,
        inter_dc_delay_us: int | list[list[int]] = 20_000,
        skew_us: dict[ServerId, int] | None = None,
        piggyback_usv: bool = False,
        link_delay_us: dict[tuple[ServerId, ServerId], int] | None = None,
    ) -> None:
        self.num_dcs = num_dcs
        self.num_partitions = num_partitions
        self.time_us = START_US
        self.skew_us = dict(skew_us or {})
        self.intra_dc_delay_us = intra_dc_delay_us
        self.link_delay_us = dict(link_delay_us or {})
        if isinstance(inter_dc_delay_us, int):
            self.inter_dc_delay_us = [[inter_dc_delay_us] * num_dcs for _ in range(num_dcs)]
        else:
            self.inter_dc_delay_us = inter_dc_delay_us
        self.servers = {
            ServerId(dc, p): PartitionServer(
                CoreConfig(dc=dc, partition=p, num_dcs=num_dcs, num_partitions=num_partitions,
                           protocol=protocol, piggyback_usv=piggyback_usv)
            )
            for dc in range(num_dcs)
            for p in range(num_partitions)
        }
        self._queue: list[_Event] = []
        self._sequence = itertools.count()
        self._link_last_us: dict[tuple[ServerId, ServerId], int] = {}
        self._cut: set[tuple[int, int]] = set()
        self._held: dict[tuple[ServerId, ServerId], list[Message]] = {}
        self.replies: dict[int, tuple[ClientReply, int]] = {}
        self._request_ids = itertools.count(1)

    # ------------------------------------------------------------------ clocks and links

    def clock(self, server: ServerId) -> int:
        return self.time_us + self.skew_us.get(server, 0)

    def delay(self, source: ServerId, destination: ServerId) -> int:
        if (source, destination) in self.link_delay_us:
            return self.link_delay_us[(source, destination)]
        if source.dc == destination.dc:
            return self.intra_dc_delay_us
        return self.inter_dc_delay_us[source.dc][destination.dc]

    def cut(self, dc_a: int, dc_b: int) -> None:
        """Hold every message between two DCs (in both directions) until ``repair``."""
        self._cut |= {(dc_a, dc_b), (dc_b, dc_a)}

    def repair(self, dc_a: int, dc_b: int) -> None:
        self._cut -= {(dc_a, dc_b), (dc_b, dc_a)}
        for (source, destination), held in list(self._held.items()):
            if (source.dc, destination.dc) not in self._cut:
                del self._held[(source, destination)]
                for message in held:
                    self._enqueue(source, destination, message)

    def _enqueue(self, source: ServerId, destination: ServerId, message: Message) -> None:
        link = (source, destination)
        if (source.dc, destination.dc) in self._cut:
            self._held.setdefault(link, []).append(message)
            return
        at = max(self.time_us + self.delay(source, destination), self._link_last_us.get(link, 0))
        self._link_last_us[link] = at  # FIFO per link
        heapq.heappush(self._queue, _Event(at, next(self._sequence), destination, message))

    def _apply(self, source: ServerId, effects: list[Send | Respond]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                self._enqueue(source, effect.destination, effect.message)
            else:
                self.replies[effect.reply.request_id] = (effect.reply, self.time_us)

    # ------------------------------------------------------------------ running

    def submit(self, server: ServerId, request: Message) -> None:
        self._apply(server, self.servers[server].handle(request, self.clock(server)))

    def _next_timer(self) -> tuple[int, ServerId]:
        best = (1 << 62, ServerId(0, 0))
        for server_id, server in self.servers.items():
            true_time = server.next_deadline() - self.skew_us.get(server_id, 0)
            if true_time < best[0]:
                best = (true_time, server_id)
        return best

    def step(self, until_us: int) -> bool:
        """Process the next event (message or timer) due at or before ``until_us``."""
        timer_at, timer_server = self._next_timer()
        message_at = self._queue[0].time_us if self._queue else 1 << 62
        at = min(timer_at, message_at)
        if at > until_us:
            return False
        self.time_us = max(self.time_us, at)
        if message_at <= timer_at:
            event = heapq.heappop(self._queue)
            self._apply(event.destination,
                        self.servers[event.destination].handle(event.message, self.clock(event.destination)))
        else:
            self._apply(timer_server, self.servers[timer_server].on_timer(self.clock(timer_server)))
        return True

    def run_for(self, duration_us: int) -> None:
        end = self.time_us + duration_us
        while self.step(end):
            pass
        self.time_us = end

    def run_until_reply(self, request_id: int, limit_us: int = 5_000_000) -> ClientReply:
        end = self.time_us + limit_us
        while request_id not in self.replies:
            if not self.step(end):
                raise TimeoutError(f"no reply to request {request_id} within {limit_us} us")
        return self.replies[request_id][0]

    def client(self, dc: int) -> HarnessClient:
        return HarnessClient(self, dc)

    def next_request_id(self) -> int:
        return next(self._request_ids)

    def stats(self, protocol_wait_reason: str | None = None) -> dict[str, int]:
        """Total wait count per reason over every server."""
        totals: dict[str, int] = {}
        for server in self.servers.values():
            for reason, wait in server.stats.waits.items():
                totals[reason] = totals.get(reason, 0) + wait.count
        return totals


class HarnessClient:
    """A causal client session in one DC that runs the harness until each reply arrives."""

    def __init__(self, harness: Harness, dc: int, coordinator_partition: int = 0) -> None:
        self.harness = harness
        self.dc = dc
        self.session = ClientSession(harness.num_dcs)
        self.coordinator = ServerId(dc, coordinator_partition)
        self.last_latency_us = 0

    def _server_for(self, key: bytes) -> ServerId:
        return ServerId(self.dc, partition_of(key, self.harness.num_partitions))

    def _call(self, server: ServerId, build: type, *args: object) -> ClientReply:
        request_id = self.harness.next_request_id()
        request = build(request_id, *args, self.session.current)
        started = self.harness.time_us
        self.harness.submit(server, request)
        reply = self.harness.run_until_reply(request_id)
        self.last_latency_us = self.harness.replies[request_id][1] - started
        if isinstance(reply, ErrorReply):
            raise ValueError(f"{reply.code}: {reply.message}")
        self.session.merge(reply.session)
        return reply

    def put(self, key: bytes, value: bytes) -> bool:
        reply = self._call(self._server_for(key), PutRequest, key, value)
        assert isinstance(reply, WriteReply)
        return reply.found

    def swap(self, key: bytes, value: bytes) -> bytes | None:
        reply = self._call(self._server_for(key), SwapRequest, key, value)
        assert isinstance(reply, SwapReply)
        return reply.old_value

    def delete(self, key: bytes) -> bool:
        reply = self._call(self._server_for(key), DeleteRequest, key)
        assert isinstance(reply, WriteReply)
        return reply.found

    def get(self, key: bytes) -> bytes | None:
        reply = self._call(self._server_for(key), GetRequest, key)
        assert isinstance(reply, GetReply)
        return reply.value

    def read_tx(self, keys: list[bytes]) -> list[bytes | None]:
        reply = self._call(self.coordinator, ReadTxRequest, tuple(keys))
        assert isinstance(reply, ReadTxReply)
        return list(reply.values)

    def scan(self, start: bytes, end: bytes, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        reply = self._call(self.coordinator, ScanRequest, start, end, limit)
        assert isinstance(reply, ScanReply)
        return list(reply.items)


def keys_on_distinct_partitions(num_partitions: int, prefix: str = "k") -> tuple[bytes, bytes]:
    """Two keys that live on different partitions."""
    first = f"{prefix}0".encode()
    for index in itertools.count(1):
        candidate = f"{prefix}{index}".encode()
        if partition_of(candidate, num_partitions) != partition_of(first, num_partitions):
            return first, candidate
    raise AssertionError("unreachable")
