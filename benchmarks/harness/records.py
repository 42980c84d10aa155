"""A measured run's ``Run`` record, from what the load processes and the servers reported.

The load processes' histograms are merged exactly (``engine.histograms``), their counts summed over
the measured window; the servers' counters are read before and after that window
(``engine.stats``), and their CPU time from ``/proc`` (``harness.proc``).
"""

from __future__ import annotations

from typing import Any

from okapikv.bench.engine.driver import RunOutcome
from okapikv.bench.engine.histograms import merge_encoded
from okapikv.bench.engine.results import Cpu, LatencySummary, Run
from okapikv.bench.engine.stats import stats_delta, summarize_durability, summarize_traffic, summarize_waits


def _core(stats: dict[str, Any]) -> dict[str, Any]:
    """The protocol core's counters of each server (the Stats JSON nests them under ``core``)."""
    return {address: server.get("core", server) for address, server in stats.items()}


def _wire(stats: dict[str, Any]) -> dict[str, Any]:
    """The bytes each server handed its peer links (the Stats JSON's ``wire``; absent: none)."""
    return {address: server.get("wire", {}) for address, server in stats.items()}


def net_cpu_us_per_op(server_cpu_s: float | None, idle_cores: float | None, window_s: float,
                      operations: int) -> float | None:
    """Server CPU per operation net of the idle background (timers: heartbeats, stabilization),
    the idle cores measured on the same servers before the load; never below zero."""
    if server_cpu_s is None or idle_cores is None or not operations:
        return None
    return round(max(0.0, server_cpu_s - idle_cores * window_s) * 1e6 / operations, 1)


def run_record(
    outcome: RunOutcome,
    *,
    system: str,
    dcs: int,
    partitions: int,
    clock_skew_ms: float,
    load: str,
    server_cpu_s: float | None,
    idle_cores: float | None = None,
) -> Run:
    """One run: throughput, latency per operation, waits, traffic, CPU, and a durable run's commit
    groups. ``system`` is its label."""
    spec = outcome.spec
    workers = outcome.workers
    window_s = spec.duration_s
    operations = sum(worker.operations for worker in workers)
    kinds = sorted({kind for worker in workers for kind in worker.histograms})
    latency = {kind: LatencySummary.of(merge_encoded(w.histograms.get(kind, b"") for w in workers)) for kind in kinds}
    errors: dict[str, int] = {}
    for worker in workers:
        for kind, count in worker.errors.items():
            errors[kind] = errors.get(kind, 0) + count
    delta = stats_delta(_core(outcome.stats_after), _core(outcome.stats_before)) if outcome.stats_after else {}
    wire = stats_delta(_wire(outcome.stats_after), _wire(outcome.stats_before)) if outcome.stats_after else {}
    client_cpu_s = sum(worker.cpu_s for worker in workers)
    whole = stats_delta(outcome.stats_after, outcome.stats_before) if outcome.stats_after else {}
    collector = whole.get("driver", {})
    rotx = spec.workload.name == "rotx"
    return Run(
        system=system,
        workload=spec.workload.label,
        clients=spec.clients,
        processes=len(workers),
        dcs=dcs,
        partitions=partitions,
        clock_skew_ms=clock_skew_ms,
        rotx_partitions=spec.workload.rotx_partitions if rotx else None,
        write_ratio=spec.workload.write_ratio if rotx else None,
        load=load,
        records=spec.workload.records,
        duration_s=window_s,
        warmup_s=spec.warmup_s,
        operations=operations,
        throughput_ops_s=round(operations / window_s, 1) if window_s > 0 else 0.0,
        errors=errors,
        last_error=next((w.last_error for w in workers if w.last_error), ""),
        latency_us=latency,
        cpu=Cpu(
            client_s=round(client_cpu_s, 3),
            client_cores=round(client_cpu_s / window_s, 3) if window_s > 0 else 0.0,
            server_s=None if server_cpu_s is None else round(server_cpu_s, 3),
            server_cores=None if server_cpu_s is None or window_s <= 0 else round(server_cpu_s / window_s, 3),
            server_cpu_us_per_op=None if server_cpu_s is None or not operations
            else round(server_cpu_s * 1e6 / operations, 1),
            server_idle_cores=idle_cores,
            server_net_cpu_us_per_op=net_cpu_us_per_op(server_cpu_s, idle_cores, window_s, operations),
            server_collector_s=round(collector["collector_seconds"], 4) if "collector_seconds" in collector else None,
            server_collector_passes=collector.get("collector_passes"),
        ),
        waits=summarize_waits(delta) if delta else None,
        traffic=summarize_traffic(delta, window_s, wire, operations) if delta else None,
        server_operations=delta.get("operations", {}) if delta else None,
        durability=summarize_durability(whole) if outcome.stats_after else None,
    )
