"""``okapi calibrate --validate``: the simulator's predictions against real ``okapi bench`` runs.

The profile ``okapi calibrate`` wrote holds the core's costs; a real server also spends CPU in its
driver (event loop, framing, system calls) and the load processes spend CPU per operation. The fit
(``fit``) takes one real run (by default Okapi at 4 partitions per DC, RO-TX over 2 partitions, 12 sessions) and adds:

- a driver overhead per message sent, from the run's server CPU per operation (``cpu.server_s``)
  less what the simulator's core costs come to per operation, over the messages sent per operation;
- the clients' CPU per operation (``cpu.client_s``), on the machine of a server of the client's DC;
- a stretch: every CPU cost times a factor, so that the simulated throughput of the fit point is the
  measured one. ``okapi bench`` runs every process of a deployment on this one machine, shared with
  whatever else runs on it. Two models of that: each single-threaded server process on a core of
  its own, slowed by the share of it that it did not get (the default); or one machine of
  ``shared_cores`` cores for the whole deployment (``--shared-cores``), slowed likewise.

Then every other run is predicted with the same fitted profile and compared: relative error of
throughput and of mean latency per point, and their mean absolute value over the held-out points.
The stretch assumes the machine's other load stays what it was during the fit run, which on a
shared machine it does not: the errors say how much that, and the model, miss.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.calibrate import with_overheads
from okapikv.sim import SimConfig, Simulation
from okapikv.sim.cost import CostProfile
from okapikv.sim.engine import SimResult


@dataclass(frozen=True, slots=True)
class Point:
    """One real run of the RO-TX + PUT workload, as ``okapi bench`` measured it."""

    system: str
    rotx_partitions: int
    clients: int
    partitions: int
    dcs: int
    write_ratio: float | None
    clock_skew_ms: float
    throughput_ops_s: float
    mean_latency_us: float
    server_cpu_us_per_op: float
    client_cpu_us_per_op: float

    @property
    def label(self) -> str:
        ratio = f" w={self.write_ratio:g}" if self.write_ratio is not None else ""
        return f"{self.system} P{self.partitions} p={self.rotx_partitions} c={self.clients}{ratio}"


def load_points(paths: list[str]) -> list[Point]:
    """Every rotx run in the ``results.json`` files named (a run in two series once)."""
    points: list[Point] = []
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        for series in data["series"].values():
            for run in series["runs"]:
                if run.get("workload") != "rotx" or not run.get("operations"):
                    continue
                cpu = run.get("cpu") or {}
                operations = run["operations"]
                points.append(Point(
                    system=run["system"], rotx_partitions=run["rotx_partitions"], clients=run["clients"],
                    partitions=run["partitions"], dcs=run["dcs"], write_ratio=run.get("write_ratio"),
                    clock_skew_ms=run.get("clock_skew_ms") or 0.0,
                    throughput_ops_s=run["throughput_ops_s"], mean_latency_us=run["latency_us"]["all"]["mean_us"],
                    server_cpu_us_per_op=cpu.get("server_cpu_us_per_op") or 0.0,
                    client_cpu_us_per_op=(cpu.get("client_s") or 0.0) * 1e6 / operations))
    unique: dict[str, Point] = {}
    for point in points:
        unique.setdefault(point.label, point)
    return list(unique.values())


def sim_config(point: Point, profile: CostProfile, *, duration_s: float, seed: int) -> SimConfig:
    """The simulated twin of a real run: same DCs, partitions, sessions, RO-TX size, write ratio."""
    return SimConfig(
        seed=seed, protocol=point.system, num_dcs=point.dcs, num_partitions=point.partitions,
        num_clients=point.clients, duration_s=duration_s, warmup_s=duration_s / 4, think_us_max=0,
        clock_skew_ms=point.clock_skew_ms,
        workload="paper" if point.write_ratio is None else "write-ratio",
        write_ratio=point.write_ratio if point.write_ratio is not None else 0.5,
        rotx_partitions=point.rotx_partitions, record=False, invariants=False, visibility_sample=0.0,
        cost=profile)


def simulate(point: Point, profile: CostProfile, *, duration_s: float = 2.0, seed: int = 1) -> SimResult:
    return Simulation(sim_config(point, profile, duration_s=duration_s, seed=seed)).run()


def mean_latency_us(result: SimResult) -> float:
    values = [v for series in result.latencies_us.values() for v in series]
    return sum(values) / len(values) if values else 0.0


def fit(profile: CostProfile, point: Point, *, duration_s: float = 2.0, shared_cores: int = 0
        ) -> tuple[CostProfile, dict[str, float]]:
    """``profile`` fitted to ``point`` (module docstring); also the fitted figures. ``shared_cores``:
    model the deployment as one machine of that many cores (0: a core per server)."""
    shared = shared_cores > 0
    base = replace(profile, cores=shared_cores or 1, shared_machine=shared, client_us=0.0)
    result = simulate(point, base, duration_s=duration_s)
    issued = sum(result.operations.values())
    assert result.cpu_utilization is not None
    core_us_per_op = sum(result.cpu_utilization) * base.cores * result.simulated_us / issued
    effects_per_op = (sum(result.messages.values()) + issued) / issued
    message_us = max(0.0, (point.server_cpu_us_per_op - core_us_per_op) / effects_per_op)
    source = (f"fitted to the real run {point.label} ({point.throughput_ops_s:g} ops/s): {message_us:.1f} us "
              f"driver overhead per message, {point.client_cpu_us_per_op:.0f} us client CPU per operation")

    def throughput(stretch: float) -> float:
        candidate = with_overheads(base, message_us=message_us, client_us=point.client_cpu_us_per_op,
                                   stretch=stretch, source=source)
        return simulate(point, candidate, duration_s=duration_s).throughput_ops_s

    low, high = 0.05, 1.0
    while throughput(high) > point.throughput_ops_s and high < 1_000:
        low, high = high, high * 4
    for _ in range(14):
        middle = (low * high) ** 0.5
        if throughput(middle) > point.throughput_ops_s:
            low = middle
        else:
            high = middle
    stretch = (low * high) ** 0.5
    fitted = with_overheads(base, message_us=message_us, client_us=point.client_cpu_us_per_op, stretch=stretch,
                            source=f"{source}, every CPU cost stretched x{stretch:.2f} (the machine's other load)")
    fitted = replace(fitted, shared_machine=shared, name=f"{profile.name}-fitted")
    figures = {"core_us_per_op": core_us_per_op, "effects_per_op": effects_per_op, "message_us": message_us,
               "client_us": point.client_cpu_us_per_op, "stretch": stretch}
    return fitted, figures


@dataclass(frozen=True, slots=True)
class Row:
    point: Point
    fit: bool
    throughput_ops_s: float
    mean_latency_us: float

    @property
    def throughput_error(self) -> float:
        return (self.throughput_ops_s - self.point.throughput_ops_s) / self.point.throughput_ops_s

    @property
    def latency_error(self) -> float:
        return (self.mean_latency_us - self.point.mean_latency_us) / self.point.mean_latency_us


def validate(profile: CostProfile, points: list[Point], fit_label: str, *, duration_s: float = 2.0,
             shared_cores: int = 0) -> tuple[CostProfile, dict[str, float], list[Row]]:
    chosen = [point for point in points if point.label == fit_label]
    if not chosen:
        raise ValueError(f"no run {fit_label!r} to fit on (runs: {', '.join(p.label for p in points)})")
    fitted, figures = fit(profile, chosen[0], duration_s=duration_s, shared_cores=shared_cores)
    rows = []
    for point in points:
        result = simulate(point, fitted, duration_s=duration_s)
        rows.append(Row(point, point is chosen[0], result.throughput_ops_s, mean_latency_us(result)))
    return fitted, figures, rows


def mean_absolute_error(rows: list[Row]) -> tuple[float, float]:
    held = [row for row in rows if not row.fit]
    if not held:
        return 0.0, 0.0
    return (sum(abs(row.throughput_error) for row in held) / len(held),
            sum(abs(row.latency_error) for row in held) / len(held))


def table_lines(rows: list[Row]) -> list[str]:
    lines = ["| run | role | measured ops/s | predicted ops/s | error | measured mean latency ms | "
             "predicted ms | error |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        p = row.point
        lines.append(f"| {p.label} | {'fit' if row.fit else 'held out'} | {p.throughput_ops_s:.0f} | "
                     f"{row.throughput_ops_s:.0f} | {100 * row.throughput_error:+.0f}% | "
                     f"{p.mean_latency_us / 1000:.1f} | {row.mean_latency_us / 1000:.1f} | "
                     f"{100 * row.latency_error:+.0f}% |")
    throughput, latency = mean_absolute_error(rows)
    lines.append("")
    lines.append(f"Mean absolute relative error over the held-out runs: throughput {100 * throughput:.0f}%, "
                 f"mean latency {100 * latency:.0f}%.")
    return lines


def summary(figures: dict[str, float]) -> str:
    return (f"fit: the core's costs come to {figures['core_us_per_op']:.0f} us per operation; "
            f"{figures['effects_per_op']:.1f} messages sent per operation, each {figures['message_us']:.1f} us of "
            f"driver overhead; {figures['client_us']:.0f} us client CPU per operation; every cost stretched "
            f"x{figures['stretch']:.2f}")


def as_json(rows: list[Row]) -> list[dict[str, Any]]:
    return [{"run": row.point.label, "fit": row.fit, "measured_ops_s": row.point.throughput_ops_s,
             "predicted_ops_s": round(row.throughput_ops_s, 1),
             "measured_mean_latency_us": row.point.mean_latency_us,
             "predicted_mean_latency_us": round(row.mean_latency_us, 1)} for row in rows]
