"""What `okapi bench` runs: a single configurable benchmark, the course suite, the paper suite.

- custom (no ``--suite``): one workload (YCSB a-f or the paper's ``rotx``) at each ``--clients``
  count, for each of ``--protocols`` on a fresh cluster (or once against ``--connect``); or
  ``memory``: the resident memory per key of one partition server after loading ``--records`` keys.
- ``course``: the course service's measurements (``seeds/kvstore-service.md``): YCSB A-F with one
  client, then A, C and E with 1, 10, 25, 40, 55, 70 and 85 clients, with a Redis reference line
  driven by the same load generator when redis-server and redis-py are installed.
- ``scaling``: peak RO-TX + PUT throughput over 1, 2, 4 .. partitions per DC (``scaling.py``).
- ``resp``: redis-benchmark against okapikv's RESP port and against redis-server (``resp.py``).
- ``paper``: the paper's experiments (Okapi, section 5) at this machine's scale, for each
  protocol under a clock skew (10 ms unless ``--clock-skew-ms`` says otherwise) and the emulated
  WAN between the paper's three regions: RO-TX over p = 1, 2, 4 .. N partitions (Figures 4, 5),
  the write-ratio sweep, scalability over 1 .. N partitions (Figure 3), remote update visibility
  per DC pair, and replication/stabilization traffic.

``--quick`` keeps every suite under a minute on a 2-core machine (CI runs both): fewer records,
sub-second windows, fewer sweep points, all still measured the same way.

Every cluster is started fresh per protocol (and per partition count) and stopped afterwards,
whatever happens; a failure of one system is recorded in the results and the suite goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from okapikv.bench.clusters import RunningCluster, connect, start_local
from okapikv.bench.driver import BenchError, RunSpec, WorkerPool, default_processes
from okapikv.bench.generators import format_key
from okapikv.bench.metrics import total_cpu_seconds
from okapikv.bench.progress import ProgressUI
from okapikv.bench.redis_ref import LocalRedis, unavailable_reason
from okapikv.bench.results import Results, run_record
from okapikv.bench.targets import TargetSpec
from okapikv.bench.visibility import measure_visibility, summarize, wait_until_visible
from okapikv.bench.workloads import WorkloadConfig
from okapikv.core.deployment import PAPER_DC_NAMES

PAPER_DCS = PAPER_DC_NAMES
#: Systems that are a protocol with non-default cluster settings: name -> (protocol, settings).
#: ``okapi-piggyback``: the USV rides on the GSV round (the paper's untried optimization, section 5);
#: ``okapi-bounded``: servers hold client batches while remote visibility exceeds the UST bound.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "okapi-piggyback": ("okapi", {"piggyback_usv": True}),
    "okapi-bounded": ("okapi", {"bounded_visibility": True}),
}


def protocol_of(system: str) -> tuple[str, dict[str, Any]]:
    """The protocol a system name runs and the cluster settings it changes (``VARIANTS``)."""
    return VARIANTS.get(system, (system, {}))
COURSE_CLIENTS = (1, 10, 25, 40, 55, 70, 85)
COURSE_CLIENTS_QUICK = (1, 10, 40, 85)
PAPER_SKEW_MS = 10.0
LOAD_SESSIONS = 32
LOAD_TIMEOUT_S = 300.0
MEMORY = "memory"  # --workload memory: RSS per key of one loaded server (run_memory)
#: Sessions loading the memory workload: more in flight means bigger pipelined batches, and 1M keys
#: load in about a minute on 2 cores.
MEMORY_LOAD_SESSIONS = 128
MEMORY_SETTLE_S = 2.0


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """The resolved command line (``cli.options_from_args``)."""

    suite: str | None = None
    workload: str = "a"
    protocols: tuple[str, ...] = ("okapi",)
    clients: tuple[int, ...] = (1,)
    clients_given: bool = False
    duration_s: float = 5.0
    warmup_s: float = 1.0
    dcs: tuple[str, ...] | None = None
    partitions: int = 1
    partitions_given: bool = False
    clock_skew_ms: float | None = None
    rotx_partitions: int = 2
    write_ratio: float | None = None
    records: int = 10_000
    key_bytes: int = 8
    value_bytes: int = 8
    connect: str | None = None
    quick: bool = False
    out: Path = Path("bench-out")
    processes: int | None = None
    wan: str | float = "realistic"
    seed: int = 1
    timeout_s: float = 10.0
    visibility_samples: int | None = None
    redis: bool = True
    progress: bool = True
    keep_cpus_busy: bool = False
    grpc_only: bool = False
    load: str = "client"  # okapi load generator: client (async client sessions) | lean (okapikv.bench.lean)

    def scaled(self) -> BenchOptions:
        """``--quick``: sub-second windows and a small data set (CI must finish in a minute)."""
        if not self.quick:
            return self
        return replace(self, duration_s=min(self.duration_s, 0.5), warmup_s=min(self.warmup_s, 0.2),
                       records=min(self.records, 1_000))


@dataclass(slots=True)
class SystemUnderTest:
    """What a run measures: the target description plus what is needed to read its stats and CPU."""

    system: str  # okapi | cure | gentlerain | eventual | redis
    target: TargetSpec
    cluster: RunningCluster | None
    pids: list[int]
    dcs: int
    partitions: int
    clock_skew_ms: float


class Bench:
    """State shared by the runs of one invocation: options, results, load processes, progress."""

    def __init__(self, options: BenchOptions, results: Results, ui: ProgressUI, pool: WorkerPool) -> None:
        self.options = options
        self.results = results
        self.ui = ui
        self.pool = pool
        self.failures = 0
        # One event loop for every async step of the parent (visibility probes, replication
        # checks): grpc.aio binds to the first loop it sees, so asyncio.run per step would break.
        self.runner = asyncio.Runner()

    def close(self) -> None:
        self.runner.close()

    # ------------------------------------------------------------------ systems

    @contextlib.contextmanager
    def okapi(self, protocol: str, dcs: tuple[str, ...], partitions: int, skew_ms: float) -> Iterator[SystemUnderTest]:
        options = self.options
        started = time.monotonic()
        if options.connect:
            cluster = connect(options.connect, options.timeout_s)
        else:
            self.ui.message(f"starting {protocol}: {len(dcs)} DC x {partitions} partition(s), skew {skew_ms:g} ms, "
                            f"wan {options.wan}")
            name, settings = protocol_of(protocol)
            cluster = start_local(protocol=name, dcs=dcs, partitions=partitions, wan=options.wan,
                                  clock_skew_ms=skew_ms, settings=settings)
        self._time("cluster_start_s", time.monotonic() - started)
        try:
            yield SystemUnderTest(
                system=cluster.protocol if options.connect else protocol,
                target=TargetSpec("okapi", cluster.dc_addresses(), options.timeout_s, not options.grpc_only),
                cluster=cluster, pids=cluster.pids(), dcs=cluster.num_dcs, partitions=cluster.partitions,
                clock_skew_ms=cluster.clock_skew_ms if not options.connect else 0.0,
            )
        finally:
            cluster.stop()

    @contextlib.contextmanager
    def redis(self) -> Iterator[SystemUnderTest]:
        with LocalRedis() as server:
            yield SystemUnderTest("redis", TargetSpec("redis", (server.address,), self.options.timeout_s), None,
                                  [server.pid] if server.pid else [], 1, 1, 0.0)

    def _time(self, name: str, seconds: float) -> None:
        self.results.timings[name] = round(self.results.timings.get(name, 0.0) + seconds, 3)

    # ------------------------------------------------------------------ phases

    def workload(self, name: str, sut: SystemUnderTest, **overrides: Any) -> WorkloadConfig:
        o = self.options
        values: dict[str, Any] = {
            "name": name, "records": o.records, "key_bytes": o.key_bytes, "value_bytes": o.value_bytes,
            "num_partitions": sut.partitions, "rotx_partitions": min(o.rotx_partitions, sut.partitions),
            "write_ratio": o.write_ratio, "seed": o.seed,
        }
        values.update(overrides)
        return WorkloadConfig(**values)

    def load(self, sut: SystemUnderTest, sessions: int = LOAD_SESSIONS) -> float:
        """Insert every record once (the YCSB load phase), then wait until remote DCs see it.
        Returns the seconds the inserts took."""
        started = time.monotonic()
        workload = self.workload("a", sut)
        spec = RunSpec(sut.target, workload, clients=min(sessions, workload.records), warmup_s=0.0,
                       duration_s=LOAD_TIMEOUT_S, phase="load", seed=self.options.seed)
        callback = self.ui.start_count(f"load {sut.system} {workload.records} records", workload.records)
        outcome = self.pool.run(spec, processes=self._processes(spec.clients), on_progress=callback)
        errors = sum(sum(worker.errors.values()) for worker in outcome.workers)
        loaded = sum(worker.completed for worker in outcome.workers)
        elapsed = time.monotonic() - started
        self.ui.finish_run(f"  loaded {loaded} records into {sut.system} in {elapsed:.1f} s ({loaded / elapsed:,.0f}/s)"
                           + (f" ({errors} errors)" if errors else ""), counted=False)
        if errors:
            last = next((w.last_error for w in outcome.workers if w.last_error), "")
            raise BenchError(f"load phase of {sut.system}: {errors} of {workload.records} writes failed: {last}")
        if sut.system != "redis" and sut.dcs > 1 and sut.cluster is not None:
            keys = [format_key(index, workload.key_bytes)
                    for index in range(max(0, workload.records - spec.clients), workload.records)]
            missing = self.runner.run(wait_until_visible(sut.cluster.dc_addresses(), keys, deadline_s=30.0,
                                                     timeout_s=self.options.timeout_s))
            if missing:
                self.results.note(f"{sut.system}: {missing} loaded keys still invisible in a remote DC after 30 s")
        self._time("load_s", time.monotonic() - started)
        return elapsed

    def _processes(self, clients: int) -> int:
        return max(1, min(clients, self.options.processes or default_processes(clients)))

    def measure(
        self,
        sut: SystemUnderTest,
        workload: WorkloadConfig,
        clients: int,
        *,
        series: str,
        kind: str,
        title: str,
        extra: dict[str, Any] | None = None,
        processes: int | None = None,
        load: str | None = None,
    ) -> dict[str, Any] | None:
        """One measured run, appended to ``series``; None (and a note) when it failed. ``processes``
        overrides the number of load processes (default: ``--processes`` or one per core), ``load``
        the load generator (``--load``; ``lean`` drives an okapi cluster from one process)."""
        o = self.options
        lean = (load or o.load) == "lean" and sut.target.kind == "okapi"
        target = replace(sut.target, kind="lean") if lean else sut.target
        spec = RunSpec(target, workload, clients, warmup_s=o.warmup_s, duration_s=o.duration_s,
                       max_ops_per_session=max(10_000, int(o.duration_s * 100_000)), seed=o.seed)
        captured: dict[str, Any] = {}

        def at_start() -> None:
            captured["cpu_before"] = total_cpu_seconds(sut.pids)
            captured["stats_before"] = sut.cluster.fetch_stats() if sut.cluster else {}

        def at_end() -> None:
            captured["cpu_after"] = total_cpu_seconds(sut.pids)
            captured["stats_after"] = sut.cluster.fetch_stats() if sut.cluster else {}

        label = f"{sut.system} {workload.label} c={clients}" + (" lean" if lean else "")
        if workload.name == "rotx":
            label += f" p={workload.rotx_partitions}"
            if workload.write_ratio is not None:
                label += f" w={workload.write_ratio:g}"
        callback = self.ui.start_run(label, o.warmup_s + o.duration_s)
        started = time.monotonic()
        try:
            outcome = self.pool.run(spec, processes=1 if lean else processes or self._processes(clients),
                                    on_progress=callback,
                                    at_measure_start=at_start, at_measure_end=at_end)
        except BenchError as error:
            self.failures += 1
            self.results.note(f"{series}: {label} failed: {error}")
            self.ui.finish_run(f"  FAILED {label}: {str(error).splitlines()[0]}", style="red")
            return None
        outcome.stats_before = captured.get("stats_before", {})
        outcome.stats_after = captured.get("stats_after", {})
        before, after = captured.get("cpu_before"), captured.get("cpu_after")
        server_cpu = after - before if before is not None and after is not None else None
        params: dict[str, Any] = {
            "dcs": sut.dcs, "partitions": sut.partitions, "clock_skew_ms": sut.clock_skew_ms,
            "rotx_partitions": workload.rotx_partitions if workload.name == "rotx" else None,
            "write_ratio": workload.write_ratio if workload.name == "rotx" else None,
            "load": "lean" if lean else "client",
            **(extra or {}),
        }
        record = run_record(outcome, system=sut.system, params=params, server_cpu_s=server_cpu)
        self._time("runs_s", time.monotonic() - started)
        self.results.series_for(series, kind, title).runs.append(record)
        self.ui.finish_run("  " + describe(record))
        return record

    def copy_into(self, record: dict[str, Any] | None, series: str, kind: str, title: str) -> None:
        """Reuse an identical measurement in another series (e.g. the 1-client point of a sweep)."""
        if record is not None:
            self.results.series_for(series, kind, title).runs.append(copy.deepcopy(record))

    def visibility(self, sut: SystemUnderTest) -> None:
        if sut.cluster is None or sut.dcs < 2:
            return
        o = self.options
        samples = o.visibility_samples or (10 if o.quick else 200)
        started = time.monotonic()
        self.ui.message(f"  visibility probe: {samples} samples per DC pair")
        pairs = self.runner.run(measure_visibility(
            sut.cluster.dc_addresses(), sut.cluster.dc_names, samples=samples,
            deadline_s=10.0 if o.quick else 120.0, timeout_s=o.timeout_s,
        ))
        self.results.visibility[sut.system] = [summarize(pair) for pair in pairs]
        for pair in pairs:
            summary = summarize(pair)
            self.ui.message(f"    {pair.name}: mean {summary['mean_ms']:.1f} ms, p99 {summary['p99_ms']:.1f} ms"
                            f" ({summary['count']} samples, {summary['timeouts']} timeouts)")
        self._time("visibility_s", time.monotonic() - started)

    def guarded(self, what: str, body: Callable[[], None]) -> None:
        """Run one system's part of a suite; a failure is noted and the suite goes on."""
        try:
            body()
        except (BenchError, OSError, ValueError) as error:
            self.failures += 1
            self.results.note(f"{what} failed: {error}")
            self.ui.message(f"{what} failed: {error}", style="red")


def describe(record: dict[str, Any]) -> str:
    """One line per run for the log."""
    parts = [f"{record['system']:<10} {record['workload']:<7} c={record['clients']:<3}"]
    if record.get("rotx_partitions"):
        parts.append(f"p={record['rotx_partitions']}")
    if record.get("write_ratio") is not None:
        parts.append(f"w={record['write_ratio']:g}")
    if record.get("load") == "lean":
        parts.append("lean")
    parts.append(f"{record['throughput_ops_s']:>9,.0f} ops/s")
    for kind, latency in sorted(record["latency_us"].items()):
        parts.append(f"{kind} {latency['mean_us'] / 1000:.2f}/{latency['p99_us'] / 1000:.2f} ms")
    waits = record.get("waits", {})
    for kind in ("write", "rotx"):
        wait = waits.get(kind)
        if wait and wait["waits"]:
            parts.append(f"{kind}-wait {wait['probability']:.0%} x {wait['mean_us'] / 1000:.1f} ms")
    errors = sum(record["errors"].values())
    if errors:
        parts.append(f"{errors} errors")
    return " ".join(parts)


# ====================================================================== suites


def planned_runs(options: BenchOptions) -> int:
    """How many measured runs an invocation makes (for the overall progress bar)."""
    if options.suite == "course":
        levels = _course_levels(options)
        systems = len(options.protocols) + (1 if options.redis and unavailable_reason() is None else 0)
        return systems * (6 + 3 * len([n for n in levels if n != 1]))
    if options.suite == "paper":
        plan = _paper_plan(options)
        per_protocol = len(plan.rotx_levels) * len(plan.clients) + len(plan.write_ratios) + len(plan.scale_levels) - 1
        return len(options.protocols) * per_protocol
    if options.suite == "fast":  # YCSB-A x 6 systems and RO-TX x 2, 3 times each unless quick; replication x 2
        return (6 + 2) * (1 if options.quick else 3) + 2
    if options.suite == "scaling":
        from okapikv.bench.scaling import planned

        return planned(options)
    if options.suite == "resp":
        from okapikv.bench.resp import planned as planned_resp

        return planned_resp(options.clients if options.clients_given else None)
    if options.workload == MEMORY:
        return len(options.protocols)
    return len(options.protocols) * len(options.clients)


def _course_levels(options: BenchOptions) -> tuple[int, ...]:
    if options.clients_given:
        return tuple(sorted(set(options.clients) | {1}))
    return COURSE_CLIENTS_QUICK if options.quick else COURSE_CLIENTS


def run_course(bench: Bench) -> None:
    o = bench.options
    levels = _course_levels(o)
    systems: list[str] = list(o.protocols)
    reason = unavailable_reason() if o.redis else "--no-redis"
    if reason is None:
        systems.append("redis")
    else:
        bench.results.note(f"Redis reference skipped: {reason}")
        bench.ui.message(f"Redis reference skipped: {reason}")
    dcs = o.dcs or ("local",)
    for system in systems:
        def body(system: str = system) -> None:
            skew = o.clock_skew_ms or 0.0
            manager = bench.redis() if system == "redis" else bench.okapi(system, dcs, o.partitions, skew)
            with manager as sut:
                bench.load(sut)
                single: dict[str, dict[str, Any] | None] = {}
                # YCSB's recommended order: the inserting workloads (D, E) last.
                for name in "abcfde":
                    single[name] = bench.measure(sut, bench.workload(name, sut), 1, series="course-single",
                                                 kind="single", title="YCSB A-F, one client")
                for name in "ace":
                    series = f"course-scaling-{name}"
                    title = f"YCSB {name.upper()}: client scaling"
                    for clients in levels:
                        if clients == 1:
                            bench.copy_into(single[name], series, "clients", title)
                        else:
                            bench.measure(sut, bench.workload(name, sut), clients, series=series, kind="clients",
                                          title=title)
        bench.guarded(f"course suite on {system}", body)
    series = bench.results.series.get("course-single")
    if series:  # report A-F in order whatever order they ran in
        series.runs.sort(key=lambda run: (run["system"], run["workload"]))


@dataclass(frozen=True, slots=True)
class PaperPlan:
    dcs: tuple[str, ...]
    partitions: int
    skew_ms: float
    rotx_levels: tuple[int, ...]
    write_ratios: tuple[float, ...]
    scale_levels: tuple[int, ...]
    clients: tuple[int, ...]
    fixed_clients: int
    scale_rotx: int


def _paper_plan(o: BenchOptions) -> PaperPlan:
    partitions = o.partitions if o.partitions_given and o.partitions > 1 else (2 if o.quick else 4)
    rotx_levels = tuple(sorted({p for p in (1, 2, 4, 8, 16, 32) if p <= partitions} | {partitions}))
    write_ratios = (0.1, 0.9) if o.quick else (0.05, 0.1, 0.25, 0.5, 0.75, 0.9)
    scale_levels = (1, partitions) if o.quick else tuple(range(1, partitions + 1))
    default_clients = (12,) if o.quick else (6, 24, 48)
    clients = tuple(sorted(set(o.clients))) if o.clients_given else default_clients
    fixed = clients[len(clients) // 2]
    return PaperPlan(
        dcs=o.dcs or PAPER_DCS, partitions=partitions,
        skew_ms=o.clock_skew_ms if o.clock_skew_ms is not None else PAPER_SKEW_MS,
        rotx_levels=rotx_levels, write_ratios=write_ratios, scale_levels=scale_levels, clients=clients,
        fixed_clients=fixed, scale_rotx=min(o.rotx_partitions, 2),
    )


def run_paper(bench: Bench) -> None:
    o = bench.options
    plan = _paper_plan(o)
    bench.results.config["paper_plan"] = {
        "dcs": list(plan.dcs), "partitions": plan.partitions, "clock_skew_ms": plan.skew_ms,
        "rotx_partitions": list(plan.rotx_levels), "write_ratios": list(plan.write_ratios),
        "scalability_partitions": list(plan.scale_levels), "clients": list(plan.clients),
        "fixed_clients": plan.fixed_clients,
    }
    protocols = o.protocols
    if o.connect:
        bench.results.note("--connect: protocols and partition counts are the running cluster's; "
                           "the scalability sweep needs fresh clusters and is skipped")
    rotx_title = "RO-TX over p partitions + PUT (paper, Figures 4 and 5)"
    write_title = "Write-ratio sweep: PUT with probability w, else RO-TX (paper, write intensity)"
    scale_title = "Scalability: 2-partition RO-TX + PUT over 1..N partitions (paper, Figure 3)"
    for protocol in protocols:
        def main_cluster(protocol: str = protocol) -> None:
            with bench.okapi(protocol, plan.dcs, plan.partitions, plan.skew_ms) as sut:
                bench.load(sut)
                scale_point: dict[str, Any] | None = None
                for p in plan.rotx_levels:
                    if p > sut.partitions:
                        continue
                    for clients in plan.clients:
                        record = bench.measure(sut, bench.workload("rotx", sut, rotx_partitions=p, write_ratio=None),
                                               clients, series="paper-rotx-partitions", kind="rotx_partitions",
                                               title=rotx_title)
                        if p == min(plan.scale_rotx, sut.partitions) and clients == plan.fixed_clients:
                            scale_point = record
                for ratio in plan.write_ratios:
                    bench.measure(sut, bench.workload("rotx", sut, rotx_partitions=min(plan.scale_rotx, sut.partitions),
                                                      write_ratio=ratio),
                                  plan.fixed_clients, series="paper-write-ratio", kind="write_ratio", title=write_title)
                if not o.connect:
                    bench.copy_into(scale_point, "paper-scalability", "partitions", scale_title)
                bench.visibility(sut)
        bench.guarded(f"paper suite on {protocol}", main_cluster)
        if o.connect:
            break
        for partitions in plan.scale_levels:
            if partitions == plan.partitions:
                continue

            def scale_cluster(protocol: str = protocol, partitions: int = partitions) -> None:
                with bench.okapi(protocol, plan.dcs, partitions, plan.skew_ms) as sut:
                    bench.load(sut)
                    bench.measure(sut, bench.workload("rotx", sut, rotx_partitions=min(plan.scale_rotx, partitions),
                                                      write_ratio=None),
                                  plan.fixed_clients, series="paper-scalability", kind="partitions", title=scale_title)
            bench.guarded(f"scalability with {partitions} partition(s) on {protocol}", scale_cluster)
    series = bench.results.series.get("paper-scalability")
    if series:
        series.runs.sort(key=lambda run: (run["system"], run["partitions"]))


def run_custom(bench: Bench) -> None:
    o = bench.options
    if o.workload == MEMORY:
        run_memory(bench)
        return
    default_dcs = PAPER_DCS if o.workload == "rotx" else ("local",)
    dcs = o.dcs or default_dcs
    title = f"{o.workload.upper() if o.workload != 'rotx' else 'RO-TX + PUT'}: clients sweep"
    for protocol in o.protocols:
        def body(protocol: str = protocol) -> None:
            partitions = o.partitions
            with bench.okapi(protocol, dcs, partitions, o.clock_skew_ms or 0.0) as sut:
                bench.load(sut)
                for clients in o.clients:
                    bench.measure(sut, bench.workload(o.workload, sut), clients, series="custom", kind="clients",
                                  title=title)
                bench.visibility(sut)
        bench.guarded(f"{o.workload} on {protocol}", body)
        if o.connect:
            break


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """A process's resident set size (or ``VmHWM``, its peak) from ``/proc/<pid>/status``."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise BenchError(f"no {field} in /proc/{pid}/status")


def run_memory(bench: Bench) -> None:
    """``--workload memory``: resident memory per key of one in-memory partition server (one
    ``okapi server`` process, 1 DC x 1 partition) after loading ``--records`` distinct keys through
    the pipelined async client. RSS is read from /proc before the load and after it has settled."""
    o = bench.options
    for protocol in o.protocols:
        def body(protocol: str = protocol) -> None:
            with bench.okapi(protocol, o.dcs or ("local",), 1, 0.0) as sut:
                if len(sut.pids) != 1:
                    raise BenchError(f"--workload memory needs one server process, not {len(sut.pids)}")
                pid = sut.pids[0]
                time.sleep(MEMORY_SETTLE_S)
                before = rss_bytes(pid)
                load_s = bench.load(sut, sessions=MEMORY_LOAD_SESSIONS)
                time.sleep(MEMORY_SETTLE_S)
                after = rss_bytes(pid)
                # The kernel updates VmHWM lazily (at unmap and exit), so it can read below the
                # VmRSS just taken: the peak is at least what was just measured.
                peak = max(rss_bytes(pid, "VmHWM"), after)
                stats = next(iter(sut.cluster.fetch_stats().values()), {}) if sut.cluster else {}
                keys = int(stats.get("keys", o.records))
                record = {
                    "system": sut.system, "records": o.records, "key_bytes": o.key_bytes,
                    "value_bytes": o.value_bytes, "keys": keys, "versions": stats.get("versions"),
                    "rss_before_bytes": before, "rss_after_bytes": after, "rss_peak_bytes": peak,
                    "bytes_per_key": round((after - before) / max(keys, 1), 1),
                    "rss_after_per_key": round(after / max(keys, 1), 1),
                    "load_s": round(load_s, 2), "load_ops_s": round(o.records / load_s, 1) if load_s > 0 else None,
                }
                bench.results.memory.append(record)
                bench.ui.finish_run(
                    f"  {sut.system}: {keys:,} keys ({record['versions']} versions), RSS {before / 2**20:.1f} -> "
                    f"{after / 2**20:.1f} MiB: {record['bytes_per_key']:.1f} B/key loaded "
                    f"({record['rss_after_per_key']:.1f} B/key of the whole RSS)")
        bench.guarded(f"memory on {protocol}", body)


def run_fast(bench: Bench) -> None:
    from okapikv.bench.fast import run_fast as run

    run(bench)


def run_scaling(bench: Bench) -> None:
    from okapikv.bench.scaling import run_scaling as run

    run(bench)


def run_resp(bench: Bench) -> None:
    from okapikv.bench.resp import run_resp as run

    run(bench)


SUITES: dict[str | None, Callable[[Bench], None]] = {
    None: run_custom, "course": run_course, "paper": run_paper, "fast": run_fast, "scaling": run_scaling,
    "resp": run_resp,
}
