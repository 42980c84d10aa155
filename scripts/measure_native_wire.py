"""Server CPU per operation on the native port, version 1 (protobuf) against version 2 (msgpack).

One in-memory server (1 DC x 1 partition), driven by the lean load generator
(``okapikv.bench.engine.lean``: 64 sessions, YCSB-A, one operation in flight each) speaking one
version or the other, in paired rounds (the order alternates within each pair, so a machine that
slows down or speeds up during the run weighs on both alike). Per run: the server's CPU time
(``/proc/<pid>/stat``) and the operations completed in the measured window, and the load
generator's own CPU per operation. Prints each pair and the median ratio (msgpack / protobuf).

    python scripts/measure_native_wire.py [--pairs 4] [--duration-s 4] [--sessions 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time

from okapikv.bench.engine.adapters import TargetSpec
from okapikv.bench.engine.clusters import start_local
from okapikv.bench.engine.lean import LeanLoad
from okapikv.bench.engine.recording import Recorder, Window
from okapikv.bench.engine.workloads import InsertSequence, WorkloadConfig, make_source

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
RECORDS = 10_000
MAX_OPERATIONS = 2_000_000  # per run, beside the time bound


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime + stime


async def _run(address: str, pid: int, wire: str, sessions: int, warmup_s: float, duration_s: float,
               seed: int) -> dict[str, float]:
    config = WorkloadConfig("a", records=RECORDS)
    inserts = InsertSequence(RECORDS, 0, 1)
    sources = [make_source(config, random.Random(f"{seed}/{number}"), inserts, None) for number in range(sessions)]
    load = LeanLoad(TargetSpec("lean", (address,)), sources, max_operations=MAX_OPERATIONS, wire=wire)
    await load.open()
    window = Window(time.time() + 0.1, warmup_s, duration_s)
    readings: list[tuple[float, float]] = []

    async def sample() -> None:
        await asyncio.sleep(window.seconds_until(window.measure_ns))
        readings.append((_cpu_s(pid), time.process_time()))
        await asyncio.sleep(window.seconds_until(window.end_ns))
        readings.append((_cpu_s(pid), time.process_time()))

    state = Recorder()
    sampler = asyncio.create_task(sample())
    try:
        await load.run(window, state)
        await sampler
    finally:
        load.close()
    if sum(state.errors.values()):
        raise RuntimeError(f"{wire}: {sum(state.errors.values())} errors, last: {state.last_error}")
    operations = max(state.in_window, 1)
    (server_start, client_start), (server_end, client_end) = readings
    return {"ops_per_s": operations / duration_s,
            "server_us_per_op": (server_end - server_start) * 1e6 / operations,
            "client_us_per_op": (client_end - client_start) * 1e6 / operations}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--duration-s", type=float, default=4.0)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--sessions", type=int, default=64)
    args = parser.parse_args()
    cluster = start_local(protocol="okapi", dcs=("solo",), partitions=1, wan="off")
    try:
        address, pid = cluster.servers[0].address, cluster.pids()[0]
        for wire in ("protobuf", "msgpack"):  # fill the keyspace and warm both paths; not counted
            asyncio.run(_run(address, pid, wire, args.sessions, 0.5, 1.0, seed=0))
        pairs: list[dict[str, dict[str, float]]] = []
        for index in range(args.pairs):
            order = ("protobuf", "msgpack") if index % 2 == 0 else ("msgpack", "protobuf")
            pair = {wire: asyncio.run(_run(address, pid, wire, args.sessions, args.warmup_s, args.duration_s,
                                           seed=index + 1)) for wire in order}
            pairs.append(pair)
            old, new = pair["protobuf"], pair["msgpack"]
            print(f"pair {index + 1}: server us/op protobuf {old['server_us_per_op']:.1f} msgpack "
                  f"{new['server_us_per_op']:.1f} (x{new['server_us_per_op'] / old['server_us_per_op']:.2f}); "
                  f"ops/s {old['ops_per_s']:,.0f} -> {new['ops_per_s']:,.0f}; load generator us/op "
                  f"{old['client_us_per_op']:.1f} -> {new['client_us_per_op']:.1f}", flush=True)
        ratios = {name: [pair["msgpack"][name] / pair["protobuf"][name] for pair in pairs]
                  for name in ("server_us_per_op", "ops_per_s", "client_us_per_op")}
        summary = {name: {"median_ratio": round(statistics.median(values), 3),
                          "ratios": [round(value, 3) for value in values]} for name, values in ratios.items()}
        print(json.dumps({"pairs": pairs, "msgpack_over_protobuf": summary}, indent=1))
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
