"""The SQLite file of one partition server (stdlib ``sqlite3``, WAL mode, ``synchronous=FULL``).

Layout of a data directory::

    DIR/okapi.sqlite3       the database (plus its -wal and -shm files while open)
    DIR/LOCK                held (flock) by the server using the directory

Tables:

- ``versions(key, ts, dc, value, dv)``, primary key ``(key, ts, dc)`` (a ``WITHOUT ROWID`` table:
  rows are small and always found by that key). ``value`` NULL is a tombstone. Timestamps are
  unsigned 64-bit integers; SQLite integers are signed, so ``ts`` holds ``timestamp - 2**63``,
  which keeps the order. ``dv`` is the dependency vector, big-endian 64-bit entries, or NULL.
- ``meta(name, value)``: ``identity`` (which cluster and server the directory belongs to, JSON),
  ``state`` (the vectors ``vv``, ``stable``, ``gsv``, ``horizon``, JSON) and ``clock_bound_us``.

Why ``synchronous=FULL``: in WAL mode FULL syncs the WAL at every commit, so a committed group
survives a power loss, not only a process crash; NORMAL would only sync at checkpoints (a kill -9
would still be safe, an OS crash could lose the last acknowledged writes). Group commit
(``group_commit``) pays one fsync per group, not per write.

Why the files stay bounded: garbage-collected versions are deleted in the same transactions that
insert new ones, so SQLite reuses their pages; ``maintain`` truncates the WAL
(``wal_checkpoint(TRUNCATE)``; in between, SQLite's automatic checkpoints restart it and
``journal_size_limit`` cuts it back to 4 MiB)
and, when many pages are free after a burst, returns them to the file system
(``auto_vacuum=INCREMENTAL``, ``incremental_vacuum``).

Invariants: one transaction per ``commit`` (all of a group or nothing, in order); the stored
``state`` is the core's at the end of the group, so its ``vv`` covers exactly the stored versions
and its ``stable``/``horizon`` are at least what any stored removal relied on; the stored clock bound
only grows while the server runs (a clean shutdown may lower it to just above the last timestamp
issued: nothing is issued after it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import struct
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from okapikv.core.mvstore import Change, Version
from okapikv.core.vectors import Vector

DATABASE_NAME = "okapi.sqlite3"
LOCK_NAME = "LOCK"
FORMAT_VERSION = 1
_SIGN = 1 << 63
# Incremental vacuum when more than this share of the file is free pages (and at least the minimum).
VACUUM_FREE_SHARE = 0.25
VACUUM_MIN_FREE_PAGES = 1024
WAL_SIZE_LIMIT_BYTES = 4 << 20


class DataDirError(Exception):
    """The data directory cannot be used: locked by another server, another server's data, or
    unreadable. The message says which and what to do."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Which server's data a directory holds: starting a server on another's data (another DC,
    partition, cluster shape or protocol) would silently mix two stores, so it is refused."""

    cluster_id: str
    dcs: tuple[str, ...]
    partitions: int
    protocol: str
    dc: str
    partition: int

    def to_json(self) -> str:
        data = asdict(self)
        data["dcs"] = list(self.dcs)
        data["format"] = FORMAT_VERSION
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Identity:
        data = json.loads(text)
        if data.get("format") != FORMAT_VERSION:
            raise DataDirError(f"unsupported data format {data.get('format')!r} (this build reads {FORMAT_VERSION})")
        return cls(data["cluster_id"], tuple(data["dcs"]), int(data["partitions"]), data["protocol"], data["dc"],
                   int(data["partition"]))


@dataclass(frozen=True, slots=True)
class State:
    """The core's vectors as stored with each commit group."""

    vv: Vector
    stable: Vector
    gsv: Vector
    horizon: Vector

    def to_json(self) -> str:
        return json.dumps({"vv": self.vv, "stable": self.stable, "gsv": self.gsv, "horizon": self.horizon})

    @classmethod
    def from_json(cls, text: str) -> State:
        data = json.loads(text)
        return cls(*(tuple(int(x) for x in data[name]) for name in ("vv", "stable", "gsv", "horizon")))


@dataclass(slots=True)
class CommitGroup:
    """One transaction: the store changes of a group of core calls, in order, the vectors after the
    last call, and (when it moves) the clock bound."""

    number: int
    changes: list[Change]
    state: State | None = None
    clock_bound_us: int | None = None


def _ts(timestamp: int) -> int:
    return timestamp - _SIGN


def _timestamp(stored: int) -> int:
    return stored + _SIGN


def _pack_vector(vector: Vector | None) -> bytes | None:
    if vector is None:
        return None
    return struct.pack(f">{len(vector)}Q", *vector)


def _unpack_vector(data: bytes | None) -> Vector | None:
    if data is None:
        return None
    return struct.unpack(f">{len(data) // 8}Q", data)


class SqliteStore:
    """The database of one partition server. Not thread-safe: the driver uses it from one worker
    thread at a time (``check_same_thread`` is off so that thread may differ from the opener)."""

    def __init__(self, directory: str | Path, identity: Identity) -> None:
        self.directory = Path(directory)
        self.identity = identity
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DataDirError(f"cannot create data directory {self.directory}: {error.strerror or error}") from None
        self._lock_file = self._lock()
        self.path = self.directory / DATABASE_NAME
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._configure()
            self._check_identity()
        except DataDirError:
            self._release_lock()
            raise
        except (sqlite3.Error, ValueError, KeyError) as error:  # unreadable file or metadata
            self._release_lock()
            raise DataDirError(f"cannot open {self.path}: {type(error).__name__}: {error}") from None
        self.commits = 0
        self.checkpoints = 0
        self.vacuumed_pages = 0

    # ---------------------------------------------------------------- opening

    def _lock(self) -> Any:
        path = self.directory / LOCK_NAME
        handle = path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise DataDirError(
                f"data directory {self.directory} is in use by another server (its {LOCK_NAME} is held)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return handle

    def _release_lock(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)
        self._lock_file.close()

    def _configure(self) -> None:
        db = self._db
        # auto_vacuum must be chosen before the first table exists (ignored afterwards).
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise DataDirError(f"{self.path}: SQLite refused WAL mode (got {mode!r})")
        db.execute("PRAGMA synchronous = FULL")
        # After each checkpoint that resets the WAL, cut the file back to this size (else it keeps the
        # size of its largest burst until the next TRUNCATE checkpoint).
        db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
        db.execute(
            "CREATE TABLE IF NOT EXISTS versions ("
            " key BLOB NOT NULL, ts INTEGER NOT NULL, dc INTEGER NOT NULL, value BLOB, dv BLOB,"
            " PRIMARY KEY (key, ts, dc)) WITHOUT ROWID"
        )
        db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def _meta(self, name: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def _check_identity(self) -> None:
        stored = self._meta("identity")
        if stored is None:
            self._db.execute("INSERT INTO meta (name, value) VALUES ('identity', ?)", (self.identity.to_json(),))
            return
        found = Identity.from_json(stored)
        if found != self.identity:
            differences = [
                f"{name} {getattr(found, name)!r} (this server: {getattr(self.identity, name)!r})"
                for name in ("cluster_id", "dcs", "partitions", "protocol", "dc", "partition")
                if getattr(found, name) != getattr(self.identity, name)
            ]
            raise DataDirError(
                f"data directory {self.directory} belongs to another server: " + "; ".join(differences)
                + ". Give this server another data directory, or remove this one to start empty"
            )

    # ---------------------------------------------------------------- recovery

    def load_state(self) -> State | None:
        stored = self._meta("state")
        return None if stored is None else State.from_json(stored)

    def load_clock_bound_us(self) -> int:
        stored = self._meta("clock_bound_us")
        return 0 if stored is None else int(stored)

    def load_versions(self) -> Iterator[tuple[bytes, Version]]:
        """Every stored version, each key's chain oldest first (the order ``insert`` likes best)."""
        cursor = self._db.execute("SELECT key, ts, dc, value, dv FROM versions ORDER BY key, ts, dc")
        for key, stored_ts, dc, value, dv in cursor:
            yield bytes(key), Version(None if value is None else bytes(value), _timestamp(stored_ts), dc,
                                      _unpack_vector(dv))

    def version_count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM versions").fetchone()[0])

    # ---------------------------------------------------------------- writing

    def commit(self, group: CommitGroup) -> None:
        """Write one group in one transaction (durable when this returns)."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for inserted, rows in _runs(group.changes):
                if inserted:
                    db.executemany("INSERT OR REPLACE INTO versions (key, ts, dc, value, dv) VALUES (?, ?, ?, ?, ?)",
                                   rows)
                else:
                    db.executemany("DELETE FROM versions WHERE key = ? AND ts = ? AND dc = ?", rows)
            if group.state is not None:
                db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('state', ?)", (group.state.to_json(),))
            if group.clock_bound_us is not None:
                db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('clock_bound_us', ?)",
                           (str(group.clock_bound_us),))
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        self.commits += 1

    def maintain(self) -> None:
        """Truncate the WAL and give free pages back when they pile up (see the module docstring)."""
        db = self._db
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.checkpoints += 1
        free = int(db.execute("PRAGMA freelist_count").fetchone()[0])
        total = int(db.execute("PRAGMA page_count").fetchone()[0])
        if free >= VACUUM_MIN_FREE_PAGES and free > total * VACUUM_FREE_SHARE:
            release = free - int(total * VACUUM_FREE_SHARE / 2)
            # executescript steps the pragma to completion (``execute`` would free a single page).
            db.executescript(f"PRAGMA incremental_vacuum({release});")
            self.vacuumed_pages += release
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def disk_bytes(self) -> int:
        """Bytes the database takes on disk now (main file, WAL and shared-memory index)."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                total += os.path.getsize(f"{self.path}{suffix}")
        return total

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()
        self._release_lock()


def _runs(changes: list[Change]) -> Iterator[tuple[bool, list[tuple[Any, ...]]]]:
    """Consecutive inserts, then consecutive removals, ...: each run is one ``executemany``, and the
    order between runs is kept (a version removed and inserted again ends up present)."""
    run: list[tuple[Any, ...]] = []
    kind: bool | None = None
    for key, version, inserted in changes:
        if inserted is not kind and run:
            assert kind is not None
            yield kind, run
            run = []
        kind = inserted
        if inserted:
            run.append((key, _ts(version.timestamp), version.source_dc, version.value, _pack_vector(version.dv)))
        else:
            run.append((key, _ts(version.timestamp), version.source_dc))
    if run:
        assert kind is not None
        yield kind, run
