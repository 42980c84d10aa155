"""Deliberately broken protocol variants (and servers), registered only by the tests that import this module.

``okapi-eager``: Okapi whose remote versions are visible as soon as they arrive, to GETs and to
snapshots, without waiting for the USV to cover them (no stabilization gate). A reader can then see
an update before its causal dependencies from other partitions have arrived: the simulator's
checkers must catch it within a few seeds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from okapikv.core.clock import Hlc
from okapikv.core.config import CoreConfig
from okapikv.core.gc import ALL_TIMESTAMPS
from okapikv.core.messages import CatchUpReply, Heartbeat, ReplicateBatch
from okapikv.core.mvstore import Version
from okapikv.core.protocols.base import register
from okapikv.core.protocols.okapi import Okapi
from okapikv.core.server import PartitionServer
from okapikv.core.vectors import Vector

#: a maximum clock offset past any clock (``UnboundedClockServer``'s HLC)
UNBOUNDED_OFFSET_US = 1 << 47


@register
class EagerOkapi(Okapi):
    name = "okapi-eager"

    def visible(self, *, version: Version, stable: Vector) -> bool:
        return True

    def visible_in_snapshot(self, *, version: Version, snapshot: Vector) -> bool:
        if version.source_dc != self.dc:
            return True
        return super().visible_in_snapshot(version=version, snapshot=snapshot)


class UnboundedClockServer(PartitionServer):
    """A partition server with the maximum clock offset switched off: it takes any session and any
    snapshot, however far ahead of its clock, and adopts peers' watermarks as they come. One clock
    far ahead then drags every HLC ahead with it (docs/protocol.md): the simulator's clock
    faults (``SimConfig.clock_jumps``) must catch it within a few seeds."""

    def __init__(self, config: CoreConfig) -> None:
        super().__init__(config)
        self.offset_guard = False
        # its HLC's rule without the ceiling too (``okapikv.core.clock``): else the HLC refuses the first
        # timestamp from far ahead before the simulator could see the drag
        self.clock = self.version_vector.hlc = Hlc(self.version_vector.entries, config.dc, UNBOUNDED_OFFSET_US)

    def ceiling(self, now_us: int) -> int:
        return ALL_TIMESTAMPS

    def watermark(self, message: ReplicateBatch | Heartbeat | CatchUpReply, dc: int, timestamp: int,
                   now_us: int) -> int:
        return timestamp


class UnpagedScanServer(PartitionServer):
    """A partition server without SCAN paging: a page may hold the whole range, so a slice walks
    every key of its partition in one go (``max_scan_items`` and the read budgets unbounded). A
    whole-range SCAN of a large store then holds its partitions for seconds while every other
    request waits: the simulator's large scans (``SimConfig.large_scans``) must catch it."""

    def __init__(self, config: CoreConfig) -> None:
        super().__init__(replace(config, max_scan_items=1 << 30, max_read_items=1 << 31, max_scan_bytes=1 << 62))


class DeafToGoneClientsServer(PartitionServer):
    """A partition server that keeps working on snapshot reads whose clients went away (the issue's
    coordinator that still held 4 pending reads minutes after the clients gave up): the large scans'
    end-of-run check (``ReadsLeftPending``) must catch it."""

    def cancel_reads(self, request_ids: Iterable[int]) -> int:
        return 0
