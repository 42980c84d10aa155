"""Disk use of one durable server under paced overwrites of a fixed key set, sampled over time.

Starts one `okapi server --data-dir` (1 DC x 1 partition, its data in a temporary directory), PUTs
random keys of a fixed set at a fixed rate (open loop, paced in ticks of 10 ms, through the async
native client), and every ``--sample-s`` seconds measures the data directory's bytes by kind:

- ``segments``: the commit log's segments (``log-*.okl``), the part checkpoints must cut back;
- ``checkpoint``: the SQLite file with its ``-wal`` and ``-shm`` files;
- ``other``: the rest (``COMMITTED``, ``LOCK``, the disk ``RESERVE``, a fixed 8-16 MiB).

It prints a table and a summary (the maximum and final bytes of each kind, against the live data's
size: keys x (key + value bytes)), writes every sample to ``--csv``, and exits 1 when the log
outgrows three segments or the checkpoint grows by more than ``--max-growth`` after warm-up (a data
directory that keeps growing under overwrites is a bug: segments must be deleted after their
checkpoint, docs/storage.md). The load is light on purpose (at 2,000 PUT/s about a fifth of a core
for the server and a tenth for the load), so the run shows what bounds disk use, not what a
saturated server does.

    python scripts/disk_use_soak.py --duration-s 3600 --sample-s 60 --csv disk-use-1h.csv  # docs/benchmarks.md
    python scripts/disk_use_soak.py --duration-s 120 --sample-s 10              # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from okapikv.client.aio import AsyncClient
from okapikv.cluster.config import local_cluster
from okapikv.cluster.health import wait_until_serving
from okapikv.cluster.ports import free_port_block
from okapikv.cluster.processes import server_data_dir, start_server
from okapikv.storage.log import SEGMENT_SUFFIX
from okapikv.storage.logged_store import SEGMENT_BYTES

TICK_S = 0.01
SESSIONS = 8


@dataclass
class Sample:
    t_s: float
    puts: int
    puts_per_s: float
    errors: int
    segments: int
    segment_bytes: int
    checkpoint_bytes: int
    other_bytes: int
    total_bytes: int
    allocated_bytes: int
    versions: int
    checkpoints: int


def directory_bytes(directory: Path) -> tuple[int, int, int, int, int]:
    """(segments, segment bytes, checkpoint bytes, other bytes, bytes allocated on disk)."""
    count = segments = checkpoint = other = allocated = 0
    for path in directory.rglob("*"):
        try:
            status = path.stat()
        except OSError:  # a segment deleted by a checkpoint between the listing and the stat
            continue
        if not path.is_file():
            continue
        allocated += status.st_blocks * 512
        if path.name.endswith(SEGMENT_SUFFIX):
            count += 1
            segments += status.st_size
        elif path.name.startswith("okapi.sqlite3"):
            checkpoint += status.st_size
        else:
            other += status.st_size
    return count, segments, checkpoint, other, allocated


class PacedLoad:
    """Open-loop PUTs at ``rate`` per second over ``keys`` keys: each tick issues the PUTs due by
    then, spread over a few sessions; a tick that falls behind is caught up by the next (bounded to
    one second's worth, so a stalled server is not buried when it comes back)."""

    def __init__(self, client: AsyncClient, keys: int, value_bytes: int, rate: float) -> None:
        self.sessions = [client.fork() for _ in range(SESSIONS)]
        self.keys = [f"disk{index:06d}".encode() for index in range(keys)]
        self.value = b"v" * value_bytes
        self.rate = rate
        self.done = 0
        self.errors = 0
        self._rng = random.Random(1)

    async def _put(self, session: AsyncClient, key: bytes) -> None:
        try:
            await session.put(key, self.value)
            self.done += 1
        except Exception:  # counted and reported; the soak goes on
            self.errors += 1

    async def run(self, until: float) -> None:
        started = time.monotonic()
        issued = 0
        pending: set[asyncio.Task[None]] = set()
        while (now := time.monotonic()) < until:
            due = min(int((now - started) * self.rate) - issued, int(self.rate))
            for index in range(max(due, 0)):
                task = asyncio.ensure_future(self._put(self.sessions[index % SESSIONS], self._rng.choice(self.keys)))
                pending.add(task)
                task.add_done_callback(pending.discard)
            issued += max(due, 0)
            await asyncio.sleep(TICK_S)
        if pending:
            await asyncio.wait(pending, timeout=30)


async def soak(address: str, data_dir: Path, args: argparse.Namespace, writer: csv.writer) -> list[Sample]:  # type: ignore[valid-type]
    client = AsyncClient(address, timeout_s=30)
    await client.connect()
    load = PacedLoad(client, args.keys, args.value_bytes, args.rate)
    started = time.monotonic()
    task = asyncio.ensure_future(load.run(started + args.duration_s))
    samples: list[Sample] = []
    last_done, last_time = 0, started
    try:
        while not task.done():
            next_sample = started + (len(samples) + 1) * args.sample_s
            await asyncio.wait([task], timeout=max(0.0, next_sample - time.monotonic()))
            now = time.monotonic()
            if task.done() and samples and now - last_time < args.sample_s / 2:
                break  # the load ended just after the last sample
            stats = await client.stats(0)
            storage = stats.get("storage") or {}
            count, segments, checkpoint, other, allocated = directory_bytes(data_dir)
            sample = Sample(round(now - started, 1), load.done, round((load.done - last_done) / (now - last_time), 1),
                            load.errors, count, segments, checkpoint, other, segments + checkpoint + other, allocated,
                            int(stats.get("store", {}).get("versions", stats.get("versions", 0))),
                            int(storage.get("checkpoints", 0)))
            last_done, last_time = load.done, now
            samples.append(sample)
            writer.writerow(astuple(sample))  # type: ignore[attr-defined]
            print(f"{sample.t_s:7.0f} {sample.puts_per_s:7.0f} {sample.errors:6d} {sample.segments:4d} "
                  f"{sample.segment_bytes / 2**20:8.2f} {sample.checkpoint_bytes / 2**20:8.2f} "
                  f"{sample.other_bytes / 2**20:8.2f} {sample.total_bytes / 2**20:8.2f} "
                  f"{sample.allocated_bytes / 2**20:8.2f} {sample.versions:9d} {sample.checkpoints:5d}", flush=True)
        await task
    finally:
        await client.close()
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration-s", type=float, default=600.0)
    parser.add_argument("--sample-s", type=float, default=30.0)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rate", type=float, default=2_000.0, help="PUTs per second (default 2,000)")
    parser.add_argument("--csv", type=Path, default=Path("disk-use.csv"))
    parser.add_argument("--dir", type=Path, default=None, help="where the data directory goes (default: $TMPDIR)")
    parser.add_argument("--warmup-s", type=float, default=None, help="default: a tenth of the run, at least 60 s")
    parser.add_argument("--max-growth", type=float, default=0.25)
    args = parser.parse_args(argv)
    if args.duration_s <= 0 or args.sample_s <= 0 or args.rate <= 0 or args.keys <= 0:
        parser.error("--duration-s, --sample-s, --rate and --keys must be positive")
    warmup_s = args.warmup_s if args.warmup_s is not None else max(60.0, args.duration_s / 10)
    config = local_cluster(dcs=["a"], partitions=1, base_port=free_port_block(1), cluster_id=f"disk-{os.getpid()}")
    server = config.servers[0]
    with tempfile.TemporaryDirectory(prefix="okapi-disk-", dir=args.dir) as workdir:
        root = Path(workdir)
        data_dir = server_data_dir(root / "data", server)
        process = start_server(config.dump(root / "cluster.toml"), server, data_dir=data_dir)
        try:
            if wait_until_serving([server.address], 60):
                print(f"{server.address} is not serving", file=sys.stderr)
                return 1
            print(f"disk use soak: one durable server, {args.keys} keys, {args.value_bytes}-byte values, "
                  f"{args.rate:.0f} PUT/s for {args.duration_s:.0f} s, sampled every {args.sample_s:.0f} s; "
                  f"data in {data_dir}; samples in {args.csv}", flush=True)
            print(f"{'t_s':>7} {'PUT/s':>7} {'errors':>6} {'segs':>4} {'log_mb':>8} {'ckpt_mb':>8} {'other_mb':>8} "
                  f"{'total_mb':>8} {'alloc_mb':>8} {'versions':>9} {'ckpts':>5}", flush=True)
            with args.csv.open("w", newline="") as file:
                writer = csv.writer(file)
                writer.writerow([field.name for field in fields(Sample)])
                samples = asyncio.run(soak(server.address, data_dir, args, writer))
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except Exception:  # a server that will not stop is killed
                process.kill()
                process.wait(timeout=10)
    return summarize(samples, args, warmup_s)


def summarize(samples: list[Sample], args: argparse.Namespace, warmup_s: float) -> int:
    """Print the maxima, the final figures and the verdict (module docstring)."""
    steady = [sample for sample in samples if sample.t_s >= warmup_s]
    if len(steady) < 2:
        print("too few samples after warm-up to judge", file=sys.stderr)
        return 1
    live = args.keys * (len(b"disk000000") + args.value_bytes)
    final = samples[-1]
    mib = 2**20
    print(f"live data: {args.keys} keys x {len(b'disk000000') + args.value_bytes} bytes = {live / mib:.2f} MiB; "
          f"{final.puts} PUTs ({final.puts / max(final.t_s, 1e-9):.0f}/s), {final.errors} errors, "
          f"{final.checkpoints} checkpoints, {final.versions} versions held at the end")
    for name in ("segment_bytes", "checkpoint_bytes", "other_bytes", "total_bytes", "allocated_bytes"):
        values = [getattr(sample, name) for sample in steady]
        print(f"{name:>17}: max {max(values) / mib:8.2f} MiB, final {getattr(final, name) / mib:8.2f} MiB, "
              f"after warm-up {min(values) / mib:.2f}..{max(values) / mib:.2f} MiB")
    print(f"{'segments':>17}: max {max(sample.segments for sample in samples)}, final {final.segments}")
    # The log is a sawtooth (an open segment filling, closed ones deleted at each checkpoint) whose
    # teeth a third of the run may or may not catch, so it is judged against a cap: the open segment
    # and two closed ones awaiting their checkpoint. The checkpoint is judged by its growth: the mean
    # of the last third of the samples after warm-up against the first third's.
    log_cap = 3 * SEGMENT_BYTES
    log_peak = max(sample.segment_bytes for sample in steady)
    third = max(1, len(steady) // 3)
    early = statistics.mean(sample.checkpoint_bytes for sample in steady[:third])
    late = statistics.mean(sample.checkpoint_bytes for sample in steady[-third:])
    verdicts = [f"log peak {log_peak / mib:.2f} MiB (cap {log_cap / mib:.0f} MiB: three segments)",
                f"checkpoint {late / max(early, 1) - 1:+.1%} from the first third of the run to the last "
                f"(limit {args.max_growth:+.0%})"]
    if log_peak > log_cap or late > (1 + args.max_growth) * early:
        print("GREW: " + "; ".join(verdicts))
        return 1
    print("bounded: " + "; ".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
