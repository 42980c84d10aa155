"""`okapi bench --suite scaling`: peak throughput as partitions are added (the paper's Figure 3).

Two workloads on 3 DCs with the emulated WAN: YCSB-A (every operation on one key, so the work per
operation is the same at every size) and the paper's scalability workload, where each session
alternates a RO-TX over 2 partitions (1 when there is only one: cheaper, so its 1 -> 2 step
understates scaling; the paper starts at 2) and a PUT. For each partition count the cluster starts
fresh, is loaded, and each workload is measured at ``SESSIONS_PER_PARTITION`` x partitions
sessions (``--clients`` replaces the per-partition counts); the best run is the level's peak, as
the paper reports peak throughput: one fixed session count would starve the large clusters or
queue on the small ones.

With ``--load lean`` the YCSB-A runs come from the lean load generator (``engine.lean``),
which leaves the cores to the servers; the RO-TX runs keep the async client.

Levels: ``--partitions N`` gives 1, 2, 4 .. up to N (and N); by default powers of two up to half
the cores (at least 2): every partition adds a server process per DC, and the load processes take
the other half. On a 2-core machine that is 1 and 2; on the 16-core device machine 1, 2, 4 and 8,
in about two minutes (``scripts/device_scaling.sh``).
"""

from __future__ import annotations

import os

from benchmarks.harness.harness import Bench
from benchmarks.harness.options import BenchOptions
from benchmarks.harness.systems import PAPER_DCS, System
from okapikv.bench.engine.results import Run

SESSIONS_PER_PARTITION = (12, 24)
SESSIONS_PER_PARTITION_QUICK = (12,)
#: workload -> (series of its peaks, title)
WORKLOADS = {
    "a": ("scaling-ycsb-a", "Scalability: peak YCSB-A throughput over 1..N partitions per DC, 3 DCs"),
    "rotx": ("scaling-rotx", "Scalability: peak RO-TX (2 partitions) + PUT throughput over 1..N partitions "
                             "per DC, 3 DCs (Figure 3)"),
}
PEAK_KIND = "scaling_peak"
RUNS_SERIES = "scaling-runs"
RUNS_TITLE = "Scalability: every run (each level's best is its peak above)"


def levels(options: BenchOptions) -> tuple[int, ...]:
    """Partition counts to measure, ascending."""
    top = max(2, (os.cpu_count() or 2) // 2)
    if options.partitions_given or options.quick:
        top = options.partitions if options.partitions_given else 2
    found = {1, top}
    power = 2
    while power < top:
        found.add(power)
        power *= 2
    return tuple(sorted(found))


def sessions(options: BenchOptions) -> tuple[int, ...]:
    """Sessions per partition for each run of a level."""
    if options.clients_given:
        return tuple(sorted(set(options.clients)))
    return SESSIONS_PER_PARTITION_QUICK if options.quick else SESSIONS_PER_PARTITION


def planned(options: BenchOptions) -> int:
    return len(options.systems) * len(levels(options)) * len(WORKLOADS) * len(sessions(options))


def run(bench: Bench) -> None:
    o = bench.options
    if o.connect:
        bench.results.note("--suite scaling starts a fresh cluster per partition count: --connect is ignored")
    dcs = o.dcs or PAPER_DCS
    skew = o.clock_skew_ms or 0.0
    bench.results.config["scaling_plan"] = {"dcs": list(dcs), "partitions": list(levels(o)),
                                            "sessions_per_partition": list(sessions(o))}
    for system in o.systems:
        peaks: dict[tuple[str, int], Run] = {}
        for partitions in levels(o):
            def level(system: System = system, partitions: int = partitions,
                      peaks: dict[tuple[str, int], Run] = peaks) -> None:
                with bench.start(system, dcs, partitions, skew) as sut:
                    bench.load(sut)
                    for name, (series, title) in WORKLOADS.items():
                        workload = bench.workload(name, sut, rotx_partitions=min(2, partitions), write_ratio=None)
                        for per_partition in sessions(o):
                            # --load lean drives YCSB-A only: a RO-TX needs the client's sessions
                            run = bench.measure(sut, workload, per_partition * partitions, series=RUNS_SERIES,
                                                kind="scaling_sessions", title=RUNS_TITLE,
                                                load="client" if name == "rotx" else None)
                            best = peaks.get((name, partitions))
                            if run is not None and (best is None or run.throughput_ops_s > best.throughput_ops_s):
                                peaks[name, partitions] = run
                        bench.copy_into(peaks.get((name, partitions)), series, PEAK_KIND, title)
            bench.guarded(f"scaling with {partitions} partition(s) on {system.name}", level)
        for name in WORKLOADS:
            found = {p: run.throughput_ops_s for (workload, p), run in peaks.items() if workload == name}
            if found.get(1):
                summary = ", ".join(f"{p}: {found[p]:,.0f} ops/s (x{found[p] / found[1]:.2f})" for p in sorted(found))
                line = f"scaling, {system.name}, {WORKLOADS[name][0]}, peak by partitions per DC: {summary}"
                bench.results.note(line)
                bench.ui.message(line)
