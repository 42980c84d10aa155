"""Counters the core keeps about itself: operations, waits (the paper's central measurement), and
the bytes of replication and stabilization metadata it sends. Plain integers, no clock: durations
are differences of the ``now`` values the driver passed in.

What the paper measures (Okapi section 5): how often and how long PUTs and RO-TXs block (the
``waits`` by reason: ``put_dependency``, ``clock_tick``, ``tx_clock``, ``tx_stable``; Okapi never
waits), the dependency metadata per replicated update (12 bytes for Okapi and GentleRain,
4 + 8 + 8 * (M - 1) for Cure) and the cost of the stabilization protocol.

The clock-offset discipline (``PartitionServer`` docstring, docs/operations.md) counts what it held
off: ``clock_offset_refusals`` (client requests and snapshot slices refused because they reach more
than the maximum clock offset ahead of the clock, or would wait that long for it) and
``clock_offset_clamps`` (peer messages whose watermark was held at the clock plus the offset).

Invariants: counters only grow; a wait is recorded once, when the parked request resumes, with the
time from its first arrival (``WaitStats.total_us`` / ``count`` is the mean stall).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True)
class WaitStats:
    count: int = 0
    total_us: int = 0
    max_us: int = 0

    def record(self, duration_us: int) -> None:
        self.count += 1
        self.total_us += duration_us
        self.max_us = max(self.max_us, duration_us)

    @property
    def mean_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0


@dataclass(slots=True)
class ServerStats:
    operations: Counter[str] = field(default_factory=Counter)
    waits: dict[str, WaitStats] = field(default_factory=dict)
    replicated_updates_sent: int = 0
    replicated_updates_received: int = 0
    replication_metadata_bytes: int = 0
    replication_payload_bytes: int = 0
    heartbeats_sent: int = 0
    heartbeat_bytes: int = 0
    stabilization_messages_sent: int = 0
    stabilization_bytes: int = 0
    gc_bytes: int = 0
    snapshot_retries: int = 0
    # per transaction (RO-TX or SCAN page) answered: how many stalled, and for how long in total
    # (``SnapshotReads._count_stall``: the coordinator's wait plus the longest slice's)
    snapshot_reads_finished: int = 0
    snapshot_read_stalls: int = 0
    snapshot_read_stall_us: int = 0
    rejected_requests: int = 0
    catch_up_requests_sent: int = 0
    catch_up_updates_sent: int = 0
    catch_up_replies_received: int = 0
    #: membership (``okapikv.core.membership``): changes adopted, removed DCs' updates relayed
    membership_changes: int = 0
    auto_removals: int = 0  # removals the failure detector proposed here (``okapikv.core.detector``)
    relay_updates_sent: int = 0
    progress_messages_sent: int = 0
    read_timeouts: int = 0
    repair_local_received: int = 0  # this DC's versions a repair got back from the replicas
    repair_local_kept: int = 0  # salvaged local versions no replica held
    repairs_completed: int = 0
    idle_spells: int = 0  # times the server backed off to the idle pacing (``okapikv.core.pacing``)
    idle_wakes: int = 0  # ... and snapped back from it
    replica_knows_clock: int = 0  # the highest timestamp of this DC a catch-up reply said a replica holds
    # snapshot reads (docs/operations.md, "Read limits and paging")
    reads_refused: int = 0  # over max_concurrent_reads / max_read_items: RESOURCE_EXHAUSTED at once
    reads_given_up: int = 0  # snapshot below the GC horizon after every retry (ABORTED)
    reads_abandoned: int = 0  # the client went away: dropped unanswered
    slices_resent: int = 0  # to a partition that announced a restart
    scan_pages: int = 0  # SCAN replies that stopped early (with a resume key)
    clock_offset_refusals: int = 0
    clock_offset_clamps: int = 0

    def record_wait(self, reason: str, duration_us: int) -> None:
        stats = self.waits.get(reason)
        if stats is None:
            stats = self.waits[reason] = WaitStats()
        stats.record(duration_us)

    def as_dict(self) -> dict[str, object]:
        return {
            "operations": dict(self.operations),
            "waits": {
                reason: {"count": w.count, "total_us": w.total_us, "max_us": w.max_us, "mean_us": w.mean_us}
                for reason, w in self.waits.items()
            },
            "replicated_updates_sent": self.replicated_updates_sent,
            "replicated_updates_received": self.replicated_updates_received,
            "replication_metadata_bytes": self.replication_metadata_bytes,
            "replication_payload_bytes": self.replication_payload_bytes,
            "heartbeats_sent": self.heartbeats_sent,
            "heartbeat_bytes": self.heartbeat_bytes,
            "stabilization_messages_sent": self.stabilization_messages_sent,
            "stabilization_bytes": self.stabilization_bytes,
            "gc_bytes": self.gc_bytes,
            "snapshot_retries": self.snapshot_retries,
            "snapshot_reads_finished": self.snapshot_reads_finished,
            "snapshot_read_stalls": self.snapshot_read_stalls,
            "snapshot_read_stall_us": self.snapshot_read_stall_us,
            "rejected_requests": self.rejected_requests,
            "catch_up_requests_sent": self.catch_up_requests_sent,
            "catch_up_updates_sent": self.catch_up_updates_sent,
            "catch_up_replies_received": self.catch_up_replies_received,
            "repair_local_received": self.repair_local_received,
            "repair_local_kept": self.repair_local_kept,
            "repairs_completed": self.repairs_completed,
            "replica_knows_clock": self.replica_knows_clock,
            "idle_spells": self.idle_spells,
            "idle_wakes": self.idle_wakes,
            "progress_messages_sent": self.progress_messages_sent,
            "read_timeouts": self.read_timeouts,
            "reads_refused": self.reads_refused,
            "reads_given_up": self.reads_given_up,
            "reads_abandoned": self.reads_abandoned,
            "slices_resent": self.slices_resent,
            "scan_pages": self.scan_pages,
            "clock_offset_refusals": self.clock_offset_refusals,
            "clock_offset_clamps": self.clock_offset_clamps,
        }
