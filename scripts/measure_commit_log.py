"""The commit log against SQLite-per-group, paired in one run (docs/benchmarks.md, "Durable storage").

Prints, for the same data directory's file system and in alternating rounds:

- the disk's own ``fdatasync`` of a 100-byte append, p50 / p99;
- a lone group of one PUT committed through ``LoggedStore`` (the log) and through ``SqliteStore``
  (one SQLite transaction per group), p50 / p99 (what a single session's durable PUT waits for);
- the CPU per group of YCSB-A-like groups (16 SWAPs: 16 inserts, 16 GC removals) through each,
  the final checkpoint included (all threads' CPU: ``time.process_time``);
- recovery of ``--records`` versions: replayed from the log (a crash before any checkpoint), and
  loaded from the checkpoint (after a clean close), each into a fresh core;
- a checkpoint of 100,000 logged versions alone and beside a thread spinning in Python (the cost the
  log moves off the commit path, and how a loaded event loop slows it).

    python scripts/measure_commit_log.py --rounds 3 --records 1000000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its benchmarks/ lab

from benchmarks.harness.storage_costs import IDENTITY, STATE, measure_storage_costs
from okapikv.core.mvstore import Change, Version
from okapikv.core.timestamps import pack
from okapikv.storage.logged_store import LoggedStore
from okapikv.storage.sqlite import CommitGroup, SqliteStore


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def fdatasync_ms(directory: Path, count: int) -> list[float]:
    path = directory / "fdatasync-probe"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    samples = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            os.write(descriptor, b"x" * 100)
            os.fdatasync(descriptor)
            samples.append(1000 * (time.perf_counter() - started))
    finally:
        os.close(descriptor)
        path.unlink()
    return samples


def lone_puts_ms(store: LoggedStore | SqliteStore, count: int, start: int) -> list[float]:
    samples = []
    for index in range(count):
        version = Version(b"v" * 8, pack(start + index), 0, None)
        group = CommitGroup(0, [Change(b"key%07d" % index, version, True)], STATE)
        started = time.perf_counter()
        store.commit(group)
        samples.append(1000 * (time.perf_counter() - started))
    return samples


def swap_groups_cpu_us(store: LoggedStore | SqliteStore, groups: int, start: int) -> float:
    """CPU (process time: every thread) per group of 16 SWAPs, each replacing the key's last version."""
    previous: dict[bytes, Version] = {}
    clock = start
    began = time.process_time()
    for number in range(groups):
        changes = []
        for index in range(16):
            key = b"user%05d" % ((number * 16 + index) % 5000)
            clock += 1
            version = Version(b"x" * 100, pack(clock), 0, None)
            changes.append(Change(key, version, True))
            old = previous.get(key)
            if old is not None:
                changes.append(Change(key, old, False))
            previous[key] = version
        store.commit(CommitGroup(0, changes, STATE))
    store.checkpoint()  # the log's deferred work (folding into SQLite), SQLite's WAL into its file
    return 1e6 * (time.process_time() - began) / groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lone", type=int, default=200, help="lone PUT groups per store per round")
    parser.add_argument("--groups", type=int, default=300, help="SWAP groups per store per round")
    parser.add_argument("--records", type=int, default=1_000_000, help="versions for the recovery figures")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        base = Path(root)
        sync: list[float] = []
        logged_lone: list[float] = []
        sqlite_lone: list[float] = []
        logged_cpu: list[float] = []
        sqlite_cpu: list[float] = []
        for round_number in range(args.rounds):
            sync += fdatasync_ms(base, args.lone)
            for name in ("log", "sqlite"):
                directory = base / f"{name}-{round_number}"
                store: LoggedStore | SqliteStore = (LoggedStore(directory, IDENTITY) if name == "log"
                                                    else SqliteStore(directory, IDENTITY))
                lone = lone_puts_ms(store, args.lone, 1_000_000 * (round_number + 1))
                cpu = swap_groups_cpu_us(store, args.groups, 1_000_000 * (round_number + 1) + args.lone)
                store.close()
                (logged_lone if name == "log" else sqlite_lone).extend(lone)
                (logged_cpu if name == "log" else sqlite_cpu).append(cpu)
        for name, samples in (("fdatasync of a 100-byte append", sync), ("lone 1-PUT group, log", logged_lone),
                              ("lone 1-PUT group, sqlite", sqlite_lone)):
            print(f"{name}: p50 {percentile(samples, 0.5):.3f} ms, p99 {percentile(samples, 0.99):.3f} ms")
        print(f"CPU per group of 16 SWAPs: log {statistics.median(logged_cpu):.0f} us, sqlite "
              f"{statistics.median(sqlite_cpu):.0f} us (medians of {args.rounds} rounds: {logged_cpu} / {sqlite_cpu})")
        costs = measure_storage_costs(base / "costs", args.records, 100_000)
        for busy, took in ((False, costs.checkpoint_alone_s), (True, costs.checkpoint_busy_s)):
            print(f"checkpoint of {costs.checkpoint_rows:,} logged versions, "
                  f"{'beside a busy thread' if busy else 'alone'}: {took:.2f} s")
        print(f"recovery of {costs.records:,} versions from the log ({costs.log_bytes / 2**20:.0f} MiB): "
              f"{costs.recovery_log_s:.2f} s (read, fold, load into a core)")
        print(f"recovery of {costs.records:,} versions from the checkpoint: {costs.recovery_checkpoint_s:.2f} s")

if __name__ == "__main__":
    main()
