"""GentleRain (baseline, docs/protocol.md, "GentleRain"): physical clocks and one scalar of metadata.

- PUT waits until the physical clock exceeds the client's dependency time.
- Replication carries 12 bytes (source DC, timestamp).
- GST = the minimum of every entry of every partition's version vector in the DC: a remote version
  is visible once ``ut <= GST``. The server's stable vector holds the GST in every entry.
- Scalar end to end (``scalar``): each partition reports one local stable time (the minimum of its
  vv), the aggregator broadcasts one GST, and snapshots and sessions travel as one time
  (docs/protocol.md, "GentleRain"; the paper, section 6: GentleRain's stabilization is the most
  network-efficient and its transactions carry a scalar, not a vector).
- RO-TX snapshot time st = max(dt_c, GST): the coordinator WAITS until the DC's GST reaches st,
  i.e. until every DC has delivered everything up to st (proportional to the furthest DC's delay).

Invariants: the GST, ``min(stable)``, only grows (entries above it, merged from sessions or slices,
carry no promise and are ignored); a snapshot is the GST repeated, so the GC floor is too.
"""

from __future__ import annotations

from okapikv.core.mvstore import Version
from okapikv.core.protocols.base import Protocol, WaitForStable, register
from okapikv.core.timestamps import WaitForClock, physical_put_timestamp
from okapikv.core.vectors import Vector, merge_max


class GentleRain(Protocol):
    name = "gentlerain"
    scalar = True

    def assign_timestamp(self, *, previous: int, max_dependency: int, now_us: int) -> int | WaitForClock:
        return physical_put_timestamp(previous, max_dependency, now_us)

    def stored_dv(self, *, dependency: Vector, timestamp: int) -> Vector | None:
        return None

    def visible(self, *, version: Version, stable: Vector) -> bool:
        return version.source_dc == self.dc or version.timestamp <= min(stable)

    def snapshot(self, *, stable: Vector, dt: int, now_us: int) -> Vector | WaitForStable:
        gst = min(stable)
        if dt > gst:
            return WaitForStable(dt, "tx_stable")
        return (gst,) * self.num_dcs

    def visible_in_snapshot(self, *, version: Version, snapshot: Vector) -> bool:
        return version.timestamp <= snapshot[0]

    def on_stabilized(self, *, stable: Vector, gsv: Vector, usv: Vector | None) -> Vector:
        gst = max(min(gsv), min(stable))
        return merge_max(stable, (gst,) * self.num_dcs)

    def snapshot_floor(self, *, stable: Vector, now_us_packed: int) -> Vector:
        # Every snapshot this server coordinates is the GST in every entry, and the GST is the
        # minimum of ``stable`` (whose other entries may run ahead after merging a client session or
        # a fresher coordinator's snapshot): only that minimum is a lower bound.
        return (min(stable),) * self.num_dcs


register(GentleRain)
