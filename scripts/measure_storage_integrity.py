"""Print what the storage integrity checks cost (docs/operations.md, "Storage integrity"):

- the row checksum (``okapikv.storage.integrity.version_checksum``) per version;
- a commit group on the group-commit path (``SqliteStore.commit``, fsync included), per write, with
  the checksums and with them replaced by a constant, for groups of 1 and of 100 writes;
- at start, on a store of ``--rows`` versions: SQLite's ``quick_check`` and ``integrity_check``, and
  loading every version with and without verifying its checksum.

    python scripts/measure_storage_integrity.py [--rows 1000000] [--value-bytes 100] [--dir DIR]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from okapikv.core.mvstore import Change, Version
from okapikv.core.timestamps import pack
from okapikv.storage import integrity, sqlite
from okapikv.storage.sqlite import CommitGroup, Identity, SqliteStore, State

IDENTITY = Identity("measure", ("a", "b", "c"), 1, "okapi", "a", 0)


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
    real = sqlite.version_checksum
    store = SqliteStore(root / "commits", IDENTITY)
    try:
        first = 0
        for group_size, groups in ((1, 200), (100, 40)):
            figures: dict[str, list[float]] = {"checksums": [], "constant": []}
            for _ in range(rounds):
                for label, checksum in (("checksums", real), ("constant", lambda *_: 0)):
                    sqlite.version_checksum = checksum  # type: ignore[assignment]
                    try:
                        figures[label].append(commit_us_per_write(store, group_size, groups, value_bytes, first))
                    finally:
                        sqlite.version_checksum = real
                    first += group_size * groups
            medians = {label: statistics.median(values) for label, values in figures.items()}
            print(f"commit, groups of {group_size:>3} write(s), per write (median of {rounds}): "
                  f"with checksums {medians['checksums']:.1f} us, without {medians['constant']:.1f} us "
                  f"(difference {medians['checksums'] - medians['constant']:+.2f} us)")
    finally:
        store.close()


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
    for pragma in ("quick_check", "integrity_check"):
        with sqlite3.connect(directory / sqlite.DATABASE_NAME) as db:
            started = time.perf_counter()
            result = db.execute(f"PRAGMA {pragma}").fetchone()[0]
            print(f"PRAGMA {pragma}: {time.perf_counter() - started:.2f} s ({result})")
    store = SqliteStore(directory, IDENTITY, integrity="off")
    try:
        started = time.perf_counter()
        loaded = sum(1 for _ in store.load_versions())
        verified = time.perf_counter() - started
        real = sqlite.version_checksum
        cursor = store.db.execute("SELECT crc FROM versions ORDER BY key, ts, dc")
        crcs = iter([row[0] for row in cursor])
        sqlite.version_checksum = lambda *_: next(crcs)  # type: ignore[assignment]
        try:
            started = time.perf_counter()
            sum(1 for _ in store.load_versions())
            unverified = time.perf_counter() - started
        finally:
            sqlite.version_checksum = real
        print(f"load {loaded:,} versions: {verified:.2f} s verifying checksums, {unverified:.2f} s without "
              f"({(verified - unverified) / loaded * 1e9:.0f} ns per version)")
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--dir", default=None, help="where to build the stores (default: a temporary folder)")
    args = parser.parse_args()
    print(f"checksum per version ({args.value_bytes}-byte value): {checksum_ns(args.value_bytes):.0f} ns")
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        root = Path(folder)
        measure_commits(root, args.value_bytes)
        measure_start(root, args.rows, args.value_bytes)


if __name__ == "__main__":
    main()
