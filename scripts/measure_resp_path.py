"""The RESP port's Python path per command, without sockets: paired rounds of two trees.

One in-memory ``PartitionNode`` (1 DC x 1 partition), its ``RespService`` and 50 ``RespConnection``s
on transports that keep nothing, in one process, fed what ``redis-benchmark -t set,get -c 50 -d 8
-r 10000`` sends: each connection one request per read (``SET key:<12 digits> <8 bytes>``, then
``GET``), the 50 reads of a turn of the event loop, then the port's core batch run as the loop runs
it at the end of the turn (one core call, each connection's reply written once). What it times is
the Python work of the server per command (parse, plan, core, reply, flush) minus the event loop
and the system calls, so it moves with a change to that path alone and is far less noisy than a run
with sockets on a shared machine (``scripts/measure_resp_cpu.py`` and
``scripts/resp_cluster_bench.py`` are those runs).

    python scripts/measure_resp_path.py --base DIR [--change DIR] [--rounds 4] [--turns 400]

Each round runs the base tree and the change tree once each, alternating which goes first, each in
a fresh process (``PYTHONPATH=DIR/src``) that warms up and then times three passes of ``--turns``
turns per command; a tree's figure is the fastest pass (process CPU time per command). ``DIR``
holds ``src/okapikv`` (``git archive REV src | tar -x -C DIR`` makes one of a commit); ``--change``
defaults to this checkout. With ``--one`` it times only the tree it runs in (no pairing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout: its benchmarks/ lab

from benchmarks.harness.paired_trees import paired_parser

CONNECTIONS = 50
KEYS = 10_000
COMMANDS = ("SET", "GET")


def _transport(index: int) -> Any:
    """A transport that keeps nothing (no socket): what the connection calls, doing nothing."""
    names = {"peername": ("127.0.0.1", 40_000 + index), "sockname": ("127.0.0.1", 6379)}
    return SimpleNamespace(write=len, is_closing=lambda: False, close=lambda: None, pause_reading=lambda: None,
                           resume_reading=lambda: None, can_write_eof=lambda: True, write_eof=lambda: None,
                           get_extra_info=lambda name, default=None: names.get(name, default))


def _turns(command: str, turns: int, first: int) -> list[list[bytes]]:
    """``turns`` turns of one request per connection, as redis-benchmark writes them."""
    def frame(key: bytes) -> bytes:
        if command == "SET":
            return b"*3\r\n$3\r\nSET\r\n$16\r\n%s\r\n$8\r\nxxxxxxxx\r\n" % key
        return b"*2\r\n$3\r\nGET\r\n$16\r\n%s\r\n" % key

    return [[frame(b"key:%012d" % ((first + turn * CONNECTIONS + index) % KEYS)) for index in range(CONNECTIONS)]
            for turn in range(turns)]


async def _time_one(turns: int) -> dict[str, list[float]]:
    from okapikv.cluster.config.local import local_cluster
    from okapikv.resp.connection import RespConnection
    from okapikv.resp.limits import RespLimits
    from okapikv.resp.service import RespService
    from okapikv.server.node import PartitionNode

    config = local_cluster(dcs=("solo",), partitions=1, protocol="okapi", wan="off", base_port=1, host="127.0.0.1")
    node = PartitionNode(config, 0, 0)
    node.start()
    service = RespService(node, RespLimits.from_config(config, node.core.config.max_read_keys), durable=False)
    await service.start("127.0.0.1", 0, None)  # makes the port's core batch; no client connects
    connections = []
    for index in range(CONNECTIONS):
        connection = RespConnection(service)
        connection.connection_made(_transport(index))
        connections.append(connection)
    batch = service.batch

    def drive(reads: list[list[bytes]]) -> None:
        for turn in reads:
            for connection, data in zip(connections, turn, strict=True):
                connection.data_received(data)
            batch._run()  # the end of the event-loop turn: the core call, then one write per connection

    for command in COMMANDS:
        drive(_turns(command, KEYS // CONNECTIONS, 0))  # fills the keyspace, warms every path
    import gc
    gc.freeze()  # as the server does once it serves
    passes: dict[str, list[float]] = {command: [] for command in COMMANDS}
    for first in (1, 2, 3):
        for command in COMMANDS:
            reads = _turns(command, turns, first)
            started = time.process_time()
            drive(reads)
            passes[command].append((time.process_time() - started) * 1e6 / (turns * CONNECTIONS))
    for connection in connections:
        connection.connection_lost(None)
    await service.close()
    await node.close()
    return passes


def _run_tree(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": str(tree / "src")}
    output = subprocess.run([sys.executable, __file__, "--one", "--turns", str(args.turns)],
                            env=environment, check=True, capture_output=True, text=True).stdout
    return {command: min(passes) for command, passes in json.loads(output)["us_per_command"].items()}


def main() -> int:
    parser = paired_parser(__doc__, rounds=4)
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args()
    if args.one:
        print(json.dumps({"us_per_command": asyncio.run(_time_one(args.turns))}))
        return 0
    if args.base is None:
        parser.error("--base is required (or --one)")
    ratios: dict[str, list[float]] = {command: [] for command in COMMANDS}
    for index in range(args.rounds):
        order = ("base", "change") if index % 2 == 0 else ("change", "base")
        figures = {name: _run_tree(args.base if name == "base" else args.change, args) for name in order}
        line = []
        for command in COMMANDS:
            base, change = figures["base"][command], figures["change"][command]
            ratios[command].append(change / base)
            line.append(f"{command} base {base:.2f} change {change:.2f} us (x{ratios[command][-1]:.3f})")
        print(f"round {index + 1}: " + "; ".join(line), flush=True)
    print("median change / base: " + ", ".join(f"{command} x{statistics.median(ratios[command]):.3f}"
                                                for command in COMMANDS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
