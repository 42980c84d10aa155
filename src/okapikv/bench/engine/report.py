"""Everything written under ``--out``: results.json, one CSV per series, the plots, report.md.

All of it derives from the serialized results alone (``Results.to_dict()``, the form saved files
have), so a report can be rebuilt from a saved results.json after changing the plots
(``benchmarks.suites.registry.write_outputs`` passes every suite's section and figures), anything that
produces that form gets the same outputs, and the report writer is testable on synthetic results
without running anything.

A suite whose results have a section of their own (``fast``, ``resp``) renders it: it hands the
writer a ``Section`` (its key in the results, its Markdown, its CSV files), so this module knows no
suite.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from okapikv.bench.engine.stats import wait_of_cause

LATENCY_FIELDS = ("mean_us", "p50_us", "p99_us", "p999_us")


def _no_csv(data: Any) -> dict[str, list[dict[str, Any]]]:
    return {}


@dataclass(frozen=True, slots=True)
class Section:
    """A suite's own part of the outputs, written when ``results[key]`` is not empty."""

    key: str
    markdown: Callable[[Any], list[str]]  # the report's lines for ``results[key]``
    csv_files: Callable[[Any], dict[str, list[dict[str, Any]]]] = _no_csv  # file name -> rows

#: The course service's published numbers (their C++ server, their machine): context, not a target.
COURSE_REFERENCE = (
    ("one client, YCSB A-D, F", "about 1,600 ops/s", "mean about 600 us, p99 about 750 us (D: about 1,050 us)"),
    ("one client, YCSB E", "about 550 ops/s", "mean about 1,700 us, p99 about 3,100 us"),
    ("10-85 clients, A and C", "plateau about 18,000 ops/s", "latency grows to about 4.5-5 ms at 85 clients"),
    ("10-85 clients, E", "plateau about 15-16,000 ops/s", ""),
)


def _kinds(runs: Iterable[dict[str, Any]]) -> list[str]:
    order = ("all", "read", "update", "insert", "scan", "rmw", "rotx", "put")
    seen = {kind for run in runs for kind in run.get("latency_us", {})}
    return [kind for kind in order if kind in seen] + sorted(seen - set(order))


def flatten_run(run: dict[str, Any], kinds: list[str]) -> dict[str, Any]:
    """One CSV row: scalar parameters, throughput, latency per kind, waits, traffic, CPU, and a
    durable run's commit groups (``durable_*``)."""
    row: dict[str, Any] = {
        key: run.get(key)
        for key in ("system", "workload", "clients", "processes", "load", "dcs", "partitions", "rotx_partitions",
                    "write_ratio", "clock_skew_ms", "clock_skew_model", "max_dc_skew_ms", "records", "duration_s",
                    "operations", "throughput_ops_s")
    }
    row["errors"] = sum(run.get("errors", {}).values())
    for kind in kinds:
        latency = run.get("latency_us", {}).get(kind, {})
        row[f"{kind}_count"] = latency.get("count", 0)
        for name in LATENCY_FIELDS:
            row[f"{kind}_{name}"] = latency.get(name)
    for kind, wait in sorted(run.get("waits", {}).items()):
        row[f"{kind}_wait_probability"] = wait.get("probability")
        row[f"{kind}_wait_mean_us"] = wait.get("mean_us")
    for name, value in sorted(run.get("traffic", {}).items()):
        row[name] = value
    for name, value in sorted(run.get("cpu", {}).items()):
        row[f"cpu_{name}"] = value
    for name, value in (run.get("durability") or {}).items():
        row[f"durable_{name}"] = value
    return row


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def write_csvs(results: dict[str, Any], out: Path, sections: Sequence[Section] = ()) -> list[str]:
    written: list[str] = []
    for name, series in results.get("series", {}).items():
        runs = series.get("runs", [])
        if not runs:
            continue
        kinds = _kinds(runs)
        filename = f"{name}.csv"
        write_csv(out / filename, [flatten_run(run, kinds) for run in runs])
        written.append(filename)
    if results.get("memory"):
        write_csv(out / "memory.csv", results["memory"])
        written.append("memory.csv")
    for section in sections:
        if results.get(section.key):
            for filename, rows in section.csv_files(results[section.key]).items():
                write_csv(out / filename, rows)
                written.append(filename)
    visibility = results.get("visibility", {})
    if visibility:
        summary_rows: list[dict[str, Any]] = []
        sample_rows: list[dict[str, Any]] = []
        for system, pairs in visibility.items():
            for pair in pairs:
                summary_rows.append({"system": system, **{k: v for k, v in pair.items() if k != "samples_ms"}})
                for index, sample in enumerate(pair.get("samples_ms", [])):
                    sample_rows.append({"system": system, "source": pair["source"],
                                        "destination": pair["destination"], "sample": index, "latency_ms": sample})
        write_csv(out / "visibility.csv", summary_rows)
        write_csv(out / "visibility-samples.csv", sample_rows)
        written += ["visibility.csv", "visibility-samples.csv"]
    return written


# ---------------------------------------------------------------------------------- markdown


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _ms(us: Any) -> str:
    return "-" if us is None else f"{us / 1000:.2f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


#: Series whose runs differ in cluster shape or workload parameters (their tables show them):
#: the paper suite's figures, and every step of their peak searches (``*_sessions``).
SWEPT_KINDS = ("rotx_partitions", "write_ratio", "partitions", "rotx_partitions_sessions",
               "write_ratio_sessions", "partitions_sessions", "clock_skew_ms")


def _causes(waits: dict[str, Any]) -> str:
    """A write's waits by cause (``WRITE_WAIT_CAUSES``): the skew's, the clock microsecond's."""
    skew, tick = wait_of_cause(waits, "write_skew"), wait_of_cause(waits, "write_tick")
    if skew is None or tick is None or not (waits.get("write") or {}).get("operations"):
        return "-"
    return f"{skew['probability']:.1%} / {tick['probability']:.1%}"


def series_table(series: dict[str, Any]) -> list[str]:
    runs = series.get("runs", [])
    kinds = [kind for kind in _kinds(runs) if kind != "all"] or ["all"]
    header = ["system", "workload", "clients"]
    kind = series.get("kind")
    swept = kind in SWEPT_KINDS
    skewed = kind == "clock_skew_ms"  # the paper suite's skew sweep: each run its own skew
    if swept:
        header += ["partitions", "p", "w"] + (["skew ms"] if skewed else [])
    elif len({run.get("partitions") for run in runs}) > 1:  # e.g. the fast suite's 1 -> 2 partitions
        header.append("partitions")
    header += ["ops/s"] + [f"{k} mean/p50/p99/p999 ms" for k in kinds]
    has_waits = any(run.get("waits") for run in runs)
    per_transaction = any((run.get("waits") or {}).get("rotx_tx") for run in runs)
    if has_waits:
        header += ["PUT wait P / mean ms", "of which skew / same-us P", "RO-TX/SCAN wait P / mean ms"]
        if per_transaction:
            header[-1] = "RO-TX/SCAN wait per slice P / mean ms"
            header.append("per transaction P / mean ms")
    header += ["server / client CPU cores", "errors"]
    rows: list[list[str]] = []
    for run in runs:
        row = [str(run.get("system")), str(run.get("workload")), _fmt(run.get("clients"))]
        if swept:
            ratio = run.get("write_ratio")
            row += [_fmt(run.get("partitions")), _fmt(run.get("rotx_partitions")),
                    "alt" if ratio is None else f"{ratio:g}"]
            if skewed:
                row.append(_fmt(run.get("clock_skew_ms"), 1))
        elif "partitions" in header:
            row.append(_fmt(run.get("partitions")))
        row.append(_fmt(run.get("throughput_ops_s")))
        for name in kinds:
            latency = run.get("latency_us", {}).get(name)
            row.append("-" if not latency or not latency.get("count") else
                       "/".join(_ms(latency.get(field)) for field in LATENCY_FIELDS))
        if has_waits:
            for wait_kind in ("write", "causes", "rotx", "rotx_tx") if per_transaction else ("write", "causes", "rotx"):
                waits = run.get("waits") or {}
                if wait_kind == "causes":
                    row.append(_causes(waits))
                    continue
                wait = waits.get(wait_kind)
                row.append("-" if not wait or not wait.get("operations") else
                           f"{wait['probability']:.1%} / {wait['mean_us'] / 1000:.2f}")
        cpu = run.get("cpu", {})
        busy = ("; busiest / median server " f"{cpu['server_busy_max']:.0%} / {cpu['server_busy_median']:.0%}"
                if cpu.get("server_busy_max") is not None and cpu.get("server_busy_median") is not None else "")
        row.append(f"{_fmt(cpu.get('server_cores'), 2)} / {_fmt(cpu.get('client_cores'), 2)}{busy}")
        row.append(_fmt(sum(run.get("errors", {}).values())))
        rows.append(row)
    return _table(header, rows)


def traffic_rows(results: dict[str, Any]) -> list[list[str]]:
    """Replication metadata and stabilization traffic per system: from its highest-write run among
    those with the most partitions per DC. (With one partition per DC, Cure's and GentleRain's
    stabilization round has no one to talk to and sends nothing, which read as a missing figure.)"""
    def rank(run: dict[str, Any]) -> tuple[int, int]:
        return run.get("partitions") or 0, run["traffic"]["updates_replicated"]

    best: dict[str, dict[str, Any]] = {}
    for series in results.get("series", {}).values():
        for run in series.get("runs", []):
            traffic = run.get("traffic")
            if not traffic or not traffic.get("updates_replicated"):
                continue
            current = best.get(run["system"])
            if current is None or rank(run) > rank(current):
                best[run["system"]] = run
    rows = []
    for system, run in sorted(best.items()):
        traffic = run["traffic"]
        rows.append([
            system,
            _fmt(traffic["metadata_bytes_per_update"], 1),
            _fmt(traffic["payload_bytes_per_update"], 1),
            _fmt(traffic["replication_bytes_per_s"]),
            _fmt(traffic["stabilization_bytes_per_s"]),
            _fmt(traffic["heartbeat_bytes_per_s"]),
            _run_label(run),
        ])
    return rows


def _run_label(run: dict[str, Any]) -> str:
    """Which run a row's figures come from: workload, partitions per DC, and the write ratio where
    the run had one (a RO-TX + PUT run without one alternates the two)."""
    parts = [str(run.get("workload")), f"{_fmt(run.get('partitions'))} partition(s) per DC",
             f"{_fmt(run.get('clients'))} clients"]
    ratio = run.get("write_ratio")
    if ratio is not None:
        parts.append(f"write ratio {ratio:g}")
    return ", ".join(parts)


def render_markdown(results: dict[str, Any], plots: list[str], csvs: list[str], *,
                    sections: Sequence[Section] = ()) -> str:
    config = results.get("config", {})
    machine = results.get("machine", {})
    lines = [f"# okapikv benchmark: {config.get('suite') or config.get('workload', 'custom')}"
             + (" (quick: a smoke test, not a measurement)" if config.get("quick") else ""), ""]
    lines += [f"Started {results.get('started_at', '?')}, took {results.get('elapsed_s', '?')} s. "
              f"Command: `{config.get('command', 'okapi bench')}`", ""]
    lines += ["## Machine", ""]
    lines += _table(["cpu", "cores", "memory GiB", "python", "platform"],
                    [[str(machine.get("cpu_model")), _fmt(machine.get("cores")), _fmt(machine.get("memory_gib"), 1),
                      str(machine.get("python")), str(machine.get("platform"))]])
    lines += ["## Configuration", "", "```json", json.dumps(config, indent=2, sort_keys=True, default=str), "```", ""]
    lines += ["Latencies are client-measured, closed loop, in ms. Waits (probability that an operation "
              "blocked, mean duration of a block) are the servers' own counters (Stats RPC) over the "
              "measured window; a PUT's by cause: skew (its dependency ahead of the server's clock, the "
              "paper's measurement) and same-us (the partition's clock microsecond taken by an earlier "
              "write). CPU is in cores (CPU seconds per second of the window).", ""]
    if results.get("notes"):
        lines += ["## Notes", ""] + [f"- {note}" for note in results["notes"]] + [""]
    for name, series in results.get("series", {}).items():
        lines += [f"## {series.get('title', name)}", "", f"Series `{name}` ({name}.csv).", ""]
        lines += series_table(series)
    if any(name.startswith("course") for name in results.get("series", {})):
        lines += ["### The course service's published numbers (their C++ server, their machine)", ""]
        lines += _table(["setting", "throughput", "latency"], [list(row) for row in COURSE_REFERENCE])
    for section in sections:
        if results.get(section.key):
            lines += section.markdown(results[section.key])
    if results.get("memory"):
        lines += ["## Memory per key", "",
                  "Resident set size of the one partition server (in memory, 1 DC x 1 partition) before "
                  "and after loading the keys through the client; B/key loaded is (after - before) / keys.", ""]
        lines += _table(
            ["system", "keys", "key/value bytes", "versions", "RSS before MiB", "RSS after MiB", "peak MiB",
             "B/key loaded", "RSS after / keys", "load s"],
            [[str(row["system"]), _fmt(row["keys"]), f"{row['key_bytes']}/{row['value_bytes']}",
              _fmt(row.get("versions")), _fmt(row["rss_before_bytes"] / 2**20, 1),
              _fmt(row["rss_after_bytes"] / 2**20, 1), _fmt(row["rss_peak_bytes"] / 2**20, 1),
              _fmt(row["bytes_per_key"], 1), _fmt(row["rss_after_per_key"], 1), _fmt(row["load_s"], 1)]
             for row in results["memory"]])
    if results.get("visibility"):
        lines += ["## Remote update visibility latency", "",
                  "Time from a PUT's acknowledgement in the source DC until a fresh session in the "
                  "destination DC reads it (1 ms polling).", ""]
        rows = []
        for system, pairs in results["visibility"].items():
            for pair in pairs:
                rows.append([system, f"{pair['source']} -> {pair['destination']}", _fmt(pair["count"]),
                             _fmt(pair["mean_ms"], 1), _fmt(pair["p50_ms"], 1), _fmt(pair["p90_ms"], 1),
                             _fmt(pair["p99_ms"], 1), _fmt(pair["timeouts"])])
        lines += _table(["system", "pair", "samples", "mean ms", "p50 ms", "p90 ms", "p99 ms", "timeouts"], rows)
    traffic = traffic_rows(results)
    if traffic:
        lines += ["## Replication metadata and stabilization traffic", "",
                  "Per replicated update (per peer it is sent to) and per second over the whole cluster, "
                  "from each system's most write-intensive run.", ""]
        lines += _table(["system", "metadata B/update", "payload B/update", "replication B/s",
                         "stabilization B/s", "heartbeat B/s", "from run"], traffic)
    if plots:
        lines += ["## Plots", ""] + [f"![{plot}]({plot})" for plot in plots] + [""]
    timings = results.get("timings_s")
    if timings:
        lines += ["## Where the time went", ""]
        lines += _table(["phase", "seconds"], [[name, _fmt(value, 1)] for name, value in sorted(timings.items())])
    lines += ["## Files", "", "- results.json"] + [f"- {name}" for name in csvs + plots] + [""]
    return "\n".join(lines)


def write_outputs(results: dict[str, Any], out: Path, *, sections: Sequence[Section] = (),
                  figures: Sequence[Callable[[dict[str, Any], Path], str | None]] = (),
                  plots: bool = True) -> dict[str, list[str]]:
    """Write results.json, the CSVs, the PNGs (the engine's figures and a suite's ``figures``) and
    report.md into ``out``; returns the file names. (matplotlib is imported here, not with the
    module: only drawing needs it.)"""
    from okapikv.bench.engine import plots as plotting

    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    csvs = write_csvs(results, out, sections)
    pngs = plotting.write_plots(results, out, figures) if plots else []
    timings = {**results.get("timings_s", {}), "outputs_s": round(time.monotonic() - started, 2)}
    results = {**results, "timings_s": timings, "files": {"csv": csvs, "png": pngs, "report": "report.md"}}
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    (out / "report.md").write_text(render_markdown(results, pngs, csvs, sections=sections), encoding="utf-8")
    return {"csv": csvs, "png": pngs}
