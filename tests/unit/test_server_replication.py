"""Replication, heartbeats, stabilization and waits of the partition server (docs/protocol.md).

Servers are driven directly (``handle`` / ``on_timer`` with explicit clock readings) and messages
between them are carried by hand, so each test can look at the exact effects one step produces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from okapikv.core import counters
from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    ClientReply,
    DeleteRequest,
    Effect,
    GetReply,
    GetRequest,
    GsvBroadcast,
    GsvExchange,
    Heartbeat,
    PutRequest,
    ReadTxReply,
    ReadTxRequest,
    ReplicateBatch,
    Respond,
    ScanRequest,
    Send,
    ServerId,
    Session,
    SliceReply,
    TxSlice,
    Update,
    VvReport,
    WriteReply,
)
from okapikv.core.mvstore import MultiVersionStore, VisibilityPredicate
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack

T0 = 1_000_000  # microseconds


def make(
    dc: int = 0,
    partition: int = 0,
    num_dcs: int = 2,
    num_partitions: int = 1,
    protocol: str = "okapi",
    **config: object,
) -> PartitionServer:
    return PartitionServer(
        CoreConfig(
            dc=dc, partition=partition, num_dcs=num_dcs, num_partitions=num_partitions, protocol=protocol, **config
        )  # type: ignore[arg-type]
    )


def sends(effects: Iterable[Effect]) -> list[Send]:
    return [effect for effect in effects if isinstance(effect, Send)]


def replies(effects: Iterable[Effect]) -> list[ClientReply]:
    return [effect.reply for effect in effects if isinstance(effect, Respond)]


def session(num_dcs: int = 2, dt: int = 0, stable: tuple[int, ...] | None = None) -> Session:
    return Session(stable if stable is not None else (0,) * num_dcs, dt)


class Mesh:
    """Every server of a small cluster; sends are delivered at once unless ``hold`` says otherwise."""

    def __init__(self, num_dcs: int, num_partitions: int, protocol: str = "okapi", **config: object) -> None:
        self.servers = {
            ServerId(dc, partition): make(dc, partition, num_dcs, num_partitions, protocol, **config)
            for dc in range(num_dcs)
            for partition in range(num_partitions)
        }
        self.held: list[Send] = []
        self.replies: list[ClientReply] = []
        self.hold: Callable[[Send], bool] = lambda send: False

    def deliver(self, effects: Iterable[Effect], now_us: int) -> None:
        queue = list(effects)
        while queue:
            effect = queue.pop(0)
            if isinstance(effect, Respond):
                self.replies.append(effect.reply)
            elif self.hold(effect):
                self.held.append(effect)
            else:
                queue.extend(self.servers[effect.destination].handle(effect.message, now_us))

    def release(self, now_us: int) -> None:
        held, self.held = self.held, []
        self.deliver(held, now_us)

    def tick(self, now_us: int) -> None:
        for server in self.servers.values():
            self.deliver(server.on_timer(now_us), now_us)

    def run(self, start_us: int, end_us: int, step_us: int = 500) -> None:
        for now_us in range(start_us, end_us + 1, step_us):
            self.tick(now_us)


# ====================================================================== replication


class TestReplicationEffects:
    @pytest.mark.parametrize("protocol", ["okapi", "gentlerain", "eventual"])
    def test_put_replicates_to_every_peer_without_dv(self, protocol: str) -> None:
        server = make(dc=1, partition=2, num_dcs=3, num_partitions=4, protocol=protocol)
        effects = server.handle(PutRequest(1, b"k", b"value", session(3)), T0)
        [reply] = replies(effects)
        assert isinstance(reply, WriteReply)
        out = sends(effects)
        assert [send.destination for send in out] == [ServerId(0, 2), ServerId(2, 2)]
        for send in out:
            assert send.message == ReplicateBatch(ServerId(1, 2), (Update(b"k", b"value", reply.timestamp, 1, None),))
        assert server.stats.replicated_updates_sent == 2
        assert server.stats.replication_metadata_bytes == 2 * 12
        assert server.stats.replication_payload_bytes == 2 * (1 + 5)

    def test_cure_replicates_the_dependency_vector(self) -> None:
        server = make(dc=1, num_dcs=3, protocol="cure")
        stable = (pack(5), 0, pack(7))
        effects = server.handle(PutRequest(1, b"k", b"v", Session(stable, 0)), T0)
        [reply] = replies(effects)
        assert isinstance(reply, WriteReply)
        [first, _] = sends(effects)
        assert isinstance(first.message, ReplicateBatch)
        assert first.message.updates[0].dv == (pack(5), reply.timestamp, pack(7))
        assert server.stats.replication_metadata_bytes == 2 * 28

    def test_reply_comes_before_replication(self) -> None:
        effects = make().handle(PutRequest(1, b"k", b"v", session()), T0)
        assert isinstance(effects[0], Respond)
        assert isinstance(effects[1], Send)

    def test_delete_replicates_a_tombstone(self) -> None:
        server = make()
        server.handle(PutRequest(1, b"k", b"v", session()), T0)
        effects = server.handle(DeleteRequest(2, b"k", session()), T0 + 1)
        [send] = sends(effects)
        assert isinstance(send.message, ReplicateBatch)
        assert send.message.updates[0].value is None
        assert server.stats.replication_payload_bytes == (1 + 1) + 1

    def test_handle_batch_sends_one_batch_per_peer_in_timestamp_order(self) -> None:
        server = make(num_dcs=3)
        requests = [PutRequest(i, f"k{i}".encode(), b"v", session(3)) for i in range(5)]
        effects = server.handle_batch(requests, T0)
        assert len(replies(effects)) == 5
        out = sends(effects)
        assert len(out) == 2
        batch = out[0].message
        assert isinstance(batch, ReplicateBatch)
        stamps = [update.timestamp for update in batch.updates]
        assert [update.key for update in batch.updates] == [f"k{i}".encode() for i in range(5)]
        assert stamps == sorted(stamps) and len(set(stamps)) == 5
        assert server.stats.replicated_updates_sent == 10

    def test_reads_and_refusals_replicate_nothing(self) -> None:
        server = make()
        assert sends(server.handle(GetRequest(1, b"k", session()), T0)) == []
        assert sends(server.handle(PutRequest(2, b"", b"v", session()), T0)) == []
        assert server.stats.replicated_updates_sent == 0


class TestReceivingReplication:
    def batch(self, *updates: Update, source_dc: int = 1) -> ReplicateBatch:
        return ReplicateBatch(ServerId(source_dc, 0), updates)

    def test_inserts_versions_and_advances_vv(self) -> None:
        server = make(num_dcs=3)
        server.on_timer(T0)  # a heartbeat just left: the changed GSV waits (see TestStabilization)
        effects = server.handle(
            self.batch(Update(b"a", b"1", pack(10), 1, None), Update(b"b", None, pack(12), 1, None)), T0 + 10
        )
        assert effects == []
        assert [v.value for v in server.store.versions(b"a")] == [b"1"]
        assert [v.value for v in server.store.versions(b"b")] == [None]
        assert server.vv == [pack(T0), pack(12), 0]
        assert server.stats.replicated_updates_received == 2

    def test_vv_never_moves_back(self) -> None:
        server = make()
        server.handle(self.batch(Update(b"a", b"2", pack(20), 1, None)), T0)
        server.handle(self.batch(Update(b"a", b"1", pack(10), 1, None)), T0)
        assert server.vv[1] == pack(20)

    def test_redelivered_batch_is_idempotent(self) -> None:
        server = make()
        message = self.batch(Update(b"a", b"1", pack(10), 1, None))
        server.handle(message, T0)
        server.handle(message, T0)
        assert len(server.store.versions(b"a")) == 1
        assert server.store.version_count == 1

    def test_okapi_remote_version_is_invisible_until_universally_stable(self) -> None:
        server = make()
        server.handle(self.batch(Update(b"a", b"remote", pack(10), 1, None)), T0)
        [reply] = replies(server.handle(GetRequest(1, b"a", session()), T0))
        assert isinstance(reply, GetReply) and reply.value is None
        # A client that has seen a USV covering it (from another server) makes it visible here.
        [reply] = replies(server.handle(GetRequest(2, b"a", Session((0, pack(10)), 0)), T0))
        assert isinstance(reply, GetReply) and reply.value == b"remote"
        assert server.stable == (0, pack(10))

    def test_concurrent_writes_converge_by_timestamp_then_dc(self) -> None:
        mesh = Mesh(3, 1)
        for dc in range(3):
            request = PutRequest(1, b"k", f"dc{dc}".encode(), session(3))
            mesh.deliver(mesh.servers[ServerId(dc, 0)].handle(request, T0), T0)
        latest = {server.store.latest(b"k").value for server in mesh.servers.values()}  # type: ignore[union-attr]
        assert latest == {b"dc2"}  # same timestamp pack(T0) everywhere: the highest DC id wins


# ====================================================================== heartbeats


class TestHeartbeat:
    def test_sent_after_one_ms_without_replication(self) -> None:
        server = make(num_dcs=3)
        assert sends(server.on_timer(T0)) != []  # first round: stabilization and a heartbeat
        heartbeats = [s for s in sends(server.on_timer(T0 + 999)) if isinstance(s.message, Heartbeat)]
        assert heartbeats == []
        heartbeats = [s for s in sends(server.on_timer(T0 + 1_000)) if isinstance(s.message, Heartbeat)]
        assert [s.destination for s in heartbeats] == [ServerId(1, 0), ServerId(2, 0)]
        assert all(s.message == Heartbeat(ServerId(0, 0), pack(T0 + 1_000)) for s in heartbeats)
        assert server.stats.heartbeats_sent == 4
        assert server.stats.heartbeat_bytes == 4 * 12

    def test_advances_the_local_clock(self) -> None:
        server = make()
        server.on_timer(T0)
        assert server.hlc >= pack(T0)

    def test_carries_an_hlc_that_is_ahead_of_the_physical_clock(self) -> None:
        server = make()
        server.on_timer(T0)
        reply = replies(server.handle(PutRequest(1, b"k", b"v", session(dt=pack(T0 + 50_000, 3))), T0 + 10))[0]
        assert isinstance(reply, WriteReply) and reply.timestamp == pack(T0 + 50_000, 4)
        heartbeats = [s for s in sends(server.on_timer(T0 + 2_000)) if isinstance(s.message, Heartbeat)]
        assert heartbeats[0].message.timestamp == pack(T0 + 50_000, 4)  # type: ignore[union-attr]

    def test_postponed_by_replication(self) -> None:
        server = make()
        server.on_timer(T0)
        server.handle(PutRequest(1, b"k", b"v", session()), T0 + 500)
        assert not any(isinstance(s.message, Heartbeat) for s in sends(server.on_timer(T0 + 1_000)))
        assert not any(isinstance(s.message, Heartbeat) for s in sends(server.on_timer(T0 + 1_499)))
        assert any(isinstance(s.message, Heartbeat) for s in sends(server.on_timer(T0 + 1_500)))

    def test_next_deadline_includes_heartbeat(self) -> None:
        server = make()
        server.on_timer(T0)
        assert server.next_deadline() == T0 + 1_000

    def test_one_dc_never_heartbeats(self) -> None:
        server = make(num_dcs=1)
        for now in range(T0, T0 + 10_000, 500):
            assert not any(isinstance(s.message, Heartbeat) for s in sends(server.on_timer(now)))
        assert server.stats.heartbeats_sent == 0

    def test_received_heartbeat_advances_vv_and_never_moves_it_back(self) -> None:
        server = make(num_dcs=3)
        server.on_timer(T0)
        assert server.handle(Heartbeat(ServerId(2, 0), pack(50)), T0 + 10) == []
        assert server.vv == [pack(T0), 0, pack(50)]
        server.handle(Heartbeat(ServerId(2, 0), pack(40)), T0)
        assert server.vv[2] == pack(50)

    @pytest.mark.parametrize("protocol", ["cure", "gentlerain"])
    def test_never_announces_a_timestamp_before_replicating_it(self, protocol: str) -> None:
        # A heartbeat promises "nothing at or below this timestamp will follow" on a FIFO link, so
        # an update that a timer round creates (a parked PUT resuming) must leave before any
        # heartbeat that covers it. Exposed a core bug: the heartbeat used to be sent first.
        # (Okapi never parks a PUT.)
        server = make(protocol=protocol)
        server.on_timer(T0)
        server.on_timer(T0 + 1_000)  # a heartbeat is due again at T0 + 2_000
        dependency = pack(T0 + 1_999)
        assert server.handle(PutRequest(1, b"k", b"v", session(dt=dependency)), T0 + 1_500) == []
        assert server.next_deadline() == T0 + 2_000
        effects = server.on_timer(T0 + 2_000)
        [reply] = replies(effects)
        assert isinstance(reply, WriteReply)
        announced = -1
        for send in sends(effects):
            if send.destination.dc != 1:
                continue
            if isinstance(send.message, Heartbeat):
                announced = max(announced, send.message.timestamp)
            elif isinstance(send.message, ReplicateBatch):
                assert all(update.timestamp > announced for update in send.message.updates)
        assert any(isinstance(send.message, ReplicateBatch) for send in sends(effects))


# ====================================================================== stabilization


class TestStabilization:
    def test_non_aggregator_reports_its_vv(self) -> None:
        server = make(dc=0, partition=1, num_dcs=2, num_partitions=2)
        effects = sends(server.on_timer(T0))
        stabilization = [s for s in effects if not isinstance(s.message, Heartbeat)]
        assert [(s.destination, type(s.message)) for s in stabilization] == [(ServerId(0, 0), VvReport)]
        report = stabilization[0].message
        assert isinstance(report, VvReport)
        assert report.vv == (pack(T0), 0)
        assert report.floor == (pack(T0), 0)  # stable vector with the local clock (GC floor)
        assert server.stats.stabilization_messages_sent == 1
        assert server.stats.stabilization_bytes == 4 + 16
        # its GSV has not changed yet: nothing for the replicas
        assert all(s.message.gsv is None for s in effects if isinstance(s.message, Heartbeat))

    def test_a_changed_gsv_rides_on_the_next_replication_batch_once(self) -> None:
        server = make(dc=0, partition=1, num_dcs=3, num_partitions=2)
        server.on_timer(T0)
        server.handle(GsvBroadcast(ServerId(0, 0), (pack(T0), 7, 8), None, (0, 0, 0)), T0 + 10)
        bytes_before = server.stats.stabilization_bytes
        effects = sends(server.handle(PutRequest(1, b"k", b"v", session(3)), T0 + 20))
        assert [(s.destination, type(s.message)) for s in effects] == [(ServerId(1, 1), ReplicateBatch),
                                                                       (ServerId(2, 1), ReplicateBatch)]
        assert all(isinstance(s.message, ReplicateBatch) and s.message.gsv == (pack(T0), 7, 8) for s in effects)
        assert server.stats.stabilization_bytes == bytes_before + 2 * 24  # counted as stabilization traffic
        # once per change: neither the next batch nor the next period's heartbeat carries it again
        effects = sends(server.handle(PutRequest(2, b"k", b"w", session(3)), T0 + 30))
        assert all(isinstance(s.message, ReplicateBatch) and s.message.gsv is None for s in effects)
        later = sends(server.on_timer(T0 + 5_000))
        assert all(s.message.gsv is None for s in later if isinstance(s.message, Heartbeat))
        assert not any(isinstance(s.message, GsvExchange) for s in later)

    def test_a_changed_gsv_no_batch_took_leaves_on_a_heartbeat_at_the_next_period(self) -> None:
        server = make(dc=0, partition=1, num_dcs=2, num_partitions=2, heartbeat_interval_us=5_000)
        server.on_timer(T0)
        server.handle(GsvBroadcast(ServerId(0, 0), (pack(T0), 7), None, (0, 0)), T0 + 10)
        effects = sends(server.on_timer(T0 + 5_000))
        assert [(s.destination, type(s.message)) for s in effects] == [(ServerId(0, 0), VvReport),
                                                                       (ServerId(1, 1), Heartbeat)]
        assert effects[1].message == Heartbeat(ServerId(0, 1), pack(T0 + 5_000), (pack(T0), 7))
        # heartbeats (every 5 ms here, as `okapi up` runs them) now fall on the stabilization
        # periods: one timer and one link batch per period
        assert server.next_deadline() == T0 + 10_000
        assert [type(s.message) for s in sends(server.on_timer(T0 + 10_000))] == [VvReport, Heartbeat]

    @pytest.mark.parametrize("carrier", ["replicate", "heartbeat"])
    def test_a_gsv_riding_on_replication_raises_the_usv_and_resumes_waits(self, carrier: str) -> None:
        server = make(dc=0, partition=1, num_dcs=2, num_partitions=2)
        server.handle(GsvBroadcast(ServerId(0, 0), (pack(8), pack(8)), None, (0, 0)), T0)
        assert server.stable == (0, 0)  # DC 1's GSV unknown
        source = ServerId(1, 1)
        gsv = (pack(4), pack(9))
        message = (ReplicateBatch(source, (), gsv) if carrier == "replicate" else Heartbeat(source, pack(3), gsv))
        server.handle(message, T0)
        assert server.stable == (pack(4), pack(8))

    def test_one_partition_per_dc_gsv_follows_the_vv_at_every_step(self) -> None:
        """The DC's GSV is the one partition's vv: a received update raises it (and the USV) in
        the same step, not at the next stabilization period, and the next batch carries it."""
        server = make(dc=0, num_dcs=3, heartbeat_interval_us=5_000)
        server.on_timer(T0)
        server.handle(ReplicateBatch(ServerId(2, 0), (), (pack(T0), pack(T0), pack(T0))), T0)
        update = Update(b"x", b"1", pack(T0 + 100), 1, None)
        server.handle(ReplicateBatch(ServerId(1, 0), (update,), (pack(T0), pack(T0 + 100), pack(T0))), T0 + 150)
        assert server.gsv == tuple(server.vv) and server.gsv[1] == pack(T0 + 100)
        assert server.stable[1] == pack(T0)  # DC 2 has not reported DC 1's update yet: min of the GSVs
        server.handle(ReplicateBatch(ServerId(2, 0), (), (pack(T0), pack(T0 + 100), pack(T0))), T0 + 200)
        assert server.stable[1] == pack(T0 + 100)  # visible with no timer in between
        [to_1, to_2] = sends(server.handle(PutRequest(1, b"k", b"v", session(3)), T0 + 300))
        assert isinstance(to_1.message, ReplicateBatch) and to_1.message.gsv == server.gsv
        assert to_2.message == to_1.message

    def test_one_partition_per_dc_shares_a_changed_gsv_with_no_batch_leaving_at_most_once_a_ms(self) -> None:
        server = make(dc=0, num_dcs=2, heartbeat_interval_us=5_000)
        server.on_timer(T0)  # stabilization + heartbeat at T0
        heartbeat = Heartbeat(ServerId(1, 0), pack(T0 + 500), None)
        assert sends(server.handle(heartbeat, T0 + 500)) == []  # GSV changed, but a send left 0.5 ms ago
        [send] = sends(server.handle(Heartbeat(ServerId(1, 0), pack(T0 + 1_000), None), T0 + 1_000))
        assert send.message == Heartbeat(ServerId(0, 0), pack(T0 + 1_000), (pack(T0), pack(T0 + 1_000)))
        assert sends(server.handle(Heartbeat(ServerId(1, 0), pack(T0 + 1_500), None), T0 + 1_500)) == []
        # an unchanged vv sends nothing, however long since the last send
        assert sends(server.handle(Heartbeat(ServerId(1, 0), pack(T0 + 1_500), None), T0 + 4_000)) == []

    def test_several_partitions_per_dc_still_stabilize_on_the_period(self) -> None:
        server = make(dc=0, partition=0, num_dcs=2, num_partitions=2)
        server.handle(Heartbeat(ServerId(1, 0), pack(T0), None), T0)
        assert server.gsv == (0, 0)  # the other partition's vv is not known here yet

    def test_next_stabilization_after_the_interval(self) -> None:
        server = make(num_dcs=1, partition=1, num_partitions=2)
        assert sends(server.on_timer(T0))
        assert sends(server.on_timer(T0 + 4_999)) == []
        assert sends(server.on_timer(T0 + 5_000))
        assert server.next_deadline() == T0 + 10_000

    def test_aggregator_waits_for_every_report(self) -> None:
        aggregator = make(dc=0, partition=0, num_dcs=1, num_partitions=3)
        assert sends(aggregator.on_timer(T0)) == []
        aggregator.handle(VvReport(ServerId(0, 1), (pack(5),), (pack(5),)), T0)
        assert sends(aggregator.on_timer(T0 + 5_000)) == []
        aggregator.handle(VvReport(ServerId(0, 2), (pack(7),), (pack(3),)), T0)
        effects = sends(aggregator.on_timer(T0 + 10_000))
        assert [s.destination for s in effects] == [ServerId(0, 1), ServerId(0, 2)]
        broadcast = effects[0].message
        assert broadcast == GsvBroadcast(ServerId(0, 0), (pack(5),), None, (pack(3),))
        assert aggregator.gsv == (pack(5),)
        assert aggregator.horizon == (pack(3),)

    def test_reports_from_other_dcs_are_ignored(self) -> None:
        aggregator = make(dc=0, partition=0, num_dcs=2, num_partitions=2)
        aggregator.handle(VvReport(ServerId(1, 1), (1, 1), (1, 1)), T0)
        assert not any(isinstance(s.message, GsvBroadcast) for s in sends(aggregator.on_timer(T0)))

    def test_gsv_broadcast_from_another_dc_is_ignored(self) -> None:
        server = make(dc=0, partition=1, num_dcs=2, num_partitions=2)
        server.handle(GsvBroadcast(ServerId(1, 0), (5, 5), (5, 5), (5, 5)), T0)
        assert server.gsv == (0, 0) and server.stable == (0, 0) and server.horizon == (0, 0)

    def test_okapi_usv_is_the_min_of_every_dcs_gsv(self) -> None:
        server = make(dc=0, partition=1, num_dcs=3, num_partitions=2)
        server.handle(GsvExchange(ServerId(1, 1), (pack(4), pack(9), pack(9))), T0)
        broadcast = GsvBroadcast(ServerId(0, 0), (pack(8), pack(8), pack(8)), None, (0, 0, 0))
        server.handle(broadcast, T0)
        assert server.stable == (0, 0, 0)  # DC 2's GSV still unknown
        server.handle(GsvExchange(ServerId(2, 1), (pack(6), pack(7), pack(3))), T0)
        server.handle(broadcast, T0)
        assert server.stable == (pack(4), pack(7), pack(3))

    def test_okapi_usv_rises_as_soon_as_a_remote_gsv_arrives(self) -> None:
        """Not at the next GSV broadcast: a stabilization period less before remote updates show."""
        server = make(dc=0, partition=1, num_dcs=2, num_partitions=2)
        server.handle(GsvBroadcast(ServerId(0, 0), (pack(8), pack(8)), None, (0, 0)), T0)
        assert server.stable == (0, 0)  # DC 1's GSV unknown
        server.handle(GsvExchange(ServerId(1, 1), (pack(4), pack(9))), T0)
        assert server.stable == (pack(4), pack(8))
        server.handle(GsvExchange(ServerId(1, 1), (pack(6), pack(9))), T0)
        assert server.stable == (pack(6), pack(8))

    def test_own_dc_gsv_exchange_is_ignored(self) -> None:
        server = make(dc=0, partition=1, num_dcs=2, num_partitions=2)
        server.handle(GsvExchange(ServerId(0, 0), (pack(9), pack(9))), T0)
        server.handle(GsvBroadcast(ServerId(0, 0), (pack(8), pack(8)), None, (0, 0)), T0)
        assert server.stable == (0, 0)

    def test_piggyback_only_aggregators_exchange_and_usv_rides_on_the_broadcast(self) -> None:
        member = make(dc=0, partition=1, num_dcs=2, num_partitions=2, piggyback_usv=True)
        assert [type(s.message) for s in sends(member.on_timer(T0)) if not isinstance(s.message, Heartbeat)] == [
            VvReport
        ]
        aggregator = make(dc=0, partition=0, num_dcs=2, num_partitions=2, piggyback_usv=True)
        aggregator.handle(VvReport(ServerId(0, 1), (pack(T0), pack(3)), (pack(T0), 0)), T0)
        aggregator.handle(GsvExchange(ServerId(1, 0), (pack(2), pack(T0))), T0)
        effects = [s for s in sends(aggregator.on_timer(T0)) if not isinstance(s.message, Heartbeat)]
        kinds = [(s.destination, type(s.message)) for s in effects]
        assert kinds == [(ServerId(1, 0), GsvExchange), (ServerId(0, 1), GsvBroadcast)]
        broadcast = effects[1].message
        assert isinstance(broadcast, GsvBroadcast)
        assert broadcast.gsv == (pack(T0), 0)  # the aggregator itself has heard nothing from DC 1
        assert broadcast.usv == (pack(2), 0)
        member.handle(broadcast, T0)
        assert member.stable == (pack(2), 0)

    @pytest.mark.parametrize("piggyback", [False, True])
    def test_remote_write_becomes_visible_after_stabilization(self, piggyback: bool) -> None:
        mesh = Mesh(2, 2, piggyback_usv=piggyback)
        writer = mesh.servers[ServerId(0, 0)]
        reader = mesh.servers[ServerId(1, 0)]
        mesh.tick(T0)
        mesh.deliver(writer.handle(PutRequest(1, b"k", b"v", session()), T0 + 100), T0 + 100)
        assert reader.store.versions(b"k")  # replicated at once
        [reply] = replies(reader.handle(GetRequest(2, b"k", session()), T0 + 100))
        assert isinstance(reply, GetReply) and reply.value is None
        mesh.run(T0 + 500, T0 + 30_000)
        [reply] = replies(reader.handle(GetRequest(3, b"k", session()), T0 + 30_000))
        assert isinstance(reply, GetReply) and reply.value == b"v"
        assert reply.session.stable[0] >= writer.store.latest(b"k").timestamp  # type: ignore[union-attr]

    @pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain"])
    def test_stable_vector_never_moves_back_in_a_running_cluster(self, protocol: str) -> None:
        mesh = Mesh(3, 2, protocol)
        previous = {sid: server.stable for sid, server in mesh.servers.items()}
        for step, now in enumerate(range(T0, T0 + 40_000, 700)):
            if step % 3 == 0:
                target = mesh.servers[ServerId(step % 3, step % 2)]
                mesh.deliver(target.handle(PutRequest(step, b"k%d" % step, b"v", session(3)), now), now)
            mesh.tick(now)
            for sid, server in mesh.servers.items():
                assert all(new >= old for new, old in zip(server.stable, previous[sid], strict=True))
                previous[sid] = server.stable
        assert all(min(server.stable) > 0 for server in mesh.servers.values())

    def test_eventual_does_not_stabilize(self) -> None:
        server = make(num_dcs=2, protocol="eventual")
        effects = sends(server.on_timer(T0))
        assert all(isinstance(s.message, Heartbeat) for s in effects)
        assert server.stats.stabilization_messages_sent == 0


# ====================================================================== waits


class TestWaits:
    def test_cure_put_parks_until_the_clock_passes_the_dependency(self) -> None:
        server = make(protocol="cure")
        server.on_timer(T0)
        dependency = pack(T0 + 700)
        assert server.handle(PutRequest(1, b"k", b"v", session(dt=dependency)), T0 + 100) == []
        assert server.parked_count == 1
        assert server.next_deadline() == T0 + 701
        assert replies(server.on_timer(T0 + 700)) == []
        effects = server.on_timer(T0 + 701)
        [reply] = replies(effects)
        assert isinstance(reply, WriteReply) and reply.timestamp == pack(T0 + 701)
        assert server.parked_count == 0
        wait = server.stats.waits["put_dependency"]
        assert (wait.count, wait.total_us, wait.max_us) == (1, 601, 601)
        assert server.stats.operations["put"] == 1
        assert any(isinstance(s.message, ReplicateBatch) for s in sends(effects))

    def test_gentlerain_put_waits_on_dt(self) -> None:
        server = make(protocol="gentlerain")
        server.on_timer(T0)
        assert server.handle(PutRequest(1, b"k", b"v", session(dt=pack(T0 + 50))), T0) == []
        assert server.next_deadline() == T0 + 51

    def test_okapi_put_never_waits_on_dependencies(self) -> None:
        server = make()
        ahead = T0 + 400_000  # within the maximum clock offset (500 ms)
        [reply] = replies(server.handle(PutRequest(1, b"k", b"v", session(dt=pack(ahead))), T0))
        assert isinstance(reply, WriteReply) and reply.timestamp == pack(ahead, 1)
        assert server.stats.waits == {}

    def test_okapi_full_logical_counter_carries_instead_of_waiting(self) -> None:
        server = make(num_dcs=1)
        server.on_timer(T0)
        dependency = pack(T0, (1 << 16) - 1)
        [reply] = replies(server.handle(PutRequest(1, b"k", b"v", session(1, dt=dependency)), T0))
        assert isinstance(reply, WriteReply) and reply.timestamp == pack(T0 + 1)
        assert server.parked_count == 0 and server.stats.waits == {}

    def test_cure_slice_waits_for_the_clock_and_okapi_raises_its_clock_instead(self) -> None:
        cure = make(num_dcs=1, protocol="cure")
        cure.on_timer(T0)
        cure.handle(PutRequest(1, b"k", b"v", session(1)), T0 + 1)
        snapshot_time = pack(T0 + 300)
        assert cure.handle(ReadTxRequest(2, (b"k",), session(1, dt=snapshot_time)), T0 + 10) == []
        assert cure.next_deadline() == T0 + 300
        [reply] = replies(cure.on_timer(T0 + 300))
        assert isinstance(reply, ReadTxReply) and reply.values == (b"v",)
        assert cure.stats.waits["tx_clock"].total_us == 290

        okapi = make(num_dcs=1)
        okapi.on_timer(T0)
        okapi.handle(PutRequest(1, b"k", b"v", session(1)), T0 + 1)
        [reply] = replies(okapi.handle(ReadTxRequest(2, (b"k",), session(1, dt=snapshot_time)), T0 + 10))
        assert isinstance(reply, ReadTxReply) and reply.values == (b"v",)
        assert okapi.stats.waits == {}
        assert okapi.hlc >= snapshot_time  # updateClockOnTx
        [later] = replies(okapi.handle(PutRequest(3, b"k", b"w", session(1)), T0 + 11))
        assert isinstance(later, WriteReply) and later.timestamp > snapshot_time

    def test_gentlerain_read_waits_until_gst_covers_dt(self) -> None:
        mesh = Mesh(2, 1, "gentlerain")
        mesh.tick(T0)
        coordinator = mesh.servers[ServerId(0, 0)]
        [written] = replies(coordinator.handle(PutRequest(1, b"k", b"v", session()), T0 + 10))
        assert isinstance(written, WriteReply)
        effects = coordinator.handle(ReadTxRequest(2, (b"k",), session(dt=written.timestamp)), T0 + 20)
        assert effects == [] and coordinator.parked_count == 1
        mesh.run(T0 + 500, T0 + 20_000)
        assert coordinator.parked_count == 0
        [reply] = [r for r in mesh.replies if r.request_id == 2]
        assert isinstance(reply, ReadTxReply) and reply.values == (b"v",)
        assert coordinator.stats.waits["tx_stable"].count == 1

    def test_parked_requests_resume_in_arrival_order(self) -> None:
        server = make(num_dcs=1, protocol="cure")
        server.on_timer(T0)
        for request_id in (1, 2, 3):
            server.handle(PutRequest(request_id, b"k", str(request_id).encode(), session(1, dt=pack(T0 + 5))), T0)
        effects = server.on_timer(T0 + 6)
        got = replies(effects)
        assert [r.request_id for r in got] == [1]  # the others now wait one tick each
        got += replies(server.on_timer(server.next_deadline()))
        got += replies(server.on_timer(server.next_deadline()))
        assert [r.request_id for r in got] == [1, 2, 3]
        stamps = [r.timestamp for r in got]  # type: ignore[union-attr]
        assert stamps == sorted(stamps)

    def test_a_backlog_of_clock_waiting_writes_runs_one_handler_per_microsecond(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        # One write takes the clock's microsecond; the others wait for the next without their
        # handler running again (a backlog of n writes cost n handler runs per microsecond).
        calls: list[object] = []
        counting: list[bool] = []
        on_put = PartitionServer._on_put

        def counted(server: PartitionServer, message: PutRequest, now_us: int) -> object:
            if counting:
                calls.append(message)
            return on_put(server, message, now_us)

        monkeypatch.setattr(PartitionServer, "_on_put", counted)  # registered with the handlers at construction
        server = make(num_dcs=1, protocol="cure")
        server.on_timer(T0)
        for request_id in range(1, 51):
            server.handle(PutRequest(request_id, b"k%d" % request_id, b"v", session(1, dt=pack(T0 + 5))), T0)
        counting.append(True)
        got = replies(server.on_timer(T0 + 6))
        assert [r.request_id for r in got] == [1] and len(calls) == 1
        while server.parked_count:
            got += replies(server.on_timer(server.next_deadline()))
        assert [r.request_id for r in got] == list(range(1, 51))
        assert len(calls) == 50
        assert server.stats.waits["put_dependency"].count == 50


# ====================================================================== GC and snapshot horizon


class TestGarbageCollection:
    def test_gc_removes_overwritten_versions_once_the_horizon_passes(self) -> None:
        server = make(num_dcs=1, gc_interval_us=1_000)
        for i in range(5):
            server.handle(PutRequest(i, b"k", str(i).encode(), session(1)), T0 + i)
        server.handle(DeleteRequest(9, b"gone", session(1)), T0 + 10)
        assert server.store.version_count == 6
        for now in range(T0 + 1_000, T0 + 20_001, 1_000):
            server.on_timer(now)
        assert [v.value for v in server.store.versions(b"k")] == [b"4"]
        assert server.store.versions(b"gone") == []
        assert server.store.collected_count == 5

    def test_each_gc_interval_budget_is_spent_in_slices(self) -> None:
        """GC_SLICES slices of budget / GC_SLICES keys, one every interval / GC_SLICES: as many keys
        a second as one pass per interval, without one long stall per interval."""
        from okapikv.core.gc import GC_SLICES

        server = make(num_dcs=1, gc_interval_us=10_000, gc_budget=20)
        assert GC_SLICES == 10
        for i in range(30):
            key = f"k{i}".encode()
            server.handle(PutRequest(2 * i, key, b"old", session(1)), T0 + 2 * i)
            server.handle(PutRequest(2 * i + 1, key, b"new", session(1)), T0 + 2 * i + 1)
        server.on_timer(T0 + 5_000)  # the horizon moves past the writes (no key examined yet: none due)
        collected = server.store.collected_count
        now = T0 + 10_000
        while server.store.collected_count < 30:
            assert server.next_deadline() <= now
            server.on_timer(now)
            assert server.store.collected_count - collected <= 2  # ceil(20 / 10) keys per slice
            collected = server.store.collected_count
            now += 1_000
        assert now - (T0 + 10_000) <= 15 * 1_000 + 1_000

    def test_a_gc_interval_examines_each_queued_key_at_most_once_however_it_is_sliced(self) -> None:
        """A short queue of keys not yet collectable is examined once per interval, not once per
        slice (that cost RO-TX + PUT ~15% of its throughput)."""
        examined: list[int] = []

        class Counting(MultiVersionStore):
            """Notes each budget the collector gives, once counting, and collects nothing."""

            def collect_some(self, universally_visible: VisibilityPredicate, budget: int, *,
                             tombstone_removable: VisibilityPredicate | None = None,
                             expired: VisibilityPredicate | None = None) -> int:
                examined.append(budget)
                return 0

        config = CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1, gc_interval_us=10_000, gc_budget=2_000)
        server = PartitionServer(config, store=Counting(merged=counters.collectable))
        for i in range(5):
            server.handle(PutRequest(2 * i, b"k%d" % i, b"old", session(1)), T0)
            server.handle(PutRequest(2 * i + 1, b"k%d" % i, b"new", session(1)), T0)
        examined.clear()  # the budgets of the writes' own timers, before the intervals below
        for now in range(T0 + 10_000, T0 + 40_000, 1_000):  # three intervals, ten slices each
            server.on_timer(now)
        assert sum(examined) == 3 * 5 and max(examined) == 1

    def test_slice_below_the_horizon_is_refused_and_the_coordinator_retries(self) -> None:
        coordinator = make(num_dcs=1, partition=0, num_partitions=2)
        other = make(num_dcs=1, partition=1, num_partitions=2)
        other.advance_horizon((pack(T0 + 1_000),))
        # A stale slice (snapshot below the horizon) is answered too_old.
        [send] = sends(other.handle(TxSlice(ServerId(0, 0), 7, (pack(T0),), (b"k",)), T0 + 2_000))
        assert send.message == SliceReply(ServerId(0, 1), 7, (), True)
        # A coordinator that receives too_old starts the read again with a fresh snapshot.
        effects = coordinator.handle(ScanRequest(1, b"a", b"z", None, session(1)), T0)
        [slice_send] = sends(effects)
        assert isinstance(slice_send.message, type(slice_send.message))
        tx_id = slice_send.message.tx_id  # type: ignore[union-attr]
        retry = coordinator.handle(SliceReply(ServerId(0, 1), tx_id, (), True), T0 + 2_000)
        assert coordinator.stats.snapshot_retries == 1
        assert sends(retry) == []  # the retry runs from the timer, never recursively
        assert coordinator.next_deadline() <= T0 + 2_001
        [again] = sends(coordinator.on_timer(T0 + 2_001))
        assert again.message.tx_id != tx_id  # type: ignore[union-attr]
        assert again.message.snapshot == (pack(T0 + 2_001),)  # type: ignore[union-attr]
        # A late reply of the abandoned attempt is ignored.
        assert coordinator.handle(SliceReply(ServerId(0, 1), tx_id, (), False), T0 + 2_001) == []
        reply = coordinator.handle(SliceReply(ServerId(0, 1), again.message.tx_id, (), False), T0 + 2_001)  # type: ignore[union-attr]
        assert len(replies(reply)) == 1
        assert coordinator.pending_reads == 0

    @pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain"])
    def test_horizon_never_exceeds_a_snapshot_the_dc_may_still_take(self, protocol: str) -> None:
        # Both partitions serve a slice of a fresher snapshot than their own stable vector (the
        # coordinator heard the newest GSV first), then stabilize. The horizon built from their
        # floors must stay below the snapshots they coordinate next. Exposed a core bug: GentleRain
        # reported its whole stable vector as its floor although its snapshots use only its minimum
        # (the GST), so every slice came back too_old and the coordinator retried forever
        # (RecursionError when the coordinator's own slice was refused).
        mesh = Mesh(2, 2, protocol)
        fresh = (pack(9), pack(9))
        for partition in (0, 1):
            server = mesh.servers[ServerId(0, partition)]
            server.handle(TxSlice(ServerId(0, 1 - partition), 1, fresh, (b"k",)), T0)
        for partition in (1, 0):  # the aggregator last, so it has every report
            server = mesh.servers[ServerId(0, partition)]
            mesh.deliver([s for s in server.on_timer(T0 + 100) if s.destination.dc == 0], T0 + 100)  # type: ignore[union-attr]
        coordinator = mesh.servers[ServerId(0, 0)]
        mesh.deliver(coordinator.handle(ScanRequest(5, b"a", b"z", None, session()), T0 + 200), T0 + 200)
        assert [r.request_id for r in mesh.replies] == [5]
        assert coordinator.stats.snapshot_retries == 0

    @pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain", "eventual"])
    def test_collected_tombstone_does_not_let_a_late_older_write_resurrect_the_key(self, protocol: str) -> None:
        # DC 1 writes k (older timestamp) while DC 0 deletes it (newer timestamp); DC 1's update is
        # still in flight when DC 0 collects garbage. Last-writer-wins says k is deleted everywhere.
        # Exposed a core bug: DC 0 used to drop its universally visible tombstone (and the key),
        # so the late older write then became the newest version there and the DCs diverged.
        mesh = Mesh(2, 1, protocol, gc_interval_us=1_000)
        dc0, dc1 = mesh.servers[ServerId(0, 0)], mesh.servers[ServerId(1, 0)]
        mesh.hold = lambda send: send.destination.dc == 0 and send.message.source.dc == 1  # type: ignore[union-attr]
        mesh.deliver(dc1.handle(PutRequest(1, b"k", b"from dc1", session()), T0 + 90), T0 + 90)
        mesh.deliver(dc0.handle(PutRequest(2, b"k", b"from dc0", session()), T0 + 95), T0 + 95)
        mesh.deliver(dc0.handle(DeleteRequest(3, b"k", session()), T0 + 100), T0 + 100)
        mesh.run(T0 + 500, T0 + 100_000, 1_000)
        mesh.hold = lambda send: False
        mesh.release(T0 + 100_500)
        mesh.run(T0 + 101_000, T0 + 200_000, 1_000)
        for server in (dc0, dc1):
            [reply] = replies(server.handle(GetRequest(9, b"k", session()), T0 + 200_000))
            assert isinstance(reply, GetReply)
            assert reply.value is None, f"DC {server.dc} resurrected the key"
        # ... and once every DC is past the tombstone, it is collected everywhere.
        assert dc0.store.versions(b"k") == [] and dc1.store.versions(b"k") == []
