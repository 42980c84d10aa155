"""The physical clock the protocol core sees: wall clock plus an injected skew, never backwards,
never stopped.

Timestamps pack physical microseconds into 48 bits (``okapikv.core.timestamps``), which hold about
8.9 years. Microseconds since 1970 do not fit (and would overflow the 64-bit wire fields once
shifted), so the cluster counts from ``okapikv.core.timestamps.EPOCH_UNIX_US`` (2025-01-01 00:00
UTC): valid until late 2033.

The skew models an imperfectly synchronized clock (the paper's clock-skew experiments): each server
adds its configured offset.

The core assumes its clock never goes back, and its heartbeats and stabilization advance only as
the clock does (a heartbeat announces ``max(HLC, clock)``; docs/operations.md, "Clocks: the maximum
offset"). So when the wall clock steps back (an NTP step, an operator's correction), the reading
neither follows it back nor stops: it goes on from where it was at the rate of the monotonic clock
until the wall clock catches up, then follows the wall clock again. Stopping would freeze this
server's announcements for the length of the step, and with them the stable vectors of every DC
(remote visibility stalled cluster-wide, for an hour after a one-hour step). Going on, the server
runs ahead of its wall clock by at most the step, which is what its HLC does anyway after issuing
timestamps at the old time; where that exceeds the maximum clock offset its peers hold its
watermark back to their own clocks plus the offset, so visibility of the other servers goes on.
A backward step is logged once per step of a second or more (``clock_stepped_back``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from okapikv.core.timestamps import EPOCH_UNIX_US

#: Backward steps at least this large are logged (smaller ones are ordinary NTP slews and jitter).
STEP_LOG_US = 1_000_000

log = logging.getLogger("okapikv.server.clock")


def _wall_us() -> int:
    return time.time_ns() // 1000


def _monotonic_us() -> int:
    return time.monotonic_ns() // 1000


class ServerClock:
    __slots__ = ("skew_us", "_last_us", "_last_monotonic_us", "_wall", "_monotonic", "_behind")

    def __init__(self, skew_us: int = 0, *, wall_us: Callable[[], int] = _wall_us,
                 monotonic_us: Callable[[], int] = _monotonic_us) -> None:
        """``wall_us`` and ``monotonic_us`` (microseconds) are the time sources; tests replace them."""
        self.skew_us = skew_us
        self._wall = wall_us
        self._monotonic = monotonic_us
        self._last_us = 0
        self._last_monotonic_us = monotonic_us()
        self._behind = False  # the wall clock is behind the reading (a backward step not yet caught up)

    def now_us(self) -> int:
        """Microseconds since the cluster epoch, skew included; never smaller than before, and
        advancing with real time even while the wall clock is behind an earlier reading."""
        reading = self._wall() - EPOCH_UNIX_US + self.skew_us
        monotonic = self._monotonic()
        elapsed = max(0, monotonic - self._last_monotonic_us)
        self._last_monotonic_us = monotonic
        if reading >= self._last_us:
            self._behind = False
            self._last_us = reading
            return reading
        carried = self._last_us + elapsed
        if reading >= carried:  # the wall clock caught up within this interval
            self._behind = False
            self._last_us = reading
            return reading
        if not self._behind and carried - reading >= STEP_LOG_US:
            log.warning("the wall clock stepped back %.3f s; this server's clock goes on from its last reading "
                        "until the wall clock catches up", (carried - reading) / 1e6,
                        extra={"event": "clock_stepped_back", "step_s": round((carried - reading) / 1e6, 3)})
        self._behind = True
        self._last_us = carried
        return carried

    def seconds_until(self, clock_us: int) -> float:
        """Real seconds from now until this clock reads ``clock_us`` (0 if it already does)."""
        return max(0.0, (clock_us - self.now_us()) / 1_000_000)
