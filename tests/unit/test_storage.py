"""The SQLite store, group commit and recovery (``okapikv.storage``), without a server process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.messages import PutRequest, Session
from okapikv.core.mvstore import Change, Version
from okapikv.core.server import Changes, PartitionServer
from okapikv.core.timestamps import pack, physical_of
from okapikv.storage import DataDirError, Identity, SqliteStore
from okapikv.storage.group_commit import GroupCommitter
from okapikv.storage.recovery import recover
from okapikv.storage.sqlite import CommitGroup, State

IDENTITY = Identity("test", ("a", "b"), 1, "okapi", "a", 0)
BIG = (1 << 64) - 1


def state(*entries: int) -> State:
    vector = tuple(entries) or (0, 0)
    return State(vector, vector, vector, vector)


def test_round_trip_keeps_values_tombstones_vectors_and_huge_timestamps(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, IDENTITY)
    changes = [
        Change(b"k", Version(b"v1", 5, 0, (5, 0)), True),
        Change(b"k", Version(b"", 1 << 63, 1, None), True),  # empty value, timestamp above 2**63
        Change(b"gone", Version(None, BIG - 1, 0, (BIG - 1, 3)), True),  # tombstone
        Change(b"x", Version(b"old", 2, 0, None), True),
        Change(b"x", Version(b"old", 2, 0, None), False),  # removed in the same group
    ]
    store.commit(CommitGroup(1, changes, state(7, BIG), 123))
    store.close()
    again = SqliteStore(tmp_path, IDENTITY)
    loaded = [(key, v.value, v.timestamp, v.source_dc, v.dv) for key, v in again.load_versions()]
    assert loaded == [
        (b"gone", None, BIG - 1, 0, (BIG - 1, 3)),
        (b"k", b"v1", 5, 0, (5, 0)),
        (b"k", b"", 1 << 63, 1, None),
    ]
    assert again.load_state() == state(7, BIG)
    assert again.load_clock_bound_us() == 123
    again.close()


def test_a_removal_then_a_reinsert_leaves_the_version(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, IDENTITY)
    version = Version(b"v", 9, 0, None)
    store.commit(CommitGroup(1, [Change(b"k", version, True)]))
    store.commit(CommitGroup(2, [Change(b"k", version, False), Change(b"k", version, True)]))
    assert store.version_count() == 1
    store.close()


def test_another_servers_directory_is_refused(tmp_path: Path) -> None:
    SqliteStore(tmp_path, IDENTITY).close()
    with pytest.raises(DataDirError, match=r"partition 0 \(this server: 1\)"):
        SqliteStore(tmp_path, Identity("test", ("a", "b"), 1, "okapi", "a", 1))
    with pytest.raises(DataDirError, match="protocol 'okapi'"):
        SqliteStore(tmp_path, Identity("test", ("a", "b"), 1, "cure", "a", 0))
    SqliteStore(tmp_path, IDENTITY).close()  # the refusals released the lock


def test_a_directory_in_use_is_refused(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path, IDENTITY)
    with pytest.raises(DataDirError, match="in use"):
        SqliteStore(tmp_path, IDENTITY)
    first.close()


def test_maintenance_truncates_the_wal_and_returns_free_pages(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, IDENTITY)
    big = b"x" * 4000
    versions = [Version(big, index + 1, 0, None) for index in range(3000)]
    store.commit(CommitGroup(1, [Change(b"k%d" % i, v, True) for i, v in enumerate(versions)]))
    store.commit(CommitGroup(2, [Change(b"k%d" % i, v, False) for i, v in enumerate(versions)]))
    before = store.disk_bytes()
    store.maintain()
    assert store.vacuumed_pages > 0
    assert Path(f"{store.path}-wal").stat().st_size == 0
    assert store.disk_bytes() < before / 4
    store.close()


# ====================================================================== group commit


async def until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Wait for a commit on the worker thread (an fsync may take long on a busy machine)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def changes(inserted: int = 0, vv: tuple[int, ...] = (0, 0), prefix: bytes = b"k") -> Changes:
    log = [Change(prefix + b"%d" % i, Version(b"v", i + 1, 0, None), True) for i in range(inserted)]
    return Changes(log, vv, vv, vv, vv)


def test_group_commit_orders_durability_and_bounds_the_clock(tmp_path: Path) -> None:
    async def main() -> None:
        store = SqliteStore(tmp_path, IDENTITY)
        durable_calls: list[int] = []
        committer = GroupCommitter(store, on_durable=lambda: durable_calls.append(committer.durable),
                                   on_failure=lambda error: pytest.fail(str(error)), clock_lead_us=1_000_000)
        now_us = 5_000_000
        committer.open(pack(now_us), now_us)
        assert committer.durable_bound_us == now_us + 1_000_000
        # A heartbeat-like call: no version, clock inside the bound -> nothing to wait for.
        assert committer.stage(changes(0), pack(now_us)) == 0
        # Two calls in one loop turn share a group; their effects need it.
        first = committer.stage(changes(2), pack(now_us + 10))
        second = committer.stage(changes(1, prefix=b"other"), pack(now_us + 20))
        assert first == second == 1 and committer.pending
        await until(lambda: committer.durable == 1)
        assert committer.durable == 1 and durable_calls == [1] and not committer.pending
        # A clock far past the bound (a dependency from a DC running ahead) waits for a new bound.
        jump = pack(now_us + 5_000_000)
        need = committer.stage(changes(0), jump)
        assert need == 2 and committer.pending
        await until(lambda: committer.durable == 2)
        assert committer.durable == 2 and committer.durable_bound_us > physical_of(jump)
        # Getting within half the lead extends the bound ahead of time without anyone waiting.
        near = pack(committer.durable_bound_us - 400_000)
        assert committer.stage(changes(0), near) == 2
        await until(lambda: committer.durable_bound_us >= physical_of(near) + 1_000_000)
        await committer.close(near)
        reopened = SqliteStore(tmp_path, IDENTITY)
        assert reopened.version_count() == 3
        assert reopened.load_clock_bound_us() == physical_of(near) + 1  # clean stop: just above
        reopened.close()

    asyncio.run(main())


def test_vector_only_changes_are_written_lazily(tmp_path: Path) -> None:
    async def main() -> None:
        store = SqliteStore(tmp_path, IDENTITY)
        committer = GroupCommitter(store, on_durable=lambda: None, on_failure=lambda error: None, lazy_s=0.05)
        committer.open(0, 1_000)
        committer.stage(changes(0, vv=(0, 77)), 0)
        assert committer.groups_written == 0
        await until(lambda: committer.groups_written == 1)
        assert committer.groups_written == 1 and store.load_state() == State((0, 77), (0, 77), (0, 77), (0, 77))
        await committer.close(0)

    asyncio.run(main())


def test_recover_loads_a_core_and_restarts_its_clock_at_the_bound(tmp_path: Path) -> None:
    config = CoreConfig(dc=0, partition=0, num_dcs=2, num_partitions=1)
    original = PartitionServer(config)
    original.track_changes = True
    for index in range(4):
        original.handle(PutRequest(index, b"k%d" % (index % 2), b"v%d" % index, Session((0, 0), 0)), 1_000 + index)
    drained = original.drain_changes()
    store = SqliteStore(tmp_path, IDENTITY)
    store.commit(CommitGroup(1, drained.store, State(drained.vv, drained.stable, drained.gsv, drained.horizon),
                             9_999))
    restored = PartitionServer(config)
    result = recover(restored, store)
    assert (result.versions, result.keys, result.clock_bound_us) == (4, 2, 9_999)
    assert restored.track_changes and restored.clock == pack(9_999)
    assert [v.value for v in restored.store.versions(b"k1")] == [b"v1", b"v3"]
    store.close()
