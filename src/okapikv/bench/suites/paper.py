"""``--suite paper``: the paper's experiments (Okapi, section 5) at this machine's scale.

For each protocol under a clock skew (10 ms unless ``--clock-skew-ms`` says otherwise) and the
emulated WAN between the paper's three regions: RO-TX over p = 1, 2, 4 .. N partitions (Figures 4,
5), the write-ratio sweep, scalability over 1 .. N partitions (Figure 3), remote update visibility
per DC pair (Figure 6), and replication/stabilization traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

from okapikv.bench.engine.harness import Bench
from okapikv.bench.engine.options import BenchOptions
from okapikv.bench.engine.results import Run
from okapikv.bench.engine.systems import PAPER_DCS, System

PAPER_SKEW_MS = 10.0


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


def paper_plan(o: BenchOptions) -> PaperPlan:
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


def planned(options: BenchOptions) -> int:
    plan = paper_plan(options)
    per_system = len(plan.rotx_levels) * len(plan.clients) + len(plan.write_ratios) + len(plan.scale_levels) - 1
    return len(options.systems) * per_system


def run(bench: Bench) -> None:
    o = bench.options
    plan = paper_plan(o)
    bench.results.config["paper_plan"] = {
        "dcs": list(plan.dcs), "partitions": plan.partitions, "clock_skew_ms": plan.skew_ms,
        "rotx_partitions": list(plan.rotx_levels), "write_ratios": list(plan.write_ratios),
        "scalability_partitions": list(plan.scale_levels), "clients": list(plan.clients),
        "fixed_clients": plan.fixed_clients,
    }
    if o.connect:
        bench.results.note("--connect: protocols and partition counts are the running cluster's; "
                           "the scalability sweep needs fresh clusters and is skipped")
    rotx_title = "RO-TX over p partitions + PUT (paper, Figures 4 and 5)"
    write_title = "Write-ratio sweep: PUT with probability w, else RO-TX (paper, write intensity)"
    scale_title = "Scalability: 2-partition RO-TX + PUT over 1..N partitions (paper, Figure 3)"
    for system in o.systems:
        def main_cluster(system: System = system) -> None:
            with bench.start(system, plan.dcs, plan.partitions, plan.skew_ms) as sut:
                bench.load(sut)
                scale_point: Run | None = None
                for p in plan.rotx_levels:
                    if p > sut.partitions:
                        continue
                    for clients in plan.clients:
                        run = bench.measure(sut, bench.workload("rotx", sut, rotx_partitions=p, write_ratio=None),
                                            clients, series="paper-rotx-partitions", kind="rotx_partitions",
                                            title=rotx_title)
                        if p == min(plan.scale_rotx, sut.partitions) and clients == plan.fixed_clients:
                            scale_point = run
                for ratio in plan.write_ratios:
                    bench.measure(sut, bench.workload("rotx", sut, rotx_partitions=min(plan.scale_rotx, sut.partitions),
                                                      write_ratio=ratio),
                                  plan.fixed_clients, series="paper-write-ratio", kind="write_ratio", title=write_title)
                if not o.connect:
                    bench.copy_into(scale_point, "paper-scalability", "partitions", scale_title)
                bench.visibility(sut)
        bench.guarded(f"paper suite on {system.name}", main_cluster)
        if o.connect:
            break
        for partitions in plan.scale_levels:
            if partitions == plan.partitions:
                continue

            def scale_cluster(system: System = system, partitions: int = partitions) -> None:
                with bench.start(system, plan.dcs, partitions, plan.skew_ms) as sut:
                    bench.load(sut)
                    bench.measure(sut, bench.workload("rotx", sut, rotx_partitions=min(plan.scale_rotx, partitions),
                                                      write_ratio=None),
                                  plan.fixed_clients, series="paper-scalability", kind="partitions", title=scale_title)
            bench.guarded(f"scalability with {partitions} partition(s) on {system.name}", scale_cluster)
    series = bench.results.series.get("paper-scalability")
    if series:
        series.runs.sort(key=lambda run: (run.system, run.partitions))
