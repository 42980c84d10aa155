"""The durable store of one partition server: the commit log, checkpointed into SQLite.

A commit group is durable once its record is in the log (``log``): ``prepare`` encodes it,
``finish`` appends it with one ``write`` and one ``fdatasync``, ``record`` counts it in the commit
record (``commit_record``), all three on the storage worker. The SQLite file
(``sqlite.SqliteStore``, ``synchronous=FULL``) is the checkpoint: a background thread has every
closed segment folded into it in one transaction (only each row's last change counts, so overwrites
and GC removals of the same keys collapse) by a process of its own (``checkpoint_process``: the
fold kept off the server's interpreter lock), and deletes the segments once that transaction is
durable. A segment is closed when it reaches ``segment_bytes`` (8 MiB), so the log holds about one
or two segments, which bounds recovery time and disk use (docs/storage.md), or, holding at least
``IDLE_CHECKPOINT_BYTES``, once no version was written for ``IDLE_CHECKPOINT_S`` (the tail of a
bulk load is folded while the server is quiet); a clean close checkpoints all.

Recovery (at open): the SQLite checks, then every segment is read and verified, folding each row's
last change in memory; the records after the checkpoint's group number must follow it without a
gap, and the last group must reach the commit record's (else committed groups were lost: one line,
``DataDamagedError``). ``load_versions`` yields the checkpoint's rows the log did not change, then
the log's inserts; after that the checkpointer folds the recovered segments into SQLite in the
background. A crash at any point is safe: a checkpoint is one SQLite transaction, records it
already holds are skipped on replay, and segments are deleted only after it is durable.

Threads: ``prepare``, ``finish``, ``record``, ``maintain``, ``checkpoint`` and ``close`` on the one
storage worker (the checkpointer closes an idle open segment under ``_writer_lock``, which the
worker's append takes too); once the core has loaded, the checkpointer thread alone uses the SQLite connection
(``_ckpt_lock`` serializes it with ``checkpoint`` and ``close``, which fold in process), and while
a checkpoint process writes the file this store's connection stays idle and then reads the
checkpoint's group number back (``SqliteStore.reload_tally``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from okapikv.core.mvstore import Change, Version
from okapikv.lifetime import child_environment
from okapikv.storage.commit_record import RECORD_NAME, RecordFile, Tally, read_record
from okapikv.storage.errors import REPAIR_HINT, DataDamagedError
from okapikv.storage.integrity import describe_timestamp
from okapikv.storage.log import (
    MAGIC,
    LogRecord,
    LogScan,
    LogWriter,
    encode_record,
    group_rows,
    read_log,
    segment_name,
    segments,
    sync_directory,
)
from okapikv.storage.sqlite import CommitGroup, DirectoryLock, Identity, SqliteStore, State

log = logging.getLogger("okapikv.storage")

#: a segment is closed (and checkpointed) once it holds this much
SEGMENT_BYTES = 8 << 20
#: the longest a background checkpoint process may run before it is killed (its segments are kept
#: and folded by the next one); a checkpoint of 1,000,000 logged versions takes about 7 s alone
CHECKPOINT_TIMEOUT_S = 600.0
#: a checkpoint process of at most this many segments runs at ``CHECKPOINT_NICENESS``, so on a busy
#: machine it takes the CPU the server and its clients leave; a longer backlog (checkpoints falling
#: behind) runs at the server's priority, so the log stays bounded under any load
NICE_BACKLOG_SEGMENTS = 2
CHECKPOINT_NICENESS = 10
#: an open segment holding at least ``IDLE_CHECKPOINT_BYTES`` is closed (and checkpointed) once no
#: version was written or removed for ``IDLE_CHECKPOINT_S``: the tail of a burst (a bulk load leaves up to a
#: segment of it) is folded while the server is quiet instead of at the next segment's end, under
#: load; a trickle of writes still checkpoints at most once per ``IDLE_CHECKPOINT_BYTES``
IDLE_CHECKPOINT_S = 2.0
IDLE_CHECKPOINT_BYTES = SEGMENT_BYTES // 8
STATE_FIELDS = tuple(field.name for field in dataclasses.fields(State))
#: test-only crash points (``OKAPI_FAULT_INJECTION=1`` and ``OKAPI_STORAGE_KILL_AT=<point>``): the
#: process kills itself with SIGKILL there, once it has appended ``OKAPI_STORAGE_KILL_AFTER`` groups
#: (``tests/unit/test_logged_store.py``)
KILL_POINTS = ("append", "checkpoint", "checkpoint-committed", "segment-deletion")


def _kill_point() -> tuple[str, int]:
    if os.environ.get("OKAPI_FAULT_INJECTION") != "1":
        return "", 0
    return os.environ.get("OKAPI_STORAGE_KILL_AT", ""), int(os.environ.get("OKAPI_STORAGE_KILL_AFTER", "0"))


class LoggedStore:
    """The data directory of one partition server (module docstring). The interface the group
    committer and recovery use: ``prepare``/``finish``/``record`` (or ``commit``), ``maintain``,
    ``checkpoint``, ``close``, and the ``load_*`` methods of the checkpoint after open."""

    def __init__(self, directory: str | Path, identity: Identity, *, integrity: str = "quick",
                 lock: DirectoryLock | None = None, segment_bytes: int = SEGMENT_BYTES,
                 idle_checkpoint_s: float = IDLE_CHECKPOINT_S,
                 idle_checkpoint_bytes: int = IDLE_CHECKPOINT_BYTES) -> None:
        self.directory = Path(directory)
        self.db = SqliteStore(self.directory, identity, integrity=integrity, lock=lock, record=False)
        self._identity = identity
        self._local_dc = identity.dc_index
        self._kill_at, self._kill_after = _kill_point()
        self._record: RecordFile | None = None
        self._prepared: tuple[Tally, bytes, int] | None = None
        self._closed_segments: list[Path] = []
        self._segments_lock = threading.Lock()
        self._writer_lock = threading.Lock()  # the worker's appends against the checkpointer's idle close
        self.idle_checkpoint_s = idle_checkpoint_s
        self.idle_checkpoint_bytes = idle_checkpoint_bytes
        self._ckpt_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self.checkpoints = 0
        self.checkpoint_seconds = 0.0
        self.commits = 0
        self.changes = 0  # versions inserted or removed by the groups appended
        self.replayed = 0
        self.tally = Tally()
        self._folded: Folded | None = None
        try:
            self.fresh = self._recover_log(read_record(self.directory))
            self._record = RecordFile(self.directory)
            self._record.write(self.tally)
        except BaseException:
            if lock is None:
                self.db.close(checkpoint=False)
            else:
                self.db._close_files(checkpoint=False)  # the caller keeps its lock
            raise
        self._writer = LogWriter(self.directory, STATE_FIELDS, segment_bytes)
        self._writer.make_spare()  # the first segment is written in place too (``log``)
        self._spare_wanted = threading.Event()
        self._spare_thread = threading.Thread(target=self._spares, name="okapi-log-spare", daemon=True)
        self._spare_thread.start()
        self._thread = threading.Thread(target=self._checkpointer, name="okapi-checkpoint", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- what the rest reads

    @property
    def path(self) -> Path:
        return self.db.path

    @property
    def migrated_versions(self) -> int | None:
        return self.db.migrated_versions

    @property
    def vacuumed_pages(self) -> int:
        return self.db.vacuumed_pages

    def load_state(self) -> State | None:
        """The state as of the last group: the log's newest, else the checkpoint's."""
        folded = self._folded
        return folded.state if folded is not None and folded.state is not None else self.db.load_state()

    def load_clock_bound_us(self) -> int:
        return max(self.db.load_clock_bound_us(), self.tally.clock_bound_us)

    def load_versions(self) -> Iterator[tuple[bytes, Version]]:
        """Every version as of the last group: the checkpoint's rows that the log did not change,
        then the log's inserts (each row's last change). Once read, the checkpointer may fold the
        log into SQLite (it would otherwise share the connection with this read)."""
        folded = self._folded
        if folded is None or not folded.last:
            yield from self.db.load_versions()
        else:
            changed = folded.last
            for key, version in self.db.load_versions():
                if (key, version.timestamp, version.source_dc) not in changed:
                    yield key, version
            for change in changed.values():
                if change.inserted:
                    yield change.key, change.version
        if folded is not None:
            folded.last = {}  # the state and tally stay what ``load_state`` reports
        self._wake.set()

    def version_count(self) -> int:
        return self.db.version_count()

    @property
    def checkpoint_backlog(self) -> int:
        """Segments the checkpointer will fold with no further write: the closed ones (the one
        being folded included) and an open one big enough to be closed once idle
        (``IDLE_CHECKPOINT_BYTES``). 0 once a bulk load's log is in SQLite but a small tail."""
        with self._segments_lock:
            closed = len(self._closed_segments)
        return closed + (self._writer.size >= self.idle_checkpoint_bytes)

    def disk_bytes(self) -> int:
        """Bytes on disk: the checkpoint (database, WAL) and the log segments."""
        total = self.db.disk_bytes()
        for path in segments(self.directory):
            with contextlib.suppress(OSError):
                total += path.stat().st_size
        return total

    # ---------------------------------------------------------------- recovery

    def _recover_log(self, record: Tally | None) -> bool:
        """Read the log after the checkpoint (module docstring); whether the directory held no data.
        Nothing is written unless every check passes: then a torn tail is cut off, and the segments
        are handed to the checkpointer, which folds them into SQLite once the core has loaded."""
        base = self.db.tally
        paths = segments(self.directory)
        scan = LogScan()
        self._folded = _fold(read_log(paths, scan), base, self.directory)
        tally = self._folded.tally
        self._check_record(record, tally, bool(paths))
        if scan.torn is not None:
            torn, offset = scan.torn
            log.warning("%s: dropped a torn last record at byte %d (a write cut short by a crash; never "
                        "acknowledged)", torn, offset, extra={"event": "log_torn_tail"})
            if offset <= len(MAGIC):
                torn.unlink()
                paths.remove(torn)
            else:
                os.truncate(torn, offset)
                with open(torn, "rb+") as file:
                    os.fsync(file.fileno())
            sync_directory(self.directory)
        opened_next = self.directory / segment_name(tally.seq + 1)
        if opened_next in paths:  # created for the next group, which never came: the writer reopens it
            opened_next.unlink()
            paths.remove(opened_next)
            sync_directory(self.directory)
        self._closed_segments.extend(paths)
        self.replayed = self._folded.count
        self.tally = tally
        return self.db.fresh and tally.seq == base.seq

    def _check_record(self, record: Tally | None, stored: Tally, had_log: bool) -> None:
        """Committed groups the checkpoint and the log lost (``commit_record``)."""
        record_path = self.directory / RECORD_NAME
        if record is None:
            if stored.seq > 0:
                raise DataDamagedError(
                    f"{record_path} is missing, so {self.path} (commit group {stored.seq}) cannot be checked for "
                    f"lost commits; {REPAIR_HINT}")
            return
        if record.seq <= stored.seq:
            return
        if stored.seq == 0 and self.db.fresh and not had_log:
            raise DataDamagedError(
                f"{self.path} is missing or empty but {record_path} records {record.seq} committed group(s) "
                f"({record.local_inserted} local write(s)): the data was lost; {REPAIR_HINT}")
        local = record.local_inserted - stored.local_inserted
        replicated = record.inserted - stored.inserted - local
        if record.local_ts > stored.local_ts:
            start = f"after {describe_timestamp(stored.local_ts)}" if stored.local_ts else "from the first"
            lost = f"timestamps {start} up to {describe_timestamp(record.local_ts)}"
        else:
            lost = "none newer than the stored ones"
        raise DataDamagedError(
            f"{self.directory} lost committed writes: its checkpoint and log hold commit groups up to {stored.seq} "
            f"but {record_path} records {record.seq}, so {record.seq - stored.seq} group(s) are missing with "
            f"{local} acknowledged local write(s) ({lost}) and {replicated} replicated update(s): its log "
            f"segments were cut short, lost or replaced by older copies; {REPAIR_HINT}")

    def _fault(self, point: str) -> None:
        if self._kill_at == point and self.commits >= self._kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    # ---------------------------------------------------------------- writing (``group_commit``)

    def commit(self, group: CommitGroup) -> None:
        """``prepare``, ``finish`` and ``record`` in one go (durable when this returns)."""
        self.prepare(group)
        self.finish()
        self.record()

    def prepare(self, group: CommitGroup) -> None:
        """Encode the group's record and the tally after it (on the storage worker)."""
        tally = self.tally
        rows, inserted, local, local_ts = group_rows(group.changes, self._local_dc, tally.local_ts)
        bound = tally.clock_bound_us if group.clock_bound_us is None else group.clock_bound_us
        new = Tally(tally.seq + 1, tally.inserted + inserted, tally.local_inserted + local, local_ts, bound)
        data = encode_record(new.seq, group.clock_bound_us, group.state,
                             (new.inserted, new.local_inserted, new.local_ts), rows)
        self._prepared = (new, data, len(group.changes))

    def finish(self) -> None:
        """Append the prepared record and fdatasync it (on the worker): durable when this returns."""
        prepared = self._prepared
        assert prepared is not None, "finish() without prepare()"
        new, data, changes = prepared
        if self._kill_at == "append" and self.commits >= self._kill_after:
            self._writer.append(new.seq, data[: len(data) // 2])  # a write cut short, then the crash
            self._fault("append")
        with self._writer_lock:
            self._writer.append(new.seq, data)
        self._prepared = None
        self.tally = new
        self.commits += 1
        self.changes += changes
        if self._writer.records == 1:
            self._spare_wanted.set()  # a new segment took the spare: the next one is made now
        if self._writer.full:
            self._rotate()
            self._wake.set()

    def abort(self) -> None:
        self._prepared = None

    def record(self) -> None:
        """Count the last finished group in the commit record (before it is reported durable)."""
        assert self._record is not None
        self._record.write(self.tally)

    # ---------------------------------------------------------------- checkpoints

    def _rotate(self) -> None:
        """Close the open segment (on the worker, or on the checkpointer once idle), handing it to
        the checkpointer."""
        with self._writer_lock:
            if self._writer.records:
                path = self._writer.close()
                if path is not None:
                    with self._segments_lock:
                        self._closed_segments.append(path)

    def _close_idle(self, changes_seen: int) -> bool:
        """On the checkpointer, ``idle_checkpoint_s`` after it last looked: close the open segment
        if no version was written or removed meanwhile (an idle server still writes groups of its
        vectors alone, ``group_commit``'s lazy groups) and it holds at least
        ``idle_checkpoint_bytes``."""
        with self._writer_lock:
            if self.changes != changes_seen or self._writer.size < self.idle_checkpoint_bytes:
                return False
        self._rotate()
        return True

    def maintain(self) -> None:
        """Every maintenance pass (worker): flush the commit record (checkpoints follow the log's
        size, not the clock: module docstring)."""
        if self._record is not None:
            self._record.flush()

    def checkpoint(self, *, in_process: bool = True) -> None:
        """Checkpoint now, on the calling thread (a full disk: deleting segments frees space);
        ``in_process=False``: fold in a checkpoint process, as the background checkpointer does."""
        self._rotate()
        self._checkpoint(in_process=in_process)

    def _spares(self) -> None:
        """Make the next segment ahead (``LogWriter.make_spare``) each time a segment takes the spare:
        on a thread of its own, so neither the commit path nor a long checkpoint waits for it."""
        while True:
            self._spare_wanted.wait()
            self._spare_wanted.clear()
            if self._stopping:
                return
            self._writer.make_spare()

    def _checkpointer(self) -> None:
        while True:
            changes_seen = self.changes
            woken = self._wake.wait(self.idle_checkpoint_s)
            self._wake.clear()
            if self._stopping:
                return
            if not woken and not self._close_idle(changes_seen):
                continue
            try:
                self._checkpoint(in_process=False)
            except Exception as error:
                log.warning("%s: checkpoint failed (the log keeps its segments): %s", self.directory, error)

    def _checkpoint(self, *, in_process: bool = True) -> None:
        """Fold the closed segments into SQLite, then delete them (module docstring); the
        background checkpointer does the fold in a process of its own (``checkpoint_process``)."""
        with self._ckpt_lock:
            with self._segments_lock:
                paths = list(self._closed_segments)
            if not paths:
                return
            started = time.perf_counter()
            folded_here = in_process or not self._checkpoint_in_child(paths)
            if folded_here:
                apply_log(self.db, read_log(paths, LogScan()), self.directory, lambda: self._fault("checkpoint"))
            self._fault("checkpoint-committed")
            for path in paths:
                path.unlink(missing_ok=True)
                self._fault("segment-deletion")
            sync_directory(self.directory)
            with self._segments_lock:
                del self._closed_segments[: len(paths)]
            if folded_here:  # (the checkpoint process truncated the WAL itself)
                self.db.maintain()
            self.checkpoints += 1
            self.checkpoint_seconds += time.perf_counter() - started

    def _checkpoint_in_child(self, paths: list[Path]) -> bool:
        """Run ``checkpoint_process`` on ``paths`` and wait for it: True once its transaction is
        durable, False where no process could be started (the caller folds in process instead);
        raises when it failed (its segments stay for the next checkpoint)."""
        command = [sys.executable, "-m", "okapikv.storage.checkpoint_process", f"--nice={niceness(len(paths))}",
                   str(self.directory), self._identity.to_json(), *map(str, paths)]
        try:
            done = subprocess.run(command, env=child_environment(), capture_output=True, text=True,
                                  timeout=CHECKPOINT_TIMEOUT_S, check=False)
        except OSError as error:
            log.warning("%s: cannot start a checkpoint process (%s): checkpointing in the server", self.directory,
                        error)
            return False
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the checkpoint process ran past {CHECKPOINT_TIMEOUT_S:.0f} s and was killed") from None
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            raise RuntimeError(f"the checkpoint process exited with status {done.returncode}"
                               + (f": {lines[-1]}" if lines else ""))
        self.db.reload_tally()
        self.db.vacuumed_pages += int(json.loads(done.stdout.strip().splitlines()[-1])["vacuumed_pages"])
        return True

    # ---------------------------------------------------------------- closing

    def close(self, *, checkpoint: bool = True) -> None:
        """Stop the checkpointer; with ``checkpoint``, fold the whole log into SQLite first (a clean
        restart then replays nothing); close the files and release the lock."""
        self._stopping = True
        self._wake.set()
        self._spare_wanted.set()
        self._thread.join(timeout=60)
        self._spare_thread.join(timeout=60)
        if checkpoint:
            try:
                self._rotate()
                self._checkpoint()
            except Exception as error:
                log.warning("%s: final checkpoint failed (the log keeps its segments): %s", self.directory, error)
        self._writer.close()  # (a segment whose first append failed holds no record: the next open reuses it)
        self._writer.discard_spare()
        if self._record is not None:
            with contextlib.suppress(OSError):
                self._record.close()
            self._record = None
        self.db.close(checkpoint=checkpoint)


@dataclass(slots=True)
class Folded:
    """Records folded after a checkpoint: each row's last change (by ``(key, timestamp, source
    DC)``), the newest state and clock bound, the tally they end at and the changes read."""

    tally: Tally
    last: dict[tuple[bytes, int, int], Change]
    state: State | None = None
    bound: int | None = None
    count: int = 0


def niceness(backlog: int) -> int:
    """How much less CPU priority a checkpoint process of ``backlog`` segments takes than the server
    (``NICE_BACKLOG_SEGMENTS``)."""
    return CHECKPOINT_NICENESS if backlog <= NICE_BACKLOG_SEGMENTS else 0


def apply_log(db: SqliteStore, entries: Iterable[LogRecord], directory: Path,
              before_commit: Callable[[], None] | None = None) -> None:
    """Fold the records of ``entries`` after the checkpoint ``db`` holds into it in one SQLite
    transaction (``_fold``); ``before_commit``: the test-only crash point."""
    base = db.tally
    folded = _fold(entries, base, directory)
    if folded.tally.seq > base.seq:
        db.apply(list(folded.last.values()), folded.state, folded.bound, folded.tally, before_commit=before_commit)


def _fold(entries: Iterable[LogRecord], base: Tally, directory: Path) -> Folded:
    """Fold the records after ``base`` as they are read (only each row's last change is kept, so
    folding overwrites holds the live rows, not the log); a group number that skips is lost data."""
    folded = Folded(base, {})
    last = folded.last
    for entry in entries:
        if entry.seq <= base.seq:
            continue  # already in the checkpoint (a crash before its segments were deleted)
        if entry.seq != folded.tally.seq + 1:
            raise DataDamagedError(f"{directory}: the log lost committed groups: after group {folded.tally.seq} it "
                                   f"holds group {entry.seq}; {REPAIR_HINT}")
        bound = folded.tally.clock_bound_us if entry.clock_bound_us is None else entry.clock_bound_us
        folded.tally = Tally(entry.seq, entry.inserted, entry.local_inserted, entry.local_ts, bound)
        for change in entry.changes:
            version = change.version
            last[(change.key, version.timestamp, version.source_dc)] = change
        folded.count += len(entry.changes)
        if entry.state is not None:
            folded.state = State(**entry.state)
        if entry.clock_bound_us is not None:
            folded.bound = entry.clock_bound_us
    return folded


def salvage_log(directory: Path, local_dc: int, stamp: str) -> tuple[list[tuple[bytes, Version]], list[Path]]:
    """Move the log segments of a damaged directory aside (``<name>.damaged-<stamp>``) and return the
    local versions their verified records still hold (up to the first damage) and the moved paths."""
    moved: list[Path] = []
    kept: dict[tuple[bytes, int], Version] = {}
    paths = segments(directory)
    with contextlib.suppress(DataDamagedError):
        for entry in read_log(paths, LogScan()):
            for key, version, inserted in entry.changes:
                if version.source_dc != local_dc:
                    continue
                if inserted:
                    kept[(key, version.timestamp)] = version
                else:
                    kept.pop((key, version.timestamp), None)
    for path in paths:
        target = path.with_name(f"{path.name}.damaged-{stamp}")
        path.rename(target)
        moved.append(target)
    return [(key, version) for (key, _), version in kept.items()], moved
