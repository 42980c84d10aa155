"""Remote update visibility latency per ordered DC pair (Okapi, section 5: Figure 6's CDF), and
per destination DC with its sources pooled (``by_destination``, as the paper states the claim).

A probe writes a unique key in DC i and polls it from a fresh session in DC j until the value
appears; the sample is the time from the PUT's acknowledgement to the first read that sees it.
Polling granularity (``poll_interval_s``) bounds the error from above; the clients run on the same
machine as the servers, so no clock offset enters the measurement.

Why from a fresh session: a session that had read newer state might make the server return the
value no earlier anyway (visibility is a server-side rule), but a fresh one is what a remote user
would be. Probe keys start with ``v`` so they never fall inside a YCSB scan range (digits only).

Bounded: ``samples`` per pair, ``concurrency`` probes in flight, each probe gives up after
``probe_timeout_s`` (counted as a timeout), and the whole probe stops at ``deadline_s``.

Concurrency defaults to one probe per DC pair: every in-flight probe polls once a millisecond, and
on a small machine many pollers load the servers and the probing process enough to inflate the
very latency they measure (30 concurrent probes read 1.5-3x higher than 6 on 2 cores).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from okapikv.bench.engine.results import VisibilityPair


@dataclass(slots=True)
class PairSamples:
    source: str
    destination: str
    samples_ms: list[float] = field(default_factory=list)
    timeouts: int = 0

    @property
    def name(self) -> str:
        return f"{self.source}->{self.destination}"


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    position = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[position]


def summarize(pair: PairSamples) -> VisibilityPair:
    values = sorted(pair.samples_ms)
    return VisibilityPair(
        source=pair.source,
        destination=pair.destination,
        count=len(values),
        timeouts=pair.timeouts,
        mean_ms=round(sum(values) / len(values), 3) if values else 0.0,
        p50_ms=round(percentile(values, 0.5), 3),
        p90_ms=round(percentile(values, 0.9), 3),
        p99_ms=round(percentile(values, 0.99), 3),
        max_ms=round(values[-1], 3) if values else 0.0,
        samples_ms=[round(value, 3) for value in pair.samples_ms],
    )


@dataclass(frozen=True, slots=True)
class DestinationVisibility:
    """Visibility at one destination DC, its sources pooled (the paper states its CDF claim per
    destination: Okapi's and Cure's are bimodal, one mode per source DC, because an update's
    visibility at DC R depends on its source's delay to R; GentleRain's is unimodal, as it depends
    on R's delay to its furthest DC). ``source_p50_ms``: the median from each source;
    ``source_spread_ms``: the largest minus the smallest of them, the distance between the modes
    (near 0: one mode)."""

    destination: str
    count: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    source_p50_ms: dict[str, float]
    source_spread_ms: float


def by_destination(pairs: Iterable[tuple[str, str, Sequence[float]]]) -> list[DestinationVisibility]:
    """Per destination DC (in order of first appearance), from (source, destination, samples ms)."""
    pooled: dict[str, list[float]] = {}
    medians: dict[str, dict[str, float]] = {}
    for source, destination, samples in pairs:
        pooled.setdefault(destination, []).extend(samples)
        if samples:
            medians.setdefault(destination, {})[source] = round(percentile(sorted(samples), 0.5), 3)
    result = []
    for destination, values in pooled.items():
        values.sort()
        mine = medians.get(destination, {})
        result.append(DestinationVisibility(
            destination=destination, count=len(values),
            mean_ms=round(sum(values) / len(values), 3) if values else 0.0,
            p50_ms=round(percentile(values, 0.5), 3), p90_ms=round(percentile(values, 0.9), 3),
            p99_ms=round(percentile(values, 0.99), 3), source_p50_ms=mine,
            source_spread_ms=round(max(mine.values()) - min(mine.values()), 3) if mine else 0.0,
        ))
    return result


async def _probe_once(writer: Any, reader: Any, key: bytes, value: bytes, poll_interval_s: float,
                      probe_timeout_s: float) -> float | None:
    await writer.put(key, value)
    acknowledged = time.perf_counter()
    give_up = acknowledged + probe_timeout_s
    while True:
        if await reader.get(key) == value:
            return (time.perf_counter() - acknowledged) * 1000.0
        if time.perf_counter() >= give_up:
            return None
        await asyncio.sleep(poll_interval_s)


async def measure_visibility(
    dc_addresses: tuple[str, ...],
    dc_names: tuple[str, ...],
    *,
    samples: int = 200,
    concurrency: int | None = None,
    poll_interval_s: float = 0.001,
    probe_timeout_s: float = 5.0,
    deadline_s: float = 60.0,
    timeout_s: float = 10.0,
) -> list[PairSamples]:
    """Visibility samples for every ordered pair of DCs (empty with a single DC)."""
    from okapikv.client import AsyncClient

    if len(dc_addresses) < 2:
        return []
    roots = [AsyncClient(address, timeout_s=timeout_s) for address in dc_addresses]
    try:
        for root in roots:
            await root.connect()
        pairs = [
            PairSamples(dc_names[i], dc_names[j])
            for i in range(len(dc_addresses)) for j in range(len(dc_addresses)) if i != j
        ]
        indices = {pair.name: (dc_names.index(pair.source), dc_names.index(pair.destination)) for pair in pairs}
        # Interleave pairs so a deadline cut leaves every pair with samples.
        jobs = [pair for _ in range(samples) for pair in pairs]
        counter = itertools.count()
        semaphore = asyncio.Semaphore(max(1, concurrency or len(pairs)))
        stop_at = time.monotonic() + deadline_s
        prefix = f"v{os.getpid():x}{int(time.time() * 1000) % 10**8:x}"

        async def run(pair: PairSamples) -> None:
            async with semaphore:
                if time.monotonic() >= stop_at:
                    return
                source, destination = indices[pair.name]
                number = next(counter)
                key = f"{prefix}k{number:07d}".encode()
                value = f"x{number}".encode()
                try:
                    sample = await _probe_once(roots[source].fork(), roots[destination].fork(), key, value,
                                               poll_interval_s, probe_timeout_s)
                except Exception:
                    sample = None
                if sample is None:
                    pair.timeouts += 1
                else:
                    pair.samples_ms.append(sample)

        await asyncio.wait_for(asyncio.gather(*(run(pair) for pair in jobs)), timeout=deadline_s + probe_timeout_s + 5)
        return pairs
    finally:
        for root in roots:
            with contextlib.suppress(Exception):  # closing is best effort
                await asyncio.wait_for(root.close(), timeout=5.0)


async def wait_until_visible(
    dc_addresses: tuple[str, ...],
    keys: list[bytes],
    *,
    deadline_s: float = 30.0,
    poll_interval_s: float = 0.01,
    timeout_s: float = 10.0,
) -> int:
    """Wait until every DC sees ``keys`` (after the load phase); returns how many are still missing.

    Without this, the first measured run in a remote DC would read a partly replicated data set
    and report misses as fast reads.
    """
    from okapikv.client import AsyncClient

    roots = [AsyncClient(address, timeout_s=timeout_s) for address in dc_addresses]
    try:
        stop_at = time.monotonic() + deadline_s
        missing = [(root, key) for root in roots for key in keys]
        while missing and time.monotonic() < stop_at:
            found = await asyncio.gather(*(root.get(key) for root, key in missing), return_exceptions=True)
            missing = [item for item, value in zip(missing, found, strict=True) if not isinstance(value, bytes)]
            if missing:
                await asyncio.sleep(poll_interval_s)
        return len(missing)
    finally:
        for root in roots:
            with contextlib.suppress(Exception):  # closing is best effort
                await asyncio.wait_for(root.close(), timeout=5.0)
