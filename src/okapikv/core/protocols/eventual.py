"""Eventual consistency: the same store with stabilization and dependency metadata switched off.

It exists to measure the cost of causality (docs/benchmarks.md, the fast suite): every version is visible at once,
snapshots read the newest version of every key, PUT never waits and never tracks dependencies.
Replicas still converge (last writer wins by hybrid timestamp), but no causal guarantee holds.

Invariants: the GC horizon is "everything" (no snapshot is ever refused as too old); a tombstone is
still kept until every replica's stream is past it (the server's rule), so convergence survives GC.
"""

from __future__ import annotations

from okapikv.core.mvstore import Version
from okapikv.core.protocols.base import Protocol, WaitForStable, register
from okapikv.core.timestamps import hybrid_put_timestamp
from okapikv.core.vectors import Vector

#: A timestamp above every real one: the snapshot of an eventual read sees everything.
TOP = (1 << 64) - 1


class Eventual(Protocol):
    name = "eventual"
    stabilizes = False
    raises_clock_on_slice = False

    def assign_timestamp(self, *, previous: int, max_dependency: int, now_us: int) -> int:
        return hybrid_put_timestamp(previous, 0, now_us)

    def stored_dv(self, *, dependency: Vector, timestamp: int) -> Vector | None:
        return None

    def visible(self, *, version: Version, stable: Vector) -> bool:
        return True

    def snapshot(self, *, stable: Vector, dt: int, now_us: int) -> Vector | WaitForStable:
        return (TOP,) * self.num_dcs

    def visible_in_snapshot(self, *, version: Version, snapshot: Vector) -> bool:
        return True

    def on_stabilized(self, *, stable: Vector, gsv: Vector, usv: Vector | None) -> Vector:
        return stable

    def snapshot_floor(self, *, stable: Vector, now_us_packed: int) -> Vector:
        return (TOP,) * self.num_dcs


register(Eventual)
