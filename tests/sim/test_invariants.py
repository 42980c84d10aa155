"""The simulator's own invariant checks (``okapikv.sim.invariants``), each caught on a world that
breaks it on purpose (the whole-run cases are in ``test_engine`` and ``test_broken``)."""

from __future__ import annotations

from okapikv.core.messages import Effect, GetRequest, Heartbeat, Message, PutRequest, ServerId, Session
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack, physical_of
from okapikv.sim.caller import Caller
from okapikv.sim.invariants import DRAG_SLACK_US, MAX_REPORTS, Invariants
from okapikv.sim.world import ServerFactory, World

MS = 1_000
OFFSET_US = 500 * MS


def watched(num_dcs: int = 2, factory: ServerFactory = PartitionServer, *, checking: bool = True
            ) -> tuple[World, Invariants]:
    world = World.fixed(num_dcs, 1, wan_us=10 * MS, server_factory=factory)
    invariants = Invariants(world, max_clock_offset_us=OFFSET_US, checking=checking)
    world.watch(invariants)
    return world, invariants


def names(invariants: Invariants) -> list[str]:
    return [anomaly.name for anomaly in invariants.anomalies]


def test_a_correct_world_reports_nothing() -> None:
    world, invariants = watched(3)
    for dc in range(3):
        Caller(world, dc).put(b"k%d" % dc, b"v")
    world.advance(200 * MS)
    invariants.check_stability()
    assert invariants.anomalies == []


def test_a_heartbeat_that_covers_an_update_still_in_flight_breaks_the_replication_promise() -> None:
    world, invariants = watched()
    Caller(world, 0).put(b"k", b"v")  # its batch is on its way to DC 1 for 10 ms
    [first] = world.network.inflight[1]
    world.deliver(1, Heartbeat(ServerId(0, 0), first))  # overtakes it
    assert names(invariants) == ["ReplicationPromise"]
    assert "overtook the update" in invariants.anomalies[0].explanation


def test_an_answer_to_a_request_nobody_waits_for_is_a_duplicate() -> None:
    world, invariants = watched(checking=False)  # reported even without the per-call checks
    world.deliver(0, GetRequest(7, b"k", Session((0, 0), 0)))
    assert names(invariants) == ["DuplicateRequest"] and "request 7 again" in invariants.anomalies[0].explanation


class Dragging(PartitionServer):
    """Takes its HLC a second ahead of its clock on every write (as a timestamp from elsewhere would)."""

    def handle(self, message: Message, now_us: int) -> list[Effect]:
        effects = super().handle(message, now_us)
        if isinstance(message, PutRequest):
            self.vv[self.dc] = pack(now_us + 1_000 * MS)
        return effects


def test_an_hlc_dragged_past_the_maximum_offset_is_reported_once() -> None:
    world, invariants = watched(factory=Dragging)
    caller = Caller(world, 0)
    caller.put(b"a", b"1")
    caller.put(b"b", b"2")
    assert names(invariants) == ["ClockDragged"] and "ahead of its clock" in invariants.anomalies[0].explanation


def test_a_restart_floor_above_the_clock_is_no_drag() -> None:
    world, invariants = watched()
    world.advance(10 * MS)
    world.crash(0)
    old = world.servers[0]
    world.restart(0, clock_step_us=-2 * OFFSET_US)  # restored above the old clock: its HLC is ahead
    assert invariants.floors[0] == physical_of(old.hlc + 1) + DRAG_SLACK_US
    world.advance(50 * MS)
    assert physical_of(world.servers[0].hlc) > world.read_clock(0) + OFFSET_US and invariants.anomalies == []


def test_a_stable_vector_that_moves_back_or_runs_ahead_is_reported() -> None:
    world, invariants = watched()
    world.advance(50 * MS)
    server = world.servers[1]
    invariants.stable_changed(1, tuple(entry + 1 for entry in server.stable))
    server.advance_stable((server.vv[0] + 1, server.stable[1]))
    invariants.check_stability()
    assert names(invariants) == ["StableRegressed", "StabilityInvariant"]


def test_reports_are_capped() -> None:
    world, invariants = watched(checking=False)
    for request_id in range(MAX_REPORTS + 5):
        world.deliver(0, GetRequest(request_id, b"k", Session((0, 0), 0)))
    assert len(invariants.anomalies) == MAX_REPORTS and invariants.reports == MAX_REPORTS + 5

