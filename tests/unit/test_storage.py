"""The SQLite store, group commit and recovery (``okapikv.storage``), without a server process."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.messages import PutRequest, Session
from okapikv.core.mvstore import Change, Version
from okapikv.core.server import Changes, PartitionServer
from okapikv.core.timestamps import pack, physical_of
from okapikv.storage import DataDamagedError, DataDirError, DiskFullError, Identity, SqliteStore, group_commit
from okapikv.storage.group_commit import GroupCommitter
from okapikv.storage.integrity import meta_checksum
from okapikv.storage.logged_store import LoggedStore
from okapikv.storage.recovery import open_and_recover, recover, repair_finished
from okapikv.storage.space import DiskSpace
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


class CountingConnection:
    """An SQLite connection that counts the statements run on it (``executemany`` as one each)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.statements: list[str] = []

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        self.statements.append(sql)
        return self.db.execute(sql, *args)

    def executemany(self, sql: str, rows: object) -> sqlite3.Cursor:
        self.statements.append(sql)
        return self.db.executemany(sql, rows)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)


def test_a_group_of_swaps_writes_its_rows_in_two_statements_and_the_last_change_of_a_row_wins(
        tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, IDENTITY)
    old = [Version(b"old", 10 + index, 0, None) for index in range(20)]
    store.commit(CommitGroup(1, [Change(b"k%02d" % index, version, True) for index, version in enumerate(old)]))
    counting = CountingConnection(store.db)
    store._db = counting  # type: ignore[assignment]
    changes = []
    for index, version in enumerate(old):  # what YCSB-A's SWAPs log: the new version, then GC's removal of the old
        changes += [Change(b"k%02d" % index, Version(b"new", 100 + index, 0, None), True),
                    Change(b"k%02d" % index, version, False)]
    gone, back = Version(b"x", 500, 0, None), Version(b"y", 501, 0, None)
    changes += [Change(b"gone", gone, True), Change(b"gone", gone, False),  # inserted, then removed: absent
                Change(b"back", back, False), Change(b"back", back, True)]  # removed, then inserted: present
    store.commit(CommitGroup(2, changes, state(600)))
    rows = [sql for sql in counting.statements if "versions" in sql]
    assert len(rows) == 2, rows
    store._db = counting.db
    loaded = {(key, version.value) for key, version in store.load_versions()}
    assert loaded == {(b"k%02d" % index, b"new") for index in range(20)} | {(b"back", b"y")}
    assert store.tally.inserted == 20 + 22 and store.tally.local_inserted == 42
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


STORES = {"sqlite": SqliteStore, "log": LoggedStore}


@pytest.mark.parametrize("kind", sorted(STORES))
def test_group_commit_orders_durability_and_bounds_the_clock(tmp_path: Path, kind: str) -> None:
    async def main() -> None:
        store = STORES[kind](tmp_path, IDENTITY)
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
        # A GET's reply of a key the group inserted waits for it; of another key, for nothing.
        assert committer.read_need(b"k1") == committer.read_need(b"other0") == 1
        assert committer.read_need(b"never") == 0
        await until(lambda: committer.durable == 1)
        assert committer.durable == 1 and durable_calls == [1] and not committer.pending
        assert committer.read_need(b"k1") == 0
        # A clock far past the bound (a dependency from a DC running ahead) waits for a new bound,
        # and so does every reply, a GET's of any key included (its timestamps are under that clock).
        jump = pack(now_us + 5_000_000)
        need = committer.stage(changes(0), jump)
        assert need == 2 and committer.pending and committer.read_need(b"never") == 2
        await until(lambda: committer.durable == 2)
        assert committer.durable == 2 and committer.durable_bound_us > physical_of(jump)
        # Getting within half the lead extends the bound ahead of time without anyone waiting.
        near = pack(committer.durable_bound_us - 400_000)
        assert committer.stage(changes(0), near) == 2
        await until(lambda: committer.durable_bound_us >= physical_of(near) + 1_000_000)
        await committer.close(near)
        reopened = STORES[kind](tmp_path, IDENTITY)
        assert reopened.version_count() == 3
        assert reopened.load_clock_bound_us() == physical_of(near) + 1  # clean stop: just above
        reopened.close()

    asyncio.run(main())


class GatedLog(LoggedStore):
    """Once ``armed``, the first append waits for ``release``; ``appended`` counts the appends."""

    armed = False

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.release, self.in_first, self.second = threading.Event(), threading.Event(), threading.Event()
        self.appended = 0

    def finish(self) -> None:
        if self.armed and self.appended == 0:
            self.in_first.set()
            assert self.release.wait(30)
        super().finish()
        if self.armed:
            self.appended += 1
            if self.appended == 2:
                self.second.set()


def test_groups_are_pipelined_the_worker_takes_the_next_group_without_the_event_loop(tmp_path: Path) -> None:
    """What arrives during a group's fdatasync is written the moment it returns, by the worker
    itself: the event loop's thread is not on the path from one group to the next."""

    async def main() -> None:
        store = GatedLog(tmp_path, IDENTITY)
        committer = GroupCommitter(store, on_durable=lambda: None, on_failure=lambda error: pytest.fail(str(error)))
        committer.open(pack(1_000), 1_000)
        store.armed = True
        assert committer.stage(changes(1), pack(1_000)) == 1
        await until(store.in_first.is_set)  # group 1's append has begun (and holds)
        assert committer.stage(changes(1, prefix=b"other"), pack(1_000)) == 2  # arrives meanwhile
        store.release.set()
        # The loop's thread stays here, giving the loop no turn, until group 2 is appended.
        assert store.second.wait(30), "group 2 waited for the event loop"
        await until(lambda: committer.durable == 2)
        assert committer.groups_written == 2
        await committer.close(pack(1_000))
        reopened = LoggedStore(tmp_path, IDENTITY)
        assert reopened.version_count() == 2
        reopened.close()

    asyncio.run(main())


def test_a_key_written_again_in_the_next_group_stays_unsettled_until_that_group_is_durable(tmp_path: Path) -> None:
    """``read_need``: the newest group that inserted a version of the key counts, so a GET of a key
    rewritten while its first group was being written waits for the second group."""

    async def main() -> None:
        store = GatedLog(tmp_path, IDENTITY)
        seen: list[tuple[int, int, int]] = []  # at each durable group: it, and what k0 and k1 need
        committer = GroupCommitter(store, on_durable=lambda: seen.append(
            (committer.durable, committer.read_need(b"k0"), committer.read_need(b"k1"))),
                                   on_failure=lambda error: pytest.fail(str(error)))
        committer.open(pack(1_000), 1_000)
        store.armed = True
        assert committer.stage(changes(2), pack(1_000)) == 1  # k0, k1
        await until(store.in_first.is_set)
        assert committer.stage(changes(1), pack(1_000)) == 2  # k0 again, while group 1 is written
        assert (committer.read_need(b"k0"), committer.read_need(b"k1"), committer.read_need(b"x")) == (2, 1, 0)
        store.release.set()
        await until(lambda: committer.durable == 2)
        assert seen[0] == (1, 2, 0)  # once group 1 is durable, k1 is settled and k0 waits for group 2
        assert committer.read_need(b"k0") == committer.read_need(b"k1") == 0
        await committer.close(pack(1_000))

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
    assert restored.track_changes and restored.hlc == pack(9_999)
    assert [v.value for v in restored.store.versions(b"k1")] == [b"v1", b"v3"]
    store.close()


# ====================================================================== integrity


def local_and_remote(count: int) -> list[Change]:
    return [Change(b"k%d" % i, Version(b"value-%d" % i, pack(10 + i), i % 2, None), True) for i in range(count)]


def test_a_changed_value_fails_its_checksum_when_it_loads(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, IDENTITY)
    store.commit(CommitGroup(1, local_and_remote(4), state(1, 1), 5))
    store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "okapi.sqlite3")) as db:
        db.execute("UPDATE versions SET value = ? WHERE key = ?", (b"value-X", b"k2"))
        db.commit()
    again = SqliteStore(tmp_path, IDENTITY)
    with pytest.raises(DataDamagedError, match=r"key b'k2' .* fails its checksum"):
        list(again.load_versions())
    again.close()


def test_a_database_behind_its_commit_record_lost_committed_groups(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, IDENTITY)
    store.commit(CommitGroup(1, local_and_remote(2)))
    store.close()
    older = (tmp_path / "okapi.sqlite3").read_bytes()
    store = SqliteStore(tmp_path, IDENTITY)
    store.commit(CommitGroup(1, [Change(b"a", Version(b"1", pack(50), 0, None), True)]))
    store.commit(CommitGroup(2, [Change(b"b", Version(b"2", pack(60), 0, None), True),
                                 Change(b"c", Version(b"3", pack(70), 1, None), True)]))
    store.close()
    (tmp_path / "okapi.sqlite3").write_bytes(older)  # the last two groups vanish, as with a cut WAL
    with pytest.raises(DataDamagedError, match=r"2 group\(s\) are missing with 2 acknowledged local write\(s\) .* "
                                               r"and 1 replicated update\(s\)"):
        SqliteStore(tmp_path, IDENTITY)
    (tmp_path / "okapi.sqlite3").unlink()  # and a database that vanished altogether
    with pytest.raises(DataDamagedError, match="is missing or empty but .*COMMITTED records"):
        SqliteStore(tmp_path, IDENTITY)


def test_a_record_one_group_behind_the_database_is_normal(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, IDENTITY)
    store.commit(CommitGroup(1, local_and_remote(2)))
    record = (tmp_path / "COMMITTED").read_bytes()
    store.commit(CommitGroup(2, local_and_remote(3)))
    store.close()
    (tmp_path / "COMMITTED").write_bytes(record)  # a crash between a commit and its record
    SqliteStore(tmp_path, IDENTITY).close()


def _format_1_directory(directory: Path, state_json: str) -> None:
    """A data directory as the format-1 code wrote it (no checksums, no commit record)."""
    with contextlib.closing(sqlite3.connect(directory / "okapi.sqlite3")) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE versions (key BLOB NOT NULL, ts INTEGER NOT NULL, dc INTEGER NOT NULL, value BLOB,"
                   " dv BLOB, PRIMARY KEY (key, ts, dc)) WITHOUT ROWID")
        db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        identity = json.loads(IDENTITY.to_json()) | {"format": 1}
        db.execute("INSERT INTO meta VALUES ('identity', ?)", (json.dumps(identity),))
        db.execute("INSERT INTO meta VALUES ('state', ?)", (state_json,))
        db.execute("INSERT INTO meta VALUES ('clock_bound_us', '77')")
        for index in range(3):
            db.execute("INSERT INTO versions VALUES (?, ?, ?, ?, NULL)", (b"k%d" % index, pack(5 + index) - (1 << 63),
                                                                         0, b"v%d" % index))
        db.commit()


def test_a_format_1_directory_is_migrated_in_place(tmp_path: Path) -> None:
    _format_1_directory(tmp_path, state(3, 4).to_json())
    store = SqliteStore(tmp_path, IDENTITY)
    assert store.migrated_versions == 3
    assert [v.value for _, v in store.load_versions()] == [b"v0", b"v1", b"v2"]  # checksummed now
    assert store.load_clock_bound_us() == 77 and store.load_state() == state(3, 4)
    store.commit(CommitGroup(1, [Change(b"new", Version(b"n", pack(9), 0, None), True)]))
    store.close()
    again = SqliteStore(tmp_path, IDENTITY)
    assert again.migrated_versions is None and again.version_count() == 4
    again.close()


def test_a_format_1_directory_with_a_damaged_row_is_refused_before_migrating(tmp_path: Path) -> None:
    _format_1_directory(tmp_path, '{"vv": [1, 2], "stable": [0, 0], "gsv": [0, 0]}')
    with pytest.raises(DataDamagedError, match="metadata row 'state' lacks field 'horizon'"):
        SqliteStore(tmp_path, IDENTITY)


def test_an_unknown_data_format_is_refused(tmp_path: Path) -> None:
    SqliteStore(tmp_path, IDENTITY).close()
    with contextlib.closing(sqlite3.connect(tmp_path / "okapi.sqlite3")) as db:
        text = json.dumps(json.loads(IDENTITY.to_json()) | {"format": 7})
        db.execute("UPDATE meta SET value = ?, crc = ? WHERE name = 'identity'",
                   (text, meta_checksum("identity", text)))
        db.commit()
    with pytest.raises(DataDirError, match="data format 7") as refused:
        SqliteStore(tmp_path, IDENTITY)
    assert not isinstance(refused.value, DataDamagedError)


def core_for(identity: Identity = IDENTITY) -> PartitionServer:
    return PartitionServer(CoreConfig(dc=identity.dc_index, partition=0, num_dcs=len(identity.dcs), num_partitions=1))


def test_repair_mode_rebuilds_a_damaged_directory_keeping_its_verified_local_versions(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, IDENTITY)
    store.commit(CommitGroup(1, local_and_remote(6), state(1, 1), 4_000))
    store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "okapi.sqlite3")) as db:
        db.execute("UPDATE versions SET value = ? WHERE key = ?", (b"flipped", b"k2"))
        db.commit()
    with pytest.raises(DataDamagedError):
        open_and_recover(core_for, tmp_path, IDENTITY)
    core, rebuilt, recovered = open_and_recover(core_for, tmp_path, IDENTITY, repair=True, now_us=1_000)
    assert recovered.repair is not None and "fails its checksum" in (recovered.damage or "")
    assert sorted(key for key, _ in recovered.repair.salvaged) == [b"k0", b"k4"]  # local, verified (k2 is damaged)
    assert rebuilt.fresh and core.hlc >= pack(4_000)  # above the bound that survived
    assert {path.name.split(".damaged-")[0] for path in recovered.moved_aside} == {"okapi.sqlite3", "COMMITTED"}
    rebuilt.close()


def test_repair_mode_leaves_an_intact_directory_alone_and_repairs_an_empty_one(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "intact", IDENTITY)
    store.commit(CommitGroup(1, local_and_remote(2)))
    store.close()
    core, opened, recovered = open_and_recover(core_for, tmp_path / "intact", IDENTITY, repair=True)
    assert recovered.repair is None and recovered.versions == 2
    opened.close()
    core, opened, recovered = open_and_recover(core_for, tmp_path / "new-disk", IDENTITY, repair=True, now_us=99)
    assert recovered.repair is not None and recovered.repair.salvaged == () and core.hlc == pack(99)
    opened.close()


def test_an_interrupted_repair_is_damage_until_it_is_run_again(tmp_path: Path) -> None:
    _, opened, _ = open_and_recover(core_for, tmp_path, IDENTITY, repair=True)
    opened.commit(CommitGroup(1, local_and_remote(2)))  # part of what the replicas sent, then a crash
    opened.close()
    with pytest.raises(DataDamagedError, match="a repair of this directory was interrupted"):
        open_and_recover(core_for, tmp_path, IDENTITY)
    _, opened, recovered = open_and_recover(core_for, tmp_path, IDENTITY, repair=True)
    assert recovered.repair is not None and [key for key, _ in recovered.repair.salvaged] == [b"k0"]
    opened.close()
    repair_finished(tmp_path)  # the driver, once the repaired state is durable
    _, opened, recovered = open_and_recover(core_for, tmp_path, IDENTITY)
    assert recovered.repair is None
    opened.close()


class FullDisk(SqliteStore):
    """Its COMMITs fail for lack of space while ``full`` is above 0 (each failure counts down)."""

    full = 0

    def finish(self) -> None:
        if self.full > 0:
            self.full -= 1
            self.abort()
            raise sqlite3.OperationalError("database or disk is full")
        super().finish()


class FullLog(LoggedStore):
    """Its appends fail for lack of space while ``full`` is above 0 (each failure counts down)."""

    full = 0

    def finish(self) -> None:
        if self.full > 0:
            self.full -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        super().finish()


FULL_STORES = {"sqlite": FullDisk, "log": FullLog}


class GatedSpace(DiskSpace):
    """Free space comes back only once the test says so."""

    space_back = False

    def refill(self) -> bool:
        return self.space_back and super().refill()


class CountedSpace(DiskSpace):
    """Counts the free-space checks after a group (``low``)."""

    checks = 0

    def low(self) -> bool:
        self.checks += 1
        return super().low()


def _with_space(store: LoggedStore, space: DiskSpace) -> GroupCommitter:
    """A committer of ``store`` watching ``space`` (its reserve made), failing the test on a failure."""
    space.prepare()
    return GroupCommitter(store, on_durable=lambda: None, on_failure=lambda error: pytest.fail(str(error)), space=space)


def test_the_free_space_is_looked_at_after_a_group_at_most_every_space_check_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The statvfs call lets go of the interpreter lock on the path to the next group, so it is not
    made after every group (``SPACE_CHECK_S``); the first group looks."""
    monkeypatch.setattr(group_commit, "SPACE_CHECK_S", 3600.0)

    async def main() -> None:
        space = CountedSpace(tmp_path, 1 << 20)
        committer = _with_space(LoggedStore(tmp_path, IDENTITY), space)
        committer.open(pack(1_000), 1_000)
        before = space.checks  # (the reserve's own checks at start)
        for number in (1, 2, 3):
            assert committer.stage(changes(1, prefix=b"g%d" % number), pack(1_000)) == number
            await until(lambda: committer.durable == number)  # noqa: B023 (awaited at once)
        assert space.checks == before + 1
        monkeypatch.setattr(group_commit, "SPACE_CHECK_S", 0.0)
        committer.stage(changes(1, prefix=b"g4"), pack(1_000))
        await until(lambda: committer.durable == 4)
        assert space.checks == before + 2
        await committer.close(pack(1_000))

    asyncio.run(main())


@pytest.mark.parametrize("kind", sorted(FULL_STORES))
def test_a_commit_that_finds_the_disk_full_uses_the_reserve_and_is_retried(tmp_path: Path, kind: str) -> None:
    async def main() -> None:
        store = FULL_STORES[kind](tmp_path, IDENTITY)
        space = GatedSpace(tmp_path, 1 << 20)
        space.prepare()
        failures: list[BaseException] = []
        committer = GroupCommitter(store, on_durable=lambda: None, on_failure=failures.append, space=space)
        committer.open(0, 1_000)
        store.full = 1
        assert committer.stage(changes(3), pack(1_000)) == 1
        await until(lambda: committer.full_commits == 1)
        assert committer.disk_full and not space.reserved  # the reserve made room for the retry
        await until(lambda: committer.durable == 1)
        assert not failures and store.version_count() == 3  # the writes already accepted are durable
        assert committer.disk_full
        space.space_back = True
        committer.stage(changes(0, vv=(0, 1)), pack(1_000))  # any later group looks again
        await until(lambda: not committer.disk_full and space.reserved, timeout_s=10)
        await committer.close(pack(1_000))

    asyncio.run(main())


class OrderedFullLog(FullLog):
    """``FullLog`` that records its appends (``full``: one that failed) and checkpoints in order."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.calls: list[str] = []

    def finish(self) -> None:
        self.calls.append("full" if self.full > 0 else "append")
        super().finish()

    def checkpoint(self, *, in_process: bool = True) -> None:
        self.calls.append("checkpoint")
        super().checkpoint(in_process=in_process)


def test_a_retry_on_a_full_disk_appends_into_the_released_reserve_before_any_checkpoint(tmp_path: Path) -> None:
    """The reserve is released to make room for the group that found the disk full; a checkpoint
    first would spend that room folding the log into SQLite (about a segment's worth, which a full
    disk does not have), and the retries would all fail (tests/integration/test_storage_integrity.py,
    the full-disk test, failed that way in 3 runs of 6)."""

    async def main() -> None:
        store = OrderedFullLog(tmp_path, IDENTITY)
        committer = _with_space(store, GatedSpace(tmp_path, 1 << 20))
        committer.open(0, 1_000)
        store.calls.clear()
        store.full = 1
        committer.stage(changes(3), pack(1_000))
        await until(lambda: committer.durable == 1)
        assert store.calls[:2] == ["full", "append"] and committer.full_commits == 1
        await committer.close(pack(1_000))

    asyncio.run(main())


@pytest.mark.parametrize("kind", sorted(FULL_STORES))
def test_a_disk_that_stays_full_fails_after_the_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        kind: str) -> None:
    monkeypatch.setattr(group_commit, "FULL_RETRY_S", 0.01)
    monkeypatch.setattr(group_commit, "FULL_RETRIES", 3)

    async def main() -> None:
        store = FULL_STORES[kind](tmp_path, IDENTITY)
        space = DiskSpace(tmp_path, 1 << 20)
        space.prepare()
        failures: list[BaseException] = []
        committer = GroupCommitter(store, on_durable=lambda: None, on_failure=failures.append, space=space)
        committer.open(0, 1_000)
        store.full = 10
        committer.stage(changes(1), pack(1_000))
        await until(lambda: bool(failures))
        assert committer.full_commits == 3 and committer.durable == 0

    asyncio.run(main())


def test_a_start_without_room_for_the_reserve_is_refused(tmp_path: Path) -> None:
    free = DiskSpace(tmp_path, 0).free_bytes()
    with pytest.raises(DiskFullError, match="no space left"):
        DiskSpace(tmp_path, free + (1 << 30)).prepare()
    assert not (tmp_path / "RESERVE").exists() and not (tmp_path / "RESERVE.partial").exists()


_CRASH_AFTER = """
import os, sys
from pathlib import Path
from okapikv.core.mvstore import Change, Version
from okapikv.storage import Identity, SqliteStore
from okapikv.storage.sqlite import CommitGroup
store = SqliteStore(Path(sys.argv[1]), Identity("test", ("a", "b"), 1, "okapi", "a", 0))
store.commit(CommitGroup(1, [Change(b"first", Version(b"1", 10, 0, None), True)]))
store.prepare(CommitGroup(2, [Change(b"second", Version(b"2", 11, 0, None), True)]))
if sys.argv[2] != "prepared":
    store.finish()
    if sys.argv[2] == "recorded":
        store.record()
os._exit(9)  # as kill -9: no rollback, no close, no checkpoint
"""


@pytest.mark.parametrize(("crash_after", "keys", "seq"), [
    ("prepared", [b"first"], 1),  # its statements ran, its COMMIT did not: the group is not there
    ("finished", [b"first", b"second"], 2),  # committed, its record not yet written: accepted
    ("recorded", [b"first", b"second"], 2),
])
def test_a_group_is_durable_once_its_commit_returns_and_only_then(tmp_path: Path, crash_after: str,
                                                                  keys: list[bytes], seq: int) -> None:
    """The group committer runs ``prepare`` on the event loop's thread and ``finish`` (the COMMIT)
    on its worker, and reports a group durable after ``record``: a process killed at any point
    leaves the groups whose COMMIT returned and none of the others, and a store that opens."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _CRASH_AFTER, str(tmp_path), crash_after], timeout=60, check=False)
    assert done.returncode == 9
    store = SqliteStore(tmp_path, IDENTITY)
    assert [key for key, _ in store.load_versions()] == keys
    assert store.tally.seq == seq
    store.close()


def test_the_stats_count_fsyncs_and_what_shares_each(tmp_path: Path) -> None:
    """``fsyncs`` counts the groups (one WAL fsync each); over the window, the groups per second
    and the operations (the driver's count) and versions per group (``commit_rates``)."""
    async def main() -> None:
        store = SqliteStore(tmp_path, IDENTITY)
        operations = 0
        committer = GroupCommitter(store, on_durable=lambda: None, on_failure=lambda error: pytest.fail(str(error)),
                                   operations=lambda: operations)
        committer.open(0, 1_000)
        for group in range(1, 4):
            operations += 10
            committer.stage(changes(5, prefix=b"g%d-" % group), pack(1_000))
            await until(lambda group=group: committer.durable == group)  # type: ignore[misc]
        stats = committer.stats()
        assert stats["fsyncs"] == 3
        assert stats["operations_per_fsync"] == 10.0 and stats["versions_per_fsync"] == 5.0
        assert isinstance(stats["fsyncs_per_s"], float) and stats["fsyncs_per_s"] > 0
        await committer.close(pack(1_000))

    asyncio.run(main())


class SignalledLog(LoggedStore):
    """``appended`` is set once an append has returned on the worker."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.appended = threading.Event()

    def finish(self) -> None:
        super().finish()
        self.appended.set()


def test_the_release_lag_counts_the_time_from_an_append_to_the_loop_hearing_of_it(tmp_path: Path) -> None:
    """``release_lag_seconds``: a group appended while the event loop's thread is busy is released
    only when the loop runs again, and that wait is counted (docs/benchmarks.md, "Where a durable
    operation's time goes")."""
    async def main() -> None:
        store = SignalledLog(tmp_path, IDENTITY)
        committer = GroupCommitter(store, on_durable=lambda: None, on_failure=lambda error: pytest.fail(str(error)))
        committer.open(pack(1_000), 1_000)
        store.appended.clear()
        committer.stage(changes(1), pack(1_000))
        await asyncio.sleep(0)  # the loop turn that hands the group to the worker
        assert store.appended.wait(30)
        time.sleep(0.05)  # the loop's thread busy: the worker's news waits for it
        await until(lambda: committer.durable == 1)
        assert 0.05 <= committer.release_lag_seconds <= committer.commit_seconds
        assert committer.stats()["release_lag_seconds"] == committer.release_lag_seconds
        await committer.close(pack(1_000))

    asyncio.run(main())


def test_commit_rates_cover_the_window_and_fall_to_zero_when_idle() -> None:
    from okapikv.storage.commit_rates import CommitRates

    rates = CommitRates(window_s=10.0, sample_s=1.0)
    assert rates.rates(0.0).fsyncs_per_s == 0.0  # nothing yet
    for second in range(21):  # 50 fsyncs a second, 4 operations and 2 versions each
        rates.record(float(second), 50 * second, 100 * second, 200 * second)
    now = rates.rates(20.0)
    assert now.fsyncs_per_s == 50.0 and now.operations_per_fsync == 4.0 and now.versions_per_fsync == 2.0
    assert len(rates._samples) == 11  # bounded: the window's samples only
    assert rates.rates(60.0).fsyncs_per_s == 0.0  # no group for longer than the window
