"""The node's timer on the asyncio loop: the host's deadlines (``okapikv.core.host``) met with
event-loop timers, whose granularity is a millisecond.

One handle at a time, moved earlier whenever the host names an earlier deadline (a parked request,
a snap-back from idle pacing). A deadline microseconds away (Cure's and GentleRain's writes take
one clock microsecond each, so a batch of n writes at one reading leaves n - 1 waiting for the next
ones) is met by spinning (``run_timer``, ``Host.spin_deadline``) within the call that parked the
write (``PartitionNode.run_core``) or on the loop's next round (``arm``), not by a timer, which
would hold each of those writes a millisecond, a same-microsecond artefact the paper's servers do
not have; the spin is bounded by ``SPIN_BUDGET_US`` per run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import Callable
from typing import Any

from okapikv.core.host import Host, Outbox
from okapikv.server.clock import ServerClock

log = logging.getLogger("okapikv.server")


class LoopTimer:
    def __init__(self, loop: asyncio.AbstractEventLoop, clock: ServerClock, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._clock = clock
        self._callback = callback
        self._handle: asyncio.Handle | None = None  # a TimerHandle, or a call_soon's Handle
        self._deadline_us = 0

    def arm(self, deadline_us: int) -> None:
        """Run the callback when the clock reads ``deadline_us`` (an earlier deadline wins)."""
        if self._handle is not None:
            if deadline_us >= self._deadline_us:
                return
            self._handle.cancel()
        self._deadline_us = deadline_us
        delay_s = self._clock.seconds_until(deadline_us)
        if Host.spins(delay_s * 1_000_000):
            self._handle = self._loop.call_soon(self._fire)
            return
        # Event-loop timers have millisecond granularity (libuv truncates): round up, or a timer
        # due in 0.9 ms would fire at once and spin until the deadline.
        self._handle = self._loop.call_later(math.ceil(delay_s * 1000) / 1000, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._callback()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def run_timer(host: Host[Any], clock: ServerClock, now_us: int, carry_out: Callable[[Outbox], None],
              label: str) -> int:
    """Run the host's timer at ``now_us``, then at each deadline microseconds away as the clock
    reaches it (within the budget), carrying out every outbox; the last clock reading."""
    started_us = now_us
    while True:
        try:
            outbox = host.timer(now_us)
        except Exception:
            host.handler_errors += 1
            log.exception("%s: the core failed in on_timer", label)
            carry_out(Outbox([], host.core.next_deadline()))
            return now_us
        deadline = host.spin_deadline(clock.now_us(), started_us)
        if deadline is None:
            carry_out(outbox)
            return now_us
        carry_out(dataclasses.replace(outbox, deadline=None))
        while (now_us := clock.now_us()) < deadline:
            pass
