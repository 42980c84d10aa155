"""The stable vector, the GSV and the GC horizon of a partition server, and their one writer
(docs/protocol.md, "Deployment and notation", "Stabilization" and "Garbage collection").

- ``stable``: what this server knows to be stable, used for visibility (Okapi: the USV; Cure: the
  GSV; GentleRain: the GST in every entry). It merges client sessions (``advance_stable``),
  snapshots served (``okapikv.core.reads``) and stabilization rounds (``Protocol.on_stabilized``).
- ``gsv``: this DC's global stable vector, the entry-wise minimum of its partitions' ``vv``.
- ``horizon``: a lower bound of every snapshot any server of the DC will still read
  (``okapikv.core.gc``).

Each is a lower bound of something that only grows, so each only grows: every move here is an
entry-wise max (``merge_max``), and a vector that would move one back changes nothing. The one
exception is ``rollback_stable``: a client request merges its session before it knows it will be
refused, and a refused request changes nothing (docs/protocol.md, "The maximum clock offset"); the
rollback returns to the value of the same step, never below one that left the server.

Invariants (tested in ``tests/unit/test_core_clock.py`` and ``tests/property/test_prop_writers.py``):
- ``stable``, ``gsv`` and ``horizon`` change only here, and only grow between steps;
- every vector keeps the cluster's number of entries (``grow`` adds one to each).
"""

from __future__ import annotations

from okapikv.core.clock import RuleBroken
from okapikv.core.vectors import Vector, leq, merge_max


class StableVectors:
    """``stable``, ``gsv`` and ``horizon`` (module docstring): read-only properties, moved by the
    methods alone. The base of ``okapikv.core.state.PartitionState``, so that a read is one
    property (they are read several times per request: visibility, sessions, rounds)."""

    __slots__ = ("_stable", "_gsv", "_horizon")

    def __init__(self, stable: Vector, gsv: Vector, horizon: Vector) -> None:
        self._stable = stable
        self._gsv = gsv
        self._horizon = horizon

    @property
    def stable(self) -> Vector:
        return self._stable

    @property
    def gsv(self) -> Vector:
        return self._gsv

    @property
    def horizon(self) -> Vector:
        return self._horizon

    def advance_stable(self, vector: Vector) -> Vector:
        """Merge ``vector`` (a session's, a snapshot's, a round's: each a lower bound of what is
        stable) into ``stable``; returns the new ``stable``."""
        self._stable = stable = merge_max(self._stable, vector)
        return stable

    def rollback_stable(self, before: Vector) -> None:
        """Undo this step's ``advance_stable`` for a request refused after its session was merged:
        ``before`` is ``stable`` as the step found it (module docstring)."""
        if not leq(before, self._stable):
            raise RuleBroken(f"rollback of stable to {before}, which is not below {self._stable}")
        self._stable = before

    def advance_gsv(self, vector: Vector) -> bool:
        """Merge a GSV of this DC (an aggregator's broadcast, or ``vv`` where it is the DC's);
        whether ``gsv`` moved."""
        gsv = merge_max(self._gsv, vector)
        if gsv == self._gsv:
            return False
        self._gsv = gsv
        return True

    def advance_horizon(self, vector: Vector) -> None:
        """Merge a horizon (an aggregator's broadcast, a repair's threshold)."""
        self._horizon = merge_max(self._horizon, vector)

    def grow(self, stable: int = 0, gsv: int = 0, horizon: int = 0) -> None:
        """One more DC: each vector takes its entry at the end (a DC joining the cluster:
        docs/protocol.md, "Membership")."""
        self._stable += (stable,)
        self._gsv += (gsv,)
        self._horizon += (horizon,)
