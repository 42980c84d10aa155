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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

Runs = list[dict[str, Any]]
COLORS = {"okapi": "tab:blue", "cure": "tab:orange", "gentlerain": "tab:green", "redis": "tab:red",
          "eventual": "tab:purple", "memory": "tab:gray", "okapi-piggyback": "tab:cyan",
          "okapi-bounded": "tab:olive"}


def color_of(system: str) -> str:
    """A system's color; one more for a system the table does not name (a plot must not fail)."""
    return COLORS.get(system, "tab:brown")


def series_of_kind(results: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    every = results.get("series", {}).values()
    return [series for series in every if series.get("kind") == kind and series.get("runs")]


def by_system(runs: Runs) -> dict[str, Runs]:
    grouped: dict[str, Runs] = defaultdict(list)
    for run in runs:
        grouped[str(run.get("system"))].append(run)
    return dict(grouped)


def latency_ms(run: dict[str, Any], kind: str = "all", field: str = "mean_us") -> float | None:
    latency = run.get("latency_us", {}).get(kind)
    if not latency or not latency.get("count"):
        return None
    return float(latency[field]) / 1000.0


def save(figure: Any, out: Path, name: str) -> str:
    figure.tight_layout()
    figure.savefig(out / name, dpi=100)
    plt.close(figure)
    return name


#: Fewest points (bars) a line (bar chart) needs to compare anything.
MIN_POINTS = 2


def line_points(runs: Runs, x: Callable[[dict[str, Any]], Any], y: Callable[[dict[str, Any]], Any],
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


def draw_line(axis: Any, runs: Runs, x: Callable[[dict[str, Any]], Any], y: Callable[[dict[str, Any]], Any],
          label: str, *, annotate: Callable[[dict[str, Any]], str] | None = None,
          order: Callable[[dict[str, Any]], Any] | None = None, **style: Any) -> bool:
    """Plot one line (see ``line_points``); ``annotate`` labels each point. Whether it drew one."""
    points = line_points(runs, x, y, order)
    if not points:
        return False
    style.setdefault("marker", "o")
    axis.plot([p[0] for p in points], [p[1] for p in points], label=label, **style)
    if annotate is not None:
        for px, py, run in points:
            axis.annotate(annotate(run), (px, py), textcoords="offset points", xytext=(3, 3), fontsize=7)
    return True


def save_drawn(figure: Any, drawn: bool, out: Path, name: str) -> str | None:
    """Save ``figure`` if anything was drawn on it, else discard it."""
    if not drawn:
        plt.close(figure)
        return None
    return save(figure, out, name)


def subplots(count: int, width: float = 5.0, height: float = 3.6) -> tuple[Any, list[Any]]:
    figure, axes = plt.subplots(1, count, figsize=(width * count, height), squeeze=False)
    return figure, list(axes[0])


def finish(axis: Any, title: str, xlabel: str, ylabel: str) -> None:
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
    sweeps = series_of_kind(results, "clients")
    if not sweeps:
        return None
    figure, axes = subplots(len(sweeps))
    drawn = False
    for axis, series in zip(axes, sweeps, strict=True):
        for system, runs in by_system(series["runs"]).items():
            drawn |= draw_line(axis, runs, lambda r: r["clients"], lambda r: r["throughput_ops_s"], system,
                           color=color_of(system))
        finish(axis, series["title"], "clients", "throughput (ops/s)")
        axis.set_ylim(bottom=0)
    return save_drawn(figure, drawn, out, "throughput_vs_clients.png")


def latency_vs_clients(results: dict[str, Any], out: Path) -> str | None:
    """Mean latency (top row) and p99 latency (bottom row) against clients, one column per sweep."""
    sweeps = series_of_kind(results, "clients")
    if not sweeps:
        return None
    figure, grid = plt.subplots(2, len(sweeps), figsize=(5.0 * len(sweeps), 6.4), squeeze=False)
    drawn = False
    for column, series in enumerate(sweeps):
        for row, (field, name) in enumerate((("mean_us", "mean"), ("p99_us", "p99"))):
            axis = grid[row][column]
            latency = functools.partial(latency_ms, field=field)
            for system, runs in by_system(series["runs"]).items():
                drawn |= draw_line(axis, runs, lambda r: r["clients"], latency, system, color=color_of(system))
            finish(axis, f"{series['title']}: {name}", "clients", f"{name} latency (ms)")
            axis.set_ylim(bottom=0)
    return save_drawn(figure, drawn, out, "latency_vs_clients.png")


def latency_vs_throughput(results: dict[str, Any], out: Path) -> str | None:
    """Mean latency against throughput, points joined in order of clients (the offered load) and
    labelled with it."""
    sweeps = series_of_kind(results, "clients")
    if not sweeps:
        return None
    figure, axes = subplots(len(sweeps))
    drawn = False
    for axis, series in zip(axes, sweeps, strict=True):
        for system, runs in by_system(series["runs"]).items():
            drawn |= draw_line(axis, runs, lambda r: r["throughput_ops_s"], lambda r: latency_ms(r), system,
                           color=color_of(system), annotate=lambda r: str(r["clients"]), order=lambda r: r["clients"])
        finish(axis, f"{series['title']} (labels: clients)", "throughput (ops/s)", "mean latency (ms)")
        axis.set_ylim(bottom=0)
    return save_drawn(figure, drawn, out, "latency_vs_throughput.png")


def single_client(results: dict[str, Any], out: Path) -> str | None:
    """The one-client runs (the course suite's YCSB A-F), one bar per system and workload. A
    ``single`` series of many clients (the fast suite's repeated rounds) is a table, not this."""
    singles = [series for series in series_of_kind(results, "single")
               if all(run.get("clients") == 1 for run in series["runs"])]
    if not singles:
        return None
    runs = singles[0]["runs"]
    systems = list(by_system(runs))
    workloads = sorted({run["workload"] for run in runs})
    if len({(run["system"], run["workload"]) for run in runs}) < len(runs) or len(runs) < MIN_POINTS:
        return None  # repeated runs of one system and workload: which bar would be the figure?
    figure, axes = subplots(2)
    width = 0.8 / max(1, len(systems))
    for index, system in enumerate(systems):
        mine = {run["workload"]: run for run in runs if run["system"] == system}
        xs = [position + index * width for position in range(len(workloads))]
        axes[0].bar(xs, [mine[w]["throughput_ops_s"] if w in mine else 0 for w in workloads], width,
                    label=system, color=color_of(system))
        axes[1].bar(xs, [(latency_ms(mine[w]) or 0) if w in mine else 0 for w in workloads], width,
                    label=system, color=color_of(system))
    for axis, ylabel in zip(axes, ("throughput (ops/s)", "mean latency (ms)"), strict=True):
        axis.set_xticks([p + width * (len(systems) - 1) / 2 for p in range(len(workloads))])
        axis.set_xticklabels([w.replace("ycsb-", "").upper() for w in workloads])
        finish(axis, singles[0]["title"], "workload", ylabel)
    return save(figure, out, "single_client.png")


#: A figure: draws from a results dictionary into ``out``, returns its file (None: nothing to draw).
Figure = Callable[[dict[str, Any], Path], str | None]
#: The engine's figures, of any suite's client sweeps; a suite adds its own (``write_plots``).
FIGURES: tuple[Figure, ...] = (
    single_client,
    throughput_vs_clients,
    latency_vs_clients,
    latency_vs_throughput,
)


def write_plots(results: dict[str, Any], out: Path, extra: Sequence[Figure] = ()) -> list[str]:
    """Every figure of ``FIGURES`` and then of ``extra`` that has something to draw."""
    written = []
    for figure in (*FIGURES, *extra):
        name = figure(results, out)
        if name:
            written.append(name)
    return written
