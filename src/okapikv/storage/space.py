"""A full disk without a crash: the space reserve (``DIR/RESERVE``) and the free-space checks.

A full disk is worse for a durable server than for most programs: a commit that fails leaves the
writes of its group applied in memory but not durable, so the server could only stop (and a
restart on the same full disk would stop again at its first write). So it keeps a reserve, a file
of ``reserve_bytes`` (``--disk-reserve-mb``; by default 16 MiB, or 5% of a smaller file system but
at least ``MIN_DEFAULT_RESERVE_BYTES``: a checkpoint may have to copy a whole WAL, up to 4 MiB, into
the database before the WAL's space is free again), and ``group_commit`` follows these rules (the idea
of CockroachDB's ballast file):

- free space below ``reserve_bytes`` (a statvfs call after a commit group, at most every
  ``group_commit.SPACE_CHECK_S`` and after every group while full, and every ``CHECK_INTERVAL_S``
  while full and idle) makes the server *full*: it refuses new client writes
  (RESOURCE_EXHAUSTED "disk full ... not applied": the outcome is known) and replication from other
  DCs (their links are refused and resend later: replication pauses as during a partition), and
  truncates its WAL after every group;
  reads go on, and so do the small groups they need (vectors, clock bound), in the WAL's space;
- a commit that fails for lack of space (SQLITE_FULL, ENOSPC) deletes the reserve and is retried:
  the writes already accepted become durable and are acknowledged instead of lost to a crash;
- with ``2 * reserve_bytes`` free again, the reserve is recreated and writes are accepted;
- at start the reserve must exist, or be created with ``reserve_bytes`` left free; else the server
  refuses to start (``DiskFullError``, one line) instead of listening and failing at its first write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path

from okapikv.storage.errors import DataDirError, DiskFullError

RESERVE_NAME = "RESERVE"
DEFAULT_RESERVE_BYTES = 16 << 20
#: on a small file system the default reserve is this share of it, but at least the minimum
RESERVE_MAX_SHARE = 0.05
MIN_DEFAULT_RESERVE_BYTES = 8 << 20
CHECK_INTERVAL_S = 1.0
_CHUNK = 1 << 20


def is_disk_full(error: BaseException) -> bool:
    """Whether a failed commit failed for lack of space."""
    if isinstance(error, sqlite3.Error):
        return getattr(error, "sqlite_errorname", "") == "SQLITE_FULL" or "disk is full" in str(error)
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


def _megabytes(count: int) -> str:
    return f"{count / (1 << 20):.1f} MiB"


class DiskSpace:
    """The reserve and free space of one data directory's file system."""

    def __init__(self, directory: Path, reserve_bytes: int | None = None) -> None:
        self.directory = directory
        self.path = directory / RESERVE_NAME
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DataDirError(f"cannot create data directory {directory}: {error.strerror or error}") from None
        if reserve_bytes is None:
            try:
                stats = os.statvfs(directory)
            except OSError as error:
                raise DataDirError(f"cannot read the free space of {directory}: {error.strerror or error}") from None
            share = int(stats.f_blocks * stats.f_frsize * RESERVE_MAX_SHARE)
            reserve_bytes = min(DEFAULT_RESERVE_BYTES, max(MIN_DEFAULT_RESERVE_BYTES, share))
        if reserve_bytes < 0:
            raise ValueError(f"the disk reserve must not be negative, not {reserve_bytes} bytes")
        self.reserve_bytes = reserve_bytes

    def free_bytes(self) -> int:
        stats = os.statvfs(self.directory)
        return stats.f_bavail * stats.f_frsize

    @property
    def reserved(self) -> bool:
        return self.path.exists()

    def low(self) -> bool:
        """Whether writes must stop: less than the reserve is free."""
        return self.free_bytes() < self.reserve_bytes

    def prepare(self) -> None:
        """At start, before the database is opened: make sure the reserve exists and as much again
        is free, else ``DiskFullError``."""
        if not self.reserved and not self._create(self.reserve_bytes):
            raise DiskFullError(self._full_message("cannot create its reserve file"))
        if self.low():
            raise DiskFullError(self._full_message("would start on a full disk"))

    def _full_message(self, what: str) -> str:
        return (f"{self.directory}: no space left: the server {what} ({_megabytes(self.free_bytes())} free on its "
                f"file system, it needs {_megabytes(self.reserve_bytes)} free beside a reserve of as much, "
                f"{self.path}); free space, move the data directory, or lower --disk-reserve-mb")

    def release(self) -> bool:
        """Delete the reserve (a commit ran out of space); whether there was one."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def refill(self) -> bool:
        """Recreate the reserve if twice its size is free; whether the reserve exists now."""
        if self.reserved:
            return True
        if self.free_bytes() < 2 * self.reserve_bytes:
            return False
        return self._create(self.reserve_bytes)

    def _create(self, size: int) -> bool:
        """Allocate the reserve file (``posix_fallocate``, or zeros where unsupported)."""
        partial = self.path.with_name(RESERVE_NAME + ".partial")
        try:
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError:
            return False
        try:
            try:
                os.posix_fallocate(descriptor, 0, max(size, 1))
            except OSError as error:
                if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
                written = 0
                while written < size:
                    written += os.write(descriptor, bytes(min(_CHUNK, size - written)))
            os.fsync(descriptor)
        except OSError:
            os.close(descriptor)
            with contextlib.suppress(OSError):
                partial.unlink()
            return False
        os.close(descriptor)
        os.replace(partial, self.path)
        return True
