"""Garbage collection never changes what an allowed read can see (mvstore docstring; server GC).

A key's version chain, the server's stable vector, its GC horizon and its version vector are
generated; then the server runs one GC pass (``on_timer``). Every snapshot at or above the horizon
(RO-TX / SCAN) and every stable vector at or above the server's (GET) must read the same thing
before and after: the same version, or "nothing" where a tombstone was read (a deleted key reads as
absent either way). And a version that may still arrive later (from DC i: timestamp above vv[i],
since replication links are FIFO) must leave the replica in the same state whether it arrives
before or after collection, or replicas would diverge (last writer wins).
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from okapikv.core.config import CoreConfig
from okapikv.core.mvstore import Version
from okapikv.core.protocols.eventual import TOP
from okapikv.core.server import PartitionServer
from okapikv.core.vectors import Vector

SETTINGS = settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])
M = 3
LOCAL = 0
KEY = b"k"
LIMIT = 40  # timestamps are small integers: collisions and ties are frequent

stamps = st.integers(min_value=1, max_value=LIMIT)
vector_entries = st.integers(min_value=0, max_value=LIMIT + 5)
vectors = st.tuples(*[vector_entries] * M)


@st.composite
def version_specs(draw: st.DrawFn, protocol: str) -> Version:
    timestamp = draw(stamps)
    source = draw(st.integers(0, M - 1))
    value = draw(st.sampled_from([b"x", b"y", None]))
    dv: Vector | None = None
    keeps_dv = protocol == "cure" or (protocol == "okapi" and source == LOCAL)
    if keeps_dv:
        entries = list(draw(vectors))
        entries[source] = timestamp
        dv = tuple(entries)
    return Version(value, timestamp, source, dv)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[str, list[Version], Vector, Vector, Vector]:
    protocol = draw(st.sampled_from(["okapi", "cure", "gentlerain", "eventual"]))
    versions = draw(st.lists(version_specs(protocol), min_size=1, max_size=8))
    stable = draw(vectors)
    horizon = draw(vectors)
    # A replica has received every version it holds: vv[i] is at least the newest from DC i
    # (links are FIFO), and the local clock is at least every local timestamp.
    vv = tuple(
        max([entry] + [version.timestamp for version in versions if version.source_dc == dc])
        for dc, entry in enumerate(draw(st.tuples(*[st.integers(0, LIMIT // 2)] * M)))
    )
    if protocol == "gentlerain":  # one scalar repeated, as on_stabilized and snapshot_floor make them
        stable, horizon = (min(stable),) * M, (min(horizon),) * M
    if protocol == "eventual":
        horizon = (TOP,) * M
    return protocol, versions, stable, horizon, vv


def build(protocol: str, versions: list[Version], stable: Vector, horizon: Vector, vv: Vector) -> PartitionServer:
    # Partition 1 of 2 is not the aggregator: a timer round changes neither stable nor horizon.
    server = PartitionServer(
        CoreConfig(dc=LOCAL, partition=1, num_dcs=M, num_partitions=2, protocol=protocol, gc_interval_us=1)
    )
    server.restore((), vv=vv, stable=stable, gsv=(0,) * M, horizon=horizon, hlc_floor=vv[LOCAL])
    for version in versions:
        server.store.insert(KEY, Version(version.value, version.timestamp, version.source_dc, version.dv))
    return server


def read(server: PartitionServer, visible) -> tuple[bytes, int, int] | None:  # type: ignore[no-untyped-def]
    version = server.store.newest(KEY, visible)
    if version is None or version.value is None:
        return None  # absent and deleted read the same
    return (version.value, version.timestamp, version.source_dc)


def above(base: Vector, deltas: tuple[int, ...]) -> Vector:
    return tuple(entry + delta for entry, delta in zip(base, deltas, strict=True))


deltas = st.lists(st.tuples(*[st.integers(0, 10)] * M), min_size=1, max_size=6)


@SETTINGS
@given(scenario=scenarios(), snapshot_deltas=deltas, stable_deltas=deltas)
def test_gc_keeps_every_allowed_read(
    scenario: tuple[str, list[Version], Vector, Vector, Vector],
    snapshot_deltas: list[tuple[int, ...]],
    stable_deltas: list[tuple[int, ...]],
) -> None:
    protocol, versions, stable, horizon, vv = scenario
    server = build(protocol, versions, stable, horizon, vv)
    protocol_rules = server.protocol
    snapshots = [horizon] + [above(horizon, d) for d in snapshot_deltas] if protocol != "eventual" else [horizon]
    stables = [stable] + [above(stable, d) for d in stable_deltas]

    def reads() -> list[tuple[bytes, int, int] | None]:
        result = [read(server, lambda v, s=s: protocol_rules.visible_in_snapshot(version=v, snapshot=s))
                  for s in snapshots]
        result += [read(server, lambda v, s=s: protocol_rules.visible(version=v, stable=s)) for s in stables]
        result.append(read(server, lambda v: True))  # the newest version: what replicas converge on
        return result

    before = reads()
    count_before = server.store.version_count
    server.on_timer(1)
    assert server.store.version_count <= count_before
    assert reads() == before


@SETTINGS
@given(scenario=scenarios(), late=st.data())
def test_a_late_replicated_version_lands_the_same_before_or_after_gc(
    scenario: tuple[str, list[Version], Vector, Vector, Vector], late: st.DataObject
) -> None:
    protocol, versions, stable, horizon, vv = scenario
    collected = build(protocol, versions, stable, horizon, vv)
    collected.on_timer(1)  # may raise vv[LOCAL] (stabilization): future local versions are above it
    source = late.draw(st.integers(0, M - 1), label="source")
    assume(source != LOCAL)  # remote arrivals only: a local version is created above the clock anyway
    timestamp = late.draw(st.integers(collected.vv[source] + 1, collected.vv[source] + LIMIT), label="timestamp")
    value = late.draw(st.sampled_from([b"late", None]), label="value")
    dv: Vector | None = None
    if protocol == "cure":
        entries = list(late.draw(vectors, label="dv"))
        entries[source] = timestamp
        dv = tuple(entries)
    uncollected = build(protocol, versions, stable, horizon, vv)
    for server in (collected, uncollected):
        server.store.insert(KEY, Version(value, timestamp, source, dv))
    protocol_rules = collected.protocol
    checks = [
        lambda v: True,
        lambda v: protocol_rules.visible(version=v, stable=stable),
        lambda v: protocol_rules.visible_in_snapshot(version=v, snapshot=horizon),
        lambda v: protocol_rules.visible_in_snapshot(version=v, snapshot=(LIMIT * 3,) * M),
    ]
    for visible in checks:
        assert read(collected, visible) == read(uncollected, visible)
