"""What every mechanism of a partition server p(n, m) shares: its identity, its store, its vectors,
and the rule that guards them, the maximum clock offset (docs/protocol.md, "Timestamps and the HLC").

``PartitionState`` is the base of ``okapikv.core.server.PartitionServer``; the server's collaborators
(``stabilization``, ``reads``, ``catchup``, ``gc``, ``membership``) are given a view of it
(``ServerView``: every field read-only, plus the writers each may call, named in its own view) and
keep their own state apart. The fields, per the paper's notation:

- ``vv``: version vector, read-only here. ``vv[m]`` is the local clock (``hlc``: the HLC for Okapi,
  the last physical timestamp issued or announced for the baselines), moved by ``clock`` alone
  (``okapikv.core.clock.Hlc``, which holds its rule: never issued twice, never past the ceiling);
  ``vv[i]`` the timestamp of the latest update or heartbeat received from replica i, moved by
  ``version_vector.adopt`` alone. Replica links are FIFO, so ``vv[i]`` only grows and every update
  from i at or below it has been installed.
- ``stable``: what this server knows to be stable, used for visibility (Okapi: the USV; Cure: the
  GSV; GentleRain: the GST in every entry). Never moves backwards.
- ``gsv``: this DC's global stable vector, the entry-wise minimum of its partitions' ``vv``.
- ``horizon``: garbage-collection horizon, a lower bound of every snapshot any server of the DC will
  still read; a slice whose snapshot is below it is answered ``too_old`` and retried.
- ``stable``, ``gsv`` and ``horizon`` are moved upwards only by the methods of
  ``okapikv.core.stable.StableVectors`` (the base of ``PartitionState``: ``advance_stable``,
  ``advance_gsv``, ``advance_horizon``); the mechanisms' views show them read-only.
- ``heard``: partition of this DC -> when it last sent this server anything (a snapshot read's
  silence deadline, ``okapikv.core.reads``).
- ``parked``: the requests and slices that wait (for the clock, or for the stable time); the server
  re-runs them when their wait may be over.

The maximum clock offset (``CoreConfig.max_clock_offset_us``; the HLC paper's epsilon, CockroachDB's
max offset; docs/operations.md, "Clocks: the maximum offset"). Without it one clock an hour ahead
drags every HLC an hour ahead: its timestamps become stable, enter every session, and each PUT then
takes ``max(dependencies) + 1``. So nothing from elsewhere may move this server's state past its
``ceiling``: its clock plus the offset (or its own HLC, if that is higher already: a restart above a
persisted clock bound). A client request whose session reaches past it is refused (``OUT_OF_RANGE``)
and changes nothing; so is a snapshot slice (``SliceReply.clock_ahead_us``), and a request that would
wait longer than the offset for the clock (``too_long``: the baselines' waits). A peer's watermark (a
replication batch's timestamps, a heartbeat, a catch-up answer) beyond the clock plus the offset is
adopted into ``vv[i]`` only up to that point (``watermark``): the updates are stored, and the clamped
value stays a valid lower bound (FIFO: everything of DC i below the message's timestamp has arrived),
so nothing is lost and the stable vector never runs more than the offset ahead of this clock (GSVs
from other DCs and the reports and broadcasts inside the DC need no clamp: the GSV and the USV are
minimums that include this server's own, clamped, vector). A server whose clock is far ahead thus
keeps its own writes invisible elsewhere until the others' clocks catch up; one whose clock is far
behind holds back the stability of everyone's (the min of the vectors), as a server that is down
does. Both are counted (``stats``) and ``last_clock_offset`` describes the latest. The checks on the
per-request paths (a session's entries, a replication batch's timestamps) are inlined there, with
this module's rule: ``offset_ceiling``.

Invariants (tested in ``tests/unit/test_server_clock_offset.py``, ``tests/property/test_prop_clock_offset.py``,
``tests/property/test_prop_writers.py`` and ``tests/unit/test_core_state.py``):
- the HLC never exceeds ``max(restored clock floor, clock + max offset)`` plus the logical carry;
- the ``watermark`` of a timestamp above ``vv[dc]`` is at least ``vv[dc]`` and at most
  ``max(vv[dc], clock + max offset)``: it never moves ``vv[dc]`` back nor past the offset;
- ``vv``, ``gsv``, ``horizon`` and ``stable`` only grow (GentleRain: the GST, ``min(stable)``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mypy_extensions import mypyc_attr

from okapikv.core import counters, expiry
from okapikv.core.clock import Hlc, VersionVector
from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    CatchUpReply,
    Effect,
    ErrorCode,
    ErrorReply,
    Heartbeat,
    Message,
    ReplicateBatch,
    Respond,
    ServerId,
)
from okapikv.core.mvstore import COUNTER_MAGIC, RESERVED_PREFIXES, MultiVersionStore, Version, VisibilityPredicate
from okapikv.core.protocols import Protocol as Consistency
from okapikv.core.protocols import WaitForStable, create_protocol
from okapikv.core.stable import StableVectors
from okapikv.core.stats import ServerStats
from okapikv.core.timestamps import WaitForClock, offset_ceiling, physical_of
from okapikv.core.vectors import Vector, zeros

#: A deadline that never comes (``next_deadline`` of a mechanism with nothing to do).
NEVER = 1 << 62

Wait = WaitForClock | WaitForStable


@dataclass(slots=True)
class Parked:
    """A request (or slice) that waits: the server re-runs it once ``wait`` is over."""

    message: Message
    wait: Wait
    since_us: int


def clock_offset_error(what: str, ahead_us: int, config: CoreConfig) -> str:
    """The message of an ``OUT_OF_RANGE`` refusal: what reached how far past the clock, and the rule."""
    return (f"{what} a timestamp {ahead_us / 1000:.1f} ms ahead of this server's clock, beyond the cluster's "
            f"maximum clock offset of {config.max_clock_offset_us / 1000:g} ms: some server's clock is ahead, or "
            "this one's is behind; nothing was changed (docs/operations.md, \"Clocks: the maximum offset\")")


class ServerView(Protocol):
    """What every mechanism may read of a server's state (``PartitionState`` has it), and nothing
    to write: each mechanism's own view (``okapikv.core.gc.GcView``, ``...stabilization.StabilizationView``,
    ``...reads.ReadsView``, ``...catchup.CatchUpView``, ``...membership.MembersView``) adds what else
    it reads and the writers it may call (``clock``, ``version_vector``, ``advance_*``), so which
    mechanism moves what is stated in its signature and checked by mypy."""

    @property
    def config(self) -> CoreConfig: ...
    @property
    def id(self) -> ServerId: ...
    @property
    def dc(self) -> int: ...
    @property
    def num_dcs(self) -> int: ...
    @property
    def stats(self) -> ServerStats: ...
    @property
    def protocol(self) -> Consistency: ...
    @property
    def store(self) -> MultiVersionStore: ...
    @property
    def peers(self) -> Sequence[ServerId]: ...
    @property
    def dc_members(self) -> Sequence[ServerId]: ...
    @property
    def vv(self) -> Sequence[int]: ...
    @property
    def hlc(self) -> int: ...
    @property
    def stable(self) -> Vector: ...
    @property
    def gsv(self) -> Vector: ...
    @property
    def horizon(self) -> Vector: ...
    def is_replica(self, source: ServerId) -> bool: ...


@mypyc_attr(allow_interpreted_subclasses=True)  # a base of PartitionServer (okapikv.core.server: why)
class PartitionState(StableVectors):
    """The shared state of one partition server (module docstring), and the clock-offset rule; its
    base holds the stable vector, the GSV and the horizon and their writers (``StableVectors``)."""

    def __init__(self, config: CoreConfig, *, store: MultiVersionStore | None = None) -> None:
        """``store``: the versions to hold, an empty store by default (a test injects one that counts
        what the collector asks of it, which works compiled too: docs/operations.md, "The compiled build")."""
        self.config = config
        self.id = ServerId(config.dc, config.partition)
        self.dc = config.dc
        self.num_dcs = config.num_dcs
        self.protocol = create_protocol(config.protocol, dc=config.dc, num_dcs=config.num_dcs)
        self.store = MultiVersionStore(merged=counters.collectable) if store is None else store
        self.stats = ServerStats()
        #: ``vv`` and its writers: ``clock`` (the HLC, ``vv[m]``) and ``adopt`` (the replicas' entries)
        self.version_vector = VersionVector(config.num_dcs, config.dc, config.max_clock_offset_us)
        self.clock: Hlc = self.version_vector.hlc
        #: the version vector, read-only (a ``Sequence``): ``clock`` and ``version_vector.adopt`` move it
        self.vv: Sequence[int] = self.version_vector.entries
        # ``stable``, ``gsv`` and ``horizon`` (``StableVectors``); the horizon starts at zeros, or
        # (eventual: no snapshot is ever too old) everything
        StableVectors.__init__(self, zeros(config.num_dcs), zeros(config.num_dcs),
                               self.protocol.snapshot_floor(stable=zeros(config.num_dcs), now_us_packed=0))
        self.peers = [ServerId(dc, config.partition) for dc in range(config.num_dcs) if dc != config.dc]
        self.dc_members = [ServerId(config.dc, p) for p in range(config.num_partitions)]
        #: the DCs the stable vectors' minima count: every DC but those removed whose relay is over
        #: (``okapikv.core.membership``; ``peers`` holds the replicas of member DCs only)
        self.counted: tuple[int, ...] = tuple(range(config.num_dcs))
        self.heard: dict[int, int] = {}
        #: what waits (``Parked``): the server's waits resume them (``PartitionServer._resume_parked``)
        self.parked: list[Parked] = []
        #: the writes that wait only for the partition's next clock microsecond (Cure's and
        #: GentleRain's one write per microsecond: ``physical_put_timestamp``), oldest first: one
        #: goes per microsecond, so a queue of n costs one step each, not a pass over all n
        self.next_tick: deque[Parked] = deque()
        #: the latest input held off by the maximum clock offset: (what, from where, how far ahead
        #: of the clock in us), for the driver's log
        self.last_clock_offset: tuple[str, str, int] | None = None
        self.max_offset_us = config.max_clock_offset_us
        #: whether timestamps from sessions and snapshots are held to the ceiling: eventual takes
        #: nothing from a session and its snapshots read everything, so there is nothing to guard
        self.offset_guard = self.protocol.stabilizes

    @property
    def hlc(self) -> int:
        """The local entry of the version vector: the HLC for Okapi, the last physical timestamp
        issued or announced for the baselines."""
        return self.vv[self.dc]

    def counted_min(self, vector: Sequence[int]) -> int:
        """The minimum of ``vector``'s entries of the counted DCs (``counted``)."""
        counted = self.counted
        if len(counted) == self.num_dcs:
            return min(vector)
        return min(vector[dc] for dc in counted)

    def is_replica(self, source: ServerId) -> bool:
        """Whether ``source`` holds this partition in another DC."""
        return source.dc != self.dc and source.partition == self.id.partition and 0 <= source.dc < self.num_dcs

    # ---------------------------------------------------------------- request validation

    def reject(self, request_id: int, message: str) -> list[Effect]:
        """Refuse a malformed request (INVALID_ARGUMENT); it changed nothing."""
        self.stats.rejected_requests += 1
        return [Respond(ErrorReply(request_id, ErrorCode.INVALID_ARGUMENT, message))]

    def read_newest(self, key: bytes, visible: VisibilityPredicate, now_us: int) -> Version | None:
        """What a read of ``key`` at ``now_us`` returns: the newest version ``visible`` accepts (of
        no value once expired: ``okapikv.core.expiry.view``), or where that is a counter's, its
        merged value (``okapikv.core.counters.read_view``)."""
        version = self.store.newest(key, visible)
        value = None if version is None else version.value
        if value is None or not value.startswith(RESERVED_PREFIXES):
            return version  # a plain value: what ``expiry.view`` hands back of it, itself
        if not value.startswith(COUNTER_MAGIC):
            return expiry.view(version, now_us)
        resolved = counters.resolve(self.store.versions(key), visible, self.num_dcs)
        return counters.read_view(resolved, self.num_dcs, now_us)

    def check_key(self, key: bytes) -> str | None:
        if not key:
            return "key must not be empty"
        if len(key) > self.config.max_key_bytes:
            return f"key of {len(key)} bytes exceeds the limit of {self.config.max_key_bytes} bytes"
        return None

    # ---------------------------------------------------------------- the maximum clock offset

    def ceiling(self, now_us: int) -> int:
        """The highest timestamp this server takes from a client or a slice: its clock plus the
        maximum offset, or its own HLC when that is higher (a dependency at or below it moves
        nothing: after a restart above a persisted bound the HLC is ahead of the clock)."""
        return self.clock.ceiling(now_us)

    def too_long(self, wait: WaitForClock, now_us: int) -> bool:
        """Whether a wait for the clock outlasts the maximum offset: the clock is then not slightly
        behind but far off, and waiting would park the request for as long (an hour after a step)."""
        return wait.clock_us - now_us > self.config.max_clock_offset_us

    def note_offset(self, what: str, source: str, timestamp_us: int, now_us: int) -> int:
        """Remember an input held off by the offset bound (for the driver's log); returns how far
        ahead of the clock it was, in us."""
        ahead_us = timestamp_us - now_us
        self.last_clock_offset = (what, source, ahead_us)
        return ahead_us

    def watermark(self, message: ReplicateBatch | Heartbeat | CatchUpReply, dc: int, timestamp: int,
                  now_us: int) -> int:
        """What ``vv[dc]`` may become on a peer's ``timestamp`` (above the current ``vv[dc]``): the
        timestamp itself, or at most the clock plus the maximum offset. The clamped value is a valid
        lower bound (FIFO: every update of the DC below the message's timestamp has arrived) and moves
        up with this clock as later messages come; updates above it are stored all the same."""
        cap = offset_ceiling(now_us, self.config.max_clock_offset_us)
        if timestamp <= cap:
            return timestamp
        self.stats.clock_offset_clamps += 1
        self.note_offset(f"held back a {type(message).__name__} watermark", f"dc{dc}/p{message.source.partition}",
                         physical_of(timestamp), now_us)
        return max(self.vv[dc], cap)
