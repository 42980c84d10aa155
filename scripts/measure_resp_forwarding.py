"""What a hop inside the DC costs a RESP command: one connection to partition 0 of a 1 DC x 2
partition in-memory cluster, GET and SET one at a time on a key of partition 0 (run on the core of
the server holding the connection) and on a key of partition 1 (forwarded to its server).

A gateway process in front of the servers would put such a hop in front of every command; the
in-server port pays it only for keys of other partitions (docs/resp.md, "Where the port lives").

    python scripts/measure_resp_forwarding.py [--operations N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its benchmarks/ lab

from benchmarks.harness.clusters import start_local
from okapikv.core.partitioning import partition_of


def _key_of(partition: int) -> bytes:
    keys = (f"fwd-{index}".encode() for index in range(1000))
    return next(key for key in keys if partition_of(key, 2) == partition)


def _command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in args)


def _time(connection: socket.socket, request: bytes, operations: int) -> float:
    """Mean microseconds per command, one at a time (each reply is short: read once)."""
    started = time.perf_counter()
    for _ in range(operations):
        connection.sendall(request)
        if not connection.recv(65536):
            raise RuntimeError("the server closed the connection")
    return (time.perf_counter() - started) * 1e6 / operations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cluster = start_local(protocol="okapi", dcs=("local",), partitions=2, wan="off")
    try:
        stats = cluster.fetch_stats()
        address = next(server.address for server in cluster.servers if server.partition == 0)
        port = int(stats[address]["driver"]["resp_port"])
        local, remote = _key_of(0), _key_of(1)
        figures: dict[str, list[float]] = {}
        with socket.create_connection(("127.0.0.1", port)) as connection:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for key in (local, remote):
                connection.sendall(_command(b"SET", key, b"v"))
                connection.recv(65536)
            for _ in range(args.rounds):
                for name, request in (("GET, key of this server", _command(b"GET", local)),
                                      ("GET, key forwarded", _command(b"GET", remote)),
                                      ("SET, key of this server", _command(b"SET", local, b"v")),
                                      ("SET, key forwarded", _command(b"SET", remote, b"v"))):
                    figures.setdefault(name, []).append(_time(connection, request, args.operations))
        print(f"one RESP connection, one command at a time, {args.operations} x {args.rounds} rounds "
              "(median of the rounds' means, us per command)")
        for name, values in figures.items():
            print(f"  {name:<26} {statistics.median(values):8.1f}   rounds: "
                  + ", ".join(f"{value:.1f}" for value in values))
        print(json.dumps({name: round(statistics.median(values), 1) for name, values in figures.items()}))
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
