"""Stabilization: how a partition server's stable vector moves (docs/protocol.md, "Stabilization").

Every period each partition sends its ``vv`` (and its snapshot floor, for the GC horizon) to its
DC's aggregator (partition 0), which computes the GSV (entry-wise min) and the horizon and broadcasts
them; the protocol turns that into the server's stable vector (``Protocol.on_stabilized``). The
variants differ in what else runs, and one strategy object, chosen once from the protocol and the
options (``stabilization_for``), holds each:

- ``GsvRound``: Cure's GSV (docs/protocol.md, "Cure"): the round alone.
- ``GstRound``: GentleRain's GST (docs/protocol.md, "GentleRain"): the same round with one timestamp
  where Cure's carries a vector: each partition reports its local stable time (the minimum of its
  ``vv``) and the aggregator broadcasts the GST, their minimum (the minimum of every entry of every
  ``vv``, what GentleRain's visibility and snapshots read), with the GC floor and horizon as times.
- ``NoStabilization``: eventual; nothing runs and the stable vector never moves.
- ``UsvOnStream``: Okapi's USV (the paper, section 3.3). Each partition tells its replicas in the
  other DCs its DC's GSV as a field of its replication stream (``take_gsv``: a batch or a heartbeat
  carries it) and takes the entry-wise min of theirs (``absorb_gsv``).
- ``UsvFollowingVv``: the same with one partition per DC, where the DC's GSV is the partition's
  ``vv``: it is followed at every step (``follow``) instead of at the next period.
- ``PiggybackedUsv``: Okapi with ``piggyback_usv``: only the aggregators exchange GSVs
  (``GsvExchange``) and the USV rides on the GSV broadcast.

The server drives a strategy: ``stabilize`` at ``next_us``, its peer messages, ``take_gsv`` when a
replication batch or heartbeat leaves, ``absorb_gsv`` when one arrives with a GSV, ``follow`` after
each step (when not None). Whenever the stable vector may have moved, parked requests are re-checked
(``resume``, the server's waits).

Invariants (tested in ``tests/unit/test_core_stabilization.py``, ``tests/unit/test_server_replication.py``
and ``tests/property/test_prop_usv.py``):
- ``gsv``, ``stable`` and ``horizon`` only grow; the GSV is the min of reports that are lower bounds,
  and the USV the min of every DC's GSV, so every entry is a lower bound of what it claims;
- a changed GSV reaches the replicas (``UsvOnStream``) with the next replication batch, or at the
  latest with a heartbeat at the next period (``gsv_unshared``);
- the strategy depends only on the protocol, ``piggyback_usv``, the partition count and whether
  there are replicas (``stabilization_for``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from okapikv.core.messages import (
    Effect,
    GstBroadcast,
    GsvBroadcast,
    GsvExchange,
    Send,
    StableTimeReport,
    VvReport,
)
from okapikv.core.protocols.base import DC_ID_BYTES, TIMESTAMP_BYTES
from okapikv.core.state import NEVER, PartitionState
from okapikv.core.timestamps import pack
from okapikv.core.vectors import Vector, merge_max, merge_min


class Resume(Protocol):
    """Re-check the parked requests (``PartitionServer._resume_parked``): the stable vector moved."""

    def __call__(self, now_us: int, effects: list[Effect], *, clock_only: bool) -> None: ...


class GsvRound:
    """The GSV round alone (Cure, GentleRain): VV reports -> GSV and horizon broadcast."""

    #: whether the stable vector moves at all (the periodic round runs)
    runs = True
    #: whether the stable vector is universal (Okapi's USV): its entry for a DC says every DC holds
    #: that DC's updates up to it (``okapikv.core.gc``: what the replicas hold)
    universal = False
    #: whether a changed GSV must go to the replicas on the replication stream (``UsvOnStream``)
    _shares_gsv = False
    #: whether this server computes the USV (from the GSVs its replicas sent), not the broadcast
    _usv_here = False

    def __init__(self, state: PartitionState, *, resume: Resume) -> None:
        self.state = state
        self._resume = resume
        #: when ``stabilize`` runs next
        self.next_us = 0 if self.runs else NEVER
        #: this DC's GSV changed since it last went to the replicas (only ``UsvOnStream`` sends it):
        #: after a period with no replication batch or heartbeat to take it, a heartbeat takes it
        self.gsv_unshared = False
        #: after each step, when the DC's GSV follows this server's vv (``UsvFollowingVv``): returns
        #: whether the GSV moved (the server then makes sure it leaves soon: a batch or a heartbeat)
        self.follow: Callable[[int, list[Effect]], bool] | None = None
        # aggregator: the latest report of each partition of the DC
        self._reports: dict[int, VvReport] = {}
        # the latest GSV received from each other DC (the USV round)
        self._remote_gsvs: dict[int, Vector] = {}

    # ---------------------------------------------------------------- the periodic round

    def stabilize(self, now_us: int, effects: list[Effect], floor: Vector) -> None:
        """Report this server's vv and snapshot ``floor`` (``okapikv.core.gc``) to the aggregator,
        or aggregate (partition 0)."""
        state = self.state
        self.next_us = now_us + state.config.stabilization_interval_us
        dc = state.dc
        if pack(now_us) > state.vv[dc]:
            state.vv[dc] = pack(now_us)
        report = VvReport(state.id, tuple(state.vv), floor)
        vector_bytes = TIMESTAMP_BYTES * state.num_dcs
        if state.id.partition == 0:
            self._reports[0] = report
            self._aggregate(now_us, effects)
        else:
            effects.append(Send(state.dc_members[0], report))
            self._count(DC_ID_BYTES + vector_bytes, gc_bytes=vector_bytes)

    def _count(self, size: int, gc_bytes: int = 0) -> None:
        stats = self.state.stats
        stats.stabilization_messages_sent += 1
        stats.stabilization_bytes += size
        stats.gc_bytes += gc_bytes

    def on_vv_report(self, report: VvReport, now_us: int) -> list[Effect]:
        state = self.state
        if report.source.dc == state.dc:
            state.heard[report.source.partition] = now_us
            if state.id.partition == 0:
                self._reports[report.source.partition] = report
        return []

    def on_stable_time_report(self, report: StableTimeReport, now_us: int) -> list[Effect]:
        """GentleRain's report (``GstRound``); a vector round ignores it."""
        return []

    def on_gst_broadcast(self, message: GstBroadcast, now_us: int) -> list[Effect]:
        """GentleRain's broadcast (``GstRound``); a vector round ignores it."""
        return []

    def _aggregate(self, now_us: int, effects: list[Effect]) -> None:
        """Aggregator: GSV = entry-wise min of every partition's vv; horizon = min of the floors."""
        state = self.state
        if len(self._reports) < state.config.num_partitions:
            return
        reports = self._reports.values()
        gsv = merge_min(report.vv for report in reports)
        horizon = merge_min(report.floor for report in reports)
        usv = self._exchange(gsv, effects)
        broadcast = GsvBroadcast(state.id, gsv, usv, horizon)
        vector_bytes = TIMESTAMP_BYTES * state.num_dcs
        for member in state.dc_members:
            if member != state.id:
                effects.append(Send(member, broadcast))
                usv_bytes = vector_bytes if usv is not None else 0
                self._count(DC_ID_BYTES + vector_bytes + usv_bytes, gc_bytes=vector_bytes)
        effects.extend(self.on_gsv_broadcast(broadcast, now_us))

    def _exchange(self, gsv: Vector, effects: list[Effect]) -> Vector | None:
        """The USV the aggregator's broadcast carries (only ``PiggybackedUsv``'s does)."""
        return None

    def _usv_from(self, gsv: Vector) -> Vector | None:
        """The min of this DC's GSV and the counted DCs' (``PartitionState.counted``: a removed DC
        leaves it once the survivors relayed its updates, ``okapikv.core.membership``); None until
        each has sent one."""
        state = self.state
        remote = self._remote_gsvs
        if len(state.counted) == state.num_dcs:
            if len(remote) < state.num_dcs - 1:
                return None
            return merge_min([gsv, *remote.values()])
        gsvs = [gsv]
        for dc in state.counted:
            if dc != state.dc:
                if dc not in remote:
                    return None
                gsvs.append(remote[dc])
        return merge_min(gsvs)

    def on_gsv_broadcast(self, message: GsvBroadcast, now_us: int) -> list[Effect]:
        state = self.state
        if message.source.dc != state.dc:
            return []
        state.heard[message.source.partition] = now_us
        gsv = merge_max(state.gsv, message.gsv)
        if gsv != state.gsv:
            state.gsv = gsv
            self.gsv_unshared = self._shares_gsv
        usv = self._usv_from(state.gsv) if self._usv_here else message.usv
        state.stable = state.protocol.on_stabilized(stable=state.stable, gsv=state.gsv, usv=usv)
        state.horizon = merge_max(state.horizon, message.horizon)
        effects: list[Effect] = []
        if state.parked:
            self._resume(now_us, effects, clock_only=False)
        return effects

    def recount(self, now_us: int) -> list[Effect]:
        """The counted DCs changed (``okapikv.core.membership``): a USV computed here moves at once
        from the GSVs already received; the other strategies' stable vectors at their next round."""
        state = self.state
        effects: list[Effect] = []
        if self._usv_here:
            state.stable = state.protocol.on_stabilized(stable=state.stable, gsv=state.gsv,
                                                        usv=self._usv_from(state.gsv))
            if state.parked:
                self._resume(now_us, effects, clock_only=False)
        return effects

    @property
    def computes_usv(self) -> bool:
        """Whether this server computes the USV from its replicas' GSVs (``UsvOnStream``)."""
        return self._usv_here

    def remote_gsv(self, dc: int) -> Vector | None:
        """The latest GSV received from DC ``dc`` (the USV round), if any."""
        return self._remote_gsvs.get(dc)

    def forget(self, dc: int) -> None:
        """DC ``dc`` changed membership state: its GSVs so far were its previous incarnation's."""
        self._remote_gsvs.pop(dc, None)

    # ---------------------------------------------------------------- GSVs of the other DCs

    def on_gsv_exchange(self, message: GsvExchange, now_us: int) -> list[Effect]:
        return self.absorb_gsv(message.source.dc, message.gsv, now_us)

    def absorb_gsv(self, source: int, gsv: Vector, now_us: int) -> list[Effect]:
        """A replica DC's GSV (a ``GsvExchange``, or riding on its replication stream)."""
        if source == self.state.dc:
            return []
        previous = self._remote_gsvs.get(source)
        self._remote_gsvs[source] = gsv if previous is None else merge_max(previous, gsv)
        return []

    def take_gsv(self) -> Vector | None:
        """This DC's GSV for the replication batch or heartbeat about to leave, if it goes there."""
        return None


class GstRound(GsvRound):
    """GentleRain's scalar round (docs/protocol.md, "GentleRain"; the paper, section 6: its
    stabilization is the most network-efficient): a ``StableTimeReport`` per partition and a
    ``GstBroadcast``, one timestamp each (and one for the GC floor or horizon). The broadcast GST
    is taken as a vector holding it in every entry, which is GentleRain's stable vector already."""

    def __init__(self, state: PartitionState, *, resume: Resume) -> None:
        super().__init__(state, resume=resume)
        # aggregator: the latest local stable time and floor of each partition of the DC
        self._times: dict[int, StableTimeReport] = {}

    def stabilize(self, now_us: int, effects: list[Effect], floor: Vector) -> None:
        state = self.state
        self.next_us = now_us + state.config.stabilization_interval_us
        dc = state.dc
        if pack(now_us) > state.vv[dc]:
            state.vv[dc] = pack(now_us)
        # min(floor): a lower bound of every entry of the floor (GentleRain's snapshots repeat one
        # time, so its floor is that time repeated). The local stable time counts the counted DCs'
        # entries only (``okapikv.core.membership``).
        report = StableTimeReport(state.id, state.counted_min(state.vv), min(floor))
        if state.id.partition == 0:
            self._times[0] = report
            self._aggregate(now_us, effects)
        else:
            effects.append(Send(state.dc_members[0], report))
            self._count(DC_ID_BYTES + TIMESTAMP_BYTES, gc_bytes=TIMESTAMP_BYTES)

    def on_stable_time_report(self, report: StableTimeReport, now_us: int) -> list[Effect]:
        state = self.state
        if report.source.dc == state.dc:
            state.heard[report.source.partition] = now_us
            if state.id.partition == 0:
                self._times[report.source.partition] = report
        return []

    def _aggregate(self, now_us: int, effects: list[Effect]) -> None:
        """Aggregator: GST = min of the local stable times; horizon = min of the floors."""
        state = self.state
        if len(self._times) < state.config.num_partitions:
            return
        reports = self._times.values()
        broadcast = GstBroadcast(state.id, min(report.time for report in reports),
                                 min(report.floor for report in reports))
        for member in state.dc_members:
            if member != state.id:
                effects.append(Send(member, broadcast))
                self._count(DC_ID_BYTES + TIMESTAMP_BYTES, gc_bytes=TIMESTAMP_BYTES)
        effects.extend(self.on_gst_broadcast(broadcast, now_us))

    def on_gst_broadcast(self, message: GstBroadcast, now_us: int) -> list[Effect]:
        num_dcs = self.state.num_dcs
        return self.on_gsv_broadcast(
            GsvBroadcast(message.source, (message.gst,) * num_dcs, None, (message.horizon,) * num_dcs), now_us)


class NoStabilization(GsvRound):
    """Eventual: no round runs, the stable vector stays where it is (every version is visible)."""

    runs = False


class PiggybackedUsv(GsvRound):
    """Okapi with ``piggyback_usv``: the aggregators exchange their DCs' GSVs (``GsvExchange``) each
    period, and the aggregator's broadcast carries the USV (min of its GSV and the others')."""

    universal = True

    def _exchange(self, gsv: Vector, effects: list[Effect]) -> Vector | None:
        state = self.state
        exchange = GsvExchange(state.id, gsv)
        for peer in state.peers:
            effects.append(Send(peer, exchange))
            self._count(DC_ID_BYTES + TIMESTAMP_BYTES * state.num_dcs)
        return self._usv_from(gsv)


class UsvOnStream(GsvRound):
    """Okapi: each partition's replication stream carries its DC's GSV to its replicas (``take_gsv``)
    and each takes the min of its own DC's and theirs (the USV) as soon as one arrives."""

    universal = True
    _usv_here = True

    def __init__(self, state: PartitionState, *, resume: Resume) -> None:
        super().__init__(state, resume=resume)
        self._shares_gsv = bool(state.peers)

    def take_gsv(self) -> Vector | None:
        """This DC's GSV for the batch or heartbeat about to leave for the replicas, if it changed
        since they last got it; else None. Okapi's USV round (each partition tells its replicas its
        DC's GSV) rides on the replication stream instead of a GsvExchange message per replica
        and period: under RO-TX + PUT load (3 DCs x 2 partitions) the cluster's stabilization
        messages fell from ~2,750 to ~920 a second (each costs a message's encoding, decoding and
        dispatch; stabilizing every 50 ms instead of 5 had bought Okapi ~5% throughput, half its
        gap to ``eventual``). A changed GSV leaves with the next replication batch, or at the
        latest with a heartbeat at the next stabilization period: never later than a per-period
        exchange did (idle 3x2 cluster: the same visibility lag)."""
        if not self.gsv_unshared:
            return None
        self.gsv_unshared = False
        state = self.state
        state.stats.stabilization_bytes += TIMESTAMP_BYTES * state.num_dcs * len(state.peers)
        return state.gsv

    def absorb_gsv(self, source: int, gsv: Vector, now_us: int) -> list[Effect]:
        state = self.state
        if source == state.dc:
            return []
        previous = self._remote_gsvs.get(source)
        self._remote_gsvs[source] = gsv if previous is None else merge_max(previous, gsv)
        # Raise the USV now instead of at the next GSV broadcast: remote updates become visible up
        # to a stabilization period sooner (idle 3-DC cluster, realistic WAN: visibility lag p99
        # from the UST path + 15.3 ms to + ~11). The USV is a min of valid lower bounds either way.
        state.stable = state.protocol.on_stabilized(stable=state.stable, gsv=state.gsv,
                                                    usv=self._usv_from(state.gsv))
        effects: list[Effect] = []
        if state.parked:
            self._resume(now_us, effects, clock_only=False)
        return effects


class UsvFollowingVv(UsvOnStream):
    """Okapi with one partition per DC (and replicas): the DC's GSV (entry-wise min of its
    partitions' vv) is this vv, so it moves with every step instead of at the next stabilization
    period, and the changed GSV leaves with the replication batch this step sends. Why: under PUT
    load a DC's knowledge of another's updates otherwise waited up to a period at each DC on the UST
    path before the next hop took it (3 DCs x 1 partition, PUTs at saturation: see
    ``benchmarks.suites.fast``)."""

    def __init__(self, state: PartitionState, *, resume: Resume) -> None:
        super().__init__(state, resume=resume)
        self.follow = self._follow

    def _follow(self, now_us: int, effects: list[Effect]) -> bool:
        """Take this vv as the DC's GSV; whether it moved (the server then makes sure it leaves)."""
        state = self.state
        vv = tuple(state.vv)
        if vv == state.gsv:
            return False
        effects.extend(self.on_gsv_broadcast(GsvBroadcast(state.id, vv, None, state.horizon), now_us))
        return True


def stabilization_for(state: PartitionState, *, resume: Resume) -> GsvRound:
    """The strategy of ``state``'s protocol and options (module docstring), chosen once."""
    protocol = state.protocol
    if not protocol.stabilizes:
        return NoStabilization(state, resume=resume)
    if protocol.scalar:
        return GstRound(state, resume=resume)
    if not protocol.uses_usv:
        return GsvRound(state, resume=resume)
    if state.config.piggyback_usv:
        return PiggybackedUsv(state, resume=resume)
    if state.config.num_partitions == 1 and state.peers:
        return UsvFollowingVv(state, resume=resume)
    return UsvOnStream(state, resume=resume)
