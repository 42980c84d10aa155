"""Each server's CPU under the cost model (``okapikv.sim.cost``): ``cores`` cores behind one FIFO queue.

What a server is given (a message, its timer, its collocated clients' work) waits in the queue
until a core is free; a core then runs it: the call into the core happens when it starts, and what
it emits (``Send``, ``Respond``) leaves when its cost has elapsed, in the order the calls started
(the links stay FIFO: a heartbeat never overtakes the updates it covers, whichever core ran what).
The call's cost (``Costs``) is known once it has run, from the message and its effects, so the core
is busy from the start for that long. This is CC-SIM's CPU queue (the research group's simulator of
these protocols): a job's events are delayed by the CPU time it used.

With the ``thread`` blocking model a client request or a slice also needs one of the server's
``threads``: it holds it while it runs and while it is parked (``PartitionServer.parked_count``);
when all are held the queue's client requests and slices wait (in order) while other work goes
past them. ``max_blocked`` records the most requests parked at once, per server. A blocked thread
also wakes every ``poll_ms`` to check its condition (the paper's lineage: a RO-TX's thread polls
the stable time; docs/simulated.md, "The cost of a blocked request"): the server's parked requests
are integrated over time, and each timer run pays ``wake_us`` for every wake since the last one
(a wake costs the machine CPU at about the rate it happens, without an event per wake).

With ``shared_machine`` one queue and one set of cores serve every server and client (a deployment
on one host); the order of each server's effects is kept per server as above.

A pause (SIGSTOP) moves the server's queued messages to its inbox; a crash is ``kill -9`` after
the calls that had started: their effects are out (``flush``), what
still waited in the queue is lost as a crashed server's inbox is (peers' messages are resent to
the next incarnation, clients resend their requests).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from itertools import count
from typing import Protocol

from okapikv.core.messages import (
    DeleteRequest,
    Effect,
    ExpireRequest,
    GetRequest,
    IncrRequest,
    Message,
    PutRequest,
    ReadTxRequest,
    ScanRequest,
    ScanSlice,
    SwapRequest,
    TxSlice,
)
from okapikv.core.server import PartitionServer
from okapikv.sim.cost import Costs
from okapikv.sim.events import CPU_FREE, INFINITY, RELEASE, Event


class Host(Protocol):
    """What the CPU queues need of the world (``okapikv.sim.world.World``) they run in."""

    now: int
    heap: list[Event]
    seq: count[int]
    servers: list[PartitionServer]
    paused: list[bool]
    service_us: list[int]
    work_us: Callable[[int, Message], int] | None

    def take(self, target: int, kinds: tuple[int, ...]) -> list[Event]: ...

    def _process(self, index: int, message: Message) -> None: ...

    def _on_timer(self, index: int) -> None: ...

    def _apply(self, index: int, effects: list[Effect]) -> None: ...

_THREADED = frozenset({GetRequest, PutRequest, SwapRequest, DeleteRequest, IncrRequest, ExpireRequest, ReadTxRequest,
                       ScanRequest, TxSlice, ScanSlice})


class TimerRun:
    """The queue's entry for a server's timer run (one object: timer runs carry nothing)."""


TIMER_RUN = TimerRun()


class ClientWork:
    """A collocated client's CPU time for one operation, on its host server's cores."""

    __slots__ = ("cost_us",)

    def __init__(self, cost_us: float) -> None:
        self.cost_us = cost_us


Job = Message | TimerRun | ClientWork


class Cpu:
    def __init__(self, world: Host, costs: Costs) -> None:
        self.world = world
        self.costs = costs
        profile = costs.profile
        servers = len(world.servers)
        #: each server's machine: its own, or one for the whole deployment (``shared_machine``)
        self.shared = profile.shared_machine
        self.host_of = [0] * servers if self.shared else list(range(servers))
        hosts = 1 if profile.shared_machine else servers
        self.cores = profile.cores
        self.threads = profile.threads if profile.blocking == "thread" else 0
        self.free_at = [[0.0] * profile.cores for _ in range(hosts)]
        self.queue: list[deque[tuple[int, int, Job]]] = [deque() for _ in range(hosts)]
        #: the thread model's client requests and slices, waiting for a core and a thread
        self.thread_queue: list[deque[tuple[int, int, Job]]] = [deque() for _ in range(hosts)]
        self.wake_at = [INFINITY] * hosts
        self.busy_us = [0.0] * hosts
        self.max_queued = [0] * hosts
        self.running_threads = [0] * servers
        self.pending_releases = [0] * servers
        self.last_release = [0] * servers
        self.max_blocked = [0] * servers
        #: the thread model's polling: a wake's CPU per microsecond of one blocked request, and
        #: each server's blocked request-microseconds not yet charged (since ``blocked_at``)
        polls = self.threads and profile.wake_us and profile.poll_ms
        self.wake_per_us = profile.wake_us / (profile.poll_ms * 1000) if polls else 0.0
        self.blocked_us = [0.0] * servers
        self.blocked_at = [0] * servers
        self._seq = count()
        #: set while a call runs: ``World._apply`` collects its effects here instead of carrying them out
        self.deferring = False
        self.deferred: list[Effect] = []

    # ================================================================ the queue

    def arrive(self, index: int, job: Job) -> None:
        """``job`` reaches server ``index`` (not paused): queued, and run if a core is free."""
        host = self.host_of[index]
        queue = self.thread_queue[host] if self.threads and type(job) in _THREADED else self.queue[host]
        queue.append((next(self._seq), index, job))
        waiting = len(self.queue[host]) + len(self.thread_queue[host])
        if waiting > self.max_queued[host]:
            self.max_queued[host] = waiting
        self.pump(host)

    def pump_server(self, index: int) -> None:
        self.pump(self.host_of[index])

    def _threads_free(self, index: int) -> bool:
        return self.running_threads[index] + self.world.servers[index].parked_count < self.threads

    def pump(self, host: int) -> None:
        """Run queued jobs on the host's free cores, in order; wake up when the next core frees."""
        world = self.world
        now = world.now
        cores = self.free_at[host]
        queue, thread_queue = self.queue[host], self.thread_queue[host]
        while queue or thread_queue:
            free = min(cores)
            if free > now:
                break
            core = cores.index(free)  # the first core free soonest
            chosen = queue
            if thread_queue and (not queue or thread_queue[0][0] < queue[0][0]):
                if self._threads_free(thread_queue[0][1]):
                    chosen = thread_queue
                elif self.shared:  # another server's request may have a thread
                    self._promote(thread_queue)
                    if self._threads_free(thread_queue[0][1]):
                        chosen = thread_queue
            if not chosen:
                break  # only client requests and slices wait, and every thread is held
            _, index, job = chosen.popleft()
            self._run(index, host, core, job, threaded=chosen is thread_queue)
        if queue or thread_queue:
            at = math.ceil(min(cores))
            if at > now and (self.wake_at[host] <= now or at < self.wake_at[host]):
                self.wake_at[host] = at
                heapq.heappush(world.heap, (at, next(world.seq), CPU_FREE, host, None))

    def _promote(self, thread_queue: deque[tuple[int, int, Job]]) -> None:
        """On a shared machine: move the first waiting job of a server with a free thread to the
        front (the jobs of servers whose threads are all held keep their order behind it)."""
        for position, (_, index, _) in enumerate(thread_queue):
            if self._threads_free(index):
                entry = thread_queue[position]
                del thread_queue[position]
                thread_queue.appendleft(entry)
                return

    def _run(self, index: int, host: int, core: int, job: Job, *, threaded: bool) -> None:
        world = self.world
        now = world.now
        effects: list[Effect] = []
        if type(job) is ClientWork:
            cost = job.cost_us
        else:
            server = world.servers[index]
            parked = server.parked_count
            if self.wake_per_us:
                self.blocked_us[index] += parked * (now - self.blocked_at[index])
                self.blocked_at[index] = now
            gc_slice = server.gc.next_slice_us
            self.deferring, self.deferred = True, effects
            try:
                if job is TIMER_RUN:
                    world._on_timer(index)
                else:
                    world._process(index, job)  # type: ignore[arg-type]
            finally:
                self.deferring, self.deferred = False, []
            costs = self.costs
            if job is TIMER_RUN:
                cost = costs.timer_us(effects, gc_slice=server.gc.next_slice_us != gc_slice)
                if self.wake_per_us:
                    cost += self.blocked_us[index] * self.wake_per_us
                    self.blocked_us[index] = 0.0
            else:
                cost = costs.message_us(job, effects)  # type: ignore[arg-type]
                if world.work_us is not None:
                    cost += world.work_us(index, job)  # type: ignore[arg-type]  # a large scan's slice
            after = server.parked_count
            if after < parked:
                cost += costs.profile.resume_us * (parked - after)
            if after > self.max_blocked[index]:
                self.max_blocked[index] = after
            cost += world.service_us[index]
        end = now + cost
        self.free_at[host][core] = end
        self.busy_us[host] += cost
        release = max(math.ceil(end), self.last_release[index])
        if release <= now and not self.pending_releases[index]:
            if effects:
                world._apply(index, effects)
            return
        if not effects and not threaded:
            return
        self.last_release[index] = release
        self.pending_releases[index] += 1
        if threaded:
            self.running_threads[index] += 1
        heapq.heappush(world.heap, (release, next(world.seq), RELEASE, index, (effects, threaded)))

    def release(self, index: int, payload: tuple[list[Effect], bool]) -> None:
        """A job's cost has elapsed: its effects leave, its thread is free."""
        effects, threaded = payload
        self.pending_releases[index] -= 1
        if threaded:
            self.running_threads[index] -= 1
        if effects:
            self.world._apply(index, effects)
        if threaded:
            self.pump(self.host_of[index])

    def wake(self, host: int) -> None:
        """A ``CPU_FREE`` event: pump, unless a later pump superseded this wake-up (``wake_at`` moved
        to another instant): such a pump would run nothing, as none of the host's cores frees before
        ``wake_at``, and would clear ``wake_at`` so that every later pump scheduled one more
        wake-up, which fired and rescheduled in turn (millions of idle events per simulated second)."""
        if self.wake_at[host] != self.world.now:
            return
        self.wake_at[host] = INFINITY
        self.pump(host)

    # ================================================================ pauses and crashes

    def _take(self, index: int) -> list[Job]:
        """Take server ``index``'s jobs off its host's queues, in the order they arrived."""
        host = self.host_of[index]
        taken: list[tuple[int, int, Job]] = []
        for queue in (self.queue[host], self.thread_queue[host]):
            kept = [entry for entry in queue if entry[1] != index or type(entry[2]) is ClientWork]
            taken += [entry for entry in queue if entry[1] == index and type(entry[2]) is not ClientWork]
            queue.clear()
            queue.extend(kept)
        return [job for _, _, job in sorted(taken, key=lambda entry: entry[0])]

    def paused(self, index: int) -> list[Message]:
        """Server ``index`` is stopped: the messages its queue held wait in its inbox, in order
        (its timer runs are dropped: the resume re-arms the timer)."""
        return [job for job in self._take(index) if job is not TIMER_RUN]  # type: ignore[misc]

    def flush(self, index: int) -> None:
        """Server ``index`` is killed: what its started calls emitted leaves now, in order."""
        for event in self.world.take(index, (RELEASE,)):
            effects: list[Effect] = event[4][0]  # type: ignore[index]
            if effects:
                self.world._apply(index, effects)
        self.pending_releases[index] = self.running_threads[index] = 0
        self.last_release[index] = self.blocked_at[index] = self.world.now
        self.blocked_us[index] = 0.0  # the killed server's blocked threads are gone

    def drop(self, index: int) -> list[Message]:
        """The crashed server's queue is lost: its messages (for ``World._hold``); its timer runs
        dropped. On its own machine, the cores are idle from now."""
        lost = self.paused(index)
        if not self.shared:
            self.free_at[index] = [float(self.world.now)] * self.cores
        return lost

    def utilization(self, host: int, elapsed_us: int) -> float:
        """Share of machine ``host``'s cores busy over ``elapsed_us``."""
        return self.busy_us[host] / (elapsed_us * self.cores) if elapsed_us else 0.0
