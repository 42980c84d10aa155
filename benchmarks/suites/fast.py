"""``okapi bench --suite fast``: the performance acceptance targets, each measured, side by side.

One command runs every measurement the targets name, on fresh local clusters, and ends with one
table: target, goal, measured, met or not, judged by ``suites.acceptance.TARGETS`` (where every
goal lives). The phases:

1. Latency: one client, one DC, one partition, one operation at a time. GET and PUT through the
   blocking ``Client`` (what scripts and the stdin/stdout client use) and through an ``okapi client``
   process driven line by line over its stdin/stdout, as the course's tools drive it
   (``harness.latency``); and PUTs through the ``Client`` to a durable server, each round beside the
   disk's own fdatasync of a 100-byte append on the same file system (``measure_fdatasync``): what
   a lone session's durable write costs over the disk (docs/storage.md).
2. Throughput: one partition server under YCSB-A with ``FAST_SESSIONS`` concurrent sessions of the
   async client in one load process; redis-server driven by redis-py through the same load
   generator with the same sessions (the ratio is reported); and the same store with the
   ``eventual`` protocol (no stabilization, no dependency metadata): the cost of causality.
3. The cost of causality on the paper's workload: RO-TX over 2 partitions + PUT, 3 DCs with the
   emulated WAN, Okapi against ``eventual``.
4. Memory: bytes of server RSS per key after loading ``MEMORY_RECORDS`` keys (``harness.memory``).
5. Replication keeps up: every DC takes PUTs at the highest rate the machine allows while remote
   visibility is probed and every server's replication queues are sampled
   (``harness.replication``). Okapi makes an update visible in DC j once every DC holds it (UST,
   docs/protocol.md, "Stabilization"), so the bound per pair (i -> j) is the UST path
   ``max_k (wan(i, k) + wan(k, j))`` plus 3 stabilization periods; the queues must not trend up.
6. Scaling: YCSB-A on one and on two partitions (one DC), driven by the lean load generator
   (``engine.lean``: 64 sessions per partition from one process that leaves the CPU to the
   servers), and by the async client (64 sessions, one process) for comparison.
7. Idle cost (``harness.idle``): the default `okapi up` shape (3 DCs x 2 partitions) left alone
   ``IDLE_S`` seconds (``IDLE_S_QUICK`` with --quick) once its servers backed off
   (``okapikv.core.pacing``): each server's cores, then the first update's remote visibility per
   DC pair against the same bound as target 5.
8. Storage (``harness.storage_costs``): the commit log's background costs on the store alone, a
   restart's recovery of the large data set from the log and from the checkpoint, and a checkpoint
   of ``CHECKPOINT_ROWS`` logged versions alone and beside a thread spinning in Python.

Durability and data size: phase 2 also runs YCSB-A on a durable partition (``okapi-durable``:
SQLite, group commit, as `okapi up` runs servers), against the in-memory one in the same rounds,
and reports the server CPU per operation of both. ``durable_scale`` bulk-loads ``LARGE_RECORDS``
(the paper's records per partition; ``--quick``: ``LARGE_RECORDS_QUICK``, said in the row) into a
fresh durable partition (the load rate) and runs YCSB-A on it and on one with ``--records``, both
running at once and measured back to back in paired rounds, each window once the logs' checkpoints
are done (how long the load's took: a row of its own).
``redis_benchmark`` runs redis-benchmark at ``REDIS_BENCHMARK_POINTS`` against
okapikv's RESP port and redis-server, side by side in each round.

Latency rounds, YCSB-A and RO-TX runs are made ``REPEATS`` times and the median is the figure (all
runs stay in results.json and the CSVs): on a small VM single runs differ by a third. The systems a
target compares take turns, round by round, each run on a fresh cluster (``_interleaved``).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.harness.harness import Bench, SystemUnderTest
from benchmarks.harness.idle import SETTLE_MARGIN_S, measure_idle
from benchmarks.harness.latency import (
    SequentialLatency,
    measure_client_latency,
    measure_fdatasync,
    measure_stdio_latency,
)
from benchmarks.harness.memory import run_memory
from benchmarks.harness.options import BenchOptions
from benchmarks.harness.redis_ref import LocalRedis, unavailable_reason
from benchmarks.harness.replication import ReplicationSampler
from benchmarks.harness.storage_costs import measure_storage_costs
from benchmarks.harness.systems import PAPER_DCS, REDIS_SYSTEM, System
from benchmarks.harness.visibility import measure_visibility, summarize
from benchmarks.suites.acceptance import (
    FAST_SESSIONS,
    REPLICATION_SYSTEM,
    STABILIZATION_PERIODS,
    judge,
)
from benchmarks.suites.fast_figures import (
    DURABLE,
    FDATASYNC,
    LATENCY_PATHS,
    BenchmarkPoint,
    DurableScale,
    FastFigures,
    IdleFigures,
    IdlePair,
    LatencyPhase,
    PairUnderLoad,
    PathLatency,
    ReplicationFigures,
    Throughput,
)
from okapikv.bench.engine.errors import BenchError
from okapikv.bench.engine.report import Section
from okapikv.bench.engine.results import Run

REPEATS = 3
LATENCY_OPS = 5_000
LATENCY_OPS_QUICK = 300
ROTX_CLIENTS = 24
REPLICATION_SESSIONS = 48
MEMORY_RECORDS = 1_000_000
MEMORY_RECORDS_QUICK = 20_000
#: Logged versions a checkpoint folds in the storage phase (``harness.storage_costs``).
CHECKPOINT_ROWS = 100_000
#: The durable data-size targets: the paper's records per partition against the suites' usual
#: ``--records``; --quick loads fewer (and says so in the row).
LARGE_RECORDS = 1_000_000
LARGE_RECORDS_QUICK = 20_000
#: (clients, pipeline) of the redis-benchmark comparison, and its requests per test
REDIS_BENCHMARK_POINTS = ((1, 1), (50, 1), (50, 16))
REDIS_BENCHMARK_REQUESTS = 20_000
REDIS_BENCHMARK_REQUESTS_QUICK = 2_000
IDLE_S = 10.0
IDLE_S_QUICK = 5.0
OKAPI = System("okapi")


@dataclass(frozen=True, slots=True)
class Contender:
    """One system of the YCSB-A comparison (targets 2, 3 and 6): its key in the figures and rounds,
    and how it runs."""

    key: str
    system: System
    partitions: int = 1
    native: bool = True  # False: the client on gRPC streams, not the servers' native ports
    lean: bool = False  # the lean load generator, FAST_SESSIONS sessions per partition
    durable: bool = False  # the servers keep their stores on disk (SQLite, group commit), as `okapi up` runs them


CONTENDERS = (
    Contender("okapi", OKAPI),
    Contender("eventual", System("eventual")),
    Contender("okapi-grpc", OKAPI, native=False),
    Contender("okapi-2p", OKAPI, partitions=2),
    Contender("okapi-lean", OKAPI, lean=True),
    Contender("okapi-2p-lean", OKAPI, partitions=2, lean=True),
    Contender("okapi-durable", OKAPI, durable=True),
)
REDIS_CONTENDER = Contender("redis", REDIS_SYSTEM)


def planned(options: BenchOptions) -> int:
    """YCSB-A x 7 systems, RO-TX x 2 and the durable data sizes x 2, 3 times each unless quick;
    replication x 2."""
    return (len(CONTENDERS) + 2 + 2) * (1 if options.quick else REPEATS) + 2


@dataclass(frozen=True, slots=True)
class DurableSizeRun:
    """One durable partition of the data-size target: its bulk load's seconds, how long its
    checkpoints ran past the load (None: not waited for), and the measured YCSB-A run."""

    load_s: float
    checkpoint_s: float | None
    run: Run | None


def durable_size_pair(bench: Bench, sizes: dict[str, int], title: str, *, first: str,
                      settle: bool = True) -> dict[str, DurableSizeRun]:
    """A fresh durable partition per entry of ``sizes`` (a name: its records), all running at once:
    each bulk-loaded in turn, then (``settle``) the wait for every one's load's checkpoints
    (``Bench.settle_checkpoints``), then YCSB-A with ``FAST_SESSIONS`` sessions on each, back to
    back, ``first`` first (``FastSuite.durable_scale``; ``scripts/measure_durable_scale.py`` pairs
    it with and without the wait). Why all at once: measured one partition after the other, the two
    windows of a round lay 40-50 s apart (a bulk load and its checkpoints between them), in which
    this VM's speed moved by more than the target's 10%; back to back they lie a window apart. Each
    window starts once the other partitions' checkpoints, of their loads or of a window before, are
    done (so none runs in another's window)."""
    if first not in sizes:
        raise ValueError(f"the partition measured first, {first!r}, is not one of {sorted(sizes)}")
    with contextlib.ExitStack() as stack:
        suts: dict[str, SystemUnderTest] = {}
        loads: dict[str, float] = {}
        for name, records in sizes.items():
            sut = stack.enter_context(bench.start(OKAPI, ("local",), 1, 0.0, durable=True))
            suts[name] = replace(sut, label=f"okapi (durable, {records:,} records)")
            loads[name] = bench.load(suts[name], records=records)
        settled: dict[str, float | None] = {}
        for name, sut in suts.items():
            settled[name] = bench.settle_checkpoints(sut) if settle else None
            if settled[name] is not None:
                bench.ui.message(f"  {sut.label}: the load's checkpoints ran {settled[name]:.1f} s past its end")
        found: dict[str, DurableSizeRun] = {}
        for name in [first, *(other for other in sizes if other != first)]:
            if settle:
                for sut in suts.values():
                    bench.settle_checkpoints(sut)
            sut = suts[name]
            run = bench.measure(sut, bench.workload("a", sut, records=sizes[name]), FAST_SESSIONS, kind="single",
                                processes=1, series="fast-durable-scale", title=title)
            found[name] = DurableSizeRun(loads[name], settled[name], run)
        return found


def ust_bound_ms(wan_ms: tuple[tuple[float, ...], ...], source: int, destination: int,
                 stabilization_ms: float) -> float:
    """Okapi's visibility bound for one DC pair: the update reaches every DC k, and DC k's knowledge
    of it reaches ``destination`` (UST, Okapi section 3.3), plus ``STABILIZATION_PERIODS`` periods."""
    path = max(wan_ms[source][k] + wan_ms[k][destination] for k in range(len(wan_ms)))
    return path + STABILIZATION_PERIODS * stabilization_ms


def _median_by(rounds: list[PathLatency], via: str, kind: str) -> SequentialLatency:
    """The round whose mean latency is the median, for one path and operation."""
    ordered = sorted((round_[via][kind] for round_ in rounds), key=lambda figures: figures.mean_us)
    return ordered[len(ordered) // 2]


def _median_run(runs: list[Run | None]) -> Run | None:
    """The run with the median throughput of several identical ones (all stay in the series)."""
    done = sorted((run for run in runs if run is not None), key=lambda run: run.throughput_ops_s)
    return done[len(done) // 2] if done else None


class FastSuite:
    """The phases; each puts its figures into ``figures`` (published to the results as it ends)
    and its runs into series."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.options = bench.options
        self.figures = FastFigures()
        # Single runs on a small VM vary by a third from one to the next (CPUs halting between
        # messages, see benchmarks.harness.busy_cpus): each figure is the median of REPEATS runs.
        self.repeats = 1 if bench.options.quick else REPEATS

    def publish(self) -> None:
        self.bench.results.fast = self.figures.to_dict()

    # ------------------------------------------------------------------ 1. latency

    def latency(self) -> None:
        operations = LATENCY_OPS_QUICK if self.options.quick else LATENCY_OPS
        rounds: list[PathLatency] = []
        with self.bench.start(OKAPI) as sut:
            address = sut.target.addresses[0]
            for number in range(self.repeats):
                self.bench.ui.message(f"latency round {number + 1}/{self.repeats}: {operations} sequential GETs "
                                      "and PUTs through the blocking Client, through an okapi client process, "
                                      "and through the Client over gRPC only")
                rounds.append({"client": measure_client_latency(address, operations),
                               "stdio": measure_stdio_latency(address, operations),
                               "client_grpc": measure_client_latency(address, operations, native=False)})
        # A durable server, one session: its PUTs beside the disk's own fdatasync in each round.
        with self.bench.start(OKAPI, durable=True) as sut:
            address = sut.target.addresses[0]
            for number, found in enumerate(rounds):
                self.bench.ui.message(f"durable round {number + 1}/{self.repeats}: {operations} fdatasyncs of the "
                                      "disk, then sequential PUTs to a durable server through the blocking Client")
                found[FDATASYNC] = {"put": measure_fdatasync(Path(tempfile.gettempdir()), operations)}
                found[DURABLE] = {"put": measure_client_latency(address, operations)["put"]}
        paths = {via: {kind: _median_by(rounds, via, kind) for kind in ("get", "put")} for via, _ in LATENCY_PATHS}
        paths.update({via: {"put": _median_by(rounds, via, "put")} for via in (DURABLE, FDATASYNC)})
        self.figures.latency = LatencyPhase(paths, operations, rounds)
        self.publish()
        for via, label in LATENCY_PATHS:
            get, put = paths[via]["get"], paths[via]["put"]
            self.bench.ui.finish_run(f"  {label}: GET mean {get.mean_us:.0f} us (p99 {get.p99_us:.0f}), "
                                     f"PUT mean {put.mean_us:.0f} us (p99 {put.p99_us:.0f})", counted=False)

    # ------------------------------------------------------------------ 2, 3, 6. throughput

    def _interleaved(self, keys: list[str], run: Callable[[str], Run | None],
                     ) -> tuple[dict[str, Run | None], list[dict[str, float]]]:
        """``run(key)`` once per system per round, ``repeats`` rounds, each on a fresh cluster; the
        median run of each system, and each round's throughput by system (for paired ratios,
        ``acceptance.paired``). Rounds alternate the systems because this VM's speed drifts by a
        third within minutes: three runs of one system and then three of the other compared the
        VM's phases as much as the systems (RO-TX + PUT, Okapi against eventual: 8% one run, 38%
        the next, 1-12% whenever interleaved)."""
        runs: dict[str, list[Run | None]] = {key: [] for key in keys}
        rounds: list[dict[str, float]] = []
        for _ in range(self.repeats):
            figures: dict[str, float] = {}
            for key in keys:
                def body(key: str = key, figures: dict[str, float] = figures) -> None:
                    found = run(key)
                    runs[key].append(found)
                    if found is not None:
                        figures[key] = found.throughput_ops_s
                self.bench.guarded(key, body)
            rounds.append(figures)
        return {key: _median_run(found) for key, found in runs.items()}, rounds

    def throughput(self) -> None:
        bench = self.bench
        title = f"YCSB-A, {FAST_SESSIONS} sessions of the async client in one load process, one partition"
        scaling = "YCSB-A on 1 and 2 partitions (one DC)"
        contenders = list(CONTENDERS)
        reason = unavailable_reason() if self.options.redis else "--no-redis"
        if reason is None:
            contenders.append(REDIS_CONTENDER)
        else:
            bench.results.note(f"Redis reference skipped: {reason}")
        by_key = {contender.key: contender for contender in contenders}

        def run(key: str) -> Run | None:
            contender = by_key[key]
            name = contender.system.name
            with bench.start(contender.system, ("local",), contender.partitions, 0.0,
                             durable=contender.durable) as sut:
                if not contender.native:  # what the native port buys: the same over gRPC streams
                    sut = replace(sut, label=f"{name} over gRPC", target=replace(sut.target, native=False))
                if contender.durable:  # what durability costs: the same on disk (group commit)
                    sut = replace(sut, label=f"{name} (durable)")
                bench.load(sut)
                if contender.lean:  # 6: partitions add capacity once the load generator leaves the CPU to them
                    sut = replace(sut, label=f"{name} (lean load)")
                    return bench.measure(sut, bench.workload("a", sut), FAST_SESSIONS * contender.partitions,
                                         kind="single", series="fast-scaling", title=scaling, load="lean")
                two = contender.partitions == 2
                return bench.measure(sut, bench.workload("a", sut), FAST_SESSIONS, kind="single", processes=1,
                                     series="fast-scaling" if two else "fast-ycsb-a", title=scaling if two else title)

        found, rounds = self._interleaved(list(by_key), run)
        bench.copy_into(found.get("okapi"), "fast-scaling", "single", scaling)
        self.figures.ycsb_a = {key: Throughput.of(median) for key, median in found.items()}
        self.figures.ycsb_a_server_us_per_op = {key: median.cpu.server_cpu_us_per_op for key, median in found.items()
                                                if median is not None and median.cpu.server_cpu_us_per_op is not None}
        self.figures.ycsb_a_rounds = rounds
        self.publish()

    def rotx(self) -> None:
        bench = self.bench
        title = "RO-TX over 2 partitions + PUT, 3 DCs, emulated WAN: Okapi and eventual"
        systems = {"okapi": OKAPI, "eventual": System("eventual")}

        def run(key: str) -> Run | None:
            with bench.start(systems[key], PAPER_DCS, 2, 0.0) as sut:
                bench.load(sut)
                return bench.measure(sut, bench.workload("rotx", sut, rotx_partitions=2, write_ratio=None),
                                     ROTX_CLIENTS, series="fast-rotx", kind="single", title=title)

        found, rounds = self._interleaved(list(systems), run)
        self.figures.rotx = {key: Throughput.of(median) for key, median in found.items()}
        self.figures.rotx_rounds = rounds
        self.publish()

    # ------------------------------------------------------------------ durable data sizes, load rate

    def durable_scale(self) -> None:
        """Each round: a fresh durable partition bulk-loaded with the large data set (the load
        rate: records over the load's seconds, ``Bench.load``) and another loaded with
        ``--records``, both running at once and measured under YCSB-A back to back, the one
        measured first alternating from round to round (``durable_size_pair``). Each window starts
        once the logs' closed segments are checkpointed (``Bench.settle_checkpoints``): the load of
        1,000,000 records leaves 39 MiB of log whose checkpoints otherwise ran through the whole
        measured window at the large size and never at the small one; how long they ran past the
        load is reported on its own (docs/benchmarks.md, "Durable YCSB-A at 1,000,000 against
        10,000 records")."""
        bench = self.bench
        quick = self.options.quick
        sizes = {"large": LARGE_RECORDS_QUICK if quick else LARGE_RECORDS, "small": self.options.records}
        title = (f"YCSB-A durable, {FAST_SESSIONS} sessions, one partition: {sizes['large']:,} vs "
                 f"{sizes['small']:,} records")
        rates: list[float] = []
        checkpoints: list[float] = []
        rounds: list[dict[str, float]] = []
        for index in range(self.repeats):
            def body(first: str = ("large", "small")[index % 2]) -> None:
                found = durable_size_pair(bench, sizes, title, first=first)
                large = found["large"]
                if large.load_s > 0:
                    rates.append(sizes["large"] / large.load_s)
                if large.checkpoint_s is not None:
                    checkpoints.append(large.checkpoint_s)
                rounds.append({name: size.run.throughput_ops_s for name, size in found.items() if size.run is not None})
            bench.guarded("durable data sizes", body)
        self.figures.durable_scale = DurableScale(sizes["large"], sizes["small"], quick, rates, rounds, checkpoints)
        self.publish()

    def storage(self) -> None:
        """The commit log's background costs on the store alone (``harness.storage_costs``): recovery
        of the large data set from the log and from the checkpoint, a checkpoint alone and under load."""
        records = LARGE_RECORDS_QUICK if self.options.quick else LARGE_RECORDS
        rows = min(records, CHECKPOINT_ROWS)

        def body() -> None:
            with tempfile.TemporaryDirectory(prefix="okapi-bench-storage-") as root:
                self.figures.storage = measure_storage_costs(Path(root), records, rows)
            found = self.figures.storage
            self.bench.ui.finish_run(f"  recovery of {records:,} versions: {found.recovery_log_s:.2f} s from the log, "
                                     f"{found.recovery_checkpoint_s:.2f} s from the checkpoint; a checkpoint of "
                                     f"{rows:,}: {found.checkpoint_alone_s:.2f} s alone, "
                                     f"{found.checkpoint_busy_s:.2f} s beside a busy thread", counted=False)

        self.bench.guarded("storage", body)
        self.publish()

    # ------------------------------------------------------------------ redis-benchmark side by side

    def redis_benchmark(self) -> None:
        """``redis-benchmark -t set,get,incr`` at each of ``REDIS_BENCHMARK_POINTS`` against the RESP port
        of one in-memory okapikv partition and against redis-server, one right after the other, each
        round (``suites.resp``: the same measurement, more points)."""
        from benchmarks.suites import resp

        bench = self.bench
        reason = resp.unavailable_reason()
        if reason is not None:
            bench.results.note(f"redis-benchmark comparison skipped: {reason}")
            return
        requests = REDIS_BENCHMARK_REQUESTS_QUICK if self.options.quick else REDIS_BENCHMARK_REQUESTS

        def body() -> None:
            rounds: list[list[BenchmarkPoint]] = []
            with bench.start(OKAPI) as sut, LocalRedis() as redis_server:
                assert sut.cluster is not None
                stats = next(iter(sut.cluster.fetch_stats().values()), {})
                okapi_port = int(stats.get("driver", {}).get("resp_port", 0))
                if not okapi_port:
                    raise BenchError("the okapi server serves no RESP port")
                for _ in range(self.repeats):
                    points = []
                    for clients, pipeline in REDIS_BENCHMARK_POINTS:
                        okapi = resp.redis_benchmark(okapi_port, clients=clients, pipeline=pipeline, requests=requests)
                        redis = resp.redis_benchmark(redis_server.port, clients=clients, pipeline=pipeline,
                                                     requests=requests)
                        point = BenchmarkPoint(clients, pipeline, okapi["SET"].requests_per_s,
                                               okapi["GET"].requests_per_s, redis["SET"].requests_per_s,
                                               redis["GET"].requests_per_s, okapi["INCR"].requests_per_s,
                                               redis["INCR"].requests_per_s)
                        points.append(point)
                        bench.ui.finish_run(f"  redis-benchmark -c {clients} -P {pipeline}: okapi SET "
                                            f"{point.okapi_set:,.0f} GET {point.okapi_get:,.0f}, redis-server SET "
                                            f"{point.redis_set:,.0f} GET {point.redis_get:,.0f} INCR "
                                            f"{point.okapi_incr:,.0f} vs {point.redis_incr:,.0f} requests/s "
                                            f"({point.ratio:.0%})", counted=False)
                    rounds.append(points)
                    self.figures.redis_benchmark = rounds
                    self.publish()

        bench.guarded("redis-benchmark comparison", body)

    # ------------------------------------------------------------------ 5. replication

    def replication(self) -> None:
        """The target on ``REPLICATION_SYSTEM``; then plain Okapi under the same load, for comparison
        (``replication_unbounded``): what admission control costs in PUTs and buys in staleness."""
        for system, field in ((REPLICATION_SYSTEM, "replication"), (OKAPI, "replication_unbounded")):
            def body(system: System = system, field: str = field) -> None:
                setattr(self.figures, field, self._replication_run(system))
                self.publish()
            self.bench.guarded(f"replication under load ({system.name})", body)

    def _replication_run(self, system: System) -> ReplicationFigures:
        bench = self.bench
        o = self.options
        # bounded_visibility: at saturation the servers put replication before client work
        # (Admission.backlogged) and hold client batches while the lag nears the bound.
        with bench.start(system, PAPER_DCS, 1, 0.0) as sut:
            cluster = sut.cluster
            assert cluster is not None
            bench.load(sut)
            from okapikv.cluster.config import local_cluster

            config = local_cluster(dcs=PAPER_DCS, partitions=1, protocol="okapi", wan=o.wan)
            workload = bench.workload("rotx", sut, rotx_partitions=1, write_ratio=1.0)
            samples = o.visibility_samples or (10 if o.quick else 100)
            with ThreadPoolExecutor(1) as pool:
                # The PUT load runs on a thread (it blocks on its load processes) while this thread
                # probes visibility on the Bench's event loop and the sampler reads the servers.
                future = pool.submit(bench.measure, sut, workload, REPLICATION_SESSIONS, series="fast-replication",
                                     kind="single", title="PUT-only load in every DC, visibility probed")
                time.sleep(o.warmup_s)
                with ReplicationSampler(cluster) as sampler:
                    pairs = bench.runner.run(measure_visibility(
                        cluster.dc_addresses(), cluster.dc_names, samples=samples,
                        deadline_s=max(1.0, o.duration_s - 0.5), timeout_s=o.timeout_s))
                run = future.result()
            rows = []
            for pair in pairs:
                source, destination = cluster.dc_names.index(pair.source), cluster.dc_names.index(pair.destination)
                bound = ust_bound_ms(config.wan_ms, source, destination, config.stabilization_interval_ms)
                probe = replace(summarize(pair), samples_ms=[])
                rows.append(PairUnderLoad(probe, bound, sampler.lag_summary(source, destination)))
            queues = sampler.summary()
            figures = ReplicationFigures(system.name, Throughput.of(run), rows, queues)
            worst = max(rows, key=lambda row: row.lag_p99_ms - row.bound_ms) if rows else None
            if worst is not None:
                bench.ui.finish_run(
                    f"  visibility under load ({system.name}): worst pair {worst.probe.source}->"
                    f"{worst.probe.destination} lag p99 {worst.lag_p99_ms:.1f} ms (bound {worst.bound_ms:.0f} ms; "
                    f"probe p99 {worst.probe.p99_ms:.1f} ms); replication queues max {queues.max_messages} "
                    f"messages, mean {queues.first_half_mean} -> {queues.second_half_mean}",
                    counted=False)
            return figures

    # ------------------------------------------------------------------ 7. idle cost

    def idle(self) -> None:
        self.bench.guarded("idle cluster", self._idle_run)

    def _idle_run(self) -> None:
        bench = self.bench
        o = self.options
        from okapikv.cluster.config import local_cluster

        config = local_cluster(dcs=PAPER_DCS, partitions=2, protocol="okapi", wan=o.wan)
        idle_s = IDLE_S_QUICK if o.quick else IDLE_S
        bench.ui.message(f"idle cluster: {len(PAPER_DCS)} DCs x 2 partitions left alone {idle_s:g} s, then one PUT "
                         "per DC pair")
        with bench.start(OKAPI, PAPER_DCS, 2, 0.0) as sut:
            cluster = sut.cluster
            assert cluster is not None
            measured = measure_idle(bench.runner, sut.pids, cluster.dc_addresses(), cluster.dc_names, idle_s=idle_s,
                                    settle_s=config.idle_after_ms / 1000 + SETTLE_MARGIN_S, timeout_s=o.timeout_s)
        rows = []
        for pair in measured.pairs:
            source, destination = cluster.dc_names.index(pair.source), cluster.dc_names.index(pair.destination)
            bound = ust_bound_ms(config.wan_ms, source, destination, config.stabilization_interval_ms)
            rows.append(IdlePair(pair.source, pair.destination, round(pair.samples_ms[0], 3) if pair.samples_ms
                                 else None, bound))
        self.figures.idle = IdleFigures(measured.idle_s, measured.cores, rows)
        self.publish()
        if measured.cores:
            bench.ui.finish_run(f"  idle: {max(measured.cores):.4f} cores on the busiest server, "
                                f"{sum(measured.cores):.3f} for the cluster", counted=False)

    # ------------------------------------------------------------------ verdicts

    def verdicts(self) -> None:
        self.figures.targets = judge(self.figures, self.bench.results.memory)
        self.publish()
        for row in self.figures.targets:
            mark = {True: "met", False: "not met", None: "n/a"}[row.met]
            self.bench.ui.message(f"{row.target}: {row.measured} (goal {row.goal}): {mark}",
                                  style={True: "green", False: "red", None: None}[row.met])


def run(bench: Bench) -> None:
    suite = FastSuite(bench)
    suite.latency()
    suite.throughput()
    suite.rotx()
    suite.replication()
    suite.durable_scale()
    suite.storage()
    suite.redis_benchmark()
    suite.idle()
    # The memory phase loads its own, larger key set into a fresh server.
    run_memory(bench, records=MEMORY_RECORDS_QUICK if bench.options.quick else MEMORY_RECORDS)
    suite.verdicts()


def render(fast: dict[str, Any]) -> list[str]:
    """The report's section for ``--suite fast`` (results.json's ``fast``)."""
    figures = FastFigures.from_dict(fast)
    if not figures.targets:
        return []
    lines = ["## Performance targets", "", "| target | goal | measured | met |", "|---|---|---|---|"]
    for row in figures.targets:
        met = {True: "yes", False: "**no**", None: "n/a"}[row.met]
        lines.append(f"| {row.target} | {row.goal} | {row.measured} | {met} |")
    if figures.latency is not None:
        lines += ["", "Latency, one operation at a time (µs):", "",
                  "| via | GET mean | GET p50 | GET p99 | PUT mean | PUT p50 | PUT p99 |",
                  "|---|---|---|---|---|---|---|"]
        for key, via in LATENCY_PATHS:
            if key not in figures.latency.paths:
                continue
            get, put = figures.latency.paths[key]["get"], figures.latency.paths[key]["put"]
            lines.append(f"| {via} | {get.mean_us:.0f} | {get.p50_us:.0f} | {get.p99_us:.0f} | "
                         f"{put.mean_us:.0f} | {put.p50_us:.0f} | {put.p99_us:.0f} |")
    if figures.latency is not None and DURABLE in figures.latency.paths:
        put, disk = figures.latency.paths[DURABLE]["put"], figures.latency.paths[FDATASYNC]["put"]
        lines += ["", "One session's PUTs to a durable server beside the disk's own fdatasync of a 100-byte append, "
                  "same rounds (µs):", "", "| what | mean | p50 | p99 |", "|---|---|---|---|",
                  f"| PUT, Client, durable server | {put.mean_us:.0f} | {put.p50_us:.0f} | {put.p99_us:.0f} |",
                  f"| fdatasync | {disk.mean_us:.0f} | {disk.p50_us:.0f} | {disk.p99_us:.0f} |"]
    runs = [found for found in (figures.replication, figures.replication_unbounded)
            if found is not None and found.visibility]
    if runs:
        lines += ["", "Remote visibility under full PUT load (ms): the servers' visibility lag (age of the newest "
                  "readable update of the source DC, sampled by each server at every timer tick, ~5 ms) and a "
                  "client probe (PUT in one DC, poll a fresh session in the other); the target's system first, "
                  "then plain okapi under the same load for comparison:", "",
                  "| system | PUT/s | pair | bound | lag p50 | lag p99 | lag max | lag samples | probe mean | "
                  "probe p99 | probes |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for found in runs:
            rate = found.throughput.ops_s if found.throughput else 0
            for pair in found.visibility:
                lag, probe = pair.lag, pair.probe
                lines.append(f"| {found.system or REPLICATION_SYSTEM.name} | {rate:,.0f} | "
                             f"{probe.source}->{probe.destination} | {pair.bound_ms:.0f} | "
                             f"{lag.p50_ms or 0:.1f} | {lag.p99_ms or 0:.1f} | "
                             f"{lag.max_ms or 0:.1f} | {lag.samples:,} | {probe.mean_ms:.1f} | "
                             f"{probe.p99_ms:.1f} | {probe.count} ({probe.timeouts} timed out) |")
    return lines + [""]


SECTION = Section("fast", render)
