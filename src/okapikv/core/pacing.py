"""Idle pacing: how often a partition server's periodic work runs (docs/protocol.md, "Idle pacing").

A busy server stabilizes every ``stabilization_interval_us``, heartbeats after
``heartbeat_interval_us`` without replication and runs its GC slices; an idle one need not: nothing
it would announce makes anything visible. So after ``idle_after_us`` without *activity* (a client
write, a remote update, a wake-up call, a request parked) and with nothing waiting on the stable
vector or a catch-up, the server goes idle: its stabilization round, its heartbeat and its GC pass
all run once per ``idle_interval_us``, on one tick (``tick_us``: one timer per period). The first
activity snaps it back (``activity``): every periodic job falls due at once and runs at the busy
periods again. ``idle_after_us = 0`` never backs off (the paper's setting, section 5).

Why a snap-back must reach every server at once: an update of partition p in DC i becomes visible
at DC j when every DC's GSV covers it, which needs every partition of DC i to heartbeat past its
timestamp, and every DC's stabilization round to run at its busy period. The update itself reaches
partition p of every DC (the replication stream); a server with a client write or a remote update
tells the other partitions of its DC (a wake-up call, ``PartitionServer._wake``) when it snaps back,
and while it stays active at least every ``after_us / 2`` (``call_due``): the other partitions may
have gone idle while this one was busy, and a call that often keeps each of them active whenever
any partition of its DC is. So within one LAN hop after an update reaches a DC all of that DC runs
at the busy periods, and the first update after a long idle spell is visible within the same bound
as under load (the UST path plus three stabilization periods: ``tests/sim/test_idle.py``), as long
as ``idle_after_us`` is well above the UST path (a partition must not go idle again on the way).

Invariants (tested in ``tests/unit/test_core_pacing.py``): a server is idle only after
``idle_after_us`` without activity and with nothing waiting; activity always ends idleness at once;
while idle, ``tick_us`` is the only periodic deadline and it moves ``idle_interval_us`` per tick.
"""

from __future__ import annotations

from okapikv.core.config import CoreConfig

#: the call gap without backoff: no wake-up calls
NO_CALLS_US = 1 << 80


class Pacing:
    """Whether the server is idle, since when it was last active, and when its idle tick is due."""

    __slots__ = ("after_us", "interval_us", "idle", "active_us", "tick_us", "call_gap_us", "called_us")

    def __init__(self, config: CoreConfig) -> None:
        #: back off after this long without activity (0: never)
        self.after_us = config.idle_after_us
        #: the period of every periodic job while idle
        self.interval_us = config.idle_interval_us
        self.idle = False
        #: the latest activity (None until the first timer: a server starts active)
        self.active_us: int | None = None
        #: while idle: when the next tick runs the round, the heartbeat and the GC pass
        self.tick_us = 0
        #: an active server wakes its DC's other partitions at least this often (never without backoff)
        self.call_gap_us = self.after_us // 2 if self.after_us else NO_CALLS_US
        #: when it last did (``call_due``)
        self.called_us = -self.call_gap_us if self.after_us else 0

    def activity(self, now_us: int) -> bool:
        """A client write, a remote update, a wake-up call or a parked request at ``now_us``:
        whether it snaps the server back from idle (its periodic work is then due at once)."""
        self.active_us = now_us
        if not self.idle:
            return False
        self.idle = False
        return True

    def call_due(self, now_us: int) -> bool:
        """Whether activity at ``now_us`` must wake the DC's other partitions (the server snapped back,
        or its last call is ``call_gap_us`` old); if so, the call counts as made."""
        if not self.idle and now_us - self.called_us < self.call_gap_us:
            return False
        self.called_us = now_us
        return True

    def settle(self, now_us: int, *, waiting: bool) -> bool:
        """At a timer: whether the server is idle from now on. It goes idle (its first tick due at
        once) after ``after_us`` without activity; ``waiting`` (requests parked, a catch-up or
        repair running: they need the stable vector to move) counts as activity."""
        if self.active_us is None or waiting:
            self.active_us = now_us
            if self.idle:
                self.idle = False
            return False
        if not self.idle and self.after_us and now_us - self.active_us >= self.after_us:
            self.idle = True
            self.tick_us = now_us
        return self.idle
