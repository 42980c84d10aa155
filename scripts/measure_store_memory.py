"""Bytes per key of the protocol core alone: one ``PartitionServer`` (1 DC, 1 partition, Okapi) in
this process, fed N PUTs of distinct 8-byte keys and 8-byte values, no network, no gRPC.

The keys are made before the first reading (so they count separately, as ``+ key``); each value is a
fresh bytes object, as protobuf decoding makes one per request. ``--trace`` adds tracemalloc's
largest allocation sites per key (slow, and its own bookkeeping inflates RSS).

    python scripts/measure_store_memory.py --keys 1000000 [--trace]

This is the figure the comments in ``okapikv.core.mvstore`` and ``protocols.base`` quote; the
whole server process is measured by ``okapi bench --workload memory``.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
import tracemalloc

from okapikv.core.config import CoreConfig
from okapikv.core.messages import PutRequest, Session
from okapikv.core.server import PartitionServer


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--trace", action="store_true", help="tracemalloc's top allocation sites")
    args = parser.parse_args()
    count = args.keys
    server = PartitionServer(CoreConfig(0, 0, 1, 1))
    session = Session((0,), 0)
    keys = [b"%08d" % index for index in range(count)]
    gc.collect()
    if args.trace:
        tracemalloc.start()
    before = rss_bytes()
    started = time.perf_counter()
    now_us = 1 << 45  # about two years after the timestamp epoch: 64-bit timestamps, as in service
    for index, key in enumerate(keys):
        server.handle(PutRequest(index, key, b"v%07d" % (index % 16), session), now_us + index)
    elapsed = time.perf_counter() - started
    gc.collect()
    after = rss_bytes()
    per_key = (after - before) / count
    print(f"{count:,} keys, {server.store.version_count:,} versions in {elapsed:.1f} s: RSS {before / 2**20:.1f} -> "
          f"{after / 2**20:.1f} MiB, {per_key:.1f} B/key + key ({per_key + 48:.1f} B/key with 8-byte keys)")
    if args.trace:
        snapshot = tracemalloc.take_snapshot()
        for stat in snapshot.statistics("lineno")[:8]:
            print(f"  {stat.size / count:7.1f} B/key  {stat.traceback}")


if __name__ == "__main__":
    main()
