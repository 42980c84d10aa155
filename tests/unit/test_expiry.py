"""Expiry (``okapikv.core.expiry``, docs/protocol.md "Expiry"): the envelope, the rule that an expired
version reads as absent by the reading server's clock, EXPIRE/PERSIST as last-writer-wins writes
across DCs, and GC collecting expired versions."""

from __future__ import annotations

from unit.test_server_replication import T0, Mesh, make, replies, session

from okapikv.core import expiry
from okapikv.core.messages import (
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
    ServerId,
    Session,
)
from okapikv.core.mvstore import Version

SECOND = 1_000_000


def test_envelope_round_trip_and_view() -> None:
    wrapped = expiry.wrap(b"v", T0 + SECOND)
    assert expiry.split(wrapped) == (b"v", T0 + SECOND)
    assert expiry.wrap(b"v", 0) == b"v" and expiry.split(b"v") == (b"v", 0)
    version = Version(wrapped, 5, 0, None)
    live = expiry.view(version, T0)
    gone = expiry.view(version, T0 + SECOND)
    assert live is not None and live.value == b"v" and live.order == version.order
    assert gone is not None and gone.value is None and gone.order == version.order
    assert expiry.remaining_us(version, T0) == SECOND
    assert expiry.remaining_us(version, T0 + SECOND) == -2
    assert expiry.remaining_us(Version(b"v", 5, 0, None), T0) == -1
    assert expiry.remaining_us(None, T0) == -2
    assert expiry.resolve(-SECOND, T0) == T0 + SECOND and expiry.resolve(7, T0) == 7


def one(server: object, request: object, now_us: int) -> object:
    [reply] = replies(server.handle(request, now_us))  # type: ignore[attr-defined]
    return reply


def test_reads_see_an_expiring_key_until_its_time_then_nothing() -> None:
    server = make(num_dcs=1)
    ses = session(1)
    one(server, PutRequest(1, b"k", b"v", ses, -2 * SECOND), T0)
    for now, present in ((T0 + SECOND, True), (T0 + 2 * SECOND, False)):
        get = one(server, GetRequest(2, b"k", ses), now)
        tx = one(server, ReadTxRequest(3, (b"k",), ses), now)
        scan = one(server, ScanRequest(4, b"a", b"z", None, ses), now)
        assert isinstance(get, GetReply) and isinstance(tx, ReadTxReply) and isinstance(scan, ScanReply)
        assert get.value == (b"v" if present else None)
        assert tx.values == ((b"v",) if present else (None,))
        assert scan.items == (((b"k", b"v"),) if present else ())
    ttl = one(server, ExpireRequest(5, b"k", None, ses), T0 + SECOND)
    assert isinstance(ttl, ExpireReply) and ttl.ttl_us == SECOND and ttl.value == b"v" and not ttl.changed


def test_expire_persist_and_their_refusals() -> None:
    server = make(num_dcs=1)
    ses = session(1)
    absent = one(server, ExpireRequest(1, b"k", -SECOND, ses), T0)
    assert isinstance(absent, ExpireReply) and absent.ttl_us == -2 and not absent.changed
    one(server, PutRequest(2, b"k", b"v", ses), T0 + 1)
    plain = one(server, ExpireRequest(3, b"k", 0, ses), T0 + 2)  # PERSIST of a key without expiry
    assert isinstance(plain, ExpireReply) and plain.ttl_us == -1 and not plain.changed
    set_ttl = one(server, ExpireRequest(4, b"k", -SECOND, ses), T0 + 3)
    assert isinstance(set_ttl, ExpireReply) and set_ttl.changed and set_ttl.ttl_us == SECOND
    persisted = one(server, ExpireRequest(5, b"k", 0, ses), T0 + 4)
    assert isinstance(persisted, ExpireReply) and persisted.changed and persisted.ttl_us == -1
    get = one(server, GetRequest(6, b"k", ses), T0 + 10 * SECOND)
    assert isinstance(get, GetReply) and get.value == b"v"
    assert isinstance(one(server, PutRequest(9, b"x", expiry.MAGIC + b"12345678", ses), T0 + 7), ErrorReply)
    one(server, PutRequest(10, b"n", b"41", ses, -SECOND), T0 + 8)
    counted = one(server, IncrRequest(11, b"n", 1, ses), T0 + 9)
    assert isinstance(counted, IncrReply) and counted.value == 42
    after = one(server, IncrRequest(12, b"m", 1, ses), T0 + 10)
    assert isinstance(after, IncrReply)
    one(server, PutRequest(13, b"e", b"41", ses, -SECOND), T0 + 11)
    fresh = one(server, IncrRequest(14, b"e", 1, ses), T0 + 2 * SECOND)  # expired: counts from 0
    assert isinstance(fresh, IncrReply) and fresh.value == 1


def test_later_expiry_write_wins_in_every_dc_and_gc_collects_expired_versions() -> None:
    mesh = Mesh(2, 1, gc_interval_us=10_000)
    a, b = mesh.servers[ServerId(0, 0)], mesh.servers[ServerId(1, 0)]
    mesh.deliver(a.handle(PutRequest(1, b"k", b"v", session(), -5 * SECOND), T0), T0)
    mesh.run(T0, T0 + 200_000, 5_000)
    now = T0 + 200_000
    mesh.hold = lambda send: True
    mesh.deliver(a.handle(ExpireRequest(2, b"k", 0, session()), now), now)  # PERSIST in DC 0
    mesh.deliver(b.handle(ExpireRequest(3, b"k", -SECOND, session()), now + 10), now + 10)  # later: EXPIRE 1 s
    held = list(mesh.held)
    mesh.held, mesh.hold = [], lambda send: False
    mesh.deliver(held, now + 20)
    mesh.run(now, now + 300_000, 5_000)
    for server in (a, b):
        reply = one(server, ExpireRequest(4, b"k", None, session()), now + 300_000)
        assert isinstance(reply, ExpireReply) and 0 < reply.ttl_us <= SECOND  # EXPIRE, the later, won
    later = now + 2 * SECOND
    mesh.run(later, later + 300_000, 5_000)
    for server in (a, b):
        get = one(server, GetRequest(5, b"k", session()), later + 300_000)
        assert isinstance(get, GetReply) and get.value is None
        assert server.store.version_count == 0 and server.store.collected_count >= 3


def test_no_session_bound_refusal_changes_stable() -> None:
    server = make(num_dcs=1)
    before = server.stable
    assert isinstance(one(server, ExpireRequest(1, b"", -SECOND, Session((0,), 0)), T0), ErrorReply)
    assert server.stable == before
