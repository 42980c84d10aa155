"""Everything a node reports, as one typed snapshot (``okapikv.wire.stats.NodeSnapshot``: the Stats
RPC, the Prometheus collector and `okapi status` render it), gathered from the parts that keep it:
the core's state and counters, the host's and the node's driver counters, the committer, the
links, the instruments (``okapikv.server.instruments``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from okapikv.cluster.config import ClusterConfig
from okapikv.core.messages import ServerId
from okapikv.core.server import PartitionServer
from okapikv.core.stats import ServerStats
from okapikv.core.timestamps import EPOCH_UNIX_US, physical_of
from okapikv.server.instruments import LagSamples, LatencyHistograms
from okapikv.storage.group_commit import GroupCommitter
from okapikv.wire.stats import (
    ClockFigures,
    CoreFigures,
    DriverFigures,
    InputFigures,
    LinkFigures,
    MembershipFigures,
    NodeSnapshot,
    RecoveredFigures,
    RequestFigures,
    ServerIdentity,
    StabilizationFigures,
    StorageFigures,
    StoreFigures,
    WaitFigures,
    WireFigures,
)


def driver_figures(*sources: object) -> DriverFigures:
    """``DriverFigures`` with each field taken from the first of ``sources`` that has it."""
    values = {}
    for item in dataclasses.fields(DriverFigures):
        source = next(source for source in sources if hasattr(source, item.name))
        values[item.name] = getattr(source, item.name)
    return DriverFigures(**values)


def stable_lag_ms(core: PartitionServer, now_us: int) -> tuple[float | None, ...]:
    """How far the stable vector trails this server's clock, per DC (None: nothing known yet)."""
    return tuple(None if entry == 0 else round((now_us - physical_of(entry)) / 1000, 3) for entry in core.stable)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeParts:
    """What a snapshot is gathered from (besides the core)."""

    config: ClusterConfig
    server: ServerId
    skew_us: int
    clock_ahead_at_start_us: int
    committer: GroupCommitter | None
    held_effect_groups: int
    recovered: RecoveredFigures | None
    lag_samples: LagSamples
    latency: LatencyHistograms
    driver: DriverFigures
    wire: WireFigures
    input: InputFigures
    links: Mapping[str, LinkFigures]


def node_snapshot(core: PartitionServer, parts: NodeParts, now_us: int) -> NodeSnapshot:
    config, server = parts.config, parts.server
    names = config.dcs
    committer = parts.committer
    return NodeSnapshot(
        identity=ServerIdentity(config.cluster_id, config.protocol, names[server.dc], server.dc, server.partition,
                                config.server(server.dc, server.partition).address, os.getpid()),
        clock=ClockFigures(now_us, now_us + EPOCH_UNIX_US, parts.skew_us, core.hlc, physical_of(core.hlc) - now_us,
                           core.config.max_clock_offset_us, parts.clock_ahead_at_start_us),
        stabilization=StabilizationFigures(
            tuple(core.vv), tuple(core.stable), tuple(core.gsv), tuple(core.horizon), stable_lag_ms(core, now_us),
            tuple(parts.lag_samples.snapshot()), tuple(names[dc] for dc in core.catching_up), core.repairing,
            tuple(names[dc] for dc in core.repair_waiting)),
        requests=RequestFigures(core.parked_count, core.pending_reads, core.snapshot_leases),
        store=StoreFigures(len(core.store), core.store.version_count, core.store.collected_count),
        storage=None if committer is None else StorageFigures(
            **committer.stats(), held_effect_groups=parts.held_effect_groups, recovered=parts.recovered),  # type: ignore[arg-type]
        latency=parts.latency.figures(),
        core=_core_figures(core.stats),
        driver=parts.driver,
        wire=parts.wire,
        input=parts.input,
        links=parts.links,
        membership=MembershipFigures(core.membership.epoch, core.membership.states,
                                     tuple(names[dc] for dc in core.counted)),
    )


def _core_figures(stats: ServerStats) -> CoreFigures:
    """The core's counters: operations, waits, and every other integer field of ``ServerStats``
    under its own name (a counter the core gains appears without an edit here)."""
    counters = {item.name: value for item in dataclasses.fields(stats)
                if type(value := getattr(stats, item.name)) is int}
    waits = {reason: WaitFigures(wait.count, wait.total_us, wait.max_us, wait.mean_us)
             for reason, wait in stats.waits.items()}
    return CoreFigures(dict(stats.operations), waits, counters)
