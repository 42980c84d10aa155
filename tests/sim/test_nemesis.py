"""The nemesis (``okapikv.sim.nemesis``): the fault schedule, each fault and its repair, the heal."""

from __future__ import annotations

import random
from dataclasses import replace

from okapikv.core.messages import ServerId
from okapikv.sim.caller import Caller
from okapikv.sim.config import FaultPlan
from okapikv.sim.events import CONTROL
from okapikv.sim.nemesis import Nemesis
from okapikv.sim.world import World

MS = 1_000


def nemesis(world: World, plan: FaultPlan | None = None, seed: int = 1, *, jumps: bool = False) -> Nemesis:
    return Nemesis(world, plan or FaultPlan(), random.Random(seed), clock_jumps=jumps)


def notes(world: World) -> list[str]:
    return [record.description for record in world.faults]


def test_the_schedule_is_a_function_of_the_seed_and_stays_in_the_fault_phase() -> None:
    def schedule(seed: int) -> list[int]:
        world = World.fixed(3, 2)
        nemesis(world, seed=seed).schedule(world.now, world.now + 2_000 * MS)
        return [at for at, _, _, _, _ in world.scheduled(CONTROL)]

    first = schedule(1)
    assert first == schedule(1) and first != schedule(2)
    assert len(first) > 5 and all(0 < at - World.fixed(1, 1).now < 2_000 * MS for at in first)


def test_the_drawn_faults_follow_the_plans_kinds() -> None:
    world = World.fixed(3, 2)
    only_slow = replace(FaultPlan(), kinds=(("slow", 1.0), ("crash", 0.0)))
    nemesis(world, only_slow).schedule(world.now, world.now + 3_000 * MS)
    world.advance(3_000 * MS)
    injected = [text for text in notes(world) if not text.startswith("recover")]
    assert injected and all(text.startswith("slow ") for text in injected)


def test_with_one_dc_partitions_become_crashes() -> None:
    world = World.fixed(1, 2)
    partitions_only = replace(FaultPlan(), kinds=(("partition_dc", 1.0), ("partition_link", 1.0)))
    nemesis(world, partitions_only).schedule(world.now, world.now + 1_000 * MS)
    world.advance(1_000 * MS)
    assert notes(world) and all(text.startswith(("crash", "restart")) for text in notes(world))


def test_each_fault_is_undone_after_its_length_once_even_if_the_heal_comes_later() -> None:
    world = World.fixed(3, 2)
    chaos = nemesis(world)
    chaos.partition_dc(1, 10 * MS)
    chaos.partition_link(0, 2, 10 * MS)
    chaos.pause(0, 10 * MS)
    chaos.slow(3, 10 * MS, 500)
    chaos.crash(5, 10 * MS)
    assert world.network.dc_down[1] and world.paused[0] and world.service_us[3] == 500 and world.down[5]
    world.advance(11 * MS)
    chaos.heal()
    assert world.network.dc_down == [0, 0, 0] and not any(world.network.pair_down.values())
    assert not any(world.paused) and not any(world.down) and world.service_us == [0] * 6
    assert notes(world) == [
        "partition dc1 for 10 ms", "partition link dc0-dc2 for 10 ms", "pause dc0/p0 for 10 ms",
        "slow dc1/p1 (+500 us per message) for 10 ms", "crash dc2/p1 for 10 ms",
        "repair dc1", "repair link dc0-dc2", "resume dc0/p0", "recover dc1/p1", "restart dc2/p1"]


def test_the_heal_repairs_everything_still_in_force_and_no_fault_strikes_after_it() -> None:
    world = World.fixed(3, 2)
    chaos = nemesis(world)
    chaos.partition_link(0, 1, 1_000 * MS)
    chaos.crash(2, 1_000 * MS, clock_step_us=-60_000 * MS)
    world.advance(5 * MS)
    chaos.heal()
    assert not any(world.network.pair_down.values()) and not any(world.down) and chaos.undo == []
    assert world.read_clock(2) == world.now  # restarted after the heal: with its clock right
    chaos.crash(1, 10 * MS)
    chaos.partition_dc(0, 10 * MS)
    chaos.clock_step(0, 5 * MS)
    assert not any(world.down) and world.network.dc_down == [0, 0, 0] and world.read_clock(0) == world.now
    world.advance(2_000 * MS)  # the timed repairs already ran at the heal: nothing happens twice
    assert notes(world)[-2:] == ["repair link dc0-dc1", "restart dc1/p0"]


def test_a_clock_stepped_back_at_a_restart_is_fixed_at_the_heal() -> None:
    world = World.fixed(2, 1)
    chaos = nemesis(world)
    chaos.crash(0, 10 * MS, clock_step_us=-60_000 * MS)
    world.advance(20 * MS)
    assert world.read_clock(0) == world.now - 60_000 * MS
    chaos.heal()
    assert world.read_clock(0) == world.now and notes(world)[-1] == "fix clock dc0/p0 +60 s"


def test_a_lost_disk_is_repaired_only_when_a_replica_holds_every_version_it_wrote() -> None:
    world = World.fixed(2, 1, wan_us=10 * MS)
    Caller(world, 0).put(b"replicated", b"1")
    world.advance(100 * MS)
    chaos = nemesis(world)
    chaos.crash(0, 5 * MS, lose_disk=True)
    world.advance(10 * MS)
    assert notes(world)[-1] == "restart dc0/p0 on an empty disk, repairing" and world.servers[0].repairing
    world.advance(500 * MS)
    world.network.cut_link(0, 1)
    Caller(world, 0).put(b"stranded", b"2")  # reaches no replica
    chaos.crash(0, 5 * MS, lose_disk=True)
    world.advance(10 * MS)
    assert notes(world)[-1] == "restart dc0/p0"  # a repair would lose it: the disk survives
    assert [v.value for v in world.server(ServerId(0, 0)).store.versions(b"stranded")] == [b"2"]


def test_a_paused_or_crashed_server_takes_no_second_fault() -> None:
    world = World.fixed(1, 2)
    chaos = nemesis(world)
    chaos.pause(0, 10 * MS)
    chaos.crash(0, 10 * MS)
    chaos.pause(0, 10 * MS)
    assert notes(world) == ["pause dc0/p0 for 10 ms"] and not world.down[0]
