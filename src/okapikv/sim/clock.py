"""Per-server physical clocks of the simulator: what ``now_us`` a server is handed.

A server's clock reads ``true + offset + drift * (true - start) + steps``: a fixed offset (the skew
the paper injects, section 5), a linear drift in parts per million (an undisciplined oscillator),
and steps (an NTP correction, or a bad clock). A running server's clock never steps backwards: the
core, like the paper, assumes a monotonic physical clock, and the production driver holds its
reading (``okapikv.server.clock``). A restarted process reads the wall clock afresh, so at a
restart the clock may step back (``restart``), below what the previous incarnation saw.

Deadlines (``PartitionServer.next_deadline``) are in the server's own clock; ``true_time_for`` turns
one into the true time at which the clock first reads it, so the simulator schedules timers exactly.
"""

from __future__ import annotations

import math


class ClockModel:
    __slots__ = ("offset_us", "drift_ppm", "stepped_us", "start_us")

    def __init__(self, offset_us: int = 0, drift_ppm: float = 0.0, start_us: int = 0) -> None:
        if drift_ppm <= -1_000_000:
            raise ValueError("a clock cannot run backwards (drift must exceed -1e6 ppm)")
        self.offset_us = offset_us
        self.drift_ppm = drift_ppm
        self.stepped_us = 0
        self.start_us = start_us

    def read(self, true_us: int) -> int:
        """The clock reading at true time ``true_us`` (non-decreasing in ``true_us``)."""
        if self.drift_ppm:
            drift = math.floor((true_us - self.start_us) * self.drift_ppm / 1_000_000)
            return true_us + self.offset_us + self.stepped_us + drift
        return true_us + self.offset_us + self.stepped_us

    def step(self, forward_us: int) -> None:
        """Jump the clock ahead by ``forward_us`` (from now on)."""
        if forward_us < 0:
            raise ValueError("clock steps go forward only")
        self.stepped_us += forward_us

    def restart(self, step_us: int) -> None:
        """A new process on the same machine: the clock moves by ``step_us``, forward or back."""
        self.stepped_us += step_us

    def true_time_for(self, clock_us: int, now_us: int) -> int:
        """The earliest true time ``>= now_us`` at which the clock reads at least ``clock_us``."""
        if self.read(now_us) >= clock_us:
            return now_us
        if not self.drift_ppm:
            return clock_us - self.offset_us - self.stepped_us
        remaining = clock_us - self.offset_us - self.stepped_us - self.start_us
        guess = self.start_us + math.ceil(remaining / (1 + self.drift_ppm / 1_000_000))
        guess = max(guess, now_us)
        while self.read(guess) < clock_us:
            guess += 1
        while guess > now_us and self.read(guess - 1) >= clock_us:
            guess -= 1
        return guess
