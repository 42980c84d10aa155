"""Virtual true time and the heap of timed events every part of the simulator schedules on.

An event is a tuple ``(time, seq, kind, target, payload)``: ``seq`` is a run-wide counter, so events
due at the same microsecond run in the order they were scheduled, and a run is a pure function of
what was scheduled (no tie is ever broken by comparing payloads). The heap is a plain list that
``World.run`` pops from; code that removes events (a crash, a failover) edits it in place
(``take``), because the running loop holds a reference to that list.
"""

from __future__ import annotations

import heapq
from itertools import count

INFINITY = 1 << 62

# Event kinds (ints compare fast).
DELIVER = 0  # payload: a message for server ``target`` (arrives: may queue behind a slow server)
PROCESS = 1  # payload: a message for server ``target`` whose service time has elapsed
TIMER = 2  # payload: the timer generation of server ``target`` it was armed with
REPLY = 3  # payload: a reply for client ``target``
CLIENT_NEXT = 4  # client ``target`` issues its next operation
CONTROL = 5  # payload: a callable (faults, phases, probes)
# Only under the cost model (``okapikv.sim.cpu``):
RELEASE = 6  # payload: (effects, threaded) of a call on server ``target`` whose CPU time has elapsed
CPU_FREE = 7  # a core of server ``target`` frees: run what its queue holds

Event = tuple[int, int, int, int, object]


class Events:
    """The event heap, its sequence counter and the current virtual true time (``now``, in us)."""

    def __init__(self, start_us: int) -> None:
        self.heap: list[Event] = []
        self.seq = count()
        self.now = start_us

    def push(self, at: int, kind: int, target: int, payload: object = None) -> None:
        heapq.heappush(self.heap, (at, next(self.seq), kind, target, payload))

    def take(self, target: int, kinds: tuple[int, ...]) -> list[Event]:
        """Take the events of ``kinds`` for ``target`` off the heap (in place); returns them in time order."""
        taken = sorted(event for event in self.heap if event[3] == target and event[2] in kinds)
        if taken:
            self.heap[:] = [event for event in self.heap if not (event[3] == target and event[2] in kinds)]
            heapq.heapify(self.heap)
        return taken

    def take_payload(self, payload: object) -> bool:
        """Take the events carrying ``payload`` (that very object) off the heap (in place); whether
        there was one."""
        if not any(event[4] is payload for event in self.heap):
            return False
        self.heap[:] = [event for event in self.heap if event[4] is not payload]
        heapq.heapify(self.heap)
        return True

    def scheduled(self, kind: int, target: int | None = None) -> list[Event]:
        """The events of ``kind`` (for ``target`` if given) still to run, in time order."""
        return sorted(event for event in self.heap if event[2] == kind and (target is None or event[3] == target))
