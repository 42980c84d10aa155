"""Configuration of one partition server's core, validated so a bad config fails at start-up
with a clear message instead of misbehaving later.

The defaults follow the paper's evaluation (Okapi section 5): heartbeats after 1 ms without an
update, stabilization every 5 ms, no idle backoff (``idle_after_us = 0``; ``okapikv.core.pacing``);
the key and value limits are the service's (1 KiB, 1 MiB).

Invariants (tested in ``tests/unit/test_config.py``): a ``CoreConfig`` that exists is valid (ids in
range, a registered protocol, every interval, budget and limit positive) and never changes (frozen);
construction reports every problem at once in one ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass

from okapikv.core.protocols import protocol_names

#: The limits on snapshot reads that must be positive (``max_snapshot_retries`` may be 0; the cluster
#: config's ``[reads]`` section sets them all: ``okapikv.cluster.reads``).
#: The idle pacing's period (``okapikv.core.pacing``; the cluster's default, ``okapi up``'s and the
#: simulator's): an idle server's cost is per tick (about a dozen messages sent, received and
#: acknowledged), and the first update after an idle spell is visible within the same bound whatever
#: the period (the snap-back: ``tests/sim/test_idle.py``), so the period is as long as the stable
#: vectors may trail an idle cluster's clocks (docs/benchmarks.md, "Idle cost").
DEFAULT_IDLE_INTERVAL_US = 1_000_000

#: The most DCs a cluster may have: vectors of one entry per DC travel in every session, message and
#: reply, and the RESP port's session tokens hold the count in one byte (``okapikv.resp.tokens``).
#: Also what keeps the work of reading a config or a history, which size tables by the DC count, in
#: proportion to the bytes read.
MAX_DCS = 255

READ_LIMITS = ("max_read_keys", "max_scan_items", "max_scan_bytes", "max_concurrent_reads", "max_read_items",
               "read_timeout_us", "read_deadline_us", "snapshot_lease_us")


@dataclass(frozen=True, slots=True)
class CoreConfig:
    dc: int
    partition: int
    num_dcs: int
    num_partitions: int
    protocol: str = "okapi"
    heartbeat_interval_us: int = 1_000  # paper, section 5: heartbeat after 1 ms without updates
    stabilization_interval_us: int = 5_000  # paper, section 5: stabilization every 5 ms
    piggyback_usv: bool = False  # compute the USV inside the GSV round (paper's untried idea)
    # Idle pacing (``okapikv.core.pacing``): after this long without a client write or remote update,
    # the round, the heartbeat and the GC pass run once per ``idle_interval_us`` (0: never back off)
    idle_after_us: int = 0
    idle_interval_us: int = DEFAULT_IDLE_INTERVAL_US
    gc_interval_us: int = 50_000
    gc_budget: int = 2_000  # keys examined per GC pass, so a pass never stalls the server
    max_key_bytes: int = 1024
    max_value_bytes: int = 1 << 20
    # Snapshot reads (RO-TX, SCAN), docs/operations.md "Read limits and paging":
    max_read_keys: int = 10_000  # keys one RO-TX may name
    max_scan_items: int = 4_096  # pairs per SCAN reply (a page); a longer range is paged
    max_scan_bytes: int = 4 << 20  # about this many bytes of keys and values per page (at least one pair)
    max_concurrent_reads: int = 128  # RO-TXs and SCAN pages this server coordinates at once
    max_read_items: int = 32_768  # ... and their keys (RO-TX) or item caps (SCAN page) together
    max_snapshot_retries: int = 3  # fresh snapshots after a slice came back too_old, then an error
    # a read fails when a partition that owes it a slice has sent this server nothing for this long
    # (a partition that restarted says so at once: ``Restarted``)
    read_timeout_us: int = 5_000_000
    read_deadline_us: int = 30_000_000  # a read still unanswered after this fails, however it goes
    snapshot_lease_us: int = 5_000_000  # a paged SCAN's snapshot is kept readable this long between pages
    # the most a timestamp taken from a client's session or a peer may be ahead of this server's clock
    # (the HLC paper's epsilon, CockroachDB's max offset): far above NTP's error, far below a bad step
    max_clock_offset_us: int = 500_000
    # the failure detector (``okapikv.core.detector``): a member DC silent this long is removed (0: off)
    auto_remove_after_us: int = 0

    def __post_init__(self) -> None:
        problems = []
        if self.num_dcs < 1:
            problems.append("num_dcs must be at least 1")
        if self.num_dcs > MAX_DCS:
            problems.append(f"num_dcs must be at most {MAX_DCS}")
        if self.num_partitions < 1:
            problems.append("num_partitions must be at least 1")
        if not 0 <= self.dc < max(self.num_dcs, 1):
            problems.append(f"dc {self.dc} out of range 0..{self.num_dcs - 1}")
        if not 0 <= self.partition < max(self.num_partitions, 1):
            problems.append(f"partition {self.partition} out of range 0..{self.num_partitions - 1}")
        if self.protocol not in protocol_names():
            problems.append(f"unknown protocol {self.protocol!r}; choose one of {', '.join(protocol_names())}")
        for name in ("heartbeat_interval_us", "stabilization_interval_us", "idle_interval_us", "gc_interval_us",
                     "gc_budget", "max_key_bytes", "max_value_bytes", *READ_LIMITS, "max_clock_offset_us"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive")
        if self.idle_after_us < 0:
            problems.append("idle_after_us must not be negative (0: never back off)")
        if self.idle_after_us > 0 and self.idle_interval_us < max(self.heartbeat_interval_us,
                                                                   self.stabilization_interval_us):
            problems.append("idle_interval_us must be at least heartbeat_interval_us and stabilization_interval_us "
                            "(backing off must not speed up)")
        if self.idle_after_us > 0 and self.idle_interval_us >= self.read_timeout_us:
            problems.append("idle_interval_us must be below read_timeout_us (an idle partition that owes a slice "
                            "would look gone)")
        quiet = self.idle_interval_us if self.idle_after_us > 0 else self.heartbeat_interval_us
        if self.auto_remove_after_us < 0 or 0 < self.auto_remove_after_us < 3 * quiet:
            problems.append("auto_remove_after_us must be 0 (off) or at least three heartbeat periods "
                            "(the idle interval with idle pacing): a quiet replica would look gone")
        if self.max_snapshot_retries < 0:
            problems.append("max_snapshot_retries must not be negative")
        if self.max_read_items < max(self.max_read_keys, self.max_scan_items):
            problems.append("max_read_items must be at least max_read_keys and max_scan_items (one read of each "
                            "size must fit)")
        if problems:
            raise ValueError("invalid server configuration: " + "; ".join(problems))
