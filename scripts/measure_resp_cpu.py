"""The CPU a RESP request costs the servers, with every server of a 1 DC cluster in this one process.

The servers of ``1 x PARTITIONS`` (in memory, or durable in a temporary data directory with
``--durable``; okapikv's uvloop when installed) run in this process's event loop, and
``redis-benchmark -t set -n N -c 50 -d 8 -r 10000`` (then ``-t get``) runs against partition 0's
RESP port; printed per test: this process's user and system CPU per request
(``getrusage``) and redis-benchmark's summary. With 2 partitions half the keys are forwarded.

In one process there is no second process to wake for a forwarded command, and on a shared machine
the figure moves less than a rate does: it is for comparing two trees of the code in the same
minutes (run each in turn with its ``PYTHONPATH``), not for what a deployment gets
(``scripts/resp_cluster_bench.py`` runs one process per server, docs/resp.md "Forwarding").

    python scripts/measure_resp_cpu.py [--partitions 2] [--requests 40000] [--durable]

Needs ``redis-benchmark`` (Debian: redis-tools).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import sys
import tempfile

from okapikv.cluster.config import local_cluster
from okapikv.cluster.ports import free_port_block
from okapikv.serve.app import serve
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

BENCH_TIMEOUT_S = 300.0


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


async def _bench(port: int, test: str, requests: int) -> str:
    process = await asyncio.create_subprocess_exec(
        "redis-benchmark", "-p", str(port), "-t", test, "-n", str(requests), "-c", "50", "-d", "8", "-r", "10000",
        "-q", stdout=asyncio.subprocess.PIPE)
    output, _ = await asyncio.wait_for(process.communicate(), timeout=BENCH_TIMEOUT_S)
    lines = output.decode(errors="replace").replace("\r", "\n").strip().splitlines()
    return lines[-1] if lines else "(no output)"


async def _measure(partitions: int, requests: int, data_dir: str | None) -> None:
    import grpc.aio

    config = local_cluster(dcs=("solo",), partitions=partitions, wan="off", base_port=free_port_block(partitions))
    stop = asyncio.Event()
    servers = [asyncio.create_task(serve(config, 0, partition, stop=stop,
                                         data_dir=None if data_dir is None else f"{data_dir}/p{partition}"))
               for partition in range(partitions)]
    try:
        async with grpc.aio.insecure_channel(config.servers[0].address) as channel:
            await asyncio.wait_for(channel.channel_ready(), timeout=30)
            stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
            port = 0
            for _ in range(300):  # the RESP port listens once the server has started it (0 until then)
                stats = json.loads((await stub.Stats(pb.StatsRequest(), timeout=10)).json)
                port = int(stats["driver"].get("resp_port", 0))
                if port:
                    break
                await asyncio.sleep(0.1)
            if not port:
                raise SystemExit("partition 0's RESP port did not start within 30 s")
        await _bench(port, "set,get", requests // 4)  # warm: connections, the forwarding client, keys
        for test in ("set", "get"):
            before = _cpu()
            summary = await _bench(port, test, requests)
            after = _cpu()
            user, system = ((end - start) * 1e6 / requests for start, end in zip(before, after, strict=True))
            shape = f"1x{partitions}{' durable' if data_dir else ''}"
            print(f"{shape} {test.upper()}: user {user:.1f} + system {system:.1f} us/request; {summary}", flush=True)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*servers), timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--durable", action="store_true", help="servers with a data directory (a temporary one)")
    args = parser.parse_args()
    if shutil.which("redis-benchmark") is None:
        print("redis-benchmark is not installed (Debian: redis-tools)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="okapi-resp-cpu-") as data_dir:
        measure = _measure(args.partitions, args.requests, data_dir if args.durable else None)
        try:
            import uvloop
        except ImportError:
            asyncio.run(measure)
        else:
            uvloop.run(measure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
