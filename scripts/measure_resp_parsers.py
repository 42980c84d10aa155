"""Measure the RESP port's two request parsers (``okapikv.resp.parser``) on the same input.

Prints microseconds per command for redis-benchmark's requests (``SET key:<12 digits> xxx`` and
``GET key:<12 digits>``, fed 16 at a time as with ``-P 16``, and one at a time as with ``-P 1``),
and for a 100-key MGET. docs/resp.md quotes the figures.

    python scripts/measure_resp_parsers.py [--rounds N]
"""

from __future__ import annotations

import argparse
import time

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
