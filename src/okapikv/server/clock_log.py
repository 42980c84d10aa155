"""The node's warnings about the maximum clock offset (docs/operations.md, "Clocks: the maximum
offset"): the core refuses or holds back what reaches more than the offset past this server's
clock and counts it (``ServerStats.clock_offset_refusals``, ``clock_offset_clamps``); this says so
in the log, at most one warning line per ``CLOCK_LOG_INTERVAL_S`` with the counts since the last
one and the latest figure, since a far-ahead peer trips it with every message.
"""

from __future__ import annotations

import logging
import math
import time

from okapikv.core.server import PartitionServer

log = logging.getLogger("okapikv.server")

#: At most one warning per this many seconds about inputs the maximum clock offset held off.
CLOCK_LOG_INTERVAL_S = 10.0


class ClockOffsetLog:
    def __init__(self, label: str) -> None:
        self.label = label
        self._seen = 0  # core refusals + clamps already looked at
        self._logged = (0, 0)  # ... and already reported
        self._logged_at = -math.inf

    def check(self, core: PartitionServer) -> None:
        """After a core call: warn if the offset held something off since the last warning."""
        stats = core.stats
        seen = stats.clock_offset_refusals + stats.clock_offset_clamps
        if seen == self._seen:
            return
        self._seen = seen
        now = time.monotonic()
        if now - self._logged_at < CLOCK_LOG_INTERVAL_S or core.last_clock_offset is None:
            return
        refused = stats.clock_offset_refusals - self._logged[0]
        clamped = stats.clock_offset_clamps - self._logged[1]
        self._logged = (stats.clock_offset_refusals, stats.clock_offset_clamps)
        self._logged_at = now
        what, source, ahead_us = core.last_clock_offset
        log.warning(
            "%s: CLOCK OFFSET EXCEEDED: %d request(s) or slice(s) refused and %d peer timestamp(s) held back "
            "since the last report; latest: %s from %s, %.1f ms ahead of this server's clock (maximum clock "
            "offset %g ms). A clock is ahead, or this one is behind (docs/operations.md, \"Clocks: the "
            "maximum offset\")", self.label, refused, clamped, what, source, ahead_us / 1000,
            core.config.max_clock_offset_us / 1000,
            extra={"event": "clock_offset", "refused": refused, "held_back": clamped,
                   "ahead_ms": round(ahead_us / 1000, 3), "source": source})
