"""Snapshot reads on their own (``okapikv.core.reads``; docs/protocol.md, "Snapshot reads";
docs/operations.md, "Read limits and paging"): a ``SnapshotReads`` over a bare ``PartitionState``,
with an admission that takes every session. Reads through whole DCs are in ``test_server_reads.py``."""

from __future__ import annotations

import pytest

from okapikv.core import reads as reads_module
from okapikv.core.catchup import CatchUp, Repairing
from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    OVERLOADED,
    Effect,
    ErrorCode,
    ErrorReply,
    ReadTxRequest,
    Respond,
    ScanReply,
    ScanRequest,
    Send,
    ServerId,
    Session,
    SliceReply,
    TxSlice,
)
from okapikv.core.mvstore import Version
from okapikv.core.partitioning import partition_of
from okapikv.core.reads import REPAIR_POLL_US, SnapshotReads
from okapikv.core.state import PartitionState
from okapikv.core.timestamps import WaitForClock, pack

T0 = 1_000_000
TOP = (1 << 64,)


def admit(request_id: int, session: Session, now_us: int, problem: str | None) -> list[Effect] | None:
    return None  # every session is taken (the server's admission: ``test_server_clock_offset.py``)


def make(partitions: int = 1, **limits: int) -> tuple[PartitionState, SnapshotReads]:
    state = PartitionState(CoreConfig(0, 0, 1, partitions, **limits))  # type: ignore[arg-type]
    return state, SnapshotReads(state, catch_up=CatchUp(state, stable_moves=True), admit=admit)


def session() -> Session:
    return Session((0,), 0)


def remote_key(partitions: int) -> bytes:
    return next(key for key in (b"k%d" % i for i in range(100)) if partition_of(key, partitions) != 0)


def test_admission_refuses_beyond_the_count_and_the_items_and_changes_nothing() -> None:
    state, reads = make(2, max_concurrent_reads=2, max_read_keys=3, max_scan_items=3, max_read_items=4)
    key = remote_key(2)
    assert reads.on_read(ReadTxRequest(1, (key,) * 3, session()), T0) != []  # a slice leaves
    refused = reads.on_read(ReadTxRequest(2, (key,) * 2, session()), T0)  # 3 + 2 keys > 4
    assert isinstance(refused, list) and isinstance(refused[0], Respond)
    reply = refused[0].reply
    assert isinstance(reply, ErrorReply) and reply.code == ErrorCode.RESOURCE_EXHAUSTED
    assert reply.message.startswith(OVERLOADED) and reads.count == 1
    assert reads.on_read(ReadTxRequest(3, (key,), session()), T0) != []  # 3 + 1 fits
    refused = reads.on_read(ReadTxRequest(4, (key,), session()), T0)  # a third read: over the count
    assert isinstance(refused, list) and reads.count == 2 and state.stats.reads_refused == 2
    assert reads.cancel([1, 3, 99]) == 2 and reads.count == 0  # cancelled reads stop counting
    assert reads.on_read(ReadTxRequest(5, (key,) * 3, session()), T0) != []


def test_a_reused_request_id_is_refused() -> None:
    state, reads = make(2)
    key = remote_key(2)
    reads.on_read(ReadTxRequest(1, (key,), session()), T0)
    refused = reads.on_read(ReadTxRequest(1, (key,), session()), T0)
    assert isinstance(refused, list) and isinstance(refused[0], Respond)
    assert isinstance(refused[0].reply, ErrorReply) and refused[0].reply.code == ErrorCode.INVALID_ARGUMENT


def test_tx_ids_start_above_the_clock_and_grow() -> None:
    state, reads = make(2)
    state.vv[0] = pack(T0 + 50)  # an HLC ahead of the clock
    key = remote_key(2)
    first = reads.on_read(ReadTxRequest(1, (key,), session()), T0)
    second = reads.on_read(ReadTxRequest(2, (key,), session()), T0)
    assert isinstance(first, list) and isinstance(second, list)
    [send_1], [send_2] = first, second
    assert isinstance(send_1, Send) and isinstance(send_1.message, TxSlice)
    assert isinstance(send_2, Send) and isinstance(send_2.message, TxSlice)
    assert send_1.message.tx_id == pack(T0 + 50) + 1 and send_2.message.tx_id == send_1.message.tx_id + 1


def test_hold_lowers_the_floor_to_every_running_snapshot_and_lease() -> None:
    state, reads = make(2)
    assert reads.hold(TOP) == TOP
    reads.on_read(ReadTxRequest(1, (remote_key(2),), session()), T0)
    assert reads.hold(TOP) == (pack(T0),) and reads.hold((5,)) == (5,)
    reads.cancel([1])
    assert reads.hold(TOP) == TOP


def scan_page(reads: SnapshotReads, request_id: int, now_us: int) -> ScanReply:
    [effect] = reads.on_read(ScanRequest(request_id, b"a", b"z", None, session()), now_us)  # type: ignore[misc]
    assert isinstance(effect, Respond) and isinstance(effect.reply, ScanReply)
    return effect.reply


def test_paged_scans_hold_their_snapshots_in_a_bounded_number_of_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reads_module, "MAX_SNAPSHOT_LEASES", 2)
    state, reads = make(max_scan_items=1)  # a page of one pair
    for key in (b"a1", b"a2"):
        state.store.insert(key, Version(b"v", pack(1), 0, None))
    pages = [scan_page(reads, request_id, T0 + request_id) for request_id in (1, 2, 3)]
    assert all(page.resume == b"a1\x00" and page.snapshot is not None for page in pages)
    assert reads.leases == 2 and reads.count == 0
    assert reads.hold(TOP) == (pack(T0 + 2),)  # the lease expiring first went
    reads.expire(T0 + 3 + state.config.snapshot_lease_us, [])
    assert reads.leases == 0 and reads.hold(TOP) == TOP


def test_a_silent_partition_fails_the_read_and_a_talking_one_only_at_the_deadline() -> None:
    state, reads = make(2, read_timeout_us=1_000, read_deadline_us=10_000)
    reads.on_read(ReadTxRequest(1, (remote_key(2),), session()), T0)
    effects: list[Effect] = []
    reads.expire(T0 + 1_000, effects)
    assert effects == []
    state.heard[1] = T0 + 900  # partition 1 keeps sending this server something
    reads.expire(T0 + 1_800, effects)
    assert effects == []
    reads.expire(T0 + 1_901, effects)
    [failed] = effects
    assert isinstance(failed, Respond) and isinstance(failed.reply, ErrorReply)
    assert failed.reply.code == ErrorCode.UNAVAILABLE and "partition 1" in failed.reply.message
    reads.on_read(ReadTxRequest(2, (remote_key(2),), session()), T0)
    effects = []
    for now_us in range(T0 + 500, T0 + 10_001, 500):
        state.heard[1] = now_us
        reads.expire(now_us, effects)
    assert effects == []
    reads.expire(T0 + 10_001, effects)
    assert len(effects) == 1 and reads.count == 0 and state.stats.read_timeouts == 2


def test_a_slice_waits_while_repairing_and_is_too_old_below_the_horizon() -> None:
    state = PartitionState(CoreConfig(0, 0, 1, 2))
    catch_up = CatchUp(state, stable_moves=True)
    reads = SnapshotReads(state, catch_up=catch_up, admit=admit)
    coordinator = ServerId(0, 1)
    slice_message = TxSlice(coordinator, 7, (pack(5),), (b"k",))
    catch_up.repair = Repairing((), {1: 1}, (0,))
    assert reads.on_slice(slice_message, T0) == WaitForClock(T0 + REPAIR_POLL_US, "repair")
    catch_up.repair = None
    above = PartitionState(CoreConfig(0, 0, 1, 2))
    above.advance_horizon((pack(6),))
    assert (SnapshotReads(above, catch_up=CatchUp(above, stable_moves=True), admit=admit).on_slice(slice_message, T0)
            == [Send(coordinator, SliceReply(above.id, 7, (), too_old=True))])
    state.advance_horizon((pack(5),))
    [served] = reads.on_slice(slice_message, T0)  # type: ignore[misc]
    assert isinstance(served, Send) and isinstance(served.message, SliceReply) and not served.message.too_old


def _stall(state: PartitionState) -> tuple[int, int, int]:
    stats = state.stats
    return stats.snapshot_reads_finished, stats.snapshot_read_stalls, stats.snapshot_read_stall_us


def test_a_transaction_stalls_once_for_its_longest_slice_wait() -> None:
    """Figure 4c/d per transaction: a RO-TX whose slices waited 2 and 5 ms stalled once, for 5 ms
    (they wait in parallel), not twice for 7; one whose slices were served at once did not stall."""
    partitions = 3
    state, reads = make(partitions)
    keys = {partition_of(key, partitions): key for key in (b"k%d" % i for i in range(100))}
    coordinator_key, first, second = keys[0], keys[1], keys[2]
    for request_id, waited in ((1, (2_000, 5_000)), (2, (0, 0))):
        effects = reads.on_read(ReadTxRequest(request_id, (coordinator_key, first, second), session()), T0)
        assert isinstance(effects, list)
        sent = [(effect.destination, effect.message) for effect in effects if isinstance(effect, Send)]
        assert sorted(destination.partition for destination, _ in sent) == [1, 2]
        answered: list[Effect] = []
        for (destination, message), waited_us in zip(sent, waited, strict=True):
            assert isinstance(message, TxSlice)
            answered += reads.on_slice_reply(SliceReply(destination, message.tx_id, (), waited_us=waited_us),
                                             T0 + 6_000)
        assert len([effect for effect in answered if isinstance(effect, Respond)]) == 1
    assert _stall(state) == (2, 1, 5_000)

