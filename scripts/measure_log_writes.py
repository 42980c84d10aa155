"""The commit log's writes, in each of its layouts, paired in one run.

Each round writes ``--records`` records of ``--bytes`` bytes (a group of about 40 YCSB-A operations
is about 3,000) through ``okapikv.storage.log.LogWriter`` once per layout, in an order that rotates
from round to round: into a segment made of zeros ahead of use (``LogWriter.make_spare``) through
its ``O_DIRECT`` descriptor ("in place, direct": what the log does), the same through the page
cache ("in place, buffered": what it does where the file system refuses direct writes), and into a
segment that grows with each record ("growing": no spare, what it does without room for one). Per
layout: the latency of each ``O_DSYNC`` write, p50 / p99, and the writing thread's CPU per write
(``/proc/thread-self/schedstat``: kernel time included, to the nanosecond); between the buffered
layouts the difference is the file system's journal commit that a growing file needs on every
write, between the two in place the page cache's copy and writeback.

    python scripts/measure_log_writes.py [--rounds 4] [--records 400] [--bytes 3000] [--dir DIR]

``--dir``: the file system to measure (default: a temporary directory, as a durable benchmark's
servers use).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from okapikv.storage import log as log_module
from okapikv.storage.log import LogWriter, segments


def thread_cpu_ns() -> int:
    with open("/proc/thread-self/schedstat") as stat:
        return int(stat.read().split()[0])


LAYOUTS = ("in place, direct", "in place, buffered", "growing")


def write_records(directory: Path, records: int, size: int, layout: str) -> tuple[list[float], float]:
    """Latencies (ms) of ``records`` writes and the thread's CPU per write (us)."""
    room, direct = log_module.SPARE_ROOM, log_module._O_DIRECT
    log_module.SPARE_ROOM = 1 << 60 if layout == "growing" else room  # no spare: the segment grows
    log_module._O_DIRECT = direct if layout == "in place, direct" else 0
    try:
        writer = LogWriter(directory, ("vv",), segment_bytes=(records + 2) * size)
        writer.make_spare()
        record = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        writer.append(1, record)  # opens the segment (its header and the directory synced)
        latencies = []
        started_cpu = thread_cpu_ns()
        for seq in range(2, records + 2):
            started = time.perf_counter()
            writer.append(seq, record)
            latencies.append(1000 * (time.perf_counter() - started))
        cpu_us = (thread_cpu_ns() - started_cpu) / 1000 / records
        writer.close()
        writer.discard_spare()
    finally:
        log_module.SPARE_ROOM, log_module._O_DIRECT = room, direct
        for path in segments(directory):
            path.unlink()
    return latencies, cpu_us


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--bytes", type=int, default=3000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="okapi-log-writes-", dir=args.dir) as name:
        directory = Path(name)
        figures: dict[str, list[tuple[float, float, float]]] = {layout: [] for layout in LAYOUTS}
        for index in range(args.rounds):
            order = LAYOUTS[index % len(LAYOUTS):] + LAYOUTS[:index % len(LAYOUTS)]
            for layout in order:
                latencies, cpu_us = write_records(directory, args.records, args.bytes, layout)
                figures[layout].append((percentile(latencies, 0.5), percentile(latencies, 0.99), cpu_us))
            line = "; ".join(f"{layout}: p50 {p50:.3f} ms, p99 {p99:.3f} ms, CPU {cpu:.1f} us/write"
                             for layout, ((p50, p99, cpu), *_) in ((k, v[::-1]) for k, v in figures.items()))
            print(f"round {index + 1}: {line}", flush=True)
        for layout, rows in figures.items():
            print(f"{layout}: median p50 {statistics.median(r[0] for r in rows):.3f} ms, p99 "
                  f"{statistics.median(r[1] for r in rows):.3f} ms, CPU {statistics.median(r[2] for r in rows):.1f} "
                  "us/write")
        for one, other in (("in place, direct", "in place, buffered"), ("in place, buffered", "growing")):
            ratios = [a[2] / b[2] for a, b in zip(figures[one], figures[other], strict=True)]
            print(f"CPU per write, {one} / {other}: x{statistics.median(ratios):.2f} "
                  f"({', '.join(f'{ratio:.2f}' for ratio in ratios)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
