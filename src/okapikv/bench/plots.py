"""PNG plots of a results dictionary (matplotlib, Agg backend: no display needed, CI-safe).

One function per figure; each returns the file it wrote, or None when the results hold no data
for it (a course run has no visibility CDF, a custom run no write-ratio sweep). Lines are one per
system (okapi, cure, gentlerain, redis), so protocols compare side by side as in the paper.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
from matplotlib.ticker import MaxNLocator  # noqa: E402

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


def _line(axis: Any, runs: Runs, x: Callable[[dict[str, Any]], Any], y: Callable[[dict[str, Any]], Any],
          label: str, **style: Any) -> None:
    points = sorted((x(run), y(run)) for run in runs if x(run) is not None and y(run) is not None)
    if points:
        axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label, **style)


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
    for axis, series in zip(axes, sweeps, strict=True):
        for system, runs in _by_system(series["runs"]).items():
            _line(axis, runs, lambda r: r["clients"], lambda r: r["throughput_ops_s"], system, color=_color(system))
        _finish(axis, series["title"], "clients", "throughput (ops/s)")
        axis.set_ylim(bottom=0)
    return _save(figure, out, "throughput_vs_clients.png")


def latency_vs_clients(results: dict[str, Any], out: Path) -> str | None:
    sweeps = _series_of_kind(results, "clients")
    if not sweeps:
        return None
    figure, axes = _subplots(len(sweeps))
    for axis, series in zip(axes, sweeps, strict=True):
        for system, runs in _by_system(series["runs"]).items():
            _line(axis, runs, lambda r: r["clients"], lambda r: _latency(r), f"{system} mean", color=_color(system))
            _line(axis, runs, lambda r: r["clients"], lambda r: _latency(r, field="p99_us"), f"{system} p99",
                  color=_color(system), linestyle="--")
        _finish(axis, series["title"], "clients", "latency (ms)")
        axis.set_ylim(bottom=0)
    return _save(figure, out, "latency_vs_clients.png")


def latency_vs_throughput(results: dict[str, Any], out: Path) -> str | None:
    sweeps = _series_of_kind(results, "clients")
    if not sweeps:
        return None
    figure, axes = _subplots(len(sweeps))
    for axis, series in zip(axes, sweeps, strict=True):
        for system, runs in _by_system(series["runs"]).items():
            _line(axis, runs, lambda r: r["throughput_ops_s"], lambda r: _latency(r), system, color=_color(system))
        _finish(axis, series["title"], "throughput (ops/s)", "mean latency (ms)")
        axis.set_ylim(bottom=0)
    return _save(figure, out, "latency_vs_throughput.png")


def single_client(results: dict[str, Any], out: Path) -> str | None:
    singles = _series_of_kind(results, "single")
    if not singles:
        return None
    runs = singles[0]["runs"]
    systems = list(_by_system(runs))
    workloads = sorted({run["workload"] for run in runs})
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
        _finish(axis, "YCSB, one client", "workload", ylabel)
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
    wait = run.get("waits", {}).get(kind)
    if not wait:
        return None
    value = float(wait[field])
    return value / 1000.0 if field == "mean_us" else value


def rotx_sweep(results: dict[str, Any], out: Path) -> str | None:
    series = _series_of_kind(results, "rotx_partitions")
    if not series:
        return None
    figure, axes = _subplots(2)
    for system, runs in _by_system(series[0]["runs"]).items():
        peak = _peak(runs, "rotx_partitions")
        _line(axes[0], peak, lambda r: r["rotx_partitions"], lambda r: r["throughput_ops_s"], system,
              color=_color(system))
        _line(axes[1], peak, lambda r: r["rotx_partitions"], lambda r: _latency(r, "rotx"), system,
              color=_color(system))
    _finish(axes[0], "Peak throughput (Fig. 4a)", "partitions per RO-TX", "throughput (ops/s)")
    _finish(axes[1], "RO-TX mean latency (Fig. 4b)", "partitions per RO-TX", "latency (ms)")
    return _save(figure, out, "rotx_sweep.png")


def waits_vs_rotx_partitions(results: dict[str, Any], out: Path) -> str | None:
    series = _series_of_kind(results, "rotx_partitions")
    if not series:
        return None
    figure, axes = _subplots(2)
    for system, runs in _by_system(series[0]["runs"]).items():
        peak = _peak(runs, "rotx_partitions")
        _line(axes[0], peak, lambda r: r["rotx_partitions"], lambda r: _wait(r, "rotx", "probability"),
              f"{system} RO-TX", color=_color(system))
        _line(axes[0], peak, lambda r: r["rotx_partitions"], lambda r: _wait(r, "write", "probability"),
              f"{system} PUT", color=_color(system), linestyle="--")
        _line(axes[1], peak, lambda r: r["rotx_partitions"], lambda r: _wait(r, "rotx", "mean_us"),
              f"{system} RO-TX", color=_color(system))
        _line(axes[1], peak, lambda r: r["rotx_partitions"], lambda r: _wait(r, "write", "mean_us"),
              f"{system} PUT", color=_color(system), linestyle="--")
    _finish(axes[0], "Probability of blocking (Fig. 4c)", "partitions per RO-TX", "probability")
    _finish(axes[1], "Mean blocking time (Fig. 4d)", "partitions per RO-TX", "ms")
    return _save(figure, out, "waits_vs_rotx_partitions.png")


def rotx_latency_vs_throughput(results: dict[str, Any], out: Path) -> str | None:
    series = _series_of_kind(results, "rotx_partitions")
    if not series:
        return None
    runs = series[0]["runs"]
    levels = sorted({run["rotx_partitions"] for run in runs if run.get("rotx_partitions")})
    figure, axes = _subplots(max(1, len(levels)), width=4.2)
    for axis, level in zip(axes, levels, strict=False):
        for system, mine in _by_system([r for r in runs if r.get("rotx_partitions") == level]).items():
            _line(axis, mine, lambda r: r["throughput_ops_s"], lambda r: _latency(r, "rotx"), system,
                  color=_color(system))
        _finish(axis, f"p = {level} (Fig. 5)", "throughput (ops/s)", "RO-TX mean latency (ms)")
    return _save(figure, out, "rotx_latency_vs_throughput.png")


def write_ratio(results: dict[str, Any], out: Path) -> str | None:
    series = _series_of_kind(results, "write_ratio")
    if not series:
        return None
    figure, axes = _subplots(3)
    for system, runs in _by_system(series[0]["runs"]).items():
        _line(axes[0], runs, lambda r: r["write_ratio"], lambda r: r["throughput_ops_s"], system, color=_color(system))
        _line(axes[1], runs, lambda r: r["write_ratio"], lambda r: _latency(r, "put"), f"{system} PUT",
              color=_color(system))
        _line(axes[1], runs, lambda r: r["write_ratio"], lambda r: _latency(r, "rotx"), f"{system} RO-TX",
              color=_color(system), linestyle="--")
        _line(axes[2], runs, lambda r: r["write_ratio"], lambda r: _wait(r, "write", "probability"), system,
              color=_color(system))
    _finish(axes[0], "Throughput vs write ratio", "write ratio", "throughput (ops/s)")
    _finish(axes[1], "Latency vs write ratio", "write ratio", "mean latency (ms)")
    _finish(axes[2], "PUT blocking probability", "write ratio", "probability")
    return _save(figure, out, "write_ratio.png")


def scalability(results: dict[str, Any], out: Path) -> str | None:
    series = _series_of_kind(results, "partitions")
    if not series:
        return None
    figure, axes = _subplots(3)
    for system, runs in _by_system(series[0]["runs"]).items():
        _line(axes[0], runs, lambda r: r["partitions"], lambda r: r["throughput_ops_s"], system, color=_color(system))
        _line(axes[1], runs, lambda r: r["partitions"], lambda r: _latency(r, "rotx"), system, color=_color(system))
        _line(axes[2], runs, lambda r: r["partitions"], lambda r: _latency(r, "put"), system, color=_color(system))
    _finish(axes[0], "Throughput (Fig. 3a)", "partitions per DC", "throughput (ops/s)")
    _finish(axes[1], "RO-TX mean latency (Fig. 3b)", "partitions per DC", "latency (ms)")
    _finish(axes[2], "PUT mean latency (Fig. 3c)", "partitions per DC", "latency (ms)")
    return _save(figure, out, "scalability.png")


def scaling_peaks(results: dict[str, Any], out: Path) -> str | None:
    """`--suite scaling`: each workload's peak throughput by partitions per DC, against linear
    scaling from its one-partition peak (dashed)."""
    series = _series_of_kind(results, "scaling_peak")
    if not series:
        return None
    figure, axes = _subplots(len(series))
    for axis, one in zip(axes, series, strict=True):
        for system, runs in _by_system(one["runs"]).items():
            _line(axis, runs, lambda r: r["partitions"], lambda r: r["throughput_ops_s"], system, color=_color(system))
            base = next((run["throughput_ops_s"] for run in runs if run["partitions"] == 1), None)
            if base:
                levels = sorted({run["partitions"] for run in runs})
                axis.plot(levels, [base * level for level in levels], linestyle="--", color=_color(system),
                          alpha=0.5, label=f"{system}, linear")
        workload = str(one["title"]).removeprefix("Scalability: peak ").split(" throughput")[0]
        _finish(axis, f"Peak throughput, {workload}", "partitions per DC", "throughput (ops/s)")
    return _save(figure, out, "scaling.png")


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
    _finish(combined, "All pairs (Fig. 6)", "visibility latency (ms)", "CDF")
    return _save(figure, out, "visibility_cdf.png")


def metadata(results: dict[str, Any], out: Path) -> str | None:
    runs = [run for series in results.get("series", {}).values() for run in series.get("runs", [])
            if run.get("traffic") and run["traffic"].get("updates_replicated")]
    if not runs:
        return None
    figure, axes = _subplots(2)
    systems = sorted(_by_system(runs))
    per_update = []
    for system in systems:
        mine = [run for run in runs if run["system"] == system]
        per_update.append(max(run["traffic"]["metadata_bytes_per_update"] for run in mine))
    axes[0].bar(systems, per_update, color=[_color(system) for system in systems])
    _finish(axes[0], "Replication metadata per update", "system", "bytes")
    ratio_runs = [series for series in _series_of_kind(results, "write_ratio")]
    source = ratio_runs[0]["runs"] if ratio_runs else runs
    x_key = "write_ratio" if ratio_runs else "clients"
    for system, mine in _by_system(source).items():
        _line(axes[1], mine, lambda r: r.get(x_key), lambda r: r.get("traffic", {}).get("replication_bytes_per_s"),
              f"{system} replication", color=_color(system))
        _line(axes[1], mine, lambda r: r.get(x_key), lambda r: r.get("traffic", {}).get("stabilization_bytes_per_s"),
              f"{system} stabilization", color=_color(system), linestyle="--")
    _finish(axes[1], "Traffic between servers", x_key.replace("_", " "), "bytes/s")
    return _save(figure, out, "metadata.png")


FIGURES: tuple[Callable[[dict[str, Any], Path], str | None], ...] = (
    single_client,
    throughput_vs_clients,
    latency_vs_clients,
    latency_vs_throughput,
    rotx_sweep,
    waits_vs_rotx_partitions,
    rotx_latency_vs_throughput,
    write_ratio,
    scalability,
    scaling_peaks,
    visibility_cdf,
    metadata,
)


def write_plots(results: dict[str, Any], out: Path) -> list[str]:
    written = []
    for figure in FIGURES:
        name = figure(results, out)
        if name:
            written.append(name)
    return written
