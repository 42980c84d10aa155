"""Following writes until they are visible in the other DCs: latency figures and liveness evidence.

A write is followed from its reply until every other DC's replica of its partition sees it (its
stable vector covers it: docs/protocol.md, "Stabilization"): a sample of writes
(``SimConfig.visibility_sample``) for the remote visibility latency figures, and every write started
after the heal when the liveness phase runs (the history's ``visible`` events, which
``okapikv.check.liveness`` judges against its bound). With clock jumps, a write whose timestamp is
legitimately ahead of other clocks (its server's own clock, or the clock bound it restarted above,
put it there) is marked ``held_until_us``: no DC may show it before the other clocks reach it.
"""

from __future__ import annotations

import random
from collections import deque

from okapikv.check.history import HistoryRecorder, Operation
from okapikv.core.growth import fit_version
from okapikv.core.messages import SwapReply, WriteReply
from okapikv.core.mvstore import Version
from okapikv.core.timestamps import physical_of
from okapikv.sim.clients import Clients
from okapikv.sim.config import SimConfig
from okapikv.sim.invariants import Invariants
from okapikv.sim.world import World

#: a write held back (``held_until_us``) by less than this past its completion is not marked
HELD_MIN_US = 100_000


class Visibility:
    def __init__(self, world: World, config: SimConfig, rng: random.Random, clients: Clients,
                 invariants: Invariants, recorder: HistoryRecorder | None) -> None:
        self.world = world
        self.config = config
        self.rng = rng
        self.clients = clients
        self.invariants = invariants
        self.recorder = recorder
        #: writes started at or after this time are followed for the liveness checker (set at the heal)
        self.follow_from_us: int | None = None
        #: per (source DC, destination DC): the sampled writes' remote visibility latencies (us)
        self.samples: dict[tuple[int, int], list[int]] = {}
        #: per replica, per source DC: (version, written at, operation whose visibility the history
        #: records or None, sampled for the latency figures)
        self.pending: list[dict[int, deque[tuple[Version, int, Operation | None, bool]]]] = [
            {} for _ in world.servers]

    def written(self, index: int, client: int, reply: WriteReply | SwapReply) -> None:
        """The world's ``on_write``: follow a write's remote visibility (module docstring), and mark
        a write held back by a timestamp legitimately ahead of other clocks (``held_until_us``)."""
        config = self.config
        world = self.world
        sampled = bool(config.visibility_sample) and self.rng.random() < config.visibility_sample
        if config.num_dcs < 2:
            return
        server = world.servers[index]
        op = self.clients.clients[client].op
        if op is None or op.key is None:
            return
        if config.clock_jumps:
            op.held_until_us = self.held_until(index, reply.timestamp)
        tracked = self.follow_from_us is not None and op.invoke_us >= self.follow_from_us
        if not server.protocol.stabilizes or not (sampled or tracked):
            return
        key = op.key.encode("utf-8", "surrogateescape")
        timestamp, dc = reply.timestamp, server.dc
        version = server.store.newest(key, lambda v: v.timestamp == timestamp and v.source_dc == dc)
        if version is None:
            return
        partitions = world.num_partitions
        partition = index % partitions
        for other in range(config.num_dcs):
            if other != dc:
                pending = self.pending[other * partitions + partition]
                pending.setdefault(dc, deque()).append((version, world.now, op if tracked else None, sampled))

    def stable_changed(self, index: int) -> None:
        """The world's ``on_stable``: record what server ``index``'s new stable vector makes visible."""
        pending = self.pending[index]
        if not pending:
            return
        server = self.world.servers[index]
        current = server.stable
        visible = server.protocol.visible
        recorder = self.recorder
        now = self.world.now
        for source_dc, queue in pending.items():
            # a version written before its server grew has a shorter vector (``okapikv.core.growth``)
            while queue and visible(version=fit_version(queue[0][0], len(current)), stable=current):
                _, written_at, op, sampled = queue.popleft()
                if sampled:
                    self.samples.setdefault((source_dc, server.dc), []).append(now - written_at)
                if op is not None and recorder is not None:
                    recorder.visible(op, server.dc, now)

    def held_until(self, index: int, timestamp: int) -> int | None:
        """When a write of server ``index`` with ``timestamp`` may first be visible in every other DC,
        if its timestamp is legitimately ahead of other clocks (its server's own clock or restart
        floor put it there) and that is more than ``HELD_MIN_US`` from now; else None. Every server
        of another DC holds a peer's watermark at its clock plus the maximum offset, and the other
        partitions of its own DC announce no more than their clocks (or HLCs) in the DC's GSV, so the
        write waits for each of those clocks to reach it (``okapikv.check.liveness``)."""
        world = self.world
        now = world.now
        invariants = self.invariants
        physical = physical_of(timestamp)
        own = world.clocks[index].read(now)
        if physical > max(invariants.floors[index], own + invariants.drag_us):
            return None  # dragged, not legitimately ahead: no exemption (ClockDragged reports it)
        partitions = world.num_partitions
        dc = index // partitions
        latest = now
        for other, clock in enumerate(world.clocks):
            if other == index:
                continue
            target = physical if other // partitions == dc else physical - invariants.offset_us
            if clock.read(now) < target:
                latest = max(latest, clock.true_time_for(target, now))
        return latest if latest - now > HELD_MIN_US else None

    def due(self) -> bool:
        """Whether a write the liveness checker follows is not visible somewhere yet and still within
        its bound (not held back: ``held_until_us``): the run waits for it, or for its deadline to
        pass, so that the history shows which."""
        if not self.config.liveness_s:
            return False
        bound = round(self.config.liveness_visibility_bound_ms * 1000)
        now = self.world.now
        for pending in self.pending:
            for queue in pending.values():
                for _, written_at, op, _ in queue:
                    if op is not None and op.held_until_us is None and written_at + bound >= now:
                        return True
        return False
