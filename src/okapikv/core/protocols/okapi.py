"""Okapi (the paper, sections 3.1-3.3): hybrid clocks and the UST stabilization protocol.

- PUT never waits: updateClockOnPut picks a hybrid timestamp above the client's dependencies.
- Replication carries 12 bytes of metadata (source DC, timestamp), no dependency vector.
- A remote version is visible once universally stable: ``ut <= USV[sr]`` (every DC has it), so a
  DC failure never blocks visibility of what other DCs read (the availability UST buys).
- RO-TX snapshot TV = USV with local entry lts = max(coordinator clock, dt_c); partitions raise
  their clock to lts (updateClockOnTx) instead of waiting.
- In a snapshot (the RO-TX algorithm, lines 38-39) a local version is visible when ut <= lts and its whole
  dependency vector is below TV; a remote one when ut <= TV[sr].

Invariants: a PUT never waits (a full 16-bit logical counter carries into the physical part); the stable
vector is the USV and only grows (entry-wise max with each newly computed USV); the remote entries
of a local version's dependency vector were universally stable when it was written, so a client
reading it may merge them into its USV_c.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from okapikv.core.mvstore import Version
from okapikv.core.protocols.base import Protocol, WaitForStable, register
from okapikv.core.timestamps import hybrid_put_timestamp, pack
from okapikv.core.vectors import Vector, merge_max


# Subclassable in the compiled build too: the tests' broken variants (okapikv.core.server, PartitionServer).
@mypyc_attr(allow_interpreted_subclasses=True)
class Okapi(Protocol):
    name = "okapi"
    uses_usv = True

    def assign_timestamp(self, *, previous: int, max_dependency: int, now_us: int) -> int:
        return hybrid_put_timestamp(previous, max_dependency, now_us)

    def visible(self, *, version: Version, stable: Vector) -> bool:
        return version.source_dc == self.dc or version.timestamp <= stable[version.source_dc]

    def snapshot(self, *, stable: Vector, dt: int, now_us: int) -> Vector | WaitForStable:
        lts = max(pack(now_us), dt)
        return stable[: self.dc] + (lts,) + stable[self.dc + 1 :]

    def visible_in_snapshot(self, *, version: Version, snapshot: Vector) -> bool:
        if version.source_dc != self.dc:
            return version.timestamp <= snapshot[version.source_dc]
        if version.timestamp > snapshot[self.dc]:
            return False
        dv = version.dv
        return dv is None or all(d <= s for d, s in zip(dv, snapshot, strict=True))

    def on_stabilized(self, *, stable: Vector, gsv: Vector, usv: Vector | None) -> Vector:
        return stable if usv is None else merge_max(stable, usv)


register(Okapi)
