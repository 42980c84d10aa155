"""64-bit hybrid timestamps and the clock rules of the paper (Okapi, section 3.1, Algorithm 3).

A timestamp packs physical microseconds in the high 48 bits and a logical counter in the low 16,
so timestamps compare as plain integers. Cure and GentleRain use the same encoding with a logical
part of 0.

Invariants (tested in ``tests/unit/test_timestamps.py`` and ``tests/property``):
- ``hybrid_put_timestamp`` returns a value strictly above both the previous clock value and every
  client dependency, and never waits unless the logical counter would overflow.
- ``physical_put_timestamp`` returns either a physical timestamp strictly above the previous
  clock value and every dependency, or the clock reading it must wait for (the baselines' block).
"""

from __future__ import annotations

from dataclasses import dataclass

LOGICAL_BITS = 16
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
PHYSICAL_MAX = (1 << 48) - 1


def pack(physical_us: int, logical: int = 0) -> int:
    """Pack physical microseconds and a logical counter into one comparable integer."""
    return (physical_us << LOGICAL_BITS) | logical


def physical_of(timestamp: int) -> int:
    return timestamp >> LOGICAL_BITS


def logical_of(timestamp: int) -> int:
    return timestamp & LOGICAL_MASK


def format_timestamp(timestamp: int) -> str:
    return f"{physical_of(timestamp)}.{logical_of(timestamp)}"


@dataclass(frozen=True, slots=True)
class WaitForClock:
    """The operation cannot proceed before the physical clock reads at least ``clock_us``."""

    clock_us: int
    reason: str


def hybrid_put_timestamp(previous: int, max_dependency: int, now_us: int) -> int | WaitForClock:
    """updateClockOnPut (Okapi, Algorithm 3): the smallest timestamp above ``previous`` and
    ``max_dependency`` whose physical part is at least the clock, without waiting.

    The paper sets HLC.p = max(HLC.p, Clock) and then increments HLC.l, or jumps to
    <max_c.p, max_c.l + 1> when the client's dependency is ahead. Taking the maximum of the three
    candidates is the same rule written once. Only when the logical counter is full (the +1
    carries into the physical part) must the server wait for its physical clock.
    """
    candidate = max(previous + 1, pack(now_us), max_dependency + 1)
    if logical_of(candidate) == 0 and candidate != pack(now_us):
        # The +1 carried out of a full logical counter: the physical part moved ahead of every
        # source. Wait for the physical clock instead of inventing time (paper, section 5).
        return WaitForClock(physical_of(candidate), "hlc_overflow")
    return candidate


def physical_put_timestamp(previous: int, max_dependency: int, now_us: int) -> int | WaitForClock:
    """Timestamp assignment of Cure and GentleRain: the physical clock alone.

    The new timestamp must exceed the client's dependencies and the previous value; a clock that is
    not there yet forces the server to block until it is (the skew cost the paper measures).
    """
    floor = max(previous, max_dependency)
    if pack(now_us) > floor:
        return pack(now_us)
    return WaitForClock(physical_of(floor) + 1, "put_dependency" if max_dependency >= previous else "clock_tick")
