"""The core's durability hooks (docs/protocol.md): the change log, restore, catch-up after a restart, the GC
floor that keeps the catch-up log, snapshot-read expiry, and the session-move rule.

Servers are driven by hand with explicit clock readings, like ``test_server_replication``; the
crash tests crash a server of the simulator's deterministic world (``okapikv.sim.world.World.fixed``:
losing its memory and link queues), restore it from the changes it reported (or from nothing, when
its disk is lost), and check that catch-up (or repair) delivers what was lost and that nothing
converges wrongly.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    CatchUpReply,
    CatchUpRequest,
    ClientReply,
    Effect,
    ErrorReply,
    GetReply,
    GetRequest,
    Heartbeat,
    Message,
    PutRequest,
    ReadItem,
    ReadTxReply,
    ReadTxRequest,
    RepairAnswer,
    RepairBatch,
    ReplicaProgress,
    ReplicateBatch,
    Respond,
    ScanSlice,
    Send,
    ServerId,
    Session,
    SliceReply,
    TxSlice,
    Update,
    WriteReply,
)
from okapikv.core.mvstore import Change, MultiVersionStore, Version
from okapikv.core.partitioning import partition_of
from okapikv.core.server import Changes, PartitionServer, Repair
from okapikv.core.session import adopt
from okapikv.core.timestamps import pack
from okapikv.sim.caller import Caller
from okapikv.sim.world import World
from okapikv.wire import convert
from okapikv.wire import okapikv_pb2 as pb

T0 = 1_000_000


def make(dc: int = 0, num_dcs: int = 2, protocol: str = "okapi", **config: object) -> PartitionServer:
    return PartitionServer(CoreConfig(dc=dc, partition=0, num_dcs=num_dcs, num_partitions=1, protocol=protocol,
                                      **config))  # type: ignore[arg-type]


def sends(effects: Iterable[Effect]) -> list[Send]:
    return [effect for effect in effects if isinstance(effect, Send)]


def fresh(num_dcs: int = 2) -> Session:
    return Session((0,) * num_dcs, 0)


def replay(changes: Iterable[Change]) -> MultiVersionStore:
    """Apply a drained change log to an empty store, as the SQLite table would hold it."""
    rows: dict[tuple[bytes, int, int], Version] = {}
    for key, version, inserted in changes:
        if inserted:
            rows[(key, version.timestamp, version.source_dc)] = version
        else:
            rows.pop((key, version.timestamp, version.source_dc), None)
    store = MultiVersionStore()
    for (key, _, _), version in sorted(rows.items(), key=lambda item: item[0]):
        store.insert(key, version)
    return store


def every_version(store: MultiVersionStore) -> list[tuple[bytes, Version]]:
    keys = list(store.keys())
    return [(key, version) for key in keys for version in store.versions(key)]


def chains(store: MultiVersionStore) -> dict[bytes, list[tuple[bytes | None, int, int]]]:
    chained: dict[bytes, list[tuple[bytes | None, int, int]]] = {}
    for key, v in every_version(store):
        chained.setdefault(key, []).append((v.value, v.timestamp, v.source_dc))
    return chained


# ====================================================================== change log and restore


class TestChangeLog:
    def test_off_by_default(self) -> None:
        server = make()
        server.handle(PutRequest(1, b"k", b"v", fresh()), T0)
        assert server.drain_changes().store == []

    def test_inserts_then_removals_in_order_with_the_vectors(self) -> None:
        server = make(num_dcs=1, gc_interval_us=1_000)
        server.track_changes = True
        for index in range(3):
            server.handle(PutRequest(index, b"k", b"v%d" % index, fresh(1)), T0 + index)
        first = server.drain_changes()
        assert [(c.key, c.version.value, c.inserted) for c in first.store] == [
            (b"k", b"v0", True), (b"k", b"v1", True), (b"k", b"v2", True)]
        assert first.vv == (first.store[-1].version.timestamp,)
        assert server.drain_changes().store == []  # drained
        for now in range(T0 + 1_000, T0 + 30_001, 1_000):
            server.on_timer(now)
        removed = server.drain_changes().store
        assert [(c.version.value, c.inserted) for c in removed] == [(b"v0", False), (b"v1", False)]

    def test_replicated_updates_are_logged(self) -> None:
        server = make()
        server.track_changes = True
        server.handle(ReplicateBatch(ServerId(1, 0), (Update(b"a", b"1", pack(10), 1, None),)), T0)
        changes = server.drain_changes()
        assert [(c.key, c.version.source_dc, c.inserted) for c in changes.store] == [(b"a", 1, True)]
        assert changes.vv[1] == pack(10)

    def test_restore_rebuilds_the_store_and_never_reissues_a_timestamp(self) -> None:
        original = make(num_dcs=2)
        original.track_changes = True
        log: list[Change] = []
        last: Changes | None = None
        replies = []
        for index in range(5):
            effects = original.handle(PutRequest(index, b"k%d" % (index % 2), b"v%d" % index, fresh()), T0)
            replies += [e.reply for e in effects if isinstance(e, Respond)]
            last = original.drain_changes()
            log += last.store
        assert last is not None
        issued = max(reply.timestamp for reply in replies if isinstance(reply, WriteReply))
        restored = make(num_dcs=2)
        store = replay(log)
        restored.restore(every_version(store), vv=last.vv,
                         stable=last.stable, gsv=last.gsv, horizon=last.horizon, hlc_floor=pack(T0 + 1))
        assert chains(restored.store) == chains(original.store)
        assert restored.hlc >= pack(T0 + 1) > issued
        # The clock is behind the floor (a crash right after the bound was written): still above.
        reply = restored.handle(PutRequest(99, b"k0", b"new", fresh()), T0 - 500)[0]
        assert isinstance(reply, Respond) and isinstance(reply.reply, WriteReply)
        assert reply.reply.timestamp > pack(T0 + 1)
        assert restored.drain_changes().store == []  # tracking follows the flag, off here

    def test_restore_refuses_vectors_of_a_larger_cluster_and_pads_a_smaller_one(self) -> None:
        """A state written before the cluster grew has fewer entries (``okapikv.core.growth``): the
        new DC's entries are 0; one of more DCs than the server knows is another cluster's."""
        with pytest.raises(ValueError, match="entries"):
            make(num_dcs=2).restore([], vv=(0, 0, 0), stable=(0, 0), gsv=(0, 0), horizon=(0, 0), hlc_floor=0)
        server = make(num_dcs=2)
        server.restore([], vv=(pack(3),), stable=(0, 0), gsv=(0, 0), horizon=(0, 0), hlc_floor=0)
        assert tuple(server.vv) == (pack(3), 0)


# ====================================================================== catch-up


class TestCatchUp:
    def test_start_asks_every_replica_above_the_recovered_vv(self) -> None:
        server = make(dc=0, num_dcs=3)
        server.vv[1] = pack(7)
        requests = sends(server.start_catch_up())
        assert [(s.destination, s.message) for s in requests] == [
            (ServerId(1, 0), CatchUpRequest(ServerId(0, 0), 1, pack(7), True)),
            (ServerId(2, 0), CatchUpRequest(ServerId(0, 0), 2, 0, True)),
        ]
        assert server.catching_up == (1, 2)

    def test_answer_holds_every_local_update_above_after_in_order_then_the_reply(self) -> None:
        origin = make(dc=0)
        for index, key in enumerate([b"b", b"a", b"b", b"c"]):
            origin.handle(PutRequest(index, key, b"%d" % index, fresh()), T0 + index)
        origin.handle(ReplicateBatch(ServerId(1, 0), (Update(b"r", b"remote", pack(T0 + 50), 1, None),)), T0 + 5)
        stamps = sorted(v.timestamp for _, v in every_version(origin.store) if v.source_dc == 0)
        after = stamps[0]
        effects = sends(origin.handle(CatchUpRequest(ServerId(1, 0), 4, after, False), T0 + 10))
        batches = [s.message for s in effects if isinstance(s.message, ReplicateBatch)]
        sent = [u.timestamp for batch in batches for u in batch.updates]
        assert sent == stamps[1:]  # local versions only, above ``after``, in timestamp order
        assert effects[-1].message == CatchUpReply(ServerId(0, 0), 4, origin.hlc, pack(T0 + 50))
        assert all(s.destination == ServerId(1, 0) for s in effects)

    def test_a_restarted_requester_is_asked_back_but_not_a_replica_that_asked_back(self) -> None:
        origin = make(dc=0)
        restarted = sends(origin.handle(CatchUpRequest(ServerId(1, 0), 1, 0, True), T0))
        assert isinstance(restarted[-1].message, CatchUpRequest) and origin.catching_up == (1,)
        other = make(dc=0)
        asked_back = sends(other.handle(CatchUpRequest(ServerId(1, 0), 1, 0, False), T0))
        assert not any(isinstance(s.message, CatchUpRequest) for s in asked_back)
        assert other.catching_up == ()

    def test_vv_is_frozen_until_the_latest_answer(self) -> None:
        server = make(dc=1)
        server.start_catch_up()  # request 1 to DC 0
        source = ServerId(0, 0)
        server.handle(Heartbeat(source, pack(100)), T0)
        server.handle(ReplicateBatch(source, (Update(b"k", b"live", pack(120), 0, None),)), T0)
        assert server.vv[0] == 0  # a new stream's promises are not trusted yet
        assert [v.value for v in server.store.versions(b"k")] == [b"live"]  # but its data is kept
        server.handle(CatchUpRequest(source, 9, 0, True), T0)  # DC 0 restarted again: request 2
        server.handle(CatchUpReply(source, 1, pack(90)), T0)  # the stale answer proves up to 90
        assert server.vv[0] == pack(90) and server.catching_up == (0,)
        server.handle(Heartbeat(source, pack(130)), T0)
        assert server.vv[0] == pack(90)
        server.handle(CatchUpReply(source, 2, pack(125)), T0)
        assert server.vv[0] == pack(125) and server.catching_up == ()
        server.handle(Heartbeat(source, pack(130)), T0)
        assert server.vv[0] == pack(130)

    def test_a_reply_lifts_a_clock_below_what_the_replica_holds_of_this_dc(self) -> None:
        server = make(dc=0)  # an empty directory: no clock bound
        request = sends(server.start_catch_up())[0].message
        assert isinstance(request, CatchUpRequest)
        server.handle(CatchUpReply(ServerId(1, 0), request.request_id, pack(5), pack(T0 + 900)), T0)
        assert server.hlc >= pack(T0 + 900) and server.stats.replica_knows_clock == pack(T0 + 900)
        reply = server.handle(PutRequest(1, b"k", b"v", fresh()), T0)[0]
        assert isinstance(reply, Respond) and isinstance(reply.reply, WriteReply)
        assert reply.reply.timestamp > pack(T0 + 900)  # never a timestamp the replica already holds

    def test_messages_from_non_replicas_are_ignored(self) -> None:
        server = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=2, num_partitions=2))
        assert server.handle(CatchUpRequest(ServerId(1, 1), 1, 0, True), T0) == []
        assert server.handle(CatchUpReply(ServerId(0, 1), 1, pack(5)), T0) == []
        assert server.handle(ReplicaProgress(ServerId(1, 1), (pack(9), 0)), T0) == []
        assert server.vv == [0, 0] and server.gc._peer_progress == {}


# ====================================================================== GC keeps the catch-up log


def overwrite(server: PartitionServer, times: int, now: int) -> None:
    for index in range(times):
        server.handle(PutRequest(index, b"k", b"%d" % index, fresh(server.num_dcs)), now + index)


class TestReplicatedFloor:
    def test_okapi_keeps_local_versions_above_the_usv_local_entry(self) -> None:
        server = make(dc=0, gc_interval_us=1_000)
        overwrite(server, 3, T0)
        server.advance_horizon((pack(T0 + 10_000), pack(T0 + 10_000)))  # every snapshot is past them
        server.advance_stable((0, pack(T0 + 10_000)))
        server.on_timer(T0 + 50_000)
        assert len(server.store.versions(b"k")) == 3  # the other DC may not have them yet
        server.advance_stable((pack(T0 + 10_000), pack(T0 + 10_000)))  # universally stable now
        server.on_timer(T0 + 100_000)
        assert len(server.store.versions(b"k")) == 1

    @pytest.mark.parametrize("protocol", ["cure", "gentlerain", "eventual"])
    def test_other_protocols_wait_for_every_replicas_progress(self, protocol: str) -> None:
        server = make(dc=0, num_dcs=3, protocol=protocol, gc_interval_us=1_000)
        overwrite(server, 3, T0)
        top = pack(T0 + 10_000)
        server.advance_horizon((top, top, top))  # eventual's is everything already
        server.advance_stable((top, top, top))
        server.handle(ReplicaProgress(ServerId(1, 0), (top, 0, 0)), T0)
        server.on_timer(T0 + 50_000)
        assert len(server.store.versions(b"k")) == 3  # DC 2 has not reported
        server.handle(ReplicaProgress(ServerId(2, 0), (top, 0, 0)), T0)
        server.on_timer(T0 + 100_000)
        assert len(server.store.versions(b"k")) == 1

    @pytest.mark.parametrize("protocol", ["cure", "gentlerain"])
    def test_a_remote_tombstone_stays_until_every_other_replica_has_it(self, protocol: str) -> None:
        """Else a repair of its origin (a lost disk) could not give it to a replica that lacks it."""
        server = make(dc=0, num_dcs=3, protocol=protocol, gc_interval_us=1_000)
        old, gone = pack(T0 + 5), pack(T0 + 10)
        server.handle(ReplicateBatch(ServerId(1, 0), (Update(b"k", b"old", old, 1, (0, old, 0)),
                                                      Update(b"k", None, gone, 1, (0, gone, 0)))), T0)
        top = pack(T0 + 10_000)
        server.restore((), vv=(top, top, top), stable=(top, top, top), gsv=(0, 0, 0), horizon=(top, top, top),
                       hlc_floor=top)
        server.handle(ReplicaProgress(ServerId(1, 0), (top, top, top)), T0)
        server.handle(ReplicaProgress(ServerId(2, 0), (top, pack(T0 + 9), top)), T0)  # DC 2 lacks it
        for step in range(1, 40):
            server.on_timer(T0 + 20_000 + 1_000 * step)
        assert [v.value for v in server.store.versions(b"k")] == [None]  # the old version went, not the tombstone
        server.handle(ReplicaProgress(ServerId(2, 0), (top, top, top)), T0)
        for step in range(40, 80):
            server.on_timer(T0 + 20_000 + 1_000 * step)
        assert server.store.versions(b"k") == []

    def test_progress_is_sent_when_it_moved_and_only_without_a_usv(self) -> None:
        server = make(dc=0, protocol="cure", gc_interval_us=1_000)
        assert not [s for s in sends(server.on_timer(T0)) if isinstance(s.message, ReplicaProgress)]
        server.handle(Heartbeat(ServerId(1, 0), pack(5)), T0)
        progress = [s for s in sends(server.on_timer(T0 + 2_000)) if isinstance(s.message, ReplicaProgress)]
        assert [(s.destination, s.message.vv[1]) for s in progress] == [(ServerId(1, 0), pack(5))]
        assert not [s for s in sends(server.on_timer(T0 + 4_000)) if isinstance(s.message, ReplicaProgress)]
        okapi = make(dc=0, gc_interval_us=1_000)
        okapi.handle(Heartbeat(ServerId(1, 0), pack(5)), T0)
        assert not [s for s in sends(okapi.on_timer(T0 + 2_000)) if isinstance(s.message, ReplicaProgress)]


# ====================================================================== snapshot reads across a restart


def test_a_slice_reply_for_the_previous_incarnation_is_not_taken_for_a_new_read() -> None:
    """A peer's link resends what the crashed coordinator had not acknowledged, to its new
    incarnation (``okapikv.server.links``): a slice answer of an old read must not complete a new
    read that happens to have the same id (the new one would return another snapshot's values, or
    none). Ids of a restored incarnation start above every id of the earlier ones."""
    config = CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=2)
    peer = ServerId(0, 1)
    old_key, new_key = (next(k for n in range(100) if partition_of(k := b"%s%d" % (prefix, n), 2) == 1)
                        for prefix in (b"old", b"new"))
    old = PartitionServer(config)
    first = [s.message for s in sends(old.handle(ReadTxRequest(1, (old_key,), fresh(1)), T0))]
    assert len(first) == 1 and isinstance(first[0], TxSlice)
    stale = SliceReply(peer, first[0].tx_id, (ReadItem(old_key, b"old snapshot", pack(5), 0, None),))
    new = PartitionServer(config)
    # the floor a durable driver persists is above the clock and the time it last saw (group_commit)
    new.restore((), vv=tuple(old.vv), stable=old.stable, gsv=old.gsv, horizon=old.horizon, hlc_floor=pack(T0 + 1))
    now = T0 + 1_000
    slices = [s.message for s in sends(new.handle(ReadTxRequest(2, (new_key,), fresh(1)), now))]
    assert len(slices) == 1 and isinstance(slices[0], TxSlice) and slices[0].tx_id > first[0].tx_id
    assert new.handle(stale, now + 1) == []  # an abandoned attempt's late answer, ignored
    assert new.pending_reads == 1
    answer = SliceReply(peer, slices[0].tx_id, (ReadItem(new_key, b"new", pack(6), 0, None),))
    replies = [e.reply for e in new.handle(answer, now + 2) if isinstance(e, Respond)]
    assert [r.values for r in replies if isinstance(r, ReadTxReply)] == [(b"new",)]


# ====================================================================== moving a session to another DC


class TestAdopt:
    def test_ready_once_every_dependency_is_stable_here(self) -> None:
        session = Session((pack(10), pack(20), pack(5)), pack(30))  # a session of DC 1
        waiting = adopt(session, from_dc=1, here_dc=0, stable=(pack(3), pack(25), pack(5)))
        assert not waiting.ready and waiting.behind_us == (0, 5, 0)  # DC 1 up to 30 is not here
        assert waiting.session == session
        ready = adopt(session, from_dc=1, here_dc=0, stable=(pack(3), pack(30), pack(6)))
        assert ready.ready and ready.behind_us == (0, 0, 0)
        # Here's own entry is a local dependency (dt), the rest is this DC's own stable vector.
        assert ready.session == Session((pack(3), pack(30), pack(6)), pack(10))

    def test_a_session_of_this_dc_adopts_its_own_dt(self) -> None:
        result = adopt(Session((0, pack(4)), pack(9)), from_dc=0, here_dc=0, stable=(pack(1), pack(4)))
        assert result.ready and result.session == Session((pack(1), pack(4)), pack(9))

    def test_a_session_of_another_cluster_size_is_fitted_or_refused(self) -> None:
        """The cluster grew (``okapikv.core.growth``): a shorter session depends on nothing of the
        new DC; a longer one that depends on a DC this server does not know yet is not ready here."""
        with pytest.raises(ValueError):
            adopt(Session((0,), 0), from_dc=1, here_dc=0, stable=(0, 0))  # no DC 1 in the session
        assert adopt(Session((0,), 0), from_dc=0, here_dc=0, stable=(0, 0)).ready
        assert not adopt(Session((0, 0, 5), 0), from_dc=0, here_dc=0, stable=(0, 0)).ready


# ====================================================================== crash, restore, catch up (world)


class DiskServer(PartitionServer):
    """A partition server with a disk: every call's changes are written at once (as the durable
    driver does before releasing effects), with the vectors of the last call."""

    def __init__(self, config: CoreConfig) -> None:
        super().__init__(config)
        self.track_changes = True
        self.disk: list[Change] = []
        self.last = self.drain_changes()

    def _write_to_disk(self) -> None:
        self.last = self.drain_changes()
        self.disk += self.last.store

    def handle(self, message: Message, now_us: int) -> list[Effect]:
        effects = super().handle(message, now_us)
        self._write_to_disk()
        return effects

    def on_timer(self, now_us: int) -> list[Effect]:
        effects = super().on_timer(now_us)
        self._write_to_disk()
        return effects

    def start_catch_up(self, repair: Repair | None = None) -> list[Effect]:
        effects = super().start_catch_up(repair)
        self._write_to_disk()
        return effects


def disk_world(num_dcs: int, protocol: str, wan_us: int | list[list[int]]) -> World:
    """DCs of one partition each, servers with disks; true time starts at 1000 s so clocks may be
    set back."""
    return World.fixed(num_dcs, 1, protocol, wan_us=wan_us, start_us=1_000_000_000, server_factory=DiskServer)


def crash_and_restart(world: World, server_id: ServerId) -> PartitionServer:
    """``kill -9`` (the memory and the link queues are lost), then a restart from what its disk holds."""
    index = world.index(server_id)
    old = world.servers[index]
    assert isinstance(old, DiskServer)
    world.crash(index)
    new = DiskServer(old.config)
    last = old.last
    new.restore(every_version(replay(old.disk)), vv=last.vv,
                stable=last.stable, gsv=last.gsv, horizon=last.horizon, hlc_floor=old.hlc + 1)
    new.disk = old.disk
    return world.restart(index, server=new)


@pytest.mark.parametrize("protocol", ["okapi", "cure"])
def test_updates_lost_in_a_crashed_link_queue_arrive_by_catch_up(protocol: str) -> None:
    world = disk_world(2, protocol, 20_000)
    writer = Caller(world, 0)
    world.advance(50_000)
    writer.put(b"early", b"1")
    world.advance(100_000)
    world.network.cut_link(0, 1)  # what DC 0 sends now waits in its link queue...
    for index in range(5):
        writer.put(b"k%d" % index, b"v%d" % index)
    world.advance(30_000)
    origin = crash_and_restart(world, ServerId(0, 0))  # ...and is lost with the process
    world.network.repair_link(0, 1)
    replica = world.server(ServerId(1, 0))
    checks = 0
    deadline = world.now + 2_000_000
    while world.step(deadline):
        missing = [index for index in range(5) if not replica.store.versions(b"k%d" % index)]
        if missing:
            # The gap must never be declared received: vv[0] stays below the first missing update.
            first = min(origin.store.versions(b"k%d" % index)[-1].timestamp for index in missing)
            assert replica.vv[0] < first
            checks += 1
    assert checks > 0
    for index in range(5):
        assert [v.value for v in replica.store.versions(b"k%d" % index)][-1] == b"v%d" % index
    reader = Caller(world, 1)
    assert value(reader.get(b"k4")) == b"v4"  # stable (visible) in DC 1 once caught up
    assert replica.catching_up == () and origin.catching_up == ()


@pytest.mark.parametrize("message", [
    CatchUpRequest(ServerId(1, 0), 7, (1 << 64) - 1, True),
    CatchUpRequest(ServerId(1, 0), 8, 0, False),
    CatchUpRequest(ServerId(1, 0), 9, 0, True, repair=True),
    CatchUpReply(ServerId(1, 0), 7, pack(123, 4)),
    CatchUpReply(ServerId(1, 0), 7, pack(123, 4), pack(9), RepairAnswer((1, 2, 3), (0, 0, 0), (4, 5, 6))),
    ReplicaProgress(ServerId(1, 0), (pack(1), 0, (1 << 64) - 1)),
    RepairBatch(ServerId(1, 0), 5, (Update(b"k", None, pack(3), 2, (1, 2, 3)), Update(b"j", b"v", pack(4), 0, None))),
], ids=lambda m: type(m).__name__)
def test_new_peer_messages_round_trip_on_the_wire(message: object) -> None:
    frame = convert.frame_peer_message(convert.encode_peer_message(message))  # type: ignore[arg-type]
    batch = pb.PeerBatch.FromString(convert.encode_batch(convert.batch_header("c", ServerId(1, 0), 1), 1, [frame]))
    assert convert.peer_message_from_pb(batch.messages[0], ServerId(1, 0), 3) == message


def test_a_get_is_unaffected_by_tracking() -> None:
    server = make()
    server.track_changes = True
    effects = server.handle(GetRequest(1, b"missing", fresh()), T0)
    assert isinstance(effects[0], Respond) and isinstance(effects[0].reply, GetReply)
    assert server.drain_changes().store == []


# ====================================================================== repair after a lost disk


def lose_disk_and_repair(world: World, server_id: ServerId, salvaged: tuple[tuple[bytes, Version], ...] = (),
                         hlc_floor: int = 0, clock_step_us: int = 0) -> PartitionServer:
    """``kill -9`` and a new, empty disk (the clock bound lost with it: ``hlc_floor``), on a machine
    whose clock is ``clock_step_us`` off, then a restart in repair mode (``okapikv.storage.recovery``
    restores nothing and passes ``Repair``)."""
    index = world.index(server_id)
    world.crash(index)
    new = DiskServer(world.servers[index].config)
    zeros = (0,) * new.num_dcs
    new.restore((), vv=zeros, stable=zeros, gsv=zeros, horizon=zeros, hlc_floor=hlc_floor)
    return world.restart(index, server=new, repair=Repair(salvaged), clock_step_us=clock_step_us)


def value(reply: ClientReply) -> bytes | None:
    assert isinstance(reply, GetReply), reply
    return reply.value


class TestRepair:
    @pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain"])
    def test_a_lost_disk_comes_back_from_the_replicas_and_no_timestamp_is_reissued(self, protocol: str) -> None:
        world = disk_world(3, protocol, 10_000)
        mine, theirs = Caller(world, 0), Caller(world, 1)
        world.advance(50_000)
        for index in range(5):
            mine.put(b"m%d" % index, b"v%d" % index)
        mine.delete(b"m0")
        theirs.put(b"t", b"theirs")
        world.advance(300_000)
        # the new machine's clock is 2 s behind, and the clock bound is lost: floor 0
        repaired = lose_disk_and_repair(world, ServerId(0, 0), clock_step_us=-2_000_000)
        others = [world.server(ServerId(dc, 0)) for dc in (1, 2)]
        # Every timestamp of DC 0 some other server holds (updates it received, promises it was made).
        newest = max(max(server.vv[0] for server in others),
                     *(v.timestamp for server in others for _, v in every_version(server.store) if v.source_dc == 0))
        assert repaired.repairing == "fetching" and repaired.catching_up == (1, 2)
        refused = repaired.handle(GetRequest(1, b"m1", fresh(3)), world.read_clock(0))
        assert isinstance(refused[0], Respond) and isinstance(refused[0].reply, ErrorReply)
        assert refused[0].reply.code == "UNAVAILABLE" and "repairing" in refused[0].reply.message
        world.run_until(lambda: repaired.repairing != "fetching", 3_000_000)
        assert repaired.hlc >= newest  # as soon as every replica answered
        world.run_until(lambda: repaired.repairing is None, 3_000_000)
        assert repaired.stats.repair_local_received > 0
        assert [value(mine.get(b"m%d" % index)) for index in range(5)] == [None, b"v1", b"v2", b"v3", b"v4"]
        assert value(mine.get(b"t")) == b"theirs"
        Caller(world, 0).put(b"after", b"repair")  # a new session: no dependency lifts its timestamp
        assert repaired.store.versions(b"after")[-1].timestamp > newest
        other = world.server(ServerId(1, 0))
        # its replicas take it (not a duplicate)
        world.run_until(lambda: bool(other.store.versions(b"after")), 3_000_000)
        assert value(Caller(world, 1).get(b"m3")) == b"v3"

    def test_a_write_that_reached_one_replica_reaches_the_others_through_the_repaired_server(self) -> None:
        # DC 2 answers last: DC 1's request back reaches the repaired server while it still fetches.
        delays = [[0, 10_000, 30_000], [10_000, 0, 10_000], [30_000, 10_000, 0]]
        world = disk_world(3, "okapi", delays)
        writer = Caller(world, 0)
        world.advance(50_000)
        writer.put(b"both", b"1")
        world.advance(200_000)
        world.network.cut_link(0, 1)
        writer.put(b"only-c", b"2")  # reaches DC 2, waits for DC 1 in the link queue that dies
        world.advance(100_000)
        repaired = lose_disk_and_repair(world, ServerId(0, 0), hlc_floor=pack(world.now))
        world.network.repair_link(0, 1)
        world.run_until(lambda: repaired.repairing is None, 3_000_000)
        assert [v.value for v in repaired.store.versions(b"only-c")] == [b"2"]
        dc1 = world.server(ServerId(1, 0))
        world.run_until(lambda: bool(dc1.store.versions(b"only-c")) and dc1.catching_up == (), 3_000_000)
        assert value(Caller(world, 1).get(b"only-c")) == b"2"

    def test_salvaged_local_versions_are_kept_only_where_no_replica_has_them(self) -> None:
        world = disk_world(2, "okapi", 10_000)
        writer = Caller(world, 0)
        world.advance(50_000)
        writer.put(b"replicated", b"1")
        world.advance(200_000)
        world.network.cut_link(0, 1)
        writer.put(b"stranded", b"2")  # never leaves DC 0
        world.advance(50_000)
        crashed = world.server(ServerId(0, 0))
        assert isinstance(crashed, DiskServer)
        salvaged = tuple((key, version) for key, version, inserted in crashed.disk if inserted)
        repaired = lose_disk_and_repair(world, ServerId(0, 0), salvaged, hlc_floor=pack(world.now))
        world.network.repair_link(0, 1)
        world.run_until(lambda: repaired.repairing is None, 3_000_000)
        assert repaired.stats.repair_local_kept == 1  # "stranded"; "replicated" came back from DC 1
        assert value(writer.get(b"stranded")) == b"2" and value(writer.get(b"replicated")) == b"1"
        dc1 = world.server(ServerId(1, 0))
        world.run_until(lambda: bool(dc1.store.versions(b"stranded")), 3_000_000)

    def test_slices_wait_and_plain_requests_are_answered_after_the_fetch(self) -> None:
        server = make(dc=0, num_dcs=2)
        server.start_catch_up(Repair())
        assert server.handle(ScanSlice(ServerId(0, 0), 5, (0, 0), b"a", b"z", None), T0) == []  # parked
        assert server.handle(CatchUpRequest(ServerId(1, 0), 3, 0, False), T0) == []  # deferred
        stale = ReplicateBatch(ServerId(1, 0), (Update(b"old", b"collected since", pack(T0 - 20), 1, None),))
        server.handle(stale, T0)  # resent from before the disk was lost: ignored until the answer ends
        server.handle(RepairBatch(ServerId(1, 0), 1, (Update(b"k", b"mine", pack(T0 - 10), 0, None),)), T0)
        server.handle(RepairBatch(ServerId(1, 0), 99, (Update(b"x", b"not an answer", pack(T0 - 9), 0, None),)), T0)
        assert server.store.versions(b"old") == [] and server.store.versions(b"x") == []
        answer = RepairAnswer((0, 0), (0, 0), (0, 0))
        effects = [s for s in sends(server.handle(CatchUpReply(ServerId(1, 0), 1, pack(T0 - 5), pack(T0 - 10), answer),
                                                  T0))
                   if not isinstance(s.message, Heartbeat)]
        assert [type(s.message) for s in effects] == [ReplicateBatch, CatchUpReply]  # the deferred answer
        batch = effects[0].message
        assert isinstance(batch, ReplicateBatch) and batch.updates[0].key == b"k" and server.hlc >= pack(T0 - 10)
        assert server.repairing == "settling"
        server.on_timer(T0 + 1)
        assert server.repairing is None

    def test_a_replica_that_restarts_before_answering_is_asked_again(self) -> None:
        server = make(dc=0, num_dcs=2)
        first = sends(server.start_catch_up(Repair()))[0].message
        assert isinstance(first, CatchUpRequest) and first.repair
        again = sends(server.handle(CatchUpRequest(ServerId(1, 0), 1, 0, True), T0))[-1].message
        assert isinstance(again, CatchUpRequest) and again.repair and again.request_id != first.request_id
        server.handle(CatchUpReply(ServerId(1, 0), first.request_id, 0, 0, RepairAnswer((0, 0), (0, 0), (0, 0))), T0)
        assert server.repair_waiting == (1,)  # the stale answer does not count
        server.handle(CatchUpReply(ServerId(1, 0), again.request_id, 0, 0, RepairAnswer((0, 0), (0, 0), (0, 0))), T0)
        assert server.repair_waiting == () and server.repairing == "settling"

    def test_a_repair_answer_holds_every_version_of_every_dc(self) -> None:
        replica = make(dc=1, num_dcs=3)
        replica.handle(PutRequest(1, b"own", b"1", fresh(3)), T0)
        replica.handle(ReplicateBatch(ServerId(0, 0), (Update(b"theirs", b"0", pack(T0 - 5), 0, None),)), T0)
        replica.handle(ReplicateBatch(ServerId(2, 0), (Update(b"third", None, pack(T0 - 3), 2, None),)), T0)
        effects = sends(replica.handle(CatchUpRequest(ServerId(0, 0), 7, 0, True, repair=True), T0 + 1))
        updates = {u.key: u.source_dc for s in effects if isinstance(s.message, RepairBatch)
                   for u in s.message.updates}
        assert updates == {b"own": 1, b"theirs": 0, b"third": 2}
        reply = next(s.message for s in effects if isinstance(s.message, CatchUpReply))
        assert reply.repair is not None and reply.origin_through == pack(T0 - 5)
