"""``okapikv.server.clock.ServerClock``: never backwards, and never stopped by a wall clock that
steps back (a frozen reading would freeze this server's heartbeats and every DC's stable vector)."""

from __future__ import annotations

import logging

import pytest

from okapikv.core.timestamps import EPOCH_UNIX_US
from okapikv.server.clock import ServerClock


class Times:
    def __init__(self) -> None:
        self.wall_us = EPOCH_UNIX_US + 10_000_000_000
        self.monotonic_us = 5_000_000

    def advance(self, us: int) -> None:
        self.wall_us += us
        self.monotonic_us += us


def _clock(times: Times, skew_us: int = 0) -> ServerClock:
    return ServerClock(skew_us, wall_us=lambda: times.wall_us, monotonic_us=lambda: times.monotonic_us)


def test_the_reading_is_the_wall_clock_since_the_epoch_plus_the_skew() -> None:
    times = Times()
    clock = _clock(times, skew_us=250)
    assert clock.now_us() == 10_000_000_250
    times.advance(1_000)
    assert clock.now_us() == 10_000_001_250


def test_a_wall_clock_stepped_back_an_hour_neither_moves_the_reading_back_nor_stops_it(
        caplog: pytest.LogCaptureFixture) -> None:
    times = Times()
    clock = _clock(times)
    before = clock.now_us()
    times.wall_us -= 3_600_000_000
    with caplog.at_level(logging.WARNING, logger="okapikv.server.clock"):
        readings = []
        for _ in range(5):
            times.advance(10_000)
            readings.append(clock.now_us())
    assert readings == [before + 10_000 * step for step in range(1, 6)]
    assert [record.event for record in caplog.records] == ["clock_stepped_back"]  # type: ignore[attr-defined]


def test_the_reading_follows_the_wall_clock_again_once_it_catches_up() -> None:
    times = Times()
    clock = _clock(times)
    clock.now_us()
    times.wall_us -= 2_000
    times.advance(1_000)
    carried = clock.now_us()
    assert carried == 10_000_001_000  # one real millisecond on from the last reading
    times.wall_us += 5_000  # the wall clock is ahead of the carried reading again
    times.monotonic_us += 1_000
    assert clock.now_us() == times.wall_us - EPOCH_UNIX_US


def test_small_backward_jitter_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    times = Times()
    clock = _clock(times)
    clock.now_us()
    with caplog.at_level(logging.WARNING, logger="okapikv.server.clock"):
        times.wall_us -= 500
        assert clock.now_us() == 10_000_000_000
    assert not caplog.records
