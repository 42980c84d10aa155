"""How long the heap's collapse onto huge pages stalls the thread that serves, in one process.

The server collapses its heap (``okapikv.serve.hugepages.HeapAdvisor.collapse``) on a worker thread
while its event loop serves. This builds a store of ``--keys`` keys of the server's shape (a dict of
keys to 100-byte values), then reads random keys on the main thread in chunks of 200, timing each
chunk: first ``--seconds`` with nothing else running, then while a worker thread collapses the heap
(``--mode blocks``: ``HeapAdvisor.collapse``, one ``madvise`` per 2 MiB block, what the server does;
``--mode range``: one ``madvise`` over each run of resident blocks, for comparison). Prints the
chunks' p50, p99.9 and maximum, how many took over 2 ms, and the collapse's length.

    python scripts/measure_collapse_stall.py [--keys 1000000] [--seconds 2] [--mode blocks|range]

Where the kernel's THP mode is ``never`` or it lacks ``MADV_COLLAPSE``, nothing is collapsed and
both windows read alike.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections.abc import Callable

from okapikv.serve import hugepages

CHUNK = 200
STALL_S = 0.002


def read_chunks(store: dict[bytes, bytes], keys: list[bytes], seconds: float) -> list[float]:
    """The seconds each chunk of ``CHUNK`` random reads took, for ``seconds``."""
    draw = random.Random(1).randrange
    count = len(keys)
    gaps = []
    last = time.perf_counter()
    end = last + seconds
    while last < end:
        for _ in range(CHUNK):
            store[keys[draw(count)]]
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    return gaps


def whole_ranges(advisor: hugepages.HeapAdvisor) -> Callable[[], int]:
    """One ``madvise`` per run of consecutive resident blocks, instead of one per block."""
    def collapse() -> int:
        libc = advisor._load()
        if libc is None or not advisor.enabled():
            return 0
        maps = [hugepages.Mapping.parse(line) for line in hugepages.MAPS.read_text().splitlines() if line.strip()]
        collapsed = 0
        for start, end in hugepages.heap_ranges(maps):
            pages = hugepages.resident_huge_pages(libc, start, end)
            run: list[int] = []
            for page in [*pages, -1]:
                if run and page != run[-1] + hugepages.HUGE_PAGE:
                    length = run[-1] + hugepages.HUGE_PAGE - run[0]
                    if libc.madvise(run[0], length, hugepages.MADV_COLLAPSE) == 0:
                        collapsed += length
                    run = []
                run.append(page)
        return collapsed
    return collapse


def summary(gaps: list[float]) -> str:
    ordered = sorted(gaps)
    p50, p999 = ordered[len(ordered) // 2], ordered[int(0.999 * len(ordered))]
    return (f"p50 {1000 * p50:.3f} ms, p99.9 {1000 * p999:.3f} ms, "
            f"max {1000 * ordered[-1]:.3f} ms, {sum(gap > STALL_S for gap in gaps)} chunks over "
            f"{1000 * STALL_S:g} ms of {len(gaps)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--mode", choices=("blocks", "range"), default="blocks")
    args = parser.parse_args()
    store = {b"key%09d" % index: b"v" * 100 for index in range(args.keys)}
    keys = list(store)
    advisor = hugepages.HeapAdvisor()
    print(f"THP mode {hugepages.thp_mode()}; {args.keys:,} keys", flush=True)
    print(f"alone: {summary(read_chunks(store, keys, args.seconds))}", flush=True)
    collapse = advisor.collapse if args.mode == "blocks" else whole_ranges(advisor)
    outcome: dict[str, float] = {}

    def run() -> None:
        started = time.perf_counter()
        outcome["bytes"] = collapse()
        outcome["seconds"] = time.perf_counter() - started

    worker = threading.Thread(target=run, name="collapse")
    worker.start()
    during = read_chunks(store, keys, args.seconds)
    worker.join()
    print(f"while collapsing ({args.mode}): {summary(during)}")
    print(f"collapsed {int(outcome['bytes']) >> 20} MiB in {outcome['seconds']:.2f} s")
    print(f"after: {summary(read_chunks(store, keys, args.seconds))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
