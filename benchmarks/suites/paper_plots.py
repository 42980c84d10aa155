"""The paper's figures (Okapi, section 5) and the scaling suite's, drawn from a results dictionary
on the engine's plotting rules (``okapikv.bench.engine.plots``: no line through too few points or
unrelated runs, no figure with nothing drawn): the RO-TX sweeps and their waits (Fig. 4, 5), the
write-ratio sweep, scalability (Fig. 3), the remote visibility CDFs and the replication metadata.
``registry.write_outputs`` hands them to the engine's report.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from okapikv.bench.engine.plots import (
    MIN_POINTS,
    Figure,
    Runs,
    by_system,
    color_of,
    draw_line,
    finish,
    latency_ms,
    save,
    save_drawn,
    series_of_kind,
    subplots,
)
from okapikv.bench.engine.stats import WRITE_WAIT_CAUSES, wait_of_cause


def _peak(runs: Runs, key: str) -> Runs:
    """Per value of ``key``, the run with the highest throughput (the paper's "peak throughput")."""
    best: dict[Any, dict[str, Any]] = {}
    for run in runs:
        value = run.get(key)
        if value is not None and (value not in best or run["throughput_ops_s"] > best[value]["throughput_ops_s"]):
            best[value] = run
    return list(best.values())


def _wait(run: dict[str, Any], kind: str, field: str) -> float | None:
    waits = run.get("waits") or {}
    wait = wait_of_cause(waits, kind) if kind in WRITE_WAIT_CAUSES else waits.get(kind)
    figure = wait.get(field) if wait else None
    if figure is None:
        return None
    value = float(figure)
    return value / 1000.0 if field == "mean_us" else value


def rotx_sweep(results: dict[str, Any], out: Path) -> str | None:
    series = series_of_kind(results, "rotx_partitions")
    if not series:
        return None
    figure, axes = subplots(2)
    drawn = False
    for system, runs in by_system(series[0]["runs"]).items():
        peak = _peak(runs, "rotx_partitions")
        drawn |= draw_line(axes[0], peak, lambda r: r["rotx_partitions"], lambda r: r["throughput_ops_s"], system,
                       color=color_of(system), annotate=lambda r: f"{r['clients']}s")
        drawn |= draw_line(axes[1], peak, lambda r: r["rotx_partitions"], lambda r: latency_ms(r, "rotx"), system,
                       color=color_of(system))
    finish(axes[0], "Peak throughput (Fig. 4a; labels: sessions)", "partitions per RO-TX", "throughput (ops/s)")
    finish(axes[1], "RO-TX mean latency (Fig. 4b)", "partitions per RO-TX", "latency (ms)")
    return save_drawn(figure, drawn, out, "rotx_sweep.png")


def _waits_against(results: dict[str, Any], out: Path, kind: str, xlabel: str, titles: tuple[str, str],
                   name: str) -> str | None:
    """Probability (left) and mean duration (right) of RO-TX and PUT waits against the variable of
    the ``kind`` series (its runs' field of that name), per system at its best run per value:
    RO-TX per transaction (thick) where recorded, per slice, PUT by cause (its dependency ahead of the
    clock: skew; the clock microsecond taken: same us, ``WRITE_WAIT_CAUSES``). The largest in-DC skew its runs
    had is drawn beside the durations where it varies (it bounds a Cure slice's wait)."""
    series = series_of_kind(results, kind)
    if not series:
        return None
    figure, axes = subplots(2)
    drawn = False

    def x(run: dict[str, Any]) -> Any:
        return run.get(kind)

    for system, runs in by_system(series[0]["runs"]).items():
        peak = _peak(runs, kind)
        per_transaction = any((run.get("waits") or {}).get("rotx_tx") for run in peak)
        if per_transaction:
            drawn |= draw_line(axes[0], peak, x, lambda r: _wait(r, "rotx_tx", "probability"), f"{system} RO-TX per tx",
                           color=color_of(system), linewidth=2.5)
            drawn |= draw_line(axes[1], peak, x, lambda r: _wait(r, "rotx_tx", "mean_us"), f"{system} RO-TX per tx",
                           color=color_of(system), linewidth=2.5)
        slice_label = f"{system} RO-TX" + (" per slice" if per_transaction else "")
        slice_style = ":" if per_transaction else "-"
        for axis, field in zip(axes, ("probability", "mean_us"), strict=True):
            drawn |= draw_line(axis, peak, x, functools.partial(_wait, kind="rotx", field=field), slice_label,
                           color=color_of(system), linestyle=slice_style)
            drawn |= draw_line(axis, peak, x, functools.partial(_wait, kind="write_skew", field=field),
                           f"{system} PUT, skew", color=color_of(system), linestyle="--", marker="s")
            drawn |= draw_line(axis, peak, x, functools.partial(_wait, kind="write_tick", field=field),
                           f"{system} PUT, same us", color=color_of(system), linestyle="-.", marker="x")
    runs = series[0]["runs"]
    if len({run.get("max_dc_skew_ms") for run in runs}) > 1:
        first = next(iter(by_system(runs).values()))
        draw_line(axes[1], first, x, lambda r: r.get("max_dc_skew_ms"), "largest in-DC skew", color="black",
              linestyle="-.", marker="x", alpha=0.6)
    finish(axes[0], titles[0], xlabel, "probability")
    finish(axes[1], titles[1], xlabel, "ms")
    return save_drawn(figure, drawn, out, name)


def waits_vs_rotx_partitions(results: dict[str, Any], out: Path) -> str | None:
    return _waits_against(results, out, "rotx_partitions", "partitions per RO-TX",
                          ("Probability of blocking (Fig. 4c)", "Mean blocking time (Fig. 4d)"),
                          "waits_vs_rotx_partitions.png")


def waits_vs_clock_skew(results: dict[str, Any], out: Path) -> str | None:
    """The paper suite's skew sweep: the stall against the clock skew (Fig. 4d's "proportional to
    the clock skew"), a fresh cluster per skew."""
    return _waits_against(results, out, "clock_skew_ms", "clock skew (ms)",
                          ("Probability of blocking vs clock skew", "Mean blocking time vs clock skew"),
                          "waits_vs_clock_skew.png")


def rotx_latency_vs_throughput(results: dict[str, Any], out: Path) -> str | None:
    """Figure 5: RO-TX latency against throughput per p, from every step of the peak searches (or,
    in results without them, the sweep's own runs)."""
    series = series_of_kind(results, "rotx_partitions_sessions") or series_of_kind(results, "rotx_partitions")
    if not series:
        return None
    runs = series[0]["runs"]
    levels = sorted({run["rotx_partitions"] for run in runs if run.get("rotx_partitions")})
    figure, axes = subplots(max(1, len(levels)), width=4.2)
    drawn = False
    for axis, level in zip(axes, levels, strict=False):
        for system, mine in by_system([r for r in runs if r.get("rotx_partitions") == level]).items():
            drawn |= draw_line(axis, mine, lambda r: r["throughput_ops_s"], lambda r: latency_ms(r, "rotx"), system,
                           color=color_of(system), annotate=lambda r: str(r["clients"]), order=lambda r: r["clients"])
        finish(axis, f"p = {level} (Fig. 5; labels: clients)", "throughput (ops/s)", "RO-TX mean latency (ms)")
    return save_drawn(figure, drawn, out, "rotx_latency_vs_throughput.png")


def write_ratio(results: dict[str, Any], out: Path) -> str | None:
    series = series_of_kind(results, "write_ratio")
    if not series:
        return None
    figure, axes = subplots(3)
    drawn = False
    for system, runs in by_system(series[0]["runs"]).items():
        drawn |= draw_line(axes[0], runs, lambda r: r["write_ratio"], lambda r: r["throughput_ops_s"], system,
                       color=color_of(system))
        drawn |= draw_line(axes[1], runs, lambda r: r["write_ratio"], lambda r: latency_ms(r, "put"), f"{system} PUT",
                       color=color_of(system))
        drawn |= draw_line(axes[1], runs, lambda r: r["write_ratio"], lambda r: latency_ms(r, "rotx"),
                           f"{system} RO-TX", color=color_of(system), linestyle="--", marker="s")
        drawn |= draw_line(axes[2], runs, lambda r: r["write_ratio"], lambda r: _wait(r, "write_skew", "probability"),
                       f"{system}, skew", color=color_of(system))
        drawn |= draw_line(axes[2], runs, lambda r: r["write_ratio"], lambda r: _wait(r, "write_tick", "probability"),
                       f"{system}, same us", color=color_of(system), linestyle="-.", marker="x")
    finish(axes[0], "Throughput vs write ratio", "write ratio", "throughput (ops/s)")
    finish(axes[1], "Latency vs write ratio", "write ratio", "mean latency (ms)")
    finish(axes[2], "PUT blocking probability by cause", "write ratio", "probability")
    return save_drawn(figure, drawn, out, "write_ratio.png")


def scalability(results: dict[str, Any], out: Path) -> str | None:
    series = series_of_kind(results, "partitions")
    if not series:
        return None
    figure, axes = subplots(3)
    drawn = False
    for system, runs in by_system(series[0]["runs"]).items():
        drawn |= draw_line(axes[0], runs, lambda r: r["partitions"], lambda r: r["throughput_ops_s"], system,
                       color=color_of(system), annotate=lambda r: f"{r['clients']}s")
        drawn |= draw_line(axes[1], runs, lambda r: r["partitions"], lambda r: latency_ms(r, "rotx"), system,
                       color=color_of(system))
        drawn |= draw_line(axes[2], runs, lambda r: r["partitions"], lambda r: latency_ms(r, "put"), system,
                       color=color_of(system))
    finish(axes[0], "Peak throughput (Fig. 3a; labels: sessions)", "partitions per DC", "throughput (ops/s)")
    finish(axes[1], "RO-TX mean latency (Fig. 3b)", "partitions per DC", "latency (ms)")
    finish(axes[2], "PUT mean latency (Fig. 3c)", "partitions per DC", "latency (ms)")
    return save_drawn(figure, drawn, out, "scalability.png")


def scaling_peaks(results: dict[str, Any], out: Path) -> str | None:
    """`--suite scaling`: each workload's peak throughput by partitions per DC, against linear
    scaling from its one-partition peak (dashed)."""
    series = series_of_kind(results, "scaling_peak")
    if not series:
        return None
    figure, axes = subplots(len(series))
    drawn = False
    for axis, one in zip(axes, series, strict=True):
        for system, runs in by_system(one["runs"]).items():
            line = draw_line(axis, runs, lambda r: r["partitions"], lambda r: r["throughput_ops_s"], system,
                         color=color_of(system))
            drawn |= line
            base = next((run["throughput_ops_s"] for run in runs if run["partitions"] == 1), None)
            if base and line:
                levels = sorted({run["partitions"] for run in runs})
                axis.plot(levels, [base * level for level in levels], linestyle="--", color=color_of(system),
                          alpha=0.5, label=f"{system}, linear")
        workload = str(one["title"]).removeprefix("Scalability: peak ").split(" throughput")[0]
        finish(axis, f"Peak throughput, {workload}", "partitions per DC", "throughput (ops/s)")
    return save_drawn(figure, drawn, out, "scaling.png")


def visibility_cdf(results: dict[str, Any], out: Path) -> str | None:
    visibility = {system: pairs for system, pairs in results.get("visibility", {}).items() if pairs}
    if not visibility:
        return None
    figure, axes = subplots(len(visibility) + 1, width=4.2)
    for axis, (system, pairs) in zip(axes, visibility.items(), strict=False):
        for pair in pairs:
            values = sorted(pair.get("samples_ms", []))
            if values:
                axis.plot(values, [(i + 1) / len(values) for i in range(len(values))],
                          label=f"{pair['source']}->{pair['destination']}")
        finish(axis, f"{system}: per DC pair", "visibility latency (ms)", "CDF")
    combined = axes[-1]
    for system, pairs in visibility.items():
        values = sorted(v for pair in pairs for v in pair.get("samples_ms", []))
        if values:
            combined.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=system,
                          color=color_of(system))
    finish(combined, "All pairs pooled (the claim is per destination)", "visibility latency (ms)", "CDF")
    return save(figure, out, "visibility_cdf.png")


def visibility_by_destination(results: dict[str, Any], out: Path) -> str | None:
    """One panel per destination DC: each system's CDF with its sources pooled (thick), and each
    source's alone (thin, same colour): the paper's claim is per destination (bimodal where the
    latency depends on the source, ``engine.visibility.by_destination``)."""
    visibility = {system: pairs for system, pairs in results.get("visibility", {}).items() if pairs}
    destinations = list(dict.fromkeys(pair["destination"] for pairs in visibility.values() for pair in pairs))
    if not destinations:
        return None
    figure, axes = subplots(len(destinations), width=4.2)
    for axis, destination in zip(axes, destinations, strict=True):
        for system, pairs in visibility.items():
            mine = [pair for pair in pairs if pair["destination"] == destination]
            pooled = sorted(v for pair in mine for v in pair.get("samples_ms", []))
            if pooled:
                axis.plot(pooled, [(i + 1) / len(pooled) for i in range(len(pooled))], label=f"{system} (pooled)",
                          color=color_of(system), linewidth=2)
            for pair in mine:
                values = sorted(pair.get("samples_ms", []))
                if values:
                    axis.plot(values, [(i + 1) / len(values) for i in range(len(values))], color=color_of(system),
                              linewidth=0.8, alpha=0.5, linestyle=":")
        finish(axis, f"at {destination} (dotted: one source DC each)", "visibility latency (ms)", "CDF")
    return save(figure, out, "visibility_by_destination.png")


def metadata(results: dict[str, Any], out: Path) -> str | None:
    """Replication metadata per update, one bar per system (at least two systems), and the traffic
    between servers across the write-ratio sweep (the one series whose runs differ in how much they
    write). Without a second system or that sweep, the panel is left out; with neither, the figure."""
    runs = [run for series in results.get("series", {}).values() for run in series.get("runs", [])
            if run.get("traffic") and run["traffic"].get("updates_replicated")]
    systems = sorted(by_system(runs))
    sweeps = series_of_kind(results, "write_ratio")
    panels = (["bars"] if len(systems) >= MIN_POINTS else []) + (["traffic"] if sweeps else [])
    if not panels:
        return None
    figure, axes = subplots(len(panels))
    drawn = False
    if "bars" in panels:
        axis = axes[panels.index("bars")]
        bars = (("metadata_bytes_per_update", "paper's formula", 1.0),
                ("wire_metadata_bytes_per_update", "on the wire", 0.7),
                ("wire_batch_bytes_per_update", "+ batch share", 0.4))
        width = 0.8 / len(bars)
        for index, (name, label, alpha) in enumerate(bars):
            heights = [max((run["traffic"].get(name) or 0.0) for run in runs if run["system"] == system)
                       for system in systems]
            bottoms = [0.0] * len(systems)
            if name == "wire_batch_bytes_per_update":  # stacked on the wire figure
                bottoms = [max((run["traffic"].get("wire_metadata_bytes_per_update") or 0.0)
                               for run in runs if run["system"] == system) for system in systems]
                index = 1
            if any(heights):
                axis.bar([position + index * width for position in range(len(systems))], heights, width,
                         bottom=bottoms, label=label, alpha=alpha, color=[color_of(system) for system in systems])
        axis.set_xticks([position + width / 2 for position in range(len(systems))])
        axis.set_xticklabels(systems)
        finish(axis, "Replication metadata per update", "system", "bytes")
        drawn = True
    if "traffic" in panels:
        axis = axes[panels.index("traffic")]
        for system, mine in by_system(sweeps[0]["runs"]).items():
            drawn |= draw_line(axis, mine, lambda r: r.get("write_ratio"),
                           lambda r: r.get("traffic", {}).get("replication_bytes_per_s"),
                           f"{system} replication", color=color_of(system))
            drawn |= draw_line(axis, mine, lambda r: r.get("write_ratio"),
                           lambda r: r.get("traffic", {}).get("stabilization_bytes_per_s"),
                           f"{system} stabilization", color=color_of(system), linestyle="--", marker="s")
        finish(axis, "Traffic between servers", "write ratio", "bytes/s")
    return save_drawn(figure, drawn, out, "metadata.png")


FIGURES: tuple[Figure, ...] = (
    rotx_sweep,
    waits_vs_rotx_partitions,
    waits_vs_clock_skew,
    rotx_latency_vs_throughput,
    write_ratio,
    scalability,
    scaling_peaks,
    visibility_cdf,
    visibility_by_destination,
    metadata,
)
