"""Idle cost: the CPU a cluster doing nothing burns, and how soon the first update after the idle
spell is visible in the other DCs (docs/benchmarks.md, "Idle cost"; ``okapikv.core.pacing``).

The suite starts a cluster of the default `okapi up` shape (3 DCs x 2 partitions, the emulated WAN)
and leaves it alone past the servers' ``idle_after_ms`` (``settle_s``: every partition has backed
off), then reads each server's CPU time from ``/proc`` over ``idle_s`` seconds; then one probe per
ordered DC pair (``harness.visibility``: PUT in one DC, poll a fresh session in the other) times the
remote visibility, all pairs at once, so each DC's first PUT is the first update after the spell.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.harness.proc import process_cpu_seconds
from benchmarks.harness.visibility import PairSamples, measure_visibility

#: Left alone this long beyond the servers' idle_after_ms before the CPU window opens.
SETTLE_MARGIN_S = 0.5


@dataclass(frozen=True, slots=True)
class IdleMeasurement:
    """Each server's cores over the idle window (in the order of the pids given; a server whose
    CPU time could not be read is left out), the window's length, and every DC pair's probe."""

    idle_s: float
    cores: list[float]
    pairs: list[PairSamples]


def measure_idle(runner: asyncio.Runner, pids: Sequence[int], dc_addresses: tuple[str, ...],
                 dc_names: tuple[str, ...], *, idle_s: float, settle_s: float,
                 timeout_s: float) -> IdleMeasurement:
    """Measure an idle cluster (module docstring): ``pids`` are its servers' processes (none for a
    cluster started elsewhere: no CPU figures), ``runner`` runs the probes' event loop."""
    time.sleep(settle_s)
    before = {pid: process_cpu_seconds(pid) for pid in pids}
    started = time.monotonic()
    time.sleep(idle_s)
    after = {pid: process_cpu_seconds(pid) for pid in pids}
    elapsed = time.monotonic() - started
    cores = [(end - start) / elapsed for pid in pids
             if (start := before[pid]) is not None and (end := after[pid]) is not None]
    pairs = runner.run(measure_visibility(dc_addresses, dc_names, samples=1, deadline_s=timeout_s,
                                          probe_timeout_s=timeout_s, timeout_s=timeout_s))
    return IdleMeasurement(round(elapsed, 3), [round(core, 5) for core in cores], pairs)
