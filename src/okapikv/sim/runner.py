"""Run a simulation, check its history, and describe the outcome (summary and reproduction)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from okapikv.check.anomalies import Anomaly
from okapikv.check.history import HistoryRecorder, save_history
from okapikv.check.report import CheckReport, check_history
from okapikv.core.config import CoreConfig
from okapikv.core.server import PartitionServer
from okapikv.core.skew import UNIFORM
from okapikv.sim.config import COUNTERS_TTLS_MIX, SimConfig, dc_names
from okapikv.sim.cost import packaged_profile, packaged_profiles
from okapikv.sim.engine import SimResult, Simulation


@dataclass(slots=True)
class RunOutcome:
    result: SimResult
    report: CheckReport | None

    @property
    def anomalies(self) -> list[Anomaly]:
        found = list(self.result.anomalies)
        if self.report is not None:
            found.extend(self.report.anomalies)
        return found

    @property
    def ok(self) -> bool:
        return not self.anomalies


def run_simulation(
    config: SimConfig,
    *,
    check: bool = True,
    history_path: str | None = None,
    server_factory: Callable[[CoreConfig], PartitionServer] | None = None,
) -> RunOutcome:
    """Simulate ``config``; check the history unless ``check`` is False."""
    result = Simulation(config, server_factory=server_factory).run()
    report = None
    if result.history is not None:
        if history_path is not None:
            save_history(result.history, history_path)
        if check:
            report = check_history(result.history)
    return RunOutcome(result, report)


def reproduce_command(config: SimConfig) -> str:
    """The ``okapi sim`` command line that replays ``config`` (exact when only CLI settings differ
    from the defaults; otherwise followed by the non-default settings as a Python expression)."""
    parts = [
        "okapi sim",
        f"--seed {config.seed}",
        f"--dcs {config.num_dcs}",
        f"--partitions {config.num_partitions}",
        f"--clients {config.num_clients}",
        f"--duration-s {config.duration_s:g}",
        f"--protocol {config.protocol}",
    ]
    if config.faults:
        parts.append("--faults")
    if config.clock_skew_ms:
        parts.append(f"--clock-skew-ms {config.clock_skew_ms:g}")
    if config.clock_skew_model != UNIFORM:
        parts.append(f"--clock-skew-model {config.clock_skew_model}")
    if config.clock_jumps:
        parts.append("--clock-jumps")
    if config.silent_links:
        parts.append("--silent-links")
    if config.large_scans:
        parts.append("--large-scans")
    if config.membership:
        parts.append("--membership")
    if config.new_dc:
        parts.append("--new-dc")
    if config.mix == COUNTERS_TTLS_MIX:
        parts.append("--counters-ttls")
    if config.keys_per_partition != SimConfig().keys_per_partition:
        parts.append(f"--keys-per-partition {config.keys_per_partition}")
    if config.liveness_s:
        parts.append(f"--liveness-s {config.liveness_s:g}")
    defaults = SimConfig()
    cli_fields = {"seed", "protocol", "num_dcs", "num_partitions", "num_clients", "duration_s", "faults",
                  "clock_skew_ms", "clock_skew_model", "clock_jumps", "silent_links", "large_scans",
                  "membership", "new_dc",
                  "keys_per_partition", "liveness_s", "rotx_partitions", "think_us_max", "warmup_s", "workload",
                  "write_ratio"}
    if config.mix == COUNTERS_TTLS_MIX:
        cli_fields.add("mix")
    if config.workload != "mix":
        parts.append("--workload paper")
        if config.workload == "write-ratio":
            parts.append(f"--write-ratio {config.write_ratio:g}")
    if config.rotx_partitions != defaults.rotx_partitions:
        parts.append(f"--rotx-partitions {config.rotx_partitions}")
    if config.think_us_max != defaults.think_us_max:
        parts.append(f"--think-us {config.think_us_max}")
    if config.warmup_s:
        parts.append(f"--warmup-s {config.warmup_s:g}")
    cost = config.cost
    if cost is not None and cost.name in packaged_profiles():
        named = packaged_profile(cost.name)
        if cost == replace(named, cores=cost.cores, blocking=cost.blocking, threads=cost.threads):
            cli_fields.add("cost")
            parts.append(f"--cost {cost.name}")
            if cost.cores != named.cores:
                parts.append(f"--cores {cost.cores}")
            if cost.blocking != named.blocking or cost.threads != named.threads:
                parts.append(f"--blocking {cost.blocking}" + (f" --threads {cost.threads}" if cost.threads else ""))
    command = " ".join(parts)
    extra = {
        f.name: getattr(config, f.name)
        for f in fields(SimConfig)
        if f.name not in cli_fields and getattr(config, f.name) != getattr(defaults, f.name)
    }
    if extra:
        settings = ", ".join(f"{name}={value!r}" for name, value in extra.items())
        command += f"   # plus SimConfig({settings})"
    return command


def _mean(values: list[int]) -> float:
    return sum(values) / len(values)


def performance_line(result: SimResult) -> str:
    """Each operation's latency (mean, p99) and the throughput in the measurement window."""
    c = result.config
    parts = [f"{name} {_ms(_mean(values))} / {_ms(_percentile(values, 0.99))} (n={len(values)})"
             for name, values in sorted(result.latencies_us.items())]
    window = f"{result.window_us / 1e6:g} s" + (f" after {c.warmup_s:g} s of warm-up" if c.warmup_s else "")
    return (f"latency ms mean / p99: {'; '.join(parts) or 'no operation completed'}; "
            f"throughput {result.throughput_ops_s:.0f} ops/s over {window}")


def cost_line(result: SimResult) -> str | None:
    """The cost model's figures: the profile, the CPU busy share, the most requests parked at once."""
    cost = result.config.cost
    if cost is None or result.cpu_utilization is None:
        return None
    busy = result.cpu_utilization
    polls = f", a blocked one waking every {cost.poll_ms:g} ms for {cost.wake_us:g} us" if cost.wake_us else ""
    blocking = cost.blocking + (f" ({cost.threads} threads{polls})" if cost.blocking == "thread" else "")
    return (f"cost model: profile {cost.name} ({cost.cores} cores per server, blocking {blocking}); CPU busy "
            f"mean {100 * sum(busy) / len(busy):.0f}%, busiest server {100 * max(busy):.0f}% (whole run); "
            f"at most {result.max_blocked} requests parked at once on a server")


def operation_counts(outcome: RunOutcome) -> tuple[int, int]:
    """(workload operations issued, convergence reads after the heal). The history the checkers
    judge holds both: the first count is the workload's, the second ``final`` reads of every key
    in every DC, so "checked N operations" is their sum."""
    issued = sum(outcome.result.operations.values())
    history = outcome.result.history
    final = sum(1 for op in history.operations if op.final) if history is not None else 0
    return issued, final


def _ms(us: float) -> str:
    return f"{us / 1000:.2f}"


def _percentile(values: list[int], fraction: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary_lines(outcome: RunOutcome, *, max_anomalies: int = 10) -> list[str]:
    result = outcome.result
    c = result.config
    names = dc_names(c.num_dcs)
    lines = [
        f"okapi sim: protocol {c.protocol}, seed {c.seed}, {c.num_dcs} DCs x {c.num_partitions} partitions, "
        f"{c.num_clients} clients, {c.duration_s:g} s fault phase"
        + (", faults" if c.faults else "")
        + (f", clock skew {c.clock_skew_model} {c.clock_skew_ms:g} ms (at most "
           f"{result.max_dc_skew_us / 1000:g} ms inside a DC)" if c.clock_skew_ms else "")
        + (", clock jumps" if c.clock_jumps else "")
        + (", silent links" if c.silent_links else "")
        + (", large scans" if c.large_scans else "")
        + (", DCs lost and re-added" if c.membership else "")
        + (", the last DC new, joining during the run" if c.new_dc else "")
        + (f", {c.liveness_s:g} s after the heal checked for liveness" if c.liveness_s else ""),
        f"simulated {result.simulated_us / 1e6:.3f} s ("
        + (f"quiescent {_ms(result.quiescent_us - result.fault_phase_end_us)} ms after the heal"
           if result.quiescent_us is not None else "never quiescent")
        + f"), {result.events} events in {result.wall_s:.1f} s wall",
    ]
    ops = ", ".join(f"{name} {count}" for name, count in sorted(result.operations.items()))
    done = ", ".join(f"{name} {count}" for name, count in sorted(result.completed.items()))
    issued, final = operation_counts(outcome)
    lines.append(f"workload operations: {issued} issued ({ops}); with the {final} convergence reads after the "
                 f"heal, {issued + final} completed ({done})")
    if result.waits:
        waits = ", ".join(
            f"{reason} {w.count} (mean {_ms(w.mean_us)} ms, max {_ms(w.max_us)} ms)"
            for reason, w in sorted(result.waits.items())
        )
        lines.append(f"waits: {waits}")
    else:
        lines.append("waits: none")
    if result.snapshot_retries:
        lines.append(f"snapshot retries (GC horizon): {result.snapshot_retries}")
    if result.scan_restarts:
        lines.append(f"paged scans started over (snapshot gone between pages): {result.scan_restarts}")
    lines.append(performance_line(result))
    cost = cost_line(result)
    if cost is not None:
        lines.append(cost)
    if result.visibility_us:
        parts = []
        for (source, destination), values in sorted(result.visibility_us.items()):
            parts.append(
                f"{names[source]}->{names[destination]} mean {_ms(sum(values) / len(values))} "
                f"p99 {_ms(_percentile(values, 0.99))} ms (n={len(values)})"
            )
        lines.append("remote visibility latency: " + "; ".join(parts))
    injected = [f for f in result.faults if not f.description.startswith(("repair", "restart", "recover", "heal"))]
    if injected:
        lines.append(f"faults: {len(injected)} injected, e.g. "
                     + "; ".join(f"{f.time_us / 1000:.0f} ms {f.description}" for f in injected[:4]))
    if outcome.report is not None:
        lines.extend(line for line in outcome.report.summary_lines(max_anomalies=0)
                     if not line.startswith(("no anomalies", "  ")) and "anomalies:" not in line)
    anomalies = outcome.anomalies
    if anomalies:
        counts: dict[str, int] = {}
        for anomaly in anomalies:
            label = f"{anomaly.checker}:{anomaly.name}"
            counts[label] = counts.get(label, 0) + 1
        lines.append(f"ANOMALIES: {len(anomalies)}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for anomaly in anomalies[:max_anomalies]:
            lines.append(f"  {anomaly}")
        if len(anomalies) > max_anomalies:
            lines.append(f"  ... {len(anomalies) - max_anomalies} more")
        lines.append(f"reproduce: {reproduce_command(c)} --history run.jsonl && okapi check run.jsonl")
    else:
        lines.append("no anomalies")
    return lines


__all__ = ["HistoryRecorder", "RunOutcome", "reproduce_command", "run_simulation", "summary_lines"]
