"""``okapi sim --experiment NAME``: the paper's experiments simulated (``okapikv.sim.experiments``),
written as ``okapi bench`` writes its results: results.json, the CSVs, the plots and report.md
(``okapikv.bench.engine.report.write_outputs`` with the paper's figures, ``suites.paper_plots``), so
both share one plotting and reporting path.

The simulator's runs become ``Run`` records: throughput and latencies from the simulated window,
waits and traffic from the servers' own counters over the measurement window (``summarize_waits``,
``summarize_traffic``, as for real servers: cold start and drain left out), each server's share of
CPU in the window (busiest and median), remote visibility from the sampled writes. ``okapi sim``
without ``--experiment`` is ``okapikv.sim.cli.run_sim``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from benchmarks.harness.systems import parse_system
from okapikv.bench.engine.report import write_outputs
from okapikv.bench.engine.results import Results, Run, VisibilityPair
from okapikv.bench.engine.stats import stats_delta, summarize_traffic, summarize_waits
from okapikv.sim.cost import CostProfile, load_profile
from okapikv.sim.experiments import EXPERIMENTS, VARIANTS, Plan, points, run_experiment, sweep_start
from okapikv.sim.journal import FILE as JOURNAL_FILE
from okapikv.sim.journal import Journal, code_digest

#: this machine's Python costs fitted to the quiet machine's paper suite; ``python-server`` is the
#: same fit on a loaded machine, an upper bound (docs/simulated.md, "The profile, and what it is")
DEFAULT_PROFILE = "python-quiet"
DEFAULTS = Plan()


def run_from_record(data: dict[str, Any]) -> Run:
    """A ``Run`` from an experiment's record (its servers' counters summarised as the bench does)."""
    window = data.get("window_stats") or {}
    if window.get("after"):  # the measurement window's counters
        delta = stats_delta({str(index): server for index, server in enumerate(window["after"])},
                            {str(index): server for index, server in enumerate(window["before"])})
        seconds = data["duration_s"]
    else:  # a record without them: the whole run, cold start and drain included
        delta = stats_delta({str(index): server for index, server in enumerate(data["server_stats"])}, {})
        seconds = data["simulated_s"]
    fields = {key: value for key, value in data.items()
              if key not in ("server_stats", "window_stats", "simulated_s", "visibility_us", "checked", "anomalies",
                             "cpu_s", "series")}
    fields["waits"] = {kind: _plain(summary) for kind, summary in summarize_waits(delta).items()}
    fields["traffic"] = _plain(summarize_traffic(delta, seconds))
    fields["server_operations"] = delta.get("operations", {})
    return Run.from_dict(fields)


def _plain(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__dataclass_fields__}


def visibility_pairs(data: dict[str, Any]) -> list[VisibilityPair]:
    pairs = []
    for label, values_us in sorted(data["visibility_us"].items()):
        if not values_us:
            continue
        source, destination = label.split("->")
        ordered = sorted(value / 1000 for value in values_us)

        def at(fraction: float, ordered: list[float] = ordered) -> float:
            return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 2)

        pairs.append(VisibilityPair(source, destination, len(ordered), 0, round(sum(ordered) / len(ordered), 2),
                                    at(0.5), at(0.9), at(0.99), round(ordered[-1], 2), [round(v, 2) for v in ordered]))
    return pairs


def results_of(name: str, plan: Plan, profile: CostProfile, runs: list[dict[str, Any]], command: str, *,
               simulated: int, cpu_s: float) -> Results:
    """The results of ``runs`` (those the series keep); ``simulated`` runs took ``cpu_s`` in all (a
    sweep that keeps only its peak simulated its other steps too)."""
    titles = {point.series: (point.kind, point.title) for point in points(name, plan)}
    results = Results(config={
        "suite": f"sim --experiment {name}", "command": command, "dcs": plan.dcs, "partitions": plan.partitions,
        "duration_s": plan.duration_s, "warmup_s": plan.warmup_s, "protocols": list(plan.protocols),
        "clients_per_partition": plan.clients_per_partition, "sweep_steps": plan.sweep_steps,
        "sweep_start": {system: sweep_start(system, plan.dcs) for system in plan.protocols},
        "cost_profile": profile.to_json()})
    for data in runs:
        if data["checked"]:  # the checkers' run: drained and recorded, not a measurement
            continue
        kind, title = titles[data["series"]]
        results.series_for(data["series"], kind, title).runs.append(run_from_record(data))
        if data["visibility_us"] and name == "visibility":
            results.visibility[data["system"]] = visibility_pairs(data)
    checked = [data for data in runs if data["checked"]]
    results.note(f"simulated (okapikv.sim, cost profile {profile.name}: {profile.source}); latencies and "
                 f"throughput in simulated time; {simulated} runs simulated, {len(runs)} kept, {len(checked)} "
                 f"recorded and checked by the causal, snapshot, session and convergence checkers "
                 f"({sum(d['anomalies'] for d in checked)} anomalies; "
                 + ", ".join(f"{d['system']} at {d['clients']} clients" for d in checked)
                 + ": not in the series, its counters include its drain), the others unrecorded")
    results.note(f"CPU time of the simulation: {cpu_s:.0f} s")
    return results


def _levels(text: str | None) -> tuple[int, ...] | None:
    """``--rotx-levels 1,4,16``: positive RO-TX sizes (``ValueError`` otherwise)."""
    if text is None:
        return None
    try:
        levels = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"--rotx-levels {text!r}: comma-separated partition counts") from None
    if not levels or min(levels) < 1:
        raise ValueError(f"--rotx-levels {text!r}: every level at least 1")
    return levels


def journal_header(name: str, plan: Plan, profile: CostProfile) -> dict[str, Any]:
    """What a journal's runs were made by (``okapikv.sim.journal``): a run of another header differs."""
    return {"experiment": name, "plan": asdict(plan), "cost_profile": profile.to_json(), "code": code_digest()}


def run_experiment_command(args: argparse.Namespace) -> int:
    name = args.experiment
    try:
        if name not in EXPERIMENTS:
            raise ValueError(f"unknown experiment {name!r}: one of {', '.join(EXPERIMENTS)}")
        protocols = tuple(args.protocols.split(","))
        for system in protocols:
            if system not in VARIANTS and parse_system(system).settings():
                raise ValueError(f"the simulator has no {system!r}: one of the protocols or {', '.join(VARIANTS)}")
        profile = load_profile(args.cost or DEFAULT_PROFILE)
        changes = {name: value for name in ("cores", "blocking", "threads")
                   if (value := getattr(args, name, None)) is not None}
        if changes:
            profile = replace(profile, **changes)
            profile.validate()
        plan = Plan(dcs=args.dcs, partitions=args.partitions if args.partitions_given else 32,
                    duration_s=args.duration_s if args.duration_given else DEFAULTS.duration_s,
                    warmup_s=args.warmup_s or DEFAULTS.warmup_s, protocols=protocols,
                    rotx_levels=_levels(args.rotx_levels),
                    sweep_steps=args.sweep_steps if args.sweep_steps is not None else DEFAULTS.sweep_steps)
        if plan.sweep_steps < 1:
            raise ValueError("--sweep-steps must be at least 1")
        if plan.warmup_s >= plan.duration_s:
            raise ValueError("--warmup-s must be below --duration-s")
        jobs = getattr(args, "jobs", 1)
        if jobs < 1:
            raise ValueError("--jobs must be at least 1")
        out = Path(args.out)
        journal = Journal.open(out, journal_header(name, plan, profile), fresh=getattr(args, "fresh", False))
    except ValueError as error:  # JournalMismatch included
        print(f"okapi sim: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    simulated = reused_count = 0
    cpu_s = 0.0

    def progress(run: dict[str, Any], reused: bool) -> None:
        nonlocal simulated, reused_count, cpu_s
        simulated += 1
        reused_count += reused
        cpu_s += run["cpu_s"]
        all_latency = run["latency_us"].get("all", {})
        check = f", checked: {run['anomalies']} anomalies" if run["checked"] else ""
        source = f"{run['cpu_s']:.1f} s CPU" + (f", from {JOURNAL_FILE}" if reused else "")
        print(f"  {run['system']:<10} {run['series']:<18} partitions={run['partitions']} p={run['rotx_partitions']}"
              + (f" w={run['write_ratio']:g}" if run["write_ratio"] is not None else "")
              + f" clients={run['clients']}: {run['throughput_ops_s']:.0f} ops/s, mean "
              f"{all_latency.get('mean_us', 0) / 1000:.1f} ms ({source}{check})", flush=True)

    runs = run_experiment(name, plan, profile, progress=progress, journal=journal, jobs=jobs)
    command = "okapi " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["sim"] else f"okapi sim --experiment {name}"
    results = results_of(name, plan, profile, runs, command, simulated=simulated, cpu_s=cpu_s)
    results.add_time("simulation_cpu_s", cpu_s)
    from benchmarks.suites import paper_plots  # matplotlib: only to draw

    files = write_outputs(results.to_dict(), out, figures=paper_plots.FIGURES)
    print(f"okapi sim --experiment {name}: {simulated} runs ({reused_count} from {out}/{JOURNAL_FILE}) in "
          f"{cpu_s:.0f} s CPU, {time.perf_counter() - started:.0f} s wall; wrote {out}/results.json, report.md, "
          f"{len(files['csv'])} CSV and {len(files['png'])} PNG files")
    bad = sum(d["anomalies"] for d in runs if d["checked"])
    return 0 if not bad else 1
