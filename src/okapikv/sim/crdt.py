"""Counters and expiring keys in the simulator's workload, and what they are checked against.

With ``WorkloadMix.incr`` or ``WorkloadMix.ttl`` above 0, clients also issue

- ``incr``: INCR by 1 to 3 of one of ``COUNTER_KEYS`` counters (``n00`` ..., a namespace of their
  own, hot: every DC increments each of them concurrently), or one time in ``COUNTER_EXPIRE_EVERY``
  an EXPIRE of it to an absolute time past any run (``COUNTER_EXPIRY_US`` on), concurrent with the
  other DCs' increments, and
- ``ttl``: half the time a PUT of a unique value expiring ``TTL_US`` after the client's true time
  (an absolute expiry, so the checker knows it exactly), half the time a GET, on one of
  ``TTL_KEYS`` keys (``t00`` ...).

They stay out of the history (the causal checkers judge the ``k`` keys, which they never touch)
and are judged here (``CrdtLedger.check``):

- ``CounterMismatch``: after quiescence, a counter's value in some DC is not the sum of its
  acknowledged increments: one was lost (a merge that keeps one DC's contribution: last-writer-
  wins) or counted twice (a resent update merged as a delta). The simulated clients resend only
  requests that never ran and a refusal changes nothing, so every increment is acknowledged once.
  The counters' expiries lie past the run, so an EXPIRE changes nothing the sum counts: it must
  keep every increment (docs/protocol.md, "Expiry of counters");
- ``CounterExpiryMismatch``: after quiescence, a counter's expiry in some DC is not that of its
  latest acknowledged EXPIRE by ``(timestamp, DC)`` (the register's merge rule), or none without one;
- ``ExpiredRead``: a GET returned a value although the clock of the server that served it had
  already passed the value's expiry when the GET was sent there (each server's clock only moves
  forward within an incarnation, and a request a crash lost is resent and re-stamped). In real
  time that is the documented bound: no DC reads a value later than its expiry plus its clock's
  lag (docs/protocol.md, "Expiry").
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from okapikv.check.anomalies import Anomaly
from okapikv.core import counters
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    ExpireReply,
    ExpireRequest,
    GetReply,
    GetRequest,
    IncrReply,
    IncrRequest,
    PutRequest,
    Session,
)
from okapikv.core.mvstore import Version
from okapikv.core.partitioning import partition_of
from okapikv.core.protocols.base import Protocol
from okapikv.core.vectors import Vector
from okapikv.sim.world import World

COUNTER_KEYS = 4
TTL_KEYS = 4
#: a PUT's time to live, uniform in this range (us): some expire before their GETs, some after
TTL_US = (2_000, 40_000)
#: one ``incr`` operation in this many is an EXPIRE of the counter, ``COUNTER_EXPIRY_US`` plus up to a
#: second after the client's true time: never reached in a run, but each write a different expiry
COUNTER_EXPIRE_EVERY = 8
COUNTER_EXPIRY_US = 3_600_000_000
MAX_REPORTS = 20


def counter_key(index: int) -> bytes:
    return b"n%02d" % index


def ttl_key(index: int) -> bytes:
    return b"t%02d" % index


@dataclass(slots=True)
class _TtlRead:
    key: bytes
    server: int
    clock_us: int  # the serving server's clock when the GET was (last) sent to it


class CrdtLedger:
    """What the clients' counter and expiry operations were acknowledged (module docstring)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.acked: Counter[bytes] = Counter()
        self.expiries: dict[bytes, int] = {}  # value -> its absolute expiry
        self._reads: dict[int, _TtlRead] = {}  # request id -> the GET in flight
        self.expired_reads: list[str] = []
        self.ttl_reads = 0
        self._expire_dcs: dict[int, int] = {}  # request id of a counter's EXPIRE -> the DC it was sent to
        #: per counter, its latest acknowledged EXPIRE: ((timestamp, DC), the expiry)
        self.counter_expiries: dict[bytes, tuple[tuple[int, int], int]] = {}

    def request(self, kind: str, rid: int, value: bytes, session: Session, now_us: int) -> ClientRequest:
        """The request of an ``incr`` or ``ttl`` operation; ``value``: the client's next unique value."""
        rng = self.rng
        if kind == "incr":
            key = counter_key(rng.randrange(COUNTER_KEYS))
            if rng.randrange(COUNTER_EXPIRE_EVERY) == 0:
                return ExpireRequest(rid, key, now_us + COUNTER_EXPIRY_US + rng.randrange(1_000_000), session)
            return IncrRequest(rid, key, rng.randint(1, 3), session)
        key = ttl_key(rng.randrange(TTL_KEYS))
        if rng.random() < 0.5:
            expires = now_us + rng.randint(*TTL_US)
            self.expiries[value] = expires
            return PutRequest(rid, key, value, session, expires)
        return GetRequest(rid, key, session)

    def sent(self, request: ClientRequest, server: int, world: World) -> None:
        """``request`` left for ``server`` (again): a GET of an expiring key notes that server's clock."""
        if type(request) is ExpireRequest:
            self._expire_dcs[request.request_id] = server // world.num_partitions
        if type(request) is GetRequest and request.key[:1] == b"t":
            self._reads[request.request_id] = _TtlRead(request.key, server, world.clocks[server].read(world.now))

    def answered(self, request: ClientRequest, reply: ClientReply) -> None:
        if type(reply) is IncrReply:
            assert isinstance(request, IncrRequest)
            self.acked[request.key] += request.by
        dc = self._expire_dcs.pop(request.request_id, None)
        if type(reply) is ExpireReply and reply.changed and dc is not None:
            assert isinstance(request, ExpireRequest) and request.expires is not None
            written = ((reply.timestamp, dc), request.expires)
            if written > self.counter_expiries.get(request.key, ((0, 0), 0)):
                self.counter_expiries[request.key] = written
        read = self._reads.pop(request.request_id, None)
        if read is not None and type(reply) is GetReply and reply.value is not None:
            self.ttl_reads += 1
            expires = self.expiries.get(reply.value)
            if expires is not None and read.clock_us >= expires:
                self.expired_reads.append(
                    f"a GET of {read.key!r} sent to server {read.server} at its clock {read.clock_us} us read "
                    f"{reply.value!r}, which expired at {expires} us")

    def check(self, world: World) -> list[Anomaly]:
        """The anomalies of the run, read from every DC's servers after quiescence."""
        found = [Anomaly("ExpiredRead", "sim", text) for text in self.expired_reads[:MAX_REPORTS]]
        partitions = world.num_partitions
        mismatches: list[str] = []
        expiries: list[str] = []
        for index in range(COUNTER_KEYS):
            key = counter_key(index)
            expected = self.acked.get(key, 0)
            for dc in range(world.num_dcs):
                where = dc * partitions + partition_of(key, partitions)
                server = world.servers[where]
                stable, protocol = server.stable, server.protocol

                def visible(version: Version, stable: Vector = stable, protocol: Protocol = protocol) -> bool:
                    return protocol.visible(version=version, stable=stable)

                version = server.read_newest(key, visible, world.clocks[where].read(world.now))
                value = int(version.value) if version is not None and version.value is not None else 0
                if value != expected:
                    mismatches.append(f"counter {key!r} reads {value} in dc{dc}, its acknowledged increments sum "
                                      f"to {expected}")
                state = counters.resolve(server.store.versions(key), visible, world.num_dcs).state
                expires = state.expires if state is not None else 0
                wanted = self.counter_expiries.get(key, ((0, 0), 0))[1]
                if expires != wanted:
                    expiries.append(f"counter {key!r} expires at {expires} us in dc{dc}, its latest acknowledged "
                                    f"EXPIRE at {wanted} us")
        found += [Anomaly("CounterMismatch", "sim", text) for text in mismatches[:MAX_REPORTS]]
        found += [Anomaly("CounterExpiryMismatch", "sim", text) for text in expiries[:MAX_REPORTS]]
        return found
