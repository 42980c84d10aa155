"""The event-loop watchdog: whatever holds a server's event loop longer than a threshold is logged
with its site and counted (``okapi_event_loop_stalls_total``, ``okapi_event_loop_stall_seconds_total``).

Why: every connection, peer link and timer of a server shares one event loop, so one callback that
runs long (a parser working in proportion to what a header announced, a scan of a large structure,
a blocking call) delays every client of the partition and every peer at once, and nothing else
says where the time went. The standard (docs/design.md): servers never stall on input.

How, and why this way: the loop is looked at only while the process uses CPU.
``setitimer(ITIMER_PROF)`` sends SIGPROF after every ``threshold / 5`` of the process's CPU time, so
an idle server, asleep in ``epoll_wait``, gets no signal and pays nothing (a watchdog thread or a
loop timer waking every 25-50 ms took 0.15-0.3% of a core on the 2-core VM: as much again as an
idle server costs in all, docs/benchmarks.md, "Idle cost"). Python runs the handler on the main
thread, the loop's, between two bytecodes of whatever runs there, and hands it that code's frame:

- with no probe pending, it schedules one (``loop.call_soon``) and notes the time and the loop
  thread's CPU time: the probe runs as soon as the loop gets back to its ready callbacks;
- with a probe pending while the loop's thread has computed for longer than the threshold, the
  frame is what holds the loop: the first such sample is the stall's site;
- the probe, when it runs, sees how long it waited and how much of that the loop's thread spent
  computing; more than the threshold of computing is a stall: one log line (seconds waited, seconds
  computed, site) and the two counters (stalls, and seconds waited: the delay every other
  connection saw).

The test is the loop thread's CPU time, not the wall clock, so that a machine short of CPU (the
process descheduled between two short callbacks) is not taken for a slow callback; a stall is
measured from its first sample, which the kernel's profiling timer sends about ``threshold / 5`` of
CPU into it, give or take the timer's ticks (up to 62 ms seen on the loaded 2-core VM), so a stall
is counted once it computes for the threshold plus that delay. A long C call that holds the GIL
(a C parser preallocating) counts and is reported at the Python line that called it, where the
handler first runs. A callback that holds
the loop without computing (a sleep, a blocking system call) is not counted: no signal comes while
it blocks, and it is the kind of bug review and ``asyncio`` debug mode find.

Only one watchdog per process (the signal and the timer are the process's), and only on the main
thread (where Python runs signal handlers): ``start`` refuses otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

log = logging.getLogger("okapikv.server")

#: The default threshold (``okapi server --loop-stall-ms``).
DEFAULT_THRESHOLD_S = 0.050
#: SIGPROF comes after every threshold / SAMPLES_PER_THRESHOLD of the process's CPU time.
SAMPLES_PER_THRESHOLD = 5
_PACKAGE = Path(__file__).resolve().parents[1]  # .../okapikv

#: Called for each stall: seconds the loop was held, seconds of them it computed, and the site (None
#: when no sample caught it).
OnStall = Callable[[float, float, "str | None"], None]


def site_of(frame: FrameType | None) -> str | None:
    """``path:line in function`` of the innermost frame of okapikv in ``frame``'s stack (the code
    to look at), followed by the innermost frame where that is another module's (a library call)."""
    if frame is None:
        return None
    innermost = _describe(frame)
    current: FrameType | None = frame
    while current is not None:
        if Path(current.f_code.co_filename).resolve().is_relative_to(_PACKAGE):
            own = _describe(current)
            return own if current is frame else f"{own} (in {innermost})"
        current = current.f_back
    return innermost


def _describe(frame: FrameType) -> str:
    path = Path(frame.f_code.co_filename)
    try:
        shown = str(path.resolve().relative_to(_PACKAGE.parent))
    except ValueError:
        shown = "/".join(path.parts[-2:])
    return f"{shown}:{frame.f_lineno} in {frame.f_code.co_name}"


class LoopWatchdog:
    """Watches ``loop`` (module docstring); ``on_stall`` is called on the loop for each stall."""

    _active: LoopWatchdog | None = None  # the process's one watchdog

    def __init__(self, loop: asyncio.AbstractEventLoop, threshold_s: float, on_stall: OnStall) -> None:
        if not threshold_s > 0:
            raise ValueError("the watchdog's threshold must be positive")
        self._loop = loop
        self.threshold_s = threshold_s
        self._on_stall = on_stall
        self._pending_since: float | None = None  # when the pending probe was scheduled
        self._pending_cpu = 0.0  # the loop thread's CPU time then
        self._site: str | None = None  # what held the loop, sampled past the threshold
        self._previous: signal.Handlers | Callable[..., object] | int | None = None

    def start(self) -> None:
        """Install the SIGPROF handler and timer. Raises ``RuntimeError`` off the main thread or
        with a watchdog already running."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("the event-loop watchdog needs the loop on the main thread")
        if LoopWatchdog._active is not None:
            raise RuntimeError("an event-loop watchdog is already running in this process")
        LoopWatchdog._active = self
        self._previous = signal.signal(signal.SIGPROF, self._sample)
        interval = self.threshold_s / SAMPLES_PER_THRESHOLD
        signal.setitimer(signal.ITIMER_PROF, interval, interval)

    def close(self) -> None:
        """Stop the timer and put the previous SIGPROF handler back."""
        if LoopWatchdog._active is not self:
            return
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, self._previous if self._previous is not None else signal.SIG_DFL)
        LoopWatchdog._active = None

    def _sample(self, signal_number: int, frame: FrameType | None) -> None:
        """The SIGPROF handler. It runs inside whatever code the main thread is running, so it must
        never raise (the exception would surface there) and does as little as it can."""
        try:
            if self._pending_since is None:
                if not self._loop.is_closed():
                    self._pending_since, self._pending_cpu = time.monotonic(), time.thread_time()
                    self._loop.call_soon(self._probe)
            elif self._site is None and time.thread_time() - self._pending_cpu > self.threshold_s:
                self._site = site_of(frame)
        except Exception:  # the interrupted code must never see the watchdog's failure
            return

    def _probe(self) -> None:
        pending, site = self._pending_since, self._site
        self._pending_since = self._site = None
        if pending is None:
            return
        computed = time.thread_time() - self._pending_cpu
        if computed > self.threshold_s:
            self._on_stall(time.monotonic() - pending, computed, site)


def log_stall(held_s: float, computed_s: float, site: str | None, threshold_s: float) -> None:
    """The stall's log line: one line, the seconds and the site (``okapikv.server.logs``)."""
    where = site or "unknown (no sample)"
    log.warning("event loop held for %.3f s (%.3f s computing; threshold %.3f s) by %s", held_s, computed_s,
                threshold_s, where, extra={"event": "loop_stall", "held_s": round(held_s, 6),
                                           "computed_s": round(computed_s, 6), "site": where})
