"""What group commit amortizes: fsyncs per second and operations per fsync, over a recent window.

Every commit group is one SQLite transaction, and in WAL mode with ``synchronous=FULL`` one fsync
of the WAL (``sqlite`` module docstring): the fsync count is the group count. What the batching
buys is how many operations and versions share each fsync; a counter since start hides a change of
load, so these figures are taken over the last ``WINDOW_S`` seconds (at least one sample's span).

``CommitRates`` keeps one sample per ``SAMPLE_S`` at most (monotonic time, fsyncs, versions written,
client operations), ``WINDOW_S / SAMPLE_S + 1`` samples in all (a bounded deque), and compares the
newest with the oldest. It is fed from the event-loop thread as each group ends, so a sample is a
plain tuple (one allocation a group, no constructor call).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

WINDOW_S = 10.0
SAMPLE_S = 1.0

#: (monotonic time, fsyncs, versions written, client operations)
_Sample = tuple[float, int, int, int]


@dataclass(frozen=True, slots=True)
class Rates:
    """Over the window: fsyncs per second, client operations and versions written per fsync."""

    fsyncs_per_s: float
    operations_per_fsync: float
    versions_per_fsync: float


class CommitRates:
    def __init__(self, window_s: float = WINDOW_S, sample_s: float = SAMPLE_S) -> None:
        self._sample_s = sample_s
        self._samples: deque[_Sample] = deque(maxlen=max(2, int(window_s / sample_s) + 1))

    def record(self, now_s: float, fsyncs: int, versions: int, operations: int) -> None:
        """The counters as of ``now_s``; kept when the newest sample is ``SAMPLE_S`` old (the newest
        is otherwise replaced, so the window always ends at the latest group)."""
        samples = self._samples
        if len(samples) >= 2 and now_s - samples[-2][0] < self._sample_s:
            samples[-1] = (now_s, fsyncs, versions, operations)
        else:
            samples.append((now_s, fsyncs, versions, operations))

    def rates(self, now_s: float) -> Rates:
        """The window's figures; zeros before two samples, or when the newest is older than the
        window (nothing was committed lately)."""
        samples = self._samples
        if len(samples) < 2:
            return Rates(0.0, 0.0, 0.0)
        first_s, first_fsyncs, first_versions, first_operations = samples[0]
        last_s, last_fsyncs, last_versions, last_operations = samples[-1]
        span = now_s - first_s
        fsyncs = last_fsyncs - first_fsyncs
        if span <= 0 or fsyncs <= 0 or now_s - last_s > self._sample_s * (samples.maxlen or 2):
            return Rates(0.0, 0.0, 0.0)
        return Rates(round(fsyncs / span, 1), round((last_operations - first_operations) / fsyncs, 2),
                     round((last_versions - first_versions) / fsyncs, 2))
