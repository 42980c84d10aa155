"""Input budgets: how much memory connections may pin with frames they have not finished sending,
and how long they may take, for any stream protocol a server speaks (the native port's frames
today; any protocol whose messages arrive in pieces can use it the same way).

Why: a frame's length prefix makes the server buffer up to that many bytes before it can parse
anything, and a connection that announces a large frame and sends only part of it pins what it
sent for as long as it stays open: ten connections announcing 60 MiB and sending 40 MiB each took a
server from 108 to 508 MiB, with no end. So:

- one ``InputBudget`` per server bounds the bytes of all partially received frames together,
  counted at their announced size (what completing them would take). A connection whose new
  partial frame does not fit is refused (closed, logged, counted); the frames already admitted
  finish. ``exempt`` connections (peer links that proved their cluster id: one per peer server,
  each frame below the message limit) are counted but never refused, so replication is never
  turned away because clients filled the budget;
- a frame whose first byte arrived must be complete within ``frame_timeout_s``;
- a new connection must complete a first frame within ``first_frame_timeout_s``, and a connection
  with no complete frame for ``idle_timeout_s`` (0: never) is closed; neither applies while a frame
  is under way (the frame timeout does).

The interface, for a protocol handler: ``guard.open(label, on_expired)`` when a connection is
accepted; after each read, ``connection.progress(frames_completed, partial_bytes)`` (False: refuse
the connection, the budget cannot take its partial frame); ``connection.close()`` when it ends.
Deadlines are checked by one sweep per server (``InputGuard.start``), a few times per shortest
timeout, so a connection costs nothing per read beyond ``progress``: no timer is re-armed per frame.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from okapikv.cluster.connections import ConnectionSettings
from okapikv.wire.stats import InputFigures

log = logging.getLogger("okapikv.server")

#: Reasons a connection is closed by the guard (the keys of ``InputGuard.closed``).
BUDGET = "input_budget"
FRAME_TIMEOUT = "frame_timeout"
FIRST_FRAME_TIMEOUT = "first_frame_timeout"
IDLE_TIMEOUT = "idle_timeout"


class InputBudget:
    """Bytes of partially received frames, server-wide: ``acquire`` what a new partial frame needs,
    ``release`` it when the frame completes or its connection ends."""

    __slots__ = ("limit", "in_use", "peak")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0
        self.peak = 0

    def acquire(self, count: int, *, force: bool = False) -> bool:
        """Take ``count`` bytes; False (nothing taken) if they do not fit, unless ``force``."""
        if not force and self.in_use + count > self.limit:
            return False
        self.in_use += count
        self.peak = max(self.peak, self.in_use)
        return True

    def release(self, count: int) -> None:
        self.in_use -= count
        assert self.in_use >= 0, "released more than was acquired"


@dataclass(frozen=True, slots=True)
class InputLimits:
    """``budget_bytes`` and the timeouts in seconds (``[connections]`` of the cluster config)."""

    budget_bytes: int
    frame_timeout_s: float
    first_frame_timeout_s: float
    idle_timeout_s: float  # 0: never

    @classmethod
    def of(cls, limits: ConnectionSettings) -> InputLimits:
        """The limits ``[connections]`` sets (milliseconds there)."""
        return cls(limits.input_budget_bytes, limits.frame_timeout_ms / 1000, limits.first_frame_timeout_ms / 1000,
                   limits.idle_timeout_ms / 1000)

    @property
    def sweep_interval_s(self) -> float:
        """A quarter of the shortest timeout, within [50 ms, 1 s]: a deadline fires at most that late."""
        timeouts = [t for t in (self.frame_timeout_s, self.first_frame_timeout_s, self.idle_timeout_s) if t > 0]
        return min(1.0, max(0.05, min(timeouts) / 4))


class ConnectionInput:
    """One connection's share of the budget and its deadlines (made by ``InputGuard.open``)."""

    __slots__ = ("_guard", "label", "on_expired", "held", "frames", "opened_at", "partial_since",
                 "_frames_seen", "_last_frame_at", "exempt", "closed")

    def __init__(self, guard: InputGuard, label: str, on_expired: Callable[[str, str], None], now: float) -> None:
        self._guard = guard
        self.label = label
        self.on_expired = on_expired  # (reason, message): close the connection, saying why
        self.held = 0  # budget bytes held for the frame being received
        self.frames = 0  # complete frames so far
        self.opened_at = now
        self.partial_since: float | None = None  # when the first byte of the frame being received came
        self._frames_seen = 0  # ``frames`` at the last sweep
        self._last_frame_at = now  # when a sweep last saw ``frames`` move (the idle clock)
        self.exempt = False  # counted, never refused (see the module docstring)
        self.closed = False

    def progress(self, completed: int, partial_bytes: int) -> bool:
        """After a read: ``completed`` frames finished, and ``partial_bytes`` (announced length, 0
        if none) of a frame is now incomplete. False: the budget cannot take that partial frame;
        the caller refuses the connection (``refuse_message`` says why) and then ``close``s it."""
        if completed:
            self.frames += completed
        elif partial_bytes == self.held:
            return True  # the same frame still arriving (or nothing pending): nothing to do
        guard = self._guard
        budget = guard.budget
        if self.held:
            budget.release(self.held)
            self.held = 0
        if not partial_bytes:
            self.partial_since = None
            return True
        if not budget.acquire(partial_bytes, force=self.exempt):
            self.partial_since = None
            guard.count(BUDGET)
            return False
        self.held = partial_bytes
        if completed or self.partial_since is None:
            self.partial_since = guard.clock()
        return True

    def refuse_message(self, partial_bytes: int) -> str:
        budget = self._guard.budget
        return (f"server busy: a partial frame of {partial_bytes} bytes does not fit in the input budget "
                f"({budget.in_use} of {budget.limit} bytes held by partially received frames)")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.held:
            self._guard.budget.release(self.held)
            self.held = 0
        self._guard.forget(self)

    def expired(self, now: float, limits: InputLimits) -> tuple[str, str] | None:
        """The reason and message if a deadline has passed (called by the sweep)."""
        if self.frames != self._frames_seen:
            self._frames_seen = self.frames
            self._last_frame_at = now
        if self.partial_since is not None and now - self.partial_since >= limits.frame_timeout_s:
            return FRAME_TIMEOUT, (f"a frame of {self.held} bytes was not complete {limits.frame_timeout_s:g} s "
                                   "after its first byte")
        if self.partial_since is not None:
            return None  # a frame under way: the frame timeout governs
        if not self.frames and now - self.opened_at >= limits.first_frame_timeout_s:
            return FIRST_FRAME_TIMEOUT, f"no complete frame within {limits.first_frame_timeout_s:g} s of connecting"
        if limits.idle_timeout_s and now - self._last_frame_at >= limits.idle_timeout_s:
            return IDLE_TIMEOUT, f"idle for {limits.idle_timeout_s:g} s"
        return None


@dataclass(slots=True)
class InputGuard:
    """A server's input budget and the deadlines of all its stream connections."""

    limits: InputLimits
    clock: Callable[[], float]
    budget: InputBudget = field(init=False)
    connections: set[ConnectionInput] = field(default_factory=set, init=False)
    closed: dict[str, int] = field(default_factory=dict, init=False)  # reason -> connections closed
    _timer: asyncio.TimerHandle | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.budget = InputBudget(self.limits.budget_bytes)
        self.closed = {BUDGET: 0, FRAME_TIMEOUT: 0, FIRST_FRAME_TIMEOUT: 0, IDLE_TIMEOUT: 0}

    def open(self, label: str, on_expired: Callable[[str, str], None]) -> ConnectionInput:
        connection = ConnectionInput(self, label, on_expired, self.clock())
        self.connections.add(connection)
        return connection

    def forget(self, connection: ConnectionInput) -> None:
        self.connections.discard(connection)

    def count(self, reason: str) -> None:
        self.closed[reason] += 1

    def sweep(self) -> None:
        """Close every connection past a deadline (its ``on_expired`` closes it and logs)."""
        now = self.clock()
        expired = []
        for connection in self.connections:
            found = connection.expired(now, self.limits)
            if found is not None:
                expired.append((connection, found))
        for connection, (reason, message) in expired:
            self.count(reason)
            connection.close()
            connection.on_expired(reason, message)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Sweep every ``limits.sweep_interval_s`` on ``loop`` until ``stop``."""
        def tick() -> None:
            try:
                self.sweep()
            except Exception:  # a handler's failure must not end the sweeps
                log.exception("input guard sweep failed")
            self._timer = loop.call_later(self.limits.sweep_interval_s, tick)

        self._timer = loop.call_later(self.limits.sweep_interval_s, tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def figures(self) -> InputFigures:
        """The guard's part of the server's snapshot (``okapikv.wire.stats``)."""
        budget = self.budget
        return InputFigures(len(self.connections), budget.in_use, budget.peak, budget.limit, dict(self.closed))
