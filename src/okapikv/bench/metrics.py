"""Measurements of one run: latency histograms, server counters, CPU time, derived figures.

Latency: HdrHistogram (1 us .. 60 s, 3 significant digits) per operation kind per load process.
Processes send their histograms to the parent in HdrHistogram's compressed encoded form, which the
parent merges exactly (``decode_and_add``): averaging per-process percentiles would be wrong.

Waits (the paper's central measurement) and metadata bytes come from each server's Stats RPC:
the parent reads every server before and after the measured window and keeps the difference, so
the load phase and warm-up do not count. Wait reasons are the core's: ``tx_*`` are waits of a
RO-TX/SCAN (Cure's per-slice clock wait, GentleRain's coordinator stable-time wait), the others are
waits of a write (``put_dependency``, ``clock_tick``).

CPU time is read from ``/proc/<pid>/stat`` for servers (psutil would be one more dependency for
two numbers) and from ``time.process_time`` inside each load process.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 60_000_000
SIGNIFICANT_DIGITS = 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_us(histogram: HdrHistogram, latency_us: int, count: int = 1) -> None:
    """Record a latency (``count`` times), clamped into the histogram's range (an overflow must not
    lose the sample)."""
    histogram.record_value(min(max(latency_us, LOWEST_US), HIGHEST_US), count)


def merge_encoded(encoded: Iterable[bytes]) -> HdrHistogram:
    merged = new_histogram()
    for blob in encoded:
        if blob:
            merged.decode_and_add(blob)
    return merged


@dataclass(frozen=True, slots=True)
class LatencySummary:
    count: int
    mean_us: float
    p50_us: float
    p99_us: float
    p999_us: float
    max_us: float

    @classmethod
    def of(cls, histogram: HdrHistogram) -> LatencySummary:
        count = histogram.get_total_count()
        if count == 0:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return cls(
            count=count,
            mean_us=round(histogram.get_mean_value(), 1),
            p50_us=float(histogram.get_value_at_percentile(50.0)),
            p99_us=float(histogram.get_value_at_percentile(99.0)),
            p999_us=float(histogram.get_value_at_percentile(99.9)),
            max_us=float(histogram.get_max_value()),
        )


# ------------------------------------------------------------------------------------ CPU time


def _clock_ticks() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 100


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process, from ``/proc/<pid>/stat`` (None if unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            text = handle.read()
    except OSError:
        return None
    # The command name (field 2) is parenthesized and may contain spaces: split after it.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        user_ticks, system_ticks = int(fields[11]), int(fields[12])
    except (IndexError, ValueError):
        return None
    return (user_ticks + system_ticks) / _clock_ticks()


def total_cpu_seconds(pids: Iterable[int]) -> float | None:
    readings = [process_cpu_seconds(pid) for pid in pids]
    known = [reading for reading in readings if reading is not None]
    return sum(known) if known else None


# ------------------------------------------------------------------------------------ server stats


def _number(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return value


def _diff(after: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    """``after - before`` for every numeric leaf (nested dicts recursively); missing before = 0."""
    result: dict[str, Any] = {}
    for key, value in after.items():
        previous = before.get(key) if isinstance(before, Mapping) else None
        if isinstance(value, Mapping):
            result[key] = _diff(value, previous if isinstance(previous, Mapping) else {})
        elif isinstance(value, int | float) and not isinstance(value, bool):
            result[key] = value - _number(previous)
    return result


def _add_into(total: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, Mapping):
            _add_into(total.setdefault(key, {}), value)
        elif isinstance(value, int | float):
            total[key] = total.get(key, 0) + value


def stats_delta(after: Mapping[str, Mapping[str, Any]], before: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Sum over servers of (after - before) of every counter. Keys are server addresses."""
    total: dict[str, Any] = {}
    for address, stats in after.items():
        _add_into(total, _diff(stats, before.get(address, {})))
    # Means and maxima are not additive: drop them, they are recomputed from totals.
    for wait in total.get("waits", {}).values():
        if isinstance(wait, dict):
            wait.pop("mean_us", None)
            wait.pop("max_us", None)
    return total


def is_read_wait(reason: str) -> bool:
    """``tx_*`` reasons are waits of a snapshot read (RO-TX or SCAN); the rest are write waits."""
    return reason.startswith("tx")


@dataclass(frozen=True, slots=True)
class WaitSummary:
    """How often operations of one kind blocked, and for how long on average when they did.

    ``probability`` = waits / operations of that kind. For Cure a RO-TX over p partitions can wait
    on each of its p slices, so the read figure counts slice waits per transaction: it is the
    probability for p = 1 and an upper bound (capped at 1) beyond.
    """

    operations: int
    waits: int
    probability: float
    mean_us: float
    total_us: float
    reasons: dict[str, int]


def summarize_waits(delta: Mapping[str, Any]) -> dict[str, WaitSummary]:
    operations = delta.get("operations", {})
    waits = delta.get("waits", {})
    write_ops = int(sum(_number(operations.get(kind)) for kind in ("put", "swap", "delete")))
    read_ops = int(sum(_number(operations.get(kind)) for kind in ("read_tx", "scan")))
    result: dict[str, WaitSummary] = {}
    for label, ops, wanted in (("write", write_ops, False), ("rotx", read_ops, True)):
        chosen = {reason: w for reason, w in waits.items() if is_read_wait(reason) == wanted}
        count = int(sum(_number(w.get("count")) for w in chosen.values()))
        total_us = sum(_number(w.get("total_us")) for w in chosen.values())
        result[label] = WaitSummary(
            operations=ops,
            waits=count,
            probability=round(min(1.0, count / ops), 6) if ops else 0.0,
            mean_us=round(total_us / count, 1) if count else 0.0,
            total_us=total_us,
            reasons={reason: int(_number(w.get("count"))) for reason, w in chosen.items()},
        )
    return result


@dataclass(frozen=True, slots=True)
class TrafficSummary:
    """Replication and stabilization traffic of the whole cluster during the measured window."""

    updates_replicated: int
    metadata_bytes_per_update: float
    payload_bytes_per_update: float
    replication_bytes_per_s: float
    stabilization_bytes_per_s: float
    heartbeat_bytes_per_s: float
    stabilization_messages_per_s: float


def summarize_traffic(delta: Mapping[str, Any], window_s: float) -> TrafficSummary:
    sent = _number(delta.get("replicated_updates_sent"))
    metadata = _number(delta.get("replication_metadata_bytes"))
    payload = _number(delta.get("replication_payload_bytes"))
    window = max(window_s, 1e-9)
    return TrafficSummary(
        updates_replicated=int(sent),
        metadata_bytes_per_update=round(metadata / sent, 2) if sent else 0.0,
        payload_bytes_per_update=round(payload / sent, 2) if sent else 0.0,
        replication_bytes_per_s=round((metadata + payload) / window, 1),
        stabilization_bytes_per_s=round(_number(delta.get("stabilization_bytes")) / window, 1),
        heartbeat_bytes_per_s=round(_number(delta.get("heartbeat_bytes")) / window, 1),
        stabilization_messages_per_s=round(_number(delta.get("stabilization_messages_sent")) / window, 1),
    )
