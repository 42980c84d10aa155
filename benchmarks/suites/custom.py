"""`okapi bench` without ``--suite``: one workload (YCSB a-f or the paper's ``rotx``) at each
``--clients`` count, for each of ``--protocols`` on a fresh cluster (or once against ``--connect``);
or ``--workload memory``: the resident memory per key of one partition server (``harness.memory``).
"""

from __future__ import annotations

from benchmarks.harness.harness import Bench
from benchmarks.harness.memory import run_memory
from benchmarks.harness.options import MEMORY, BenchOptions
from benchmarks.harness.systems import PAPER_DCS, System


def planned(options: BenchOptions) -> int:
    if options.workload == MEMORY:
        return len(options.systems)
    return len(options.systems) * len(options.clients)


def run(bench: Bench) -> None:
    o = bench.options
    if o.workload == MEMORY:
        run_memory(bench)
        return
    default_dcs = PAPER_DCS if o.workload == "rotx" else ("local",)
    dcs = o.dcs or default_dcs
    title = f"{o.workload.upper() if o.workload != 'rotx' else 'RO-TX + PUT'}: clients sweep"
    for system in o.systems:
        def body(system: System = system) -> None:
            with bench.start(system, dcs, o.partitions, o.clock_skew_ms or 0.0) as sut:
                bench.load(sut)
                for clients in o.clients:
                    bench.measure(sut, bench.workload(o.workload, sut), clients, series="custom", kind="clients",
                                  title=title)
                bench.visibility(sut)
        bench.guarded(f"{o.workload} on {system.name}", body)
        if o.connect:
            break
