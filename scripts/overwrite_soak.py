"""Overwrite soak: memory and disk of durable servers must stay flat under endless overwrites.

Starts a local cluster whose servers keep their data on disk (``okapi server --data-dir``), drives a
closed-loop PUT load over a small key set from every DC (each write replaces a version that GC must
then remove from memory and from SQLite), and prints, every ``--sample-s``: throughput, the total
RSS of the server processes, the bytes of their data directories (database, WAL, commit log) and the number of
versions they hold. At the end it compares the last samples with the first ones after warm-up.

    python scripts/overwrite_soak.py --duration-s 600            # the 10-minute run (docs/testing.md)
    python scripts/overwrite_soak.py --duration-s 120 --sample-s 10

Exit status 0 when RSS and the database files after warm-up grew less than ``--max-growth`` (default
25 %, mean of the last third of the samples against the first) and the WALs stayed within their cap
(4 MiB per server between checkpoints) and the commit logs within theirs (three 8 MiB segments per
server), else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

from okapikv.cluster.config import local_cluster
from okapikv.cluster.health import wait_until_serving
from okapikv.cluster.ports import free_port_block
from okapikv.cluster.processes import server_data_dir, start_server
from okapikv.core.partitioning import partition_of
from okapikv.storage.log import SEGMENT_SUFFIX
from okapikv.storage.logged_store import SEGMENT_BYTES
from okapikv.storage.sqlite import WAL_SIZE_LIMIT_BYTES
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _directory_bytes(directory: Path) -> tuple[int, int, int]:
    """(database bytes, WAL bytes, log bytes): SQLite's main files, its ``-wal``/``-shm`` files, and
    the commit log's segments."""
    database = wal = logged = 0
    for path in directory.rglob("*"):
        if path.is_file():
            if path.name.endswith(("-wal", "-shm")):
                wal += path.stat().st_size
            elif path.name.endswith(SEGMENT_SUFFIX):
                logged += path.stat().st_size
            else:
                database += path.stat().st_size
    return database, wal, logged


class Load:
    """Closed-loop writers: each thread PUTs random keys of the shared key set through its DC."""

    def __init__(self, addresses: list[list[str]], keys: int, value_bytes: int, threads_per_dc: int) -> None:
        self.keys = [f"soak{index:06d}".encode() for index in range(keys)]
        self.value = b"v" * value_bytes
        self.completed = 0
        self.errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._channels = [[grpc.insecure_channel(address) for address in dc] for dc in addresses]
        self._threads = [
            threading.Thread(target=self._run, args=(dc, seed), daemon=True)
            for dc in range(len(addresses)) for seed in range(threads_per_dc)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        for dc in self._channels:
            for channel in dc:
                channel.close()

    def _run(self, dc: int, seed: int) -> None:
        rng = random.Random(dc * 1000 + seed)
        stubs = [pb_grpc.KeyValueStub(channel) for channel in self._channels[dc]]  # type: ignore[no-untyped-call]
        partitions = len(stubs)
        done = 0
        while not self._stop.is_set():
            key = rng.choice(self.keys)
            try:
                stubs[partition_of(key, partitions)].Put(pb.PutRequest(key=key, value=self.value), timeout=10)
                done += 1
            except grpc.RpcError:
                with self._lock:
                    self.errors += 1
            if done == 100:
                with self._lock:
                    self.completed += done
                done = 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration-s", type=float, default=600.0)
    parser.add_argument("--sample-s", type=float, default=20.0)
    parser.add_argument("--warmup-s", type=float, default=None, help="default: a fifth of the run, at least 30 s")
    parser.add_argument("--dcs", default="a,b")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--keys", type=int, default=2_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--threads-per-dc", type=int, default=4)
    parser.add_argument("--wan-ms", type=float, default=5.0)
    parser.add_argument("--base-port", type=int, default=0, help="default: a random free range")
    parser.add_argument("--max-growth", type=float, default=0.25)
    args = parser.parse_args(argv)
    warmup_s = args.warmup_s if args.warmup_s is not None else max(30.0, args.duration_s / 5)
    dcs = [name for name in args.dcs.split(",") if name]
    base_port = args.base_port or free_port_block(len(args.dcs.split(",")) * args.partitions)
    config = local_cluster(dcs=dcs, partitions=args.partitions, wan=args.wan_ms, base_port=base_port,
                           cluster_id=f"soak-{os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="okapi-soak-") as workdir:
        root = Path(workdir)
        config_path = config.dump(root / "cluster.toml")
        processes = {server.label: start_server(config_path, server, data_dir=server_data_dir(root / "data", server))
                     for server in config.servers}
        try:
            pending = wait_until_serving([server.address for server in config.servers], 60)
            if pending:
                print(f"not serving: {pending}", file=sys.stderr)
                return 1
            addresses = [[config.server(dc, p).address for p in range(args.partitions)] for dc in dcs]
            stats_stubs = [pb_grpc.KeyValueStub(grpc.insecure_channel(server.address))  # type: ignore[no-untyped-call]
                           for server in config.servers]
            load = Load(addresses, args.keys, args.value_bytes, args.threads_per_dc)
            print(f"overwrite soak: {len(dcs)} DC(s) x {args.partitions} partition(s), {args.keys} keys, "
                  f"{args.value_bytes}-byte values, {args.threads_per_dc} writer thread(s) per DC, "
                  f"{args.duration_s:.0f} s (warm-up {warmup_s:.0f} s), data in {root / 'data'}", flush=True)
            print(f"{'t_s':>6} {'ops/s':>8} {'rss_mb':>8} {'db_mb':>8} {'wal_mb':>8} {'log_mb':>8} {'versions':>9} "
                  f"{'errors':>6}", flush=True)
            load.start()
            started = time.monotonic()
            last_count, last_time = 0, started
            samples: list[tuple[float, float, float, int, float, float]] = []
            while time.monotonic() - started < args.duration_s:
                time.sleep(args.sample_s)
                now = time.monotonic()
                count = load.completed
                rate = (count - last_count) / (now - last_time)
                last_count, last_time = count, now
                rss = sum(_rss_bytes(process.pid) for process in processes.values()) / 2**20
                database_bytes, wal_bytes, log_bytes = _directory_bytes(root / "data")
                disk, wal, logged = database_bytes / 2**20, wal_bytes / 2**20, log_bytes / 2**20
                versions = 0
                for stub in stats_stubs:
                    versions += int(json.loads(stub.Stats(pb.StatsRequest(), timeout=10).json)["versions"])
                elapsed = now - started
                samples.append((elapsed, rss, disk, versions, wal, logged))
                print(f"{elapsed:6.0f} {rate:8.0f} {rss:8.1f} {disk:8.2f} {wal:8.2f} {logged:8.2f} {versions:9d} "
                      f"{load.errors:6d}", flush=True)
            load.stop()
        finally:
            for process in processes.values():
                process.terminate()
            for process in processes.values():
                process.wait(timeout=30)
    steady = [sample for sample in samples if sample[0] >= warmup_s]
    if len(steady) < 2:
        print("too few samples after warm-up to judge", file=sys.stderr)
        return 1
    half = max(1, len(steady) // 3)
    first, last = steady[:half], steady[-half:]
    # RSS and the database files: mean of the last third against the first. The WAL is judged
    # against its cap instead: it grows between checkpoints up to ``journal_size_limit`` per server
    # (okapikv.storage.sqlite) and is cut back, a sawtooth whose teeth a third of the run may or may
    # not contain, so comparing thirds says nothing; exceeding the cap would mean it is not cut back.
    growth = {
        "rss": statistics.mean(s[1] for s in last) / max(statistics.mean(s[1] for s in first), 1e-9) - 1,
        "disk": statistics.mean(s[2] for s in last) / max(statistics.mean(s[2] for s in first), 1e-9) - 1,
    }
    wal_cap = len(processes) * WAL_SIZE_LIMIT_BYTES / 2**20
    wal_peak = max(s[4] for s in steady)
    # The log: an open segment and the closed ones awaiting their checkpoint, a sawtooth like the WAL.
    log_cap = len(processes) * 3 * SEGMENT_BYTES / 2**20
    log_peak = max(s[5] for s in steady)
    print(f"after warm-up: RSS {growth['rss']:+.1%}, database files {growth['disk']:+.1%} (mean of the last third "
          f"against the first third), WAL {min(s[4] for s in steady):.1f}-{wal_peak:.1f} MB (cap "
          f"{wal_cap:.0f} MB, one WAL of at most {WAL_SIZE_LIMIT_BYTES / 2**20:.0f} MB per server between "
          f"checkpoints), log {min(s[5] for s in steady):.1f}-{log_peak:.1f} MB (cap {log_cap:.0f} MB, three "
          f"{SEGMENT_BYTES / 2**20:.0f} MB segments per server); limit {args.max_growth:+.0%}; "
          f"versions held {min(s[3] for s in steady)}..{max(s[3] for s in steady)} for {args.keys} keys; "
          f"{last_count} writes", flush=True)
    bounded = wal_peak <= wal_cap * 1.1 and log_peak <= log_cap
    return 0 if all(value < args.max_growth for value in growth.values()) and bounded else 1


if __name__ == "__main__":
    sys.exit(main())
