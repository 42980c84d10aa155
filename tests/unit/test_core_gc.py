"""Garbage collection on its own (``okapikv.core.gc``; docs/protocol.md, "Garbage collection"): a
``GarbageCollector`` over a bare ``PartitionState``. Collection in running clusters is in
``test_server_replication.py``, ``test_core_durability.py`` and ``tests/property/test_prop_gc.py``."""

from __future__ import annotations

from okapikv.core.catchup import CatchUp
from okapikv.core.config import CoreConfig
from okapikv.core.gc import ALL_TIMESTAMPS, GC_SLICES, GarbageCollector
from okapikv.core.messages import Effect, ReadTxRequest, ReplicaProgress, Send, ServerId, Session
from okapikv.core.mvstore import Version
from okapikv.core.partitioning import partition_of
from okapikv.core.reads import SnapshotReads
from okapikv.core.state import PartitionState
from okapikv.core.timestamps import pack

T0 = 1_000_000


def make(protocol: str = "cure", *, dcs: int = 3, partitions: int = 1, universal: bool = False,
         **config: int) -> tuple[PartitionState, GarbageCollector, SnapshotReads]:
    state = PartitionState(CoreConfig(0, 0, dcs, partitions, protocol=protocol, **config))  # type: ignore[arg-type]
    reads = SnapshotReads(state, catch_up=CatchUp(state, stable_moves=True), admit=lambda *_: None)
    return state, GarbageCollector(state, reads, universal=universal), reads


def test_the_replicated_floor_is_what_every_replica_is_known_to_hold() -> None:
    assert make(dcs=1)[1].replicated_floor() == ALL_TIMESTAMPS
    state, gc, _ = make("okapi", universal=True)
    state.advance_stable((pack(7), pack(3), pack(4)))
    assert gc.replicated_floor() == pack(7)  # the USV's local entry
    state, gc, _ = make()
    assert gc.replicated_floor() == 0  # no replica has reported yet
    gc.on_replica_progress(ReplicaProgress(ServerId(1, 0), (pack(5), pack(9), 0)), T0)
    assert gc.replicated_floor() == 0
    gc.on_replica_progress(ReplicaProgress(ServerId(2, 0), (pack(6), 0, pack(9))), T0)
    assert gc.replicated_floor() == pack(5)
    gc.on_replica_progress(ReplicaProgress(ServerId(1, 0), (pack(1), 0, 0)), T0)  # older: moves nothing back
    gc.on_replica_progress(ReplicaProgress(ServerId(2, 1), (pack(99),) * 3, ), T0)  # not a replica
    gc.on_replica_progress(ReplicaProgress(ServerId(1, 0), (pack(99),) * 2), T0)  # malformed
    assert gc.replicated_floor() == pack(5)


def test_progress_goes_to_the_replicas_each_interval_only_when_it_moved() -> None:
    state, gc, _ = make()
    effects: list[Effect] = []
    gc.start_pass(T0, effects)
    assert effects == []  # nothing received yet
    state.vv[1] = pack(3)
    gc.start_pass(T0 + 1, effects)
    message = ReplicaProgress(state.id, (0, pack(3), 0))
    assert effects == [Send(ServerId(1, 0), message), Send(ServerId(2, 0), message)]
    gc.start_pass(T0 + 2, effects)
    assert len(effects) == 2
    state, gc, _ = make("okapi", universal=True)
    state.vv[1] = pack(3)
    gc.start_pass(T0, effects := [])
    assert effects == []  # the USV says it already


def test_a_tombstone_is_settled_only_once_no_older_write_can_still_arrive() -> None:
    state, gc, _ = make()
    local = Version(None, pack(5), 0, None)
    remote = Version(None, pack(5), 1, None)
    assert not gc.settled(local)  # the replicas' streams are not past it
    state.vv[:] = [pack(9), pack(9), pack(9)]
    assert gc.settled(local)
    assert not gc.settled(remote)  # DC 2 may lack DC 1's tombstone: repair would lose it
    gc.on_replica_progress(ReplicaProgress(ServerId(2, 0), (pack(9), pack(5), pack(9))), T0)
    assert gc.settled(remote)
    state, gc, _ = make("okapi", universal=True)
    state.vv[:] = [pack(9), pack(9), pack(9)]
    assert gc.settled(remote)  # universally visible already says every DC has it


def test_the_floor_is_the_protocols_held_back_by_running_reads() -> None:
    state, gc, reads = make(partitions=2, dcs=1)
    assert gc.floor(T0) == (pack(T0),)
    key = next(k for k in (b"k%d" % i for i in range(100)) if partition_of(k, 2) == 1)
    reads.on_read(ReadTxRequest(1, (key,), Session((0,), 0)), T0)  # its slice is out
    assert gc.floor(T0 + 500) == (pack(T0),)


def test_each_interval_examines_its_budget_in_slices_and_only_below_the_replicated_floor() -> None:
    state, gc, _ = make("okapi", dcs=1, universal=True, gc_budget=20, gc_interval_us=10_000)
    for index in range(30):
        key = b"k%d" % index
        state.store.insert(key, Version(b"old", pack(1 + 2 * index), 0, None))
        state.store.insert(key, Version(b"new", pack(2 + 2 * index), 0, None))
    state.advance_stable((pack(100),))
    state.advance_horizon((pack(100),))
    gc.collect(T0)
    assert state.store.collected_count == 0  # no interval started: no budget
    gc.start_pass(T0, [])
    assert gc.next_pass_us == T0 + 10_000
    for step in range(GC_SLICES):
        gc.collect(T0 + step * 1_000)
        assert state.store.collected_count == min(2 * (step + 1), 20)
    assert gc.next_slice_us == T0 + 9_000 + 10_000 // GC_SLICES
    gc.collect(T0 + 10_000)
    assert state.store.collected_count == 20  # the interval's budget is spent
    assert not gc.universally_visible(Version(b"x", pack(101), 0, None))  # above the horizon
