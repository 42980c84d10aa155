"""Server CPU per operation on the native port, version 1 (protobuf) against version 2 (msgpack).

One in-memory server (1 DC x 1 partition), driven by 64 sessions of YCSB-A (one operation in
flight each) speaking one version or the other, in paired rounds (the order alternates within each
pair, so a machine that slows down or speeds up during the run weighs on both alike). The load:
``--load lean``, the lean load generator (``okapikv.bench.engine.lean``); ``--load async``, forks of
one ``AsyncClient`` in this process (``okapikv.client.native.VERSION`` picks the version). Per run:
the server's CPU time (``/proc/<pid>/stat``) and the operations completed in the measured window,
and the load's own CPU per operation. Prints each pair and the median ratios (msgpack / protobuf).

    python scripts/measure_native_wire.py [--load lean|async] [--pairs 4] [--duration-s 4] [--sessions 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its benchmarks/ lab

from benchmarks.harness.clusters import start_local
from okapikv.bench.engine.adapters import TargetSpec
from okapikv.bench.engine.lean import LeanLoad
from okapikv.bench.engine.recording import Recorder, Window
from okapikv.bench.engine.workloads import READ, UPDATE, InsertSequence, WorkloadConfig, make_source
from okapikv.client import AsyncClient, native

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
RECORDS = 10_000
MAX_OPERATIONS = 2_000_000  # per run, beside the time bound


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime + stime


def _threads_s(pid: int) -> tuple[float, float]:
    """CPU seconds of the server's event-loop thread and of its other threads (a durable server's
    storage worker among them), from each thread's ``schedstat`` (nanoseconds, kernel time included)."""
    main = others = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                spent = int(stat.read().split()[0])
        except OSError:  # the thread ended meanwhile
            continue
        if int(tid) == pid:
            main += spent
        else:
            others += spent
    return main / 1e9, others / 1e9


def _figures(operations: int, duration_s: float, start: tuple[float, float, tuple[float, float]],
             end: tuple[float, float, tuple[float, float]]) -> dict[str, float]:
    (server_start, client_start, threads_start), (server_end, client_end, threads_end) = start, end
    return {"ops_per_s": operations / duration_s,
            "server_us_per_op": (server_end - server_start) * 1e6 / operations,
            "client_us_per_op": (client_end - client_start) * 1e6 / operations,
            "server_loop_us_per_op": (threads_end[0] - threads_start[0]) * 1e6 / operations,
            "server_other_threads_us_per_op": (threads_end[1] - threads_start[1]) * 1e6 / operations}


def _reading(pid: int) -> tuple[float, float, tuple[float, float]]:
    return _cpu_s(pid), time.process_time(), _threads_s(pid)


async def run_lean(address: str, pid: int, wire: str, sessions: int, warmup_s: float, duration_s: float,
               seed: int) -> dict[str, float]:
    config = WorkloadConfig("a", records=RECORDS)
    inserts = InsertSequence(RECORDS, 0, 1)
    sources = [make_source(config, random.Random(f"{seed}/{number}"), inserts, None) for number in range(sessions)]
    load = LeanLoad(TargetSpec("lean", (address,)), sources, max_operations=MAX_OPERATIONS, wire=wire)
    await load.open()
    window = Window(time.time() + 0.1, warmup_s, duration_s)
    readings: list[tuple[float, float, tuple[float, float]]] = []

    async def sample() -> None:
        await asyncio.sleep(window.seconds_until(window.measure_ns))
        readings.append(_reading(pid))
        await asyncio.sleep(window.seconds_until(window.end_ns))
        readings.append(_reading(pid))

    state = Recorder()
    sampler = asyncio.create_task(sample())
    try:
        await load.run(window, state)
        await sampler
    finally:
        load.close()
    if sum(state.errors.values()):
        raise RuntimeError(f"{wire}: {sum(state.errors.values())} errors, last: {state.last_error}")
    return _figures(max(state.in_window, 1), duration_s, *readings)


async def run_async(address: str, pid: int, wire: str, sessions: int, warmup_s: float, duration_s: float,
                     seed: int) -> dict[str, float]:
    """The same load through ``AsyncClient`` forks: each session reads or updates (YCSB-A's kinds)
    in a closed loop; operations counted in the window after ``warmup_s``."""
    native.VERSION = 2 if wire == "msgpack" else 1
    config = WorkloadConfig("a", records=RECORDS)
    inserts = InsertSequence(RECORDS, 0, 1)
    sources = [make_source(config, random.Random(f"{seed}/{number}"), inserts, None) for number in range(sessions)]
    loop = asyncio.get_running_loop()
    counted = [0]
    measuring = [False]
    async with AsyncClient(address, timeout_s=10) as client:
        forks = [client.fork() for _ in range(sessions)]
        stop_at = loop.time() + warmup_s + duration_s

        async def session(fork: AsyncClient, index: int) -> None:
            source = sources[index]
            while loop.time() < stop_at:
                operation = source.next()
                if operation.kind == READ:
                    await fork.get(operation.key)
                elif operation.kind == UPDATE:
                    await fork.swap(operation.key, operation.value)
                else:
                    await fork.put(operation.key, operation.value)
                if measuring[0]:
                    counted[0] += 1

        async def sample() -> tuple[tuple[float, float, tuple[float, float]], tuple[float, float, tuple[float, float]]]:
            await asyncio.sleep(warmup_s)
            start = _reading(pid)
            counted[0], measuring[0] = 0, True
            await asyncio.sleep(duration_s)
            measuring[0] = False
            return start, _reading(pid)

        sampler = asyncio.create_task(sample())
        await asyncio.gather(*(session(fork, index) for index, fork in enumerate(forks)))
        start, end = await sampler
    return _figures(max(counted[0], 1), duration_s, start, end)


async def _measure(args: argparse.Namespace, address: str, pid: int) -> list[dict[str, dict[str, float]]]:
    """All runs in one event loop (grpc.aio binds to the first loop that uses it)."""
    run = run_lean if args.load == "lean" else run_async
    for wire in ("protobuf", "msgpack"):  # fill the keyspace and warm both paths; not counted
        await run(address, pid, wire, args.sessions, 0.5, 1.0, seed=0)
    pairs: list[dict[str, dict[str, float]]] = []
    for index in range(args.pairs):
        order = ("protobuf", "msgpack") if index % 2 == 0 else ("msgpack", "protobuf")
        pair = {wire: await run(address, pid, wire, args.sessions, args.warmup_s, args.duration_s, seed=index + 1)
                for wire in order}
        pairs.append(pair)
        old, new = pair["protobuf"], pair["msgpack"]
        print(f"pair {index + 1}: server us/op protobuf {old['server_us_per_op']:.1f} msgpack "
              f"{new['server_us_per_op']:.1f} (x{new['server_us_per_op'] / old['server_us_per_op']:.2f}); "
              f"ops/s {old['ops_per_s']:,.0f} -> {new['ops_per_s']:,.0f}; load us/op "
              f"{old['client_us_per_op']:.1f} -> {new['client_us_per_op']:.1f}", flush=True)
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", choices=("lean", "async"), default="lean")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--duration-s", type=float, default=4.0)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--sessions", type=int, default=64)
    args = parser.parse_args()
    cluster = start_local(protocol="okapi", dcs=("solo",), partitions=1, wan="off")
    try:
        pairs = uvloop.run(_measure(args, cluster.servers[0].address, cluster.pids()[0]))
    finally:
        cluster.stop()
    ratios = {name: [pair["msgpack"][name] / pair["protobuf"][name] for pair in pairs]
              for name in ("server_us_per_op", "ops_per_s", "client_us_per_op")}
    summary = {name: {"median_ratio": round(statistics.median(values), 3),
                      "ratios": [round(value, 3) for value in values]} for name, values in ratios.items()}
    print(json.dumps({"load": args.load, "pairs": pairs, "msgpack_over_protobuf": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
