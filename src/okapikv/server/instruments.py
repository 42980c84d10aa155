"""Instruments a server updates as it runs: latency histograms and remote visibility lag samples.

They are the figures the core cannot keep (it has no clock of its own beyond the ``now_us`` it is
given): how long a client waited for its reply end to end through the driver (parking included),
and how old each remote DC's newest visible update was at every timer tick. Both are updated on the
event loop, on the hot path for latency, so they cost one bisection and two additions per
operation, with no lock (the readers, the Stats RPC and the Prometheus exporter, run on the same
loop). The exporter (``okapikv.server.metrics``) and the Stats RPC read them through the node's
snapshot (``PartitionNode.snapshot``); this module knows neither.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from okapikv.core.messages import (
    DeleteRequest,
    ExpireRequest,
    GetRequest,
    IncrRequest,
    PutManyRequest,
    PutRequest,
    ReadTxRequest,
    ScanRequest,
    SwapRequest,
)
from okapikv.core.timestamps import physical_of
from okapikv.wire.stats import LatencyFigures

#: The operation kinds of the latency histograms, by request type (the same as the Pipeline result kinds).
REQUEST_KINDS: dict[type, str] = {
    GetRequest: "get", PutRequest: "put", PutManyRequest: "put_many", SwapRequest: "swap", DeleteRequest: "delete",
    ScanRequest: "scan", ReadTxRequest: "read_tx", IncrRequest: "incr", ExpireRequest: "expire",
}

# Upper bounds in seconds: from a loopback GET (~100 us) to a GentleRain RO-TX waiting out the
# furthest DC (hundreds of ms) and a stuck request (seconds).
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)


class LatencyHistograms:
    """Cumulative latency histograms per operation type (Prometheus ``le`` buckets)."""

    __slots__ = ("bounds", "_counts", "_sums")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS_S) -> None:
        self.bounds = tuple(bounds)
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def observe(self, kind: str, seconds: float) -> None:
        counts = self._counts.get(kind)
        if counts is None:
            counts = self._counts[kind] = [0] * (len(self.bounds) + 1)
            self._sums[kind] = 0.0
        counts[bisect.bisect_left(self.bounds, seconds)] += 1  # bucket i: bounds[i-1] < s <= bounds[i]
        self._sums[kind] += seconds

    def kinds(self) -> list[str]:
        return sorted(self._counts)

    def count(self, kind: str) -> int:
        return sum(self._counts.get(kind, ()))

    def total_s(self, kind: str) -> float:
        return self._sums.get(kind, 0.0)

    def cumulative(self, kind: str) -> list[tuple[str, float]]:
        """``(le, count)`` pairs as Prometheus wants them, ending with ``+Inf``."""
        running = 0
        result: list[tuple[str, float]] = []
        counts = self._counts.get(kind, [0] * (len(self.bounds) + 1))
        for bound, count in zip((*self.bounds, float("inf")), counts, strict=True):
            running += count
            result.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
        return result

    def quantile_s(self, kind: str, quantile: float) -> float | None:
        """The upper bound of the bucket holding the ``quantile``; None without observations and
        +inf when it falls in the overflow bucket. Coarse on purpose: it is for `okapi status`."""
        counts = self._counts.get(kind)
        total = sum(counts) if counts else 0
        if not counts or total == 0:
            return None
        rank = quantile * total
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), counts, strict=True):
            running += count
            if running >= rank:
                return bound
        return float("inf")

    def figures(self) -> dict[str, LatencyFigures]:
        """Per type: count, mean, p50 and p99 (bucket bounds) in ms, and the buckets."""
        result: dict[str, LatencyFigures] = {}
        for kind in self.kinds():
            count = self.count(kind)
            p50, p99 = self.quantile_s(kind, 0.5), self.quantile_s(kind, 0.99)
            result[kind] = LatencyFigures(
                count=count,
                mean_ms=round(self.total_s(kind) / count * 1000, 3) if count else None,
                p50_ms=None if p50 is None or p50 == float("inf") else p50 * 1000,
                p99_ms=None if p99 is None or p99 == float("inf") else p99 * 1000,
                buckets=tuple(self.cumulative(kind)),
                total_s=self.total_s(kind),
            )
        return result


class LagSamples:
    """Per source DC, how often each remote visibility lag (in tenths of a ms, rounded up) was seen: sampled at every
    timer tick of the server (each stabilization period under Okapi), cumulative.

    Why here and not by polling ``Stats``: a poller at 20 Hz got ~70 samples per pair in a 5 s
    window, so its "p99" was the maximum; a tick samples every 5 ms (~1,000 per pair) at no RPC
    cost. Read twice and subtract (``benchmarks.harness.replication``) for a window's distribution.
    """

    __slots__ = ("counts",)

    def __init__(self, num_dcs: int) -> None:
        self.counts: list[dict[int, int]] = [{} for _ in range(num_dcs)]

    def observe(self, now_us: int, stable: Sequence[int], own_dc: int) -> None:
        for source, entry in enumerate(stable):
            if source != own_dc and entry:
                lag = -((physical_of(entry) - now_us) // 100)  # tenths of a ms, rounded up: never flatters
                counts = self.counts[source]
                counts[lag] = counts.get(lag, 0) + 1

    def snapshot(self) -> list[dict[str, int]]:
        """JSON-ready: per source DC, ``{lag in tenths of a ms: samples}`` (string keys)."""
        return [{str(lag): count for lag, count in sorted(counts.items())} for counts in self.counts]
