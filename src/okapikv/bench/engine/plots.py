"""PNG plots of a results dictionary (matplotlib, Agg backend: no display needed, CI-safe).

One function per figure; each returns the file it wrote, or None when the results hold no data
for it (a course run has no visibility CDF, a custom run no write-ratio sweep). Lines are one per
system (okapi, cure, gentlerain, redis), so protocols compare side by side as in the paper.

A plot must mean something, so none is drawn from too little or from runs that do not belong
together: a line needs at least two points, at distinct x values, all from one series (a line
through two runs at the same x, or through runs of different series, joins measurements that its
axis does not tell apart); a bar chart needs at least two bars; a figure with nothing left to draw
is not written. Mean and p99 latency go to separate panels rather than to two styles of one colour.
A latency-vs-throughput line joins its points in order of offered load (clients, the variable the
runs differ in), each labelled with its client count: joined in order of measured throughput, a
load past saturation (throughput flat or falling, latency rising) zigzags between unrelated loads.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from okapikv.bench.engine.stats import WRITE_WAIT_CAUSES, wait_of_cause

Runs = list[dict[str, Any]]
COLORS = {"okapi": "tab:blue", "cure": "tab:orange", "gentlerain": "tab:green", "redis": "tab:red",
          "eventual": "tab:purple", "memory": "tab:gray", "okapi-piggyback": "tab:cyan",
          "okapi-bounded": "tab:olive"}


def _color(system: str) -> str:
    """A system's color; one more for a system the table does not name (a plot must not fail)."""
    return COLORS.get(system, "tab:brown")


def _series_of_kind(results: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    every = results.get("series", {}).values()
    return [series for series in every if series.get("kind") == kind and series.get("runs")]


def _by_system(runs: Runs) -> dict[str, Runs]:
    grouped: dict[str, Runs] = defaultdict(list)
    for run in runs:
        grouped[str(run.get("system"))].append(run)
    return dict(grouped)


def _latency(run: dict[str, Any], kind: str = "all", field: str = "mean_us") -> float | None:
    latency = run.get("latency_us", {}).get(kind)
    if not latency or not latency.get("count"):
        return None
    return float(latency[field]) / 1000.0


def _save(figure: Any, out: Path, name: str) -> str:
    figure.tight_layout()
    figure.savefig(out / name, dpi=100)
    plt.close(figure)
    return name


#: Fewest points (bars) a line (bar chart) needs to compare anything.
MIN_POINTS = 2


def _points(runs: Runs, x: Callable[[dict[str, Any]], Any], y: Callable[[dict[str, Any]], Any],
            order: Callable[[dict[str, Any]], Any] | None = None) -> list[tuple[Any, Any, dict[str, Any]]]:
    """The (x, y, run) points of ``runs`` in order of ``order`` (default: x), or none when a line
    through them would mean nothing: fewer than ``MIN_POINTS``, or two runs at the same place in
    that order (repeats, or unrelated runs)."""
    key = order or x
    ranked = sorted(((key(run), x(run), y(run), run) for run in runs if x(run) is not None and y(run) is not None),
                    key=lambda point: point[0])
    if len(ranked) < MIN_POINTS or len({point[0] for point in ranked}) < len(ranked):
        return []
    return [(px, py, run) for _, px, py, run in ranked]


def _line(axis: Any, runs: Runs, x: Callable[[dict[str, Any]], Any], y: Callable[[dict[str, Any]], Any],
          label: str, *, annotate: Callable[[dict[str, Any]], str] | None = None,
          order: Callable[[dict[str, Any]], Any] | None = None, **style: Any) -> bool:
    """Plot one line (see ``_points``); ``annotate`` labels each point. Whether it drew one."""
    points = _points(runs, x, y, order)
    if not points:
        return False
    style.setdefault("marker", "o")
    axis.plot([p[0] for p in points], [p[1] for p in points], label=label, **style)
    if annotate is not None:
        for px, py, run in points:
            axis.annotate(annotate(run), (px, py), textcoords="offset points", xytext=(3, 3), fontsize=7)
    return True


def _save_drawn(figure: Any, drawn: bool, out: Path, name: str) -> str | None:
    """Save ``figure`` if anything was drawn on it, else discard it."""
    if not drawn:
        plt.close(figure)
        return None
    return _save(figure, out, name)


def _subplots(count: int, width: float = 5.0, height: float = 3.6) -> tuple[Any, list[Any]]:
    figure, axes = plt.subplots(1, count, figsize=(width * count, height), squeeze=False)
    return figure, list(axes[0])


def _finish(axis: Any, title: str, xlabel: str, ylabel: str) -> None:
    if xlabel in ("clients", "partitions per RO-TX", "partitions per DC"):
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_title(title, fontsize=10)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.grid(True, alpha=0.3)
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize=8)


# ------------------------------------------------------------------------------- clients sweeps


def throughput_vs_clients(results: dict[str, Any], out: Path) -> str | None:
    sweeps = _series_of_kind(results, "clients")
    if not sweeps:
        return None
    figure, axes = _subplots(len(sweeps))
    drawn = False
    for axis, series in zip(axes, sweeps, strict=True):
        for system, runs in _by_system(series["runs"]).items():
            drawn |= _line(axis, runs, lambda r: r["clients"], lambda r: r["throughput_ops_s"], system,
                           color=_color(system))
        _finish(axis, series["title"], "clients", "throughput (ops/s)")
        axis.set_ylim(bottom=0)
    return _save_drawn(figure, drawn, out, "throughput_vs_clients.png")


def latency_vs_clients(results: dict[str, Any], out: Path) -> str | None:
    """Mean latency (top row) and p99 latency (bottom row) against clients, one column per sweep."""
    sweeps = _series_of_kind(results, "clients")
    if not sweeps:
        return None
    figure, grid = plt.subplots(2, len(sweeps), figsize=(5.0 * len(sweeps), 6.4), squeeze=False)
    drawn = False
    for column, series in enumerate(sweeps):
        for row, (field, name) in enumerate((("mean_us", "mean"), ("p99_us", "p99"))):
            axis = grid[row][column]
            latency = functools.partial(_latency, field=field)
            for system, runs in _by_system(series["runs"]).items():
                drawn |= _line(axis, runs, lambda r: r["clients"], latency, system, color=_color(system))
            _finish(axis, f"{series['title']}: {name}", "clients", f"{name} latency (ms)")
            axis.set_ylim(bottom=0)
    return _save_drawn(figure, drawn, out, "latency_vs_clients.png")


def latency_vs_throughput(results: dict[str, Any], out: Path) -> str | None:
    """Mean latency against throughput, points joined in order of clients (the offered load) and
    labelled with it."""
    sweeps = _series_of_kind(results, "clients")
    if not sweeps:
        return None
    figure, axes = _subplots(len(sweeps))
    drawn = False
    for axis, series in zip(axes, sweeps, strict=True):
        for system, runs in _by_system(series["runs"]).items():
            drawn |= _line(axis, runs, lambda r: r["throughput_ops_s"], lambda r: _latency(r), system,
                           color=_color(system), annotate=lambda r: str(r["clients"]), order=lambda r: r["clients"])
        _finish(axis, f"{series['title']} (labels: clients)", "throughput (ops/s)", "mean latency (ms)")
        axis.set_ylim(bottom=0)
    return _save_drawn(figure, drawn, out, "latency_vs_throughput.png")


def single_client(results: dict[str, Any], out: Path) -> str | None:
    """The one-client runs (the course suite's YCSB A-F), one bar per system and workload. A
    ``single`` series of many clients (the fast suite's repeated rounds) is a table, not this."""
    singles = [series for series in _series_of_kind(results, "single")
               if all(run.get("clients") == 1 for run in series["runs"])]
    if not singles:
        return None
    runs = singles[0]["runs"]
    systems = list(_by_system(runs))
    workloads = sorted({run["workload"] for run in runs})
    if len({(run["system"], run["workload"]) for run in runs}) < len(runs) or len(runs) < MIN_POINTS:
        return None  # repeated runs of one system and workload: which bar would be the figure?
    figure, axes = _subplots(2)
    width = 0.8 / max(1, len(systems))
    for index, system in enumerate(systems):
        mine = {run["workload"]: run for run in runs if run["system"] == system}
        xs = [position + index * width for position in range(len(workloads))]
        axes[0].bar(xs, [mine[w]["throughput_ops_s"] if w in mine else 0 for w in workloads], width,
                    label=system, color=_color(system))
        axes[1].bar(xs, [(_latency(mine[w]) or 0) if w in mine else 0 for w in workloads], width,
                    label=system, color=_color(system))
    for axis, ylabel in zip(axes, ("throughput (ops/s)", "mean latency (ms)"), strict=True):
        axis.set_xticks([p + width * (len(systems) - 1) / 2 for p in range(len(workloads))])
        axis.set_xticklabels([w.replace("ycsb-", "").upper() for w in workloads])
        _finish(axis, singles[0]["title"], "workload", ylabel)
    return _save(figure, out, "single_client.png")


# ------------------------------------------------------------------------------- the paper's figures


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
    series = _series_of_kind(results, "rotx_partitions")
    if not series:
        return None
    figure, axes = _subplots(2)
    drawn = False
    for system, runs in _by_system(series[0]["runs"]).items():
        peak = _peak(runs, "rotx_partitions")
        drawn |= _line(axes[0], peak, lambda r: r["rotx_partitions"], lambda r: r["throughput_ops_s"], system,
                       color=_color(system), annotate=lambda r: f"{r['clients']}s")
        drawn |= _line(axes[1], peak, lambda r: r["rotx_partitions"], lambda r: _latency(r, "rotx"), system,
                       color=_color(system))
    _finish(axes[0], "Peak throughput (Fig. 4a; labels: sessions)", "partitions per RO-TX", "throughput (ops/s)")
    _finish(axes[1], "RO-TX mean latency (Fig. 4b)", "partitions per RO-TX", "latency (ms)")
    return _save_drawn(figure, drawn, out, "rotx_sweep.png")


def _waits_against(results: dict[str, Any], out: Path, kind: str, xlabel: str, titles: tuple[str, str],
                   name: str) -> str | None:
    """Probability (left) and mean duration (right) of RO-TX and PUT waits against the variable of
    the ``kind`` series (its runs' field of that name), per system at its best run per value:
    RO-TX per transaction (thick) where recorded, per slice, PUT by cause (its dependency ahead of the
    clock: skew; the clock microsecond taken: same us, ``WRITE_WAIT_CAUSES``). The largest in-DC skew its runs
    had is drawn beside the durations where it varies (it bounds a Cure slice's wait)."""
    series = _series_of_kind(results, kind)
    if not series:
        return None
    figure, axes = _subplots(2)
    drawn = False

    def x(run: dict[str, Any]) -> Any:
        return run.get(kind)

    for system, runs in _by_system(series[0]["runs"]).items():
        peak = _peak(runs, kind)
        per_transaction = any((run.get("waits") or {}).get("rotx_tx") for run in peak)
        if per_transaction:
            drawn |= _line(axes[0], peak, x, lambda r: _wait(r, "rotx_tx", "probability"), f"{system} RO-TX per tx",
                           color=_color(system), linewidth=2.5)
            drawn |= _line(axes[1], peak, x, lambda r: _wait(r, "rotx_tx", "mean_us"), f"{system} RO-TX per tx",
                           color=_color(system), linewidth=2.5)
        slice_label = f"{system} RO-TX" + (" per slice" if per_transaction else "")
        slice_style = ":" if per_transaction else "-"
        for axis, field in zip(axes, ("probability", "mean_us"), strict=True):
            drawn |= _line(axis, peak, x, functools.partial(_wait, kind="rotx", field=field), slice_label,
                           color=_color(system), linestyle=slice_style)
            drawn |= _line(axis, peak, x, functools.partial(_wait, kind="write_skew", field=field),
                           f"{system} PUT, skew", color=_color(system), linestyle="--", marker="s")
            drawn |= _line(axis, peak, x, functools.partial(_wait, kind="write_tick", field=field),
                           f"{system} PUT, same us", color=_color(system), linestyle="-.", marker="x")
    runs = series[0]["runs"]
    if len({run.get("max_dc_skew_ms") for run in runs}) > 1:
        first = next(iter(_by_system(runs).values()))
        _line(axes[1], first, x, lambda r: r.get("max_dc_skew_ms"), "largest in-DC skew", color="black",
              linestyle="-.", marker="x", alpha=0.6)
    _finish(axes[0], titles[0], xlabel, "probability")
    _finish(axes[1], titles[1], xlabel, "ms")
    return _save_drawn(figure, drawn, out, name)


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
    series = _series_of_kind(results, "rotx_partitions_sessions") or _series_of_kind(results, "rotx_partitions")
    if not series:
        return None
    runs = series[0]["runs"]
    levels = sorted({run["rotx_partitions"] for run in runs if run.get("rotx_partitions")})
    figure, axes = _subplots(max(1, len(levels)), width=4.2)
    drawn = False
    for axis, level in zip(axes, levels, strict=False):
        for system, mine in _by_system([r for r in runs if r.get("rotx_partitions") == level]).items():
            drawn |= _line(axis, mine, lambda r: r["throughput_ops_s"], lambda r: _latency(r, "rotx"), system,
                           color=_color(system), annotate=lambda r: str(r["clients"]), order=lambda r: r["clients"])
        _finish(axis, f"p = {level} (Fig. 5; labels: clients)", "throughput (ops/s)", "RO-TX mean latency (ms)")
    return _save_drawn(figure, drawn, out, "rotx_latency_vs_throughput.png")


def write_ratio(results: dict[str, Any], out: Path) -> str | None:
    series = _series_of_kind(results, "write_ratio")
    if not series:
        return None
    figure, axes = _subplots(3)
    drawn = False
    for system, runs in _by_system(series[0]["runs"]).items():
        drawn |= _line(axes[0], runs, lambda r: r["write_ratio"], lambda r: r["throughput_ops_s"], system,
                       color=_color(system))
        drawn |= _line(axes[1], runs, lambda r: r["write_ratio"], lambda r: _latency(r, "put"), f"{system} PUT",
                       color=_color(system))
        drawn |= _line(axes[1], runs, lambda r: r["write_ratio"], lambda r: _latency(r, "rotx"), f"{system} RO-TX",
                       color=_color(system), linestyle="--", marker="s")
        drawn |= _line(axes[2], runs, lambda r: r["write_ratio"], lambda r: _wait(r, "write_skew", "probability"),
                       f"{system}, skew", color=_color(system))
        drawn |= _line(axes[2], runs, lambda r: r["write_ratio"], lambda r: _wait(r, "write_tick", "probability"),
                       f"{system}, same us", color=_color(system), linestyle="-.", marker="x")
    _finish(axes[0], "Throughput vs write ratio", "write ratio", "throughput (ops/s)")
    _finish(axes[1], "Latency vs write ratio", "write ratio", "mean latency (ms)")
    _finish(axes[2], "PUT blocking probability by cause", "write ratio", "probability")
    return _save_drawn(figure, drawn, out, "write_ratio.png")


def scalability(results: dict[str, Any], out: Path) -> str | None:
    series = _series_of_kind(results, "partitions")
    if not series:
        return None
    figure, axes = _subplots(3)
    drawn = False
    for system, runs in _by_system(series[0]["runs"]).items():
        drawn |= _line(axes[0], runs, lambda r: r["partitions"], lambda r: r["throughput_ops_s"], system,
                       color=_color(system), annotate=lambda r: f"{r['clients']}s")
        drawn |= _line(axes[1], runs, lambda r: r["partitions"], lambda r: _latency(r, "rotx"), system,
                       color=_color(system))
        drawn |= _line(axes[2], runs, lambda r: r["partitions"], lambda r: _latency(r, "put"), system,
                       color=_color(system))
    _finish(axes[0], "Peak throughput (Fig. 3a; labels: sessions)", "partitions per DC", "throughput (ops/s)")
    _finish(axes[1], "RO-TX mean latency (Fig. 3b)", "partitions per DC", "latency (ms)")
    _finish(axes[2], "PUT mean latency (Fig. 3c)", "partitions per DC", "latency (ms)")
    return _save_drawn(figure, drawn, out, "scalability.png")


def scaling_peaks(results: dict[str, Any], out: Path) -> str | None:
    """`--suite scaling`: each workload's peak throughput by partitions per DC, against linear
    scaling from its one-partition peak (dashed)."""
    series = _series_of_kind(results, "scaling_peak")
    if not series:
        return None
    figure, axes = _subplots(len(series))
    drawn = False
    for axis, one in zip(axes, series, strict=True):
        for system, runs in _by_system(one["runs"]).items():
            line = _line(axis, runs, lambda r: r["partitions"], lambda r: r["throughput_ops_s"], system,
                         color=_color(system))
            drawn |= line
            base = next((run["throughput_ops_s"] for run in runs if run["partitions"] == 1), None)
            if base and line:
                levels = sorted({run["partitions"] for run in runs})
                axis.plot(levels, [base * level for level in levels], linestyle="--", color=_color(system),
                          alpha=0.5, label=f"{system}, linear")
        workload = str(one["title"]).removeprefix("Scalability: peak ").split(" throughput")[0]
        _finish(axis, f"Peak throughput, {workload}", "partitions per DC", "throughput (ops/s)")
    return _save_drawn(figure, drawn, out, "scaling.png")


def visibility_cdf(results: dict[str, Any], out: Path) -> str | None:
    visibility = {system: pairs for system, pairs in results.get("visibility", {}).items() if pairs}
    if not visibility:
        return None
    figure, axes = _subplots(len(visibility) + 1, width=4.2)
    for axis, (system, pairs) in zip(axes, visibility.items(), strict=False):
        for pair in pairs:
            values = sorted(pair.get("samples_ms", []))
            if values:
                axis.plot(values, [(i + 1) / len(values) for i in range(len(values))],
                          label=f"{pair['source']}->{pair['destination']}")
        _finish(axis, f"{system}: per DC pair", "visibility latency (ms)", "CDF")
    combined = axes[-1]
    for system, pairs in visibility.items():
        values = sorted(v for pair in pairs for v in pair.get("samples_ms", []))
        if values:
            combined.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=system,
                          color=_color(system))
    _finish(combined, "All pairs pooled (the claim is per destination)", "visibility latency (ms)", "CDF")
    return _save(figure, out, "visibility_cdf.png")


def visibility_by_destination(results: dict[str, Any], out: Path) -> str | None:
    """One panel per destination DC: each system's CDF with its sources pooled (thick), and each
    source's alone (thin, same colour): the paper's claim is per destination (bimodal where the
    latency depends on the source, ``engine.visibility.by_destination``)."""
    visibility = {system: pairs for system, pairs in results.get("visibility", {}).items() if pairs}
    destinations = list(dict.fromkeys(pair["destination"] for pairs in visibility.values() for pair in pairs))
    if not destinations:
        return None
    figure, axes = _subplots(len(destinations), width=4.2)
    for axis, destination in zip(axes, destinations, strict=True):
        for system, pairs in visibility.items():
            mine = [pair for pair in pairs if pair["destination"] == destination]
            pooled = sorted(v for pair in mine for v in pair.get("samples_ms", []))
            if pooled:
                axis.plot(pooled, [(i + 1) / len(pooled) for i in range(len(pooled))], label=f"{system} (pooled)",
                          color=_color(system), linewidth=2)
            for pair in mine:
                values = sorted(pair.get("samples_ms", []))
                if values:
                    axis.plot(values, [(i + 1) / len(values) for i in range(len(values))], color=_color(system),
                              linewidth=0.8, alpha=0.5, linestyle=":")
        _finish(axis, f"at {destination} (dotted: one source DC each)", "visibility latency (ms)", "CDF")
    return _save(figure, out, "visibility_by_destination.png")


def metadata(results: dict[str, Any], out: Path) -> str | None:
    """Replication metadata per update, one bar per system (at least two systems), and the traffic
    between servers across the write-ratio sweep (the one series whose runs differ in how much they
    write). Without a second system or that sweep, the panel is left out; with neither, the figure."""
    runs = [run for series in results.get("series", {}).values() for run in series.get("runs", [])
            if run.get("traffic") and run["traffic"].get("updates_replicated")]
    systems = sorted(_by_system(runs))
    sweeps = _series_of_kind(results, "write_ratio")
    panels = (["bars"] if len(systems) >= MIN_POINTS else []) + (["traffic"] if sweeps else [])
    if not panels:
        return None
    figure, axes = _subplots(len(panels))
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
                         bottom=bottoms, label=label, alpha=alpha, color=[_color(system) for system in systems])
        axis.set_xticks([position + width / 2 for position in range(len(systems))])
        axis.set_xticklabels(systems)
        _finish(axis, "Replication metadata per update", "system", "bytes")
        drawn = True
    if "traffic" in panels:
        axis = axes[panels.index("traffic")]
        for system, mine in _by_system(sweeps[0]["runs"]).items():
            drawn |= _line(axis, mine, lambda r: r.get("write_ratio"),
                           lambda r: r.get("traffic", {}).get("replication_bytes_per_s"),
                           f"{system} replication", color=_color(system))
            drawn |= _line(axis, mine, lambda r: r.get("write_ratio"),
                           lambda r: r.get("traffic", {}).get("stabilization_bytes_per_s"),
                           f"{system} stabilization", color=_color(system), linestyle="--", marker="s")
        _finish(axis, "Traffic between servers", "write ratio", "bytes/s")
    return _save_drawn(figure, drawn, out, "metadata.png")


FIGURES: tuple[Callable[[dict[str, Any], Path], str | None], ...] = (
    single_client,
    throughput_vs_clients,
    latency_vs_clients,
    latency_vs_throughput,
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


def write_plots(results: dict[str, Any], out: Path) -> list[str]:
    written = []
    for figure in FIGURES:
        name = figure(results, out)
        if name:
            written.append(name)
    return written
