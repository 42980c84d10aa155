"""Garbage collection of a partition server's old versions (docs/protocol.md, "Garbage collection").

A version may go once a newer one of its key is universally visible: visible to every GET here
(under the stable vector) and in every snapshot at or above the horizon (``horizon``, the DC's
minimum of every partition's ``floor``, carried by the stabilization round), and at or below the
replicated floor (``replicated_floor``): the store is also the catch-up log (``okapikv.core.catchup``),
so a local version stays until every replica durably has a newer one. Okapi's USV says so with its
local entry; the other protocols' stable vectors speak for their own DC only, so their replicas
report how far they hold this DC's updates (``ReplicaProgress``, sent each GC interval when it moved).
A tombstone stays until no older concurrent write can still arrive (``settled``).

Each GC interval's work is bounded (``gc_budget`` keys examined) and spread over ``GC_SLICES``
slices (``start_pass``, ``collect``), so no single pass stalls the server.

Invariants (tested in ``tests/unit/test_core_gc.py``, ``tests/property/test_prop_gc.py``,
``tests/unit/test_server_replication.py`` and ``tests/unit/test_core_durability.py``):
- garbage collection removes only what no GET and no snapshot at or above the horizon can read, and
  keeps a tombstone until no older concurrent write can still arrive (``settled``);
- no local version goes before every replica is known to hold a newer one (``replicated_floor``);
- ``floor`` is a lower bound of every snapshot this server coordinates or still serves pages of;
- an interval examines at most ``gc_budget`` keys, each at most once.
"""

from __future__ import annotations

from okapikv.core import expiry
from okapikv.core.messages import Effect, ReplicaProgress, Send
from okapikv.core.mvstore import Version
from okapikv.core.reads import SnapshotReads
from okapikv.core.state import ServerView
from okapikv.core.timestamps import pack
from okapikv.core.vectors import Vector, merge_max

#: Each GC interval's keys are examined in this many equal slices (``collect``).
GC_SLICES = 10
#: Above every timestamp (64-bit): the replicated floor of a server without replicas.
ALL_TIMESTAMPS = 1 << 64


class GarbageCollector:
    """What a partition server may collect, and the collection, slice by slice."""

    def __init__(self, state: ServerView, reads: SnapshotReads, *, universal: bool) -> None:
        self.state = state
        self._reads = reads
        # the stable vector is Okapi's USV, which says what every replica holds (``stabilization``)
        self._universal = universal
        interval = state.config.gc_interval_us
        #: when the next interval starts (``start_pass``) and the next slice runs (``collect``)
        self.next_pass_us = interval
        self.next_slice_us = interval // GC_SLICES
        self._quota = 0  # keys the current interval may still examine
        self._slice = 0  # ... and per slice
        self._floor = 0  # the replicated floor of the current interval
        # the latest vv entry for this DC that each replica reported (ReplicaProgress), and its vector
        self._peer_progress: dict[int, int] = {}
        self._peer_vectors: dict[int, Vector] = {}
        self._progress_sent: dict[int, int] = {}

    def floor(self, now_us: int) -> Vector:
        """A lower bound of every snapshot this server will still read from now on: what it reports
        for the DC's horizon (``VvReport.floor``). The protocol's bound, held back by the snapshots
        of running reads and of paged SCANs' leases (``SnapshotReads.hold``)."""
        state = self.state
        return self._reads.hold(state.protocol.snapshot_floor(stable=state.stable, now_us_packed=pack(now_us)))

    def start_pass(self, now_us: int, effects: list[Effect]) -> None:
        """A new GC interval: tell the replicas how far we have their updates (the protocols whose
        stable vector does not say), fix this interval's replicated floor and budget."""
        state = self.state
        config = state.config
        self.next_pass_us = now_us + config.gc_interval_us
        if state.peers and not self._universal:
            self._send_progress(effects)
        self._floor = self.replicated_floor()
        self._quota = min(config.gc_budget, state.store.collectable_count)
        self._slice = -(-self._quota // GC_SLICES)

    def collect(self, now_us: int) -> None:
        """One slice of the interval. A GC pass in GC_SLICES slices over its interval: the keys a
        pass examines (at most the budget, each key at most once) spread out, with no single stall
        of a whole pass. Under PUT load on 10k keys a 2,000-key pass took 6-10 ms every 50 ms,
        delaying replication and stabilization by as much (3 DCs x 1 partition at saturation:
        remote visibility lag p99 ~20 ms over the UST bound -> 2-6). Slices of a tenth of the
        budget instead examined keys waiting to become collectable up to 10x as often, when the
        queue was short (RO-TX + PUT 3 DCs x 2 partitions: ~15% of the throughput)."""
        self.next_slice_us = now_us + self.state.config.gc_interval_us // GC_SLICES
        count = min(self._slice, self._quota)
        if count:
            self._quota -= count
            self.state.store.collect_some(self.universally_visible, count, tombstone_removable=self.settled,
                                          expired=lambda version: expiry.expired(version, now_us))

    # ---------------------------------------------------------------- what the replicas hold

    def _send_progress(self, effects: list[Effect]) -> None:
        """Tell the replicas how far we have their updates, when that moved since the last time."""
        state = self.state
        vv = tuple(state.vv)
        if all(vv[peer.dc] == self._progress_sent.get(peer.dc, 0) for peer in state.peers):
            return
        self._progress_sent = {peer.dc: vv[peer.dc] for peer in state.peers}
        message = ReplicaProgress(state.id, vv)
        for peer in state.peers:
            effects.append(Send(peer, message))
        state.stats.progress_messages_sent += len(state.peers)

    def on_replica_progress(self, message: ReplicaProgress, now_us: int) -> list[Effect]:
        source = message.source
        state = self.state
        if state.is_replica(source) and len(message.vv) == state.num_dcs:
            received = message.vv[state.dc]
            if received > self._peer_progress.get(source.dc, 0):
                self._peer_progress[source.dc] = received
            previous = self._peer_vectors.get(source.dc)
            self._peer_vectors[source.dc] = message.vv if previous is None else merge_max(previous, message.vv)
        return []

    def forget(self, dc: int) -> None:
        """DC ``dc`` changed membership state (``okapikv.core.membership``): what its previous
        incarnation reported holding says nothing of the new one."""
        self._peer_progress.pop(dc, None)
        self._peer_vectors.pop(dc, None)
        self._progress_sent.pop(dc, None)

    def replicated_floor(self) -> int:
        """The highest local timestamp every replica is known to hold durably: what GC may trim of
        the local versions (the catch-up log). Okapi: the USV's local entry (each replica's durable
        vv entry is at least it: reports leave only after what they cover is written). Others: the
        minimum of the replicas' ``ReplicaProgress``."""
        state = self.state
        if not state.peers:
            return ALL_TIMESTAMPS
        if self._universal:
            return state.stable[state.dc]
        return min(self._peer_progress.get(peer.dc, 0) for peer in state.peers)

    # ---------------------------------------------------------------- what may go

    def settled(self, version: Version) -> bool:
        """No version ordered below ``version`` can still arrive: every replica's FIFO stream (and
        the local clock) is past its timestamp. Only then may a tombstone be dropped; otherwise a
        late concurrent write with a smaller timestamp would become the newest version here, while
        the replicas that kept the tombstone keep the key deleted (divergence).

        And a remote tombstone stays until every other replica has it too. Under Okapi its
        universal visibility already says so (the USV); the other protocols' stable vectors speak
        for their own DC only, so their replicas' ``ReplicaProgress`` vectors must. Why: the origin
        keeps its tombstone until every replica has it (``replicated_floor``), but an origin that
        loses its disk is repaired from its replicas' stores (``okapikv.core.catchup``), and a
        replica that lacked the tombstone would otherwise never get it."""
        state = self.state
        timestamp = version.timestamp
        # Every DC's stream, a removed one's included: it may come back (``okapi dc add``) with
        # writes older than this tombstone that it never sent, which would outlive a dropped one.
        if timestamp > min(state.vv):
            return False
        source = version.source_dc
        if self._universal or source == state.dc:
            return True
        vectors = self._peer_vectors
        return all(peer.dc == source or (peer.dc in vectors and vectors[peer.dc][source] >= timestamp)
                   for peer in state.peers)

    def universally_visible(self, version: Version) -> bool:
        """Visible in every snapshot at or above the horizon, and to every GET here; and at or below
        the replicated floor, so every local version it makes collectable (all older ones in its
        chain) is at every replica already and a catch-up never needs it."""
        state = self.state
        protocol = state.protocol
        return (
            version.timestamp <= self._floor
            and protocol.visible_in_snapshot(version=version, snapshot=state.horizon)
            and protocol.visible(version=version, stable=state.stable)
        )
