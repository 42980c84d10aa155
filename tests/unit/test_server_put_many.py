"""Bulk PUT (``PutManyRequest``, docs/protocol.md "Bulk PUT"): the PUTs of its pairs, one admission
and one reply; a bad pair refuses it whole; under a physical-clock protocol it parks part-way and
goes on. Servers are driven directly with explicit clock readings."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    ClientReply,
    Effect,
    ErrorCode,
    ErrorReply,
    GetReply,
    GetRequest,
    PutManyReply,
    PutManyRequest,
    PutRequest,
    ReplicateBatch,
    Respond,
    Send,
    Session,
    WriteReply,
)
from okapikv.core.mvstore import Version
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack, physical_of

T0 = 1_000_000  # microseconds


def make(num_dcs: int = 2, protocol: str = "okapi", dc: int = 0) -> PartitionServer:
    return PartitionServer(CoreConfig(dc=dc, partition=0, num_dcs=num_dcs, num_partitions=1, protocol=protocol))


def replies(effects: Iterable[Effect]) -> list[ClientReply]:
    return [effect.reply for effect in effects if isinstance(effect, Respond)]


def bulk(request_id: int, count: int, num_dcs: int = 2, dt: int = 0, prefix: bytes = b"k") -> PutManyRequest:
    keys = tuple(prefix + b"%04d" % index for index in range(count))
    return PutManyRequest(request_id, keys, tuple(b"v%d" % index for index in range(count)),
                          Session((0,) * num_dcs, dt))


def test_every_pair_is_a_put_of_the_session_with_one_reply_and_one_replication_batch() -> None:
    server = make()
    server.on_timer(T0)
    effects = server.handle(bulk(1, 50, dt=pack(T0 + 5)), T0 + 10)
    [reply] = replies(effects)
    assert isinstance(reply, PutManyReply) and reply.count == 50
    versions = [server.store.latest(b"k%04d" % index) for index in range(50)]
    stamps = [version.timestamp for version in versions if version is not None]
    assert len(stamps) == 50 and stamps == sorted(set(stamps))  # one timestamp each, increasing
    assert stamps[0] > pack(T0 + 5)  # above the session's dependency, as a PUT's
    assert reply.timestamp == stamps[-1] == server.hlc and reply.session.dt == reply.timestamp
    [batch] = [effect.message for effect in effects if isinstance(effect, Send)
               and isinstance(effect.message, ReplicateBatch)]
    assert [update.key for update in batch.updates] == [b"k%04d" % index for index in range(50)]
    assert server.stats.operations["put"] == 50 and server.stats.operations["put_many"] == 1
    [read] = replies(server.handle(GetRequest(2, b"k0049", reply.session), T0 + 20))
    assert isinstance(read, GetReply) and read.value == b"v49"


def test_a_bad_pair_refuses_the_whole_request_and_changes_nothing() -> None:
    server = make()
    server.on_timer(T0)
    hlc, stable = server.hlc, server.stable
    request = bulk(1, 10)
    too_big = b"x" * (server.config.max_value_bytes + 1)
    cases = [
        PutManyRequest(1, request.keys, request.values[:-1] + (too_big,), Session((5, 5), 0)),
        PutManyRequest(2, request.keys[:3] + (b"",) + request.keys[4:], request.values, Session((5, 5), 0)),
        PutManyRequest(3, request.keys, request.values[:4], Session((5, 5), 0)),
        PutManyRequest(4, (), (), Session((5, 5), 0)),
        PutManyRequest(5, request.keys, request.values, Session((5, 5, 5), 0)),
    ]
    for refused in cases:
        [reply] = replies(server.handle(refused, T0 + 1))
        assert isinstance(reply, ErrorReply) and reply.code == ErrorCode.INVALID_ARGUMENT, reply
    assert "pair 9 (key b'k0009')" in reply_message(server, cases[0])
    assert len(server.store) == 0 and server.hlc == hlc and server.stable == stable


def reply_message(server: PartitionServer, request: PutManyRequest) -> str:
    [reply] = replies(server.handle(request, T0 + 2))
    assert isinstance(reply, ErrorReply)
    return reply.message


def test_a_pair_depends_on_the_version_it_overwrites() -> None:
    server = make()
    server.on_timer(T0)
    remote = pack(T0 + 300)
    server.store.insert(b"k0001", Version(b"old", remote, 1, None))  # a remote version, its clock ahead,
    server.advance_stable((0, remote))  # and stable here: what the PUT of k0001 reads
    [reply] = replies(server.handle(bulk(1, 3), T0 + 10))
    assert isinstance(reply, PutManyReply)
    written = server.store.latest(b"k0001")
    assert written is not None and written.value == b"v1" and written.timestamp > remote
    assert written.dependency_vector(2)[1] == remote
    assert reply.session.stable[1] >= remote  # what the reply's session merges covers it


@pytest.mark.parametrize("protocol", ["cure", "gentlerain"])
def test_a_physical_clock_protocol_parks_part_way_and_goes_on(protocol: str) -> None:
    server = make(protocol=protocol)
    server.on_timer(T0)
    assert replies(server.handle(bulk(1, 20), T0 + 10)) == []  # one write this microsecond, then a wait
    assert server.parked_count == 1 and len(server.store) == 1
    now = T0 + 10
    answer: list[ClientReply] = []
    while not answer:
        assert now < T0 + 200, "the bulk PUT never finished"
        now = max(now + 1, server.next_deadline())
        answer = replies(server.on_timer(now))
    [reply] = answer
    assert isinstance(reply, PutManyReply) and reply.count == 20 and server.parked_count == 0
    stamps = [physical_of(version.timestamp) for key in bulk(1, 20).keys
              if (version := server.store.latest(key)) is not None]
    assert stamps == sorted(set(stamps)) and len(stamps) == 20  # one microsecond each
    assert server.stats.operations["put"] == 20


def test_a_wait_past_the_maximum_offset_part_way_says_how_many_pairs_were_written() -> None:
    server = make(protocol="cure")
    server.on_timer(T0)
    ahead = pack(T0 + server.config.max_clock_offset_us + 10_000)
    server.store.insert(b"k0002", Version(b"old", ahead, 1, None))  # stable here, so the third pair
    server.advance_stable((0, ahead))  # reads it and would wait too long for the clock to pass it
    server.handle(bulk(1, 5), T0 + 10)
    reply: ClientReply | None = None
    now = T0 + 10
    while reply is None:
        now = max(now + 1, server.next_deadline())
        assert now < T0 + 100
        found = replies(server.on_timer(now))
        reply = found[0] if found else None
    assert isinstance(reply, ErrorReply) and reply.code == ErrorCode.OUT_OF_RANGE
    assert "2 of 5 pairs written" in reply.message
    assert [server.store.latest(b"k%04d" % index) is not None for index in range(5)] == [True] * 3 + [False] * 2
    assert server.parked_count == 0


def test_a_refused_first_pair_leaves_nothing_behind() -> None:
    server = make(protocol="cure")
    server.on_timer(T0)
    stable = server.stable
    far = pack(T0 + server.config.max_clock_offset_us + 10_000)
    [reply] = replies(server.handle(PutManyRequest(1, (b"a",), (b"v",), Session((0, 0), far)), T0))
    assert isinstance(reply, ErrorReply) and reply.code == ErrorCode.OUT_OF_RANGE
    assert len(server.store) == 0 and server.stable == stable and server.parked_count == 0


def test_the_change_log_holds_every_pair_for_a_durable_driver() -> None:
    server = make(num_dcs=1)
    server.track_changes = True
    server.on_timer(T0)
    server.handle(bulk(1, 30, num_dcs=1), T0 + 1)
    changes = server.drain_changes()
    assert [change.key for change in changes.store] == list(bulk(1, 30, num_dcs=1).keys)
    assert all(change.inserted for change in changes.store)


def test_the_same_pairs_as_puts_give_the_same_store() -> None:
    one, many = make(), make()
    one.on_timer(T0)
    many.on_timer(T0)
    request = bulk(1, 25)
    session = request.session
    for index, (key, value) in enumerate(zip(request.keys, request.values, strict=True)):
        [reply] = replies(one.handle(PutRequest(index, key, value, session), T0 + 1))
        assert isinstance(reply, WriteReply)
    many.handle(request, T0 + 1)
    for key in request.keys:
        a, b = one.store.latest(key), many.store.latest(key)
        assert a is not None and b is not None
        assert (a.value, a.timestamp, a.dv) == (b.value, b.timestamp, b.dv)
