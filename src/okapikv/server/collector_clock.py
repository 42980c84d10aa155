"""The passes of CPython's cyclic collector in a server process, and the seconds they held it.

A pass stops the event loop for as long as it walks the tracked objects; the serving process keeps
its long-lived heap (a recovered or bulk-loaded store) out of the walk (``okapikv.serve.collector``),
and what is left costs microseconds a pass. Whether that holds under a given load is a measured
figure, not an assumption: the node reports these counters in Stats (``collector_passes``,
``collector_seconds``) and a benchmark subtracts them over its window (a window with a pass of a
full heap in it measures the collector, not the store: docs/benchmarks.md, "Durable YCSB-A at
1,000,000 records").

The collector is the process's, so the clock is one per process (``CLOCK``), counting once
``install``ed (``okapikv.serve.app`` does, for each server's lifetime); a node of a process that
never installs it (the simulator, tests) reports zeros.
"""

from __future__ import annotations

import gc
import time
from typing import Any


class CollectorClock:
    """Counts collector passes and their seconds, through ``gc.callbacks`` while installed."""

    def __init__(self) -> None:
        self.collector_passes = 0
        self.collector_seconds = 0.0
        self._started: float | None = None
        self._holders = 0

    @property
    def installed(self) -> bool:
        return self._holders > 0

    def install(self) -> None:
        """Count from now on, until every ``install`` has had its ``remove`` (servers run in one
        process, as tests run them, each hold it for their lifetime)."""
        self._holders += 1
        if self._holders == 1:
            gc.callbacks.append(self._callback)

    def remove(self) -> None:
        if self._holders == 0:
            return
        self._holders -= 1
        if self._holders == 0:
            gc.callbacks.remove(self._callback)
            self._started = None

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:  # "stop" of a pass whose start was seen
            self.collector_seconds += time.perf_counter() - self._started
            self.collector_passes += 1
            self._started = None


#: the process's clock (module docstring)
CLOCK = CollectorClock()
