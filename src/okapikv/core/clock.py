"""The version vector ``vv`` and the one writer of each of its entries: this server's HLC (``vv[m]``,
``Hlc``) and its replicas' watermarks (``vv[i]``, ``VersionVector.adopt``) (docs/protocol.md,
"Timestamps and the HLC" and "The maximum clock offset").

The HLC's rule, stated and checked here and nowhere else:

- **never issued twice**: every timestamp ``issue`` hands out is strictly above the HLC (so above
  every earlier one this server issued or announced: a heartbeat promises that no version at or
  below the HLC follows), and the HLC never moves backwards;
- **never past the ceiling**: the ceiling at a clock reading is ``max(HLC, clock + max offset)``
  (``offset_ceiling``). Reaching the clock (``tick``) and a snapshot's entry (``observe``) stay at
  or below it; an issued timestamp is at most one above it (the logical carry: the +1 of
  ``hybrid_put_timestamp`` over a dependency at the ceiling). Only ``recover`` moves past it: a
  persisted clock bound or a replica's copy of this DC's latest timestamp was issued already, and
  the HLC must restart above it whatever the clock reads (``okapikv.storage``
  persists the bound ahead of use).

A move that breaks the rule raises ``RuleBroken`` and changes nothing: it is a bug in the
core, and going on would issue a timestamp twice (breaking last-writer-wins and FIFO replication)
or drag every server's HLC past its clock.

The replicas' entries only grow (``adopt``): FIFO links, so an update of DC i at or below
``vv[i]`` has been installed. How far a watermark may go (the clamp to the clock plus the offset)
is the caller's (``PartitionState.watermark``); the holder guarantees the entry never moves back.

Invariants (tested in ``tests/unit/test_core_clock.py`` and ``tests/property/test_prop_writers.py``,
which also shows a second writer that moves the HLC backwards or past its ceiling caught):
- ``vv[m]`` changes only through ``Hlc``, the other entries only through ``VersionVector``;
- every entry only grows; ``issue`` is strictly increasing and at most one above the ceiling.
"""

from __future__ import annotations

from collections.abc import Sequence

from okapikv.core.rules import RuleBroken
from okapikv.core.timestamps import LOGICAL_BITS, LOGICAL_MASK, format_timestamp, offset_ceiling, pack
from okapikv.core.vectors import Vector


class Hlc:
    """``vv[m]``: the local clock for timestamps, and its one writer (module docstring)."""

    __slots__ = ("_entries", "_dc", "_max_offset_us")

    def __init__(self, entries: list[int], dc: int, max_offset_us: int) -> None:
        self._entries = entries
        self._dc = dc
        self._max_offset_us = max_offset_us

    @property
    def value(self) -> int:
        return self._entries[self._dc]

    def ceiling(self, now_us: int) -> int:
        """``max(HLC, clock + max offset)``: the highest timestamp this server takes from a client or
        a snapshot at ``now_us`` (docs/protocol.md, "The maximum clock offset")."""
        hlc = self._entries[self._dc]
        cap = offset_ceiling(now_us, self._max_offset_us)
        return hlc if hlc > cap else cap

    def issue(self, timestamp: int, now_us: int) -> int:
        """Take ``timestamp`` (``Protocol.assign_timestamp``'s) for a new local version: strictly
        above the HLC, at most one above the ceiling at ``now_us``; returns it."""
        entries, dc = self._entries, self._dc
        previous = entries[dc]
        if timestamp <= previous:
            raise RuleBroken(f"timestamp {format_timestamp(timestamp)} issued at or below the HLC "
                                  f"{format_timestamp(previous)}: it would be issued twice")
        # ``offset_ceiling`` inlined: this runs for every write
        if timestamp > previous + 1 and timestamp > ((now_us + self._max_offset_us) << LOGICAL_BITS | LOGICAL_MASK) + 1:
            raise self._past_ceiling("issued", timestamp, now_us)
        entries[dc] = timestamp
        return timestamp

    def tick(self, now_us: int) -> int:
        """Raise the HLC to the clock (a heartbeat or a stabilization report announces it: no version
        at or below it follows); returns the HLC."""
        entries, dc = self._entries, self._dc
        clock = pack(now_us)
        if clock > entries[dc]:
            entries[dc] = clock
            return clock
        return entries[dc]

    def observe(self, timestamp: int, now_us: int) -> None:
        """Raise the HLC to a snapshot's local entry (Okapi's updateClockOnTx: never create a version
        the snapshot misses); the caller refused a snapshot past the ceiling already."""
        entries, dc = self._entries, self._dc
        if timestamp <= entries[dc]:
            return
        if timestamp > offset_ceiling(now_us, self._max_offset_us):
            raise self._past_ceiling("observed", timestamp, now_us)
        entries[dc] = timestamp

    def recover(self, floor: int) -> None:
        """Restart at or above ``floor``: a persisted upper bound of every local timestamp issued or
        announced, or the latest of this DC's timestamps a replica holds. The only move allowed past
        the ceiling: those timestamps were issued already, whatever the clock reads now."""
        entries, dc = self._entries, self._dc
        if floor > entries[dc]:
            entries[dc] = floor

    def _past_ceiling(self, what: str, timestamp: int, now_us: int) -> RuleBroken:
        return RuleBroken(f"timestamp {format_timestamp(timestamp)} {what} past the ceiling "
                               f"{format_timestamp(self.ceiling(now_us))} (the HLC or the clock {now_us} us "
                               f"plus the maximum offset of {self._max_offset_us} us)")


class VersionVector:
    """``vv``: one entry per DC, the local one moved by ``hlc`` alone and the others by ``adopt``
    alone. ``entries`` is the live list, for reading (``PartitionState.vv`` hands it out as a
    read-only ``Sequence``)."""

    __slots__ = ("entries", "hlc", "_dc")

    def __init__(self, num_dcs: int, dc: int, max_offset_us: int) -> None:
        self.entries: list[int] = [0] * num_dcs
        self._dc = dc
        self.hlc = Hlc(self.entries, dc, max_offset_us)

    def adopt(self, dc: int, timestamp: int) -> None:
        """A replica's watermark: every update of DC ``dc`` up to ``timestamp`` has arrived. Never
        the local entry, never backwards."""
        entries = self.entries
        if dc == self._dc:
            raise RuleBroken(f"vv[{dc}] is the HLC: only Hlc moves it")
        if timestamp < entries[dc]:
            raise RuleBroken(f"vv[{dc}] would move back from {format_timestamp(entries[dc])} to "
                                  f"{format_timestamp(timestamp)}")
        entries[dc] = timestamp

    def restore(self, recovered: Sequence[int], hlc_floor: int) -> None:
        """Load a recovered ``vv`` (entry-wise max with what is here) and restart the HLC at
        ``hlc_floor`` (``Hlc.recover``)."""
        if len(recovered) != len(self.entries):
            raise ValueError(f"recovered vector {tuple(recovered)} does not have {len(self.entries)} entries")
        for dc, timestamp in enumerate(recovered):
            if dc == self._dc:
                self.hlc.recover(timestamp)
            elif timestamp > self.entries[dc]:
                self.entries[dc] = timestamp
        self.hlc.recover(hlc_floor)

    def add_dc(self, entry: int = 0) -> None:
        """One more DC: its entry (``entry``, what is known of it) goes at the end, every other entry
        and the HLC stay (a DC joining the cluster: ``okapikv.core.growth``)."""
        self.entries.append(entry)

    def snapshot(self) -> Vector:
        return tuple(self.entries)
