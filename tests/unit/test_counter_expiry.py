"""Expiry of counters (``okapikv.core.counters``, docs/protocol.md "Expiry of counters"): the expiry
is part of the counter's state, INCR keeps it, the latest expiry write wins in every DC, an expired
counter reads as absent and counts on from 0 in an epoch every DC derives alike, and GC drops the
expired epoch's versions once the next epoch is universally visible."""

from __future__ import annotations

from unit.test_counters import get, incr
from unit.test_server_replication import T0, Mesh, make, replies, session

from okapikv.core import counters
from okapikv.core.counters import CounterState, Resolved
from okapikv.core.messages import (
    ExpireReply,
    ExpireRequest,
    GetReply,
    GetRequest,
    IncrReply,
    IncrRequest,
    PutRequest,
    ServerId,
    Session,
)
from okapikv.core.mvstore import Version
from okapikv.core.server import PartitionServer as Server

SECOND = 1_000_000


def one(server: Server, request: object, now_us: int) -> object:
    [reply] = replies(server.handle(request, now_us))  # type: ignore[arg-type]
    return reply


def ttl(server: Server, key: bytes, now_us: int, expires: int | None = None) -> ExpireReply:
    reply = one(server, ExpireRequest(1, key, expires, Session(server.stable, 0)), now_us)
    assert isinstance(reply, ExpireReply), reply
    return reply


def test_state_with_an_expiry_round_trips_and_old_states_decode_alike() -> None:
    plain = CounterState((7, 1), 3, ((1, 0), (0, 2)))
    assert counters.decode(counters.encode(plain)) == plain
    expiring = CounterState((7, 1), 3, ((1, 0), (0, 2)), T0 + SECOND, (9, 0))
    after = CounterState((9, 0, 1), 0, ((4, 0), (0, 0)))
    for state in (expiring, after):
        assert counters.decode(counters.encode(state)) == state
    assert len(counters.encode(expiring)) - len(counters.encode(plain)) <= 16


def test_the_latest_expiry_write_wins_the_merge_and_an_increment_keeps_it() -> None:
    epoch = (5, 0)
    chain = [Version(counters.encode(CounterState(epoch, 0, ((2, 0), (0, 0)), T0 + SECOND, (10, 0))), 10, 0, None),
             Version(counters.encode(CounterState(epoch, 0, ((0, 0), (3, 0)), 0, (11, 1))), 11, 1, None)]  # PERSIST
    state = counters.resolve(chain, lambda version: True, 2).state
    assert state == CounterState(epoch, 0, ((2, 0), (3, 0)), 0, (11, 1))
    # DC 0 increments without seeing DC 1's PERSIST: it keeps the EXPIRE it knows, and loses the merge
    seen = counters.resolve(chain, lambda version: version.source_dc == 0, 2)
    incremented = counters.increment(chain, seen, 0, 2, 1, T0)
    assert isinstance(incremented, CounterState) and incremented.expires == T0 + SECOND
    chain.append(Version(counters.encode(incremented), 12, 0, None))
    merged = counters.resolve(chain, lambda version: True, 2).state
    assert merged is not None and merged.value == 6 and merged.expires == 0


def test_an_expired_counter_or_string_counts_on_from_zero_in_the_epoch_after_its_expiry() -> None:
    string = Version(b"41", 7, 1, None)  # an expiring integer string would be wrapped; the epoch rule is one
    state = CounterState((7, 1), 41, ((1, 0), (0, 0)), T0, (7, 1))
    counter = Version(counters.encode(state), 8, 0, None)
    resolved = counters.resolve([string, counter], lambda version: True, 2)
    assert counters.read_view(resolved, 2, T0 - 1) is not None
    view = counters.read_view(resolved, 2, T0)
    assert view is not None and view.value is None  # expired: absent, with the counter's dependencies
    fresh = counters.increment([string, counter], resolved, 1, 2, 1, T0)
    assert fresh == CounterState((7, 1, 1), 0, ((0, 0), (1, 0)))
    # DC 0 derives the same epoch: their increments after the expiry merge
    other = counters.increment([string, counter], resolved, 0, 2, 2, T0 + 5)
    assert isinstance(other, CounterState) and other.epoch == fresh.epoch
    assert (7, 1) < fresh.epoch < (7, 2) and fresh.epoch < (8, 0)
    assert counters.increment([string], Resolved(string), 0, 2, 1, T0) == CounterState((7, 1), 41, ((1, 0), (0, 0)))


def test_incr_then_expire_ttl_persist_and_counting_from_zero_after_expiry() -> None:
    server = make(num_dcs=1)
    ses = session(1)
    assert isinstance(one(server, IncrRequest(1, b"c", 1, ses), T0), IncrReply)
    assert ttl(server, b"c", T0 + 1).ttl_us == -1
    assert not ttl(server, b"c", T0 + 2, 0).changed  # PERSIST of a counter without expiry: nothing
    expired = ttl(server, b"c", T0 + 3, -SECOND)
    assert expired.changed and expired.value == b"1" and expired.ttl_us == SECOND
    counted = one(server, IncrRequest(2, b"c", 4, ses), T0 + 10)
    assert isinstance(counted, IncrReply) and counted.value == 5
    assert ttl(server, b"c", T0 + 11).ttl_us == SECOND - 8  # INCR keeps the expiry
    get_reply = one(server, GetRequest(3, b"c", ses), T0 + SECOND + 2)
    assert isinstance(get_reply, GetReply) and get_reply.value == b"5"
    gone = ttl(server, b"c", T0 + SECOND + 3)
    assert gone.ttl_us == -2 and gone.value is None
    assert not ttl(server, b"c", T0 + SECOND + 4, -SECOND).changed  # EXPIRE of an expired counter: 0
    get_reply = one(server, GetRequest(4, b"c", ses), T0 + SECOND + 5)
    assert isinstance(get_reply, GetReply) and get_reply.value is None
    again = one(server, IncrRequest(5, b"c", 1, ses), T0 + SECOND + 6)
    assert isinstance(again, IncrReply) and again.value == 1
    assert ttl(server, b"c", T0 + SECOND + 7).ttl_us == -1  # a new counter, without expiry
    ttl(server, b"c", T0 + SECOND + 8, -SECOND)
    persisted = ttl(server, b"c", T0 + SECOND + 9, 0)
    assert persisted.changed and persisted.ttl_us == -1
    get_reply = one(server, GetRequest(6, b"c", ses), T0 + 5 * SECOND)
    assert isinstance(get_reply, GetReply) and get_reply.value == b"1"


def test_incr_on_an_expiring_integer_string_keeps_its_expiry() -> None:
    server = make(num_dcs=1)
    ses = session(1)
    one(server, PutRequest(1, b"c", b"0", ses, -SECOND), T0)
    counted = one(server, IncrRequest(2, b"c", 1, ses), T0 + 10)
    assert isinstance(counted, IncrReply) and counted.value == 1
    assert ttl(server, b"c", T0 + 20).ttl_us == SECOND - 20
    get_reply = one(server, GetRequest(3, b"c", ses), T0 + SECOND)
    assert isinstance(get_reply, GetReply) and get_reply.value is None
    fresh = one(server, IncrRequest(4, b"c", 1, ses), T0 + SECOND + 1)
    assert isinstance(fresh, IncrReply) and fresh.value == 1


def test_expire_concurrent_with_increments_in_another_dc_converges_and_keeps_them() -> None:
    mesh = Mesh(2, 1)
    sessions = {dc: session(2) for dc in range(2)}
    a, b = mesh.servers[ServerId(0, 0)], mesh.servers[ServerId(1, 0)]
    incr(mesh, 0, b"c", 1, T0, sessions)
    mesh.run(T0, T0 + 100_000, 5_000)
    now = T0 + 100_000
    mesh.hold = lambda send: True
    mesh.deliver(a.handle(ExpireRequest(1, b"c", -SECOND, sessions[0]), now), now)
    for step in range(1, 4):
        incr(mesh, 1, b"c", 2, now + step, sessions)  # not seeing the EXPIRE
    held = list(mesh.held)
    mesh.held, mesh.hold = [], lambda send: False
    mesh.deliver(held + held, now + 10)
    mesh.run(now, now + 200_000, 5_000)
    later = now + 200_000
    for server in (a, b):
        assert get(mesh, server.dc, b"c", later) == b"7"  # every increment counted once
        assert ttl(server, b"c", later).ttl_us == SECOND - 200_000  # the expiry kept by the merge
    expiry_time = now + SECOND
    assert get(mesh, 0, b"c", expiry_time) is None and get(mesh, 1, b"c", expiry_time) is None


def test_increments_after_an_expiry_in_two_dcs_all_count_and_gc_drops_the_expired_epoch() -> None:
    mesh = Mesh(2, 1, gc_interval_us=10_000)
    sessions = {dc: session(2) for dc in range(2)}
    a = mesh.servers[ServerId(0, 0)]
    incr(mesh, 0, b"c", 5, T0, sessions)
    incr(mesh, 1, b"c", 5, T0 + 1, sessions)
    mesh.deliver(a.handle(ExpireRequest(1, b"c", -200_000, sessions[0]), T0 + 2), T0 + 2)
    mesh.run(T0, T0 + 100_000, 5_000)
    now = T0 + 300_000  # expired in both DCs
    mesh.hold = lambda send: True  # each DC counts on without seeing the other
    incr(mesh, 0, b"c", 1, now, sessions)
    incr(mesh, 1, b"c", 2, now + 1, sessions)
    held = list(mesh.held)
    mesh.held, mesh.hold = [], lambda send: False
    mesh.deliver(held, now + 10)
    mesh.run(now, now + 500_000, 5_000)
    for dc in range(2):
        assert get(mesh, dc, b"c", now + 500_000) == b"3"
        versions = mesh.servers[ServerId(dc, 0)].store.versions(b"c")
        # the expired epoch's versions collected: one version per DC of the new epoch
        assert sorted(version.source_dc for version in versions) == [0, 1]
        assert all(counters.decode(version.value or b"").epoch[2:] == (1,) for version in versions)


def test_concurrent_expire_and_persist_of_a_counter_resolve_alike_in_every_dc() -> None:
    mesh = Mesh(2, 1)
    sessions = {dc: session(2) for dc in range(2)}
    a, b = mesh.servers[ServerId(0, 0)], mesh.servers[ServerId(1, 0)]
    incr(mesh, 0, b"c", 2, T0, sessions)
    mesh.deliver(a.handle(ExpireRequest(1, b"c", -SECOND, sessions[0]), T0 + 1), T0 + 1)
    mesh.run(T0, T0 + 100_000, 5_000)
    now = T0 + 100_000
    mesh.hold = lambda send: True
    mesh.deliver(b.handle(ExpireRequest(2, b"c", 0, sessions[1]), now), now)  # PERSIST in DC 1
    mesh.deliver(a.handle(ExpireRequest(3, b"c", -5 * SECOND, sessions[0]), now + 10), now + 10)  # later: EXPIRE
    incr(mesh, 1, b"c", 1, now + 20, sessions)  # after its PERSIST, not seeing the EXPIRE
    held = list(mesh.held)
    mesh.held, mesh.hold = [], lambda send: False
    mesh.deliver(held, now + 30)
    mesh.run(now, now + 200_000, 5_000)
    later = now + 200_000
    for server in (a, b):
        assert get(mesh, server.dc, b"c", later) == b"3"
        assert ttl(server, b"c", later).ttl_us == 5 * SECOND - 200_000 + 10  # the EXPIRE, the later write, won
    assert get(mesh, 1, b"c", now + 5 * SECOND + 10) is None
