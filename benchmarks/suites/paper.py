"""``--suite paper``: the paper's experiments (Okapi, section 5) at this machine's scale.

For each protocol under a clock skew (10 ms unless ``--clock-skew-ms`` says otherwise) and the
emulated WAN between the paper's three regions: RO-TX over p = 1, 2, 4 .. N partitions (Figures 4,
5), the write-ratio sweep, scalability over 1 .. N partitions (Figure 3), remote update visibility
per DC pair and per destination DC (Figure 6), replication metadata and communication per
operation; and a clock-skew sweep (Figure 4d: "the waiting time is proportional to the clock skew").

The skew sweep runs a fresh cluster per skew level (0, 5, 10, 20 ms; the same DCs, partitions
and ``--clock-skew-model`` as the main cluster) of each system, RO-TX over every partition of the
cluster + PUT (where Cure's slices wait most: a RO-TX waits for the furthest-ahead clock of the
partitions it reads, section 3.2), at one fixed session count (``SKEW_SESSIONS``, 32, capped by
``--max-sessions``: a moderate load, below the peak at most points of the RO-TX sweep in
docs/results/paper, so a stall is mostly the clock wait, not a saturated machine's queueing). It
measures the stall against the skew, not throughput: one run per level, no peak search, no idle
measurement. Series ``paper-skew`` (kind ``clock_skew_ms``); each run records its skew model and
``max_dc_skew_ms``, the largest skew between two servers of one DC, which bounds a Cure slice's
wait. ``--quick`` runs only Cure at 0 and 10 ms and does not load the store (a cluster start costs
seconds on 2 cores, a Cure load more; a slice's clock wait comes before it reads a key,
``okapikv.core.reads.SnapshotReads.on_slice``, so the stall does not depend on the data): the path
is exercised in CI at the cost of two cluster starts (the quick sweep alone, timed around
``_skew_sweep``: 11.2 s and 9.8 s, 2026-12-02 on this 2-core VM loaded by other jobs, load average
9-10).

Every point of the other sweeps is a peak-throughput search (``harness.peak``): the closed-loop sessions
double from ``sessions_start`` until throughput grows less than 5%, the mean latency passes
``--latency-cap-ms`` or the sessions reach ``--max-sessions`` (GentleRain's four times that,
``SESSION_CAP_FACTOR``); the point's figure is the peak (a lower bound where it is the search's
last step and the cap stopped it, which the claims judge inconclusive), with
the sessions it took (the paper reports each system's peak, and blocking systems need more
sessions to reach it). Every step is kept (``*-sessions`` series: Figure 5's latency against
throughput); the peaks form the figures' series. Each cluster's idle CPU is measured before its
first run and subtracted from its runs' CPU per operation. ``suites.paper_figures`` summarizes the
results as the paper states its claims.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from benchmarks.harness.awake import EVERY_S as AWAKE_EVERY_S
from benchmarks.harness.harness import Bench, SystemUnderTest
from benchmarks.harness.options import BenchOptions
from benchmarks.harness.peak import Peak, PeakRule, find_peak
from benchmarks.harness.systems import PAPER_DCS, System
from benchmarks.suites import paper_figures
from okapikv.bench.engine.results import Run
from okapikv.bench.engine.workloads import WorkloadConfig

PAPER_SKEW_MS = 10.0
#: The skew sweep's levels (ms), its session count, and what --quick keeps (module docstring).
SKEW_LEVELS_MS = (0.0, 5.0, 10.0, 20.0)
QUICK_SKEW_LEVELS_MS = (0.0, 10.0)
SKEW_SESSIONS = 32
QUICK_SKEW_SYSTEMS = ("cure",)
MAX_SESSIONS = 1024
#: A system's session cap is ``MAX_SESSIONS`` (or ``--max-sessions``) times this. A closed loop
#: needs throughput x latency sessions (Little's law) to fill a system: GentleRain's RO-TX waits
#: for the furthest DC (65 ms one-way at the paper's WAN, 66-75 ms a RO-TX in the simulator) where
#: Okapi's and Cure's take milliseconds, so at the same throughput it needs several times the
#: sessions, and a common cap would compare a capped GentleRain with the others' knees.
SESSION_CAP_FACTOR = {"gentlerain": 4}
QUICK_MAX_SESSIONS = 8
LATENCY_CAP_MS = 250.0
IDLE_S = 3.0
QUICK_IDLE_S = 0.5


@dataclass(frozen=True, slots=True)
class PaperPlan:
    dcs: tuple[str, ...]
    partitions: int
    skew_ms: float
    rotx_levels: tuple[int, ...]
    write_ratios: tuple[float, ...]
    scale_levels: tuple[int, ...]
    scale_rotx: int
    rotx_rule: PeakRule  # the RO-TX-over-p sweep's peak search (Figures 4 and 5)
    rule: PeakRule  # the write-ratio and scalability sweeps' (quick: one step)
    idle_s: float
    skew_levels: tuple[float, ...]  # the skew sweep (module docstring), ms
    skew_sessions: int
    skew_systems: tuple[str, ...] | None  # the systems it runs on; None: every one
    skew_load: bool  # whether its clusters are loaded first
    cap_factors: dict[str, int]  # a system's session cap over the others' (``SESSION_CAP_FACTOR``)

    def for_system(self, rule: PeakRule, system: str) -> PeakRule:
        """``rule`` with ``system``'s session cap (``SESSION_CAP_FACTOR``)."""
        factor = self.cap_factors.get(system, 1)
        return rule if factor == 1 or rule.max_sessions == rule.start else replace(
            rule, max_sessions=rule.max_sessions * factor)


def paper_plan(o: BenchOptions) -> PaperPlan:
    partitions = o.partitions if o.partitions_given and o.partitions > 1 else (2 if o.quick else 4)
    rotx_levels = tuple(sorted({p for p in (1, 2, 4, 8, 16, 32) if p <= partitions} | {partitions}))
    write_ratios = (0.1, 0.9) if o.quick else (0.05, 0.1, 0.25, 0.5, 0.75, 0.9)
    scale_levels = (1, partitions) if o.quick else tuple(range(1, partitions + 1))
    start = min(o.clients) if o.clients_given else (4 if o.quick else 8)
    cap = o.max_sessions or (QUICK_MAX_SESSIONS if o.quick else MAX_SESSIONS)
    latency_cap = o.latency_cap_ms or LATENCY_CAP_MS
    rotx_rule = PeakRule(min(start, cap), cap, latency_cap)
    # --quick checks the search on the RO-TX sweep; elsewhere it measures one step
    rule = PeakRule(rotx_rule.start, rotx_rule.start if o.quick else cap, latency_cap)
    return PaperPlan(
        dcs=o.dcs or PAPER_DCS, partitions=partitions,
        skew_ms=o.clock_skew_ms if o.clock_skew_ms is not None else PAPER_SKEW_MS,
        rotx_levels=rotx_levels, write_ratios=write_ratios, scale_levels=scale_levels,
        scale_rotx=min(o.rotx_partitions, 2), rotx_rule=rotx_rule, rule=rule,
        idle_s=QUICK_IDLE_S if o.quick else IDLE_S,
        skew_levels=QUICK_SKEW_LEVELS_MS if o.quick else SKEW_LEVELS_MS,
        skew_sessions=min(SKEW_SESSIONS, cap), skew_systems=QUICK_SKEW_SYSTEMS if o.quick else None,
        skew_load=not o.quick, cap_factors={} if o.quick else dict(SESSION_CAP_FACTOR),
    )


def _steps(rule: PeakRule) -> int:
    """The most steps a search makes (a progress estimate; most stop earlier)."""
    return int(math.log2(rule.max_sessions / rule.start)) + 1


def _skew_systems(plan: PaperPlan, systems: tuple[System, ...]) -> list[System]:
    return [system for system in systems if plan.skew_systems is None or system.name in plan.skew_systems]


def planned(options: BenchOptions) -> int:
    plan = paper_plan(options)
    rotx = len(plan.rotx_levels) * min(_steps(plan.rotx_rule), 4)
    other = (len(plan.write_ratios) + len(plan.scale_levels) - 1) * min(_steps(plan.rule), 4)
    skew = 0 if options.connect else len(_skew_systems(plan, options.systems)) * len(plan.skew_levels)
    return len(options.systems) * (rotx + other) + skew


def _search(bench: Bench, sut: SystemUnderTest, workload: WorkloadConfig, rule: PeakRule, *, series: str,
            kind: str, title: str, idle_cores: float | None) -> Peak[Run] | None:
    """One point's peak search: each step recorded in ``series``-sessions, the peak in ``series``."""

    def measure(sessions: int) -> tuple[float, float, Run] | None:
        run = bench.measure(sut, workload, sessions, series=f"{series}-sessions", kind=f"{kind}_sessions",
                            title=f"{title}: every step of the peak search", idle_cores=idle_cores)
        return None if run is None else (run.throughput_ops_s, paper_figures.mean_latency_ms(run), run)

    found: Peak[Run] = find_peak(measure, rule)
    peak = found.peak
    if peak is None:
        return None
    bench.copy_into(peak.run, series, kind, title)
    bench.ui.message(f"  peak {sut.label}: {peak.throughput_ops_s:,.0f} ops/s at {peak.sessions} sessions "
                     f"(stopped: {found.stopped_by})")
    return found


def _skew_sweep(bench: Bench, plan: PaperPlan) -> None:
    """Each system's RO-TX over every partition + PUT on a fresh cluster per skew level, at
    ``plan.skew_sessions`` sessions, into ``paper-skew`` (module docstring)."""
    title = (f"Clock-skew sweep: RO-TX over every partition + PUT at {plan.skew_sessions} sessions, a fresh "
             "cluster per skew (paper, Figure 4d: the stall against the skew)")
    for system in _skew_systems(plan, bench.options.systems):
        for skew_ms in plan.skew_levels:
            def skew_cluster(system: System = system, skew_ms: float = skew_ms) -> None:
                with bench.start(system, plan.dcs, plan.partitions, skew_ms) as sut:
                    if plan.skew_load:
                        bench.load(sut)
                    workload = bench.workload("rotx", sut, rotx_partitions=sut.partitions, write_ratio=None)
                    bench.measure(sut, workload, plan.skew_sessions, series="paper-skew", kind="clock_skew_ms",
                                  title=title)
            bench.guarded(f"skew sweep at {skew_ms:g} ms on {system.name}", skew_cluster)


def run(bench: Bench) -> None:
    o = bench.options
    plan = paper_plan(o)
    bench.results.config["paper_plan"] = {
        "dcs": list(plan.dcs), "partitions": plan.partitions, "clock_skew_ms": plan.skew_ms,
        "clock_skew_model": o.clock_skew_model, "coordinator": o.coordinator,
        "rotx_partitions": list(plan.rotx_levels), "write_ratios": list(plan.write_ratios),
        "scalability_partitions": list(plan.scale_levels),
        "peak_search": {"start_sessions": plan.rotx_rule.start, "max_sessions": plan.rotx_rule.max_sessions,
                        "other_sweeps_max_sessions": plan.rule.max_sessions,
                        "latency_cap_ms": plan.rotx_rule.latency_cap_ms, "growth": plan.rotx_rule.growth,
                        "patience": plan.rotx_rule.patience,
                        "cap_factors": {name: factor for name, factor in plan.cap_factors.items()
                                        if name in {system.name for system in o.systems}}},
        "idle_s": plan.idle_s,
        "idle_awake_every_s": AWAKE_EVERY_S,
        "skew_sweep": {"clock_skew_ms": list(plan.skew_levels), "sessions": plan.skew_sessions,
                       "rotx_partitions": plan.partitions, "loaded": plan.skew_load,
                       "systems": list(plan.skew_systems) if plan.skew_systems is not None else None},
    }
    if o.connect:
        bench.results.note("--connect: protocols and partition counts are the running cluster's; "
                           "the scalability sweep needs fresh clusters and is skipped")
    rotx_title = "RO-TX over p partitions + PUT, peak throughput (paper, Figures 4 and 5)"
    write_title = "Write-ratio sweep: PUT with probability w, else RO-TX, peak throughput (paper, write intensity)"
    scale_title = "Scalability: 2-partition RO-TX + PUT over 1..N partitions, peak throughput (paper, Figure 3)"
    for system in o.systems:
        def main_cluster(system: System = system) -> None:
            with bench.start(system, plan.dcs, plan.partitions, plan.skew_ms) as sut:
                bench.load(sut)
                idle_cores = bench.idle_cpu(sut, plan.idle_s)
                scale_point: Peak[Run] | None = None
                for p in plan.rotx_levels:
                    if p > sut.partitions:
                        continue
                    workload = bench.workload("rotx", sut, rotx_partitions=p, write_ratio=None)
                    peak = _search(bench, sut, workload, plan.for_system(plan.rotx_rule, system.name),
                                   series="paper-rotx-partitions", kind="rotx_partitions", title=rotx_title,
                                   idle_cores=idle_cores)
                    if p == min(plan.scale_rotx, sut.partitions):
                        scale_point = peak
                for ratio in plan.write_ratios:
                    workload = bench.workload("rotx", sut, rotx_partitions=min(plan.scale_rotx, sut.partitions),
                                              write_ratio=ratio)
                    _search(bench, sut, workload, plan.for_system(plan.rule, system.name),
                            series="paper-write-ratio", kind="write_ratio", title=write_title,
                            idle_cores=idle_cores)
                if not o.connect and scale_point is not None and scale_point.peak is not None:
                    bench.copy_into(scale_point.peak.run, "paper-scalability", "partitions", scale_title)
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
                    idle_cores = bench.idle_cpu(sut, plan.idle_s)
                    workload = bench.workload("rotx", sut, rotx_partitions=min(plan.scale_rotx, partitions),
                                              write_ratio=None)
                    _search(bench, sut, workload, plan.for_system(plan.rule, system.name),
                            series="paper-scalability", kind="partitions", title=scale_title,
                            idle_cores=idle_cores)
            bench.guarded(f"scalability with {partitions} partition(s) on {system.name}", scale_cluster)
    if not o.connect:
        _skew_sweep(bench, plan)
    series = bench.results.series.get("paper-scalability")
    if series:
        series.runs.sort(key=lambda run: (run.system, run.partitions))
    bench.results.paper = paper_figures.summarize(bench.results)
