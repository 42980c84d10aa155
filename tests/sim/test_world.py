"""The simulator's world in its deterministic mode (``World.fixed``) and the ``Caller`` that drives it."""

from __future__ import annotations

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    ErrorReply,
    GetReply,
    GetRequest,
    Heartbeat,
    Message,
    PutRequest,
    ReplicateBatch,
    ServerId,
    Session,
    WriteReply,
)
from okapikv.core.server import PartitionServer, Repair
from okapikv.core.timestamps import pack, physical_of
from okapikv.sim.caller import Caller
from okapikv.sim.events import DELIVER, REPLY, TIMER
from okapikv.sim.world import START_US, World

MS = 1_000


def fresh(num_dcs: int = 2) -> Session:
    return Session((0,) * num_dcs, 0)


def deliveries(world: World, kind: type | None = None) -> list[tuple[int, int, Message]]:
    """(time, destination, message) of the messages on their way, in order (of ``kind`` if given)."""
    return [(at, target, payload) for at, _, event, target, payload in world.scheduled(DELIVER)  # type: ignore[misc]
            if kind is None or isinstance(payload, kind)]


def test_delays_are_fixed_and_exact() -> None:
    world = World.fixed(2, 2, wan_us=30 * MS, lan_us=300, link_extra_us={(ServerId(0, 1), ServerId(1, 1)): 7 * MS})
    for partition, key in ((0, b"d"), (1, b"b")):  # each key at its own partition
        world.deliver(partition, PutRequest(partition + 1, key, b"v", fresh()), client=0)
    batches = deliveries(world, ReplicateBatch)
    assert [(at - START_US, target) for at, target, _ in batches] == [(30 * MS, 2), (37 * MS, 3)]


def test_deliver_handles_a_message_now_and_carries_out_its_effects() -> None:
    world = World.fixed(2, 1)
    world.deliver(0, PutRequest(1, b"k", b"v", fresh()), client=0)
    assert world.now == START_US and world.servers[0].store.versions(b"k")
    [(at, _, _, client, reply)] = world.scheduled(REPLY)
    assert (at, client) == (START_US, 0) and isinstance(reply, WriteReply)
    assert [type(message) for _, _, message in deliveries(world)] == [ReplicateBatch]
    with pytest.raises(AssertionError, match="answered request 2 again"):  # no client waits for it
        world.deliver(0, PutRequest(2, b"k", b"v", fresh()))


def test_step_runs_one_instant_advance_moves_time_tick_goes_to_the_next_timer() -> None:
    world = World.fixed(2, 1, wan_us=10 * MS)
    first = world.scheduled(TIMER)[0][0]
    assert world.step() and world.now == first and world.scheduled(TIMER, 0)[0][0] != first
    world.advance(123)
    assert world.now == first + 123
    at = min(world.timer_at)
    world.tick()
    assert world.now == at and min(world.timer_at) > at
    assert not world.step(until_us=world.now)  # nothing is due now any more


def test_the_same_driving_gives_the_same_world() -> None:
    def drive() -> list[object]:
        world = World.fixed(3, 2, "cure", skew_us={ServerId(1, 0): 3 * MS})
        caller = Caller(world, 1)
        world.advance(20 * MS)
        caller.put(b"x", b"1")
        world.advance(50 * MS)
        return [world.now, caller.last_latency_us, [s.vv for s in world.servers], sorted(world.heap)]

    assert drive() == drive()


def test_clocks_are_off_by_the_fixed_skew() -> None:
    world = World.fixed(1, 2, skew_us={ServerId(0, 1): 5 * MS})
    assert world.read_clock(0) == world.now and world.read_clock(1) == world.now + 5 * MS


def test_a_caller_waits_for_its_reply_merges_its_session_and_measures_the_latency() -> None:
    world = World.fixed(2, 2, client_us=100, lan_us=300)
    caller = Caller(world, 0)
    written = caller.put(b"k", b"v")
    assert isinstance(written, WriteReply) and caller.session.current.dt == written.timestamp
    assert caller.last_latency_us == 200  # to the server and back: no wait
    read = caller.read_tx([b"k", b"other"], coordinator=caller.owner(b"k").id.partition ^ 1)
    assert caller.last_latency_us == 200 + 2 * 300  # plus a slice to the other partition and back
    assert read.values == (b"v", None)  # type: ignore[union-attr]
    assert world.clients.replies == {}  # type: ignore[attr-defined]


def test_a_caller_returns_a_refusal_and_times_out_on_a_silent_server() -> None:
    world = World.fixed(1, 1)
    caller = Caller(world, 0, limit_us=50 * MS)
    refused = caller.get(b"")
    assert isinstance(refused, ErrorReply) and refused.code == "INVALID_ARGUMENT"
    world.pause(0)
    with pytest.raises(TimeoutError):
        caller.get(b"k")
    simulated = World.fixed(1, 1)
    simulated.clients = object()  # type: ignore[assignment]  # a simulation's clients, not a Mailbox
    with pytest.raises(ValueError, match="deterministic world"):
        Caller(simulated)


def test_a_paused_server_queues_its_messages_and_handles_them_in_order_on_resume() -> None:
    world = World.fixed(1, 2, lan_us=100)
    world.pause(1)
    world.submit(1, PutRequest(1, b"a", b"1", fresh(1)), 0)
    world.submit(1, PutRequest(2, b"a", b"2", fresh(1)), 0)
    world.advance(10 * MS)
    assert [type(m) for m in world.inbox[1]] == [PutRequest, PutRequest] and not list(world.servers[1].store.keys())
    world.resume(1)
    assert world.inbox[1] == [] and [v.value for v in world.servers[1].store.versions(b"a")] == [b"1", b"2"]


def test_a_busy_server_handles_what_arrives_as_its_backlog_ends_after_the_backlog() -> None:
    """FIFO per server: a message arriving at the very instant the server finishes the one before
    is handled after it, although its delivery was scheduled first (a heartbeat overtook a
    replication batch this way: the large-scans sweep, seed 8)."""
    world = World.fixed(1, 1)
    world.work_us = lambda target, message: 5 * MS if getattr(message, "value", None) == b"1" else 0
    world.pending[1] = world.pending[2] = 0
    world.send_request(0, PutRequest(2, b"a", b"2", fresh(1)), after_us=5 * MS)  # arrives as the first ends
    world.send_request(0, PutRequest(1, b"a", b"1", fresh(1)), after_us=0)
    world.advance(10 * MS)
    assert [v.value for v in world.servers[0].store.versions(b"a")] == [b"1", b"2"]


def test_a_crash_keeps_what_peers_sent_and_loses_the_requests_and_the_restart_catches_up() -> None:
    world = World.fixed(2, 1, wan_us=10 * MS)
    caller = Caller(world, 0)
    world.advance(20 * MS)
    caller.put(b"k", b"v")
    old = world.servers[1]
    world.advance(5 * MS)  # DC 0's batch is on its way to DC 1 (10 ms)
    world.crash(1)
    assert world.down[1] and not deliveries(world, ReplicateBatch)
    [kept] = [message for message in world.network.unacked[1][0] if isinstance(message, ReplicateBatch)]
    world.submit(1, GetRequest(99, b"k", fresh()), 0)
    world.advance(1 * MS)
    assert world.clients.lost_requests == 1  # type: ignore[attr-defined]
    new = world.restart(1)
    assert new is world.servers[1] is not old and world.retired == [old] and not world.down[1]
    assert physical_of(new.hlc) >= physical_of(old.hlc) and new.catching_up == (0,)
    assert world.network.unacked[1] == {} and deliveries(world, ReplicateBatch)[0][2] is kept
    world.advance(100 * MS)
    reply = Caller(world, 1).get(b"k")
    assert isinstance(reply, GetReply) and reply.value == b"v" and new.catching_up == ()


def test_a_restart_with_a_repair_starts_empty_and_repairs_from_the_replicas() -> None:
    world = World.fixed(2, 1, wan_us=10 * MS)
    Caller(world, 0).put(b"mine", b"1")
    world.advance(100 * MS)
    world.crash(0)
    repaired = world.restart(0, repair=Repair(), clock_step_us=-3 * MS)
    assert repaired.repairing == "fetching" and not repaired.store.versions(b"mine")
    assert world.read_clock(0) == world.now - 3 * MS
    world.run_until(lambda: repaired.repairing is None)
    assert [v.value for v in repaired.store.versions(b"mine")] == [b"1"]


def test_a_restart_may_take_a_server_the_caller_restored() -> None:
    world = World.fixed(1, 1)
    Caller(world, 0).put(b"k", b"v")
    world.crash(0)
    mine = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1))
    mine.restore((), vv=(pack(world.now),), stable=(0,), gsv=(0,), horizon=(0,), hlc_floor=pack(world.now))
    assert world.restart(0, server=mine) is mine and not mine.store.versions(b"k")


def test_links_between_dcs_only_take_extra_delays() -> None:
    with pytest.raises(ValueError, match="inside a DC"):
        World.fixed(1, 2, link_extra_us={(ServerId(0, 0), ServerId(0, 1)): 1})


def test_a_cut_link_holds_the_heartbeats_until_the_repair() -> None:
    world = World.fixed(2, 1, wan_us=5 * MS)
    world.network.cut_link(0, 1)
    world.advance(50 * MS)
    assert all(isinstance(m, Heartbeat) for m in world.network.held[1]) and world.network.held[1]
    world.network.repair_link(0, 1)
    assert not world.network.held
    world.advance(10 * MS)
    assert world.servers[1].vv[0] > 0
