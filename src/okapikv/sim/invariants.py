"""Invariants the simulator checks while it runs: what a history cannot show.

- ``ReplicationPromise``: a server's ``vv[i]`` never covers an update from DC i still in flight to
  it (FIFO links plus heartbeats must not run ahead of updates: docs/protocol.md, "Replication and
  heartbeats");
- ``StableRegressed``: a server's stable vector never moves backwards; ``StabilityInvariant`` (at
  the end, ``check_stability``): it never exceeds what the servers it summarises have received
  (docs/protocol.md, "Stabilization");
- ``ClockDragged``: a server's HLC never runs further ahead of its own clock than the maximum clock
  offset, or than the clock bound it restarted above: nothing received drags it (docs/protocol.md,
  "Timestamps and the HLC");
- ``DuplicateRequest``: a server never answers a request twice (the world delivers each request
  once: a write is applied once).

Each report becomes an ``Anomaly`` of checker ``sim`` (the first ``MAX_REPORTS``); the simulation
adds its own (``NotQuiescent``, ``StuckOperation``) to the same list.
"""

from __future__ import annotations

from okapikv.check.anomalies import Anomaly
from okapikv.core.messages import ClientReply, Heartbeat, Message
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import physical_of
from okapikv.core.vectors import Vector
from okapikv.sim.events import INFINITY
from okapikv.sim.world import World

#: what the HLC may run ahead of the clock plus the maximum offset (the logical carry: 1 us per
#: 65,536 timestamps within one microsecond) before ``ClockDragged`` is reported
DRAG_SLACK_US = 1_000
MAX_REPORTS = 20


class Invariants:
    """The world's ``Monitor``: the world calls ``heartbeat``, ``clock_dragged`` and
    ``stable_changed`` as it runs, when ``checking``; with ``checking`` False only
    ``DuplicateRequest`` is reported (and the restart floors kept, which the visibility
    measurements read)."""

    def __init__(self, world: World, *, max_clock_offset_us: int, checking: bool = True) -> None:
        self.world = world
        self.checking = checking
        count_servers = len(world.servers)
        self.offset_us = max_clock_offset_us
        self.drag_us = max_clock_offset_us + DRAG_SLACK_US
        self.dragged = [False] * count_servers  # reported ClockDragged once
        #: per server, the clock floor its current incarnation restarted above, in physical us plus
        #: ``DRAG_SLACK_US`` (``ClockDragged``)
        self.floors = [0] * count_servers
        self.anomalies: list[Anomaly] = []
        self.reports = 0

    def report(self, name: str, text: str) -> None:
        self.reports += 1
        if self.reports <= MAX_REPORTS:
            self.anomalies.append(Anomaly(name, "sim", f"at {self.world.now} us: {text}"))

    # ================================================================ what the world reports

    def stable_changed(self, index: int, previous: Vector) -> None:
        current = self.world.servers[index].stable
        # a server that grew (``okapikv.core.growth``) keeps every entry and adds one: compare those
        if len(current) < len(previous) or any(c < p for c, p in zip(current, previous, strict=False)):
            self.report("StableRegressed", f"{self.world.name(index)} stable vector moved backwards: "
                                           f"{previous} -> {current}")

    def duplicate(self, index: int, reply: ClientReply) -> None:
        self.report("DuplicateRequest", f"{self.world.name(index)} answered request {reply.request_id} again")

    def restarted(self, index: int, old: PartitionServer) -> None:
        self.floors[index] = physical_of(old.hlc + 1) + DRAG_SLACK_US

    def heartbeat(self, index: int, heartbeat: Heartbeat) -> None:
        """After a heartbeat, vv[i] must stay below every update from that replica still in flight."""
        world = self.world
        source = heartbeat.source
        network = world.network
        queue = network.inflight.get((source.dc * world.num_partitions + source.partition) * network.count_servers
                                     + index)
        first = min(queue) if queue else INFINITY  # not queue[0]: catch-up answers resend older updates
        server = world.servers[index]
        if server.vv[source.dc] >= first:
            self.report(
                "ReplicationPromise",
                f"{world.name(index)} received a heartbeat from {world.name(world.index(source))} that sets "
                f"vv[{source.dc}]={server.vv[source.dc]} while an update with timestamp {first} from it is "
                f"still in flight: the heartbeat overtook the update, so stability may cover a missing version",
            )

    def clock_dragged(self, index: int, message: Message | None, now_us: int) -> None:
        """``ClockDragged``: server ``index``'s HLC ran further ahead of its clock than the maximum
        offset and above the clock bound it restarted at (reported once per server)."""
        if self.dragged[index]:
            return
        self.dragged[index] = True
        hlc = self.world.servers[index].hlc
        cause = f"handling a {type(message).__name__}" if message is not None else "its timer"
        ahead_ms = (physical_of(hlc) - now_us) / 1000
        self.report("ClockDragged", f"{self.world.name(index)}'s HLC {physical_of(hlc)} is "
                                    f"{ahead_ms:.1f} ms ahead of its clock after {cause}, "
                                    f"beyond the maximum clock offset ({self.offset_us / 1000:g} ms) "
                                    f"and above the clock bound it restarted at: a timestamp it took from "
                                    f"elsewhere dragged it")

    # ================================================================ at the end

    def check_stability(self) -> None:
        """Stable vectors never exceed what the servers they summarise have received (run at the end
        and by tests; Okapi's USV summarises every DC, the baselines' vectors their own DC)."""
        servers = self.world.servers
        if not servers[0].protocol.stabilizes:
            return
        partitions = self.world.num_partitions
        dcs = self.world.num_dcs
        # a server that has not grown (``okapikv.core.growth``) has nothing of the new DC: 0
        everywhere = [min(s.vv[i] if i < len(s.vv) else 0 for s in servers) for i in range(dcs)]
        per_dc = [[min(s.vv[i] if i < len(s.vv) else 0 for s in servers[d * partitions:(d + 1) * partitions])
                   for i in range(dcs)] for d in range(dcs)]
        universal = servers[0].protocol.uses_usv
        for index, server in enumerate(servers):
            bound = everywhere if universal else per_dc[server.dc]
            if server.protocol.name == "gentlerain":
                # only the GST, min(stable), is a promise (other entries may hold merged dependencies)
                claims = [(0, min(server.stable), min(bound))]
            else:
                claims = [(i, server.stable[i], bound[i]) for i in range(len(server.stable))]
            for i, claimed, actual in claims:
                if claimed > actual:
                    self.report("StabilityInvariant", f"{self.world.name(index)} stable[{i}]={claimed} exceeds "
                                                      f"the version vectors it summarises ({actual})")
