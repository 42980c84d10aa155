"""The physical clock the protocol core sees: wall clock plus an injected skew, never backwards.

Timestamps pack physical microseconds into 48 bits (``okapikv.core.timestamps``), which hold about
8.9 years. Microseconds since 1970 do not fit (and would overflow the 64-bit wire fields once
shifted), so the cluster counts from ``EPOCH_UNIX_US`` (2025-01-01 00:00 UTC): valid until late
2033. Every server of a cluster must use the same epoch, which is why it is a constant here.

The skew models an imperfectly synchronized clock (the paper's clock-skew experiments): each server
adds its configured offset. The wall clock may step back (NTP); the core assumes its clock never
does, so readings are clamped to the last one returned.
"""

from __future__ import annotations

import time

EPOCH_UNIX_US = 1_735_689_600_000_000  # 2025-01-01T00:00:00Z


class ServerClock:
    __slots__ = ("skew_us", "_last_us")

    def __init__(self, skew_us: int = 0) -> None:
        self.skew_us = skew_us
        self._last_us = 0

    def now_us(self) -> int:
        """Microseconds since the cluster epoch, skew included; never smaller than before."""
        reading = time.time_ns() // 1000 - EPOCH_UNIX_US + self.skew_us
        if reading < self._last_us:
            return self._last_us
        self._last_us = reading
        return reading

    def seconds_until(self, clock_us: int) -> float:
        """Real seconds from now until this clock reads ``clock_us`` (0 if it already does)."""
        return max(0.0, (clock_us - self.now_us()) / 1_000_000)
