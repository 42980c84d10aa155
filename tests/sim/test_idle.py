"""Idle pacing on the simulator (``okapikv.core.pacing``; docs/protocol.md, "Idle pacing"): after long
idle spells the first update is visible in every other DC within the UST path plus three
stabilization periods, the bound the benchmarks hold Okapi to under load, and the checkers pass. A
variant that backs off but does not snap back is caught by the same bound."""

from __future__ import annotations

import pytest

from okapikv.check.report import check_history
from okapikv.cluster.config import DEFAULT_IDLE_AFTER_MS, DEFAULT_IDLE_INTERVAL_MS
from okapikv.core.config import CoreConfig
from okapikv.core.deployment import PAPER_WAN_MS
from okapikv.core.messages import Effect, ServerId, WriteReply
from okapikv.core.server import PartitionServer
from okapikv.sim import SimConfig, Simulation
from okapikv.sim.caller import Caller
from okapikv.sim.world import World

MS = 1_000
PERIOD_US = 5 * MS  # the stabilization period (CoreConfig's default)
IDLE = {"idle_after_us": round(DEFAULT_IDLE_AFTER_MS * MS), "idle_interval_us": round(DEFAULT_IDLE_INTERVAL_MS * MS)}
WAN_US = [[round(ms * MS) for ms in row] for row in PAPER_WAN_MS]


def ust_bound_us(source: int, destination: int) -> int:
    """The UST path from ``source`` to ``destination`` (through the DC that makes it longest) plus
    three stabilization periods (``benchmarks.suites.acceptance``)."""
    path = max(WAN_US[source][k] + WAN_US[k][destination] for k in range(len(WAN_US)))
    return path + 3 * PERIOD_US


class NoSnapBack(PartitionServer):
    """Backs off when idle but does not snap back: activity ends the idle spell, yet nothing falls
    due sooner than the next idle tick and the DC's other partitions are not told."""

    def _wake(self, now_us: int, effects: list[Effect], *, tell: bool) -> None:
        self.pacing.activity(now_us)


def first_update_after_idle(factory: type[PartitionServer] = PartitionServer,
                            idle: dict[str, int] = IDLE) -> tuple[World, dict[int, int]]:
    """3 DCs (the paper's WAN) x 2 partitions, idle for 10 s (the cluster defaults unless ``idle``),
    then one PUT at DC 0: how long until each other DC's replica of its partition sees it (its
    stable vector covers it)."""
    world = World.fixed(3, 2, wan_us=WAN_US, server_factory=factory, **idle)
    world.advance(10_000_000)
    assert all(server.pacing.idle for server in world.servers)
    caller = Caller(world, 0)
    reply = caller.put(b"k", b"v")
    assert isinstance(reply, WriteReply)
    written = world.now
    partition = caller.owner(b"k").id.partition
    seen: dict[int, int] = {}

    def visible() -> bool:
        for dc in (1, 2):
            server = world.server(ServerId(dc, partition))
            if dc not in seen and server.stable[0] >= reply.timestamp:
                seen[dc] = world.now - written
        return len(seen) == 2

    world.run_until(visible, limit_us=10_000_000)
    return world, seen


@pytest.mark.parametrize("interval_ms", [200, DEFAULT_IDLE_INTERVAL_MS, 4_000])
def test_the_first_update_after_ten_idle_seconds_is_visible_within_the_ust_bound(interval_ms: float) -> None:
    # whatever the idle period: the snap-back, not the next idle tick, makes the update visible
    world, seen = first_update_after_idle(idle={**IDLE, "idle_interval_us": round(interval_ms * MS)})
    for dc, took_us in seen.items():
        assert took_us <= ust_bound_us(0, dc), (dc, took_us, ust_bound_us(0, dc))
    assert all(server.stats.idle_wakes == 1 for server in world.servers)  # the whole cluster snapped back


def test_without_the_snap_back_the_first_update_misses_the_bound() -> None:
    _, seen = first_update_after_idle(NoSnapBack)
    assert any(took_us > ust_bound_us(0, dc) for dc, took_us in seen.items()), seen


def test_writes_between_long_idle_spells_stay_within_the_bound_and_check_out() -> None:
    # few clients thinking up to 2.5 s between operations: the cluster keeps going idle (no jitter,
    # so the bound is exact); every write's remote visibility is measured
    config = SimConfig(num_dcs=3, num_partitions=2, num_clients=3, duration_s=15.0, think_us_max=2_500_000,
                       wan_jitter=0.0, wan_jitter_ms=0.0, wan_link_spread_ms=0.0, visibility_sample=1.0,
                       idle_after_ms=DEFAULT_IDLE_AFTER_MS, idle_interval_ms=DEFAULT_IDLE_INTERVAL_MS)
    simulation = Simulation(config)
    result = simulation.run()
    assert not result.anomalies
    assert result.history is not None and check_history(result.history).ok
    assert min(server.stats.idle_wakes for server in simulation.world.servers) >= 3
    assert sum(len(samples) for samples in result.visibility_us.values()) >= 10
    for (source, destination), samples in result.visibility_us.items():
        assert max(samples) <= ust_bound_us(source, destination), (source, destination, samples)


def test_an_idle_server_with_the_cluster_defaults_heartbeats_about_once_a_second() -> None:
    # the idle cost is per tick (docs/benchmarks.md, "Idle cost"): over 10 idle seconds each server
    # sends one heartbeat per replica per idle tick, so about 10 per replica, not one every 200 ms
    world = World.fixed(3, 2, wan_us=WAN_US, **IDLE)
    world.advance(2_000_000)
    assert all(server.pacing.idle for server in world.servers)
    before = [server.stats.heartbeats_sent for server in world.servers]
    world.advance(10_000_000)
    replicas = 2
    for server, sent in zip(world.servers, before, strict=True):
        assert server.stats.heartbeats_sent - sent <= 11 * replicas, server.stats.heartbeats_sent - sent


def test_idle_pacing_is_off_by_default() -> None:
    world = World.fixed(2, 2)
    world.advance(1_200_000)
    assert not any(server.pacing.idle for server in world.servers)
    assert CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1).idle_after_us == 0
