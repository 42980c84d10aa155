"""redis-benchmark against one RESP port of an okapikv cluster and against redis-server, paired,
with the per-second rates: what a Redis client that knows one address gets from a cluster.

For each shape (DCs x partitions, default 1x1, 1x2 and 2x2) and round the script starts a fresh
cluster as `okapi up` lays it out (durable by default, realistic WAN delays between DCs, one ``okapi
server`` process per partition) and runs the same ``redis-benchmark -t set,get -n N -c C -d 8 -r
10000`` against the RESP port of the first DC's partition 0 and against a redis-server (``--save ''
--appendonly no``), taking turns (the order rotates by round), so both share the machine's load of
the same minutes. Half the keys of a 2-partition cluster belong to the other partition and are
forwarded by the server holding the connection (docs/resp.md, "Forwarding"). ``--base DIR`` adds a
second okapikv tree (``DIR/src``, e.g. ``git archive REV src | tar -x -C DIR``) whose servers take
their turn in every round too: a paired comparison of two trees in the same minutes.
``--idle-after-ms`` sets the cluster's ``idle_after_ms`` (docs/protocol.md, "Idle pacing"): how long
its servers keep their busy heartbeat and stabilization periods after the last write.

Printed per shape, round, tree and test: both rates (requests / elapsed time, as redis-benchmark
reports them) and okapikv's ratio, okapikv's slowest second against its mean, and the CPU its
servers spent per request (user + system, all servers together, from ``/proc/PID/stat``: Linux),
which shows what forwarding costs next to serving a key on the server that holds the connection.
The per-second rates come from redis-benchmark's progress lines (one every 250 ms: the rate since
the previous one), four to a second; a last, incomplete second is left out (a test shorter than a
second has none: its slowest second is its mean). Each okapikv test also prints, per second, its
rate, the servers' CPU per request and the cores their event loops spent waiting for a core while
they could run (the scheduler's run-queue delay, ``/proc/PID/schedstat``: what sharing the cores
cost them), both read at every progress line; each server's share of both in the slowest second;
and the test's admission waits per server and, on the servers that take forwarded commands, the
requests per core call (the servers' Stats, read as each test ends): what the servers did while the
rate fell. The last line is the figures as JSON, every second's figures per server included.

    python scripts/resp_cluster_bench.py [--shapes 1x1,1x2,2x2] [--rounds 3] [--requests 40000]
                                         [--clients 50] [--in-memory] [--wan off] [--base DIR]
                                         [--idle-after-ms MS]

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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its benchmarks/ lab

from benchmarks.harness.clusters import RunningCluster, start_local
from benchmarks.harness.redis_ref import LocalRedis

TESTS = ("SET", "GET")
#: redis-benchmark prints one progress line every 250 ms (``showThroughput``)
SAMPLES_PER_SECOND = 4
RUN_TIMEOUT_S = 300.0
DC_NAMES = ("oregon", "virginia", "ireland")
_PROGRESS = re.compile(r"(\w+): rps=([\d.]+) \(overall")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_DONE = re.compile(r"(\d+) requests completed in ([\d.]+) seconds")
#: the Stats counters read per server at each test's start and end
COUNTERS = ("admission_waits", "client_requests", "pipeline_batches")


def cpu_by_process(pids: list[int]) -> list[float]:
    """For each process of ``pids``, the CPU seconds it used so far (user + system), then for each
    the seconds its main thread (the event loop) waited for a core while it could run."""
    used, waited = [], []
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        used.append((int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
        with open(f"/proc/{pid}/schedstat") as schedstat:
            waited.append(int(schedstat.read().split()[1]) / 1e9)
    return used + waited


@dataclass(slots=True)
class Probe:
    """What is read of okapikv's servers during a run: their CPU (``pids``) at every progress line,
    and their Stats counters (``stats``: server label -> counter -> value) as each test ends."""

    pids: list[int]
    stats: Callable[[], dict[str, dict[str, int]]]


@dataclass(frozen=True, slots=True)
class Phase:
    """One redis-benchmark test: its rate over the whole test and its per-second rates; with a
    probe, the servers' CPU per request, each server's share of a core in each second, and each
    server's Stats counters over the test (``COUNTERS``)."""

    rate: float
    seconds: list[float]
    cpu_us: float = 0.0
    server_load: list[list[float]] = field(default_factory=list)
    counters: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def slowest(self) -> float:
        return min(self.seconds) if self.seconds else self.rate

    @property
    def slowest_index(self) -> int | None:
        return self.seconds.index(min(self.seconds)) if self.seconds else None


@dataclass(slots=True)
class _Sample:
    rate: float
    at: float
    cpu: list[float]


def _deltas(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {server: {name: value - before.get(server, {}).get(name, 0) for name, value in counters.items()}
            for server, counters in after.items()}


def redis_benchmark(port: int, requests: int, clients: int, probe: Probe | None = None) -> dict[str, Phase]:
    """One run of ``redis-benchmark -t set,get`` against ``port``: test name -> figures (with
    ``probe``, the servers' too: ``Phase``)."""
    command = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", ",".join(TESTS).lower(),
               "-n", str(requests), "-c", str(clients), "-d", "8", "-r", "10000"]

    def read_cpu() -> list[float]:
        return cpu_by_process(probe.pids) if probe else []

    boundaries = [(time.monotonic(), read_cpu(), probe.stats() if probe else {})]
    samples: dict[str, list[_Sample]] = {test: [] for test in TESTS}
    elapsed: list[float] = []
    pending = ""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None
        while chunk := process.stdout.read1(65536):  # type: ignore[attr-defined]
            *lines, pending = re.split(r"[\r\n]", pending + chunk.decode(errors="replace"))
            for line in lines:
                progress = _PROGRESS.match(line.strip())
                if progress and progress[1] in samples:
                    samples[progress[1]].append(_Sample(float(progress[2]), time.monotonic(), read_cpu()))
                done = _DONE.search(line)
                if done:
                    elapsed.append(float(done[2]))
                    boundaries.append((time.monotonic(), read_cpu(), probe.stats() if probe else {}))
            if time.monotonic() > deadline:
                process.kill()
                raise SystemExit(f"{' '.join(command)} took longer than {RUN_TIMEOUT_S:.0f} s")
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {stderr[-300:]}")
    if len(elapsed) != len(TESTS):
        raise SystemExit(f"{' '.join(command)}: unexpected output {pending[-300:]!r}")
    phases = {}
    for index, (test, seconds) in enumerate(zip(TESTS, elapsed, strict=True)):
        start_at, start_cpu, start_stats = boundaries[index]
        end_at, end_cpu, end_stats = boundaries[index + 1]
        quarters = samples[test]
        while quarters and quarters[0].rate == 0.0:  # the line printed before the first reply
            start_at, start_cpu = quarters[0].at, quarters[0].cpu
            quarters.pop(0)
        per_second, load = [], []
        for first in range(0, len(quarters) // SAMPLES_PER_SECOND * SAMPLES_PER_SECOND, SAMPLES_PER_SECOND):
            window = quarters[first:first + SAMPLES_PER_SECOND]
            per_second.append(statistics.fmean(sample.rate for sample in window))
            if probe:
                before = quarters[first - 1] if first else _Sample(0.0, start_at, start_cpu)
                wall = max(window[-1].at - before.at, 1e-6)
                load.append([round((end - begin) / wall, 2)
                             for begin, end in zip(before.cpu, window[-1].cpu, strict=True)])
        servers = len(probe.pids) if probe else 0
        used = sum(end_cpu[:servers]) - sum(boundaries[index][1][:servers])
        cpu_us = used * 1e6 / requests if probe else 0.0
        phases[test] = Phase(requests / seconds, per_second, cpu_us, load, _deltas(start_stats, end_stats))
    return phases


@dataclass(frozen=True, slots=True)
class Round:
    shape: str
    round: int
    tree: str
    test: str
    okapi: float
    redis: float
    ratio: float
    okapi_slowest_second: float
    okapi_seconds: list[float]
    okapi_cpu_us: float
    servers: list[str]
    slowest_second_load: list[float]
    seconds_load: list[list[float]]  # per second: each server's cores used, then each one's waited for
    counters: dict[str, dict[str, int]]


def start_cluster(dcs: int, partitions: int, args: argparse.Namespace, source: Path | None) -> RunningCluster:
    """A fresh cluster of the shape, its servers running the tree at ``source`` (None: this one)."""
    saved = os.environ.get("PYTHONPATH")
    if source is not None:
        os.environ["PYTHONPATH"] = str(source / "src")
    try:
        settings = None if args.idle_after_ms is None else {"idle_after_ms": args.idle_after_ms}
        return start_local(protocol="okapi", dcs=DC_NAMES[:dcs], partitions=partitions,
                           wan=args.wan if dcs > 1 else "off", durable=not args.in_memory, settings=settings)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def measure_okapi(dcs: int, partitions: int, args: argparse.Namespace,
                  source: Path | None) -> tuple[list[str], dict[str, Phase]]:
    """One run against a fresh cluster: its servers' labels (``dc/pN``) and the run's figures."""
    cluster = start_cluster(dcs, partitions, args, source)
    try:
        servers = sorted(cluster.servers, key=lambda server: (server.dc, server.partition))
        labels = {server.address: f"{server.dc_name}/p{server.partition}" for server in servers}
        first = servers[0]
        port = int(cluster.fetch_stats()[first.address]["driver"]["resp_port"])

        def stats() -> dict[str, dict[str, int]]:
            return {labels[address]: {name: int(figures.get("driver", {}).get(name, 0)) for name in COUNTERS}
                    for address, figures in cluster.fetch_stats().items()}

        probe = Probe([server.pid for server in servers if server.pid is not None], stats)
        return [labels[server.address] for server in servers], redis_benchmark(port, args.requests, args.clients, probe)
    finally:
        cluster.stop()


def report(row: Round, phase: Phase) -> None:
    print(f"{row.shape} round {row.round} {row.tree} {row.test}: okapi {row.okapi:>7,}/s  redis {row.redis:>7,}/s  "
          f"ratio {row.ratio:.2f}  okapi slowest second {row.okapi_slowest_second:,}/s "
          f"({phase.slowest / phase.rate:.2f} of its mean), servers' CPU {row.okapi_cpu_us:.0f} us/request", flush=True)
    print(f"    per second (k/s): {' '.join(f'{rate / 1000:.1f}' for rate in phase.seconds) or '-'}")
    if phase.server_load:
        count = len(row.servers)
        print("    per second, servers' CPU us/request and cores waited for: " + " ".join(
            f"{sum(load[:count]) * 1e6 / max(rate, 1):.0f}/{sum(load[count:]):.2f}"
            for rate, load in zip(phase.seconds, phase.server_load, strict=True)))
    if row.slowest_second_load:
        count = len(row.servers)
        used, waited = row.slowest_second_load[:count], row.slowest_second_load[count:]
        print("    slowest second, each server's cores used / waiting for a core: " + ", ".join(
            f"{server} {share:.2f}/{wait:.2f}" for server, share, wait in zip(row.servers, used, waited, strict=True)))
    waits = ", ".join(f"{server} {counters['admission_waits']}" for server, counters in row.counters.items())
    calls = ", ".join(f"{server} {counters['client_requests'] / counters['pipeline_batches']:.1f}"
                      for server, counters in list(row.counters.items())[1:] if counters["pipeline_batches"])
    print(f"    admission waits: {waits}; native requests per core call: {calls or '-'}", flush=True)

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="1x1,1x2,2x2", help="DCs x partitions, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--in-memory", action="store_true", help="servers without a data directory")
    parser.add_argument("--wan", default="realistic", help="WAN delays between DCs: realistic or off")
    parser.add_argument("--idle-after-ms", type=float,
                        help="the cluster's idle_after_ms (default: the config's; 0: servers never go idle)")
    parser.add_argument("--base", type=Path, help="a second okapikv tree (DIR/src) measured in every round too")
    args = parser.parse_args()
    for program in ("redis-server", "redis-benchmark"):
        if shutil.which(program) is None:
            print(f"{program} is not installed (Debian: redis-server, redis-tools)", file=sys.stderr)
            return 1
    if args.base is not None and not (args.base / "src" / "okapikv").is_dir():
        parser.error(f"--base {args.base}: no src/okapikv in it")
    trees: dict[str, Path | None] = {"okapikv": None} if args.base is None else {"base": args.base, "change": None}
    shapes = [tuple(int(part) for part in shape.split("x")) for shape in args.shapes.split(",")]
    print(f"redis-benchmark -t set,get -n {args.requests} -c {args.clients} -d 8 -r 10000; okapikv "
          f"{'in memory' if args.in_memory else 'durable'}; load average before: "
          f"{' '.join(f'{load:.2f}' for load in os.getloadavg())}", flush=True)
    rows: list[Round] = []
    with LocalRedis() as redis:
        for dcs, partitions in shapes:
            shape = f"{dcs}x{partitions}"
            for number in range(args.rounds):
                systems = ["redis", *trees]
                shift = number % len(systems)
                okapi: dict[str, tuple[list[str], dict[str, Phase]]] = {}
                reference: dict[str, Phase] = {}
                for system in systems[shift:] + systems[:shift]:
                    if system == "redis":
                        reference = redis_benchmark(redis.port, args.requests, args.clients)
                    else:
                        okapi[system] = measure_okapi(dcs, partitions, args, trees[system])
                for tree, (servers, phases) in okapi.items():
                    for test in TESTS:
                        phase, base = phases[test], reference[test]
                        slowest = phase.slowest_index
                        row = Round(shape, number + 1, tree, test, round(phase.rate), round(base.rate),
                                    round(phase.rate / base.rate, 3), round(phase.slowest),
                                    [round(rate) for rate in phase.seconds], round(phase.cpu_us, 1), servers,
                                    phase.server_load[slowest] if slowest is not None and phase.server_load else [],
                                    phase.server_load,
                                    phase.counters)
                        rows.append(row)
                        report(row, phase)
                        print("    redis per second (k/s): "
                              f"{' '.join(f'{rate / 1000:.1f}' for rate in base.seconds) or '-'}")
    print(f"load average after: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    summarize(rows, list(trees))
    print(json.dumps([asdict(row) for row in rows]))
    return 0


def summarize(rows: list[Round], trees: list[str]) -> None:
    for shape in dict.fromkeys(row.shape for row in rows):
        for test in TESTS:
            cpu: dict[str, list[float]] = {}
            for tree in trees:
                mine = [row for row in rows if row.shape == shape and row.test == test and row.tree == tree]
                cpu[tree] = [row.okapi_cpu_us for row in mine]
                print(f"{shape} {test} {tree}: median ratio {statistics.median(row.ratio for row in mine):.2f} "
                      f"(rounds {', '.join(f'{row.ratio:.2f}' for row in mine)}); slowest second / mean "
                      f"{min(row.okapi_slowest_second / row.okapi for row in mine):.2f} (rounds "
                      f"{', '.join(f'{row.okapi_slowest_second / row.okapi:.2f}' for row in mine)}); servers' CPU "
                      f"{statistics.median(cpu[tree]):.0f} us/request (rounds "
                      f"{', '.join(f'{value:.0f}' for value in cpu[tree])})")
            if len(trees) == 2:
                pairs = [change / base for base, change in zip(cpu["base"], cpu["change"], strict=True) if base]
                print(f"{shape} {test}: servers' CPU per request, change / base, median of the rounds "
                      f"x{statistics.median(pairs):.3f} ({', '.join(f'{ratio:.2f}' for ratio in pairs)})")


if __name__ == "__main__":
    raise SystemExit(main())
