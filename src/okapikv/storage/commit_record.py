"""The commit record (``DIR/COMMITTED``): an account of the committed groups kept outside SQLite.

Why: SQLite alone cannot tell that committed transactions vanished. A WAL cut short (a damaged
disk, a bad copy, a file system that lost the file's tail) is read up to its last valid frame and
the later commits are silently gone: the database opens, consistent and older. A server that
trusted it would have lost acknowledged writes and restart its clock below timestamps it already
issued. So every commit group also counts itself in a second file: the group's sequence number, the
running counts of versions inserted (all, and written by this server), the newest local
timestamp, and the clock bound. The same counters are stored in the database with each group
(``SqliteStore``), and recovery compares the two: a database *behind* the record lost groups.

Cost: one 64-byte ``pwrite`` after every group's commit, before the group is reported durable; no
fsync of its own. It survives a process crash (kill -9) as soon as it is written, since the page
cache belongs to the kernel, and reaches the disk with the kernel's writeback, at every maintenance
pass (``flush``, every 10 s) and at close. After a power loss it may therefore be older than the
database, never newer (it is written after the commit returned), which the check accepts: only a
database behind the record is refused. A record one group behind the database is normal (a crash
between a commit and its record; that group's effects had not left).

Layout: two 64-byte slots written alternately (by sequence parity), each
``magic, format, seq, inserted, local_inserted, local_ts, clock_bound_us, crc32``; the valid slot
with the highest sequence wins, so a torn write spoils at most the slot being written.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from pathlib import Path

import msgspec

from okapikv.storage.errors import REPAIR_HINT, DataDamagedError

RECORD_NAME = "COMMITTED"
_MAGIC = b"OKCR"
_FORMAT = 1
_BODY = struct.Struct(">4sIQQQQQ")
_SLOT = 64
_CRC = struct.Struct(">I")
assert _BODY.size + _CRC.size <= _SLOT


class Tally(msgspec.Struct, frozen=True, gc=False):
    """What a data directory has committed: the number of commit groups (``seq``, across every
    incarnation), the versions inserted by them (``local_inserted`` of them written by this server),
    the newest timestamp of a local version, and the clock bound as of the last group.

    A frozen ``msgspec.Struct`` rather than a frozen dataclass, as the messages are
    (``okapikv.core.messages.message``): the log's store makes one for every commit group, and a
    struct is built in C where a frozen dataclass's ``__init__`` sets each field from Python."""

    seq: int = 0
    inserted: int = 0
    local_inserted: int = 0
    local_ts: int = 0
    clock_bound_us: int = 0


def _encode(tally: Tally) -> bytes:
    body = _BODY.pack(_MAGIC, _FORMAT, tally.seq, tally.inserted, tally.local_inserted, tally.local_ts,
                      tally.clock_bound_us)
    return (body + _CRC.pack(zlib.crc32(body))).ljust(_SLOT, b"\0")


def _decode(slot: bytes) -> Tally | None:
    if len(slot) < _BODY.size + _CRC.size:
        return None
    body = slot[: _BODY.size]
    (crc,) = _CRC.unpack_from(slot, _BODY.size)
    if zlib.crc32(body) != crc:
        return None
    magic, version, seq, inserted, local_inserted, local_ts, bound = _BODY.unpack(body)
    if magic != _MAGIC or version != _FORMAT:
        return None
    return Tally(seq, inserted, local_inserted, local_ts, bound)


def read_record(directory: Path, name: str = RECORD_NAME) -> Tally | None:
    """The newest valid record of ``directory``; None when there is no record file (or it is
    empty: created, never written). Raises ``DataDamagedError`` when it exists but no slot is valid."""
    path = directory / name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise DataDamagedError(f"cannot read {path}: {error.strerror or error}; {REPAIR_HINT}") from None
    if not data.strip(b"\0"):
        return None
    found = [tally for tally in (_decode(data[:_SLOT]), _decode(data[_SLOT : 2 * _SLOT])) if tally is not None]
    if not found:
        raise DataDamagedError(f"{path} is damaged (no valid slot): the database cannot be checked for lost "
                               f"commits; {REPAIR_HINT}")
    return max(found, key=lambda tally: tally.seq)


class RecordFile:
    """The open record file of a data directory (written from the storage worker thread)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / RECORD_NAME
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.write_failures = 0
        if created:  # a power loss must not leave a database whose record file vanished
            self.flush()
            directory_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(directory_fd)
            finally:
                os.close(directory_fd)

    def write(self, tally: Tally) -> None:
        """Record ``tally`` in its slot (no fsync: see the module docstring)."""
        try:
            os.pwrite(self._fd, _encode(tally), _SLOT * (tally.seq % 2))
        except OSError:
            # The database holds the group; a record left behind only weakens the check (a database
            # ahead of its record is accepted), so this never fails a commit.
            self.write_failures += 1

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            os.fsync(self._fd)

    def close(self) -> None:
        self.flush()
        os.close(self._fd)
