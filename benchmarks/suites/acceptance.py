"""The performance acceptance targets, in one table: what is measured, the goal, how it is judged.

``TARGETS`` is the table ``--suite fast`` judges its figures by (``judge``) and prints, one row per
target: its id, its title in the report, what is measured (in words, and the function that takes
the figure from the suite's ``FastFigures``), and its ``Goal`` (a comparison with a threshold, and
how the report states it), or no goal for a row shown for comparison only. A target is added by
adding a row (and, where it needs a figure no phase measures yet, a phase to ``suites.fast``).

The constants above the table are the measurements' parameters the targets name (sessions, the
system under replication load, the stabilization periods of the visibility bound): ``suites.fast``
measures with them. Nothing is asserted by timing inside a unit test; this table is where goals live.
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.harness.systems import System
from benchmarks.suites.fast_figures import (
    DURABLE,
    FDATASYNC,
    ByKey,
    DurableScale,
    FastFigures,
    IdlePair,
    ReplicationFigures,
    Verdict,
)
from okapikv.bench.engine.results import MemoryRow

#: Concurrent sessions of the YCSB-A throughput targets (one load process).
FAST_SESSIONS = 64
#: The system target 5 holds to the bound: admission control holds client batches near it.
REPLICATION_SYSTEM = System("okapi", bounded_visibility=True)
#: Stabilization periods the visibility bound allows beyond the UST path (``suites.fast.ust_bound_ms``).
STABILIZATION_PERIODS = 3
COMPARISON = "(comparison)"

_COMPARE: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge, ">": operator.gt}


@dataclass(frozen=True, slots=True)
class Goal:
    """A figure is met when ``figure <compare> threshold``; ``text`` states it, ``{}`` the threshold."""

    compare: str  # "<=", ">=" or ">"
    threshold: float
    text: str

    def met(self, figure: float) -> bool:
        return _COMPARE[self.compare](figure, self.threshold)

    def describe(self) -> str:
        return self.text.format(self.threshold)


@dataclass(frozen=True, slots=True)
class Measured:
    """A target's figure in one run: the number judged, how the report shows it, and the values
    its title names (``AcceptanceTarget.title`` is a format string: the memory row's key count)."""

    figure: float
    text: str
    subject: Mapping[str, Any] = field(default_factory=dict)


#: A target's figures from what the suite measured: none when the phase did not run or failed.
Figures = Callable[[FastFigures, Sequence[MemoryRow]], list[Measured]]


@dataclass(frozen=True, slots=True)
class AcceptanceTarget:
    id: str
    title: str
    measures: str
    figures: Figures
    goal: Goal | None  # None: shown for comparison, not judged


# ------------------------------------------------------------------ how each figure is taken


def latency(via: str, kind: str) -> Figures:
    """Mean latency of one path and operation (``FastFigures.latency``), in us."""
    def take(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
        if fast.latency is None or via not in fast.latency.paths:
            return []
        mean = fast.latency.paths[via][kind].mean_us
        return [Measured(mean, f"{mean:.0f} us")]
    return take


def durable_put_over_fdatasync(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """A durable PUT's p50 minus the disk's fdatasync p50, paired within each round (the disk's
    speed moves between rounds on a shared machine), median of the rounds, in us."""
    if fast.latency is None or DURABLE not in fast.latency.paths:
        return []
    pairs = [one[DURABLE]["put"].p50_us - one[FDATASYNC]["put"].p50_us for one in fast.latency.rounds
             if DURABLE in one and FDATASYNC in one]
    if not pairs:
        return []
    over = statistics.median(pairs)
    put, disk = fast.latency.paths[DURABLE]["put"], fast.latency.paths[FDATASYNC]["put"]
    return [Measured(over, f"{over:+.0f} us (PUT p50 {put.p50_us:.0f}, p99 {put.p99_us:.0f}; fdatasync p50 "
                           f"{disk.p50_us:.0f} us)")]


def recovery(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """A restart's read of N versions from the commit log and from the checkpoint (store alone)."""
    found = fast.storage
    if found is None:
        return []
    return [Measured(found.recovery_log_s, f"{found.recovery_log_s:.2f} s from the log "
                     f"({found.log_bytes / 2**20:.0f} MiB), {found.recovery_checkpoint_s:.2f} s from the checkpoint",
                     {"records": found.records})]


def checkpoint_cost(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """One checkpoint alone and beside a thread spinning in Python (a loaded event loop), folded in a
    checkpoint process as a server's background checkpoints are."""
    found = fast.storage
    if found is None:
        return []
    return [Measured(found.checkpoint_busy_s, f"{found.checkpoint_busy_s:.2f} s under load, "
                     f"{found.checkpoint_alone_s:.2f} s alone", {"rows": found.checkpoint_rows})]


def _ycsb(fast: FastFigures) -> ByKey:
    return fast.ycsb_a or {}


def ycsb_throughput(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    okapi = _ycsb(fast).get("okapi")
    return [Measured(okapi.ops_s, f"{okapi.ops_s:,.0f} ops/s")] if okapi else []


def redis_ratio(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    okapi, redis = _ycsb(fast).get("okapi"), _ycsb(fast).get("redis")
    if not okapi or not redis:
        return []
    ratio = okapi.ops_s / redis.ops_s if redis.ops_s else 0.0
    return [Measured(ratio, f"{ratio:.0%} ({redis.ops_s:,.0f} ops/s)")]


def grpc_throughput(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    okapi, over_grpc = _ycsb(fast).get("okapi"), _ycsb(fast).get("okapi-grpc")
    return [Measured(over_grpc.ops_s, f"{over_grpc.ops_s:,.0f} ops/s")] if okapi and over_grpc else []


def paired(rounds: list[dict[str, float]], ours: str, baseline: str) -> tuple[float, float, float] | None:
    """Median, lowest and highest of ``ours / baseline`` over the rounds that measured both: a
    comparison within each round, where both systems ran minutes apart in the same VM phase, is
    steadier than one of the two systems' medians (RO-TX + PUT: 9%, 18% and 1% in the three
    rounds of one suite, 16% between the medians, which came from different rounds)."""
    ratios = sorted(figures[ours] / figures[baseline] for figures in rounds
                    if figures.get(ours) and figures.get(baseline))
    if not ratios:
        return None
    return statistics.median(ratios), ratios[0], ratios[-1]


def causality_cost(phase: str) -> Figures:
    """1 - okapi / eventual throughput of a phase (``ycsb_a`` or ``rotx``): paired rounds where
    the results kept them, else the two medians."""
    def take(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
        found: ByKey = getattr(fast, phase) or {}
        ours, baseline = found.get("okapi"), found.get("eventual")
        if not ours or not baseline or not baseline.ops_s:
            return []
        medians = f"medians {ours.ops_s:,.0f} vs {baseline.ops_s:,.0f} ops/s"
        rounds = paired(getattr(fast, f"{phase}_rounds") or [], "okapi", "eventual")
        if rounds is None:  # results of a suite that kept no rounds
            cost = 1 - ours.ops_s / baseline.ops_s
            return [Measured(cost, f"{cost:+.1%} ({medians})")]
        cost, worst, best = (1 - ratio for ratio in rounds)
        return [Measured(cost, f"{cost:+.1%} (paired rounds {best:+.1%} .. {worst:+.1%}; {medians})")]
    return take


def memory_per_key(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    return [Measured(row.bytes_per_key, f"{row.bytes_per_key:.0f} B/key ({row.rss_after_per_key:.0f} with the empty "
                     "server)", {"keys": row.keys}) for row in memory]


def _replication(found: ReplicationFigures | None) -> ReplicationFigures | None:
    return found if found is not None and found.visibility else None


def _worst(found: ReplicationFigures) -> tuple[float, float, float]:
    """The pair furthest over (or least under) its bound: (lag p99, bound, PUT rate)."""
    worst = max(found.visibility, key=lambda pair: pair.lag_p99_ms - pair.bound_ms)
    return worst.lag_p99_ms, worst.bound_ms, found.throughput.ops_s if found.throughput else 0


def pairs_over_bound(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    found = _replication(fast.replication)
    if found is None:
        return []
    over = [pair for pair in found.visibility if pair.lag_p99_ms > pair.bound_ms]
    lag, bound, rate = _worst(found)
    return [Measured(len(over), f"{len(over)} of {len(found.visibility)} pairs over; worst lag p99 {lag:.0f} ms vs "
                                f"{bound:.0f} ms ({rate:,.0f} PUT/s)")]


def queue_growth(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """How far the queues' second-half mean exceeds noise (twice the first half, plus 100)."""
    found = _replication(fast.replication)
    if found is None:
        return []
    queues = found.queues
    growth = queues.second_half_mean - (2 * queues.first_half_mean + 100)
    return [Measured(growth, f"max {queues.max_messages} messages, mean {queues.first_half_mean} -> "
                             f"{queues.second_half_mean}")]


def unbounded_visibility(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    found = _replication(fast.replication_unbounded)
    if found is None:
        return []
    lag, bound, rate = _worst(found)
    return [Measured(lag - bound, f"{rate:,.0f} PUT/s; worst lag p99 {lag:.0f} ms vs {bound:.0f} ms "
                                  f"({lag - bound:+.0f} ms)")]


def _gain(fast: FastFigures, one_key: str, two_key: str) -> tuple[float, str] | None:
    """The 1 -> 2 partition gain of one pair of systems (paired rounds where kept) and its text."""
    one, two = _ycsb(fast).get(one_key), _ycsb(fast).get(two_key)
    if not one or not two:
        return None
    gain = two.ops_s / one.ops_s if one.ops_s else 0.0
    text = f"{one.ops_s:,.0f} -> {two.ops_s:,.0f} ops/s"
    rounds = paired(fast.ycsb_a_rounds or [], two_key, one_key)
    if rounds is not None:
        gain = rounds[0]
        text += f" (paired rounds x{rounds[0]:.2f}, x{rounds[1]:.2f} .. x{rounds[2]:.2f})"
    else:
        text += f" (x{gain:.2f})"
    return gain, text


def scaling_gain(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """Judged on the lean load generator where it ran, the async client's figure beside: with the
    client's own CPU per operation about the server's, 2 cores hold no room for a second partition
    whatever the store does (``engine.lean``)."""
    lean, client = _gain(fast, "okapi-lean", "okapi-2p-lean"), _gain(fast, "okapi", "okapi-2p")
    if lean is not None:
        text = f"lean load, {FAST_SESSIONS} sessions per partition: {lean[1]}"
        if client is not None:
            text += f"; async client ({FAST_SESSIONS} sessions, 1 process): {client[1]}"
        return [Measured(lean[0], text)]
    return [Measured(client[0], client[1])] if client is not None else []


def durable_cost(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """1 - durable / in-memory YCSB-A throughput (``okapi-durable`` against ``okapi``), paired rounds."""
    ours, baseline = _ycsb(fast).get("okapi-durable"), _ycsb(fast).get("okapi")
    if not ours or not baseline or not baseline.ops_s:
        return []
    medians = f"medians {ours.ops_s:,.0f} vs {baseline.ops_s:,.0f} ops/s"
    rounds = paired(fast.ycsb_a_rounds or [], "okapi-durable", "okapi")
    if rounds is None:
        cost = 1 - ours.ops_s / baseline.ops_s
        return [Measured(cost, f"{cost:+.1%} ({medians})")]
    cost, worst, best = (1 - ratio for ratio in rounds)
    return [Measured(cost, f"{cost:+.1%} (paired rounds {best:+.1%} .. {worst:+.1%}; {medians})")]


def server_cpu_per_operation(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """Server CPU (every thread of the server process) per YCSB-A operation, in memory; the
    durable run's beside it."""
    cpu = fast.ycsb_a_server_us_per_op or {}
    okapi, durable = _ycsb(fast).get("okapi"), _ycsb(fast).get("okapi-durable")
    if not okapi or "okapi" not in cpu:
        return []
    text = f"{cpu['okapi']:.1f} us in memory at {okapi.ops_s:,.0f} ops/s"
    if durable is not None and "okapi-durable" in cpu:
        text += f"; durable {cpu['okapi-durable']:.1f} us at {durable.ops_s:,.0f} ops/s"
    return [Measured(cpu["okapi"], text)]


def redis_benchmark_share(clients: int, pipeline: int) -> Figures:
    """okapikv's RESP port over redis-server under the same ``redis-benchmark`` point: the median
    of the rounds' shares (each round ran both, one after the other)."""
    def take(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
        points = [point for round_ in fast.redis_benchmark or [] for point in round_
                  if point.clients == clients and point.pipeline == pipeline]
        if not points:
            return []
        middle = sorted(points, key=lambda point: point.ratio)[len(points) // 2]
        return [Measured(middle.ratio, f"{middle.ratio:.0%}: SET {middle.okapi_set:,.0f} vs {middle.redis_set:,.0f}, "
                                       f"GET {middle.okapi_get:,.0f} vs {middle.redis_get:,.0f} requests/s")]
    return take


def redis_benchmark_incr(clients: int, pipeline: int) -> Figures:
    """INCR (okapikv's counter, a CRDT update) over redis-server's under the same ``redis-benchmark``
    point: the median of the rounds' shares."""
    def take(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
        shares = sorted((point.okapi_incr / point.redis_incr, point) for round_ in fast.redis_benchmark or []
                        for point in round_ if point.clients == clients and point.pipeline == pipeline
                        and point.redis_incr)
        if not shares:
            return []
        share, middle = shares[len(shares) // 2]
        return [Measured(share, f"{share:.0%}: INCR {middle.okapi_incr:,.0f} vs {middle.redis_incr:,.0f} requests/s")]
    return take


def ttl_metadata(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """Bytes an expiry adds to a version (stored, replicated), and a 3-DC counter state's size: a
    property of the format (``okapikv.core.expiry``, ``okapikv.core.counters``), computed here and
    shown beside the RESP figures (with the run that measured them)."""
    from okapikv.core import counters, expiry

    if not fast.redis_benchmark:
        return []

    added = len(expiry.wrap(b"", 1))
    state = len(counters.encode(counters.CounterState((1 << 60, 1), 0, ((10_000, 500), (3_000, 0), (1, 0)))))
    return [Measured(float(added), f"{added} B per update with a TTL, 0 without; a 3-DC counter after a reset "
                                   f"with totals < 16,384: {state} B")]


def _scale_note(found: DurableScale) -> str:
    return " (--quick: a smaller data set, not the target's)" if found.quick else ""


def load_rate(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """Records per second of the bulk load into one durable partition, the median round."""
    found = fast.durable_scale
    if found is None or not found.load_rates:
        return []
    rate = statistics.median(found.load_rates)
    return [Measured(rate, f"{rate:,.0f} records/s" + _scale_note(found), {"records": found.large})]


def load_checkpoints(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """Seconds the bulk load's checkpoints ran past its last acknowledgement, the median round (the
    data-size target is measured after them)."""
    found = fast.durable_scale
    if found is None or not found.checkpoint_s:
        return []
    seconds = statistics.median(found.checkpoint_s)
    return [Measured(seconds, f"{seconds:.1f} s (rounds {min(found.checkpoint_s):.1f}-{max(found.checkpoint_s):.1f} s)"
                     + _scale_note(found), {"records": found.large})]


def data_size_cost(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """1 - YCSB-A throughput at the large data set over the small one (durable), paired rounds."""
    found = fast.durable_scale
    if found is None:
        return []
    rounds = paired(found.rounds, "large", "small")
    if rounds is None:
        return []
    cost, worst, best = (1 - ratio for ratio in rounds)
    large = statistics.median(round_["large"] for round_ in found.rounds if "large" in round_)
    small = statistics.median(round_["small"] for round_ in found.rounds if "small" in round_)
    return [Measured(cost, f"{cost:+.1%} (paired rounds {best:+.1%} .. {worst:+.1%}; medians {large:,.0f} vs "
                           f"{small:,.0f} ops/s)" + _scale_note(found), {"large": found.large, "small": found.small})]


def idle_cores(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """The busiest server's cores over the idle window (``suites.fast``, phase 7)."""
    found = fast.idle
    if found is None or not found.cores:
        return []
    busiest = max(found.cores)
    return [Measured(busiest, f"{busiest:.4f} core on the busiest server, {statistics.mean(found.cores):.4f} mean, "
                              f"{sum(found.cores):.3f} for the cluster ({found.idle_s:.0f} s)")]


def idle_visibility(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Measured]:
    """The first update after the idle spell: the worst pair's visibility over its bound, in ms (a
    probe that timed out counts as infinitely late)."""
    found = fast.idle
    if found is None or not found.visibility:
        return []
    def over(pair: IdlePair) -> float:
        return math.inf if pair.visible_ms is None else pair.visible_ms - pair.bound_ms
    worst = max(found.visibility, key=over)
    seen = "timed out" if worst.visible_ms is None else f"{worst.visible_ms:.0f} ms"
    return [Measured(over(worst), f"worst pair {worst.source}->{worst.destination}: {seen} vs {worst.bound_ms:.0f} ms "
                                  f"after {found.idle_s:.0f} s idle")]


# ------------------------------------------------------------------ the table

LATENCY_GOAL = Goal("<=", 400.0, "<= {:.0f} us")


def _latency_targets(via: str, label: str, measures: str, goal: Goal | None) -> list[AcceptanceTarget]:
    """Target 1 for one path: the GET row, then the PUT row (``measures`` names the operation)."""
    return [AcceptanceTarget(f"latency-{kind}-{via.replace('_', '-')}",
                             f"1. {kind.upper()} latency, one client ({label})",
                             "mean of " + measures.format(kind.upper()), latency(via, kind), goal)
            for kind in ("get", "put")]


TARGETS: tuple[AcceptanceTarget, ...] = (
    *_latency_targets("client", "Client", "sequential {}s through the blocking Client, 1 DC x 1 partition",
                      LATENCY_GOAL),
    *_latency_targets("stdio", "okapi client", "{} lines through an `okapi client` process's stdin/stdout",
                      LATENCY_GOAL),
    *_latency_targets("client_grpc", "Client over gRPC only", "the same {}s over the gRPC stream, not the native port",
                      None),
    AcceptanceTarget("durable-put-over-fdatasync", "1. PUT latency, one client, durable server",
                     "p50 of sequential PUTs through the blocking Client to a durable server minus the p50 of "
                     "fdatasyncs of a 100-byte append on its file system, paired in each round",
                     durable_put_over_fdatasync, Goal("<=", 500.0, "<= fdatasync p50 + {:.0f} us")),
    AcceptanceTarget("ycsb-a-throughput", f"2. YCSB-A, one partition, {FAST_SESSIONS} sessions",
                     "throughput of the async client's sessions in one load process, 1 DC x 1 partition",
                     ycsb_throughput, Goal(">=", 30_000.0, ">= {:,.0f} ops/s")),
    AcceptanceTarget("ycsb-a-redis-ratio", "2. ... against redis-server + redis-py, same load",
                     "okapi's YCSB-A throughput over redis-server's, driven by the same load generator",
                     redis_ratio, Goal(">=", 0.5, ">= {:.0%} of Redis")),
    AcceptanceTarget("ycsb-a-grpc", "2. ... the same over gRPC streams (no native port)",
                     "YCSB-A throughput with the client on gRPC streams", grpc_throughput, None),
    AcceptanceTarget("causality-ycsb-a", "3. cost of causality, YCSB-A",
                     "1 - okapi / eventual YCSB-A throughput, paired rounds",
                     causality_cost("ycsb_a"), Goal("<=", 0.15, "within {:.0%} of eventual")),
    AcceptanceTarget("causality-rotx", "3. cost of causality, RO-TX + PUT",
                     "1 - okapi / eventual throughput, RO-TX over 2 partitions + PUT, 3 DCs, emulated WAN",
                     causality_cost("rotx"), Goal("<=", 0.15, "within {:.0%} of eventual")),
    AcceptanceTarget("memory-per-key", "4. memory, {keys:,} keys",
                     "server RSS growth per key loaded, one in-memory partition server",
                     memory_per_key, Goal("<=", 250.0, "<= {:.0f} B/key")),
    AcceptanceTarget("visibility-under-load", f"5. visibility p99 at full PUT load ({REPLICATION_SYSTEM.name})",
                     "DC pairs whose servers' visibility lag p99 exceeds the UST path plus "
                     f"{STABILIZATION_PERIODS} stabilization periods, PUTs at saturation in every DC",
                     pairs_over_bound, Goal("<=", 0, f"<= UST path + {STABILIZATION_PERIODS} stabilization periods")),
    AcceptanceTarget("replication-queues", "5. replication queues",
                     "second-half mean of the replication queues beyond twice the first half plus 100 messages",
                     queue_growth, Goal("<=", 0, "no unbounded growth")),
    AcceptanceTarget("visibility-unbounded", "5. ... plain okapi, same load (no admission control)",
                     "the worst pair's lag p99 over its bound, plain okapi under the same load",
                     unbounded_visibility, None),
    AcceptanceTarget("scaling-1-2", "6. scaling 1 -> 2 partitions (YCSB-A)",
                     "2-partition over 1-partition YCSB-A throughput, paired rounds, lean load generator",
                     scaling_gain, Goal(">", 1.0, "throughput grows")),
    AcceptanceTarget("durable-ycsb-a", f"durable YCSB-A, one partition, {FAST_SESSIONS} sessions",
                     "1 - durable / in-memory YCSB-A throughput (commit log, group commit), paired rounds",
                     durable_cost, Goal("<=", 0.15, "within {:.0%} of in memory")),
    AcceptanceTarget("server-cpu-per-op", "server CPU per operation (YCSB-A)",
                     "server process CPU over operations in the YCSB-A window, in memory (durable beside it)",
                     server_cpu_per_operation, Goal("<=", 10.0, "<= {:.0f} us")),
    AcceptanceTarget("redis-benchmark-c1", "redis-benchmark -c 1 (no pipelining)",
                     "okapikv's RESP port over redis-server, redis-benchmark -t set,get -c 1 -P 1",
                     redis_benchmark_share(1, 1), None),
    AcceptanceTarget("redis-benchmark-c50", "redis-benchmark -c 50 (no pipelining)",
                     "okapikv's RESP port over redis-server, redis-benchmark -t set,get -c 50 -P 1",
                     redis_benchmark_share(50, 1), Goal(">=", 1.0, ">= {:.0%} of redis-server")),
    AcceptanceTarget("redis-benchmark-p16", "redis-benchmark -c 50 -P 16 (pipelined)",
                     "okapikv's RESP port over redis-server, redis-benchmark -t set,get -c 50 -P 16",
                     redis_benchmark_share(50, 16), None),
    AcceptanceTarget("redis-benchmark-incr", "redis-benchmark -t incr -c 50 (counters)",
                     "okapikv's INCR (a PN-counter CRDT update) over redis-server's, redis-benchmark -t incr -c 50",
                     redis_benchmark_incr(50, 1), None),
    AcceptanceTarget("ttl-metadata", "TTL metadata per update",
                     "bytes a key's expiry adds to its version (stored and replicated), docs/protocol.md \"Expiry\"",
                     ttl_metadata, None),
    AcceptanceTarget("load-rate", "bulk load, {records:,} records, one durable partition",
                     "records per second of `bulk_put` (what `okapi load` and the benchmarks use) into a fresh "
                     "durable partition", load_rate, Goal(">=", 100_000.0, ">= {:,.0f} records/s")),
    AcceptanceTarget("load-checkpoints", "... its checkpoints past the load's end, {records:,} records",
                     "seconds from the bulk load's last acknowledgement until every closed log segment is folded "
                     "into the checkpoint (the data-size target below is measured after them)", load_checkpoints,
                     None),
    AcceptanceTarget("durable-data-size", "durable YCSB-A at {large:,} vs {small:,} records",
                     "1 - YCSB-A throughput at the large data set over the small one, durable, paired rounds, "
                     "each measured once its log's closed segments are checkpointed",
                     data_size_cost, Goal("<=", 0.10, "within {:.0%}")),
    AcceptanceTarget("recovery", "recovery of {records:,} versions, one durable partition",
                     "opening a data directory and loading it into a fresh core, its versions all in the commit "
                     "log and (after a clean close) all in the checkpoint; the store alone, no server",
                     recovery, None),
    AcceptanceTarget("checkpoint-under-load", "checkpoint of {rows:,} logged versions",
                     "folding them into SQLite beside a thread spinning in Python (an event loop at full load; "
                     "switch interval 0.5 ms), and alone", checkpoint_cost, None),
    AcceptanceTarget("idle-cores", "idle cores per server",
                     "CPU of each server of an idle 3 DC x 2 partition cluster (the default `okapi up` shape) "
                     "once it backed off; the busiest server", idle_cores, Goal("<=", 0.01, "<= {:.2f} core")),
    AcceptanceTarget("idle-first-visibility", "first-update visibility after idle",
                     "one PUT per DC pair after the idle spell: the worst pair's remote visibility over the UST "
                     f"path plus {STABILIZATION_PERIODS} stabilization periods", idle_visibility,
                     Goal("<=", 0, f"<= UST path + {STABILIZATION_PERIODS} stabilization periods")),
)


def judge(fast: FastFigures, memory: Sequence[MemoryRow]) -> list[Verdict]:
    """One row per target and figure measured, in the table's order (missing figures: no row)."""
    rows: list[Verdict] = []
    for target in TARGETS:
        for measured in target.figures(fast, memory):
            goal = target.goal
            rows.append(Verdict(target.title.format_map(measured.subject),
                                COMPARISON if goal is None else goal.describe(), measured.text,
                                None if goal is None else goal.met(measured.figure), target.id))
    return rows
