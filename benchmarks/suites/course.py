"""``--suite course``: the course service's measurements (YCSB A-F with one client, then A, C and E
with 1, 10, 25, 40, 55, 70 and 85 clients), with a Redis reference line driven by the same load
generator when redis-server and redis-py are installed (``harness.redis_ref``).
"""

from __future__ import annotations

from benchmarks.harness.harness import Bench
from benchmarks.harness.options import BenchOptions
from benchmarks.harness.redis_ref import unavailable_reason
from benchmarks.harness.systems import REDIS_SYSTEM, System
from okapikv.bench.engine.results import Run

COURSE_CLIENTS = (1, 10, 25, 40, 55, 70, 85)
COURSE_CLIENTS_QUICK = (1, 10, 40, 85)


def _levels(options: BenchOptions) -> tuple[int, ...]:
    if options.clients_given:
        return tuple(sorted(set(options.clients) | {1}))
    return COURSE_CLIENTS_QUICK if options.quick else COURSE_CLIENTS


def planned(options: BenchOptions) -> int:
    systems = len(options.systems) + (1 if options.redis and unavailable_reason() is None else 0)
    return systems * (6 + 3 * len([n for n in _levels(options) if n != 1]))


def run(bench: Bench) -> None:
    o = bench.options
    levels = _levels(o)
    systems: list[System] = list(o.systems)
    reason = unavailable_reason() if o.redis else "--no-redis"
    if reason is None:
        systems.append(REDIS_SYSTEM)
    else:
        bench.results.note(f"Redis reference skipped: {reason}")
        bench.ui.message(f"Redis reference skipped: {reason}")
    dcs = o.dcs or ("local",)
    for system in systems:
        def body(system: System = system) -> None:
            with bench.start(system, dcs, o.partitions, o.clock_skew_ms or 0.0) as sut:
                bench.load(sut)
                single: dict[str, Run | None] = {}
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
        bench.guarded(f"course suite on {system.name}", body)
    series = bench.results.series.get("course-single")
    if series:  # report A-F in order whatever order they ran in
        series.runs.sort(key=lambda run: (run.system, run.workload))
