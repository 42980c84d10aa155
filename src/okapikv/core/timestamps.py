"""64-bit hybrid timestamps and the clock rules of the paper (Okapi, section 3.1, Algorithm 3).

A timestamp packs physical microseconds in the high 48 bits and a logical counter in the low 16,
so timestamps compare as plain integers. Cure and GentleRain use the same encoding with a logical
part of 0.

Invariants (tested in ``tests/unit/test_timestamps.py`` and ``tests/property``):
- ``hybrid_put_timestamp`` returns a value strictly above both the previous clock value and every
  client dependency, and never waits: a full logical counter carries into the physical part.
- ``physical_put_timestamp`` returns either a physical timestamp strictly above the previous
  clock value and every dependency, or the clock reading it must wait for (the baselines' block).
- ``offset_ceiling`` is the largest timestamp a server takes from elsewhere (a client's session, a
  peer's watermark) at a clock reading: the reading plus the cluster's maximum clock offset (the HLC
  paper's epsilon). With every input at or below it, a server's HLC stays within the offset of its
  own clock (plus the carry: a microsecond per 65,536 timestamps issued within one microsecond).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Physical parts count microseconds from 2025-01-01 00:00 UTC: 48 bits of microseconds since
#: 1970 would not fit, since the epoch they hold about 8.9 years (until late 2033). Every server of
#: a cluster uses this one epoch.
EPOCH_UNIX_US = 1_735_689_600_000_000  # 2025-01-01T00:00:00Z
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


def hybrid_put_timestamp(previous: int, max_dependency: int, now_us: int) -> int:
    """updateClockOnPut (Okapi, Algorithm 3): the smallest timestamp above ``previous`` and
    ``max_dependency`` whose physical part is at least the clock, without waiting.

    The paper sets HLC.p = max(HLC.p, Clock) and then increments HLC.l, or jumps to
    <max_c.p, max_c.l + 1> when the client's dependency is ahead. Taking the maximum of the three
    candidates is the same rule written once. When the logical counter is full, the +1 carries
    into the physical part: the HLC runs a microsecond ahead of its sources per 65,536 timestamps.
    Waiting for the physical clock instead (as the paper's section 5 suggests) parks every write
    for as long as the HLC is ahead of the clock, which after a restart with the clock stepped back
    is as long as the step (an hour: 65,536 PUTs, then none); the carry's drift is what the
    maximum clock offset (``offset_ceiling``) bounds.
    """
    return max(previous + 1, now_us << LOGICAL_BITS, max_dependency + 1)  # ``pack(now_us)`` inlined: every write


def offset_ceiling(now_us: int, max_offset_us: int) -> int:
    """The largest timestamp whose physical part is at most ``max_offset_us`` ahead of the clock
    reading ``now_us``: what a server accepts from a session or a peer's watermark (module
    docstring; the rule is in docs/operations.md, "Clocks: the maximum offset")."""
    return pack(now_us + max_offset_us, LOGICAL_MASK)


#: the reasons a write waits under ``physical_put_timestamp``: a write can go once the clock reads past
#: both the previous timestamp and its dependencies
CLOCK_PUT_WAITS = frozenset({"put_dependency", "clock_tick"})


def physical_put_timestamp(previous: int, max_dependency: int, now_us: int) -> int | WaitForClock:
    """Timestamp assignment of Cure and GentleRain: the physical clock alone.

    The new timestamp must exceed the client's dependencies and the previous value; a clock that is
    not there yet forces the server to block until it is (the skew cost the paper measures).
    """
    floor = max(previous, max_dependency)
    if pack(now_us) > floor:
        return pack(now_us)
    return WaitForClock(physical_of(floor) + 1, "put_dependency" if max_dependency >= previous else "clock_tick")
