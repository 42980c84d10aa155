"""The multi-version store: chain order, idempotent insert, visibility reads, ordered scans, GC."""

from __future__ import annotations

import pickle

import pytest

from okapikv.core.mvstore import MultiVersionStore, Version


def always(version: Version) -> bool:
    return True


def never(version: Version) -> bool:
    return False


def up_to(timestamp: int):  # type: ignore[no-untyped-def]
    return lambda version: version.timestamp <= timestamp


def orders(store: MultiVersionStore, key: bytes) -> list[tuple[int, int]]:
    return [version.order for version in store.versions(key)]


class TestInsertAndOrder:
    def test_chain_is_ordered_by_timestamp_then_source_dc(self) -> None:
        store = MultiVersionStore()
        for timestamp, dc in [(5, 0), (3, 2), (5, 2), (9, 1), (5, 1), (1, 0)]:
            assert store.insert(b"k", Version(b"v", timestamp, dc, None))
        assert orders(store, b"k") == [(1, 0), (3, 2), (5, 0), (5, 1), (5, 2), (9, 1)]
        assert store.version_count == 6

    def test_same_order_in_every_insertion_order(self) -> None:
        # Every DC applies the same total order to concurrent writes: replicas converge.
        versions = [(7, 0, b"a"), (7, 1, b"b"), (7, 2, b"c"), (6, 1, b"d")]
        results = set()
        for rotation in range(len(versions)):
            store = MultiVersionStore()
            for timestamp, dc, value in versions[rotation:] + versions[:rotation]:
                store.insert(b"k", Version(value, timestamp, dc, None))
            latest = store.latest(b"k")
            assert latest is not None
            results.add((latest.value, tuple(orders(store, b"k"))))
        assert results == {(b"c", ((6, 1), (7, 0), (7, 1), (7, 2)))}

    def test_duplicate_insert_is_ignored(self) -> None:
        store = MultiVersionStore()
        assert store.insert(b"k", Version(b"first", 5, 1, None))
        assert store.insert(b"k", Version(b"other", 6, 1, None))
        assert not store.insert(b"k", Version(b"again", 5, 1, None))
        assert not store.insert(b"k", Version(b"again", 6, 1, None))
        assert [v.value for v in store.versions(b"k")] == [b"first", b"other"]
        assert store.version_count == 2

    def test_same_timestamp_other_dc_is_not_a_duplicate(self) -> None:
        store = MultiVersionStore()
        assert store.insert(b"k", Version(b"a", 5, 1, None))
        assert store.insert(b"k", Version(b"b", 5, 0, None))
        assert orders(store, b"k") == [(5, 0), (5, 1)]

    def test_len_counts_keys(self) -> None:
        store = MultiVersionStore()
        store.insert(b"a", Version(b"1", 1, 0, None))
        store.insert(b"a", Version(b"2", 2, 0, None))
        store.insert(b"b", Version(None, 3, 0, None))
        assert len(store) == 2
        assert store.version_count == 3

    def test_versions_is_a_copy(self) -> None:
        store = MultiVersionStore()
        store.insert(b"k", Version(b"v", 1, 0, None))
        store.versions(b"k").clear()
        assert len(store.versions(b"k")) == 1
        assert store.versions(b"missing") == []


class TestReads:
    def test_newest_visible(self) -> None:
        store = MultiVersionStore()
        for timestamp in (10, 20, 30):
            store.insert(b"k", Version(str(timestamp).encode(), timestamp, 0, None))
        assert store.newest(b"k", always).value == b"30"  # type: ignore[union-attr]
        assert store.newest(b"k", up_to(25)).value == b"20"  # type: ignore[union-attr]
        assert store.newest(b"k", up_to(10)).value == b"10"  # type: ignore[union-attr]
        assert store.newest(b"k", up_to(9)) is None
        assert store.newest(b"k", never) is None
        assert store.newest(b"missing", always) is None

    def test_newest_returns_tombstones(self) -> None:
        store = MultiVersionStore()
        store.insert(b"k", Version(b"v", 1, 0, None))
        store.insert(b"k", Version(None, 2, 0, None))
        newest = store.newest(b"k", always)
        assert newest is not None
        assert newest.value is None
        assert store.newest(b"k", up_to(1)).value == b"v"  # type: ignore[union-attr]

    def test_newest_breaks_timestamp_ties_by_source_dc(self) -> None:
        store = MultiVersionStore()
        store.insert(b"k", Version(b"dc2", 5, 2, None))
        store.insert(b"k", Version(b"dc0", 5, 0, None))
        assert store.newest(b"k", always).value == b"dc2"  # type: ignore[union-attr]

    def test_latest(self) -> None:
        store = MultiVersionStore()
        assert store.latest(b"k") is None
        store.insert(b"k", Version(b"b", 2, 0, None))
        store.insert(b"k", Version(b"a", 1, 0, None))
        assert store.latest(b"k").value == b"b"  # type: ignore[union-attr]


class TestRangeScan:
    def make(self) -> MultiVersionStore:
        store = MultiVersionStore()
        for key in [b"b", b"a", b"ab", b"\xff", b"B", b"c", b"\x00", b"aa"]:
            store.insert(key, Version(key, 1, 0, None))
        return store

    def test_inclusive_in_byte_order(self) -> None:
        store = self.make()
        assert list(store.keys_in_range(b"a", b"b")) == [b"a", b"aa", b"ab", b"b"]

    def test_full_range(self) -> None:
        store = self.make()
        assert list(store.keys_in_range(b"", b"\xff\xff")) == sorted(
            [b"b", b"a", b"ab", b"\xff", b"B", b"c", b"\x00", b"aa"]
        )
        assert list(store.keys()) == list(store.keys_in_range(b"", b"\xff\xff"))

    def test_bounds_need_not_exist(self) -> None:
        store = self.make()
        assert list(store.keys_in_range(b"a0", b"az")) == [b"aa", b"ab"]

    def test_single_key_range(self) -> None:
        store = self.make()
        assert list(store.keys_in_range(b"ab", b"ab")) == [b"ab"]

    def test_upper_case_sorts_before_lower_case(self) -> None:
        store = self.make()
        assert list(store.keys_in_range(b"A", b"Z")) == [b"B"]

    def test_empty_when_start_after_end(self) -> None:
        store = self.make()
        assert list(store.keys_in_range(b"c", b"a")) == []

    def test_includes_keys_whose_only_version_is_a_tombstone(self) -> None:
        store = MultiVersionStore()
        store.insert(b"gone", Version(None, 1, 0, None))
        assert list(store.keys_in_range(b"a", b"z")) == [b"gone"]


class TestGarbageCollection:
    def chain(self, *specs: tuple[bytes | None, int]) -> MultiVersionStore:
        store = MultiVersionStore()
        for value, timestamp in specs:
            store.insert(b"k", Version(value, timestamp, 0, None))
        return store

    def test_drops_versions_older_than_newest_universally_visible(self) -> None:
        store = self.chain((b"1", 1), (b"2", 2), (b"3", 3), (b"4", 4))
        assert store.collect(b"k", up_to(3)) == 2
        assert [v.value for v in store.versions(b"k")] == [b"3", b"4"]
        assert store.version_count == 2
        assert store.collected_count == 2

    def test_nothing_universally_visible_keeps_everything(self) -> None:
        store = self.chain((b"1", 1), (b"2", 2))
        assert store.collect(b"k", never) == 0
        assert store.collect(b"k", up_to(0)) == 0
        assert len(store.versions(b"k")) == 2

    def test_single_visible_value_is_kept(self) -> None:
        store = self.chain((b"1", 1))
        assert store.collect(b"k", always) == 0
        assert [v.value for v in store.versions(b"k")] == [b"1"]

    def test_universally_visible_tombstone_is_removed_with_everything_older(self) -> None:
        store = self.chain((b"1", 1), (None, 2), (b"3", 3))
        assert store.collect(b"k", up_to(2)) == 2
        assert [v.value for v in store.versions(b"k")] == [b"3"]

    def test_newest_tombstone_removes_the_key(self) -> None:
        store = self.chain((b"1", 1), (None, 2))
        assert store.collect(b"k", always) == 2
        assert store.versions(b"k") == []
        assert len(store) == 0
        assert list(store.keys()) == []
        assert store.version_count == 0

    def test_tombstone_not_yet_universally_visible_is_kept(self) -> None:
        store = self.chain((b"1", 1), (None, 2))
        assert store.collect(b"k", up_to(1)) == 0
        assert [v.value for v in store.versions(b"k")] == [b"1", None]

    def test_tombstone_is_kept_until_removable(self) -> None:
        # A replica keeps a universally visible tombstone while an older concurrent write may still
        # arrive (the server's "settled" test); the older versions below it go at once.
        store = self.chain((b"1", 1), (None, 2))
        assert store.collect(b"k", always, tombstone_removable=never) == 1
        assert [v.value for v in store.versions(b"k")] == [None]
        assert store.collect_some(always, 10, tombstone_removable=never) == 0
        assert store.versions(b"k")  # still queued: a later pass may remove it
        assert store.collect_some(always, 10, tombstone_removable=up_to(2)) == 1
        assert len(store) == 0

    def test_tombstone_removable_is_not_asked_about_values(self) -> None:
        store = self.chain((b"1", 1), (b"2", 2))
        assert store.collect(b"k", always, tombstone_removable=never) == 1
        assert [v.value for v in store.versions(b"k")] == [b"2"]

    def test_collect_missing_key(self) -> None:
        assert MultiVersionStore().collect(b"nothing", always) == 0

    def test_key_can_be_written_again_after_removal(self) -> None:
        store = self.chain((None, 2))
        store.collect(b"k", always)
        assert store.insert(b"k", Version(b"new", 5, 0, None))
        assert list(store.keys()) == [b"k"]


class TestCollectSome:
    def test_only_keys_needing_collection_are_queued(self) -> None:
        store = MultiVersionStore()
        store.insert(b"single", Version(b"v", 1, 0, None))
        assert store.collect_some(always, 10) == 0
        assert store.versions(b"single")[0].value == b"v"

    def test_budget_limits_keys_examined(self) -> None:
        store = MultiVersionStore()
        for key in (b"a", b"b", b"c"):
            store.insert(key, Version(b"old", 1, 0, None))
            store.insert(key, Version(b"new", 2, 0, None))
        assert store.collect_some(always, 2) == 2
        remaining = [key for key in (b"a", b"b", b"c") if len(store.versions(key)) == 2]
        assert remaining == [b"c"]
        assert store.collect_some(always, 2) == 1
        assert all(len(store.versions(key)) == 1 for key in (b"a", b"b", b"c"))
        assert store.collect_some(always, 2) == 0

    def test_round_robin_requeues_unfinished_keys_at_the_back(self) -> None:
        store = MultiVersionStore()
        for key in (b"a", b"b", b"c"):
            store.insert(key, Version(key, 1, 0, None))
            store.insert(key, Version(key, 2, 0, None))
        visited: list[bytes | None] = []

        def record(version: Version) -> bool:
            visited.append(version.value)
            return False  # nothing is universally visible: every key stays queued

        for _ in range(4):
            assert store.collect_some(record, 1) == 0
        # collect() looks at a key's two versions, newest first: one key per call, in turn.
        assert visited[::2] == [b"a", b"b", b"c", b"a"]
        # The queue is now b, c, a: a budget of 1 finishes b only.
        assert store.collect_some(up_to(2), 1) == 1
        assert [len(store.versions(key)) for key in (b"a", b"b", b"c")] == [2, 1, 2]

    def test_a_key_written_again_while_queued_keeps_its_place(self) -> None:
        store = MultiVersionStore()
        for key in (b"a", b"b"):
            store.insert(key, Version(key, 1, 0, None))
            store.insert(key, Version(key, 2, 0, None))
        store.insert(b"a", Version(b"a", 3, 0, None))  # already queued: stays at the front
        visited: list[bytes | None] = []

        def record(version: Version) -> bool:
            visited.append(version.value)
            return False

        for _ in range(3):
            store.collect_some(record, 1)
        assert [visited[0], visited[3], visited[5]] == [b"a", b"b", b"a"]  # a: 3 versions, b: 2
        assert store.collectable_count == 2

    def test_tombstone_only_key_is_collected(self) -> None:
        store = MultiVersionStore()
        store.insert(b"t", Version(None, 1, 0, None))
        assert store.collect_some(up_to(0), 5) == 0
        assert store.versions(b"t")  # not yet visible everywhere: kept and still queued
        assert store.collect_some(always, 5) == 1
        assert len(store) == 0

    def test_budget_larger_than_queue(self) -> None:
        store = MultiVersionStore()
        store.insert(b"a", Version(b"1", 1, 0, None))
        store.insert(b"a", Version(b"2", 2, 0, None))
        assert store.collect_some(always, 1_000) == 1
        assert store.collect_some(always, 1_000) == 0

    def test_keys_written_after_collection_are_queued_again(self) -> None:
        store = MultiVersionStore()
        store.insert(b"a", Version(b"1", 1, 0, None))
        store.insert(b"a", Version(b"2", 2, 0, None))
        store.collect_some(always, 10)
        store.insert(b"a", Version(b"3", 3, 0, None))
        assert store.collect_some(always, 10) == 1
        assert [v.value for v in store.versions(b"a")] == [b"3"]


class TestSingleVersionRepresentation:
    """A key holding one version maps to the Version itself (no one-element list: 80 B/key less);
    a second version promotes it to a list, GC leaving one demotes it. Checked on the private
    ``_chains`` because the public API must not be able to tell the difference."""

    def test_single_version_round_trips_through_every_operation(self) -> None:
        store = MultiVersionStore()
        store.track_changes = True
        version = Version(b"v", 5, 1, None)
        assert store.insert(b"k", version)
        assert store._chains[b"k"] is version
        assert not store.insert(b"k", Version(b"again", 5, 1, None))  # still idempotent
        assert store._chains[b"k"] is version
        assert store.newest(b"k", always) is version and store.newest(b"k", never) is None
        assert store.newest(b"k", up_to(4)) is None
        assert store.latest(b"k") is version
        assert store.versions(b"k") == [version]
        store.versions(b"k").clear()
        assert store.versions(b"k") == [version]  # a copy, not the entry
        assert list(store.keys_in_range(b"a", b"z")) == [b"k"]
        assert store.written_by(1, 4) == [(b"k", version)] and store.written_by(1, 5) == []
        assert store.written_by(0, 0) == []
        assert store.collect(b"k", always) == 0 and store._chains[b"k"] is version
        assert store.collect_some(always, 10) == 0
        assert store.drain_changes() == [(b"k", version, True)]
        assert (len(store), store.version_count) == (1, 1)

    def test_second_version_promotes_in_order(self) -> None:
        for first, second in (((1, 0), (2, 0)), ((2, 0), (1, 0)), ((3, 0), (3, 1)), ((3, 1), (3, 0))):
            store = MultiVersionStore()
            store.insert(b"k", Version(b"a", *first, None))
            store.insert(b"k", Version(b"b", *second, None))
            chain = store._chains[b"k"]
            assert isinstance(chain, list) and len(chain) == 2
            assert orders(store, b"k") == sorted([first, second])
            assert store.version_count == 2

    def test_collection_demotes_to_the_version_itself(self) -> None:
        store = MultiVersionStore()
        for timestamp in (1, 2, 3):
            store.insert(b"k", Version(b"%d" % timestamp, timestamp, 0, None))
        assert store.collect(b"k", up_to(2)) == 1
        assert isinstance(store._chains[b"k"], list)  # two left: still a list
        store.insert(b"j", Version(b"j1", 1, 0, None))
        store.insert(b"j", Version(b"j2", 2, 0, None))
        assert store.collect_some(always, 10) == 2
        for key, value in ((b"k", b"3"), (b"j", b"j2")):
            entry = store._chains[key]
            assert isinstance(entry, Version) and entry.value == value
        assert store.collect_some(always, 10) == 0  # demoted keys left the GC queue
        assert store.insert(b"k", Version(b"4", 4, 0, None))  # and promote again
        assert [v.value for v in store.versions(b"k")] == [b"3", b"4"]
        assert store.version_count == 3

    def test_single_tombstone_stays_queued_until_removed(self) -> None:
        store = MultiVersionStore()
        store.insert(b"k", Version(b"1", 1, 0, None))
        store.insert(b"k", Version(None, 2, 0, None))
        assert store.collect(b"k", always, tombstone_removable=never) == 1
        assert isinstance(store._chains[b"k"], Version)  # the tombstone alone, demoted
        assert store.collect_some(always, 10, tombstone_removable=never) == 0
        assert store.collect_some(always, 10) == 1
        assert b"k" not in store._chains and list(store.keys()) == []


class TestVersionClasses:
    """``Version(...)`` makes a per-DC subclass instance: two slots when there is no dependency
    vector, three with one; the fields read back exactly as given."""

    def test_fields_read_back_and_the_slots_are_minimal(self) -> None:
        plain = Version(b"v", 1 << 62, 2, None)
        with_dv = Version(None, 7, 0, (7, 3, 0))
        assert (plain.value, plain.timestamp, plain.source_dc, plain.dv) == (b"v", 1 << 62, 2, None)
        assert (with_dv.value, with_dv.timestamp, with_dv.source_dc, with_dv.dv) == (None, 7, 0, (7, 3, 0))
        assert isinstance(plain, Version) and isinstance(with_dv, Version)
        assert type(plain).__slots__ == ("value", "timestamp")
        assert type(with_dv).__slots__ == ("value", "timestamp", "dv")
        assert not hasattr(plain, "__dict__") and not hasattr(with_dv, "__dict__")
        assert type(Version(b"w", 1, 2, None)) is type(plain)  # one class per (DC, has dv)
        assert type(Version(b"w", 1, 1, None)) is not type(plain)

    def test_order_dependency_vector_and_pickling(self) -> None:
        version = Version(b"v", 9, 1, None)
        assert version.order == (9, 1)
        assert version.dependency_vector(3) == (0, 9, 0)
        assert Version(b"v", 9, 1, (4, 9, 2)).dependency_vector(3) == (4, 9, 2)
        copy = pickle.loads(pickle.dumps(version))
        assert (copy.value, copy.timestamp, copy.source_dc, copy.dv) == (b"v", 9, 1, None)
        assert repr(copy) == repr(version)

    def test_a_negative_dc_is_refused(self) -> None:
        with pytest.raises(ValueError):
            Version(b"v", 1, -1, None)
