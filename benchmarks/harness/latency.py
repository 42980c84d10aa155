"""Latency one operation at a time: sequential GETs and PUTs from one client, no concurrency.

What a script or the course's tools see: the blocking ``Client`` (over the native port or over the
gRPC stream), and an ``okapi client`` process driven line by line over its stdin/stdout. The first
tenth of each sequence warms up and is not counted; the figures are of the rest.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from okapikv.bench.engine.errors import BenchError

#: Keys the sequences cycle through (loaded first, so every GET finds a value).
LATENCY_KEYS = 1_000


@dataclass(frozen=True, slots=True)
class SequentialLatency:
    """One operation kind's latency over a sequence, in microseconds."""

    count: int
    mean_us: float
    p50_us: float
    p99_us: float

    @classmethod
    def of(cls, samples_ns: list[int]) -> SequentialLatency:
        ordered = sorted(samples_ns)
        count = len(ordered)
        return cls(
            count=count,
            mean_us=round(statistics.fmean(ordered) / 1000, 1),
            p50_us=round(ordered[count // 2] / 1000, 1),
            p99_us=round(ordered[min(count - 1, int(count * 0.99))] / 1000, 1),
        )


def measure_fdatasync(directory: Path, count: int) -> SequentialLatency:
    """The disk's own cost of what a durable group waits for: ``count`` appends of 100 bytes to a
    file in ``directory`` (the durable servers' file system), each followed by ``fdatasync``."""
    path = directory / f"okapi-fdatasync-{os.getpid()}"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    samples: list[int] = []
    try:
        for _ in range(count):
            started = time.perf_counter_ns()
            os.write(descriptor, b"x" * 100)
            os.fdatasync(descriptor)
            samples.append(time.perf_counter_ns() - started)
    finally:
        os.close(descriptor)
        path.unlink(missing_ok=True)
    return SequentialLatency.of(samples)


def _keys(count: int) -> list[bytes]:
    return [b"lat%05d" % index for index in range(count)]


def measure_client_latency(address: str, operations: int, native: bool = True) -> dict[str, SequentialLatency]:
    """Sequential GETs and PUTs through the blocking ``Client``, after a warm-up of each
    (``native=False``: over the gRPC stream instead of the native port)."""
    from okapikv.client.sync import Client

    keys = _keys(LATENCY_KEYS)
    value = b"v" * 8
    with Client(address, native=native) as client:
        for key in keys:
            client.put(key, value)
        results: dict[str, SequentialLatency] = {}
        for kind in ("get", "put"):
            samples: list[int] = []
            for number in range(operations + operations // 10):
                key = keys[number % LATENCY_KEYS]
                started = time.perf_counter_ns()
                if kind == "get":
                    client.get(key)
                else:
                    client.put(key, value)
                if number >= operations // 10:  # the first tenth warms up
                    samples.append(time.perf_counter_ns() - started)
            results[kind] = SequentialLatency.of(samples)
    return results


def measure_stdio_latency(address: str, operations: int) -> dict[str, SequentialLatency]:
    """The same through an ``okapi client`` process: write one command line, read its result line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "okapikv.cli", "client", "--connect", address],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
    )
    assert process.stdin is not None and process.stdout is not None
    keys = [key.decode() for key in _keys(LATENCY_KEYS)]

    def call(line: str) -> str:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(line + "\n")
        process.stdin.flush()
        answer = process.stdout.readline()
        if not answer:
            raise BenchError(f"okapi client exited: {process.stderr.read() if process.stderr else ''}")
        return answer

    try:
        results: dict[str, SequentialLatency] = {}
        for kind in ("GET", "PUT"):
            samples: list[int] = []
            for number in range(operations + operations // 10):
                key = keys[number % LATENCY_KEYS]
                line = f"GET {key}" if kind == "GET" else f"PUT {key} v{number:07d}"
                started = time.perf_counter_ns()
                answer = call(line)
                elapsed = time.perf_counter_ns() - started
                if answer.startswith("ERROR"):
                    raise BenchError(f"okapi client answered {answer.strip()!r} to {line!r}")
                if number >= operations // 10:
                    samples.append(elapsed)
            results[kind.lower()] = SequentialLatency.of(samples)
        call("STOP")
        return results
    finally:
        if process.stdin:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
