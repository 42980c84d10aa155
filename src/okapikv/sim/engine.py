"""One simulated run (TigerBeetle VOPR style): the real core under virtual time, faults and clients.

Virtual *true* time in microseconds, a heap of events (``okapikv.sim.events``), and ONE
``random.Random(seed)`` for every draw (clocks, delays, workload, faults), so a seed replays a run
exactly. A ``Simulation`` puts together, each in its own module:

- the world (``world``): the production partition servers, their clocks, the network
  (``network``: FIFO links with WAN and LAN delays, cuts), slow, paused and crashed servers;
- the clients (``clients``): closed-loop sessions issuing the workload (``workload``), retrying,
  failing over, paging scans, and recording the history;
- the nemesis (``nemesis``): the faults of ``FaultPlan`` and their repair;
- the invariant checks (``invariants``) and the visibility measurements (``visibility``).

A run is a fault phase (``duration_s``: clients run, faults strike) then a heal-and-converge phase:
every fault is repaired, clients run on for ``liveness_s`` (the part the liveness checker judges:
every operation completes and every write becomes visible in every DC within bounds; the history's
meta ``liveness`` and its ``visible`` events), then finish their current operation and stop, the
system runs until quiescence (no replication in flight, every server's stable vector past every
write it can be past: a timestamp legitimately ahead of other clocks is held back until they come
within the maximum clock offset of it), and then every written key is read in every DC (``final``
reads) for the convergence checker.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from okapikv.check.anomalies import Anomaly
from okapikv.check.history import History, HistoryRecorder
from okapikv.core.config import CoreConfig
from okapikv.core.server import PartitionServer
from okapikv.core.skew import clock_offsets_us, max_skew_in_dc_us
from okapikv.core.stats import WaitStats
from okapikv.core.timestamps import pack
from okapikv.sim.clients import Clients
from okapikv.sim.config import SimConfig, dc_names
from okapikv.sim.cost import Costs
from okapikv.sim.cpu import Cpu
from okapikv.sim.crdt import CrdtLedger
from okapikv.sim.invariants import Invariants
from okapikv.sim.nemesis import Nemesis
from okapikv.sim.scans import ClientRouter, ScanCost, Scanners
from okapikv.sim.visibility import Visibility
from okapikv.sim.workload import Workload
from okapikv.sim.world import START_US, FaultRecord, World

QUIESCENCE_POLL_US = 5_000

__all__ = ["START_US", "FaultRecord", "SimResult", "Simulation"]


@dataclass(slots=True)
class SimResult:
    config: SimConfig
    history: History | None
    operations: Counter[str]
    completed: Counter[str]
    waits: dict[str, WaitStats]
    waits_by_dc: dict[int, dict[str, WaitStats]]
    server_operations: dict[int, Counter[str]]
    visibility_us: dict[tuple[int, int], list[int]]
    anomalies: list[Anomaly]
    faults: list[FaultRecord]
    simulated_us: int
    fault_phase_end_us: int
    quiescent_us: int | None
    wall_s: float
    events: int
    snapshot_retries: int = 0
    messages: Counter[str] = field(default_factory=Counter)
    scan_restarts: int = 0
    #: the largest difference of two clock offsets inside one DC (``okapikv.core.skew``)
    max_dc_skew_us: int = 0
    #: what the counter and expiry operations were acknowledged (``okapikv.sim.crdt``; None: none in the mix)
    crdt: CrdtLedger | None = None
    #: per operation, the latency of each successful workload operation issued in the measurement
    #: window (``SimConfig.warmup_s`` to the end of the fault phase), and the operations completed in it
    latencies_us: dict[str, list[int]] = field(default_factory=dict)
    window_completed: int = 0
    #: workload operations that failed in the window, by error code (none in a healthy run: a
    #: refusal for load is retried, ``okapikv.sim.clients``), and the retries of refused reads
    window_failed: Counter[str] = field(default_factory=Counter)
    overload_retries: int = 0
    window_us: int = 0
    #: under the cost model: each machine's share of CPU time used (one per server, or one shared),
    #: and the most requests parked at once on a server
    cpu_utilization: list[float] | None = None
    max_blocked: int = 0
    #: every server incarnation's counters (``ServerStats.as_dict``), over the whole run
    server_stats: list[dict[str, object]] = field(default_factory=list)
    #: each server's counters at the start and at the end of the measurement window (the servers
    #: of each moment, by index), so waits and bytes can be counted inside it (not cold start and
    #: drain), and each machine's share of CPU busy inside it (under the cost model)
    window_stats_before: list[dict[str, object]] = field(default_factory=list)
    window_stats_after: list[dict[str, object]] = field(default_factory=list)
    window_cpu_utilization: list[float] | None = None

    @property
    def throughput_ops_s(self) -> float:
        """Workload operations completed per simulated second in the measurement window."""
        return self.window_completed / (self.window_us / 1e6) if self.window_us else 0.0


class Simulation:
    """One seeded run. ``run()`` returns a ``SimResult`` (history unchecked: see ``sim.runner``)."""

    def __init__(self, config: SimConfig, *, server_factory: Callable[[CoreConfig], PartitionServer] | None = None
                 ) -> None:
        """``server_factory`` builds each partition server (tests inject deliberately broken ones)."""
        config.validate()
        factory = server_factory or PartitionServer
        self.config = config
        rng = self.rng = random.Random(config.seed)
        dcs, partitions = config.num_dcs, config.num_partitions
        #: ``new_dc``: the last DC joins during the run; the others start as a cluster without it
        unborn = dcs - 1 if config.new_dc else None
        servers = [
            factory(
                CoreConfig(
                    dc=dc,
                    partition=p,
                    num_dcs=dcs - 1 if unborn is not None and dc != unborn else dcs,
                    num_partitions=partitions,
                    protocol=config.protocol,
                    piggyback_usv=config.piggyback_usv,
                    idle_after_us=round(config.idle_after_ms * 1000),
                    idle_interval_us=round(config.idle_interval_ms * 1000),
                    **({"max_scan_items": config.scan_page_items} if config.scan_page_items else {}),
                    **({"max_concurrent_reads": config.max_concurrent_reads}
                       if config.max_concurrent_reads is not None else {}),
                    **({"max_read_items": config.max_read_items} if config.max_read_items is not None else {}),
                    max_clock_offset_us=round(config.max_clock_offset_ms * 1000),
                )
            )
            for dc in range(dcs)
            for p in range(partitions)
        ]
        self.offsets_us = clock_offsets_us(config.clock_skew_model, int(config.clock_skew_ms * 1000),
                                           len(servers), rng)
        world = self.world = World.seeded(
            rng, servers, offsets_us=self.offsets_us,
            drift_ppm_max=config.fault_plan.drift_ppm_max if config.faults else 0.0, wan_ms=config.wan(),
            lan_us=config.lan_us, jitter=config.wan_jitter, jitter_ms=config.wan_jitter_ms,
            link_spread_ms=config.wan_link_spread_ms, factory=factory)
        world.service_us = [config.service_us] * len(servers)
        if config.cost is not None:
            world.cpu = Cpu(world, Costs(config.cost, partitions))
            world.network.wan_bytes_per_us = config.cost.wan_bandwidth_mbps / 8
        self.recorder = HistoryRecorder(self._meta()) if config.record else None
        self.clients = Clients(world, config, rng, Workload(config, rng), self.recorder)
        self.invariants = Invariants(world, max_clock_offset_us=round(config.max_clock_offset_ms * 1000),
                                     checking=config.invariants)
        self.visibility = Visibility(world, config, rng, self.clients, self.invariants, self.recorder)
        self.scanners = Scanners(world, rng, keys=self.clients.workload.keys,
                                 bound_us=round(config.liveness_operation_bound_ms * 1000),
                                 anomalies=self.invariants.anomalies) if config.large_scans else None
        self.nemesis = Nemesis(world, config.fault_plan, rng, clock_jumps=config.clock_jumps,
                               silent_links=config.silent_links, scanners=self.scanners,
                               membership=config.membership, new_dc=unborn)
        if unborn is not None:
            for index in range(unborn * partitions, dcs * partitions):
                world.crash(index)  # unborn: down until it joins (``Nemesis.add_dc``)
            self.clients.hold = unborn
            assert self.nemesis.dc_loss is not None
            self.nemesis.dc_loss.on_born = self.clients.release
        world.clients = self.clients if self.scanners is None else ClientRouter(self.clients, self.scanners)
        if self.scanners is not None:
            world.work_us = ScanCost(world, config.fault_plan.scan_key_us)
        world.watch(self.invariants)
        if config.visibility_sample or config.liveness_s or config.clock_jumps:
            world.on_write = self.visibility.written
        world.on_stable = self.visibility.stable_changed
        self.clients.on_all_stopped = self._all_clients_stopped
        # phases
        self.fault_phase_end = START_US + int(config.duration_s * 1_000_000)
        self.liveness_end = self.fault_phase_end + int(config.liveness_s * 1_000_000)
        self.quiescent_at: int | None = None
        self.write_target = 0
        empty: tuple[list[dict[str, object]], list[float]] = ([], [])
        self.window_before = self.window_after = empty

    def _meta(self) -> dict[str, object]:
        c = self.config
        return {
            "source": "sim",
            "seed": c.seed,
            "protocol": c.protocol,
            "dcs": c.num_dcs,
            "dc_names": list(dc_names(c.num_dcs)),
            "partitions": c.num_partitions,
            "clients": c.num_clients,
            "duration_s": c.duration_s,
            "faults": c.faults,
            "clock_skew_ms": c.clock_skew_ms,
            "clock_skew_model": c.clock_skew_model,
            "max_dc_skew_ms": max_skew_in_dc_us(self.offsets_us, c.num_partitions) / 1000,
            "clock_jumps": c.clock_jumps,
            "liveness_s": c.liveness_s,
            "max_clock_offset_ms": c.max_clock_offset_ms,
            "time": "virtual true time (us)",
        }

    @property
    def anomalies(self) -> list[Anomaly]:
        """What the run found besides the history's checkers (the invariants' list)."""
        return self.invariants.anomalies

    # ================================================================ the run

    def run(self) -> SimResult:
        started = time.perf_counter()
        world = self.world
        world.start()
        self.clients.start(START_US)
        if self.config.faults:
            self.nemesis.schedule(START_US, self.fault_phase_end)
        if self.clients.window[0] > START_US:  # else the window opens now (no event: runs stay as they were)
            world.at(self.clients.window[0], self._open_window)
        else:
            self._open_window()
        world.at(self.fault_phase_end, self._end_fault_phase)
        timeout_us = int(self.config.converge_timeout_s * 1_000_000)
        world.at(self.liveness_end + timeout_us, self._check_clients_stopped)
        world.at(self.liveness_end + 2 * timeout_us, self._give_up)
        world.run()
        return self._result(time.perf_counter() - started)

    # ================================================================ phases

    def _window_counters(self) -> tuple[list[dict[str, object]], list[float]]:
        world = self.world
        busy = [] if world.cpu is None else list(world.cpu.busy_us)
        return [server.stats.as_dict() for server in world.servers], busy

    def _open_window(self) -> None:
        self.window_before = self._window_counters()

    def _end_fault_phase(self) -> None:
        """Heal everything; the clients run on for ``liveness_s``, then stop; then wait for quiescence."""
        world = self.world
        self.window_after = self._window_counters()
        liveness_s = self.config.liveness_s
        if liveness_s:
            self.visibility.follow_from_us = self.fault_phase_end
        self.nemesis.heal()
        if not self.config.drain:
            world.note("end of the fault phase: clients finish their operations, then the run stops (no drain)")
            self._stop_clients()
            return
        if not liveness_s:
            world.note("heal: all faults repaired, clients stop")
            self._stop_clients()
            return
        world.note(f"heal: all faults repaired, clients run {liveness_s:g} s more")
        if self.recorder is not None:
            self.recorder.meta["liveness"] = {
                "heal_us": world.now,
                "operation_bound_us": round(self.config.liveness_operation_bound_ms * 1000),
                "visibility_bound_us": round(self.config.liveness_visibility_bound_ms * 1000),
                # every write started after the heal has its ``visible`` events
                "visibility": self.config.num_dcs > 1 and world.servers[0].protocol.stabilizes,
            }
        world.at(self.liveness_end, self._stop_clients)

    def _stop_clients(self) -> None:
        if self.config.liveness_s:
            self.world.note("heal: clients stop")
        self.clients.stop()

    def _all_clients_stopped(self) -> None:
        if not self.config.drain:
            self.world.done = True
            return
        # Every timestamp issued, except what is legitimately ahead of the other clocks (a server's
        # clock or clock bound ahead): stable vectors pass it only once those clocks come within the
        # maximum offset of it (its writes then carry ``held_until_us``).
        world = self.world
        cap = pack(min(clock.read(world.now) for clock in world.clocks) + self.invariants.offset_us)
        self.write_target = max(min(server.hlc, cap) for server in world.servers)
        world.at(world.now, self._poll_quiescence)

    def _quiescent(self) -> bool:
        world = self.world
        if not world.network.quiet():
            return False
        if not world.servers[0].protocol.stabilizes:
            return all(not inbox for inbox in world.inbox)
        target = self.write_target
        return all(min(server.stable) >= target for server in world.servers) and not self.visibility.due()

    def _poll_quiescence(self) -> None:
        world = self.world
        if self._quiescent():
            self.quiescent_at = world.now
            self.clients.start_final_reads()
            return
        if world.now - self.liveness_end > int(self.config.converge_timeout_s * 1_000_000):
            lagging = [
                f"dc{s.dc}/p{s.id.partition} stable={s.stable}"
                for s in world.servers
                if min(s.stable) < self.write_target
            ][:6]
            self.anomalies.append(
                Anomaly(
                    "NotQuiescent",
                    "sim",
                    f"{self.config.converge_timeout_s} s after the faults were healed the replicas were still not "
                    f"quiescent (replication in flight: {world.network.replication_inflight}; servers whose stable "
                    f"vector lags the last write timestamp {self.write_target}: {', '.join(lagging) or 'none'})",
                )
            )
            self.clients.start_final_reads()
            return
        world.at(world.now + QUIESCENCE_POLL_US, self._poll_quiescence)

    def _check_clients_stopped(self) -> None:
        """Clients must finish their last operation within the convergence timeout of the heal."""
        if self.clients.active > 0:
            self._give_up()

    def _give_up(self) -> None:
        stuck = self.clients.stuck()
        if stuck:
            described = "; ".join(c.op.describe() for c in stuck[:5] if c.op is not None)
            self.anomalies.append(
                Anomaly(
                    "StuckOperation",
                    "sim",
                    f"{len(stuck)} operation(s) never completed (a wait that is never released?): {described}",
                    tuple(c.op.id for c in stuck[:20] if c.op is not None),
                )
            )
        elif self.quiescent_at is None and not any(a.name == "NotQuiescent" for a in self.anomalies):
            self.anomalies.append(Anomaly("NotQuiescent", "sim", "the run hit its time limit before quiescence"))
        self.world.done = True

    # ================================================================ the result

    def _result(self, wall_s: float) -> SimResult:
        world = self.world
        if self.config.invariants:
            self.invariants.check_stability()
        if self.clients.crdt is not None and self.quiescent_at is not None:
            self.anomalies.extend(self.clients.crdt.check(world))
        if self.scanners is not None:
            self.scanners.finish()
        waits: dict[str, WaitStats] = {}
        waits_by_dc: dict[int, dict[str, WaitStats]] = {}
        server_operations: dict[int, Counter[str]] = {}
        retries = 0
        for server in world.retired + world.servers:
            retries += server.stats.snapshot_retries
            server_operations.setdefault(server.dc, Counter()).update(server.stats.operations)
            for reason, stats in server.stats.waits.items():
                for table in (waits, waits_by_dc.setdefault(server.dc, {})):
                    total = table.setdefault(reason, WaitStats())
                    total.count += stats.count
                    total.total_us += stats.total_us
                    total.max_us = max(total.max_us, stats.max_us)
        return SimResult(
            max_dc_skew_us=max_skew_in_dc_us(self.offsets_us, self.config.num_partitions),
            crdt=self.clients.crdt,
            config=self.config,
            history=self.recorder.history() if self.recorder is not None else None,
            operations=self.clients.operations,
            completed=self.clients.completed,
            waits=waits,
            waits_by_dc=waits_by_dc,
            server_operations=server_operations,
            visibility_us=self.visibility.samples,
            anomalies=self.anomalies,
            faults=world.faults,
            simulated_us=world.now - START_US,
            fault_phase_end_us=self.fault_phase_end - START_US,
            quiescent_us=None if self.quiescent_at is None else self.quiescent_at - START_US,
            wall_s=wall_s,
            events=world.events_processed,
            snapshot_retries=retries,
            scan_restarts=self.clients.scan_restarts,
            messages=Counter({kind.__name__: n for kind, n in world.network.counts.items()}),
            latencies_us=self.clients.latencies_us,
            window_completed=self.clients.window_completed,
            window_failed=self.clients.window_failed,
            overload_retries=self.clients.overload_retries,
            window_us=self.clients.window[1] - self.clients.window[0],
            cpu_utilization=None if world.cpu is None else [
                world.cpu.utilization(host, world.now - START_US) for host in range(len(world.cpu.queue))],
            max_blocked=0 if world.cpu is None else max(world.cpu.max_blocked),
            server_stats=[server.stats.as_dict() for server in world.retired + world.servers],
            window_stats_before=self.window_before[0],
            window_stats_after=self.window_after[0],
            window_cpu_utilization=self._window_utilization(),
        )

    def _window_utilization(self) -> list[float] | None:
        """Each machine's share of its cores busy inside the measurement window."""
        cpu, (before, after) = self.world.cpu, (self.window_before[1], self.window_after[1])
        window_us = self.clients.window[1] - self.clients.window[0]
        if cpu is None or not after or window_us <= 0:
            return None
        return [(end - (before[host] if host < len(before) else 0.0)) / (window_us * cpu.cores)
                for host, end in enumerate(after)]
