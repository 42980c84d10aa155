"""Bounded snapshot reads (``PartitionServer``, docs/operations.md "Read limits and paging").

Paging: a SCAN reply holds at most ``max_scan_items`` pairs, a slice examines a bounded number of
keys, and a reply that stopped early names where the rest starts and the snapshot it read; pages
read that snapshot, held above the GC horizon between pages by a lease. Retries with a fresh
snapshot are bounded; a read whose client went away is dropped; admission is bounded by a count
and by items; a partition that restarted gets its slices again at once, one that stays silent
fails the read, and one that keeps talking is waited for up to the read's deadline.

One DC of the simulator's deterministic world (``okapikv.sim.world.World.fixed``, no delay inside
the DC: every slice is delivered at once) or servers driven step by step where the test needs to
hold a message back.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    Effect,
    ErrorReply,
    GetRequest,
    PutRequest,
    ReadTxReply,
    ReadTxRequest,
    Respond,
    Restarted,
    ScanReply,
    ScanRequest,
    ScanSlice,
    Send,
    ServerId,
    Session,
    SliceReply,
    SnapshotRef,
    TxSlice,
    VvReport,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.reads import SCAN_EXAMINE_FACTOR
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack
from okapikv.sim.caller import Caller
from okapikv.sim.world import World

PROTOCOLS = ["okapi", "cure", "gentlerain", "eventual"]
T0 = 1_000_000


def keys(count: int, prefix: bytes = b"k") -> list[bytes]:
    return [b"%s%04d" % (prefix, index) for index in range(count)]


def one_dc(partitions: int, protocol: str = "okapi", **options: object) -> Caller:
    """A client session on one DC whose partitions talk without delay (``options``: CoreConfig)."""
    return Caller(World.fixed(1, partitions, protocol, lan_us=0, **options))


def fill(dc: Caller, names: Iterable[bytes]) -> dict[bytes, bytes]:
    model = {}
    for key in names:
        dc.put(key, b"v" + key)
        model[key] = b"v" + key
    return model


def pairs(pages: list[ScanReply]) -> list[tuple[bytes, bytes]]:
    return [pair for page in pages for pair in page.items]


def responses(effects: Iterable[Effect]) -> list[object]:
    return [effect.reply for effect in effects if isinstance(effect, Respond)]


def sends(effects: Iterable[Effect]) -> list[Send]:
    return [effect for effect in effects if isinstance(effect, Send)]


def fresh() -> Session:
    return Session((0,), 0)


def key_of(partition: int, partitions: int, prefix: bytes = b"x") -> bytes:
    return next(key for n in range(1_000) if partition_of(key := b"%s%d" % (prefix, n), partitions) == partition)


# ====================================================================== paging


class TestPaging:
    @pytest.mark.parametrize("protocol", PROTOCOLS)
    @pytest.mark.parametrize("partitions", [1, 3])
    def test_a_long_range_comes_in_capped_pages_that_make_up_the_whole_range(self, protocol: str,
                                                                             partitions: int) -> None:
        dc = one_dc(partitions, protocol, max_scan_items=5)
        model = fill(dc, keys(37))
        pages = dc.scan_pages(b"k", b"k9999")
        assert pairs(pages) == sorted(model.items())
        assert all(len(page.items) <= 5 for page in pages) and len(pages) >= 8
        assert [page.resume is None for page in pages] == [False] * (len(pages) - 1) + [True]
        # every page after the first read the first page's snapshot
        assert len({page.snapshot for page in pages[:-1]}) == 1 and pages[-1].snapshot is None
        starts = [page.resume or b"" for page in pages[:-1]]
        assert starts == sorted(starts) and len(set(starts)) == len(starts)

    @pytest.mark.parametrize("partitions", [1, 3])
    def test_keys_at_page_boundaries_are_neither_lost_nor_repeated(self, partitions: int) -> None:
        # The resume key is the last key + b"\x00", the next key in byte order: keys that extend
        # the last one, and the empty-suffix neighbours, must land on the next page exactly once.
        dc = one_dc(partitions, max_scan_items=1)
        names = [b"a", b"a\x00", b"a\x00\x00", b"a\x01", b"a\xff", b"a\xff\x00", b"b"]
        model = fill(dc, names)
        pages = dc.scan_pages(b"a", b"b")
        assert pairs(pages) == sorted(model.items())
        assert all(len(page.items) == 1 for page in pages)
        assert pages[0].resume == b"a\x00"

    @pytest.mark.parametrize("partitions", [1, 3])
    def test_deleted_keys_cost_examination_budget_not_a_whole_pass(self, partitions: int) -> None:
        dc = one_dc(partitions, max_scan_items=2)
        names = keys(60)
        fill(dc, names)
        for key in names[:-1]:
            dc.delete(key)
        pages = dc.scan_pages(b"k", b"k9999")
        assert pairs(pages) == [(names[-1], b"v" + names[-1])]
        # each slice examined at most SCAN_EXAMINE_FACTOR keys per pair it may return: 59
        # tombstones take several pages, most of them empty but each with its resume key
        assert len(pages) >= 59 // (SCAN_EXAMINE_FACTOR * 2 * partitions + 64 * partitions)
        assert any(not page.items and page.resume is not None for page in pages)

    @pytest.mark.parametrize("partitions", [1, 3])
    def test_a_limit_below_the_cap_is_one_page_and_above_it_stops_at_the_limit(self, partitions: int) -> None:
        dc = one_dc(partitions, max_scan_items=4)
        model = sorted(fill(dc, keys(20)).items())
        [page] = dc.scan_pages(b"k", b"k9999", limit=3)
        assert list(page.items) == model[:3] and page.resume is None  # more keys, but the limit is met
        pages = dc.scan_pages(b"k", b"k9999", limit=10)
        assert pairs(pages) == model[:10]
        assert [len(page.items) for page in pages] == [4, 4, 2]
        assert pages[-1].resume is None

    def test_the_byte_budget_cuts_a_page_but_always_returns_a_pair(self) -> None:
        dc = one_dc(1, max_scan_bytes=1_000)
        for key in keys(6):
            dc.put(key, b"x" * 400)
        pages = dc.scan_pages(b"k", b"k9999")
        assert [len(page.items) for page in pages] == [2, 2, 2]
        big = one_dc(1, max_scan_bytes=10)
        big.put(b"a", b"y" * 100)
        big.put(b"b", b"y" * 100)
        assert [len(page.items) for page in big.scan_pages(b"a", b"b")] == [1, 1]

    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_later_pages_read_the_first_pages_snapshot(self, protocol: str) -> None:
        dc = one_dc(3, protocol, max_scan_items=3)
        names = keys(12)
        model = fill(dc, names)
        writes = iter(range(100))

        def write_between_pages() -> None:
            index = next(writes)
            dc.put(names[-1], b"overwritten%d" % index)  # a key of the last page
            dc.delete(names[-2])
            dc.put(b"k0100%d" % index, b"new")  # a new key inside the range, after every page
            dc.world.tick()

        pages = dc.scan_pages(b"k", b"k9999", between=write_between_pages)
        if protocol == "eventual":  # no snapshots: a scan sees whatever is newest
            return
        assert pairs(pages) == sorted(model.items())

    def test_a_snapshot_is_held_between_pages_then_expires(self) -> None:
        dc = one_dc(2, max_scan_items=2, gc_interval_us=2_000, snapshot_lease_us=100_000)
        names = keys(6)
        model = fill(dc, names)
        first = dc.scan(b"k", b"k9999")
        assert isinstance(first, ScanReply) and first.resume is not None and first.snapshot is not None
        coordinator = dc.world.servers[0]
        assert coordinator.snapshot_leases == 1
        for key in names:
            dc.put(key, b"new")
        for _ in range(200):  # stabilization and GC run many times within the lease
            dc.world.tick()
        assert dc.world.now - T0 < 100_000
        second = dc.scan(first.resume, b"k9999", snapshot=first.snapshot)
        assert isinstance(second, ScanReply)
        assert list(second.items) == sorted(model.items())[2:4]  # the old values: still readable
        dc.world.advance(200_000)  # the lease runs out; later rounds collect the old versions
        for _ in range(50):
            dc.world.tick()
        assert coordinator.snapshot_leases == 0
        late = dc.scan(second.resume or b"", b"k9999", snapshot=second.snapshot)
        assert isinstance(late, ErrorReply) and late.code == "ABORTED"
        assert "garbage-collection horizon" in late.message
        assert coordinator.stats.reads_given_up == 1 and coordinator.pending_reads == 0

    def test_the_last_page_lets_go_of_the_lease(self) -> None:
        dc = one_dc(2, max_scan_items=2)
        fill(dc, keys(5))
        dc.scan_pages(b"k", b"k9999")
        assert dc.world.servers[0].snapshot_leases == 0

    def test_a_snapshot_of_another_dc_is_refused(self) -> None:
        server = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=2, num_partitions=1))
        request = ScanRequest(1, b"a", b"z", None, Session((0, 0), 0), SnapshotRef(1, (pack(5), pack(5))))
        [reply] = responses(server.handle(request, T0))
        assert isinstance(reply, ErrorReply) and reply.code == "ABORTED" and "DC 1" in reply.message
        assert server.pending_reads == 0

    def test_a_snapshot_taken_before_the_cluster_grew_is_padded(self) -> None:
        """One entry short: taken before the DC count grew (``okapikv.core.growth``): nothing of the new DC."""
        server = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=2, num_partitions=1))
        older = ScanRequest(2, b"a", b"z", None, Session((0, 0), 0), SnapshotRef(0, (pack(5),)))
        [reply] = responses(server.handle(older, T0))
        assert isinstance(reply, ScanReply)
        assert server.pending_reads == 0


@settings(max_examples=60, deadline=None)
@given(
    partitions=st.sampled_from([1, 2, 3]),
    cap=st.integers(1, 6),
    limit=st.one_of(st.none(), st.integers(0, 20)),
    written=st.lists(st.tuples(st.binary(min_size=1, max_size=2), st.one_of(st.none(), st.binary(max_size=2))),
                     max_size=40),
    between=st.lists(st.tuples(st.binary(min_size=1, max_size=2), st.one_of(st.none(), st.binary(max_size=2))),
                     max_size=6),
    bounds=st.tuples(st.binary(max_size=2), st.binary(max_size=2)),
)
def test_paged_scans_match_a_dict_at_the_scan_start(partitions: int, cap: int, limit: int | None,
                                                    written: list[tuple[bytes, bytes | None]],
                                                    between: list[tuple[bytes, bytes | None]],
                                                    bounds: tuple[bytes, bytes]) -> None:
    """Whatever the cap, limit and partitions, and whatever is written between pages, the pages of
    a scan together are the model's range at the scan's start, first ``limit`` pairs."""
    dc = one_dc(partitions, max_scan_items=cap, gc_interval_us=2_000, gc_budget=3)
    model: dict[bytes, bytes] = {}

    def apply(key: bytes, value: bytes | None) -> None:
        if value is None:
            dc.delete(key)
        else:
            dc.put(key, value)

    for key, value in written:
        apply(key, value)
        if value is None:
            model.pop(key, None)
        else:
            model[key] = value
    start, end = bounds
    expected = sorted((k, v) for k, v in model.items() if start <= k <= end)[:limit]
    later = iter(between)

    def write() -> None:
        for key, value in later:
            apply(key, value)
            dc.world.tick()
            return

    if start > end:
        return
    pages = dc.scan_pages(start, end, limit, between=write)
    assert pairs(pages) == expected
    assert all(len(page.items) <= cap for page in pages)


# ====================================================================== retries


def test_a_read_below_the_horizon_every_time_gives_up_after_the_retries() -> None:
    coordinator = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=2,
                                             max_snapshot_retries=2))
    peer = ServerId(0, 1)
    effects = coordinator.handle(ScanRequest(1, b"a", b"z", None, fresh()), T0)
    now = T0
    answers: list[object] = []
    while not answers:
        [sent] = [s for s in sends(effects) if s.destination == peer]
        assert isinstance(sent.message, ScanSlice)
        now += 10
        effects = coordinator.handle(SliceReply(peer, sent.message.tx_id, (), True), now)
        answers = responses(effects)
        if not answers:
            assert sends(effects) == []  # the retry runs from the timer
            assert coordinator.next_deadline() <= now + 1
            effects = coordinator.on_timer(now + 1)
    [answer] = answers
    assert isinstance(answer, ErrorReply) and answer.code == "ABORTED" and "3 attempts" in answer.message
    assert coordinator.stats.snapshot_retries == 2 and coordinator.stats.reads_given_up == 1
    assert coordinator.pending_reads == 0 and coordinator.parked_count == 0


def test_a_later_page_below_the_horizon_fails_instead_of_taking_a_new_snapshot() -> None:
    coordinator = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=2))
    snapshot = SnapshotRef(0, (pack(T0),))
    effects = coordinator.handle(ScanRequest(1, b"m", b"z", None, fresh(), snapshot), T0 + 10)
    [sent] = sends(effects)
    assert isinstance(sent.message, ScanSlice) and sent.message.snapshot == snapshot.vector
    [answer] = responses(coordinator.handle(SliceReply(ServerId(0, 1), sent.message.tx_id, (), True), T0 + 20))
    assert isinstance(answer, ErrorReply) and answer.code == "ABORTED"
    assert coordinator.stats.snapshot_retries == 0 and coordinator.pending_reads == 0


# ====================================================================== cancellation


class TestCancel:
    def test_a_cancelled_read_is_dropped_and_its_late_slice_ignored(self) -> None:
        coordinator = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=2))
        [sent] = sends(coordinator.handle(ReadTxRequest(1, (key_of(1, 2),), fresh()), T0))
        assert coordinator.pending_reads == 1
        assert coordinator.cancel_reads([1, 99]) == 1
        assert coordinator.pending_reads == 0 and coordinator.stats.reads_abandoned == 1
        assert isinstance(sent.message, TxSlice)
        assert coordinator.handle(SliceReply(ServerId(0, 1), sent.message.tx_id, ()), T0 + 1) == []
        # it no longer holds the GC horizon back nor counts against the limits
        assert all(read_count == 0 for read_count in (coordinator.pending_reads, coordinator.parked_count))

    def test_a_parked_read_is_dropped_from_the_parked_requests(self) -> None:
        # GentleRain's coordinator waits for the GST to reach the session's dependency time.
        coordinator = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1,
                                                 protocol="gentlerain"))
        assert coordinator.handle(ReadTxRequest(1, (b"k",), Session((0,), pack(T0 + 5_000))), T0) == []
        assert coordinator.parked_count == 1 and coordinator.pending_reads == 1
        coordinator.cancel_reads([1])
        assert coordinator.parked_count == 0 and coordinator.pending_reads == 0
        assert all(not isinstance(e, Respond) for e in coordinator.on_timer(T0 + 100_000))

    def test_only_reads_are_cancelled(self) -> None:
        server = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1))
        assert server.cancel_reads([1, 2]) == 0
        [reply] = responses(server.handle(PutRequest(1, b"k", b"v", fresh()), T0))
        assert not isinstance(reply, ErrorReply)


# ====================================================================== admission


class TestAdmission:
    def test_reads_over_the_count_are_refused_at_once_and_change_nothing(self) -> None:
        coordinator = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=2,
                                                 max_concurrent_reads=2))
        far = key_of(1, 2)
        for request_id in (1, 2):
            assert sends(coordinator.handle(ReadTxRequest(request_id, (far,), fresh()), T0))
        stable = coordinator.stable
        [refused] = responses(coordinator.handle(ReadTxRequest(3, (far,), Session((pack(T0 + 7),), 0)), T0))
        assert isinstance(refused, ErrorReply) and refused.code == "RESOURCE_EXHAUSTED"
        assert "max_concurrent_reads 2" in refused.message
        assert coordinator.stable == stable and coordinator.pending_reads == 2
        assert coordinator.stats.reads_refused == 1
        # single-key operations are not affected
        [got] = responses(coordinator.handle(GetRequest(4, key_of(0, 2), fresh()), T0))
        assert not isinstance(got, ErrorReply)
        coordinator.cancel_reads([1])
        assert sends(coordinator.handle(ReadTxRequest(5, (far,), fresh()), T0))  # room again

    def test_reads_over_the_item_budget_are_refused_but_one_always_fits(self) -> None:
        coordinator = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=2,
                                                 max_scan_items=100, max_read_keys=100, max_read_items=150))
        assert sends(coordinator.handle(ScanRequest(1, b"a", b"z", None, fresh()), T0))  # counts 100
        [refused] = responses(coordinator.handle(ScanRequest(2, b"a", b"z", None, fresh()), T0))
        assert isinstance(refused, ErrorReply) and refused.code == "RESOURCE_EXHAUSTED"
        assert sends(coordinator.handle(ScanRequest(3, b"a", b"z", 50, fresh()), T0))  # a 50-item page fits
        many = tuple(key_of(1, 2, b"k%d-" % n) for n in range(60))
        [refused] = responses(coordinator.handle(ReadTxRequest(4, many, fresh()), T0))
        assert isinstance(refused, ErrorReply) and refused.code == "RESOURCE_EXHAUSTED"
        coordinator.cancel_reads([1, 3])
        assert sends(coordinator.handle(ReadTxRequest(5, many, fresh()), T0))

    def test_a_read_transaction_over_max_read_keys_is_refused_before_any_work(self) -> None:
        coordinator = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=2))
        request = ReadTxRequest(1, tuple(b"k%d" % n for n in range(100_000)), fresh())
        [reply] = responses(coordinator.handle(request, T0))
        assert isinstance(reply, ErrorReply) and reply.code == "INVALID_ARGUMENT"
        assert "at most 10000 keys, not 100000" in reply.message
        assert coordinator.pending_reads == 0 and coordinator.stats.operations["read_tx"] == 0


# ====================================================================== slow, lost and silent slices


class TestSlowAndLostSlices:
    config = CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=3, read_timeout_us=1_000_000,
                        read_deadline_us=10_000_000)

    def start(self, coordinator: PartitionServer, partition: int) -> Send:
        effects = coordinator.handle(ReadTxRequest(1, (key_of(partition, 3),), fresh()), T0)
        [sent] = sends(effects)
        return sent

    def test_a_restarted_partition_gets_its_slice_again_at_once(self) -> None:
        coordinator = PartitionServer(self.config)
        sent = self.start(coordinator, 1)
        peer = PartitionServer(CoreConfig(dc=0, partition=1, num_dcs=1, num_partitions=3))
        assert isinstance(sent.message, TxSlice)
        peer.handle(sent.message, T0 + 10)  # took it, then died before its answer left
        restarted = PartitionServer(CoreConfig(dc=0, partition=1, num_dcs=1, num_partitions=3))
        announcements = [s for s in sends(restarted.start_catch_up()) if isinstance(s.message, Restarted)]
        assert sorted(s.destination for s in announcements) == [ServerId(0, 0), ServerId(0, 2)]
        [again] = sends(coordinator.handle(announcements[0].message, T0 + 20))
        assert again.destination == ServerId(0, 1) and again.message == sent.message
        assert coordinator.stats.slices_resent == 1
        [answer] = sends(restarted.handle(again.message, T0 + 30))
        [reply] = responses(coordinator.handle(answer.message, T0 + 40))
        assert isinstance(reply, ReadTxReply) and coordinator.pending_reads == 0

    def test_a_silent_partition_fails_the_read_without_a_rerun(self) -> None:
        coordinator = PartitionServer(self.config)
        self.start(coordinator, 1)
        resent: list[Send] = []
        now = T0
        answers: list[object] = []
        while not answers:
            now = coordinator.next_deadline()
            effects = coordinator.on_timer(now)
            resent += [s for s in sends(effects) if isinstance(s.message, TxSlice | ScanSlice)]
            answers = responses(effects)
        [answer] = answers
        assert isinstance(answer, ErrorReply) and answer.code == "UNAVAILABLE"
        assert "partition 1" in answer.message and "read_timeout_us" in answer.message
        assert T0 + 1_000_000 < now <= T0 + 1_100_000
        assert resent == [] and coordinator.stats.read_timeouts == 1 and coordinator.pending_reads == 0

    def test_a_slow_partition_that_keeps_talking_is_waited_for_until_the_deadline(self) -> None:
        coordinator = PartitionServer(self.config)
        sent = self.start(coordinator, 1)
        peer = ServerId(0, 1)
        now = T0
        answers: list[object] = []
        while not answers:
            now = coordinator.next_deadline()
            coordinator.handle(VvReport(peer, (pack(now),), (pack(now),)), now)  # alive, busy elsewhere
            answers = responses(coordinator.on_timer(now))
            if now < T0 + 5_000_000:
                assert not answers
        [answer] = answers
        assert isinstance(answer, ErrorReply) and answer.code == "UNAVAILABLE" and "read_deadline_us" in answer.message
        assert T0 + 10_000_000 < now <= T0 + 10_100_000
        assert isinstance(sent.message, TxSlice)
        assert coordinator.handle(SliceReply(peer, sent.message.tx_id, ()), now) == []  # too late: ignored

    def test_a_slow_partition_that_answers_completes_the_read(self) -> None:
        coordinator = PartitionServer(self.config)
        sent = self.start(coordinator, 1)
        peer = ServerId(0, 1)
        for now in range(T0, T0 + 3_000_000, 50_000):
            coordinator.handle(VvReport(peer, (pack(now),), (pack(now),)), now)
            assert not responses(coordinator.on_timer(now))
        assert isinstance(sent.message, TxSlice)
        [reply] = responses(coordinator.handle(SliceReply(peer, sent.message.tx_id, ()), T0 + 3_000_000))
        assert isinstance(reply, ReadTxReply)
