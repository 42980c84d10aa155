"""A refused request changes nothing (docs/protocol.md, "Operations").

Empty keys, keys over 1 KiB, values over 1 MiB, a session vector of the wrong length, a read
transaction naming too many keys and a negative scan limit are answered with one
``ErrorReply(code="INVALID_ARGUMENT")``: no version, no clock movement, no stable-vector merge,
no replication, no operation counted.
"""

from __future__ import annotations

import copy

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    ClientRequest,
    DeleteRequest,
    ErrorReply,
    GetReply,
    GetRequest,
    PutRequest,
    ReadTxRequest,
    Respond,
    ScanRequest,
    Session,
    SwapRequest,
    WriteReply,
)
from okapikv.core.mvstore import COUNTER_MAGIC, EXPIRY_MAGIC
from okapikv.core.partitioning import partition_of
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack

PROTOCOLS = ["okapi", "cure", "gentlerain", "eventual"]
NOW_US = 1_000_000
KEY_LIMIT = 1024
VALUE_LIMIT = 1 << 20

# A session that would move the server's stable vector if it were merged.
FRESH = Session((pack(500), pack(600)), 0)
LONG = Session((0, 0, pack(700)), 0)  # depends on a DC this server does not know (okapikv.core.growth)


def server(protocol: str) -> PartitionServer:
    # Two DCs so that an accepted write would also produce replication effects.
    return PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=2, num_partitions=1, protocol=protocol))


def snapshot_state(target: PartitionServer) -> tuple[object, ...]:
    keys = list(target.store.keys())
    return (
        repr([target.store.versions(key) for key in keys]),
        keys,
        target.store.version_count,
        list(target.vv),
        target.stable,
        target.gsv,
        target.horizon,
        dict(target.stats.operations),
        target.stats.replicated_updates_sent,
        target.parked_count,
        target.pending_reads,
    )


INVALID: list[tuple[str, ClientRequest, str]] = [
    ("get empty key", GetRequest(1, b"", FRESH), "key must not be empty"),
    ("put empty key", PutRequest(1, b"", b"v", FRESH), "key must not be empty"),
    ("swap empty key", SwapRequest(1, b"", b"v", FRESH), "key must not be empty"),
    ("delete empty key", DeleteRequest(1, b"", FRESH), "key must not be empty"),
    ("get long key", GetRequest(1, b"k" * (KEY_LIMIT + 1), FRESH), "exceeds the limit of 1024 bytes"),
    ("put long key", PutRequest(1, b"k" * (KEY_LIMIT + 1), b"v", FRESH), "exceeds the limit of 1024 bytes"),
    ("swap long key", SwapRequest(1, b"k" * (KEY_LIMIT + 1), b"v", FRESH), "exceeds the limit"),
    ("delete long key", DeleteRequest(1, b"k" * (KEY_LIMIT + 1), FRESH), "exceeds the limit"),
    ("put big value", PutRequest(1, b"k", b"v" * (VALUE_LIMIT + 1), FRESH), "exceeds the limit of 1048576 bytes"),
    ("swap big value", SwapRequest(1, b"k", b"v" * (VALUE_LIMIT + 1), FRESH), "exceeds the limit of 1048576"),
    ("swap counter value", SwapRequest(1, b"k", COUNTER_MAGIC + b"1", FRESH), "are reserved for counters"),
    ("swap expiring value", SwapRequest(1, b"k", EXPIRY_MAGIC + b"1", FRESH), "are reserved for expiring values"),
    ("get long session", GetRequest(1, b"k", LONG), "session vector has 3 entries and depends on DC index 2"),
    ("put long session", PutRequest(1, b"k", b"v", LONG), "session vector has 3 entries"),
    ("swap long session", SwapRequest(1, b"k", b"v", LONG), "session vector has 3 entries"),
    ("delete long session", DeleteRequest(1, b"k", LONG), "session vector has 3 entries"),
    ("read-tx long session", ReadTxRequest(1, (b"k",), LONG), "session vector has 3 entries"),
    ("scan long session", ScanRequest(1, b"a", b"z", None, LONG), "session vector has 3 entries"),
    ("read-tx empty key", ReadTxRequest(1, (b"a", b""), FRESH), "key must not be empty"),
    ("read-tx long key", ReadTxRequest(1, (b"k" * (KEY_LIMIT + 1),), FRESH), "exceeds the limit"),
    ("scan negative limit", ScanRequest(1, b"a", b"z", -1, FRESH), "scan limit must not be negative"),
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("name", "request_", "message"), INVALID, ids=[case[0] for case in INVALID])
def test_invalid_request_is_refused_and_changes_nothing(
    protocol: str, name: str, request_: ClientRequest, message: str
) -> None:
    target = server(protocol)
    target.on_timer(NOW_US)
    target.handle(PutRequest(99, b"k", b"existing", Session((0, 0), 0)), NOW_US)
    before = copy.deepcopy(snapshot_state(target))
    rejected_before = target.stats.rejected_requests

    effects = target.handle(request_, NOW_US + 1)

    assert len(effects) == 1
    effect = effects[0]
    assert isinstance(effect, Respond)
    assert isinstance(effect.reply, ErrorReply)
    assert effect.reply.request_id == 1
    assert effect.reply.code == "INVALID_ARGUMENT"
    assert message in effect.reply.message
    assert snapshot_state(target) == before
    assert target.stats.rejected_requests == rejected_before + 1


def test_too_many_read_keys() -> None:
    target = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1, max_read_keys=3))
    effects = target.handle(ReadTxRequest(7, (b"a", b"b", b"c", b"d"), Session((0,), 0)), NOW_US)
    assert effects == [Respond(ErrorReply(7, "INVALID_ARGUMENT", "a read transaction may name at most 3 keys, not 4"))]
    assert target.pending_reads == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_limits_are_inclusive(protocol: str) -> None:
    target = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1, protocol=protocol))
    key = b"k" * KEY_LIMIT
    effects = target.handle(PutRequest(1, key, b"v" * VALUE_LIMIT, Session((0,), 0)), NOW_US)
    reply = effects[0].reply  # type: ignore[union-attr]
    assert isinstance(reply, WriteReply)
    effects = target.handle(GetRequest(2, key, Session((0,), reply.timestamp)), NOW_US + 1)
    get = effects[0].reply  # type: ignore[union-attr]
    assert isinstance(get, GetReply)
    assert get.value == b"v" * VALUE_LIMIT


def test_empty_value_is_a_value_not_a_delete() -> None:
    target = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1))
    target.handle(PutRequest(1, b"k", b"", Session((0,), 0)), NOW_US)
    effects = target.handle(PutRequest(2, b"k", b"x", Session((0,), 0)), NOW_US + 1)
    reply = effects[0].reply  # type: ignore[union-attr]
    assert isinstance(reply, WriteReply)
    assert reply.found


def test_custom_limits_from_config() -> None:
    target = PartitionServer(
        CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1, max_key_bytes=4, max_value_bytes=2)
    )
    [effect] = target.handle(PutRequest(1, b"12345", b"v", Session((0,), 0)), NOW_US)
    assert isinstance(effect, Respond) and isinstance(effect.reply, ErrorReply)
    [effect] = target.handle(PutRequest(2, b"1234", b"vvv", Session((0,), 0)), NOW_US)
    assert isinstance(effect, Respond) and isinstance(effect.reply, ErrorReply)
    [effect] = target.handle(PutRequest(3, b"1234", b"vv", Session((0,), 0)), NOW_US)
    assert isinstance(effect, Respond) and isinstance(effect.reply, WriteReply)


def test_scan_bounds_are_not_validated_as_keys() -> None:
    # An empty start means "from the first key"; a start after the end is simply an empty range.
    target = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1))
    assert partition_of(b"k", 1) == 0
    target.handle(PutRequest(1, b"k", b"v", Session((0,), 0)), NOW_US)
    [effect] = target.handle(ScanRequest(2, b"", b"\xff", None, Session((0,), pack(NOW_US))), NOW_US + 1)
    assert isinstance(effect, Respond)
    assert effect.reply.items == ((b"k", b"v"),)  # type: ignore[union-attr]
    [effect] = target.handle(ScanRequest(3, b"z", b"a", None, Session((0,), 0)), NOW_US + 2)
    assert effect.reply.items == ()  # type: ignore[union-attr]
