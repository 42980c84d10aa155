"""The SQLite file of one partition server (stdlib ``sqlite3``, WAL mode, ``synchronous=FULL``): the
checkpoint of the commit log (``logged_store``), written by ``apply`` in the background; a server
writes it per group only through ``commit`` when used alone (tests, tools).

Layout of a data directory::

    DIR/log-*.okl           the commit log's segments (``log``)
    DIR/okapi.sqlite3       the database (plus its -wal and -shm files while open)
    DIR/COMMITTED           the commit record, an account of the committed groups (``commit_record``)
    DIR/LOCK                held (flock) by the server using the directory
    DIR/RESERVE             space kept free for a full disk (``space``)

Tables (data format 2):

- ``versions(key, ts, dc, value, dv, crc)``, primary key ``(key, ts, dc)`` (a ``WITHOUT ROWID``
  table: rows are small and always found by that key). ``value`` NULL is a tombstone. Timestamps are
  unsigned 64-bit integers; SQLite integers are signed, so ``ts`` holds ``timestamp - 2**63``,
  which keeps the order. ``dv`` is the dependency vector, big-endian 64-bit entries, or NULL.
  ``crc`` is the row's checksum (``integrity.version_checksum``), verified whenever it is read.
- ``meta(name, value, crc)``: ``identity`` (which cluster and server the directory belongs to and
  the data format, JSON), ``state`` (the vectors ``vv``, ``stable``, ``gsv``, ``horizon``, JSON),
  ``clock_bound_us`` and ``commit`` (the ``commit_record.Tally`` as of the last group, JSON), each
  with its checksum (``integrity.meta_checksum``).

Data formats: 1 (no checksums, no commit record) is migrated in place at open, in one transaction
that checksums every row as it stands (damage older than the migration cannot be detected); a
format this build does not know is refused.

Checks at open, each failing with a one-line ``DataDamagedError`` that names the file and the
damage: the file is an SQLite database; SQLite's structure check (``integrity.quick_check``, mode
``integrity``); every metadata row's checksum and fields; the commit record against the database's
own tally (a database behind its record lost committed groups: a WAL cut short, lost or replaced).
Every version row's checksum is verified as ``load_versions`` reads it.

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
issued: nothing is issued after it); the stored tally's ``seq`` grows by one per group, and the
commit record is never ahead of it by more than what a damaged database lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from okapikv.core.mvstore import Change, Version
from okapikv.core.vectors import Vector
from okapikv.storage.commit_record import RECORD_NAME, RecordFile, Tally, read_record
from okapikv.storage.errors import REPAIR_HINT, DataDamagedError, DataDirError, DiskFullError
from okapikv.storage.integrity import (
    describe_key,
    describe_timestamp,
    meta_checksum,
    quick_check,
    version_checksum,
)

DATABASE_NAME = "okapi.sqlite3"
LOCK_NAME = "LOCK"
FORMAT_VERSION = 2
#: formats this build migrates to ``FORMAT_VERSION`` at open
MIGRATED_FORMATS = (1,)
_SIGN = 1 << 63
_MAX_TIMESTAMP = (1 << 64) - 1
# Incremental vacuum when more than this share of the file is free pages (and at least the minimum).
VACUUM_FREE_SHARE = 0.25
VACUUM_MIN_FREE_PAGES = 1024
WAL_SIZE_LIMIT_BYTES = 4 << 20
#: SQLite's page cache per server (allocated only as pages are read): a write lands in a random
#: leaf of the versions B-tree, and with SQLite's default 2 MB a partition of the paper's 1M
#: records (about 60 MB on disk) reads most leaves back from the OS for every group; 128 MiB keeps
#: such a partition's tree in the cache (docs/operations.md, "Durability and failures").
CACHE_BYTES = 128 << 20
_IDENTITY_FIELDS = ("cluster_id", "dcs", "partitions", "protocol", "dc", "partition")
_VECTOR_NAMES = ("vv", "stable", "gsv", "horizon")


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

    @property
    def dc_index(self) -> int:
        return self.dcs.index(self.dc)

    def grew_from(self, stored: Identity) -> bool:
        """Whether ``stored`` is this server's identity under a shorter DC list that new DCs extend
        (``okapi dc join``, ``okapikv.core.growth``): the same server, its DC list a prefix of this one."""
        return (stored.dcs == self.dcs[: len(stored.dcs)] and len(stored.dcs) < len(self.dcs)
                and (stored.cluster_id, stored.partitions, stored.protocol, stored.dc, stored.partition)
                == (self.cluster_id, self.partitions, self.protocol, self.dc, self.partition))

    def to_json(self) -> str:
        data = asdict(self)
        data["dcs"] = list(self.dcs)
        data["format"] = FORMAT_VERSION
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Identity:
        """Parse a stored identity (any format); ``ValueError`` naming what is wrong."""
        data = _json_object(text)
        missing = [name for name in _IDENTITY_FIELDS if name not in data]
        if missing:
            raise ValueError(f"lacks field(s) {', '.join(missing)}")
        try:
            return cls(str(data["cluster_id"]), tuple(str(dc) for dc in data["dcs"]), int(data["partitions"]),
                       str(data["protocol"]), str(data["dc"]), int(data["partition"]))
        except (TypeError, ValueError) as error:
            raise ValueError(f"has a malformed field ({error})") from None


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
    def from_json(cls, text: str, num_dcs: int | None = None) -> State:
        """Parse stored vectors; ``ValueError`` naming a missing field or a malformed entry."""
        data = _json_object(text)
        vectors = []
        for name in _VECTOR_NAMES:
            if name not in data:
                raise ValueError(f"lacks field {name!r}")
            entries = data[name]
            if not isinstance(entries, list) or not all(
                isinstance(x, int) and 0 <= x <= _MAX_TIMESTAMP for x in entries
            ):
                raise ValueError(f"field {name!r} is not a vector of timestamps")
            # fewer entries: written under a shorter DC list (``okapikv.core.growth``); the core pads them
            if num_dcs is not None and not 1 <= len(entries) <= num_dcs:
                raise ValueError(f"field {name!r} has {len(entries)} entries, the cluster has {num_dcs} DCs")
            vectors.append(tuple(entries))
        return cls(*vectors)


def sqlite_failure(path: Path, error: sqlite3.Error) -> DataDirError:
    """The one-line error for an SQLite failure at open or while loading: damage (a malformed file,
    not a database, an I/O error reading it), a full disk, or a file that cannot be opened."""
    name = str(getattr(error, "sqlite_errorname", "") or "")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR")):
        return DataDamagedError(f"{path} cannot be read: {error}; {REPAIR_HINT}")
    if name.startswith("SQLITE_FULL"):
        return DiskFullError(f"{path}: no space left on its file system ({error}): free space or move the data "
                             "directory")
    return DataDirError(f"cannot open {path}: {error}" + (f" ({name})" if name else ""))


def _json_object(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"is not JSON ({error.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("is not a JSON object")
    return data


def _tally_from_json(text: str, clock_bound_us: int) -> Tally:
    data = _json_object(text)
    values = []
    for name in ("seq", "inserted", "local_inserted", "local_ts"):
        value = data.get(name)
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"lacks field {name!r}" if value is None else f"field {name!r} is malformed")
        values.append(value)
    seq, inserted, local_inserted, local_ts = values
    return Tally(seq, inserted, local_inserted, local_ts, clock_bound_us)


def _tally_to_json(tally: Tally) -> str:
    return json.dumps({"seq": tally.seq, "inserted": tally.inserted, "local_inserted": tally.local_inserted,
                       "local_ts": tally.local_ts})


@dataclass(slots=True)
class CommitGroup:
    """One transaction: the store changes of a group of core calls, in order, the vectors after the
    last call, and (when it moves) the clock bound; ``inserted``: how many of the changes are
    inserts (the rest are GC removals), counted as they are staged (``group_commit``)."""

    number: int
    changes: list[Change]
    state: State | None = None
    clock_bound_us: int | None = None
    inserted: int = 0


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


class DirectoryLock:
    """The exclusive lock of a data directory (``flock`` on ``DIR/LOCK``): two servers writing one
    directory would corrupt it. Held until ``release`` (or the process ends)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        try:
            directory.mkdir(parents=True, exist_ok=True)
            handle = (directory / LOCK_NAME).open("a+")
        except OSError as error:
            raise DataDirError(f"cannot create data directory {directory}: {error.strerror or error}") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise DataDirError(
                f"data directory {directory} is in use by another server (its {LOCK_NAME} is held)"
            ) from None
        with contextlib.suppress(OSError):  # the pid is informative only (a full disk must not stop here)
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
        self._handle = handle

    def release(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
        self._handle.close()


class SqliteStore:
    """The database of one partition server. Not thread-safe: the driver uses it from one worker
    thread at a time (``check_same_thread`` is off so that thread may differ from the opener).

    ``integrity``: the structure check run at open (``integrity.INTEGRITY_MODES``). ``lock``: an
    already held lock of ``directory`` (the store releases it at ``close``; on a failed open the
    caller keeps it). ``fresh`` tells whether the directory held no data before this open."""

    def __init__(self, directory: str | Path, identity: Identity, *, integrity: str = "quick",
                 lock: DirectoryLock | None = None, record: bool = True) -> None:
        self.directory = Path(directory)
        self.identity = identity
        self._local_dc = identity.dc_index
        self._lock = lock if lock is not None else DirectoryLock(self.directory)
        self.path = self.directory / DATABASE_NAME
        self.fresh = False
        self.migrated_versions: int | None = None
        self.tally = Tally()
        self._record: RecordFile | None = None
        self._db: sqlite3.Connection | None = None
        self._keeps_record = record
        try:
            self._open(integrity)
        except BaseException as error:
            self._close_files(checkpoint=False)
            if lock is None:
                self._lock.release()
            if isinstance(error, (DataDirError, ValueError)):
                raise
            if isinstance(error, sqlite3.Error):
                raise sqlite_failure(self.path, error) from None
            if isinstance(error, OSError):
                raise DataDirError(f"cannot open {self.path}: {error.strerror or error}") from None
            raise
        self.commits = 0
        self.checkpoints = 0
        self.checkpoint_backlog = 0  # (a commit log's: ``LoggedStore``; none waits here)
        self.vacuumed_pages = 0
        self._prepared: Tally | None = None  # the tally of the group between prepare and finish

    # ---------------------------------------------------------------- opening

    @property
    def db(self) -> sqlite3.Connection:
        assert self._db is not None
        return self._db

    def _open(self, integrity: str) -> None:
        if self.path.is_dir():
            raise DataDirError(f"{self.path} is a directory, not a database file: remove it or use another --data-dir")
        exists = self.path.exists() and self.path.stat().st_size > 0
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db = self._db
        # auto_vacuum must be chosen before the first table exists (ignored afterwards).
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise DataDirError(f"{self.path}: SQLite refused WAL mode (got {mode!r})")
        db.execute("PRAGMA synchronous = FULL")
        db.execute(f"PRAGMA cache_size = -{CACHE_BYTES >> 10}")  # negative: KiB, not pages
        # After each checkpoint that resets the WAL, cut the file back to this size (else it keeps the
        # size of its largest burst until the next TRUNCATE checkpoint).
        db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
        record = read_record(self.directory) if self._keeps_record else None
        tables = {str(row[0]) for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            self._create(record, existed=exists)
        else:
            if integrity != "off":
                quick_check(db, self.path, integrity)
            self._check_stored(tables, record)
        if self._keeps_record:
            self._record = RecordFile(self.directory)
            self._record.write(self.tally)

    def _create(self, record: Tally | None, *, existed: bool) -> None:
        if record is not None and record.seq > 0:
            raise DataDamagedError(
                f"{self.path} {'holds no tables' if existed else 'is missing or empty'} but "
                f"{self.directory / RECORD_NAME} records {record.seq} committed group(s) "
                f"({record.local_inserted} local write(s)): the data was lost; {REPAIR_HINT}"
            )
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "CREATE TABLE versions ("
                " key BLOB NOT NULL, ts INTEGER NOT NULL, dc INTEGER NOT NULL, value BLOB, dv BLOB,"
                " crc INTEGER NOT NULL, PRIMARY KEY (key, ts, dc)) WITHOUT ROWID"
            )
            db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL, crc INTEGER NOT NULL)")
            self._put_meta("identity", self.identity.to_json())
            self._put_meta("commit", _tally_to_json(self.tally))
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        self.fresh = True

    def _check_stored(self, tables: set[str], record: Tally | None) -> None:
        if not {"versions", "meta"} <= tables:
            raise DataDamagedError(f"{self.path} is not an okapikv database (tables: {', '.join(sorted(tables))}); "
                                   "use another --data-dir")
        columns = {str(row[1]) for row in self.db.execute("PRAGMA table_info(meta)")}
        checksummed = "crc" in columns
        identity_text = self._meta("identity", checksummed)
        if identity_text is None:
            raise DataDamagedError(f"{self.path}: the metadata has no identity row; {REPAIR_HINT}")
        data_format = self._parse("identity", identity_text, lambda text: _json_object(text).get("format"))
        found = self._parse("identity", identity_text, Identity.from_json)
        if data_format not in (FORMAT_VERSION, *MIGRATED_FORMATS) or (data_format == FORMAT_VERSION) != checksummed:
            raise DataDirError(
                f"{self.path} holds data format {data_format!r}; this build reads format {FORMAT_VERSION} (and "
                f"migrates {', '.join(map(str, MIGRATED_FORMATS))}): use the okapikv that wrote it, or another "
                "--data-dir"
            )
        if found != self.identity and not self.identity.grew_from(found):
            differences = [
                f"{name} {getattr(found, name)!r} (this server: {getattr(self.identity, name)!r})"
                for name in _IDENTITY_FIELDS
                if getattr(found, name) != getattr(self.identity, name)
            ]
            raise DataDirError(
                f"data directory {self.directory} belongs to another server: " + "; ".join(differences)
                + ". Give this server another data directory, or remove this one to start empty"
            )
        num_dcs = len(self.identity.dcs)
        state = self._meta("state", checksummed)
        if state is not None:
            self._parse("state", state, lambda text: State.from_json(text, num_dcs))
        bound = self._clock_bound(checksummed)
        if data_format != FORMAT_VERSION:
            self._migrate()
            return
        commit = self._meta("commit", checksummed)
        if commit is None:
            raise DataDamagedError(f"{self.path}: the metadata has no commit row; {REPAIR_HINT}")
        self.tally = self._parse("commit", commit, lambda text: _tally_from_json(text, bound))
        if self._keeps_record:
            self._check_record(record)

    def reload_tally(self) -> None:
        """Read the commit row back after another process wrote a checkpoint under this store's
        lock (``checkpoint_process``)."""
        commit = self._meta("commit")
        if commit is None:
            raise DataDamagedError(f"{self.path}: the metadata has no commit row; {REPAIR_HINT}")
        bound = self._clock_bound(True)
        self.tally = self._parse("commit", commit, lambda text: _tally_from_json(text, bound))

    def _parse(self, name: str, text: str, parse: Any) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise DataDamagedError(f"{self.path}: metadata row {name!r} {error}; {REPAIR_HINT}") from None

    def _clock_bound(self, checksummed: bool) -> int:
        text = self._meta("clock_bound_us", checksummed)
        if text is None:
            return 0
        try:
            bound = int(text)
        except ValueError:
            bound = -1
        if bound < 0:
            raise DataDamagedError(f"{self.path}: metadata row 'clock_bound_us' is not a number; {REPAIR_HINT}")
        return bound

    def _check_record(self, record: Tally | None) -> None:
        """A database behind its commit record lost committed groups (module docstring)."""
        stored = self.tally
        record_path = self.directory / RECORD_NAME
        if record is None:
            if stored.seq > 0:
                raise DataDamagedError(
                    f"{record_path} is missing, so {self.path} (commit group {stored.seq}) cannot be checked for "
                    f"lost commits; {REPAIR_HINT}"
                )
            return
        if record.seq <= stored.seq:
            return
        local = record.local_inserted - stored.local_inserted
        replicated = record.inserted - stored.inserted - local
        raise DataDamagedError(
            f"{self.path} lost committed writes: it holds commit groups up to {stored.seq} but {record_path} records "
            f"{record.seq}, so {record.seq - stored.seq} group(s) are missing with {local} acknowledged local "
            f"write(s) ({self._lost_range(stored.local_ts, record.local_ts)}) and {replicated} replicated "
            f"update(s): its WAL ({DATABASE_NAME}-wal) was cut short, lost or replaced by an older copy; {REPAIR_HINT}"
        )

    @staticmethod
    def _lost_range(after: int, through: int) -> str:
        if through <= after:
            return "none newer than the database's"
        start = f"after {describe_timestamp(after)}" if after else "from the first"
        return f"timestamps {start} up to {describe_timestamp(through)}"

    def _migrate(self) -> None:
        """Format 1 -> 2 in one transaction: add and fill the checksum columns, the commit row."""
        db = self.db
        db.create_function("okapi_version_crc", 5, version_checksum, deterministic=True)
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("ALTER TABLE versions ADD COLUMN crc INTEGER NOT NULL DEFAULT 0")
            db.execute("ALTER TABLE meta ADD COLUMN crc INTEGER NOT NULL DEFAULT 0")
            db.execute("UPDATE versions SET crc = okapi_version_crc(key, ts, dc, value, dv)")
            for name, value in db.execute("SELECT name, value FROM meta").fetchall():
                self._put_meta(str(name), str(value))
            self._put_meta("identity", self.identity.to_json())
            count = int(db.execute("SELECT count(*) FROM versions").fetchone()[0])
            local = int(db.execute("SELECT count(*) FROM versions WHERE dc = ?", (self._local_dc,)).fetchone()[0])
            newest = db.execute("SELECT max(ts) FROM versions WHERE dc = ?", (self._local_dc,)).fetchone()[0]
            bound = self._clock_bound(True)
            self.tally = Tally(0, count, local, 0 if newest is None else _timestamp(int(newest)), bound)
            self._put_meta("commit", _tally_to_json(self.tally))
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        self.migrated_versions = count

    def _meta(self, name: str, checksummed: bool = True) -> str | None:
        if not checksummed:
            row = self.db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
            return None if row is None else str(row[0])
        row = self.db.execute("SELECT value, crc FROM meta WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        value = str(row[0])
        if meta_checksum(name, value) != row[1]:
            raise DataDamagedError(f"{self.path}: metadata row {name!r} fails its checksum (damaged); {REPAIR_HINT}")
        return value

    def _put_meta(self, name: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (name, value, crc) VALUES (?, ?, ?)",
                        (name, value, meta_checksum(name, value)))

    # ---------------------------------------------------------------- recovery

    def load_state(self) -> State | None:
        stored = self._meta("state")
        if stored is None:
            return None
        parsed: State = self._parse("state", stored, lambda text: State.from_json(text, len(self.identity.dcs)))
        return parsed

    def load_clock_bound_us(self) -> int:
        return self._clock_bound(True)

    def load_versions(self) -> Iterator[tuple[bytes, Version]]:
        """Every stored version, each key's chain oldest first (the order ``insert`` likes best),
        each verified against its checksum (``DataDamagedError`` at the first that fails)."""
        num_dcs = len(self.identity.dcs)
        dv_bytes = 8 * num_dcs
        cursor = self.db.execute("SELECT key, ts, dc, value, dv, crc FROM versions ORDER BY key, ts, dc")
        try:
            for key, stored_ts, dc, value, dv, crc in cursor:
                # a dv shorter than the DC count: written under a shorter DC list (``okapikv.core.growth``)
                if (version_checksum(key, stored_ts, dc, value, dv) != crc or not 0 <= dc < num_dcs
                        or (dv is not None and (len(dv) % 8 or not 0 < len(dv) <= dv_bytes))):
                    source = self.identity.dcs[dc] if 0 <= dc < num_dcs else dc
                    raise DataDamagedError(
                        f"{self.path}: the version of key {describe_key(bytes(key))} written at "
                        f"{describe_timestamp(_timestamp(stored_ts))} in DC {source} fails its checksum (damaged); "
                        f"{REPAIR_HINT}"
                    )
                yield bytes(key), Version(None if value is None else bytes(value), _timestamp(stored_ts), dc,
                                          _unpack_vector(dv))
        except sqlite3.Error as error:
            raise sqlite_failure(self.path, error) from None

    def version_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM versions").fetchone()[0])

    # ---------------------------------------------------------------- writing

    def commit(self, group: CommitGroup) -> None:
        """Write one group in one transaction (durable when this returns), then its commit record:
        ``prepare``, ``finish``, ``record``, in one go."""
        self.prepare(group)
        self.finish()
        self.record()

    def prepare(self, group: CommitGroup) -> None:
        """Open the group's transaction and run its statements, all but the COMMIT (``finish``).

        The group's rows go in two statements, whatever their number (``_rows``): every removal,
        then every insert. The group committer calls this and ``finish`` on its worker
        (``group_commit``); servers write through the commit log (``logged_store``), whose record
        is one step, where each SQLite step here lets go of the GIL and must take it back from a
        busy loop's thread (up to the interpreter's 5 ms switch interval).
        Until ``finish`` or ``abort``, no other use of the connection."""
        tally = self.tally
        removed, rows, inserted, local, local_ts = _rows(group.changes, self._local_dc, tally.local_ts)
        bound = tally.clock_bound_us if group.clock_bound_us is None else group.clock_bound_us
        new = Tally(tally.seq + 1, tally.inserted + inserted, tally.local_inserted + local, local_ts, bound)
        self._write(removed, rows, group.state, group.clock_bound_us, new)

    def apply(self, changes: list[Change], state: State | None, clock_bound_us: int | None, tally: Tally,
              before_commit: Callable[[], None] | None = None) -> None:
        """Write the changes of many groups in one transaction ending at ``tally`` (a checkpoint of
        the commit log: ``logged_store``); durable when this returns."""
        removed, rows, *_ = _rows(changes, self._local_dc, 0)
        self._write(removed, rows, state, clock_bound_us, tally)
        if before_commit is not None:
            before_commit()
        self.finish()

    def _write(self, removed: list[tuple[bytes, int, int]], rows: list[tuple[Any, ...]], state: State | None,
               clock_bound_us: int | None, new: Tally) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            if removed:
                db.executemany("DELETE FROM versions WHERE key = ? AND ts = ? AND dc = ?", removed)
            if rows:
                db.executemany("INSERT OR REPLACE INTO versions (key, ts, dc, value, dv, crc) "
                               "VALUES (?, ?, ?, ?, ?, ?)", rows)
            if state is not None:
                self._put_meta("state", state.to_json())
            if clock_bound_us is not None:
                self._put_meta("clock_bound_us", str(clock_bound_us))
            self._put_meta("commit", _tally_to_json(new))
        except BaseException:
            self.abort()
            raise
        self._prepared = new

    def finish(self) -> None:
        """COMMIT the prepared group: durable when this returns (``synchronous=FULL``)."""
        new = self._prepared
        assert new is not None, "finish() without prepare()"
        try:
            self.db.execute("COMMIT")
        except BaseException:
            self.abort()
            raise
        self._prepared = None
        self.tally = new
        self.commits += 1

    def abort(self) -> None:
        """Roll the prepared (or failed) group back."""
        self._prepared = None
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("ROLLBACK")

    def record(self) -> None:
        """Count the last finished group in the commit record (``commit_record``): after its COMMIT,
        before it is reported durable."""
        assert self._record is not None
        self._record.write(self.tally)

    def maintain(self) -> None:
        """Truncate the WAL and give free pages back when they pile up (see the module docstring);
        flush the commit record."""
        db = self.db
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.checkpoints += 1
        if self._record is not None:
            self._record.flush()
        free = int(db.execute("PRAGMA freelist_count").fetchone()[0])
        total = int(db.execute("PRAGMA page_count").fetchone()[0])
        if free >= VACUUM_MIN_FREE_PAGES and free > total * VACUUM_FREE_SHARE:
            release = free - int(total * VACUUM_FREE_SHARE / 2)
            # executescript steps the pragma to completion (``execute`` would free a single page).
            db.executescript(f"PRAGMA incremental_vacuum({release});")
            self.vacuumed_pages += release
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def checkpoint(self) -> None:
        """Truncate the WAL now (a full disk: the next groups then reuse its space)."""
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.checkpoints += 1

    def disk_bytes(self) -> int:
        """Bytes the database takes on disk now (main file, WAL and shared-memory index)."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                total += os.path.getsize(f"{self.path}{suffix}")
        return total

    def _close_files(self, *, checkpoint: bool) -> None:
        if self._db is not None:
            if checkpoint:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        if self._record is not None:
            with contextlib.suppress(OSError):
                self._record.close()
            self._record = None

    def close(self, *, checkpoint: bool = True) -> None:
        """Close the files and release the lock; ``checkpoint=False`` leaves a damaged database as
        it was found (no checkpoint writes the WAL into it)."""
        self._close_files(checkpoint=checkpoint)
        self._lock.release()


def _rows(changes: list[Change], local_dc: int, local_ts: int,
          ) -> tuple[list[tuple[bytes, int, int]], list[tuple[Any, ...]], int, int, int]:
    """A group's changes as the rows to delete and the rows to insert, with what the ``Tally``
    counts: the versions inserted, those of them written here, and the newest local timestamp.

    Rows are named by their primary key ``(key, ts, dc)`` and changes of different rows commute,
    so only a row's last change in the group counts (a version removed and inserted again ends up
    present; one inserted and removed again is deleted, which finds nothing): the removals and the
    inserts are then two sets of distinct rows, one statement each. A group of SWAPs alternates
    them (each new version, then the old one GC removed), and a statement per change cost SQLite a
    statement reset and Python a call per row: YCSB-A's groups of 16 SWAPs (32 changes), 318 ->
    204 us of CPU per group without the fsync (this 2-core VM, 2026-12-01)."""
    if all([change.inserted for change in changes]):
        # Only inserts (a bulk load, PUTs of new keys): the store logs a version once, so the rows
        # are already distinct and need no last-change table (1M-record loads: ~0.5 us a row).
        return [], *_insert_rows(changes, local_dc, local_ts)
    last: dict[tuple[bytes, int, int], Change] = {}
    inserted = local = 0
    for change in changes:
        version = change.version
        dc = version.source_dc
        last[(change.key, version.timestamp, dc)] = change
        if change.inserted:
            inserted += 1
            if dc == local_dc:
                local += 1
                if version.timestamp > local_ts:
                    local_ts = version.timestamp
    removed: list[tuple[bytes, int, int]] = []
    rows: list[tuple[Any, ...]] = []
    for (key, timestamp, dc), (_, version, insert) in last.items():
        ts = timestamp - _SIGN
        if insert:
            value, dv = version.value, _pack_vector(version.dv)
            rows.append((key, ts, dc, value, dv, version_checksum(key, ts, dc, value, dv)))
        else:
            removed.append((key, ts, dc))
    return removed, rows, inserted, local, local_ts


def _insert_rows(changes: list[Change], local_dc: int, local_ts: int,
                 ) -> tuple[list[tuple[Any, ...]], int, int, int]:
    """``_rows`` of a group of inserts only: the rows, the versions, the local ones, the newest
    local timestamp."""
    rows: list[tuple[Any, ...]] = []
    local = 0
    for key, version, _ in changes:
        dc = version.source_dc
        timestamp = version.timestamp
        if dc == local_dc:
            local += 1
            if timestamp > local_ts:
                local_ts = timestamp
        ts = timestamp - _SIGN
        value, dv = version.value, _pack_vector(version.dv)
        rows.append((key, ts, dc, value, dv, version_checksum(key, ts, dc, value, dv)))
    return rows, len(changes), local, local_ts


# ==================================================================== salvage (repair)


@dataclass(slots=True)
class Salvage:
    """What a damaged directory still yields: its verified local versions (``repair`` keeps those
    no replica holds), the rows that failed, the first read error, and the best clock bound found
    (the database's, the commit record's)."""

    local_versions: list[tuple[bytes, Version]]
    damaged_rows: int
    error: str | None
    clock_bound_us: int
    moved_aside: list[Path]


def salvage(directory: Path, local_dc: int) -> Salvage:
    """Move the files of a damaged data directory aside (``okapi.sqlite3.damaged-<UTC time>``, its
    WAL beside it, so SQLite still finds it), then read what can be read of them, read-only (never
    raises on damage), so a fresh store can start in the directory. The lock must be held."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = directory / f"{DATABASE_NAME}.damaged-{stamp}"
    moved: list[Path] = []
    for name, target in ((DATABASE_NAME, aside), (f"{DATABASE_NAME}-wal", Path(f"{aside}-wal")),
                         (f"{DATABASE_NAME}-shm", Path(f"{aside}-shm")),
                         (RECORD_NAME, directory / f"{RECORD_NAME}.damaged-{stamp}")):
        source = directory / name
        if source.exists() or source.is_symlink():
            try:
                source.rename(target)
            except OSError as failure:
                raise DataDirError(f"cannot move the damaged {source} aside: {failure.strerror or failure}") from None
            moved.append(target)
    versions: list[tuple[bytes, Version]] = []
    damaged = 0
    error: str | None = None
    bound = 0
    with contextlib.suppress(DataDamagedError):
        record = read_record(directory, RECORD_NAME + f".damaged-{stamp}")
        if record is not None:
            bound = record.clock_bound_us
    if aside.is_file():
        try:
            db = sqlite3.connect(f"file:{aside}?mode=ro", uri=True, isolation_level=None)
        except sqlite3.Error as failure:
            error = str(failure)
        else:
            try:
                with contextlib.suppress(sqlite3.Error, ValueError):
                    row = db.execute("SELECT value FROM meta WHERE name = 'clock_bound_us'").fetchone()
                    if row is not None:
                        bound = max(bound, int(row[0]))
                columns = {str(row[1]) for row in db.execute("PRAGMA table_info(versions)")}
                crc_column = "crc" if "crc" in columns else "NULL"
                cursor = db.execute(f"SELECT key, ts, dc, value, dv, {crc_column} FROM versions WHERE dc = ?",
                                    (local_dc,))
                for key, stored_ts, dc, value, dv, crc in cursor:
                    if crc is not None and version_checksum(key, stored_ts, dc, value, dv) != crc:
                        damaged += 1
                        continue
                    versions.append((bytes(key), Version(None if value is None else bytes(value),
                                                         _timestamp(stored_ts), dc, _unpack_vector(dv))))
            except sqlite3.Error as failure:
                error = str(failure)
            finally:
                db.close()
    return Salvage(versions, damaged, error, bound, moved)
