"""Measure the RESP port's two request parsers (``okapikv.resp.parser``) on the same input.

Prints microseconds per command for redis-benchmark's requests (``SET key:<12 digits> xxx`` and
``GET key:<12 digits>``, fed 16 at a time as with ``-P 16``, and one at a time as with ``-P 1``),
and for a 100-key MGET. With ``--end-to-end`` it also runs one in-memory server in this process,
once with each parser, and ``redis-benchmark -t set,get -n N -c 50 -P 16`` against it (the two
take turns, ``--repeat`` times): what the parser is worth to a whole server. docs/resp.md quotes
the figures.

    python scripts/measure_resp_parsers.py [--rounds N] [--end-to-end [--requests N] [--repeat R]]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

from okapikv.resp import parser as parser_module
from okapikv.resp.limits import RespLimits
from okapikv.resp.parser import HiredisParser, PythonParser, hiredis_available


def _encode(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in args)


def _cases() -> dict[str, tuple[list[bytes], int]]:
    """name -> (reads, commands in them)"""
    sets = [_encode(b"SET", b"key:%012d" % index, b"xxx") for index in range(16)]
    gets = [_encode(b"GET", b"key:%012d" % index) for index in range(16)]
    mget = _encode(b"MGET", *(b"key:%012d" % index for index in range(100)))
    return {
        "SET, 16 per read (-P 16)": ([b"".join(sets)], 16),
        "GET, 16 per read (-P 16)": ([b"".join(gets)], 16),
        "SET, 1 per read (-P 1)": (sets, 16),
        "MGET of 100 keys": ([mget], 1),
    }


def measure(parser_type: type[PythonParser] | type[HiredisParser], reads: list[bytes], rounds: int) -> float:
    limits = RespLimits(max_bulk_bytes=1 << 20, max_arguments=10_001)
    parser = parser_type(limits)
    started = time.perf_counter()
    for _ in range(rounds):
        for data in reads:
            parser.feed(data)
    return time.perf_counter() - started


def end_to_end(requests: int, repeat: int) -> None:
    """redis-benchmark against an in-process server, with hiredis and with the pure parser."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
    from integration_support import free_port_range

    from okapikv.cluster.config import local_cluster
    from okapikv.serve.app import run, serve

    def once(use_hiredis: bool) -> dict[str, float]:
        base = free_port_range(2)
        config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=base, resp_base_port=base + 1)
        parser_module.hiredis_available = (lambda: use_hiredis) if use_hiredis else (lambda: False)
        figures: dict[str, float] = {}

        async def main() -> None:
            stop = asyncio.Event()
            server = asyncio.create_task(serve(config, 0, 0, stop=stop))
            await asyncio.sleep(1.0)
            process = await asyncio.create_subprocess_exec(
                "redis-benchmark", "-p", str(base + 1), "-t", "set,get", "-n", str(requests), "-c", "50", "-P", "16",
                "--csv", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            output, _ = await process.communicate()
            for line in output.decode().splitlines():
                fields = [field.strip('"') for field in line.split(",")]
                if fields[0] in ("SET", "GET"):
                    figures[fields[0]] = float(fields[1])
            stop.set()
            await server

        run(main())
        return figures

    print(f"\nredis-benchmark -t set,get -n {requests} -c 50 -P 16 against one in-memory server (requests/s)")
    for round_number in range(repeat):
        for use_hiredis in (True, False):
            figures = once(use_hiredis)
            print(f"  round {round_number + 1} {'hiredis' if use_hiredis else 'python ':<8} "
                  + "  ".join(f"{test} {value:>9,.0f}" for test, value in figures.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--end-to-end", action="store_true")
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    types: list[type[PythonParser] | type[HiredisParser]] = [PythonParser]
    if hiredis_available():
        types.append(HiredisParser)
    else:
        print("hiredis is not installed: pip install hiredis (or pip install -e '.[resp]')")
    print(f"{'input':<28}" + "".join(f"{t.__name__:>16}" for t in types) + "   (us per command)")
    for name, (reads, commands) in _cases().items():
        rounds = max(1, args.rounds // commands) if commands > 1 else max(1, args.rounds // 50)
        figures = [measure(t, reads, rounds) * 1e6 / (rounds * commands) for t in types]
        print(f"{name:<28}" + "".join(f"{figure:>16.2f}" for figure in figures))
    if args.end_to_end and hiredis_available():
        end_to_end(args.requests, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
