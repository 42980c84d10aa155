"""Cure (baseline, docs/protocol.md, "Cure"): physical clocks and full dependency vectors.

- PUT waits until the physical clock exceeds every entry of the client's dependency vector.
- Replication carries the whole vector: 4 + 8 + 8 * (M - 1) bytes (28 with 3 DCs).
- A remote version is visible once its whole dependency vector is below the DC's GSV.
- RO-TX snapshot = stable vector with local entry max(coordinator clock, dt_c); each contacted
  partition WAITS until its own clock reaches that local entry (the skew cost of Figure 2).

Invariants: timestamps are physical (logical part 0) and strictly increasing per partition; the
stable vector is the GSV and only grows; a version (local or remote) is in a snapshot exactly when
its whole dependency vector is below the snapshot vector.
"""

from __future__ import annotations

from okapikv.core.mvstore import Version
from okapikv.core.protocols.base import DC_ID_BYTES, TIMESTAMP_BYTES, Protocol, WaitForStable, register
from okapikv.core.timestamps import WaitForClock, pack, physical_of, physical_put_timestamp
from okapikv.core.vectors import Vector, merge_max


def _dv_leq(version: Version, vector: Vector) -> bool:
    dv = version.dv
    if dv is None:
        return version.timestamp <= vector[version.source_dc]
    return all(d <= s for d, s in zip(dv, vector, strict=True))


class Cure(Protocol):
    name = "cure"

    def assign_timestamp(self, *, previous: int, max_dependency: int, now_us: int) -> int | WaitForClock:
        return physical_put_timestamp(previous, max_dependency, now_us)

    def replicated_dv(self, *, version: Version) -> Vector | None:
        if version.dv is None:  # stored as None (no remote dependency): Cure's updates always carry it
            return version.dependency_vector(self.num_dcs)
        return version.dv

    def update_metadata_bytes(self) -> int:
        return DC_ID_BYTES + TIMESTAMP_BYTES + TIMESTAMP_BYTES * (self.num_dcs - 1)

    def visible(self, *, version: Version, stable: Vector) -> bool:
        return version.source_dc == self.dc or _dv_leq(version, stable)

    def snapshot(self, *, stable: Vector, dt: int, now_us: int) -> Vector | WaitForStable:
        lts = max(pack(now_us), dt)
        return stable[: self.dc] + (lts,) + stable[self.dc + 1 :]

    def slice_wait(self, *, snapshot: Vector, now_us: int) -> WaitForClock | None:
        target = physical_of(snapshot[self.dc])
        if now_us < target:
            return WaitForClock(target, "tx_clock")
        return None

    def visible_in_snapshot(self, *, version: Version, snapshot: Vector) -> bool:
        return _dv_leq(version, snapshot)

    def on_stabilized(self, *, stable: Vector, gsv: Vector, usv: Vector | None) -> Vector:
        return merge_max(stable, gsv)


register(Cure)
