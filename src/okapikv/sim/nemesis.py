"""The nemesis: the faults a simulated run injects during its fault phase, and their repair.

Faults (``FaultPlan``), drawn at exponential intervals (mean ``mean_interval_ms``) with the plan's
weights, each with its parameters drawn when it is scheduled (so the run's random sequence does not
depend on what the faults do):

- *partition* a DC, or the link between two DCs: the cut links hold their messages, in FIFO order,
  and deliver them on *repair* (links are reliable: ``okapikv.sim.network``);
- *crash* a server (kill -9) and *restart* it later from what was durable (``World.crash``,
  ``World.restart``); with ``lose_disk_share`` a crash may lose the disk too, and the restart then
  repairs from the replicas (docs/protocol.md, "Catch-up and repair"), but only when that loses
  nothing acknowledged: every version the server wrote has reached a replica, and no replica of
  its partition is down or repairing (else a plain restart: a repair could not recover the rest,
  and the checkers would rightly report it lost);
- *pause* a server (SIGSTOP: messages queue for it; it resumes with its state intact);
- *slow* a server (every message costs it extra service time; its backlog is served at full speed
  once it recovers);
- *step* a clock forward (an NTP correction); clocks also drift (``World.seeded``).

With ``clock_jumps`` clocks also go far wrong, by minutes to hours (docs/protocol.md, "Timestamps
and the HLC"): a running server's clock *jumps* ahead and stays there; a server is killed and
*restarts with its clock stepped back* (its recovered clock bound, hence its HLC, ahead of its
clock), fixed at the heal; a server is killed and *restarts with its clock ahead*, and stays so.

With ``silent_links`` a directed replication link between two DCs goes *silent* (a cut that drops
packets without a reset): it carries nothing, and after the fault's end only once the link's
liveness check has found the connection dead and it has reconnected (``okapikv.sim.silent``).

With ``membership`` a whole DC is *lost* (every server killed), removed from the membership, and
brought back later on empty disks, repairing, joining and then a member (``okapikv.sim.membership``;
docs/protocol.md, "Membership").

With ``new_dc`` the world's last DC is new: it joins the running cluster once during the fault
phase (``okapikv.sim.membership``, ``okapikv.core.growth``).

With ``large_scans`` (``scanners``) a *large scan* is a burst of whole-range SCANs at one DC
(``okapikv.sim.scans``); they run until they complete, fail or give up, the heal included.

Every fault is undone after its length or at the heal (``heal``), whichever comes first; after the
heal no new fault strikes.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from okapikv.core.server import Repair
from okapikv.sim.config import FaultPlan
from okapikv.sim.membership import POLL_US, DcLoss, own_versions
from okapikv.sim.scans import Scanners
from okapikv.sim.silent import LinkTimers, SilentLinks
from okapikv.sim.world import World

JUMP_KINDS = ("clock_jump", "restart_clock_back", "restart_clock_ahead")


class Nemesis:
    def __init__(self, world: World, plan: FaultPlan, rng: random.Random, *, clock_jumps: bool = False,
                 silent_links: bool = False, scanners: Scanners | None = None, membership: bool = False,
                 new_dc: int | None = None) -> None:
        self.world = world
        self.plan = plan
        self.rng = rng
        self.clock_jumps = clock_jumps
        self.silent_links = silent_links
        self.scanners = scanners
        #: the silent links, made with the plan's link timers; the network consults them (``Network.silent``)
        #: once one may go silent
        self.links = SilentLinks(
            world.network,
            LinkTimers(round(plan.link_probe_ms * 1000), round(plan.link_ack_timeout_ms * 1000),
                       (round(plan.link_backoff_ms[0] * 1000), round(plan.link_backoff_ms[1] * 1000))),
            note=world.note, name=world.name)
        if silent_links:
            world.network.silent = self.links
        #: ``membership``: whole DCs lost, removed and re-added (``okapikv.sim.membership``)
        self.dc_loss = DcLoss(world, unborn=new_dc) if membership or new_dc is not None else None
        #: ``new_dc``: whole DCs lost only with ``membership``; the new DC joins either way
        self.membership = membership
        self.healed = False  # every fault repaired; no new one strikes
        #: how to undo each fault still in force (each runs at most once)
        self.undo: list[Callable[[], None]] = []

    # ================================================================ the schedule

    def schedule(self, start_us: int, end_us: int) -> None:
        """Draw the faults that strike between ``start_us`` and ``end_us``."""
        plan = self.plan
        rng = self.rng
        mix = plan.kinds + (plan.jump_kinds if self.clock_jumps else ())
        mix += plan.silent_kinds if self.silent_links else ()
        mix += plan.large_scan_kinds if self.scanners is not None else ()
        mix += plan.membership_kinds if self.membership else ()
        kinds = [k for k, w in mix if w > 0]
        weights = [w for _, w in mix if w > 0]
        if self.dc_loss is not None and self.dc_loss.unborn is not None:
            self.world.at(start_us + int(rng.uniform(0.1, 0.5) * (end_us - start_us)), self.add_dc)
        at = start_us
        while True:
            at += int(rng.expovariate(1.0 / (plan.mean_interval_ms * 1000)))
            if at >= end_us:
                break
            kind = rng.choices(kinds, weights)[0]
            self.world.at(at, self._fault_action(kind))

    def _fault_action(self, kind: str) -> Callable[[], None]:
        """Draw the fault's parameters now (at schedule time) so the RNG sequence stays fixed."""
        plan = self.plan
        rng = self.rng
        dcs = self.world.num_dcs
        servers = len(self.world.servers)
        if kind.startswith(("partition", "silent")) and dcs < 2:
            kind = "crash"  # nothing to cut off with one DC
        if kind == "partition_dc":
            dc = rng.randrange(dcs)
            length = int(rng.uniform(*plan.partition_ms) * 1000)
            return lambda: self.partition_dc(dc, length)
        if kind == "partition_link":
            a, b = rng.sample(range(dcs), 2)
            length = int(rng.uniform(*plan.partition_ms) * 1000)
            return lambda: self.partition_link(a, b, length)
        if kind == "silent_link":
            source = rng.randrange(servers)
            step = rng.randrange(1, dcs)  # to the same partition in another DC: its replica
            destination = (source + step * self.world.num_partitions) % servers
            length = int(rng.uniform(*plan.silent_link_ms) * 1000)
            return lambda: self.silent_link(source, destination, length)
        if kind == "large_scan":
            dc = rng.randrange(dcs)
            return lambda: self.large_scan(dc)
        if kind == "lose_dc":
            dc = rng.randrange(dcs)
            length = int(rng.uniform(*plan.lose_dc_ms) * 1000)
            remover = rng.randrange(1 << 16)
            return lambda: self.lose_dc(dc, length, remover)
        if kind == "pause":
            index = rng.randrange(servers)
            length = int(rng.uniform(*plan.crash_ms) * 1000)
            return lambda: self.pause(index, length)
        if kind == "crash":
            index = rng.randrange(servers)
            length = int(rng.uniform(*plan.crash_ms) * 1000)
            lose_disk = plan.lose_disk_share > 0 and dcs > 1 and rng.random() < plan.lose_disk_share
            return lambda: self.crash(index, length, lose_disk=lose_disk)
        if kind == "slow":
            index = rng.randrange(servers)
            length = int(rng.uniform(*plan.slow_ms) * 1000)
            service = rng.randint(*plan.slow_service_us)
            return lambda: self.slow(index, length, service)
        if kind in JUMP_KINDS:
            index = rng.randrange(servers)
            jump = int(rng.uniform(*plan.clock_jump_s) * 1_000_000)
            if kind == "clock_jump":
                return lambda: self.clock_step(index, jump)
            length = int(rng.uniform(*plan.crash_ms) * 1000)
            step = -jump if kind == "restart_clock_back" else jump
            return lambda: self.crash(index, length, clock_step_us=step)
        index = rng.randrange(servers)
        step = int(rng.uniform(*plan.clock_step_ms) * 1000)
        return lambda: self.clock_step(index, step)

    def _timed(self, length_us: int, undo: Callable[[], None]) -> None:
        """Undo a fault after ``length_us`` or at the heal, whichever comes first (exactly once)."""
        done = [False]

        def once() -> None:
            if not done[0]:
                done[0] = True
                undo()

        self.undo.append(once)
        self.world.at(self.world.now + length_us, once)

    def heal(self) -> None:
        """Repair every fault still in force; no new one strikes."""
        self.healed = True
        for undo in list(self.undo):
            undo()
        self.undo.clear()

    # ================================================================ the faults

    def partition_dc(self, dc: int, length_us: int) -> None:
        if self.healed:
            return
        world = self.world
        world.network.cut_dc(dc)
        world.note(f"partition dc{dc} for {length_us / 1000:.0f} ms")

        def repair() -> None:
            world.note(f"repair dc{dc}")
            world.network.repair_dc(dc)

        self._timed(length_us, repair)

    def partition_link(self, a: int, b: int, length_us: int) -> None:
        if self.healed:
            return
        world = self.world
        low, high = min(a, b), max(a, b)
        world.network.cut_link(a, b)
        world.note(f"partition link dc{low}-dc{high} for {length_us / 1000:.0f} ms")

        def repair() -> None:
            world.note(f"repair link dc{low}-dc{high}")
            world.network.repair_link(a, b)

        self._timed(length_us, repair)

    def silent_link(self, source: int, destination: int, length_us: int) -> None:
        """The link from server ``source`` to ``destination`` (in another DC) goes silent for
        ``length_us`` (``okapikv.sim.silent``)."""
        world = self.world
        world.network.silent = self.links
        if self.healed or not self.links.silence(source, destination):
            return
        world.note(f"silent link {world.name(source)}->{world.name(destination)} for {length_us / 1000:.0f} ms")

        def end() -> None:
            world.note(f"end of silence {world.name(source)}->{world.name(destination)}")
            self.links.heal(source, destination)

        self._timed(length_us, end)

    def large_scan(self, dc: int) -> None:
        """A burst of whole-range SCANs at DC ``dc`` (``okapikv.sim.scans``)."""
        if self.healed or self.scanners is None:
            return
        count = self.plan.large_scan_burst
        self.world.note(f"large scans: {count} whole-range SCANs at dc{dc}")
        self.scanners.burst(dc, count, round(self.plan.large_scan_patience_ms * 1000))

    def lose_dc(self, dc: int, length_us: int, remover: int) -> None:
        """Every server of DC ``dc`` killed, the DC removed, and brought back after ``length_us``
        (``okapikv.sim.membership``)."""
        if self.healed or self.dc_loss is None:
            return
        back = self.dc_loss.strike(dc, remover)
        if back is not None:
            self._timed(length_us, back)

    def add_dc(self) -> None:
        """The new DC joins (``okapikv.sim.membership``), as soon as nothing else is in the way:
        tried again every ``POLL_US``, after the heal too (the run ends with every DC a member)."""
        if self.dc_loss is not None and not self.dc_loss.add_dc():
            self.world.at(self.world.now + POLL_US, self.add_dc)

    def pause(self, index: int, length_us: int) -> None:
        world = self.world
        if self.healed or world.paused[index]:
            return
        world.pause(index)
        world.note(f"pause {world.name(index)} for {length_us / 1000:.0f} ms")

        def resume() -> None:
            world.note(f"resume {world.name(index)}")
            world.resume(index)

        self._timed(length_us, resume)

    def crash(self, index: int, length_us: int, clock_step_us: int = 0, *, lose_disk: bool = False) -> None:
        """``kill -9`` of server ``index``, restarted from its disk after ``length_us``, with its clock
        moved by ``clock_step_us`` (a clock stepped back is fixed at the heal; one restarting after
        the heal restarts with its clock right), or with ``lose_disk`` from an empty disk, in repair
        mode, when that loses nothing acknowledged (module docstring)."""
        world = self.world
        if self.healed or world.paused[index]:
            return
        stepped = f", restarting with its clock {clock_step_us / 1e6:+.0f} s" if clock_step_us else ""
        world.note(f"crash {world.name(index)} for {length_us / 1000:.0f} ms{stepped}")
        world.crash(index)

        def restart() -> None:
            repair = lose_disk and self._replicated_somewhere(index)
            old = world.servers[index]
            step = clock_step_us if not self.healed else 0
            if not repair and old.repairing is not None:
                # killed in the middle of a repair: the repair marker makes it repair again
                # (``okapikv.storage.recovery``), keeping what it salvaged of its own DC
                world.note(f"restart {world.name(index)}, repairing again")
                world.restart(index, repair=Repair(own_versions(old)), clock_step_us=step)
            else:
                world.note(f"restart {world.name(index)}" + (" on an empty disk, repairing" if repair else ""))
                world.restart(index, repair=Repair() if repair else None, clock_step_us=step)
            if step < 0:
                self.undo.append(lambda: self.fix_clock(index, -step))

        self._timed(length_us, restart)

    def _replicated_somewhere(self, index: int) -> bool:
        """Whether losing server ``index``'s disk loses nothing a repair can not bring back: every
        version it wrote has reached one of its replicas, and none of them is down or repairing
        (their disk may hold the only other copy of a version, lost too if theirs is lost)."""
        world = self.world
        server = world.servers[index]
        partitions = world.num_partitions
        dc, partition = server.dc, index % partitions
        newest = max((version.timestamp for _, version in server.store.written_by(dc, 0)), default=0)
        others = [other * partitions + partition for other in range(world.num_dcs) if other != dc]
        if any(world.down[other] or world.servers[other].repairing is not None for other in others):
            return False
        return any(world.servers[other].vv[dc] >= newest for other in others)

    def slow(self, index: int, length_us: int, service_us: int) -> None:
        if self.healed:
            return
        world = self.world
        world.service_us[index] += service_us
        world.note(f"slow {world.name(index)} (+{service_us} us per message) for {length_us / 1000:.0f} ms")

        def recover() -> None:
            world.service_us[index] -= service_us
            world.note(f"recover {world.name(index)}")
            world.requeue(index)

        self._timed(length_us, recover)

    def clock_step(self, index: int, step_us: int) -> None:
        if self.healed:
            return
        world = self.world
        world.note(f"clock step {world.name(index)} +{step_us / 1000:.1f} ms")
        world.step_clock(index, step_us)

    def fix_clock(self, index: int, step_us: int) -> None:
        """The heal of a clock stepped back at a restart: it steps forward to the right time."""
        world = self.world
        world.note(f"fix clock {world.name(index)} +{step_us / 1e6:.0f} s")
        world.step_clock(index, step_us)
