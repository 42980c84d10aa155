"""``okapi bench --suite resp``: redis-benchmark against okapikv's RESP port and against redis-server,
side by side in the same run.

One okapikv cluster of one DC and one partition (in memory, the RESP port of its one server) and one
redis-server started here (``--save '' --appendonly no``, on a port chosen like every other bench
port), measured by the same ``redis-benchmark -t set,get,incr -n N -c C -P P`` for C in ``--clients``
(default 1 and 50) and P in 1 and 16. The two systems take turns at each (C, P), so the VM's drift
over the run touches both alike; the report gives each one's requests per second and p50 latency
and okapikv's share of Redis's throughput.

What it compares: a Python server that stamps, stores and (with more DCs) replicates every write as
one causal session per connection, against a C server that keeps a dict in memory. redis-benchmark
runs on the same cores as the server it measures. Needs ``redis-server`` and ``redis-benchmark``
(Debian: redis-server, redis-tools); without them the suite says so and measures nothing.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.clusters import start_local
from benchmarks.harness.harness import Bench
from benchmarks.harness.options import BenchOptions
from benchmarks.harness.redis_ref import LocalRedis
from okapikv.bench.engine.errors import BenchError
from okapikv.bench.engine.report import Section

CLIENTS = (1, 50)
PIPELINES = (1, 16)
TESTS = ("SET", "GET", "INCR")
TESTS_ARGUMENT = ",".join(TESTS).lower()
REQUESTS = 100_000
QUICK_REQUESTS = 10_000
RUN_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Figures:
    """One redis-benchmark test's figures, as its ``--csv`` output gives them."""

    requests_per_s: float
    p50_ms: float


@dataclass(frozen=True, slots=True)
class Compared:
    """One test at one (C, P): both systems' figures and okapikv's share of Redis's throughput."""

    okapi_ops_s: float
    redis_ops_s: float
    okapi_p50_ms: float
    redis_p50_ms: float
    ratio: float | None


@dataclass(frozen=True, slots=True)
class RespRow:
    """One (C, P) point: results.json's ``resp`` holds one per point, ``to_dict``'s shape."""

    command: str
    clients: int
    pipeline: int
    requests: int
    tests: dict[str, Compared]  # by test name (TESTS), written as lowercase keys of the row

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "clients": self.clients, "pipeline": self.pipeline,
                "requests": self.requests,
                **{test.lower(): dataclasses.asdict(compared) for test, compared in self.tests.items()}}


def unavailable_reason() -> str | None:
    for program in ("redis-server", "redis-benchmark"):
        if shutil.which(program) is None:
            return f"{program} is not installed (Debian: apt-get install redis-server redis-tools)"
    return None


def redis_benchmark(port: int, *, clients: int, pipeline: int, requests: int,
                    host: str = "127.0.0.1") -> dict[str, Figures]:
    """One ``redis-benchmark -t set,get,incr`` run: test name -> figures (its ``--csv`` output). INCR
    is okapikv's counter (docs/protocol.md, "Counters"): one key, a CRDT update per request."""
    command = ["redis-benchmark", "-h", host, "-p", str(port), "-t", TESTS_ARGUMENT, "-n", str(requests),
               "-c", str(clients), "-P", str(pipeline), "--csv"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(command)} took longer than {RUN_TIMEOUT_S:.0f} s") from None
    figures: dict[str, Figures] = {}
    for line in done.stdout.splitlines():
        fields = [field.strip('"') for field in line.strip().split(",")]
        if len(fields) >= 5 and fields[0] in TESTS:
            figures[fields[0]] = Figures(float(fields[1]), float(fields[4]))
    if done.returncode != 0 or set(figures) != set(TESTS):
        raise BenchError(f"{' '.join(command)} failed ({done.returncode}): {(done.stderr or done.stdout)[-300:]}")
    return figures


def command_line(clients: int, pipeline: int, requests: int) -> str:
    return f"redis-benchmark -t {TESTS_ARGUMENT} -n {requests} -c {clients} -P {pipeline}"


def run(bench: Bench) -> None:
    o = bench.options
    reason = unavailable_reason()
    if reason is not None:
        bench.results.note(f"resp suite skipped: {reason}")
        bench.ui.message(f"[yellow]resp suite skipped:[/yellow] {reason}")
        return
    requests = QUICK_REQUESTS if o.quick else REQUESTS
    clients = o.clients if o.clients_given else CLIENTS
    bench.ui.message("starting okapi (1 DC x 1 partition, in memory) and redis-server")
    cluster = start_local(protocol="okapi", dcs=("local",), partitions=1, wan="off")
    try:
        stats = next(iter(cluster.fetch_stats().values()), {})
        okapi_port = int(stats.get("driver", {}).get("resp_port", 0))
        if not okapi_port:
            raise BenchError("the okapi server serves no RESP port")
        with LocalRedis() as redis_server:
            for client_count in clients:
                for pipeline in PIPELINES:
                    row = _measure_pair(bench, okapi_port, redis_server.port, client_count, pipeline, requests)
                    bench.results.resp.append(row.to_dict())
    finally:
        cluster.stop()


def _measure_pair(bench: Bench, okapi_port: int, redis_port: int, clients: int, pipeline: int,
                  requests: int) -> RespRow:
    started = time.monotonic()
    label = command_line(clients, pipeline, requests)
    okapi = redis_benchmark(okapi_port, clients=clients, pipeline=pipeline, requests=requests)
    redis = redis_benchmark(redis_port, clients=clients, pipeline=pipeline, requests=requests)
    tests: dict[str, Compared] = {}
    parts = []
    for test in TESTS:
        ratio = okapi[test].requests_per_s / redis[test].requests_per_s if redis[test].requests_per_s else None
        tests[test] = Compared(okapi[test].requests_per_s, redis[test].requests_per_s, okapi[test].p50_ms,
                               redis[test].p50_ms, None if ratio is None else round(ratio, 4))
        parts.append(f"{test} okapi {okapi[test].requests_per_s:,.0f} / redis {redis[test].requests_per_s:,.0f} "
                     f"ops/s ({'-' if ratio is None else f'{ratio:.1%}'})")
    bench.ui.finish_run(f"  c={clients:<3} P={pipeline:<3} " + "; ".join(parts))
    bench.results.add_time("resp_s", time.monotonic() - started)
    return RespRow(label, clients, pipeline, requests, tests)


def planned(options: BenchOptions) -> int:
    return len(options.clients if options.clients_given else CLIENTS) * len(PIPELINES)


def csv_files(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """resp.csv: one flat row per (C, P) and test."""
    return {"resp.csv": [{"command": row["command"], "clients": row["clients"], "pipeline": row["pipeline"],
                          "requests": row["requests"], "test": test, **row[test.lower()]}
                         for row in rows for test in TESTS if test.lower() in row]}


def render(rows: list[dict[str, Any]]) -> list[str]:
    """The report's section: one line per (C, P) and test."""
    lines = ["## redis-benchmark: okapikv's RESP port against redis-server", "",
             "Same `redis-benchmark` command against both, taking turns at each line; 1 DC x 1 partition, "
             "in memory; redis-server with `--save '' --appendonly no`. Requests per second and p50 latency "
             "as redis-benchmark reports them.", "",
             "| command | test | okapikv ops/s | redis ops/s | okapikv / redis | okapikv p50 ms | redis p50 ms |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        for test in (test for test in TESTS if test.lower() in row):  # results from before INCR have none
            figures = row[test.lower()]
            ratio = figures["ratio"]
            lines.append(f"| `{row['command']}` | {test} | {figures['okapi_ops_s']:,.0f} "
                         f"| {figures['redis_ops_s']:,.0f} | {'-' if ratio is None else f'{ratio:.1%}'} "
                         f"| {figures['okapi_p50_ms']:.3f} | {figures['redis_p50_ms']:.3f} |")
    return lines + [""]


SECTION = Section("resp", render, csv_files)
