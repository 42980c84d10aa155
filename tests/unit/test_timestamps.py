"""Hybrid and physical timestamp rules (Okapi section 3.1, Algorithm 3; the baselines' waits)."""

from __future__ import annotations

import pytest

from okapikv.core.timestamps import (
    LOGICAL_BITS,
    LOGICAL_MASK,
    PHYSICAL_MAX,
    WaitForClock,
    format_timestamp,
    hybrid_put_timestamp,
    logical_of,
    offset_ceiling,
    pack,
    physical_of,
    physical_put_timestamp,
)


class TestEncoding:
    @pytest.mark.parametrize(
        ("physical_us", "logical"), [(0, 0), (1, 0), (0, 1), (123_456, 7), (PHYSICAL_MAX, LOGICAL_MASK)]
    )
    def test_pack_unpack_round_trip(self, physical_us: int, logical: int) -> None:
        timestamp = pack(physical_us, logical)
        assert physical_of(timestamp) == physical_us
        assert logical_of(timestamp) == logical

    def test_layout_is_48_physical_bits_over_16_logical_bits(self) -> None:
        assert LOGICAL_BITS == 16
        assert pack(1, 0) == 1 << 16
        assert pack(0, 5) == 5
        assert pack(PHYSICAL_MAX, LOGICAL_MASK) == (1 << 64) - 1

    def test_logical_defaults_to_zero(self) -> None:
        assert pack(42) == pack(42, 0)

    def test_comparison_is_physical_then_logical(self) -> None:
        assert pack(10, LOGICAL_MASK) < pack(11, 0)
        assert pack(10, 1) > pack(10, 0)
        assert sorted([pack(2, 0), pack(1, 9), pack(1, 3)]) == [pack(1, 3), pack(1, 9), pack(2, 0)]

    def test_format(self) -> None:
        assert format_timestamp(pack(1234, 5)) == "1234.5"


class TestHybridPutTimestamp:
    def test_clock_ahead_gives_clock_with_logical_zero(self) -> None:
        assert hybrid_put_timestamp(pack(100, 3), pack(50, 0), 200) == pack(200, 0)

    def test_clock_behind_previous_increments_logical(self) -> None:
        # HLC.p stays above the clock: the logical part counts (no wait).
        assert hybrid_put_timestamp(pack(100, 3), 0, 90) == pack(100, 4)

    def test_same_microsecond_increments_logical(self) -> None:
        assert hybrid_put_timestamp(pack(100, 0), 0, 100) == pack(100, 1)

    def test_dependency_ahead_jumps_past_it_without_waiting(self) -> None:
        # Figure 1 (top): Clock_p = 6, max_c = 10 -> <10, l + 1>, no wait.
        assert hybrid_put_timestamp(pack(5, 0), pack(10, 2), 6) == pack(10, 3)

    def test_result_is_above_previous_and_dependency(self) -> None:
        for previous, dependency, now in [(pack(5, 5), pack(5, 9), 5), (pack(7, 0), pack(3, 1), 1), (0, 0, 0)]:
            result = hybrid_put_timestamp(previous, dependency, now)
            assert isinstance(result, int)
            assert result > previous
            assert result > dependency
            assert physical_of(result) >= now

    def test_never_waits_below_the_logical_limit(self) -> None:
        previous = pack(100, LOGICAL_MASK - 1)
        assert hybrid_put_timestamp(previous, 0, 50) == pack(100, LOGICAL_MASK)

    def test_full_logical_counter_of_previous_carries_into_the_physical_part(self) -> None:
        # No wait for the physical clock: with the HLC an hour ahead that wait lasted an hour.
        assert hybrid_put_timestamp(pack(100, LOGICAL_MASK), 0, 99) == pack(101, 0)

    def test_full_logical_counter_of_dependency_carries_into_the_physical_part(self) -> None:
        assert hybrid_put_timestamp(0, pack(100, LOGICAL_MASK), 50) == pack(101, 0)

    def test_carry_then_counts_on_from_the_next_microsecond(self) -> None:
        previous = pack(100, LOGICAL_MASK)
        assert hybrid_put_timestamp(previous, 0, 101) == pack(101, 0)
        assert hybrid_put_timestamp(pack(101, 0), 0, 101) == pack(101, 1)
        assert hybrid_put_timestamp(previous, 0, 102) == pack(102, 0)

    def test_the_hlc_runs_one_microsecond_ahead_per_65536_timestamps(self) -> None:
        # 70,000 PUTs with the clock an hour behind the HLC: every one gets a timestamp at once.
        hour_us = 3_600_000_000
        timestamp, clock = pack(hour_us), 0
        for _ in range(70_000):
            timestamp = hybrid_put_timestamp(timestamp, 0, clock)
        assert timestamp == pack(hour_us + 1, 70_000 - (1 << 16))

    def test_offset_ceiling_allows_any_logical_part_at_the_limit(self) -> None:
        assert offset_ceiling(100, 50) == pack(150, LOGICAL_MASK)
        assert offset_ceiling(100, 50) + 1 == pack(151, 0)

    def test_full_counter_with_clock_already_ahead_does_not_wait(self) -> None:
        assert hybrid_put_timestamp(pack(100, LOGICAL_MASK), 0, 150) == pack(150, 0)


class TestPhysicalPutTimestamp:
    def test_clock_ahead_gives_clock(self) -> None:
        assert physical_put_timestamp(pack(100), pack(50), 200) == pack(200)

    def test_logical_part_is_zero(self) -> None:
        result = physical_put_timestamp(0, 0, 77)
        assert isinstance(result, int)
        assert logical_of(result) == 0

    def test_clock_behind_dependency_waits_past_it(self) -> None:
        # Figure 1 (bottom): Clock_p = 6, max_c = 10 -> wait until the clock reads 11.
        assert physical_put_timestamp(pack(5), pack(10), 6) == WaitForClock(11, "put_dependency")

    def test_clock_equal_to_dependency_waits_one_tick(self) -> None:
        assert physical_put_timestamp(0, pack(10), 10) == WaitForClock(11, "put_dependency")

    def test_clock_not_past_previous_waits_for_next_tick(self) -> None:
        assert physical_put_timestamp(pack(10), pack(3), 10) == WaitForClock(11, "clock_tick")

    def test_dependency_with_logical_part_waits_for_next_microsecond(self) -> None:
        assert physical_put_timestamp(0, pack(10, 4), 10) == WaitForClock(11, "put_dependency")

    def test_waiting_until_the_returned_clock_succeeds(self) -> None:
        wait = physical_put_timestamp(pack(20), pack(30, 1), 5)
        assert isinstance(wait, WaitForClock)
        result = physical_put_timestamp(pack(20), pack(30, 1), wait.clock_us)
        assert isinstance(result, int)
        assert result > pack(30, 1)
