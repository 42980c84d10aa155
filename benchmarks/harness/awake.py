"""Keeping an idle cluster at its busy periods while its background CPU is measured.

A run's net server CPU per operation subtracts the servers' CPU with no client (``Bench.idle_cpu``):
what their timers (heartbeats, stabilization rounds, GC passes) take while they serve a load. An
okapikv server with no client backs off to idle pacing after ``idle_after_ms`` (``okapikv.core.pacing``),
so a cluster left alone measures the backed-off timers, less than they take under load. One write
every ``EVERY_S`` (well under the default ``idle_after_ms``, 1 s) keeps the whole cluster active: the
write is a client write at its partition, its replication is activity at that partition of every
other DC, and an active server wakes the other partitions of its DC (docs/protocol.md, "Idle
pacing"). Four writes a second cost the servers well under a thousandth of a core.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from okapikv.client.sync import Client
from okapikv.errors import OkapiError

#: one write this often (seconds): under a quarter of the default ``idle_after_ms``
EVERY_S = 0.25
#: the key written, outside every benchmark workload's key space (``user...`` keys)
KEY = b"~okapi-bench-awake"
#: each write's deadline (seconds)
TIMEOUT_S = 2.0


@dataclass
class Awake:
    """What the writer did: writes acknowledged and writes that failed."""

    writes: int = 0
    failures: int = 0


@contextlib.contextmanager
def kept_awake(address: str, *, every_s: float = EVERY_S, max_writes: int = 100_000) -> Iterator[Awake]:
    """Write ``KEY`` through the server at ``address`` every ``every_s`` until the block ends (at
    most ``max_writes`` writes); a failed write is counted and the next one tried on time."""
    done = threading.Event()
    awake = Awake()

    def write() -> None:
        try:
            with Client(address, timeout_s=TIMEOUT_S) as client:
                while not done.is_set() and awake.writes + awake.failures < max_writes:
                    try:
                        client.put(KEY, b"1")
                        awake.writes += 1
                    except OkapiError:
                        awake.failures += 1
                    done.wait(every_s)
        except OkapiError:  # the first connection failed: nothing written
            awake.failures += 1

    writer = threading.Thread(target=write, name="okapi-bench-awake", daemon=True)
    writer.start()
    try:
        yield awake
    finally:
        done.set()
        writer.join(timeout=TIMEOUT_S * 3)
