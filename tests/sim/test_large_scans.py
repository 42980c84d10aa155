"""Very large reads in the simulator (``okapikv.sim.scans``): bursts of whole-range SCANs whose
slices cost their partitions time per key. With the core's paging every page is answered within the
liveness bound, GETs of other clients keep completing, and a scanner that gives up leaves nothing
pending; a server without paging (``broken_protocols.UnpagedScanServer``) holds a partition for
seconds per slice, and the sweep catches it (``ProbeStarved``, ``SlowScanPage``, ``SlowOperation``).
"""

from __future__ import annotations

import random
from dataclasses import replace

from broken_protocols import DeafToGoneClientsServer, UnpagedScanServer

from okapikv.check.anomalies import Anomaly
from okapikv.check.report import check_history
from okapikv.core.messages import ScanSlice, ServerId
from okapikv.core.server import PartitionServer
from okapikv.sim import SimConfig, Simulation, reproduce_command
from okapikv.sim.caller import Caller
from okapikv.sim.config import FaultPlan
from okapikv.sim.scans import ClientRouter, ScanCost, Scanners
from okapikv.sim.workload import key_name
from okapikv.sim.world import World

MS = 1_000
KEY_US = 1_000
STARVING = {"ProbeStarved", "SlowScanPage", "SlowOperation"}
SWEEP = SimConfig(num_partitions=2, num_clients=4, duration_s=0.4, faults=True, clock_skew_ms=10,
                  large_scans=True, keys_per_partition=128, liveness_s=0.25,
                  fault_plan=replace(FaultPlan(), large_scan_kinds=(("large_scan", 6.0),)))


def stored(factory: type[PartitionServer] = PartitionServer, keys: int = 40) -> tuple[World, Caller]:
    """1 DC x 2 partitions with ``keys`` keys written, pages of 3 pairs, each key a slice examines
    costing 1 ms."""
    world = World.fixed(1, 2, max_scan_items=3, server_factory=factory)
    caller = Caller(world)
    for index in range(keys):
        caller.put(key_name(index), b"v")
    world.work_us = ScanCost(world, KEY_US)
    return world, caller


def slice_cost(world: World, limit: int | None) -> int:
    cost = world.work_us
    assert cost is not None
    return cost(1, ScanSlice(ServerId(0, 0), 1, (0,), key_name(0), key_name(10_000), limit))


def test_a_slice_costs_the_keys_its_page_may_examine_and_without_paging_its_whole_partition() -> None:
    world, _ = stored()
    assert slice_cost(world, None) == 3 * KEY_US  # the page's cap: 3 pairs, all keys hold values
    assert slice_cost(world, 1) == 1 * KEY_US
    unpaged, _ = stored(UnpagedScanServer)
    partition_keys = sum(1 for _ in unpaged.servers[1].store.keys_in_range(b"", b"\xff"))
    assert partition_keys > 10 and slice_cost(unpaged, None) == partition_keys * KEY_US


def test_a_paged_whole_range_scan_keeps_each_page_short_and_lets_a_get_through() -> None:
    world, caller = stored(keys=200)
    latencies: list[int] = []
    getter = Caller(world)

    def get_between() -> None:
        latencies.append(caller.last_latency_us)
        getter.get(key_name(3))
        latencies.append(getter.last_latency_us)

    pages = caller.scan_pages(key_name(0), key_name(199), between=get_between)
    assert sum(len(page.items) for page in pages) == 200 and len(pages) > 20
    assert max(latencies) <= 10 * MS  # a page costs a few keys, never the range

    unpaged, scanner = stored(UnpagedScanServer, keys=200)
    [page] = scanner.scan_pages(key_name(0), key_name(199))
    assert len(page.items) == 200 and scanner.last_latency_us >= 100 * MS  # one partition's whole pass


def scanning(factory: type[PartitionServer] = PartitionServer) -> tuple[World, Scanners, list[Anomaly]]:
    world, _ = stored(factory, keys=200)
    anomalies: list[Anomaly] = []
    scanners = Scanners(world, random.Random(1), keys=[key_name(i) for i in range(200)], bound_us=2_000 * MS,
                        anomalies=anomalies)
    world.clients = ClientRouter(world.clients, scanners)
    return world, scanners, anomalies


def test_a_scanner_that_gives_up_leaves_no_read_pending() -> None:
    world, scanners, anomalies = scanning()
    scanners.burst(0, 4, 30 * MS)
    world.advance(10 * MS)
    assert sum(server.reads.count for server in world.servers) > 0
    world.advance(40 * MS)
    assert scanners.counts.abandoned == 4 and scanners.counts.pages > 4
    assert all(server.reads.count == 0 for server in world.servers)
    world.advance(100 * MS)
    scanners.finish()
    assert not anomalies, anomalies


def test_a_server_that_keeps_reading_for_gone_clients_is_caught() -> None:
    world, scanners, anomalies = scanning(DeafToGoneClientsServer)
    scanners.burst(0, 4, 30 * MS)
    world.advance(10 * MS)
    scanners.finish()  # the end of the run: the scanners still running go away
    assert {a.name for a in anomalies} == {"ReadsLeftPending"}, anomalies


def test_the_sweep_with_large_scans_stays_live_and_catches_a_server_without_paging() -> None:
    """The same seeds: with paging every run passes every checker (liveness after the heal included)
    and the scanners' own checks; without it, runs with large scans starve other requests."""
    caught = []
    drawn = 0
    for seed in range(1, 4):
        config = SWEEP.with_seed(seed)
        names = {}
        for factory in (PartitionServer, UnpagedScanServer):
            simulation = Simulation(config, server_factory=factory)
            result = simulation.run()
            assert result.history is not None and simulation.scanners is not None
            found = {a.name for a in result.anomalies} | {a.name for a in check_history(result.history).anomalies}
            names[factory] = (simulation.scanners.counts, found)
        (counts, found), (_, broken) = names[PartitionServer], names[UnpagedScanServer]
        assert not found, (reproduce_command(config), found)
        if counts.scans:
            drawn += 1
            assert counts.pages > counts.scans  # paged
        if broken & STARVING:
            caught.append(seed)
    assert drawn >= 2 and len(caught) >= 2, (drawn, caught)


def test_the_reproduction_names_large_scans() -> None:
    command = reproduce_command(SWEEP)
    assert "--large-scans" in command and "--keys-per-partition 128" in command
