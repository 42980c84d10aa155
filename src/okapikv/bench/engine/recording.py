"""What a load process measures in: its measured window, and the recorder of its operations.

Shared by both load generators (``engine.worker``'s async-client sessions and ``engine.lean``'s
slots), which record into the same ``Recorder`` the same way, so their runs are recorded alike.

Latency is recorded per operation kind, and under ``all`` once per top-level operation, only for
operations that complete inside the measured window (after the warm-up), in microseconds.
"""

from __future__ import annotations

import time
from array import array
from collections import Counter
from typing import Any

from okapikv.bench.engine.histograms import new_histogram, record_us

ALL = "all"  # every top-level operation, whatever its kind (a read-modify-write counts once)


class Window:
    """The measured window in ``perf_counter_ns`` units of this process."""

    def __init__(self, start_at: float, warmup_s: float, duration_s: float) -> None:
        offset_ns = int((start_at - time.time()) * 1e9)
        now = time.perf_counter_ns()
        self.start_ns = now + offset_ns
        self.measure_ns = self.start_ns + int(warmup_s * 1e9)
        self.end_ns = self.measure_ns + int(duration_s * 1e9)

    def seconds_until(self, instant_ns: int) -> float:
        return max(0.0, (instant_ns - time.perf_counter_ns()) / 1e9)


class Recorder:
    """Counters and latencies of one load process.

    Latencies are appended to flat arrays during the run and put into HdrHistograms only at the
    end (``histograms``): hdrh's ``record_value`` is pure Python and cost 9% of a load process's CPU
    at 64 pipelined sessions, CPU the measured store then did not get on a 2-core machine.

    One array per top-level operation kind, so a completed operation costs one append: ``all`` is
    their union, made at the end. A read-modify-write's GET and SWAP go to arrays of their own
    (``record_part``), merged into ``read`` and ``update`` at the end, as they are not operations
    of their own under ``all``."""

    def __init__(self) -> None:
        self.latencies_us: dict[str, array[int]] = {}  # top-level operations by kind
        self._part_latencies_us: dict[str, array[int]] = {}  # the GET and SWAP of read-modify-writes
        self.in_window = 0
        self.completed = 0
        self.errors: Counter[str] = Counter()
        self.last_error = ""

    def samples(self, kind: str) -> array[int]:
        """The array of ``kind``'s top-level latencies (us), to append to."""
        samples = self.latencies_us.get(kind)
        if samples is None:
            samples = self.latencies_us[kind] = array("q")
        return samples

    def record(self, kind: str, latency_ns: int) -> None:
        """A completed top-level operation of ``kind`` (counted under ``all`` too)."""
        self.samples(kind).append(latency_ns // 1000)

    def record_part(self, kind: str, latency_ns: int) -> None:
        """A step of a top-level operation (a read-modify-write's GET or SWAP): ``kind`` only."""
        samples = self._part_latencies_us.get(kind)
        if samples is None:
            samples = self._part_latencies_us[kind] = array("q")
        samples.append(latency_ns // 1000)

    def histograms(self) -> dict[str, Any]:
        merged: dict[str, list[array[int]]] = {}
        for kind, samples in self.latencies_us.items():
            if samples:
                merged.setdefault(kind, []).append(samples)
                merged.setdefault(ALL, []).append(samples)
        for kind, samples in self._part_latencies_us.items():
            if samples:
                merged.setdefault(kind, []).append(samples)
        histograms: dict[str, Any] = {}
        for kind, arrays in merged.items():
            histogram = histograms[kind] = new_histogram()
            counts: Counter[int] = Counter()
            for samples in arrays:
                counts.update(samples)  # counting in C: few distinct values
            for latency_us, count in counts.items():
                record_us(histogram, latency_us, count)
        return histograms
