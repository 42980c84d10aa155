"""The paper's experiments (Okapi, section 5) as simulator runs under the cost model, as plain data.

``okapi sim --experiment NAME`` (``benchmarks.sim_experiments`` writes the results files, plots
and report through ``okapi bench``'s path) at 3 DCs x 32 partitions by default:

- ``fig3``: scalability, 2 .. 32 partitions per DC, RO-TX over 2 partitions + PUT: the peak
  throughput of each partition count, and the RO-TX and PUT latency at that peak;
- ``fig4``: RO-TX over p = 1 .. 32 partitions + PUT at 32 partitions: throughput, RO-TX latency,
  and how often and how long requests block, per p; ``fig5``: the same sweep's latency against
  throughput, for p = 1, 4, 16;
- ``write-ratio``: a PUT with probability w, else a RO-TX over 2 partitions, at a fixed load;
- ``visibility``: remote update visibility per DC pair, at a fixed load;
- ``traffic``: replication metadata, stabilization and heartbeat bytes, at a fixed load.

Each sweep point is a peak-throughput sweep as the real suite measures one: the clients double
(from one per partition of each DC, GentleRain from more: ``sweep_start``) until the throughput
grows by less than 5% (``PEAK_GROWTH``) twice in a row (``FLAT_STEPS``), or for ``sweep_steps``
steps (a peak at the last one a lower bound), or until a step is not in a steady state (``steady``:
its throughput and latency break Little's law, so its window measured a transient, not a capacity;
the peak is the best steady step, a lower bound if it was still growing); unchecked runs end with
their measurement (``SimConfig.drain``). Every run
has clock offsets spread over 10 ms (the paper's suite, as
``okapi bench --suite paper`` runs it) and the first run of every system in an experiment is checked
by the history checkers (causal, snapshot, session, convergence): the others run unrecorded, which the
results say (``checked``).

A run's record is a plain dict with ``okapi bench``'s ``Run`` fields that a simulation has (the
throughput and latencies of the measurement window, simulated), plus ``server_stats`` (every
server's counters) and ``visibility_us`` for the bench side to summarise.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from okapikv.sim.config import SimConfig, dc_names, wan_matrix_ms
from okapikv.sim.cost import CostProfile
from okapikv.sim.engine import SimResult
from okapikv.sim.journal import Journal
from okapikv.sim.runner import run_simulation

EXPERIMENTS = ("fig3", "fig4", "fig5", "write-ratio", "visibility", "traffic")
PROTOCOLS = ("okapi", "cure", "gentlerain")
#: systems that are a protocol with other simulator settings, by the name the runs are labelled
#: with (the bench's ``--protocols`` names, ``benchmarks.harness.systems.VARIANTS``, which this
#: layer may not import): ``okapi-piggyback`` computes the USV inside the GSV round (the paper's
#: untried idea, Okapi section 5; ``okapikv.core.stabilization.PiggybackedUsv``)
VARIANTS: dict[str, tuple[str, bool]] = {"okapi-piggyback": ("okapi", True)}
#: a step is flat when doubling the clients raises the throughput by less than this share
PEAK_GROWTH = 0.05
#: a sweep stops after this many flat steps in a row: the knee, not one noisy step
FLAT_STEPS = 2
#: a sweep step is steady when its throughput times its mean latency is within this share of its
#: clients (Little's law for closed-loop clients with no think time, ``steady``)
STEADY_TOLERANCE = 0.10
#: a peak sweep's steps at most, each doubling the clients from its start (``sweep_start``; 128
#: times the start at the last)
MAX_SWEEP_STEPS = 8
#: about how long an Okapi or Cure client takes for a RO-TX and a PUT below saturation (1.1 ms a
#: operation simulated at 3 DCs x 2 partitions, 6 clients, python-quiet); a GentleRain client takes a
#: GentleRain cycle (``gentlerain_cycle_s``), so it needs that many times the clients for the same load
LOCAL_PAIR_S = 0.002
PAPER_SKEW_MS = 10.0
#: the keys of a run, over all its partitions: the real paper suite's 10,000 records
#: (``benchmarks.harness.options``), not the paper's 1 M per partition, which the simulator's
#: per-key tables (and the checked runs' final reads of every key) cannot afford; the load per
#: partition is uniform either way (``okapikv.sim.workload``), only the hottest key's share of its
#: partition differs (zipf 0.99: about 11% at 5,000 keys, 15% at 312, 6.5% at 1 M)
PAPER_RECORDS = 10_000
WRITE_RATIOS = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9)


#: a measurement window holds at least this many GentleRain cycles (``gentlerain_cycle_s``): a
#: GentleRain client completes about one RO-TX per cycle, so a shorter window counts a handful of
#: each client's operations and its start and end weigh on the figure
WINDOW_CYCLES = 10


def gentlerain_cycle_s(dcs: int) -> float:
    """A GentleRain RO-TX's wait: its DC's stable time follows the furthest DC's heartbeats, the
    largest one-way delay of the WAN (65 ms at the paper's; 66-75 ms RO-TXs simulated)."""
    return max(max(row) for row in wan_matrix_ms(dcs)) / 1000


def sweep_start(system: str, dcs: int) -> int:
    """A peak sweep's first clients per partition of each DC: 1, or for GentleRain the power of two
    nearest below its cycle over ``LOCAL_PAIR_S`` (32 at the paper's WAN), so that its sweep starts
    at about the load Okapi's and Cure's start at and reaches its knee within the same steps (its
    throughput is its clients over its cycle until the servers saturate)."""
    if system_settings(system)[0] != "gentlerain":
        return 1
    return 1 << max(0, int(math.log2(gentlerain_cycle_s(dcs) / LOCAL_PAIR_S)))


@dataclass(frozen=True, slots=True)
class Plan:
    """How large an experiment runs: the deployment, the simulated seconds per run, the load. The
    default window (``duration_s - warmup_s``, 0.8 s) holds ``WINDOW_CYCLES`` GentleRain cycles
    and more at the paper's WAN."""

    dcs: int = 3
    partitions: int = 32
    duration_s: float = 1.0
    warmup_s: float = 0.2
    #: the fixed load of write-ratio, visibility and traffic: clients per partition of each DC
    clients_per_partition: int = 8
    protocols: tuple[str, ...] = PROTOCOLS
    seed: int = 1
    #: fig4 and fig5: the RO-TX sizes swept (None: the paper's); fewer for the larger deployments
    rotx_levels: tuple[int, ...] | None = None
    #: a peak sweep's doublings at most (fewer: cheaper, and a peak at the last step a lower bound)
    sweep_steps: int = MAX_SWEEP_STEPS


@dataclass(frozen=True, slots=True)
class Point:
    """One series' point: a system at a cluster shape and a workload (clients: swept or fixed)."""

    series: str
    kind: str
    title: str
    system: str
    partitions: int
    rotx_partitions: int
    write_ratio: float | None = None
    clients: int | None = None  # None: sweep to the peak
    keep: str = "all"  # the sweep's runs the series keeps: all, or peak
    visibility_sample: float = 0.0


def _levels(limit: int, wanted: tuple[int, ...]) -> list[int]:
    return sorted({level for level in wanted if level <= limit} | ({limit} if limit < max(wanted) else set()))


def points(name: str, plan: Plan) -> list[Point]:
    """The points of experiment ``name`` (``EXPERIMENTS``)."""
    n = plan.partitions
    fixed = plan.clients_per_partition * n * plan.dcs
    two = min(2, n)
    if name == "fig3":
        title = "Scalability: 2-partition RO-TX + PUT over 2..N partitions (paper, Figure 3), simulated"
        return [Point("sim-scalability", "partitions", title, system, level, min(2, level), keep="peak")
                for system in plan.protocols for level in _levels(n, (2, 4, 8, 16, 32))]
    if name in ("fig4", "fig5"):
        wanted = plan.rotx_levels or ((1, 2, 4, 8, 16, 32) if name == "fig4" else (1, 4, 16))
        title = f"RO-TX over p partitions + PUT (paper, Figure {name[-1]}), simulated"
        return [Point(f"sim-{name}", "rotx_partitions", title, system, n, p)
                for system in plan.protocols for p in _levels(n, wanted)]
    if name == "write-ratio":
        title = "Write-ratio sweep: PUT with probability w, else RO-TX (paper, write intensity), simulated"
        return [Point("sim-write-ratio", "write_ratio", title, system, n, two, ratio, fixed)
                for system in plan.protocols for ratio in WRITE_RATIOS]
    if name in ("visibility", "traffic"):
        title = f"{'Remote update visibility' if name == 'visibility' else 'Traffic'} at a fixed load, simulated"
        return [Point(f"sim-{name}", "clients", title, system, n, two, None, fixed,
                      visibility_sample=0.2 if name == "visibility" else 0.0) for system in plan.protocols]
    raise ValueError(f"unknown experiment {name!r}: one of {', '.join(EXPERIMENTS)}")


#: the read bounds of the simulated servers in the paper's experiments (``SimConfig.max_concurrent_reads``
#: and ``max_read_items``): past any sweep's load. The paper's servers keep a read that waits for its
#: snapshot; okapikv's refuse reads past an operator's bound (128 at once by default), which at a
#: sweep's largest loads would cap GentleRain's throughput (every RO-TX of it waits about a cycle)
#: by the bound instead of its servers' CPU (docs/simulated.md, "The read bound").
UNBOUNDED_READS = 1 << 30


def system_settings(system: str) -> tuple[str, bool]:
    """The protocol of a system's name and whether it piggybacks the USV (``VARIANTS``)."""
    return VARIANTS.get(system, (system, False))


def config_of(point: Point, plan: Plan, profile: CostProfile, clients: int, *, checked: bool) -> SimConfig:
    protocol, piggyback_usv = system_settings(point.system)
    return SimConfig(
        seed=plan.seed, protocol=protocol, piggyback_usv=piggyback_usv, num_dcs=plan.dcs,
        num_partitions=point.partitions, keys_per_partition=max(1, PAPER_RECORDS // point.partitions),
        num_clients=clients, duration_s=plan.duration_s, warmup_s=plan.warmup_s, clock_skew_ms=PAPER_SKEW_MS,
        think_us_max=0, workload="paper" if point.write_ratio is None else "write-ratio",
        write_ratio=point.write_ratio if point.write_ratio is not None else 0.5,
        rotx_partitions=point.rotx_partitions, invariants=checked,
        # a write's visibility is followed through the history's operations, and known once visible
        record=checked or point.visibility_sample > 0, drain=checked or point.visibility_sample > 0,
        visibility_sample=point.visibility_sample, cost=profile,
        max_concurrent_reads=UNBOUNDED_READS, max_read_items=UNBOUNDED_READS * 64)


def _latency(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)
    count = len(ordered)

    def at(fraction: float) -> float:
        return float(ordered[min(count - 1, int(fraction * count))])

    return {"count": count, "mean_us": round(sum(ordered) / count, 1), "p50_us": at(0.5), "p99_us": at(0.99),
            "p999_us": at(0.999), "max_us": float(ordered[-1])}


def _busy(utilization: list[float] | None) -> dict[str, float]:
    """The busiest and the median machine's share of CPU in the window (a hot server shows)."""
    if not utilization:
        return {}
    ordered = sorted(utilization)
    return {"server_busy_max": round(ordered[-1], 4), "server_busy_median": round(ordered[len(ordered) // 2], 4)}


def record(point: Point, result: SimResult, *, checked: bool, anomalies: int, cpu_s: float) -> dict[str, Any]:
    """A run as ``okapi bench`` records one (``Run`` fields), plus what the bench side summarises."""
    c = result.config
    latency = {kind: _latency(values) for kind, values in sorted(result.latencies_us.items()) if values}
    every = [v for values in result.latencies_us.values() for v in values]
    if every:
        latency = {"all": _latency(every), **latency}
    names = dc_names(c.num_dcs)
    return {
        "system": point.system, "workload": "rotx", "clients": c.num_clients, "processes": 0, "dcs": c.num_dcs,
        "partitions": c.num_partitions, "clock_skew_ms": c.clock_skew_ms, "rotx_partitions": c.rotx_partitions,
        "write_ratio": c.write_ratio if c.workload == "write-ratio" else None, "load": "sim",
        "records": c.num_keys, "duration_s": round(result.window_us / 1e6, 6), "warmup_s": c.warmup_s,
        "operations": result.window_completed, "throughput_ops_s": round(result.throughput_ops_s, 1),
        "errors": dict(sorted(result.window_failed.items())), "last_error": "",
        "overload_retries": result.overload_retries, "latency_us": latency,
        "cpu": {"client_s": 0.0, "client_cores": 0.0, "server_s": None, "server_cores": None,
                "server_cpu_us_per_op": None, **_busy(result.window_cpu_utilization)},
        "server_stats": result.server_stats,
        "window_stats": {"before": result.window_stats_before, "after": result.window_stats_after},
        "simulated_s": result.simulated_us / 1e6,
        "visibility_us": {f"{names[s]}->{names[d]}": values for (s, d), values in result.visibility_us.items()},
        "checked": checked, "anomalies": anomalies, "cpu_s": round(cpu_s, 2), "series": point.series,
    }


#: ``progress``'s argument: a run's record, and whether it came from the journal (not simulated now)
Progress = Callable[[dict[str, Any], bool], None]


def point_key(point: Point) -> str:
    """The journal's key of ``point`` (``okapikv.sim.journal``): every field that sets its runs."""
    return json.dumps([point.series, point.system, point.partitions, point.rotx_partitions, point.write_ratio,
                       point.clients, point.keep, point.visibility_sample])


def run_point(point: Point, plan: Plan, profile: CostProfile, *, check_first: bool,
              progress: Progress, journal: Journal | None = None) -> list[dict[str, Any]]:
    """The point's runs: one at its fixed load, or the peak sweep (every step, or only the peak);
    with ``check_first``, first one more run at the first load, recorded and checked (``checked``),
    which is not a measurement (its counters include its drain). A run ``journal`` holds is taken
    from it, not simulated again; each run simulated is added to it."""
    start = point.clients if point.clients is not None else (
        point.partitions * plan.dcs * sweep_start(point.system, plan.dcs))
    runs: list[dict[str, Any]] = []

    def one(clients: int, checked: bool) -> dict[str, Any]:
        key = f"{point_key(point)} {clients} {int(checked)}"
        run = journal.get(key) if journal is not None else None
        if run is not None:
            progress(run, True)
            return run
        run = _one(point, plan, profile, clients, checked=checked)
        if journal is not None:
            journal.add(key, run)
        progress(run, False)
        return run

    if check_first:
        runs.append(one(start, True))
    measured: list[dict[str, Any]] = []
    unsteady: dict[str, Any] | None = None
    clients = start
    flat = 0
    for _ in range(1 if point.clients is not None else plan.sweep_steps):
        run = one(clients, False)
        if point.clients is None and not steady(run):
            unsteady = run
            break
        measured.append(run)
        if len(measured) > 1:
            grew = run["throughput_ops_s"] >= measured[-2]["throughput_ops_s"] * (1 + PEAK_GROWTH)
            flat = 0 if grew else flat + 1
            if flat >= FLAT_STEPS:
                break
        clients *= 2
    if point.keep == "peak" and measured:
        # the peak carries its sweep's steps, so a reader can tell a knee (the sweep ended on flat
        # steps) from a peak still growing at the sweep's last step (a lower bound), and the step
        # that ended the sweep out of a steady state, if one did
        steps = [[run["clients"], run["throughput_ops_s"]] for run in measured]
        ended = {} if unsteady is None else {"unsteady": [unsteady["clients"], unsteady["throughput_ops_s"],
                                                           little_ratio(unsteady)]}
        measured = [{**max(measured, key=lambda run: run["throughput_ops_s"]), "sweep": steps, **ended}]
    elif unsteady is not None:
        measured.append({**unsteady, "steady": False})
    return runs + measured


def little_ratio(run: dict[str, Any]) -> float:
    """A run's throughput times its mean latency over its clients: 1 in a steady state of closed-loop
    clients with no think time (Little's law: each client has one operation in flight at all times),
    0 when nothing completed."""
    mean_us = run["latency_us"].get("all", {}).get("mean_us", 0.0)
    return round(run["throughput_ops_s"] * mean_us / 1e6 / run["clients"], 4) if run["clients"] else 0.0


def steady(run: dict[str, Any]) -> bool:
    """The run measured a steady state: Little's law holds within ``STEADY_TOLERANCE``. Past it the
    window holds a transient (operations that outlast a large share of the window complete in bursts;
    GentleRain's RO-TXs at loads where its stabilization falls behind), whose count of completions is
    no capacity: a step that fails it ends the sweep."""
    return abs(little_ratio(run) - 1.0) <= STEADY_TOLERANCE


def _one(point: Point, plan: Plan, profile: CostProfile, clients: int, *, checked: bool) -> dict[str, Any]:
    """One run's record, as the journal gives it back (plain JSON: tuples are lists), so a resumed
    experiment's records are those of an uninterrupted one."""
    started = time.process_time()
    outcome = run_simulation(config_of(point, plan, profile, clients, checked=checked), check=checked)
    run = record(point, outcome.result, checked=checked, anomalies=len(outcome.anomalies),
                 cpu_s=time.process_time() - started)
    loaded: dict[str, Any] = json.loads(json.dumps(run))
    return loaded


def _point_in_worker(point: Point, plan: Plan, profile: CostProfile, check_first: bool,
                     journal: Journal | None) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], bool]]]:
    """``run_point`` in a worker process: its runs, and what it reported, for the parent to report."""
    reported: list[tuple[dict[str, Any], bool]] = []
    runs = run_point(point, plan, profile, check_first=check_first,
                     progress=lambda run, reused: reported.append((run, reused)), journal=journal)
    return runs, reported


def run_experiment(name: str, plan: Plan, profile: CostProfile, *,
                   progress: Progress = lambda run, reused: None, journal: Journal | None = None,
                   jobs: int = 1) -> list[dict[str, Any]]:
    """Every run of experiment ``name``; each system's first point begins with its checked run
    (``run_point``), so every protocol and variant compared is judged by the checkers. With
    ``jobs`` above 1 the points run in that many worker processes; the runs, and the order they
    are reported and returned in, are those of one process (each point's runs depend on its own
    configuration only)."""
    todo: list[tuple[Point, bool]] = []
    checked: set[str] = set()
    for point in points(name, plan):
        todo.append((point, point.system not in checked))
        checked.add(point.system)
    runs: list[dict[str, Any]] = []
    if jobs <= 1:
        for point, check_first in todo:
            runs += run_point(point, plan, profile, check_first=check_first, progress=progress, journal=journal)
        return runs
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_point_in_worker, point, plan, profile, check_first,
                               None if journal is None else journal.for_keys(point_key(point) + " "))
                   for point, check_first in todo]
        for future in futures:
            point_runs, reported = future.result()
            for run, reused in reported:
                progress(run, reused)
            runs += point_runs
    return runs
