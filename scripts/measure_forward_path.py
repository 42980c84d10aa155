"""What a forwarded RESP command costs the servers against a local one, without sockets.

Two in-memory ``PartitionNode``s (1 DC x 2 partitions) in one process: partition 0's
``RespService`` with 50 ``RespConnection``s on transports that keep nothing, fed what
``redis-benchmark -t set,get -c 50 -d 8`` sends (one request per connection per read, the 50 reads
of a turn of the event loop), and its forwarding client (``AsyncClient``) whose pipeline to
partition 1 is the real native connection's code (``AsyncNativeCall`` and its frame protocol)
over a loopback: each frame it writes goes straight into partition 1's ``NativeConnection``,
whose result frames go straight back. The nodes' timers are stopped once warm (no heartbeats, no
stabilization rounds: under valgrind their work would grow with the run's wall time). A pass sends
keys of partition 0 only (served on the local core) or of partition 1 only (every command
forwarded), and each command's cost is the process's CPU (or instructions) per command, both
servers' Python work together, with the event loop's callbacks but no system calls: the figure the
forwarding path alone moves (``scripts/resp_cluster_bench.py`` is the run with sockets, one
process per server).

    python scripts/measure_forward_path.py [--one] [--turns 200]
    python scripts/measure_forward_path.py --base DIR [--change DIR] [--rounds 4] [--instructions]

``--one`` times the tree it runs in and prints the figures. With ``--base`` each round runs both
trees in fresh processes (``PYTHONPATH=DIR/src``; ``git archive REV src | tar -x -C DIR`` makes one
of a commit), alternating which goes first; a tree's figure is its fastest of three passes. With
``--instructions`` each tree runs under ``valgrind --tool=cachegrind`` at ``--turns`` and three
times that: the difference of the two counts over the difference of the commands is the
instructions per command, the same in every run (the hash seed fixed) however loaded the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
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
KEYS = 4_000  # per partition
#: (command, partition of its keys): partition 0 is local, partition 1 forwarded
CASES = (("SET", 0), ("GET", 0), ("SET", 1), ("GET", 1))
MAX_SPINS = 10_000  # loop turns a read of the 50 connections may take to be answered


class _Sink:
    """A transport that keeps nothing: counts the writes (the replies) and forwards them."""

    def __init__(self, index: int, forward: Any = None) -> None:
        self.writes = 0
        self._forward = forward
        self._names = {"peername": ("127.0.0.1", 40_000 + index), "sockname": ("127.0.0.1", 6379)}

    def write(self, data: bytes) -> None:
        self.writes += 1
        if self._forward is not None:
            self._forward(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._names.get(name, default)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None: ...


def _keys(partition: int) -> list[bytes]:
    from okapikv.core.partitioning import partition_of

    keys: list[bytes] = []
    index = 0
    while len(keys) < KEYS:
        key = b"key:%012d" % index
        if partition_of(key, 2) == partition:
            keys.append(key)
        index += 1
    return keys


def _turns(command: str, keys: list[bytes], turns: int, first: int) -> list[list[bytes]]:
    """``turns`` turns of one request per connection, as redis-benchmark writes them."""
    def frame(key: bytes) -> bytes:
        if command == "SET":
            return b"*3\r\n$3\r\nSET\r\n$16\r\n%s\r\n$8\r\nxxxxxxxx\r\n" % key
        return b"*2\r\n$3\r\nGET\r\n$16\r\n%s\r\n" % key

    return [[frame(keys[(first * 7919 + turn * CONNECTIONS + index) % KEYS]) for index in range(CONNECTIONS)]
            for turn in range(turns)]


def _loopback(node: Any) -> Any:
    """``open_call`` for the forwarding client's link to ``node``: a real ``AsyncNativeCall``
    whose connection is ``node``'s ``NativeConnection`` in this process."""
    from okapikv.client import native
    from okapikv.server.inbound import PeerIntake
    from okapikv.server.native import NativeConnection

    intake = PeerIntake(node)

    def open_call(receiver: Any) -> Any:
        wire = native._WIRES[native.VERSION]
        protocol = native._FrameProtocol(receiver, wire)
        server = NativeConnection(node, intake)
        server.connection_made(_Sink(0, protocol.data_received))  # type: ignore[arg-type]
        protocol.connection_made(_Sink(0, server.data_received))  # type: ignore[arg-type]
        assert protocol.transport is not None
        protocol.transport.write(wire.preamble)
        call = native.AsyncNativeCall.__new__(native.AsyncNativeCall)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        call.__dict__.update(_stub=None, _channel=None, _address="loopback", _tls=None, _timeout_s=5.0,
                             _receiver=receiver, _protocol=protocol, _grpc_call=None, ready=True,
                             chunk=native.NATIVE_CHUNK, _opening=done, packed=native.VERSION == 2)
        return call

    return open_call


def _forwarder(config: Any, node: Any) -> Any:
    """An ``AsyncClient`` of the DC, connected, its link to partition 1 a loopback (``_loopback``)."""
    from okapikv.client import aio
    from okapikv.client.topology import Topology

    client = aio.AsyncClient(config.servers[0].address, timeout_s=5.0)
    connections = client._connections
    topology = Topology(cluster_id=config.cluster_id, protocol=config.protocol, dc=0, dc_names=tuple(config.dcs),
                        num_partitions=2, addresses=("p0", "p1"), max_key_bytes=config.max_key_bytes,
                        max_value_bytes=config.max_value_bytes, max_message_bytes=config.max_message_bytes)
    open_call = _loopback(node)

    def link(_topology: Any, address: str) -> Any:
        holder = SimpleNamespace(address=address, stub=None, _pipeline=None)

        def pipeline() -> Any:
            if holder._pipeline is None or holder._pipeline.closed:
                holder._pipeline = aio._Pipeline(open_call, connections.max_batch, topology.batch_budget_bytes,
                                                 connections.tick_s)
            return holder._pipeline

        holder.pipeline = pipeline
        return holder

    connections.install(topology, link)
    client._state = aio.SessionState(topology.num_dcs)
    return client


async def _time_one(turns: int) -> dict[str, list[float]]:
    from okapikv.cluster.config.local import local_cluster
    from okapikv.resp.connection import RespConnection
    from okapikv.resp.limits import RespLimits
    from okapikv.resp.service import RespService
    from okapikv.server.node import PartitionNode

    config = local_cluster(dcs=("solo",), partitions=2, protocol="okapi", wan="off", base_port=1, host="127.0.0.1")
    here, there = PartitionNode(config, 0, 0), PartitionNode(config, 0, 1)
    here.start()
    there.start()
    service = RespService(here, RespLimits.from_config(config, here.core.config.max_read_keys), durable=False)
    await service.start("127.0.0.1", 0, None)  # makes the port's core batch; no client connects
    client = _forwarder(config, there)

    async def forwarder() -> Any:
        return client

    service.forwarder = forwarder  # type: ignore[method-assign]
    sinks = [_Sink(index) for index in range(CONNECTIONS)]
    connections = []
    for index in range(CONNECTIONS):
        connection = RespConnection(service)
        connection.connection_made(sinks[index])  # type: ignore[arg-type]
        connections.append(connection)
    keys = {partition: _keys(partition) for partition in (0, 1)}

    async def drive(reads: list[list[bytes]]) -> None:
        for turn in reads:
            expected = sum(sink.writes for sink in sinks) + CONNECTIONS
            for connection, data in zip(connections, turn, strict=True):
                connection.data_received(data)
            for _ in range(MAX_SPINS):
                await asyncio.sleep(0)
                if sum(sink.writes for sink in sinks) >= expected:
                    break
            else:
                raise RuntimeError("the commands of a turn got no replies")

    for command, partition in CASES:  # fills the keyspace, makes the forks, warms every path
        await drive(_turns(command, keys[partition], KEYS // CONNECTIONS, 0))
    for node in (here, there):  # no heartbeats, no stabilization rounds: only the commands' work counts
        assert node._timer is not None
        node._timer.cancel()
        node._timer = None
    import gc
    gc.freeze()  # as the server does once it serves
    passes: dict[str, list[float]] = {f"{command} p{partition}": [] for command, partition in CASES}
    for first in (1, 2, 3):
        for command, partition in CASES:
            reads = _turns(command, keys[partition], turns, first)
            started = time.process_time()
            await drive(reads)
            passes[f"{command} p{partition}"].append((time.process_time() - started) * 1e6 / (turns * CONNECTIONS))
    for connection in connections:
        connection.connection_lost(None)
    await service.close()
    await here.close()
    await there.close()
    return passes


def _instructions(tree: Path, case: str, turns: int) -> int:
    """The instructions of a run of ``--one --case CASE`` of ``tree`` under cachegrind."""
    environment = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONHASHSEED": "0"}
    result = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                             sys.executable, __file__, "--one", "--case", case, "--turns", str(turns)],
                            env=environment, check=True, capture_output=True, text=True)
    counts = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if counts is None:
        raise SystemExit(f"no instruction count from valgrind: {result.stderr[-500:]}")
    return int(counts.group(1).replace(",", ""))


def _run_tree(tree: Path, turns: int) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": str(tree / "src")}
    output = subprocess.run([sys.executable, __file__, "--one", "--turns", str(turns)],
                            env=environment, check=True, capture_output=True, text=True).stdout
    return {case: min(passes) for case, passes in json.loads(output)["us_per_command"].items()}


def _summary(figures: dict[str, float], unit: str) -> str:
    return (", ".join(f"{case} {value:,.1f}" for case, value in figures.items())
            + f" {unit}; forwarded / local: SET x{figures['SET p1'] / figures['SET p0']:.2f}, "
              f"GET x{figures['GET p1'] / figures['GET p0']:.2f}")


def main() -> int:
    parser = paired_parser(__doc__, rounds=4)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # --instructions: only this case's passes
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per command under valgrind instead of timing (--turns 40 is enough)")
    args = parser.parse_args()
    if args.case is not None:
        global CASES
        CASES = tuple(case for case in CASES if f"{case[0]} p{case[1]}" == args.case)
    if args.one:
        figures = asyncio.run(_time_one(args.turns))
        if args.case is None:
            print(json.dumps({"us_per_command": figures}))
            print(_summary({case: min(passes) for case, passes in figures.items()}, "us/command"), file=sys.stderr)
        return 0
    trees = {"change": args.change} if args.base is None else {"base": args.base, "change": args.change}
    if args.instructions:
        if shutil.which("valgrind") is None:
            parser.error("--instructions needs valgrind on the PATH (apt-get install valgrind)")
        for name, tree in trees.items():
            figures = {}
            for command, partition in CASES:
                case = f"{command} p{partition}"
                low, high = _instructions(tree, case, args.turns), _instructions(tree, case, 3 * args.turns)
                figures[case] = (high - low) / (3 * 2 * args.turns * CONNECTIONS)  # three passes each
            print(f"{name}: {_summary(figures, 'instructions/command')}", flush=True)
        return 0
    if args.base is None:
        parser.error("--base is required (or --one, or --instructions)")
    ratios: dict[str, list[float]] = {"SET": [], "GET": []}
    for index in range(args.rounds):
        order = ("base", "change") if index % 2 == 0 else ("change", "base")
        figures = {name: _run_tree(trees[name], args.turns) for name in order}
        for command in ratios:
            ratios[command].append(figures["change"][f"{command} p1"] / figures["base"][f"{command} p1"])
        print(f"round {index + 1}: base {_summary(figures['base'], 'us')}; change {_summary(figures['change'], 'us')}",
              flush=True)
    print("median change / base, forwarded: " + ", ".join(f"{command} x{statistics.median(values):.3f}"
                                                            for command, values in ratios.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
