"""Checksums of the stored rows and SQLite's own structure check (``PRAGMA quick_check``).

Why a checksum per row on top of SQLite: SQLite checks its file structure (pages, b-trees), not the
bytes it stores, so a changed byte inside a value is read back as valid data. Every version row and
every metadata row carries a CRC-32 (``zlib.crc32``) of everything it says: for a version, its key,
timestamp, source DC, value (or that it is a tombstone) and dependency vector, each with its length
so two rows can never encode to the same bytes. It is computed once per row on the group-commit path
and verified whenever a row is read from disk: the server keeps its store in memory and reads the
file only at recovery, so verifying at recovery is verifying every read from disk. CRC-32 catches
every change of up to 32 consecutive bits and all but 2**-32 of random damage; cost per write and
per recovered version: ``scripts/measure_storage_integrity.py`` (docs/operations.md).

``quick_check`` runs SQLite's ``PRAGMA quick_check`` (or the slower ``integrity_check``) at start:
it finds malformed pages and truncated files before recovery reads them.
"""

from __future__ import annotations

import datetime
import sqlite3
import struct
import zlib
from pathlib import Path

from okapikv.core.timestamps import EPOCH_UNIX_US, physical_of
from okapikv.storage.errors import REPAIR_HINT, DataDamagedError

# stored timestamp (signed), source DC, value length (-1: tombstone), key length, dv length
_VERSION_HEAD = struct.Struct(">qIqII")
_META_HEAD = struct.Struct(">II")

#: ``--integrity-check`` modes: SQLite's quick structure check (default), its full check (also
#: compares every index with its table; several times slower), or none (checksums are still
#: verified while the store loads).
INTEGRITY_MODES = ("quick", "full", "off")
_PRAGMAS = {"quick": "quick_check", "full": "integrity_check"}
_REPORTED_PROBLEMS = 3


def version_checksum(key: bytes, stored_ts: int, dc: int, value: bytes | None, dv: bytes | None) -> int:
    """The CRC-32 of one version row (``stored_ts`` as stored: the timestamp minus 2**63)."""
    head = _VERSION_HEAD.pack(stored_ts, dc, -1 if value is None else len(value), len(key),
                              0 if dv is None else len(dv))
    return zlib.crc32(b"".join((head, key, value or b"", dv or b"")))


def meta_checksum(name: str, value: str) -> int:
    """The CRC-32 of one metadata row."""
    name_bytes, value_bytes = name.encode(), value.encode()
    return zlib.crc32(b"".join((_META_HEAD.pack(len(name_bytes), len(value_bytes)), name_bytes, value_bytes)))


def describe_timestamp(timestamp: int) -> str:
    """A hybrid timestamp as the UTC time of its physical part (what an operator can relate to)."""
    unix_us = physical_of(timestamp) + EPOCH_UNIX_US
    moment = datetime.datetime.fromtimestamp(unix_us / 1e6, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def describe_key(key: bytes, limit: int = 40) -> str:
    shown = repr(key[:limit])
    return shown + ("..." if len(key) > limit else "")


def _one_line(text: str) -> str:
    """SQLite's report lines may hold newlines and a "*** in database main ***" banner."""
    return " ".join(text.replace("*** in database main ***", "").split())


def quick_check(db: sqlite3.Connection, path: Path, mode: str) -> None:
    """Run SQLite's structure check (``mode``: one of ``INTEGRITY_MODES``); raise
    ``DataDamagedError`` naming the first problems it reports."""
    pragma = _PRAGMAS.get(mode)
    if pragma is None:
        if mode != "off":
            raise ValueError(f"integrity check must be one of {', '.join(INTEGRITY_MODES)}, not {mode!r}")
        return
    try:
        rows = [_one_line(str(row[0])) for row in db.execute(f"PRAGMA {pragma}({_REPORTED_PROBLEMS + 1})")]
    except sqlite3.DatabaseError as error:
        raise DataDamagedError(f"{path} is damaged: SQLite {pragma} failed: {error}; {REPAIR_HINT}") from None
    if rows == ["ok"]:
        return
    shown = "; ".join(rows[:_REPORTED_PROBLEMS])
    more = " (and more)" if len(rows) > _REPORTED_PROBLEMS else ""
    raise DataDamagedError(f"{path} is damaged: SQLite {pragma} reports: {shown}{more}; {REPAIR_HINT}")
