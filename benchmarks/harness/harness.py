"""The harness: starts the systems under test and runs the phases every suite is made of.

``open_bench`` sets up one invocation (the ``--keep-cpus-busy`` spinners, the load processes, the
progress view, one event loop) and yields the ``Bench`` that suites drive:

- ``start(system, ...)``: a fresh local cluster for an okapikv system (or the one ``--connect``
  names), a throwaway redis-server for Redis; stopped afterwards whatever happens;
- ``load``: the YCSB load phase (every record once; into okapikv through the client's bulk load,
  ``okapikv.client.bulk``, as `okapi load` does), then a wait until remote DCs see it;
- ``measure``: one measured run, recorded as a ``Run`` in a series (server stats and CPU read at the
  window's edges); ``copy_into`` reuses a run in another series;
- ``idle_cpu``: the servers' CPU with no client at their busy periods, subtracted from a run's CPU per
  operation;
- ``visibility``: the remote update visibility probe per DC pair;
- ``guarded``: one system's part of a suite, whose failure is noted while the suite goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.harness.awake import EVERY_S as AWAKE_EVERY_S
from benchmarks.harness.awake import kept_awake
from benchmarks.harness.busy_cpus import cpus_kept_busy
from benchmarks.harness.clusters import RunningCluster, connect, start_local
from benchmarks.harness.options import BenchOptions
from benchmarks.harness.proc import total_cpu_seconds
from benchmarks.harness.progress import ProgressUI
from benchmarks.harness.records import run_record
from benchmarks.harness.redis_ref import LocalRedis
from benchmarks.harness.systems import System
from benchmarks.harness.visibility import measure_visibility, summarize, wait_until_visible
from okapikv.bench.engine.adapters import TargetSpec
from okapikv.bench.engine.driver import WorkerPool, default_processes
from okapikv.bench.engine.errors import BenchError
from okapikv.bench.engine.generators import format_key, format_keys, make_values
from okapikv.bench.engine.messages import RunSpec
from okapikv.bench.engine.results import Results, Run
from okapikv.bench.engine.workloads import WorkloadConfig

LOAD_SESSIONS = 32
LOAD_TIMEOUT_S = 300.0
#: the longest ``settle_checkpoints`` waits for a bulk load's checkpoints (1,000,000 records take
#: about 7 s of a core alone, docs/storage.md)
SETTLE_TIMEOUT_S = 120.0
#: Records per ``bulk_put`` of the okapikv load phase: the progress bar moves at each.
BULK_CHUNK = 50_000


@dataclass(frozen=True, slots=True)
class SystemUnderTest:
    """A started system: how to drive it, and what is needed to read its stats and CPU."""

    system: System
    label: str  # what its runs are recorded as: ``system.name``, or a suite's label ("okapi over gRPC")
    target: TargetSpec
    cluster: RunningCluster | None
    pids: tuple[int, ...]
    dcs: int
    partitions: int
    clock_skew_ms: float
    clock_skew_model: str | None = None  # how the offsets were laid out (``okapikv.core.skew``)
    max_dc_skew_ms: float | None = None  # the largest skew between two servers of one DC
    coordinator: str | None = None  # who coordinated RO-TX and SCAN (okapi systems)


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
    def start(self, system: System, dcs: tuple[str, ...] = ("local",), partitions: int = 1,
              skew_ms: float = 0.0, durable: bool | None = None) -> Iterator[SystemUnderTest]:
        """``system`` running, for the length of the ``with``: Redis ignores the cluster shape.
        ``durable``: the servers keep their stores on disk (default: ``--durable``)."""
        if not system.is_okapikv:
            with LocalRedis() as server:
                target = TargetSpec("redis", (server.address,), self.options.timeout_s)
                yield SystemUnderTest(system, system.name, target, None, (server.pid,) if server.pid else (), 1, 1, 0.0)
            return
        options = self.options
        started = time.monotonic()
        if options.connect:
            cluster = connect(options.connect, options.timeout_s)
            system = System(cluster.protocol)
        else:
            on_disk = options.durable if durable is None else durable
            self.ui.message(f"starting {system.name}: {len(dcs)} DC x {partitions} partition(s), skew {skew_ms:g} ms, "
                            f"wan {options.wan}" + (", durable" if on_disk else ""))
            cluster = start_local(protocol=system.protocol, dcs=dcs, partitions=partitions, wan=options.wan,
                                  clock_skew_ms=skew_ms, clock_skew_model=options.clock_skew_model,
                                  clock_skew_seed=options.seed, settings=system.settings(),
                                  durable=on_disk)
        self.results.add_time("cluster_start_s", time.monotonic() - started)
        try:
            yield SystemUnderTest(
                system=system, label=system.name,
                target=TargetSpec("okapi", cluster.dc_addresses(), options.timeout_s, not options.grpc_only,
                                  options.coordinator),
                cluster=cluster, pids=tuple(cluster.pids()), dcs=cluster.num_dcs, partitions=cluster.partitions,
                clock_skew_ms=cluster.clock_skew_ms if not options.connect else 0.0,
                clock_skew_model=cluster.clock_skew_model, max_dc_skew_ms=cluster.max_dc_skew_ms,
                coordinator=options.coordinator,
            )
        finally:
            cluster.stop()

    # ------------------------------------------------------------------ phases

    def workload(self, name: str, sut: SystemUnderTest, **overrides: Any) -> WorkloadConfig:
        o = self.options
        values: dict[str, Any] = {
            "name": name, "records": o.records, "key_bytes": o.key_bytes, "value_bytes": o.value_bytes,
            "num_partitions": sut.partitions, "rotx_partitions": min(o.rotx_partitions, sut.partitions),
            "write_ratio": o.write_ratio, "seed": o.seed, "incr_ratio": o.incr_ratio, "ttl_ms": o.ttl_ms,
        }
        values.update(overrides)
        return WorkloadConfig(**values)

    def load(self, sut: SystemUnderTest, sessions: int = LOAD_SESSIONS, records: int | None = None) -> float:
        """Insert every record once (the YCSB load phase; ``records``: other than ``--records``),
        then wait until remote DCs see it. Returns the seconds the inserts took. An okapikv system
        is loaded through ``AsyncClient.bulk_put`` into its first DC (``_bulk_load``); Redis by
        ``sessions`` closed-loop sessions of the load processes."""
        started = time.monotonic()
        plain = {"incr_ratio": 0.0, "ttl_ms": 0}  # the records themselves: no counters, no expiry
        workload = self.workload("a", sut, **plain) if records is None else self.workload("a", sut, records=records,
                                                                                            **plain)
        callback = self.ui.start_count(f"load {sut.label} {workload.records} records", workload.records)
        if sut.system.is_okapikv:
            loaded, errors, last = self._bulk_load(sut, workload, callback), 0, ""
        else:
            spec = RunSpec(sut.target, workload, clients=min(sessions, workload.records), warmup_s=0.0,
                           duration_s=LOAD_TIMEOUT_S, phase="load", seed=self.options.seed)
            outcome = self.pool.run(spec, processes=self._processes(spec.clients), on_progress=callback)
            errors = sum(sum(worker.errors.values()) for worker in outcome.workers)
            loaded = sum(worker.completed for worker in outcome.workers)
            last = next((w.last_error for w in outcome.workers if w.last_error), "")
        elapsed = time.monotonic() - started
        self.ui.finish_run(f"  loaded {loaded} records into {sut.label} in {elapsed:.1f} s ({loaded / elapsed:,.0f}/s)"
                           + (f" ({errors} errors)" if errors else ""), counted=False)
        if errors:
            raise BenchError(f"load phase of {sut.label}: {errors} of {workload.records} writes failed: {last}")
        if sut.system.is_okapikv and sut.dcs > 1 and sut.cluster is not None:
            keys = [format_key(index, workload.key_bytes)
                    for index in range(max(0, workload.records - LOAD_SESSIONS), workload.records)]
            missing = self.runner.run(wait_until_visible(sut.cluster.dc_addresses(), keys, deadline_s=30.0,
                                                         timeout_s=self.options.timeout_s))
            if missing:
                self.results.note(f"{sut.label}: {missing} loaded keys still invisible in a remote DC after 30 s")
        self.results.add_time("load_s", time.monotonic() - started)
        return elapsed

    def settle_checkpoints(self, sut: SystemUnderTest, deadline_s: float = SETTLE_TIMEOUT_S) -> float | None:
        """Wait until every durable server of ``sut`` has folded its closed log segments into its
        checkpoint (``Stats``: ``storage.checkpoint_backlog`` 0), so a measured window that follows
        holds the workload's own costs, not a bulk load's checkpoints still running in the background.
        The seconds it waited (the load's checkpoints past its last acknowledgement, a real cost
        reported on its own); None, and a note, when the deadline passed first or the servers do
        not report it."""
        if sut.cluster is None:
            return None
        started = time.monotonic()
        servers = len(sut.cluster.servers)
        while True:
            answers = sut.cluster.fetch_stats()  # (a server busy past the Stats timeout is asked again)
            reported = [(stats.get("storage") or {}).get("checkpoint_backlog") for stats in answers.values()]
            backlog = [int(segments) for segments in reported if segments is not None]
            if len(backlog) < len(reported):
                self.results.note(f"{sut.label}: its servers do not report a checkpoint backlog; measured without "
                                  "waiting for the load's checkpoints")
                return None
            waited = time.monotonic() - started
            if len(backlog) == servers and not any(backlog):
                return waited
            if waited > deadline_s:
                self.results.note(f"{sut.label}: {sum(backlog)} log segment(s) still to checkpoint (or servers "
                                  f"not answering) after {deadline_s:.0f} s; measured beside them")
                return None
            time.sleep(0.1)

    def _bulk_load(self, sut: SystemUnderTest, workload: WorkloadConfig,
                   progress: Callable[[float, int, int], None]) -> int:
        """Every record of ``workload`` (the keys and values the load processes would write) in
        ``BULK_CHUNK``-record bulk loads of one session, on this harness's event loop; raises
        ``BenchError`` when the load fails."""
        import numpy as np

        from okapikv.client.aio import AsyncClient
        from okapikv.errors import OkapiError

        values = make_values(16, workload.value_bytes, random.Random(f"{self.options.seed}/load"))
        started = time.monotonic()

        async def load() -> int:
            async with AsyncClient(sut.target.addresses[0], timeout_s=self.options.timeout_s,
                                   native=sut.target.native) as client:
                done = 0
                for first in range(0, workload.records, BULK_CHUNK):
                    indices = np.arange(first, min(workload.records, first + BULK_CHUNK))
                    keys = format_keys(indices, workload.key_bytes)
                    done += await client.bulk_put(zip(keys, (values[int(i) % len(values)] for i in indices),
                                                      strict=True))
                    progress(time.monotonic() - started, done, done)
                return done

        try:
            return self.runner.run(load())
        except OkapiError as error:
            raise BenchError(f"load phase of {sut.label}: {error}") from None

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
        processes: int | None = None,
        load: str | None = None,
        idle_cores: float | None = None,
    ) -> Run | None:
        """One measured run, appended to ``series``; None (and a note) when it failed. ``processes``
        overrides the number of load processes (default: ``--processes`` or one per core), ``load``
        the load generator (``--load``; ``lean`` drives an okapi cluster from one process);
        ``idle_cores``: the servers' idle CPU (``idle_cpu``), subtracted in the run's net CPU per
        operation."""
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

        label = f"{sut.label} {workload.label} c={clients}" + (" lean" if lean else "")
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
        run = run_record(outcome, system=sut.label, dcs=sut.dcs, partitions=sut.partitions,
                         clock_skew_ms=sut.clock_skew_ms, load="lean" if lean else "client", server_cpu_s=server_cpu,
                         idle_cores=idle_cores)
        run = replace(run, clock_skew_model=sut.clock_skew_model, max_dc_skew_ms=sut.max_dc_skew_ms,
                      coordinator=sut.coordinator)
        self.results.add_time("runs_s", time.monotonic() - started)
        self.results.series_for(series, kind, title).runs.append(run)
        self.ui.finish_run("  " + describe(run))
        return run

    def idle_cpu(self, sut: SystemUnderTest, seconds: float) -> float | None:
        """The servers' CPU (cores) while no client runs, over ``seconds``: their timers'
        background (heartbeats, stabilization rounds) at the periods they run under load (one
        write every ``awake.EVERY_S`` keeps idle pacing off: ``benchmarks.harness.awake``), which
        a run's net CPU per operation leaves out. None where the servers' CPU cannot be read
        (``--connect`` to remote servers)."""
        if sut.cluster is None or not sut.pids:
            return None
        with kept_awake(sut.cluster.dc_addresses()[0]) as awake:
            time.sleep(AWAKE_EVERY_S)  # the first write has snapped every server back
            before = total_cpu_seconds(sut.pids)
            started = time.monotonic()
            time.sleep(seconds)
            after = total_cpu_seconds(sut.pids)
            elapsed = time.monotonic() - started
        if before is None or after is None or elapsed <= 0:
            return None
        cores = round((after - before) / elapsed, 3)
        self.ui.message(f"  {sut.label} idle at busy periods: {cores:.2f} cores over {elapsed:.1f} s "
                        f"({awake.writes} writes kept it awake, {awake.failures} failed)")
        return cores

    def copy_into(self, run: Run | None, series: str, kind: str, title: str) -> None:
        """Reuse an identical measurement in another series (e.g. the 1-client point of a sweep)."""
        if run is not None:
            self.results.series_for(series, kind, title).runs.append(run)

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
        summaries = self.results.visibility[sut.label] = [summarize(pair) for pair in pairs]
        for summary in summaries:
            self.ui.message(f"    {summary.source}->{summary.destination}: mean {summary.mean_ms:.1f} ms, "
                            f"p99 {summary.p99_ms:.1f} ms ({summary.count} samples, {summary.timeouts} timeouts)")
        self.results.add_time("visibility_s", time.monotonic() - started)

    def guarded(self, what: str, body: Callable[[], None]) -> None:
        """Run one system's part of a suite; a failure is noted and the suite goes on."""
        try:
            body()
        except (BenchError, OSError, ValueError) as error:
            self.failures += 1
            self.results.note(f"{what} failed: {error}")
            self.ui.message(f"{what} failed: {error}", style="red")


@contextlib.contextmanager
def open_bench(options: BenchOptions, results: Results, planned_runs: int) -> Iterator[Bench]:
    """The harness of one invocation: the ``--keep-cpus-busy`` spinners (``harness.busy_cpus``), the
    load processes (enough for the largest ``--clients``), the progress view and the event loop."""
    processes = options.processes or default_processes(max(options.clients + (1_000,)))
    with (cpus_kept_busy(options.keep_cpus_busy), WorkerPool(processes) as pool,
          ProgressUI(planned_runs, enabled=options.progress) as ui):
        bench = Bench(options, results, ui, pool)
        try:
            yield bench
        finally:
            bench.close()


def describe(run: Run) -> str:
    """One line per run for the log."""
    parts = [f"{run.system:<10} {run.workload:<7} c={run.clients:<3}"]
    if run.rotx_partitions:
        parts.append(f"p={run.rotx_partitions}")
    if run.write_ratio is not None:
        parts.append(f"w={run.write_ratio:g}")
    if run.load == "lean":
        parts.append("lean")
    parts.append(f"{run.throughput_ops_s:>9,.0f} ops/s")
    for kind, latency in sorted(run.latency_us.items()):
        parts.append(f"{kind} {latency.mean_us / 1000:.2f}/{latency.p99_us / 1000:.2f} ms")
    for kind, label in (("write_skew", "write-wait skew"), ("write_tick", "write-wait same-us"),
                        ("rotx", "rotx-wait")):
        wait = (run.waits or {}).get(kind)
        if wait and wait.waits:
            parts.append(f"{label} {wait.probability:.0%} x {wait.mean_us / 1000:.1f} ms")
    errors = sum(run.errors.values())
    if errors:
        parts.append(f"{errors} errors")
    return " ".join(parts)
