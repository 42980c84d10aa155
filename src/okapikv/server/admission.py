"""Admission control: client work waits, briefly, while replication falls behind.

Why: a server takes client batches as fast as they come, and on a saturated machine the
replication and stabilization messages then wait behind them without bound: 3 DCs on 2 cores at
~10k PUT/s had replication queues growing 368 -> 551 messages over 5 s and remote visibility p99 of
250-640 ms against UST bounds of 88-118 ms; holding client intake while a replica lags, 8.6k PUT/s,
queues flat (275 -> 298) and p99 160-205 ms. Holding client intake while a replica lags makes the
accepted write rate the rate replication sustains (docs/protocol.md, "Replication and heartbeats").

``Admission.backlogged`` says when to hold: some peer link that works (connected, not cut) has a
message that has been due for more than ``ADMISSION_LAG_S`` without being sent and acknowledged, or
(with ``bounded_visibility``) a remote DC's newest visible update here is older than Okapi's UST
bound for it (docs/protocol.md, "Stabilization"). A link that is down or cut, or whose replica has
acknowledged nothing for ``ADMISSION_GIVE_UP_S``, never holds anything back: writes stay available
during a partition and queue for the DC that is away. (Judging "stuck" by how far behind a link is
instead lets a merely slow replica pass the limit under sustained overload and switch the control
off for good.) A DC more than ``VISIBILITY_GIVE_UP_US`` past its visibility bound is cut, not slow.

Every way client work enters calls the same policy, and waits at most ``ADMISSION_MAX_WAIT_S``
(looking again every ``ADMISSION_RETRY_S``): the native port's connections between callbacks
(``hold``), and the gRPC Pipeline streams, unary calls and RESP connections by awaiting ``wait``.
Each wait counts once in ``waits`` (Stats: ``driver.admission_waits``). The check is cheap enough
for every batch: a pass over the outgoing links, and the visibility bounds only with
``bounded_visibility``.
"""

from __future__ import annotations

import asyncio
import time as time_module
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from okapikv.cluster.config import ClusterConfig
from okapikv.core.messages import ServerId
from okapikv.core.timestamps import physical_of

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
#: ``bounded_visibility`` holds client work once a remote DC's newest visible update here is older
#: than the UST path plus this many stabilization periods (``visibility_bounds_us``): 1.5 periods
#: below the bound the benchmark holds Okapi to (3 periods, ``okapikv.bench.suites.acceptance``), the margin for
#: the control's own reaction (the lag goes on rising for a few ms after batches are held). 3 DCs x 1
#: partition at saturation on 2 cores, lag p99 against the bound: holding at the bound, 2-6 ms over
#: (13.2-14.1k PUT/s); at 2 periods, -1 .. +1 ms (11.5-12.7k); at 1.5, 0.3-3 ms under (10.2-12.0k).
ADMISSION_VISIBILITY_PERIODS = 1.5
#: Past its visibility threshold by more than this, a DC is cut, not slow.
VISIBILITY_GIVE_UP_US = 1_000_000


def visibility_bounds_us(config: ClusterConfig, dc: int) -> tuple[int, ...]:
    """Per DC i, how old the newest visible update of i may be at DC ``dc`` under Okapi's UST
    (section 3.3): it reaches every DC k, k's knowledge of it reaches ``dc``, plus
    ``ADMISSION_VISIBILITY_PERIODS`` stabilization periods; 0 for ``dc`` itself."""
    wan = config.wan_ms
    dcs = range(len(config.dcs))
    return tuple(
        0 if source == dc else round(1000 * (max(wan[source][k] + wan[k][dc] for k in dcs)
                                             + ADMISSION_VISIBILITY_PERIODS * config.stabilization_interval_ms))
        for source in dcs
    )


class Backlog(Protocol):
    """What admission reads of an outgoing link (``okapikv.server.links.OutgoingLink``)."""

    @property
    def last_ack_at(self) -> float: ...

    def backlog_s(self, now: float) -> float: ...


class Admission:
    """The admission policy of one server (module docstring).

    ``links``: the server's outgoing links (the live dict: links opened later count);
    ``bounds_us``: ``visibility_bounds_us``, or () without ``bounded_visibility``; ``clock_us``
    and ``stable``: the server's clock and its stable vector now; ``time``: the clock of the links'
    ``last_ack_at`` and backlogs (the event loop's, set by the node when it starts)."""

    __slots__ = ("_links", "_bounds_us", "_clock_us", "_stable", "time", "waits")

    def __init__(self, links: Mapping[ServerId, Backlog], *, bounds_us: tuple[int, ...],
                 clock_us: Callable[[], int], stable: Callable[[], Sequence[int]],
                 time: Callable[[], float] = time_module.monotonic) -> None:
        self._links = links
        self._bounds_us = bounds_us
        self._clock_us = clock_us
        self._stable = stable
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
        return self._visibility_behind()

    def _visibility_behind(self) -> bool:
        """Whether some remote DC's newest visible update here is older than its bound
        (``visibility_bounds_us``) but not by more than ``VISIBILITY_GIVE_UP_US``."""
        bounds = self._bounds_us
        if not bounds:
            return False
        now_us = self._clock_us()
        for entry, bound in zip(self._stable(), bounds, strict=True):
            if bound:
                lag = now_us - physical_of(entry)
                if bound < lag < bound + VISIBILITY_GIVE_UP_US:
                    return True
        return False

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
