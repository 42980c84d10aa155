"""The paper suite's summary, as the paper states its claims (Okapi, section 5), and its report
section: results.json's ``paper`` (``Results.paper``), built from the runs by ``summarize``.

- ``peaks``: every peak-throughput search (``harness.peak``): the point (p, w or partitions), the
  peak, the sessions it took, RO-TX and PUT mean latency at it, why the search stopped, each step
  (Figures 3a, 4a, 5), server CPU per operation gross and net of the idle background;
- ``stalls``: at each system's peak per p, RO-TX waits per slice and per transaction (Figure 4c/d
  is per transaction: ``okapikv.core.reads.SnapshotReads._count_stall``) and PUT waits;
- ``skew``: the skew sweep (``suites.paper``): per system and skew level, the same stalls with the
  run's skew model, largest in-DC skew, sessions, throughput and RO-TX latency (Figure 4d against
  the skew);
- ``visibility``: per destination DC, sources pooled, with the distance between the sources'
  medians (``harness.visibility.by_destination``; the pooled-over-everything CDF is in the plots);
- ``metadata``: per replicated update, the paper's formula beside what the links carried
  (``okapikv.server.wire_bytes``);
- ``communication``: per client operation, replication, stabilization (heartbeats included) and
  their total, across the write-ratio sweep (the paper's communication comparison);
- ``idle_cores``: each cluster's CPU with no client, per system and partitions per DC;
- ``claims``: the paper's claims judged on these results (``suites.paper_claims``).

Everything derives from the runs (a search's peak is replayed from its recorded steps), so
``summarize`` of a saved results.json gives its section again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from benchmarks.harness.peak import GROWTH, STOP_FAILED, STOP_SESSIONS, Peak, PeakRule, find_peak
from benchmarks.harness.visibility import by_destination
from benchmarks.suites.paper_claims import Claim, claims, table
from okapikv.bench.engine.report import Section, _fmt, _table
from okapikv.bench.engine.results import Results, Run
from okapikv.bench.engine.stats import wait_of_cause


def _mean_ms(run: Run, kind: str) -> float | None:
    summary = run.latency_us.get(kind)
    return round(summary.mean_us / 1000, 3) if summary and summary.count else None


def _point(run: Run) -> tuple[Any, ...]:
    """What identifies a search's runs: system, cluster shape and workload parameters."""
    return run.system, run.partitions, run.rotx_partitions, run.write_ratio, run.workload


def rules(config: dict[str, Any], system: str = "") -> tuple[PeakRule, PeakRule]:
    """The RO-TX sweep's search rule and the other sweeps', as the run's config recorded them, with
    ``system``'s session cap (``cap_factors``; results without them: one cap for all)."""
    search = config.get("paper_plan", {}).get("peak_search", {})
    start, cap = int(search.get("start_sessions", 1)), int(search.get("max_sessions", 1))
    latency, growth = float(search.get("latency_cap_ms", 1.0)), float(search.get("growth", GROWTH))
    patience = int(search.get("patience", 1))  # results that name none stopped at the first flat step
    other = int(search.get("other_sweeps_max_sessions", cap))
    factor = int(search.get("cap_factors", {}).get(system, 1))
    return (PeakRule(start, cap * factor, latency, growth, patience),
            PeakRule(start, max(start, other * factor if other > start else other), latency, growth, patience))


def lower_bound(found: Peak[Any]) -> bool:
    """The peak is the search's last step and the search ended there on its session cap (or on a
    failed step): the throughput may have gone on growing, so the figure is a lower bound, and a
    claim resting on it is inconclusive (``paper_claims.INCONCLUSIVE``)."""
    peak = found.peak
    return peak is not None and peak is found.steps[-1] and found.stopped_by in (STOP_SESSIONS, STOP_FAILED)


def peaks(results: Results) -> list[dict[str, Any]]:
    """Every point's search, replayed from its recorded steps (the ``*-sessions`` series, in the
    order they ran) by the rule the config recorded: the peak, the sessions it took, why it stopped.
    A pure function of the results, so a saved results.json gives the same summary."""
    steps: dict[tuple[Any, ...], tuple[list[Run], PeakRule]] = {}
    for name, series in results.series.items():
        if name.endswith("-sessions"):
            for run in series.runs:
                rotx_rule, other_rule = rules(results.config, run.system)
                rule = rotx_rule if name == "paper-rotx-partitions-sessions" else other_rule
                steps.setdefault(_point(run), ([], rule))[0].append(run)
    records = []
    for name in ("paper-rotx-partitions", "paper-write-ratio", "paper-scalability"):
        figure = results.series.get(name)
        for peak_run in figure.runs if figure else []:
            runs, rule = steps.get(_point(peak_run), ([peak_run], rules(results.config, peak_run.system)[1]))
            found = find_peak(_replay(runs), rule)
            peak = found.peak
            if peak is None:
                continue
            run = peak.run
            records.append({
                "series": name, "system": run.system, "partitions": run.partitions,
                "rotx_partitions": run.rotx_partitions, "write_ratio": run.write_ratio,
                "sessions": peak.sessions, "throughput_ops_s": peak.throughput_ops_s,
                "mean_latency_ms": round(peak.mean_latency_ms, 3),
                "rotx_mean_ms": _mean_ms(run, "rotx"), "put_mean_ms": _mean_ms(run, "put"),
                "stopped_by": found.stopped_by, "lower_bound": lower_bound(found), "max_sessions": rule.max_sessions,
                "latency_cap_ms": rule.latency_cap_ms, "server_cpu_us_per_op": run.cpu.server_cpu_us_per_op,
                "server_net_cpu_us_per_op": run.cpu.server_net_cpu_us_per_op,
                "steps": [[step.sessions, step.throughput_ops_s, round(step.mean_latency_ms, 3)]
                          for step in found.steps],
            })
    return records


def _replay(runs: list[Run]) -> Callable[[int], tuple[float, float, Run] | None]:
    """A measure function handing out the recorded steps in order (None past the last)."""
    steps = iter(runs)

    def measure(sessions: int) -> tuple[float, float, Run] | None:
        run = next(steps, None)
        return None if run is None else (run.throughput_ops_s, mean_latency_ms(run), run)

    return measure


def mean_latency_ms(run: Run) -> float:
    """The mean over every operation of the run (the peak search's latency cap applies to it)."""
    summaries = [summary for summary in run.latency_us.values() if summary.count]
    count = sum(summary.count for summary in summaries)
    return sum(summary.mean_us * summary.count for summary in summaries) / count / 1000 if count else 0.0


def idle_cores(results: Results) -> dict[str, dict[str, float | None]]:
    """Each cluster's idle CPU, from its runs (``Cpu.server_idle_cores``), by system and partitions."""
    idle: dict[str, dict[str, float | None]] = {}
    for series in results.series.values():
        for run in series.runs:
            if run.cpu.server_idle_cores is not None:
                idle.setdefault(run.system, {})[str(run.partitions)] = run.cpu.server_idle_cores
    return idle


def _wait(run: Run, kind: str) -> tuple[float | None, float | None]:
    wait = (run.waits or {}).get(kind)
    if wait is None:
        return None, None
    return wait.probability, round(wait.mean_us / 1000, 3)


def _causes(run: Run) -> dict[str, float | None]:
    """A PUT's waits by cause (``WRITE_WAIT_CAUSES``): the skew's (the paper's measurement) and the
    clock microsecond's (one baseline write per microsecond), probability and mean (ms; None where
    results predate the split)."""
    waits = {kind: {"probability": w.probability, "mean_us": w.mean_us, "operations": w.operations,
                    "reasons": w.reasons} for kind, w in (run.waits or {}).items()}
    figures: dict[str, float | None] = {}
    for kind, name in (("write_skew", "put_skew"), ("write_tick", "put_tick")):
        wait = wait_of_cause(waits, kind)
        mean_us = None if wait is None else wait["mean_us"]
        figures[f"{name}_probability"] = None if wait is None else wait["probability"]
        figures[f"{name}_mean_ms"] = None if mean_us is None else round(mean_us / 1000, 3)
    return figures


def _put_causes(row: dict[str, Any]) -> list[str]:
    return [f"{_pct(row.get(f'{name}_probability'))} / {_fmt(row.get(f'{name}_mean_ms'), 2)}"
            for name in ("put_skew", "put_tick")]


def stall_rows(results: Results) -> list[dict[str, Any]]:
    series = results.series.get("paper-rotx-partitions")
    rows = []
    for run in series.runs if series else []:
        slice_p, slice_ms = _wait(run, "rotx")
        tx_p, tx_ms = _wait(run, "rotx_tx")
        put_p, put_ms = _wait(run, "write")
        rows.append({"system": run.system, "rotx_partitions": run.rotx_partitions, "sessions": run.clients,
                     "slice_probability": slice_p, "slice_mean_ms": slice_ms, "tx_probability": tx_p,
                     "tx_mean_ms": tx_ms, "put_probability": put_p, "put_mean_ms": put_ms, **_causes(run)})
    return rows


def skew_rows(results: Results) -> list[dict[str, Any]]:
    """The skew sweep's runs (series ``paper-skew``), by system then skew."""
    series = results.series.get("paper-skew")
    rows = []
    for run in sorted(series.runs if series else [], key=lambda run: (run.system, run.clock_skew_ms)):
        slice_p, slice_ms = _wait(run, "rotx")
        tx_p, tx_ms = _wait(run, "rotx_tx")
        put_p, put_ms = _wait(run, "write")
        rows.append({"system": run.system, "clock_skew_ms": run.clock_skew_ms, "clock_skew_model": run.clock_skew_model,
                     "max_dc_skew_ms": run.max_dc_skew_ms, "rotx_partitions": run.rotx_partitions,
                     "sessions": run.clients, "throughput_ops_s": run.throughput_ops_s,
                     "rotx_mean_ms": _mean_ms(run, "rotx"), "tx_probability": tx_p, "tx_mean_ms": tx_ms,
                     "slice_probability": slice_p, "slice_mean_ms": slice_ms, "put_probability": put_p,
                     "put_mean_ms": put_ms, **_causes(run)})
    return rows


def metadata_rows(results: Results) -> list[dict[str, Any]]:
    """Per system, from its run that replicated the most updates."""
    best: dict[str, Run] = {}
    for series in results.series.values():
        for run in series.runs:
            traffic = run.traffic
            if traffic is None or not traffic.updates_replicated:
                continue
            current = best.get(run.system)
            if current is None or traffic.updates_replicated > (current.traffic.updates_replicated
                                                                 if current.traffic else 0):
                best[run.system] = run
    rows = []
    for system, run in best.items():
        traffic = run.traffic
        assert traffic is not None
        rows.append({"system": system, "formula_bytes": traffic.metadata_bytes_per_update,
                     "wire_bytes": traffic.wire_metadata_bytes_per_update,
                     "wire_batch_bytes": traffic.wire_batch_bytes_per_update,
                     "payload_bytes": traffic.payload_bytes_per_update, "updates": traffic.updates_replicated,
                     "partitions": run.partitions, "write_ratio": run.write_ratio, "sessions": run.clients})
    return rows


def communication_rows(results: Results) -> list[dict[str, Any]]:
    series = results.series.get("paper-write-ratio")
    rows = []
    for run in series.runs if series else []:
        traffic = run.traffic
        if traffic is None:
            continue
        rows.append({"system": run.system, "write_ratio": run.write_ratio, "sessions": run.clients,
                     "replication_bytes_per_op": traffic.wire_replication_bytes_per_op,
                     "stabilization_bytes_per_op": traffic.wire_stabilization_bytes_per_op,
                     "total_bytes_per_op": traffic.wire_total_bytes_per_op,
                     "read_bytes_per_op": traffic.wire_read_bytes_per_op})
    return rows


def summarize(results: Results) -> dict[str, Any]:
    """The section (module docstring), from the results alone; ``claims`` judged on them."""
    visibility = {system: [asdict(row) for row in by_destination(
        (pair.source, pair.destination, pair.samples_ms) for pair in pairs)]
        for system, pairs in results.visibility.items()}
    section: dict[str, Any] = {
        "peaks": peaks(results), "stalls": stall_rows(results), "skew": skew_rows(results), "visibility": visibility,
        "metadata": metadata_rows(results), "communication": communication_rows(results),
        "idle_cores": idle_cores(results),
        "idle_awake_every_s": results.config.get("paper_plan", {}).get("idle_awake_every_s")}
    data = results.to_dict()
    data["paper"] = section
    section["claims"] = [asdict(claim) for claim in claims(data)]
    return section


# ---------------------------------------------------------------------------------- the report


def _where(peak: dict[str, Any]) -> str:
    if peak["series"] == "paper-rotx-partitions":
        return f"p = {peak['rotx_partitions']}"
    if peak["series"] == "paper-write-ratio":
        return f"w = {peak['write_ratio']:g}"
    return f"{peak['partitions']} partition(s) per DC"


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1%}"


def _idle_method(awake_every_s: float | None) -> str:
    """How the idle CPU the net figure subtracts was measured (``Bench.idle_cpu``)."""
    if awake_every_s is None:  # a results.json without the field: measured with idle pacing on
        return ("measured right after the bulk load (idle pacing on: the timers backed off), so the net "
                "figure subtracts less than the timers take under load.")
    return (f"measured right after the bulk load with one write every {awake_every_s:g} s holding the "
            "servers at their busy periods (idle pacing off), as their timers run under load.")


def markdown(paper: dict[str, Any]) -> list[str]:
    """The section's report lines (the claims table, ``paper_claims``, is its own section)."""
    lines = ["## The paper's figures (peak throughput, per-transaction stalls, visibility per destination, "
             "bytes on the wire)", "",
             "Each point is a peak-throughput search: closed-loop sessions doubled until throughput grew < 5%, "
             "the mean latency passed the cap or the sessions reached the cap (`stopped`). A peak at the search's "
             "last step stopped by the session cap is a lower bound (`>=`): the claims resting on it are "
             "inconclusive. Server CPU per operation is gross and net of the same servers' CPU with no client, "
             + _idle_method(paper.get("idle_awake_every_s")), ""]
    rows = []
    for peak in paper.get("peaks", []):
        steps = ", ".join(f"{sessions}: {throughput:,.0f}" for sessions, throughput, _ in peak["steps"])
        at_least = ">= " if peak.get("lower_bound") else ""
        rows.append([peak["system"], _where(peak), at_least + _fmt(peak["throughput_ops_s"]), _fmt(peak["sessions"]),
                     _fmt(peak["rotx_mean_ms"], 2), _fmt(peak["put_mean_ms"], 2), peak["stopped_by"],
                     f"{_fmt(peak['server_cpu_us_per_op'])} / {_fmt(peak['server_net_cpu_us_per_op'])}", steps])
    if rows:
        lines += _table(["system", "point", "peak ops/s", "sessions", "RO-TX mean ms", "PUT mean ms", "stopped",
                         "server CPU us/op gross / net", "steps (sessions: ops/s)"], rows)
    idle = paper.get("idle_cores", {})
    if idle:
        lines += ["Idle servers (no client), cores: " + "; ".join(
            f"{system} " + ", ".join(f"{partitions} partition(s) {_fmt(cores, 2)}" for partitions, cores in by.items())
            for system, by in idle.items()), ""]
    stalls = paper.get("stalls", [])
    if stalls:
        lines += ["### RO-TX stalls per transaction and per slice, at each peak (Figure 4c/d)", ""]
        lines += _table(["system", "p", "sessions", "per transaction: P / mean ms", "per slice: P / mean ms",
                         "PUT: P / mean ms", "PUT, skew: P / mean ms", "PUT, same us: P / mean ms"],
                        [[row["system"], _fmt(row["rotx_partitions"]), _fmt(row["sessions"]),
                          f"{_pct(row['tx_probability'])} / {_fmt(row['tx_mean_ms'], 2)}",
                          f"{_pct(row['slice_probability'])} / {_fmt(row['slice_mean_ms'], 2)}",
                          f"{_pct(row['put_probability'])} / {_fmt(row['put_mean_ms'], 2)}", *_put_causes(row)]
                         for row in stalls])
    skew = paper.get("skew", [])
    if skew:
        lines += ["### RO-TX stalls against the clock skew (a fresh cluster per skew)", "",
                  f"RO-TX over every partition (p = {skew[0]['rotx_partitions']}) + PUT at {skew[0]['sessions']} "
                  "sessions, one run per system and skew (not a peak search); the largest in-DC skew bounds a "
                  "Cure slice's wait (series `paper-skew`, paper-skew.csv, waits_vs_clock_skew.png).", ""]
        lines += _table(["system", "skew ms", "model", "largest in-DC skew ms", "ops/s", "RO-TX mean ms",
                         "per transaction: P / mean ms", "per slice: P / mean ms", "PUT: P / mean ms",
                         "PUT, skew: P / mean ms", "PUT, same us: P / mean ms"],
                        [[row["system"], _fmt(row["clock_skew_ms"], 1), str(row["clock_skew_model"] or "-"),
                          _fmt(row["max_dc_skew_ms"], 1), _fmt(row["throughput_ops_s"]), _fmt(row["rotx_mean_ms"], 2),
                          f"{_pct(row['tx_probability'])} / {_fmt(row['tx_mean_ms'], 2)}",
                          f"{_pct(row['slice_probability'])} / {_fmt(row['slice_mean_ms'], 2)}",
                          f"{_pct(row['put_probability'])} / {_fmt(row['put_mean_ms'], 2)}", *_put_causes(row)]
                         for row in skew])
    visibility = paper.get("visibility", {})
    if visibility:
        lines += ["### Remote update visibility per destination DC (sources pooled)", "",
                  "`spread`: the largest minus the smallest of the sources' medians at that destination "
                  "(two modes apart by about that much; near 0: one mode).", ""]
        lines += _table(["system", "destination", "samples", "mean ms", "p50 ms", "p90 ms", "p99 ms",
                         "median per source ms", "spread ms"],
                        [[system, row["destination"], _fmt(row["count"]), _fmt(row["mean_ms"], 1),
                          _fmt(row["p50_ms"], 1), _fmt(row["p90_ms"], 1), _fmt(row["p99_ms"], 1),
                          ", ".join(f"{source} {value:.1f}" for source, value in row["source_p50_ms"].items()),
                          _fmt(row["source_spread_ms"], 1)]
                         for system, per in visibility.items() for row in per])
    metadata = paper.get("metadata", [])
    if metadata:
        lines += ["### Replication metadata per update: the paper's formula and the bytes on the wire", "",
                  "On the wire: an update's `Update` message minus its key and value (protobuf tags, lengths, "
                  "varint timestamps, Cure's dependency vector); batch share: its batch's piggybacked GSV and "
                  "framing over its updates.", ""]
        lines += _table(["system", "formula B", "on the wire B", "+ batch share B", "key + value B", "updates"],
                        [[row["system"], _fmt(row["formula_bytes"], 1), _fmt(row["wire_bytes"], 1),
                          _fmt(row["wire_batch_bytes"], 1), _fmt(row["payload_bytes"], 1), _fmt(row["updates"])]
                         for row in metadata])
    communication = paper.get("communication", [])
    if communication:
        lines += ["### Communication per operation across the write ratio (bytes between servers)", "",
                  "Replication and stabilization (heartbeats included) per client operation at each peak; "
                  "total = the two (the paper's comparison); RO-TX slices inside a DC apart.", ""]
        lines += _table(["system", "w", "replication B/op", "stabilization B/op", "total B/op", "RO-TX slices B/op"],
                        [[row["system"], f"{row['write_ratio']:g}", _fmt(row["replication_bytes_per_op"], 1),
                          _fmt(row["stabilization_bytes_per_op"], 1), _fmt(row["total_bytes_per_op"], 1),
                          _fmt(row["read_bytes_per_op"], 1)] for row in communication])
    judged = paper.get("claims", [])
    if judged:
        lines += ["### The paper's claims against these results (`benchmarks.suites.paper_claims`)", "",
                  table(Claim(**claim) for claim in judged), ""]
    return lines


def csv_files(paper: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    files: dict[str, list[dict[str, Any]]] = {}
    peaks = [{key: value for key, value in peak.items() if key != "steps"} for peak in paper.get("peaks", [])]
    for name, rows in (("paper-peaks.csv", peaks), ("paper-stalls.csv", paper.get("stalls", [])),
                       ("paper-metadata.csv", paper.get("metadata", [])),
                       ("paper-communication.csv", paper.get("communication", []))):
        if rows:
            files[name] = rows
    destinations = [{"system": system, **{k: v for k, v in row.items() if k != "source_p50_ms"},
                     "source_p50_ms": "; ".join(f"{s}={v}" for s, v in row["source_p50_ms"].items())}
                    for system, per in paper.get("visibility", {}).items() for row in per]
    if destinations:
        files["paper-visibility-by-destination.csv"] = destinations
    return files


SECTION = Section("paper", markdown, csv_files)
