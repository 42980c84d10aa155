"""The stable vector, the GSV and the GC horizon of a partition server, and their one writer
(docs/protocol.md, "Deployment and notation", "Stabilization" and "Garbage collection").

- ``stable``: what this server knows to be stable, used for visibility (Okapi: the USV; Cure: the
  GSV; GentleRain: the GST in every entry). It merges client sessions (``advance_stable``),
  snapshots served (``okapikv.core.reads``) and stabilization rounds (``Protocol.on_stabilized``,
  ``take_stabilized``).
- ``gsv``: this DC's global stable vector, the entry-wise minimum of its partitions' ``vv``.
- ``horizon``: a lower bound of every snapshot any server of the DC will still read
  (``okapikv.core.gc``).

Each is a lower bound of something that only grows, so each only grows: every move here is an
entry-wise max (``merge_max``), so a vector that would move one back changes nothing, or a round's
stable vector that ``Protocol.on_stabilized`` computed from the current one (``take_stabilized``:
its contract is never to return one below). The one exception is ``rollback_stable``: a client
request merges its session before it knows it will be refused, and a refused request changes
nothing (docs/protocol.md, "The maximum clock offset"); the rollback returns to the value of the
same step, never below one that left the server.

Invariants (tested in ``tests/unit/test_core_clock.py`` and ``tests/property/test_prop_writers.py``):
- ``stable``, ``gsv`` and ``horizon`` change only here, and only grow between steps;
- every vector keeps the cluster's number of entries (``add_dc`` adds one to each).
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from okapikv.core.rules import RuleBroken
from okapikv.core.vectors import Vector, leq, merge_max


@mypyc_attr(allow_interpreted_subclasses=True)  # a base of PartitionServer (okapikv.core.server: why)
class StableVectors:
    """``stable``, ``gsv`` and ``horizon`` (module docstring), moved by these methods alone. The base
    of ``okapikv.core.state.PartitionState``: the fields are plain attributes, read several times
    per request (visibility, sessions, rounds) at the cost of an attribute load; the mechanisms see
    them read-only (``okapikv.core.state.ServerView``) and ``tests/unit/test_core_clock.py`` finds
    any assignment outside this class."""

    __slots__ = ("stable", "gsv", "horizon")

    def __init__(self, stable: Vector, gsv: Vector, horizon: Vector) -> None:
        self.stable = stable
        self.gsv = gsv
        self.horizon = horizon

    def advance_stable(self, vector: Vector) -> Vector:
        """Merge ``vector`` (a session's, a snapshot's, a round's: each a lower bound of what is
        stable) into ``stable``; returns the new ``stable``."""
        self.stable = stable = merge_max(self.stable, vector)
        return stable

    def take_stabilized(self, stable: Vector) -> None:
        """A stabilization round's stable vector: ``Protocol.on_stabilized`` computes it from this one
        and never returns one below it (its contract, ``tests/unit/test_protocols.py``; end to end,
        ``tests/property/test_prop_writers.py``), so it is taken as computed, not merged again: that
        merge ran once per step where the GSV follows ``vv`` (``UsvFollowingVv``)."""
        self.stable = stable

    def rollback_stable(self, before: Vector) -> None:
        """Undo this step's ``advance_stable`` for a request refused after its session was merged:
        ``before`` is ``stable`` as the step found it (module docstring)."""
        if not leq(before, self.stable):
            raise RuleBroken(f"rollback of stable to {before}, which is not below {self.stable}")
        self.stable = before

    def advance_gsv(self, vector: Vector) -> bool:
        """Merge a GSV of this DC (an aggregator's broadcast, or ``vv`` where it is the DC's);
        whether ``gsv`` moved."""
        gsv = merge_max(self.gsv, vector)
        if gsv == self.gsv:
            return False
        self.gsv = gsv
        return True

    def advance_horizon(self, vector: Vector) -> None:
        """Merge a horizon (an aggregator's broadcast, a repair's threshold)."""
        self.horizon = merge_max(self.horizon, vector)

    def add_dc(self, stable: int = 0, gsv: int = 0, horizon: int = 0) -> None:
        """One more DC: each vector takes its entry at the end (a DC joining the cluster:
        ``okapikv.core.growth``)."""
        self.stable += (stable,)
        self.gsv += (gsv,)
        self.horizon += (horizon,)
