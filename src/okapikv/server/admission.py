"""Admission control: client work waits, briefly, while replication falls behind.

Why: a server takes client batches as fast as they come, and on a saturated machine the
replication and stabilization messages then wait behind them without bound: 3 DCs on 2 cores at
~10k PUT/s had replication queues growing 368 -> 551 messages over 5 s and remote visibility p99 of
250-640 ms against UST bounds of 88-118 ms; holding client intake while a replica lags, 8.6k PUT/s,
queues flat (275 -> 298) and p99 160-205 ms. Holding client intake while a replica lags makes the
accepted write rate the rate replication sustains (docs/protocol.md, "Replication and heartbeats").

``Admission.backlogged`` says when to hold: some peer link that works (connected, not cut) has a
message that has been due for more than ``ADMISSION_LAG_S`` without being sent and acknowledged. A
link that is down or cut, or whose replica has acknowledged nothing for ``ADMISSION_GIVE_UP_S``,
never holds anything back: writes stay available during a partition and queue for the DC that is
away. (Judging "stuck" by how far behind a link is instead lets a merely slow replica pass the limit
under sustained overload and switch the control off for good.) A config with
``bounded_visibility`` (an experiment on emulated WANs, ``okapikv.server.visibility_bound``) adds
one more reason to hold, ``also_hold``; without it this policy is all a server runs.

Every way client work enters calls the same policy, and waits at most ``ADMISSION_MAX_WAIT_S``
(looking again every ``ADMISSION_RETRY_S``): the native and RESP ports' connections between
callbacks (``hold``), and the gRPC Pipeline streams and unary calls by awaiting ``wait``.
Each wait counts once in ``waits`` (Stats: ``driver.admission_waits``). The check is cheap enough
for every batch: a pass over the outgoing links.
"""

from __future__ import annotations

import asyncio
import time as time_module
from collections.abc import Callable, Mapping
from typing import Protocol

from okapikv.core.messages import ServerId

#: Client work waits while a working peer link is further behind than this; it exceeds the
#: receivers' acknowledgement interval (``okapikv.server.inbound.InboundLink.ACK_INTERVAL_S``, 20 ms),
#: the deadline of every acknowledgement the receiver holds back.
ADMISSION_LAG_S = 0.075
#: ... unless the link has had no acknowledgement for this long: that replica is stuck (stopped, not
#: yet known to be dead), not slow, and local writes must not wait for it.
ADMISSION_GIVE_UP_S = 1.0
#: How often waiting client work looks again, and the longest it waits: on a machine so starved
#: that links lag even without client load (12 servers on 2 cores), holding batches until the lag
#: clears stalled clients for up to a second (PUT p99 946 ms, half the throughput).
ADMISSION_RETRY_S = 0.001
ADMISSION_MAX_WAIT_S = 0.02
class Backlog(Protocol):
    """What admission reads of an outgoing link (``okapikv.server.links.OutgoingLink``)."""

    @property
    def last_ack_at(self) -> float: ...

    def backlog_s(self, now: float) -> float: ...


class Admission:
    """The admission policy of one server (module docstring).

    ``links``: the server's outgoing links (the live dict: links opened later count);
    ``also_hold``: another reason to hold while every replica keeps up (None: none; the one there
    is, ``visibility_bound.VisibilityBound.behind``); ``time``: the clock of the links'
    ``last_ack_at`` and backlogs (the event loop's, set by the node when it starts)."""

    __slots__ = ("_links", "_also_hold", "time", "waits")

    def __init__(self, links: Mapping[ServerId, Backlog], *, also_hold: Callable[[], bool] | None = None,
                 time: Callable[[], float] = time_module.monotonic) -> None:
        self._links = links
        self._also_hold = also_hold
        self.time = time
        self.waits = 0

    def backlogged(self) -> bool:
        """Whether client work should wait now."""
        links = self._links
        if not links:
            return False
        now = self.time()
        if any(now - link.last_ack_at >= ADMISSION_GIVE_UP_S for link in links.values()):
            return False  # a replica is stuck or away: local writes never wait for it
        if any(link.backlog_s(now) > ADMISSION_LAG_S for link in links.values()):
            return True
        return self._also_hold is not None and self._also_hold()

    def hold(self, since: float | None) -> float | None:
        """For a transport driven by callbacks, once ``backlogged`` said yes: ``since`` is when this
        connection's wait began (None: it was not waiting). Returns when its wait began, to hold
        its work and ask again in ``ADMISSION_RETRY_S``, or None once it has waited
        ``ADMISSION_MAX_WAIT_S``: go ahead."""
        now = self.time()
        if since is None:
            self.waits += 1
            return now
        return since if now - since < ADMISSION_MAX_WAIT_S else None

    async def wait(self) -> None:
        """Once ``backlogged`` said yes: wait until it says no, at most ``ADMISSION_MAX_WAIT_S``."""
        self.waits += 1
        deadline = self.time() + ADMISSION_MAX_WAIT_S
        while True:
            await asyncio.sleep(ADMISSION_RETRY_S)
            if not self.backlogged() or self.time() >= deadline:
                return
