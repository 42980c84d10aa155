"""Server CPU per operation of two source trees, side by side: a paired A/B of a change.

One in-memory server (1 DC x 1 partition, the fast suite's YCSB-A shape) from each tree, both
running at once, driven in turn by the same YCSB-A load on the native port (version 2): ``--load
async``, 64 forks of one ``AsyncClient`` in this process (what the fast suite's "server CPU per
operation, YCSB-A in memory" row runs), or ``--load lean`` (``okapikv.bench.engine.lean``). The
order alternates from pair to pair, so a machine that slows down or speeds up during the run weighs
on both alike; each server's CPU time comes from ``/proc/PID/stat`` over the measured window
(``measure_native_wire``). Prints each pair and the median ratio (``--change`` over ``--base``).
The load runs this checkout's client in this process; only the servers differ.

    python scripts/measure_server_cpu.py --base DIR [--change DIR] [--load async|lean] [--pairs 4]
        [--duration-s 4]

``DIR``: a tree holding ``src/okapikv`` (``git archive REV src | tar -x -C DIR`` makes one of a
commit); ``--change`` defaults to this checkout. ``--durable both`` runs both servers with a data
directory (the fast suite's durable row), ``--durable change`` only the change's: with ``--base``
the same tree, that pairs a durable server against an in-memory one, the fast suite's "durable /
in-memory server CPU per operation" in paired rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import uvloop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout: its benchmarks/ lab
sys.path.insert(0, str(ROOT / "scripts"))

from measure_native_wire import run_async, run_lean

from benchmarks.harness.clusters import RunningCluster, start_local


def _start(tree: Path, durable: bool) -> RunningCluster:
    """A server whose ``okapikv`` is ``tree``'s (its processes take this one's environment)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree / "src")
    try:
        return start_local(protocol="okapi", dcs=("solo",), partitions=1, wan="off", durable=durable)
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


async def _measure(args: argparse.Namespace, servers: dict[str, tuple[str, int]]) -> list[dict[str, dict[str, float]]]:
    run = run_lean if args.load == "lean" else run_async
    for address, pid in servers.values():  # fill the keyspace and warm both; not counted
        await run(address, pid, "msgpack", args.sessions, 0.5, 1.0, seed=0)
    pairs: list[dict[str, dict[str, float]]] = []
    for index in range(args.pairs):
        order = ("base", "change") if index % 2 == 0 else ("change", "base")
        pair = {name: await run(*servers[name], "msgpack", args.sessions, args.warmup_s, args.duration_s,
                                seed=index + 1) for name in order}
        pairs.append(pair)
        base, change = pair["base"], pair["change"]
        print(f"pair {index + 1}: server us/op base {base['server_us_per_op']:.2f} change "
              f"{change['server_us_per_op']:.2f} (x{change['server_us_per_op'] / base['server_us_per_op']:.3f}); "
              f"ops/s {base['ops_per_s']:,.0f} / {change['ops_per_s']:,.0f}; the load's CPU us/op "
              f"{base['client_us_per_op']:.2f} / {change['client_us_per_op']:.2f}; the servers' event-loop thread / "
              f"other threads us/op {base['server_loop_us_per_op']:.2f} / {base['server_other_threads_us_per_op']:.2f}"
              f" and {change['server_loop_us_per_op']:.2f} / {change['server_other_threads_us_per_op']:.2f}",
              flush=True)
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--change", type=Path, default=ROOT)
    parser.add_argument("--load", choices=("lean", "async"), default="async")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--duration-s", type=float, default=4.0)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--durable", choices=("none", "both", "change"), default="none",
                        help="which servers keep their store in a data directory")
    args = parser.parse_args()
    durable = {"base": args.durable == "both", "change": args.durable != "none"}
    clusters = {name: _start(tree, durable[name]) for name, tree in (("base", args.base), ("change", args.change))}
    try:
        servers = {name: (cluster.servers[0].address, cluster.pids()[0]) for name, cluster in clusters.items()}
        pairs = uvloop.run(_measure(args, servers))
    finally:
        for cluster in clusters.values():
            cluster.stop()
    ratios = {name: [pair["change"][name] / pair["base"][name] for pair in pairs]
              for name in ("server_us_per_op", "ops_per_s")}
    summary = {name: {"median_ratio": round(statistics.median(values), 3),
                      "ratios": [round(value, 3) for value in values]} for name, values in ratios.items()}
    medians = {name: round(statistics.median(pair[name]["server_us_per_op"] for pair in pairs), 2)
               for name in ("base", "change")}
    print(json.dumps({"load": args.load, "durable": args.durable, "server_us_per_op_median": medians,
                      "change_over_base": summary},
                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
