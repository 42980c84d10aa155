"""Group commit: many core calls, one log record, one fdatasync (driver side, asyncio).

The driver hands every core call's ``Changes`` to ``stage`` and gets back the number of the commit
group the call's effects must wait for (``required``); when a group becomes durable, ``durable``
moves up and ``on_durable`` runs, and the driver releases the effects waiting for it, in order.
Groups are written one at a time, in order, by one worker thread that encodes, appends and
fdatasyncs each (``LoggedStore.prepare``/``finish``/``record``) and then takes the next group itself
when calls that need one arrived meanwhile (pipelined: the loop's thread is not on the path from one
fdatasync to the next, and the worker wakes the loop once per durable group, ``_finished``). The
calls that arrive while a group's fsync runs join the next group, so a group holds what the
concurrency puts in it; an idle worker is started at the end of the event-loop turn, so the calls
of one turn share a group. Maintenance and space checks run on the same worker, and no group is
written while they do. ``_lock`` guards the one hand-over between the threads: the staged group.

What makes an effect wait (the "required" group) and what does not:

- a version the call (or any earlier call) inserted: everything that leaves afterwards may reveal
  it (a reply, a read of it, a replicated update), so it must survive a crash first;
- a clock bound: every local timestamp the effects may carry (the core's clock, ``vv[m]``) must be
  below a durable bound ``B`` (physical microseconds), because a restarted server starts its clock
  at ``B`` (``recovery``). The bound is kept ``clock_lead_us`` ahead and extended when the clock
  gets within half of that, in a group nobody waits for; only a jump of the clock past it (a
  client's dependency from a DC whose clock runs ahead) makes effects wait for a new bound;
- not GC removals nor vector-only changes (heartbeats moving ``vv``): losing them in a crash loses
  nothing a reader relied on (a removed version reappearing is collected again; a ``vv`` entry
  recovered lower only makes catch-up ask for a little more). They ride with the next group, and a
  lone group of them is written after ``lazy_s`` so the stored state stays fresh.

On the event loop (``on_loop``, what a server does): the group staged in a turn is written by the
loop's own thread at the end of that turn, synchronously (Redis's ``appendfsync always``, whose main
thread writes and fsyncs its AOF before it sends the turn's replies): ``_start`` runs as the turn's
first ready callback after the calls that staged it (or earlier, from ``commit_due``, which a port
calls before it writes its replies), encodes the record, makes the one ``O_DSYNC`` write and releases
every effect of the turn, so a connection's reads and writes leave in one write. No worker thread,
no interpreter lock handed back and forth, no cross-thread wake-up per group; while the loop is in
the write, requests pile up in the sockets and the next turn serves them as one batch, so a group
grows with the load by itself. What may block stays off the loop: writes slower than
``SLOW_WRITE_S`` (most of the recent ones, or one past ``STALL_WRITE_S``) send the next groups to
the worker (a slow disk would otherwise stall every read for as long as each write), and they come
back once ``FAST_WRITES_TO_RETURN`` worker writes in a row were fast (more after each quick
relapse); a full disk (its checkpoints and retries), maintenance, the spare segment's zeros and
the checkpoints stay on their threads and process (docs/storage.md).

A GET's reply reveals one key's versions, so it needs less than ``required`` (``read_need``): the
newest group that inserted a version of that key, if not yet durable, and the clock bound. The host
releases such a reply at once when both are durable (``okapikv.core.host``), so a durable server's
reads of settled keys do not pay a group cycle.

A failed commit is fatal (``on_failure``): the writes of that group are applied in memory but not
durable, and serving on would acknowledge them. Except for lack of space (``space``): the reserve is
deleted and the same group is retried (up to ``FULL_RETRIES`` times, ``FULL_RETRY_S`` apart), and
while the disk is full (``disk_full``) the driver refuses new writes and WAL space is reused after
every group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from okapikv.core.server import Changes
from okapikv.core.timestamps import physical_of
from okapikv.storage.commit_rates import CommitRates
from okapikv.storage.logged_store import LoggedStore
from okapikv.storage.space import CHECK_INTERVAL_S, DiskSpace, is_disk_full
from okapikv.storage.sqlite import CommitGroup, SqliteStore, State

log = logging.getLogger("okapikv.storage")

DEFAULT_CLOCK_LEAD_US = 1_000_000
DEFAULT_LAZY_S = 0.5
DEFAULT_MAINTENANCE_S = 10.0
#: the free space is looked at after a group at most this often while the disk is not full
SPACE_CHECK_S = 0.05
#: a group whose commit found the disk full is retried this often, this many times, then fatal
FULL_RETRY_S = 0.5
FULL_RETRIES = 20
#: ``on_loop``: when more than half of the last ``RECENT_WRITES`` writes on the event loop's thread
#: took longer, the next groups go to the worker: the loop waits out its write doing nothing, while
#: the worker's hand-offs cost the loop about 0.15-0.35 ms a group, so a slower write costs more on
#: the loop (docs/storage.md, "A slow disk"); a majority, since a thread of a loaded machine is
#: descheduled for milliseconds now and then, whatever it does
SLOW_WRITE_S = 0.001
RECENT_WRITES = 16
#: ... and one write on the loop longer than this sends them to the worker at once
STALL_WRITE_S = 0.02
#: ... and this many worker writes in a row under ``SLOW_WRITE_S`` bring them back to the loop,
#: doubled (up to ``MAX_FAST_WRITES_TO_RETURN``) each time the loop falls back again within
#: ``SHORT_LOOP_GROUPS`` groups of its return: a disk slow for the loop and fast for the worker (a
#: process whose only thread waits for the disk wakes later, docs/benchmarks.md) is probed ever less
FAST_WRITES_TO_RETURN = 16
MAX_FAST_WRITES_TO_RETURN = 4096
SHORT_LOOP_GROUPS = 256
#: such a fallback is logged at most this often
SLOW_LOG_S = 60.0


class GroupCommitter:
    def __init__(
        self,
        store: LoggedStore | SqliteStore,
        *,
        on_durable: Callable[[], None],
        on_failure: Callable[[BaseException], None],
        clock_lead_us: int = DEFAULT_CLOCK_LEAD_US,
        lazy_s: float = DEFAULT_LAZY_S,
        maintenance_s: float = DEFAULT_MAINTENANCE_S,
        space: DiskSpace | None = None,
        operations: Callable[[], int] | None = None,
        on_loop: bool = False,
    ) -> None:
        """``operations``: the server's count of client operations so far (``commit_rates``:
        operations per fsync); ``on_loop``: write each group on the event loop's thread at the end
        of the turn that staged it, the worker taking over while writes are slow (module
        docstring); else every group on the worker."""
        self.store = store
        self.space = space
        #: less free space than the reserve: the driver refuses writes (``space``)
        self.disk_full = False
        self._full_retries = 0
        self._space_timer: asyncio.TimerHandle | None = None  # re-checks an idle full disk
        self._space_checked = float("-inf")  # when the worker last looked at the free space (monotonic)
        self._on_durable = on_durable
        self._on_failure = on_failure
        self.clock_lead_us = clock_lead_us
        self.lazy_s = lazy_s
        self.maintenance_s = maintenance_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="okapi-storage")
        self._loop: asyncio.AbstractEventLoop | None = None
        self.durable = 0  # every group numbered <= durable is on disk
        self.required = 0  # the highest group some effect waits for
        self.bound_required = 0  # the highest group whose clock bound some effect waits for
        #: key -> the newest group that inserted a version of it, while that group is not durable
        self._unsettled: dict[bytes, int] = {}
        self._inserting = 0  # the newest group that inserted a version (the most any entry names)
        self.durable_bound_us = 0
        self._next = CommitGroup(1, [])
        self._next_urgent = False
        #: the newest group handed to the worker (written or not: its clock bound is promised)
        self._in_flight: CommitGroup | None = None
        #: the worker is writing groups (``_write_groups``) or retrying one: no ``_start`` meanwhile
        self._writing = False
        #: guards what the loop stages and the worker takes (``_next``, ``_next_urgent``, ``_writing``)
        self._lock = threading.Lock()
        self._worker_jobs = 0  # maintenance or space checks on the worker: no group starts meanwhile
        self._soon: asyncio.Handle | None = None  # _start at the end of this loop turn
        self._lazy: asyncio.TimerHandle | None = None  # _start after lazy_s (vector-only groups)
        self._last_state: State | None = None
        self._last_maintenance = time.monotonic()
        self._failed: BaseException | None = None
        self._closed = False
        # counters (``stats``)
        self.groups_written = 0
        self.versions_written = 0
        self.versions_deleted = 0
        self.commit_seconds = 0.0
        #: from each append's return on the worker to the loop releasing the group's effects
        self.release_lag_seconds = 0.0
        self.max_commit_seconds = 0.0
        self.bound_waits = 0
        self.full_commits = 0  # commits that failed for lack of space (and were retried)
        self._operations = operations
        self.operations_committed = 0  # client operations so far as of the last group (a counter)
        self._rates = CommitRates()
        self.on_loop = on_loop
        #: ``on_loop`` and no slow write since the worker's last run of fast ones: groups are
        #: written on the loop (read by the worker, which then stops pipelining)
        self._loop_writes = on_loop
        self._fast_writes = 0  # the worker's writes in a row under SLOW_WRITE_S while the loop's are off
        self._return_after = FAST_WRITES_TO_RETURN  # fast worker writes that bring the loop's back
        self._loop_stint = 0  # groups written on the loop since its writes last came back
        #: whether each of the last ``RECENT_WRITES`` writes on the loop was slow, and how many were
        self._recent: deque[bool] = deque()
        self._recent_slow = 0
        self.loop_groups = 0  # groups written on the loop's thread (the rest on the worker)
        self.slow_fallbacks = 0  # times a slow write on the loop sent the groups to the worker
        self._slow_logged = float("-inf")  # when a fallback was last logged (perf_counter)

    # ---------------------------------------------------------------- life cycle

    def open(self, hlc: int, now_us: int) -> None:
        """Persist the first clock bound of this incarnation (synchronously, before serving)."""
        self._loop = asyncio.get_running_loop()
        bound = max(physical_of(hlc), now_us) + self.clock_lead_us
        self.store.commit(CommitGroup(0, [], None, bound))
        self.durable_bound_us = bound

    async def close(self, hlc: int) -> None:
        """Write what is staged and a final clock bound just above ``hlc`` (nothing is issued
        after it: the driver stops calling the core first), then close the store."""
        if self._closed:
            return
        self._closed = True
        self._cancel_starts()
        if self._space_timer is not None:
            self._space_timer.cancel()
        while self._writing and self._failed is None:
            await asyncio.sleep(0.001)
        if self._failed is None:
            group = self._next
            group.clock_bound_us = physical_of(hlc) + 1
            loop = asyncio.get_running_loop()
            try:
                await loop.run_in_executor(self._executor, self.store.commit, group)
                self.durable = group.number
                self._on_durable()
            except Exception as error:
                log.error("final commit failed: %s", error)
        await asyncio.get_running_loop().run_in_executor(self._executor, self.store.close)
        self._executor.shutdown(wait=True)

    # ---------------------------------------------------------------- staging

    def stage(self, changes: Changes, hlc: int) -> int:
        """Add one core call's changes to the next group; returns the group its effects need."""
        with self._lock:  # the worker may be taking ``_next`` this moment (``_write_groups``)
            group = self._next
            store = changes.store
            if store:
                group.changes.extend(store)
                number = group.number
                unsettled = self._unsettled
                inserted = 0
                for key, _, was_inserted in store:
                    if was_inserted:
                        unsettled[key] = number
                        inserted += 1
                if inserted:
                    group.inserted += inserted
                    self.required = self._inserting = number
                    self._next_urgent = True
            group.state = State(changes.vv, changes.stable, changes.gsv, changes.horizon)
            self._stage_bound(physical_of(hlc))
        self._schedule()
        return self.required

    def _stage_bound(self, physical: int) -> None:
        lead = self.clock_lead_us
        group = self._next
        if physical >= self.durable_bound_us:
            in_flight = self._in_flight
            if in_flight is not None and in_flight.clock_bound_us is not None and physical < in_flight.clock_bound_us:
                self.bound_required = max(self.bound_required, in_flight.number)
                self.required = max(self.required, in_flight.number)
                return
            if group.clock_bound_us is None or physical >= group.clock_bound_us:
                group.clock_bound_us = physical + lead
            self.bound_required = max(self.bound_required, group.number)
            self.required = max(self.required, group.number)
            self._next_urgent = True
            self.bound_waits += 1
            return
        promised = max(
            self.durable_bound_us,
            (self._in_flight.clock_bound_us or 0) if self._in_flight is not None else 0,
            group.clock_bound_us or 0,
        )
        if physical + lead // 2 >= promised:
            group.clock_bound_us = physical + lead  # extend ahead of use: nobody waits for it
            self._next_urgent = True

    def read_need(self, key: bytes) -> int:
        """The group a reply revealing ``key``'s versions (and local timestamps up to the clock
        staged last) waits for: the newest group that inserted a version of ``key`` while it is not
        durable, or the one holding the clock bound, whichever is later."""
        need = self._unsettled.get(key, 0)
        return need if need > self.bound_required else self.bound_required

    def _has_work(self) -> bool:
        group = self._next
        return (
            bool(group.changes)
            or group.clock_bound_us is not None
            or (group.state is not None and group.state != self._last_state)
        )

    def _schedule(self) -> None:
        if self._writing or self._blocked():
            return  # the writing worker takes the next group itself; a worker job restarts it
        assert self._loop is not None
        if self._next_urgent:
            if self._soon is None:
                self._soon = self._loop.call_soon(self._start)
        elif self._soon is None and self._lazy is None and self._has_work():
            self._lazy = self._loop.call_later(self.lazy_s, self._start)

    def _cancel_starts(self) -> None:
        for handle in (self._soon, self._lazy):
            if handle is not None:
                handle.cancel()
        self._soon = self._lazy = None

    # ---------------------------------------------------------------- writing

    def _start(self) -> None:
        """On the loop: write the staged group here (``on_loop``, ``_write_here``), or hand it to
        the worker (``_write_groups``) when it is idle."""
        self._cancel_starts()
        group: CommitGroup | None = None
        with self._lock:
            if self._writing or self._blocked() or not self._has_work():
                return
            if self._writes_on_loop():
                group = self._take()
            else:
                self._writing = True
        if group is None:
            self._executor.submit(self._write_groups)
        else:
            self._write_here(group)

    def commit_due(self) -> None:
        """Before a port writes its replies: the group staged in this turn, if one is to be written
        on the loop at its end, is written now, so the replies it holds leave in the same write
        (a port whose batch run writes before the turn's end: ``okapikv.resp.batch``)."""
        if self._soon is not None and self._writes_on_loop():
            self._start()

    def _writes_on_loop(self) -> bool:
        """Whether the loop's thread writes the next group (``on_loop``, no slow write lately, and
        room on the disk: a full disk's checkpoints and retries are the worker's)."""
        return self._loop_writes and not self.disk_full

    def _take(self) -> CommitGroup:
        """The staged group, now in flight (the caller holds ``_lock``)."""
        group = self._next
        self._in_flight = group
        self._next = CommitGroup(group.number + 1, [])
        self._next_urgent = False
        return group

    def _write_here(self, group: CommitGroup) -> None:
        """On the loop's thread: encode, write and release ``group`` (``on_loop``); a write slower
        than ``SLOW_WRITE_S`` sends the next groups to the worker."""
        started = time.perf_counter()
        try:
            full = self._commit(group)
        except BaseException as error:
            self._writing = True  # in flight until it is retried on a full disk, or fatal
            self._failed_commit(group, error, started)
            return
        appended = time.perf_counter()
        self.loop_groups += 1
        self._loop_stint += 1
        if self._slow_on_loop(appended - started):
            self._loop_writes = False
            self._recent.clear()
            self._recent_slow = 0
            self._fast_writes = 0
            self.slow_fallbacks += 1
            self._return_after = (min(2 * self._return_after, MAX_FAST_WRITES_TO_RETURN)
                                  if self._loop_stint < SHORT_LOOP_GROUPS else FAST_WRITES_TO_RETURN)
            if appended - self._slow_logged >= SLOW_LOG_S:
                self._slow_logged = appended
                log.info("%s: a commit took %.1f ms on the event loop; the storage worker writes the next "
                         "groups until its writes are fast (%d fallbacks so far)", self.store.directory,
                         1000 * (appended - started), self.slow_fallbacks, extra={"event": "slow_commit"})
        self._last_state = group.state
        self._finished(group, full, started, appended)

    def _slow_on_loop(self, seconds: float) -> bool:
        """Whether the loop's writes are slow, after one that took ``seconds`` (``SLOW_WRITE_S``)."""
        slow = seconds > SLOW_WRITE_S
        recent = self._recent
        recent.append(slow)
        self._recent_slow += slow
        if len(recent) > RECENT_WRITES:
            self._recent_slow -= recent.popleft()
        return seconds > STALL_WRITE_S or 2 * self._recent_slow > RECENT_WRITES

    def _blocked(self) -> bool:
        return bool(self._worker_jobs) or self._closed or self._failed is not None

    def _write_groups(self) -> None:
        """On the worker: write the staged group, then, for as long as calls that need one keep
        arriving, the next one at once (pipelined: the group staged while a group's fdatasync ran
        is taken the moment it returns, without a round trip through the event loop). The loop
        hears of each durable group in order (``_finished``, by ``call_soon_threadsafe``, once per
        group); the worker stops when nothing urgent is staged, for a worker job, a close or a
        failure, and the loop's ``_start`` sets it going again."""
        first = True
        while True:
            with self._lock:
                ready = self._has_work() if first else self._next_urgent
                if not ready or self._blocked() or self._writes_on_loop():
                    self._writing = False  # (back on the loop: its ``_start`` writes what is staged)
                    break
                group = self._take()
            first = False
            started = time.perf_counter()
            try:
                full = self._commit(group)
            except BaseException as error:  # the loop decides: retry on a full disk, else fatal
                self._post(self._failed_commit, group, error, started)
                return  # ``_writing`` stays set: the group is still in flight
            self._last_state = group.state
            self._post(self._finished, group, full, started, time.perf_counter())
        self._post(self._schedule)  # a group nobody waits for may still be staged (``lazy_s``)

    def _post(self, callback: Callable[..., None], *args: object) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is left to tell
            self._loop.call_soon_threadsafe(callback, *args)

    def _commit(self, group: CommitGroup) -> bool:
        """On the worker: encode, append and fdatasync ``group``; then whether the disk is below its
        reserve (``space``), looked at after at most ``SPACE_CHECK_S`` (after every group while
        full). The statvfs call is a few microseconds, but like the append it lets go of the
        interpreter lock, and taking it back from a busy event loop waits up to the switch interval
        (0.5 ms) on the path to the next group; the reserve holds far more than a server writes in
        ``SPACE_CHECK_S``, and an append that finds no space is retried from the reserve anyway."""
        self.store.prepare(group)
        self.store.finish()
        now = time.monotonic()
        if not self.disk_full and now - self._space_checked < SPACE_CHECK_S:
            return False
        self._space_checked = now
        return self._space_low()

    def _failed_commit(self, group: CommitGroup, error: BaseException, started: float) -> None:
        """On the loop: a group's commit failed (``_retry_full``, else fatal)."""
        if self._retry_full(group, error):
            return
        self._writing = False
        self._failed = error
        self._on_failure(error)

    def _finished(self, group: CommitGroup, full: bool, started: float, appended: float | None = None) -> None:
        """On the loop, once per durable group, in order: count it in the commit record (before it
        is reported durable: ``commit_record``; the worker may have appended later groups, which
        the record may then count too), release what waited for it. ``appended``: when the
        worker's append returned (``release_lag_seconds``: how long the loop took to hear of it)."""
        self.store.record()
        self._full_retries = 0
        now = time.perf_counter()
        if appended is not None:
            self.release_lag_seconds += now - appended
            if self.on_loop and not self._loop_writes:  # a worker's write: fast enough to go back?
                self._fast_writes = self._fast_writes + 1 if appended - started <= SLOW_WRITE_S else 0
                if self._fast_writes >= self._return_after:
                    self._loop_writes = True
                    self._loop_stint = 0
        elapsed = now - started
        self.commit_seconds += elapsed
        if elapsed > self.max_commit_seconds:
            self.max_commit_seconds = elapsed
        self.groups_written += 1
        number = group.number
        unsettled = self._unsettled
        if unsettled:
            if self._inserting <= number:  # every entry names this group or an earlier one: all settled
                unsettled.clear()
            else:  # a later group inserted too (the worker's pipeline): it keeps its own entries
                for key, _, was_inserted in group.changes:
                    if was_inserted and unsettled.get(key) == number:
                        del unsettled[key]
        inserted = group.inserted
        self.versions_written += inserted
        self.versions_deleted += len(group.changes) - inserted
        if self._operations is not None:
            self.operations_committed = self._operations()
        moment = time.monotonic()
        self._rates.record(moment, self.groups_written, self.versions_written, self.operations_committed)
        self.durable = number
        if group.clock_bound_us is not None and group.clock_bound_us > self.durable_bound_us:
            self.durable_bound_us = group.clock_bound_us
        self._on_durable()
        if moment - self._last_maintenance >= self.maintenance_s and not self._closed:
            self._last_maintenance = moment
            # On the one worker, and no group is prepared meanwhile (the connection is the
            # worker's): a short pause every ``maintenance_s``, against a WAL and a file that
            # would otherwise only grow.
            self._on_worker(self._maintain)
        self._set_full(full)
        self._schedule()

    def _on_worker(self, job: Callable[[], object], then: Callable[[asyncio.Future[object]], None] | None = None,
                   ) -> None:
        """Run ``job`` on the worker with no group started meanwhile (``_worker_jobs``); then
        ``then`` with its outcome, and the next group."""
        assert self._loop is not None
        self._worker_jobs += 1
        future = self._loop.run_in_executor(self._executor, job)

        def done(outcome: asyncio.Future[object]) -> None:
            self._worker_jobs -= 1
            if then is not None:
                then(outcome)
            self._schedule()

        future.add_done_callback(done)

    # ---------------------------------------------------------------- a full disk (``space``)

    def _retry_full(self, group: CommitGroup, error: BaseException) -> bool:
        """A commit that ran out of space: delete the reserve and commit the same group again (it
        stays in flight, so the groups after it wait); False when it is another failure or the
        retries are spent."""
        if self.space is None or not is_disk_full(error) or self._full_retries >= FULL_RETRIES:
            return False
        self.full_commits += 1
        self._full_retries += 1
        if not self.disk_full:
            log.error("%s: the disk is full; refusing writes until %d bytes are free", self.store.directory,
                      2 * self.space.reserve_bytes, extra={"event": "disk_full"})
        self.disk_full = True
        released = self.space.release()
        assert self._loop is not None
        delay = 0.0 if released else FULL_RETRY_S

        def again() -> None:
            assert self._loop is not None
            started = time.perf_counter()
            future = self._loop.run_in_executor(self._executor, self._commit_after_checkpoint, group)
            future.add_done_callback(lambda done: retried(done, started))

        def retried(done: asyncio.Future[bool], started: float) -> None:
            error = done.exception() if not done.cancelled() else asyncio.CancelledError()
            if error is not None:
                self._failed_commit(group, error, started)
                return
            self._last_state = group.state
            self._writing = False  # the worker is free again: ``_schedule`` starts the next group
            self._finished(group, bool(done.result()), started)

        self._loop.call_later(delay, again)
        return True

    def _commit_after_checkpoint(self, group: CommitGroup) -> bool:
        """On the worker, a retry on a full disk: the group first, into the room the released
        reserve made; a checkpoint only if that fails too. A checkpoint first would spend that room
        folding the log into SQLite (about a segment's worth, which a full disk does not have), and
        every retry would then fail: the server stopped instead of refusing writes."""
        try:
            return self._commit(group)
        except Exception as error:
            if not is_disk_full(error):
                raise
        with contextlib.suppress(Exception):
            self.store.checkpoint()
        return self._commit(group)

    def _space_low(self) -> bool:
        """On the worker: whether writes must stay refused. While full, the WAL is truncated after
        every group (the next ones reuse its space) and the reserve is recreated once twice its size
        is free again."""
        space = self.space
        if space is None:
            return False
        try:
            if self.disk_full:
                self.store.checkpoint()
                return not space.refill() or space.low()
            return space.low()
        except (OSError, sqlite3.Error) as error:
            log.warning("%s: cannot check free space: %s", self.store.directory, error)
            return self.disk_full

    def _set_full(self, full: bool) -> None:
        if full != self.disk_full:
            assert self.space is not None
            if full:
                log.error("%s: less than %d bytes free; refusing writes", self.store.directory,
                          self.space.reserve_bytes, extra={"event": "disk_full"})
            else:
                log.warning("%s: free space is back; accepting writes", self.store.directory,
                            extra={"event": "disk_space_back"})
            self.disk_full = full
        if self.disk_full and not self._closed and self._space_timer is None:
            assert self._loop is not None
            self._space_timer = self._loop.call_later(CHECK_INTERVAL_S, self._check_idle_space)

    def _check_idle_space(self) -> None:
        """While full, look again every ``CHECK_INTERVAL_S`` even when no group is written."""
        self._space_timer = None
        if self._closed or self._failed is not None:
            return
        self._on_worker(self._space_low, lambda done: self._set_full(
            bool(done.result()) if done.exception() is None else self.disk_full))

    def _maintain(self) -> None:
        try:
            self.store.maintain()
        except Exception as error:
            log.warning("storage maintenance failed: %s", error)

    # ---------------------------------------------------------------- introspection

    @property
    def pending(self) -> bool:
        """Whether some effect still waits for a group that is not durable."""
        return self.required > self.durable

    def stats(self) -> dict[str, object]:
        rates = self._rates.rates(time.monotonic())
        try:  # the data directory's file system, for "disk nearly full" alerts
            file_system = os.statvfs(self.store.path.parent)
            free, size = file_system.f_bavail * file_system.f_frsize, file_system.f_blocks * file_system.f_frsize
        except OSError:
            free = size = 0
        return {
            "path": str(self.store.path),
            "disk_bytes": self.store.disk_bytes(),
            "groups_written": self.groups_written,
            "versions_written": self.versions_written,
            "versions_deleted": self.versions_deleted,
            "mean_commit_ms": round(1000 * self.commit_seconds / max(self.groups_written, 1), 3),
            "max_commit_ms": round(1000 * self.max_commit_seconds, 3),
            "durable_group": self.durable,
            "required_group": self.required,
            "clock_bound_us": self.durable_bound_us,
            "bound_waits": self.bound_waits,
            "checkpoints": self.store.checkpoints,
            "checkpoint_backlog": self.store.checkpoint_backlog,
            "disk_full": self.disk_full,
            "full_commits": self.full_commits,
            "vacuumed_pages": self.store.vacuumed_pages,
            "fsyncs": self.groups_written,
            "commit_seconds": self.commit_seconds,
            "release_lag_seconds": self.release_lag_seconds,
            "operations_committed": self.operations_committed,
            "filesystem_free_bytes": free,
            "filesystem_size_bytes": size,
            "loop_groups": self.loop_groups,
            "slow_fallbacks": self.slow_fallbacks,
            "fsyncs_per_s": rates.fsyncs_per_s,
            "operations_per_fsync": rates.operations_per_fsync,
            "versions_per_fsync": rates.versions_per_fsync,
        }
