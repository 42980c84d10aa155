"""Every server's replication queues and visibility lag, sampled on a thread while a run goes on.

Replication queues (links: queued + unacknowledged messages): keeping up means the total does not
trend up, the second half of the samples not above the first half by more than noise.

Visibility lag: at DC j, how old the newest update of DC i that j's clients can read is (now minus
the physical part of ``stable[i]``). An update written at time p becomes visible at j when that
frontier passes p, so the lag sampled over a run is the distribution of remote visibility latency
as the servers apply it, free of the probing client's own queueing on a saturated machine
(docs/protocol.md, "Stabilization"; heartbeats move the frontier when DC i writes nothing). The
servers sample it at every timer tick (``stable_lag_samples`` in their Stats, cumulative): the
window's distribution is the last read minus the first, ~1,000 samples per pair in 5 s.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

#: Queue samples a second (the lag is sampled by the servers themselves).
STATS_SAMPLE_S = 0.05


class _StatsSource(Protocol):
    def fetch_stats(self) -> Mapping[str, Mapping[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """The replication queues over the sampled window (messages and bytes, every server's links)."""

    samples: int
    max_messages: int = 0
    mean_messages: float = 0.0
    first_half_mean: float = 0.0
    second_half_mean: float = 0.0
    max_bytes: int = 0
    series: list[list[float]] = field(default_factory=list)  # [seconds since start, messages, bytes]

    def to_dict(self) -> dict[str, Any]:
        if not self.samples:
            return {"samples": 0}
        return {"samples": self.samples, "max_messages": self.max_messages, "mean_messages": self.mean_messages,
                "first_half_mean": self.first_half_mean, "second_half_mean": self.second_half_mean,
                "max_bytes": self.max_bytes, "series": self.series}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueueSummary:
        """Read back from results.json; a figure the file lacks is zero."""
        return cls(**{"samples": 0, **{key: data[key] for key in data if key in cls.__dataclass_fields__}})


@dataclass(frozen=True, slots=True)
class LagSummary:
    """The servers' visibility lag of one DC pair over the window, in ms (None: no samples)."""

    samples: int
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """As results.json writes it, inside the pair's row: ``lag_samples``, ``lag_p50_ms``, ..."""
        if not self.samples:
            return {"lag_samples": 0}
        return {"lag_samples": self.samples, "lag_p50_ms": self.p50_ms, "lag_p99_ms": self.p99_ms,
                "lag_max_ms": self.max_ms}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LagSummary:
        return cls(int(data.get("lag_samples", 0)), data.get("lag_p50_ms"), data.get("lag_p99_ms"),
                   data.get("lag_max_ms"))


class ReplicationSampler:
    """Samples ``cluster``'s Stats every ``interval_s`` between ``__enter__`` and ``__exit__``."""

    def __init__(self, cluster: _StatsSource, interval_s: float = STATS_SAMPLE_S) -> None:
        self.cluster = cluster
        self.interval_s = interval_s
        self.samples: list[tuple[float, int, int]] = []  # (seconds since start, messages, bytes)
        # (source DC, destination DC) -> {lag in tenths of a ms: samples}, cumulative: first read, last read
        self._lag_first: dict[tuple[int, int], dict[int, int]] = {}
        self._lag_last: dict[tuple[int, int], dict[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replication-sampler", daemon=True)

    def __enter__(self) -> ReplicationSampler:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            messages = size = 0
            for stats in self.cluster.fetch_stats().values():
                for link in stats.get("links", {}).values():
                    messages += int(link.get("queued", 0)) + int(link.get("unacked", 0))
                    size += int(link.get("queued_bytes", 0)) + int(link.get("unacked_bytes", 0))
                destination = int(stats.get("dc_index", 0))
                for source, counts in enumerate(stats.get("stable_lag_samples", [])):
                    if source != destination:
                        read = {int(tenths): int(count) for tenths, count in counts.items()}
                        self._lag_first.setdefault((source, destination), read)
                        self._lag_last[(source, destination)] = read
            self.samples.append((round(time.monotonic() - self._started, 2), messages, size))

    def summary(self) -> QueueSummary:
        counts = [messages for _, messages, _ in self.samples]
        if not counts:
            return QueueSummary(0)
        half = len(counts) // 2
        first, second = counts[:half] or counts, counts[half:]
        return QueueSummary(
            samples=len(counts), max_messages=max(counts), mean_messages=round(statistics.fmean(counts), 1),
            first_half_mean=round(statistics.fmean(first), 1), second_half_mean=round(statistics.fmean(second), 1),
            max_bytes=max(size for _, _, size in self.samples), series=[list(sample) for sample in self.samples],
        )

    def lag_summary(self, source: int, destination: int) -> LagSummary:
        first, last = self._lag_first.get((source, destination), {}), self._lag_last.get((source, destination), {})
        window = sorted((lag, count - first.get(lag, 0)) for lag, count in last.items() if count > first.get(lag, 0))
        total = sum(count for _, count in window)
        if not total:
            return LagSummary(0)

        def quantile(q: float) -> float:
            rank, running = q * total, 0
            for lag, count in window:
                running += count
                if running >= rank:
                    return lag / 10
            return window[-1][0] / 10

        return LagSummary(total, quantile(0.5), quantile(0.99), window[-1][0] / 10)
