"""Links that go silent in the simulator (``okapikv.sim.silent``): a directed replication link
between two DCs that carries nothing and does not close. The link's liveness check (the model of
``okapikv.server.liveness``) declares the connection dead after the ack timeout, reconnects with
backoff once the fault is over and resends what it kept, in order, so replication and remote
visibility resume within a bound; without the check the link never carries again, which the sweep
catches (liveness, quiescence, convergence).
"""

from __future__ import annotations

import random
from dataclasses import replace

from okapikv.check.report import check_history
from okapikv.core.messages import Heartbeat, ReplicateBatch
from okapikv.sim import SimConfig, Simulation, reproduce_command
from okapikv.sim.config import FaultPlan
from okapikv.sim.events import DELIVER
from okapikv.sim.nemesis import Nemesis
from okapikv.sim.world import World

MS = 1_000
PLAN = FaultPlan()  # probe 50 ms, ack timeout 200 ms, backoff 50 ms doubling to 1 s
SWEEP = SimConfig(num_partitions=2, num_clients=4, duration_s=0.4, faults=True, clock_skew_ms=10,
                  silent_links=True, liveness_s=0.25, converge_timeout_s=1.0)


def silenced(length_ms: int, *, detect: bool = True) -> tuple[World, Nemesis]:
    """2 DCs x 1 partition, server 0's link to server 1 silent for ``length_ms`` from now."""
    world = World.fixed(2, 1)
    nemesis = Nemesis(world, PLAN, random.Random(1))
    nemesis.links.detect = detect
    world.advance(20 * MS)
    nemesis.silent_link(0, 1, length_ms * MS)
    return world, nemesis


def arriving_from_dc0(world: World) -> list[object]:
    return [event[4] for event in world.heap if event[2] == DELIVER and event[3] == 1
            and isinstance(event[4], Heartbeat | ReplicateBatch) and event[4].source.dc == 0]


def test_a_silent_link_carries_again_once_found_dead_and_reconnected_after_the_fault() -> None:
    world, nemesis = silenced(300)
    start = world.now
    world.advance(25 * MS)  # what was on the wire before (20 ms away) has arrived
    stalled = world.servers[1].vv[0]
    world.advance(274 * MS)  # still within the fault: dead at ~200 ms, a reconnect at ~250 ms failed
    assert world.servers[1].vv[0] == stalled and not arriving_from_dc0(world)
    counts = nemesis.links.counts
    assert counts.dead == 1 and counts.failed_attempts >= 1
    # The fault ends at 300 ms; the next reconnect (at ~350 ms) succeeds and resends, in order.
    world.run_until(lambda: world.servers[1].vv[0] > stalled, limit_us=200 * MS)
    assert world.now - start <= 350 * MS + 20_000 + 1 * MS  # the reconnect, plus the WAN delay
    assert counts.resent > 200  # heartbeats every ms, all of them kept
    assert not nemesis.links.links
    texts = [record.description for record in world.faults]
    assert texts[0] == "silent link dc0/p0->dc1/p0 for 300 ms"
    assert any(text.startswith("link dc0/p0->dc1/p0 dead: no answer for 200 ms") for text in texts)
    assert any(text.startswith("link dc0/p0->dc1/p0 reconnected, resending") for text in texts)


def test_a_short_silence_still_waits_for_the_check_the_old_connection_never_recovers() -> None:
    world, nemesis = silenced(20)
    world.advance(25 * MS)
    stalled = world.servers[1].vv[0]
    world.advance(125 * MS)  # the fault is long over, the connection still silent
    assert world.servers[1].vv[0] == stalled and nemesis.links.counts.dead == 0
    world.run_until(lambda: world.servers[1].vv[0] > stalled, limit_us=150 * MS)  # dead at 200, back at 250
    assert nemesis.links.counts.dead == 1 and nemesis.links.counts.failed_attempts == 0


def test_without_the_liveness_check_a_silent_link_never_carries_again() -> None:
    world, nemesis = silenced(50, detect=False)
    world.advance(25 * MS)
    stalled = world.servers[1].vv[0]
    world.advance(3_000 * MS)
    assert world.servers[1].vv[0] == stalled and nemesis.links.counts.dead == 0
    assert not world.network.quiet()  # what the link keeps: never quiescent


def test_a_crash_of_the_sender_loses_what_its_silent_link_kept_and_the_restart_catches_up() -> None:
    world, nemesis = silenced(100)
    world.advance(30 * MS)
    assert nemesis.links.holding()
    world.crash(0)
    assert not nemesis.links.holding() and world.network.replication_inflight == 0
    world.advance(200 * MS)  # the fault is over: the new incarnation connects afresh
    world.restart(0)
    stalled = world.servers[1].vv[0]
    world.run_until(lambda: world.servers[1].vv[0] > stalled, limit_us=100 * MS)
    assert not nemesis.links.links


def test_the_sweep_with_silent_links_stays_live_and_catches_links_without_the_check() -> None:
    """The same seeds: with the liveness check every run passes every checker (liveness after the
    heal included) and quiesces; without it a run with a silent link never quiesces."""
    caught = []
    for seed in range(1, 5):
        config = SWEEP.with_seed(seed)
        outcomes = {}
        for detect in (True, False):
            simulation = Simulation(config)
            simulation.nemesis.links.detect = detect
            result = simulation.run()
            assert result.history is not None
            names = {a.name for a in result.anomalies} | {a.name for a in check_history(result.history).anomalies}
            outcomes[detect] = (simulation.nemesis.links.counts, names)
        (counts, names), (_, broken) = outcomes[True], outcomes[False]
        assert not names, (reproduce_command(config), names)
        assert counts.dead == counts.silenced
        if counts.silenced:
            assert "NotQuiescent" in broken and "Divergence" in broken, broken
            caught.append(seed)
    assert len(caught) >= 2, f"silent links drawn only in seeds {caught}"


def test_the_schedule_draws_silent_links_only_when_asked_and_the_reproduction_names_them() -> None:
    def described(config: SimConfig) -> list[str]:
        texts: list[str] = []
        for seed in range(1, 5):
            texts += [f.description for f in Simulation(config.with_seed(seed)).run().faults]
        return texts

    quick = replace(SWEEP, num_clients=2, record=False, liveness_s=0.0)
    assert any(text.startswith("silent link") for text in described(quick))
    assert not any(text.startswith("silent link") for text in described(replace(quick, silent_links=False)))
    assert "--silent-links" in reproduce_command(SWEEP)
