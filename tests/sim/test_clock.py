"""The simulator's clock model: offsets, drift, forward steps, and deadline inversion."""

from __future__ import annotations

import random

import pytest

from okapikv.sim.clock import ClockModel


def test_offset_only() -> None:
    clock = ClockModel(offset_us=2_500, start_us=1_000)
    assert clock.read(1_000) == 3_500
    assert clock.true_time_for(10_000, now_us=0) == 7_500
    assert clock.true_time_for(100, now_us=5_000) == 5_000  # already past: now


@pytest.mark.parametrize("drift_ppm", [-500.0, -1.5, 0.0, 3.0, 200.0, 20_000.0])
def test_drift_is_monotonic_and_inverted_exactly(drift_ppm: float) -> None:
    clock = ClockModel(offset_us=-700, drift_ppm=drift_ppm, start_us=1_000_000)
    rng = random.Random(7)
    previous = clock.read(1_000_000)
    for true in range(1_000_001, 1_003_000):
        reading = clock.read(true)
        assert reading >= previous
        previous = reading
    for _ in range(500):
        now = rng.randint(1_000_000, 5_000_000)
        target = clock.read(now) + rng.randint(-1000, 200_000)
        at = clock.true_time_for(target, now)
        assert at >= now
        assert clock.read(at) >= target
        assert at == now or clock.read(at - 1) < target


def test_steps_go_forward_only_and_bring_deadlines_closer() -> None:
    clock = ClockModel(offset_us=0, drift_ppm=50.0, start_us=0)
    before = clock.true_time_for(1_000_000, 0)
    clock.step(10_000)
    after = clock.true_time_for(1_000_000, 0)
    assert after < before
    assert clock.read(after) >= 1_000_000
    with pytest.raises(ValueError):
        clock.step(-1)
    with pytest.raises(ValueError):
        ClockModel(drift_ppm=-1_000_000)
