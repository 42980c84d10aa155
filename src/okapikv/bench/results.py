"""The results of a benchmark invocation, as plain JSON-able data.

One ``Results`` holds every measured run grouped in *series* (a series is one figure's data: runs
that differ in one variable, e.g. clients, partitions per RO-TX, write ratio), plus the visibility
probes, the configuration and the machine. ``results.json`` is exactly ``Results.to_dict()``;
the CSV files, plots and report are derived from that dictionary alone, so they can be
regenerated from a saved results.json (``report.write_outputs``).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from okapikv.bench.driver import RunOutcome
from okapikv.bench.metrics import (
    LatencySummary,
    merge_encoded,
    stats_delta,
    summarize_traffic,
    summarize_waits,
)

#: what each series' x axis is, which decides its plots
SERIES_KINDS = ("clients", "single", "rotx_partitions", "write_ratio", "partitions")


@dataclass(slots=True)
class Series:
    name: str
    kind: str  # one of SERIES_KINDS
    title: str
    runs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "title": self.title, "runs": self.runs}


@dataclass(slots=True)
class Results:
    config: dict[str, Any]
    series: dict[str, Series] = field(default_factory=dict)
    visibility: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    memory: list[dict[str, Any]] = field(default_factory=list)  # --workload memory, one row per system
    fast: dict[str, Any] = field(default_factory=dict)  # --suite fast (okapikv.bench.fast)
    resp: list[dict[str, Any]] = field(default_factory=list)  # --suite resp (okapikv.bench.resp)
    notes: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    timings: dict[str, float] = field(default_factory=dict)

    def series_for(self, name: str, kind: str, title: str) -> Series:
        found = self.series.get(name)
        if found is None:
            found = self.series[name] = Series(name, kind, title)
        return found

    def note(self, message: str) -> None:
        self.notes.append(message)

    def to_dict(self) -> dict[str, Any]:
        from okapikv import __version__

        return {
            "okapikv_version": __version__,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started_at)),
            "elapsed_s": round(time.time() - self.started_at, 2),
            "config": self.config,
            "machine": machine_info(),
            "series": {name: series.to_dict() for name, series in self.series.items()},
            "visibility": self.visibility,
            "memory": self.memory,
            "fast": self.fast,
            "resp": self.resp,
            "notes": self.notes,
            "timings_s": self.timings,
        }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / (1024 * 1024), 1)
    except (OSError, ValueError):
        pass
    return None


def machine_info() -> dict[str, Any]:
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def _core(stats: dict[str, Any]) -> dict[str, Any]:
    """The protocol core's counters of each server (the Stats JSON nests them under ``core``)."""
    return {address: server.get("core", server) for address, server in stats.items()}


def run_record(
    outcome: RunOutcome,
    *,
    system: str,
    params: dict[str, Any],
    server_cpu_s: float | None,
) -> dict[str, Any]:
    """One run as a flat-ish dict: throughput, latency per operation, waits, traffic, CPU."""
    spec = outcome.spec
    workers = outcome.workers
    window_s = spec.duration_s
    operations = sum(worker.operations for worker in workers)
    kinds = sorted({kind for worker in workers for kind in worker.histograms})
    latency = {
        kind: dataclasses.asdict(LatencySummary.of(merge_encoded(w.histograms.get(kind, b"") for w in workers)))
        for kind in kinds
    }
    errors: dict[str, int] = {}
    for worker in workers:
        for kind, count in worker.errors.items():
            errors[kind] = errors.get(kind, 0) + count
    delta = stats_delta(_core(outcome.stats_after), _core(outcome.stats_before)) if outcome.stats_after else {}
    client_cpu_s = sum(worker.cpu_s for worker in workers)
    record: dict[str, Any] = {
        "system": system,
        "workload": spec.workload.label,
        "clients": spec.clients,
        "processes": len(workers),
        **params,
        "records": spec.workload.records,
        "duration_s": window_s,
        "warmup_s": spec.warmup_s,
        "operations": operations,
        "throughput_ops_s": round(operations / window_s, 1) if window_s > 0 else 0.0,
        "errors": errors,
        "last_error": next((w.last_error for w in workers if w.last_error), ""),
        "latency_us": latency,
        "cpu": {
            "client_s": round(client_cpu_s, 3),
            "client_cores": round(client_cpu_s / window_s, 3) if window_s > 0 else 0.0,
            "server_s": None if server_cpu_s is None else round(server_cpu_s, 3),
            "server_cores": None if server_cpu_s is None or window_s <= 0 else round(server_cpu_s / window_s, 3),
            "server_cpu_us_per_op": None
            if server_cpu_s is None or not operations
            else round(server_cpu_s * 1e6 / operations, 1),
        },
    }
    if delta:
        record["waits"] = {k: dataclasses.asdict(v) for k, v in summarize_waits(delta).items()}
        record["traffic"] = dataclasses.asdict(summarize_traffic(delta, window_s))
        record["server_operations"] = delta.get("operations", {})
    return record
