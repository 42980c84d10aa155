"""The commit log: each commit group as one checksummed record appended to a segment file.

Why a log: a durable server's commit path is the cost that matters (docs/storage.md). A group
written as SQL rows costs a statement per row on the event loop, SQLite's page work and a
transaction's worth of syscalls; the same group as one pre-encoded record costs one ``write`` and
one ``fdatasync`` on the storage worker. The SQLite file stays the checkpoint of the log
(``logged_store``): recovery replays the segments after it.

Layout: ``DIR/log-<first seq, 20 digits>.okl``, each::

    magic (8 bytes)  header frame  record frame  record frame ...

and a frame is ``payload length (u32, big-endian), crc32 of the payload (u32), payload``. The header
is a msgpack map naming the format, the segment's first group number and the field names of a
version and of the stored state, so a record carries a ``Version`` and the server's ``State``
generically (every field, in that order) and a build that adds fields still reads older segments
(a field a segment lacks takes its default). A record is a msgpack array::

    [seq, clock_bound_us | nil, state | nil, inserted, local_inserted, local_ts,
     [[key, inserted?, field, field, ...], ...]]

with the running tally (``commit_record.Tally``) after the group, so a replay ends with the tally
the commit record is checked against.

Written in place (format 2): a segment starts as a file of ``segment_bytes`` and a little more of
zeros, written and synced before it is used (``LogWriter.make_spare``, off the commit path), and
each record is written over those zeros. An ``O_DSYNC`` write into blocks the file already has is
the data and a cache flush; one that grows the file also commits the file system's journal (the
new size and blocks) first. On this project's VM a 3,000-byte record written in place took
x0.58-0.62 of the writing thread's CPU and about half the p50 latency (docs/benchmarks.md, "Durable
storage: where the durable extra goes, and segments written in place"). So the records of a
segment end where its zeros begin: a frame header of zeros followed only by zeros is the end
(format 1 segments have no such tail; both are read).

Direct writes: a record that falls within a segment's zeros is written through a second descriptor
opened ``O_DIRECT | O_DSYNC``, as whole 4 KiB blocks from a page-aligned buffer: the block the
record starts in (the bytes of the records before it, kept in memory, ``LogWriter._tail``), the
record, and zeros to the next block boundary, where the file already holds zeros. Such a write
skips the page cache's copy and writeback, and cost x0.55-0.65 of the kernel CPU of a buffered
``O_DSYNC`` write on this project's VM (a disk with a volatile write cache, so both end in a cache
flush; docs/benchmarks.md, "Durable storage: direct writes"). It rewrites the bytes before the
record with what they hold, so a write torn at any sector leaves them as they were. Where the file
system refuses ``O_DIRECT`` (tmpfs, some network file systems) or a record runs past the zeros,
the buffered descriptor writes it, as it writes the header.

Damage, while reading (``read_log``): a bad frame (a length past the end, a checksum that fails) at
the end of the newest segment, with nothing but zeros after it, is a torn last write (a power loss
during the write: the group was never durable, so never acknowledged) and is dropped; anywhere else
it is damage and stops the start with one line naming the segment and the byte
(``DataDamagedError``). A record's group number must follow the one before it (or the
checkpoint's), or groups were lost.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import mmap
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from okapikv.core.mvstore import Change, Version
from okapikv.storage.errors import REPAIR_HINT, DataDamagedError

log = logging.getLogger("okapikv.storage")

SEGMENT_PREFIX = "log-"
SEGMENT_SUFFIX = ".okl"
MAGIC = b"OKAPILG\n"
#: 2: written in place over zeros (module docstring); 1: appended (read, never written)
FORMAT = 2
FORMATS = (1, 2)
FRAME = struct.Struct(">II")
#: where a format 2 segment's records end: the zeros it was made of
ZERO_FRAME = bytes(FRAME.size)
#: the next segment, zeroed and synced ahead of use (``LogWriter.make_spare``); not a segment
SPARE_NAME = "log-spare.tmp"
#: zeros past ``segment_bytes``: the record that fills a segment may run past it
SPARE_SLACK = 256 << 10
#: no spare is made with less than this many times its size free (the disk reserve stays untouched)
SPARE_ROOM = 4
#: a frame claiming more is damage (a group of the largest bulk PUT is far below it)
MAX_FRAME_BYTES = 1 << 30
#: the fields of a version, in record order (every field the class declares)
VERSION_FIELDS: tuple[str, ...] = tuple(Version.__annotations__)
_version_values = attrgetter(*VERSION_FIELDS)
_SOURCE_DC = VERSION_FIELDS.index("source_dc")
_TIMESTAMP = VERSION_FIELDS.index("timestamp")

#: every ``write`` to a segment is durable when it returns (``LogWriter.append``); 0 where unknown
_O_DSYNC: int = getattr(os, "O_DSYNC", 0)
#: records within a segment's zeros bypass the page cache (module docstring); 0 where unknown
_O_DIRECT: int = getattr(os, "O_DIRECT", 0)
#: a direct write's offset, length and buffer address are multiples of this (any logical block size
#: up to a page)
DIRECT_BLOCK = 4096

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


def segment_name(first_seq: int) -> str:
    return f"{SEGMENT_PREFIX}{first_seq:020d}{SEGMENT_SUFFIX}"


def segments(directory: Path) -> list[Path]:
    """The log segments of ``directory``, oldest first."""
    found = []
    for path in directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"):
        number = path.name[len(SEGMENT_PREFIX):-len(SEGMENT_SUFFIX)]
        if number.isdigit():
            found.append((int(number), path))
    return [path for _, path in sorted(found)]


def frame(payload: bytes) -> bytes:
    return FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def segment_header(first_seq: int, state_fields: tuple[str, ...]) -> bytes:
    """The bytes that open a segment: magic and the header frame."""
    header = {"format": FORMAT, "first_seq": first_seq, "version_fields": list(VERSION_FIELDS),
              "state_fields": list(state_fields)}
    return MAGIC + frame(_encoder.encode(header))


def group_rows(changes: list[Change], local_dc: int, local_ts: int) -> tuple[list[tuple[Any, ...]], int, int, int]:
    """A group's rows (``[key, inserted?, field...]``, the record's layout) and, in the same pass,
    what the tally needs: the versions it inserts, those of ``local_dc``, and the newest local
    timestamp (``local_ts`` or later). One pass over the changes, on the storage worker, where
    the interpreter lock it holds keeps the event loop waiting (docs/storage.md)."""
    values = _version_values
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    inserted = local = 0
    for key, version, was_inserted in changes:
        fields = values(version)
        append((key, was_inserted, *fields))
        if was_inserted:
            inserted += 1
            if fields[_SOURCE_DC] == local_dc:
                local += 1
                if fields[_TIMESTAMP] > local_ts:
                    local_ts = fields[_TIMESTAMP]
    return rows, inserted, local, local_ts


def encode_record(seq: int, clock_bound_us: int | None, state: object | None, tally: tuple[int, int, int],
                  rows: list[tuple[Any, ...]]) -> bytes:
    """One group as a frame (``rows``: ``group_rows``; ``state``: a dataclass instance, encoded
    field by field)."""
    stored_state = None if state is None else _state_values(state)
    return frame(_encoder.encode((seq, clock_bound_us, stored_state, *tally, rows)))


def _state_values(state: object) -> list[Any]:
    names = _STATE_FIELDS.get(type(state))
    if names is None:  # looked up once per class, not per group
        names = _STATE_FIELDS[type(state)] = tuple(field.name for field in dataclasses.fields(state))  # type: ignore[arg-type]
    return [getattr(state, name) for name in names]


_STATE_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One decoded group: its number, clock bound, state fields (by name), tally and changes."""

    seq: int
    clock_bound_us: int | None
    state: dict[str, Any] | None
    inserted: int
    local_inserted: int
    local_ts: int
    changes: list[Change]


@dataclass(slots=True)
class LogScan:
    """What ``read_log`` found besides the records: the torn tail it dropped (segment and byte)."""

    torn: tuple[Path, int] | None = None
    bytes_read: int = 0


def _tuples(value: Any) -> Any:
    """msgpack arrays decode as lists; stored vectors are tuples."""
    return tuple(value) if isinstance(value, list) else value


def _decode_record(payload: bytes, version_fields: list[str], state_fields: list[str]) -> LogRecord:
    seq, bound, state, inserted, local_inserted, local_ts, rows = _decoder.decode(payload)
    if tuple(version_fields) == VERSION_FIELDS:  # this build's layout: positional, no names
        changes = [Change(row[0], Version(*map(_tuples, row[2:])), row[1]) for row in rows]
    else:  # an older layout: by name (a field it lacks takes the class's default)
        changes = [Change(row[0], Version(**dict(zip(version_fields, map(_tuples, row[2:]), strict=True))), row[1])
                   for row in rows]
    named = None if state is None else dict(zip(state_fields, map(_tuples, state), strict=True))
    return LogRecord(int(seq), bound, named, int(inserted), int(local_inserted), int(local_ts), changes)


def read_segment(path: Path, *, newest: bool, scan: LogScan) -> Iterator[LogRecord]:
    """The records of one segment, verified (module docstring: a torn tail of the newest segment is
    dropped and reported in ``scan``, any other bad frame raises ``DataDamagedError``)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DataDamagedError(f"cannot read {path}: {error.strerror or error}; {REPAIR_HINT}") from None
    scan.bytes_read += len(data)
    if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        if newest and (MAGIC.startswith(data[: len(MAGIC)]) or _zeros(data, 0)):  # header never fully written
            scan.torn = (path, 0)
            return
        raise DataDamagedError(f"{path} is not an okapikv log segment (bad magic); {REPAIR_HINT}")
    offset = len(MAGIC)
    header: dict[str, Any] | None = None
    while offset < len(data):
        if data[offset:offset + FRAME.size] == ZERO_FRAME and _zeros(data, offset):
            return  # the zeros a segment is written into (format 2): no record after them
        payload, end = _frame_at(data, offset)
        if payload is None:
            if newest and _zeros(data, end):  # nothing was written after it: a write cut short
                scan.torn = (path, offset)
                return
            what = "the header" if header is None else "the record"
            raise DataDamagedError(f"{path}: {what} at byte {offset} fails its checksum (damaged); {REPAIR_HINT}")
        try:
            if header is None:
                header = _decoder.decode(payload)
                found = header.get("format") if isinstance(header, dict) else None
                if found not in FORMATS:
                    raise DataDamagedError(f"{path}: log format {found!r} is not one of {FORMATS}; use the "
                                           "okapikv that wrote it")
            else:
                yield _decode_record(payload, header["version_fields"], header["state_fields"])
        except (msgspec.DecodeError, ValueError, TypeError, KeyError) as error:
            raise DataDamagedError(f"{path}: the record at byte {offset} cannot be decoded ({error}); "
                                   f"{REPAIR_HINT}") from None
        offset = end


def _zeros(data: bytes, start: int) -> bool:
    """Whether ``data`` holds only zeros from ``start`` on (True past its end)."""
    return start >= len(data) or data.count(0, start) == len(data) - start


def _frame_at(data: bytes, offset: int) -> tuple[bytes | None, int]:
    """The payload of the frame at ``offset`` and where the frame ends; (None, end) when it is bad
    (``end`` is past the data when the frame claims more than there is)."""
    if offset + FRAME.size > len(data):
        return None, len(data)
    length, crc = FRAME.unpack_from(data, offset)
    start = offset + FRAME.size
    end = start + length
    if length > MAX_FRAME_BYTES or end > len(data):
        return None, len(data)
    payload = data[start:end]
    if zlib.crc32(payload) != crc:
        return None, end
    return payload, end


def read_log(paths: list[Path], scan: LogScan) -> Iterator[LogRecord]:
    """Every record of ``paths`` (oldest segment first), in order."""
    for index, path in enumerate(paths):
        yield from read_segment(path, newest=index == len(paths) - 1, scan=scan)


def sync_directory(directory: Path) -> None:
    """Make the creation, renaming or deletion of files in ``directory`` durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class LogWriter:
    """The open segment of a data directory; appends happen on one thread (the storage worker), the
    spare is made on another (``make_spare``: the store's ``okapi-log-spare`` thread)."""

    def __init__(self, directory: Path, state_fields: tuple[str, ...], segment_bytes: int) -> None:
        self.directory = directory
        self.state_fields = state_fields
        self.segment_bytes = segment_bytes
        self._fd: int | None = None
        self.path: Path | None = None
        self.size = 0  # where the next record goes
        self._zeroed = 0  # the open segment's length as made: records below it overwrite zeros
        self.records = 0  # in the open segment
        self._spare: Path | None = None  # zeroed and synced, the next segment (``make_spare``)
        self._spare_lock = threading.Lock()
        self._spare_failed = False  # warned once until a spare is made again
        #: the open segment's ``O_DIRECT`` descriptor, while it has one (module docstring)
        self._direct: int | None = None
        #: the file system refused ``O_DIRECT``: every record takes the buffered descriptor
        self.direct_refused = not _O_DIRECT
        #: the open segment's bytes from the block ``size`` falls in up to ``size`` (direct writes)
        self._tail = b""
        self._buffer: mmap.mmap | None = None  # page-aligned, for direct writes
        self.direct_writes = 0
        (directory / SPARE_NAME).unlink(missing_ok=True)  # a crash may have cut its zeros short

    def append(self, seq: int, record: bytes) -> None:
        """Write group ``seq``'s record at the segment's end and fdatasync it: durable when this
        returns. The segment is opened ``O_DSYNC`` where the platform has it, so the write is the
        fdatasync: one system call per group, and so one release of the GIL, which a thread must
        take back from a busy event loop (up to the interpreter's switch interval). A failed write
        (a full disk) is undone (zeros written back, growth cut off), so a retry writes the same
        record cleanly and the segment still ends in zeros."""
        if self._fd is None:
            self._open(seq)
        assert self._fd is not None
        start = self.size
        end = start + len(record)
        try:
            if self._direct is not None and -(-end // DIRECT_BLOCK) * DIRECT_BLOCK <= self._zeroed:
                self._append_direct(self._direct, start, record)
            else:
                view = memoryview(record)
                at = start
                while view:
                    written = os.pwrite(self._fd, view, at)
                    view, at = view[written:], at + written
                if not _O_DSYNC:
                    os.fdatasync(self._fd)
        except OSError:
            try:
                if start < self._zeroed:
                    os.pwrite(self._fd, bytes(min(len(record), self._zeroed - start)), start)
                os.ftruncate(self._fd, max(start, self._zeroed))
            except OSError:
                self.close()  # the next append opens a fresh segment
            raise
        if self._direct is not None:
            block = end - end % DIRECT_BLOCK
            self._tail = (record[block - start:] if block >= start
                          else self._tail[len(self._tail) - (start - block):] + record)
        self.size = end
        self.records += 1

    def _append_direct(self, descriptor: int, start: int, record: bytes) -> None:
        """Write ``record`` at ``start`` through the ``O_DIRECT`` descriptor: the blocks it covers,
        the bytes before it in its first block (``_tail``) and zeros after it filling its last. A
        refusal of the first direct write (``EINVAL``: the file system takes no direct writes of
        this alignment) turns direct writes off and writes the record buffered."""
        tail = self._tail
        length = len(tail) + len(record)
        size = -(-length // DIRECT_BLOCK) * DIRECT_BLOCK
        buffer = self._buffer
        if buffer is None or len(buffer) < size:
            if buffer is not None:
                buffer.close()
            buffer = self._buffer = mmap.mmap(-1, max(size, 16 * DIRECT_BLOCK))
        buffer[:len(tail)] = tail
        buffer[len(tail):length] = record
        buffer[length:size] = bytes(size - length)
        view = memoryview(buffer)[:size]
        at = start - len(tail)
        try:
            while view:
                written = os.pwrite(descriptor, view, at)
                view, at = view[written:], at + written
        except OSError as error:
            view.release()
            if error.errno != errno.EINVAL or self.direct_writes:
                raise
            log.info("%s: the file system refuses direct writes; the log writes through the page cache",
                     self.directory)
            self.direct_refused = True
            self._close_direct()
            assert self._fd is not None
            view = memoryview(record)
            at = start
            while view:
                written = os.pwrite(self._fd, view, at)
                view, at = view[written:], at + written
            return
        view.release()
        self.direct_writes += 1

    def _close_direct(self) -> None:
        if self._direct is not None:
            os.close(self._direct)
        self._direct, self._tail = None, b""

    def _open(self, first_seq: int) -> None:
        """Open the segment of ``first_seq``: the spare renamed (its zeros written in place), else a
        new file that each record grows. The header is durable, and the name in the directory,
        before any record counts."""
        path = self.directory / segment_name(first_seq)
        with self._spare_lock:
            spare, self._spare = self._spare, None
        header = segment_header(first_seq, self.state_fields)
        descriptor = -1
        try:
            if spare is not None:
                os.rename(spare, path)
                descriptor = os.open(path, os.O_WRONLY | _O_DSYNC)
                zeroed = os.fstat(descriptor).st_size
            else:
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_DSYNC, 0o644)
                zeroed = 0
            os.pwrite(descriptor, header, 0)
            os.fdatasync(descriptor)
            sync_directory(self.directory)  # the segment's name must survive before its records count
        except OSError:
            if descriptor >= 0:
                os.close(descriptor)
            path.unlink(missing_ok=True)
            raise
        self._fd, self.path, self.size, self.records = descriptor, path, len(header), 0
        self._zeroed = max(zeroed, len(header))
        if zeroed and not self.direct_refused and len(header) < DIRECT_BLOCK:
            try:
                self._direct = os.open(path, os.O_WRONLY | _O_DSYNC | _O_DIRECT)
                self._tail = header
            except OSError as error:
                log.info("%s: the file system refuses direct writes (%s); the log writes through the "
                         "page cache", self.directory, error)
                self.direct_refused = True

    def make_spare(self) -> bool:
        """Make the next segment ahead of use (not on the commit path): ``segment_bytes`` and
        ``SPARE_SLACK`` of zeros, written and synced, so its records are written in place (module
        docstring). Skipped (False) while one is ready, with less than ``SPARE_ROOM`` times its
        size free, or when writing it fails (the next segment then grows with each record)."""
        with self._spare_lock:
            if self._spare is not None:
                return True
        path = self.directory / SPARE_NAME
        size = self.segment_bytes + SPARE_SLACK
        try:
            space = os.statvfs(self.directory)
            if space.f_bavail * space.f_frsize < SPARE_ROOM * size:
                return False
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                zeros = bytes(min(size, 1 << 20))
                left = size
                while left:
                    left -= os.write(descriptor, memoryview(zeros)[:left])
                os.fdatasync(descriptor)
            finally:
                os.close(descriptor)
        except OSError as error:
            path.unlink(missing_ok=True)
            if not self._spare_failed:
                log.warning("%s: cannot make the next log segment ahead (%s); it grows with each record",
                            self.directory, error)
            self._spare_failed = True
            return False
        with self._spare_lock:
            self._spare = path
        self._spare_failed = False
        return True

    def discard_spare(self) -> None:
        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.unlink(missing_ok=True)

    @property
    def full(self) -> bool:
        return self.size >= self.segment_bytes

    def close(self) -> Path | None:
        """Close the open segment (the next append starts a new one); returns its path."""
        path = self.path
        self._close_direct()
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self.path, self.size, self.records, self._zeroed = None, None, 0, 0, 0
        return path
