"""Print what the storage integrity checks cost (docs/operations.md, "Storage integrity"):

- the row checksum (``okapikv.storage.integrity.version_checksum``) per version, and the commit
  record's write per group (``okapikv.storage.commit_record``);
- a commit group on the group-commit path (``SqliteStore.commit``, fsync included), per write, with
  the checksums and with them replaced by a constant, for groups of 1 and of 100 writes;
- at start, on a store of ``--rows`` versions: SQLite's ``quick_check`` and ``integrity_check`` (the
  file's pages evicted from the page cache first, then again warm), and loading every version with
  and without verifying its checksum.

    python scripts/measure_storage_integrity.py [--rows 1000000] [--value-bytes 100] [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from okapikv.core.mvstore import Change, Version
from okapikv.core.timestamps import pack
from okapikv.storage import integrity, sqlite
from okapikv.storage.commit_record import RecordFile, Tally
from okapikv.storage.sqlite import CommitGroup, Identity, SqliteStore, State

IDENTITY = Identity("measure", ("a", "b", "c"), 1, "okapi", "a", 0)


@contextlib.contextmanager
def checksum_replaced(replacement: Callable[..., int]) -> Iterator[None]:
    """Run with ``SqliteStore``'s row checksum replaced (to measure what computing it costs)."""
    setattr(sqlite, "version_checksum", replacement)  # noqa: B010 - the module's private import
    try:
        yield
    finally:
        setattr(sqlite, "version_checksum", integrity.version_checksum)  # noqa: B010


def versions(count: int, value_bytes: int, start: int = 0) -> Iterator[Change]:
    value = b"v" * value_bytes
    for index in range(start, start + count):
        dv = (pack(index), pack(index + 1), pack(index + 2)) if index % 2 else None
        yield Change(b"key-%012d" % index, Version(value, pack(1_000_000 + index), index % 3, dv), True)


def checksum_ns(value_bytes: int, count: int = 200_000) -> float:
    rows = [(b"key-%012d" % i, i, i % 3, b"v" * value_bytes, b"x" * 24 if i % 2 else None) for i in range(1000)]
    started = time.perf_counter()
    for index in range(count):
        integrity.version_checksum(*rows[index % 1000])
    return (time.perf_counter() - started) / count * 1e9


def commit_us_per_write(store: SqliteStore, group_size: int, groups: int, value_bytes: int, first: int) -> float:
    vector = (1, 2, 3)
    started = time.perf_counter()
    for number in range(groups):
        changes = list(versions(group_size, value_bytes, first + number * group_size))
        store.commit(CommitGroup(number + 1, changes, State(vector, vector, vector, vector)))
    return (time.perf_counter() - started) / (groups * group_size) * 1e6


def measure_commits(root: Path, value_bytes: int, rounds: int = 7) -> None:
    """Both variants in alternation on one warm store, ``rounds`` times; the medians per write."""
    store = SqliteStore(root / "commits", IDENTITY)
    try:
        first = 0
        for group_size, groups in ((1, 200), (100, 40)):
            figures: dict[str, list[float]] = {"checksums": [], "constant": []}
            for _ in range(rounds):
                for label, checksum in (("checksums", integrity.version_checksum), ("constant", lambda *_: 0)):
                    with checksum_replaced(checksum):
                        figures[label].append(commit_us_per_write(store, group_size, groups, value_bytes, first))
                    first += group_size * groups
            medians = {label: statistics.median(values) for label, values in figures.items()}
            print(f"commit, groups of {group_size:>3} write(s), per write (median of {rounds}): "
                  f"with checksums {medians['checksums']:.1f} us, without {medians['constant']:.1f} us "
                  f"(difference {medians['checksums'] - medians['constant']:+.2f} us)")
    finally:
        store.close()


def _evict(path: Path) -> None:
    """Drop this file's pages from the page cache (the next read comes from the disk)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


def record_write_us(root: Path, count: int = 20_000) -> float:
    directory = root / "record"
    directory.mkdir()
    record = RecordFile(directory)
    try:
        started = time.perf_counter()
        for seq in range(count):
            record.write(Tally(seq, seq, seq, pack(seq), seq))
        return (time.perf_counter() - started) / count * 1e6
    finally:
        record.close()


def measure_start(root: Path, rows: int, value_bytes: int) -> None:
    directory = root / "large"
    store = SqliteStore(directory, IDENTITY)
    started = time.perf_counter()
    batch = 10_000
    for number, first in enumerate(range(0, rows, batch)):
        store.commit(CommitGroup(number + 1, list(versions(min(batch, rows - first), value_bytes, first))))
    print(f"built {rows:,} versions in {time.perf_counter() - started:.1f} s, "
          f"{store.disk_bytes() / (1 << 20):.0f} MiB on disk")
    store.close()
    database = directory / sqlite.DATABASE_NAME
    for cache in ("cold", "warm"):
        for pragma in ("quick_check", "integrity_check"):
            if cache == "cold":
                _evict(database)
            with contextlib.closing(sqlite3.connect(database)) as db:
                started = time.perf_counter()
                result = db.execute(f"PRAGMA {pragma}").fetchone()[0]
                print(f"PRAGMA {pragma}, {cache} page cache: {time.perf_counter() - started:.2f} s ({result})")
    store = SqliteStore(directory, IDENTITY, integrity="off")
    try:
        started = time.perf_counter()
        loaded = sum(1 for _ in store.load_versions())
        verified = time.perf_counter() - started
        crcs = iter([row[0] for row in store.db.execute("SELECT crc FROM versions ORDER BY key, ts, dc")])
        with checksum_replaced(lambda *_: next(crcs)):
            started = time.perf_counter()
            sum(1 for _ in store.load_versions())
            unverified = time.perf_counter() - started
        print(f"load {loaded:,} versions, warm page cache: {verified:.2f} s verifying checksums, {unverified:.2f} s "
              f"without ({(verified - unverified) / loaded * 1e9:.0f} ns per version)")
    finally:
        store.close()
    for mode in ("off", "quick"):  # what a start costs: open (with its check) and load, from the disk
        _evict(database)
        started = time.perf_counter()
        store = SqliteStore(directory, IDENTITY, integrity=mode)
        try:
            sum(1 for _ in store.load_versions())
        finally:
            store.close()
        print(f"cold start (open + load every version), --integrity-check {mode}: "
              f"{time.perf_counter() - started:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--dir", default=None, help="where to build the stores (default: a temporary folder)")
    args = parser.parse_args()
    print(f"checksum per version ({args.value_bytes}-byte value): {checksum_ns(args.value_bytes):.0f} ns")
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        root = Path(folder)
        print(f"commit record write (one pwrite, no fsync) per group: {record_write_us(root):.1f} us")
        measure_commits(root, args.value_bytes)
        measure_start(root, args.rows, args.value_bytes)


if __name__ == "__main__":
    main()
