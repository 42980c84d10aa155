"""redis-benchmark against one RESP port of an okapikv cluster and against redis-server, paired,
with the per-second rates: what a Redis client that knows one address gets from a cluster.

For each shape (DCs x partitions, default 1x1, 1x2 and 2x2) the script starts a cluster as `okapi
up` lays it out (durable by default, realistic WAN delays between DCs, one ``okapi server`` process
per partition) and a redis-server (``--save '' --appendonly no``), then runs the same
``redis-benchmark -t set,get -n N -c C -d 8 -r 10000`` against the RESP port of the first DC's
partition 0 and against redis-server, taking turns (the order alternates by round), so both share
the machine's load of the same minutes. Half the keys of a 2-partition cluster belong to the other
partition and are forwarded by the server holding the connection (docs/resp.md, "Forwarding").

Printed per shape, round and test: both rates (requests / elapsed time, as redis-benchmark
reports them) and okapikv's ratio, okapikv's slowest second against its mean, and the CPU its
servers spent per request (user + system, all servers together, from ``/proc/PID/stat``: Linux),
which shows what forwarding costs next to serving a key on the server that holds the connection.
The per-second rates come from redis-benchmark's progress lines (one every 250 ms: the rate since
the previous one), four to a second; a last, incomplete second is left out (a test shorter than a
second has none: its slowest second is its mean). The last line is the figures as JSON.

    python scripts/resp_cluster_bench.py [--shapes 1x1,1x2,2x2] [--rounds 3] [--requests 40000]
                                         [--clients 50] [--in-memory] [--wan off]

Needs ``redis-server`` and ``redis-benchmark`` (Debian: redis-server, redis-tools).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its benchmarks/ lab

from benchmarks.harness.clusters import start_local
from benchmarks.harness.redis_ref import LocalRedis

TESTS = ("SET", "GET")
#: redis-benchmark prints one progress line every 250 ms (``showThroughput``)
SAMPLES_PER_SECOND = 4
RUN_TIMEOUT_S = 300.0
DC_NAMES = ("oregon", "virginia", "ireland")
_PROGRESS = re.compile(r"(\w+): rps=([\d.]+) \(overall")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_DONE = re.compile(r"(\d+) requests completed in ([\d.]+) seconds")


@dataclass(frozen=True, slots=True)
class Phase:
    """One redis-benchmark test: its rate over the whole test and its per-second rates."""

    rate: float
    seconds: list[float]
    cpu_us: float = 0.0  # the servers' CPU per request (okapikv's runs only)

    @property
    def slowest(self) -> float:
        return min(self.seconds) if self.seconds else self.rate


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of the processes ``pids`` so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def redis_benchmark(port: int, requests: int, clients: int, pids: list[int] | None = None) -> dict[str, Phase]:
    """One run of ``redis-benchmark -t set,get`` against ``port``: test name -> figures; with
    ``pids``, each test's CPU of those processes per request (read as each test ends)."""
    command = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", ",".join(TESTS).lower(),
               "-n", str(requests), "-c", str(clients), "-d", "8", "-r", "10000"]
    output = ""
    cpu = [cpu_seconds(pids)] if pids else []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None
        while chunk := process.stdout.read1(65536):  # type: ignore[attr-defined]
            finished_before = len(_DONE.findall(output))
            output += chunk.decode(errors="replace")
            if pids and len(_DONE.findall(output)) > finished_before:
                cpu.append(cpu_seconds(pids))
            if time.monotonic() > deadline:
                process.kill()
                raise SystemExit(f"{' '.join(command)} took longer than {RUN_TIMEOUT_S:.0f} s")
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {stderr[-300:]}")
    samples: dict[str, list[float]] = {}
    for line in output.replace("\r", "\n").splitlines():
        progress = _PROGRESS.match(line.strip())
        if progress and progress[1] in TESTS:
            samples.setdefault(progress[1], []).append(float(progress[2]))
    elapsed = [float(seconds) for _, seconds in _DONE.findall(output)]
    if len(elapsed) != len(TESTS):
        raise SystemExit(f"{' '.join(command)}: unexpected output {output[-300:]!r}")
    phases = {}
    for index, (test, seconds) in enumerate(zip(TESTS, elapsed, strict=True)):
        quarter = samples.get(test, [])
        while quarter and quarter[0] == 0.0:  # the line printed before the first reply
            quarter.pop(0)
        whole = len(quarter) // SAMPLES_PER_SECOND * SAMPLES_PER_SECOND
        per_second = [statistics.fmean(quarter[i:i + SAMPLES_PER_SECOND]) for i in range(0, whole, SAMPLES_PER_SECOND)]
        cpu_us = (cpu[index + 1] - cpu[index]) * 1e6 / requests if len(cpu) > index + 1 else 0.0
        phases[test] = Phase(requests / seconds, per_second, cpu_us)
    return phases


@dataclass(frozen=True, slots=True)
class Round:
    shape: str
    round: int
    test: str
    okapi: float
    redis: float
    ratio: float
    okapi_slowest_second: float
    okapi_seconds: list[float]
    okapi_cpu_us: float


def measure_shape(dcs: int, partitions: int, args: argparse.Namespace, redis: LocalRedis) -> list[Round]:
    shape = f"{dcs}x{partitions}"
    cluster = start_local(protocol="okapi", dcs=DC_NAMES[:dcs], partitions=partitions,
                          wan=args.wan if dcs > 1 else "off", durable=not args.in_memory)
    rows = []
    try:
        first = next(server for server in cluster.servers if server.dc == 0 and server.partition == 0)
        port = int(cluster.fetch_stats()[first.address]["driver"]["resp_port"])
        for number in range(args.rounds):
            figures: dict[str, dict[str, Phase]] = {}
            order = ("okapi", "redis") if number % 2 == 0 else ("redis", "okapi")
            for system in order:
                if system == "redis":
                    figures[system] = redis_benchmark(redis.port, args.requests, args.clients)
                else:
                    figures[system] = redis_benchmark(port, args.requests, args.clients, cluster.pids())
            for test in TESTS:
                okapi, reference = figures["okapi"][test], figures["redis"][test]
                row = Round(shape, number + 1, test, round(okapi.rate), round(reference.rate),
                            round(okapi.rate / reference.rate, 3), round(okapi.slowest),
                            [round(rate) for rate in okapi.seconds], round(okapi.cpu_us, 1))
                rows.append(row)
                print(f"{shape} round {row.round} {test}: okapi {row.okapi:>7,}/s  redis {row.redis:>7,}/s  "
                      f"ratio {row.ratio:.2f}  okapi slowest second {row.okapi_slowest_second:,}/s "
                      f"({okapi.slowest / okapi.rate:.2f} of its mean), servers' CPU {row.okapi_cpu_us:.0f} us/request",
                      flush=True)
    finally:
        cluster.stop()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="1x1,1x2,2x2", help="DCs x partitions, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--in-memory", action="store_true", help="servers without a data directory")
    parser.add_argument("--wan", default="realistic", help="WAN delays between DCs: realistic or off")
    args = parser.parse_args()
    for program in ("redis-server", "redis-benchmark"):
        if shutil.which(program) is None:
            print(f"{program} is not installed (Debian: redis-server, redis-tools)", file=sys.stderr)
            return 1
    shapes = [tuple(int(part) for part in shape.split("x")) for shape in args.shapes.split(",")]
    print(f"redis-benchmark -t set,get -n {args.requests} -c {args.clients} -d 8 -r 10000; okapikv "
          f"{'in memory' if args.in_memory else 'durable'}; load average before: "
          f"{' '.join(f'{load:.2f}' for load in os.getloadavg())}", flush=True)
    rows: list[Round] = []
    with LocalRedis() as redis:
        for dcs, partitions in shapes:
            rows += measure_shape(dcs, partitions, args, redis)
    print(f"load average after: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    for shape in dict.fromkeys(row.shape for row in rows):
        for test in TESTS:
            mine = [row for row in rows if row.shape == shape and row.test == test]
            print(f"{shape} {test}: median ratio {statistics.median(row.ratio for row in mine):.2f} "
                  f"(rounds {', '.join(f'{row.ratio:.2f}' for row in mine)}); slowest second / mean "
                  f"{min(row.okapi_slowest_second / row.okapi for row in mine):.2f}; servers' CPU "
                  f"{statistics.median(row.okapi_cpu_us for row in mine):.0f} us/request")
    print(json.dumps([asdict(row) for row in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
