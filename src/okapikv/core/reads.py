"""Snapshot reads (RO-TX, SCAN) of a partition server: the coordinator's side (admission, the
snapshot, slices to every partition, retries, pages and their leases, deadlines, cancellation) and
the partition's side (serving a slice). docs/protocol.md, "Snapshot reads".

The coordinator picks a snapshot (``Protocol.snapshot``: Okapi's USV with the local entry at its
clock; Cure's GSV likewise; GentleRain's GST, after waiting for it), sends each partition that holds
keys of the read its slice at that snapshot, and answers once every slice is back. A partition
serves a slice by reading the newest version of each key that belongs to the snapshot
(``Protocol.visible_in_snapshot``), after waiting for its clock where the protocol says so (Cure)
or raising it to the snapshot's local entry (Okapi's updateClockOnTx).

Bounded work per read (docs/operations.md, "Read limits and paging"):
- admission (``_admit_read``): at most ``max_concurrent_reads`` reads coordinated at once, counting
  together at most ``max_read_items`` keys (a RO-TX) or page caps (a SCAN); beyond that a read
  is refused at once (RESOURCE_EXHAUSTED), so reads cannot queue up work without bound in
  front of a partition's PUTs and GETs. Slices are bounded with them: each partition receives
  from each coordinator at most its share of that coordinator's ``max_read_items``.
- pages: a SCAN reply holds at most ``max_scan_items`` pairs (and about ``max_scan_bytes``), and
  a slice examines at most SCAN_EXAMINE_FACTOR keys per pair it may return; a scan that stopped
  early names where it goes on and the snapshot it read (``ScanReply.resume``, ``snapshot``).
  Later pages read that snapshot, which the coordinator keeps above the GC horizon for
  ``snapshot_lease_us`` after each page (``_lease``, ``hold``); below the horizon a later page
  fails (ABORTED) rather than mix snapshots, and the client starts the scan over.
- retries: a slice below the GC horizon (``too_old``) makes a first page or RO-TX retry with a
  fresh snapshot at most ``max_snapshot_retries`` times, then fail (ABORTED).
- deadlines: a partition that restarted announces it (``Restarted``) and gets its slices again
  at once; one that stays silent (sends this server nothing) for ``read_timeout_us`` fails the
  read (UNAVAILABLE) without a re-run, which under load would multiply the work; a slow one
  that keeps talking is waited for, up to ``read_deadline_us`` for the whole read (``expire``).
- cancellation: a read whose client went away is dropped (``cancel``).

Invariants (tested in ``tests/unit/test_core_reads.py``, ``tests/unit/test_server_reads.py`` and
``tests/unit/test_server_single_dc.py``):
- a refused read changes nothing; an admitted one is answered exactly once (a reply or an error),
  unless cancelled, and then stops counting against the limits;
- every page of a SCAN reads its first page's snapshot or fails;
- ``hold`` is at most every snapshot a running attempt or a lease still reads, so the GC horizon
  never passes one;
- a slice whose snapshot is below the horizon is answered ``too_old``, never served from a store
  that may miss versions it could see.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from operator import itemgetter

from okapikv.core.catchup import CatchUp
from okapikv.core.messages import (
    OVERLOADED,
    Effect,
    ErrorCode,
    ErrorReply,
    ReadItem,
    ReadTxReply,
    ReadTxRequest,
    Respond,
    Restarted,
    ScanReply,
    ScanRequest,
    ScanSlice,
    Send,
    ServerId,
    Session,
    SliceReply,
    SnapshotRef,
    TxSlice,
)
from okapikv.core.mvstore import Version
from okapikv.core.partitioning import partition_of
from okapikv.core.protocols import WaitForStable
from okapikv.core.state import Parked, PartitionState, Wait, clock_offset_error
from okapikv.core.timestamps import WaitForClock, pack, physical_of
from okapikv.core.vectors import Vector, leq, merge_max, merge_min

#: A slice that reaches a server still repairing its data waits this long before it looks again.
REPAIR_POLL_US = 10_000
#: A scan slice examines at most this many keys per item it may return: a range of tombstones or of
#: versions its snapshot cannot see costs a bounded page (with a resume key) instead of a whole pass.
SCAN_EXAMINE_FACTOR = 4
#: A scan slice may return its share of the page (the page's cap over the partitions) plus this
#: many pairs, and never more than the page's cap: a small page (YCSB-E's 1-100 pairs) is one round
#: whatever the partitions, and a large one (hashing spreads keys evenly) comes out at the cap while
#: the partitions read little more than the page itself.
SCAN_SLICE_MARGIN = 64
#: Bytes a returned pair counts beyond its key and value (its framing in a reply, roughly).
SCAN_ITEM_OVERHEAD_BYTES = 48
#: Snapshots of paged SCANs held for their next page, at most (the oldest to expire goes first).
MAX_SNAPSHOT_LEASES = 1_024

#: The server's session admission of a client request (``PartitionServer._admit``): a refusal, or
#: None once the session is merged.
Admit = Callable[[int, Session, int, str | None], list[Effect] | None]


class _Read:
    """A RO-TX or SCAN page this server coordinates, from its admission to its reply: while an
    attempt runs (``tx_id``) it waits for the slices in ``owed``; between attempts (``tx_id`` 0) its
    request is parked (a snapshot wait, or a retry after a slice came back too old). A plain class:
    one is made per RO-TX, and the dataclass with default factories took 1.3 us to make against
    0.75 (timeit, 2026-12-01, this 2-core VM)."""

    __slots__ = ("request", "since_us", "cost", "attempts", "tx_id", "snapshot", "owed", "items", "last_keys",
                 "sent_us", "started_us", "slice_wait_us")

    def __init__(self, request: ReadTxRequest | ScanRequest, since_us: int, cost: int) -> None:
        self.request = request
        self.since_us = since_us
        self.cost = cost  # what it counts against ``max_read_items``
        self.attempts = 0  # snapshots tried
        self.tx_id = 0
        self.snapshot: Vector = ()
        self.owed: dict[int, TxSlice | ScanSlice] = {}  # partition -> its slice, not answered yet
        self.items: list[ReadItem] = []
        self.last_keys: list[bytes] = []  # of the scan slices that stopped early
        self.sent_us = 0  # when the current attempt's slices left (or were last re-sent)
        self.started_us = 0  # when the current attempt began: what came before it was a stall
        self.slice_wait_us = 0  # the longest a slice of the current attempt was parked (``SliceReply.waited_us``)


class SnapshotReads:
    """The snapshot reads a partition server coordinates, and the slices it serves."""

    def __init__(self, state: PartitionState, *, catch_up: CatchUp, admit: Admit) -> None:
        self.state = state
        self._catch_up = catch_up
        self._admit = admit
        # every admitted read by request id, the running attempts by tx id, and what they count
        # against the limits (``_admit_read``)
        self._reads: dict[int, _Read] = {}
        self._pending: dict[int, _Read] = {}
        self._read_items = 0
        # paged SCANs' snapshots -> until when they hold the GC horizon back for the next page
        self._leases: dict[Vector, int] = {}
        # 0: not chosen yet; the first read of this incarnation picks it (``_start_read``)
        self._next_tx_id = 0

    @property
    def count(self) -> int:
        """Snapshot reads this server coordinates and has not answered (running or parked)."""
        return len(self._reads)

    @property
    def leases(self) -> int:
        """Paged SCANs' snapshots held for their next page (``snapshot_lease_us``)."""
        return len(self._leases)

    def hold(self, floor: Vector) -> Vector:
        """``floor`` lowered to every snapshot a running read or a lease still reads: they hold the
        horizon back until they finish; otherwise a slice that waits (Cure's tx_clock) longer than a
        stabilization period is answered too_old, retried with a new snapshot that waits as long,
        and so on. Paged SCANs' snapshots are held between pages too (``_lease``)."""
        if self._pending or self._leases:
            return merge_min([floor, *(read.snapshot for read in self._pending.values()), *self._leases])
        return floor

    # ---------------------------------------------------------------- the coordinator

    def on_read(self, request: ReadTxRequest | ScanRequest, now_us: int) -> list[Effect] | Wait:
        read = self._reads.get(request.request_id)
        if read is None:
            admitted = self._admit_read(request, now_us)
            if not isinstance(admitted, _Read):
                return admitted
            read = admitted
        elif read.request is not request:  # a driver that reused a request id: refuse the newcomer
            return self.state.reject(request.request_id, f"request id {request.request_id} is already in use")
        state = self.state
        page = request.snapshot if isinstance(request, ScanRequest) else None
        if page is not None:
            if not leq(state.horizon, page.vector):
                return self._give_up(read, "the scan's snapshot fell below the garbage-collection horizon between "
                                           "pages (it was held for snapshot_lease_us after the last page); start over")
            return self._start_read(read, page.vector, now_us)
        snapshot = state.protocol.snapshot(stable=state.stable, dt=request.session.dt, now_us=now_us)
        if isinstance(snapshot, WaitForStable):
            return snapshot
        return self._start_read(read, snapshot, now_us)

    def _read_problem(self, request: ReadTxRequest | ScanRequest) -> str | None:
        state = self.state
        config = state.config
        if isinstance(request, ReadTxRequest):
            if len(request.keys) > config.max_read_keys:
                return f"a read transaction may name at most {config.max_read_keys} keys, not {len(request.keys)}"
            for key in request.keys:
                problem = state.check_key(key)
                if problem:
                    return problem
            return None
        if request.limit is not None and request.limit < 0:
            return "scan limit must not be negative"
        return None  # (a page's snapshot vector is fitted to the DC count at dispatch: ``okapikv.core.growth``)

    def page_cap(self, limit: int | None) -> int:
        cap = self.state.config.max_scan_items
        return cap if limit is None else min(limit, cap)

    def _admit_read(self, request: ReadTxRequest | ScanRequest, now_us: int) -> _Read | list[Effect]:
        """A new read, within the limits and the clock ceiling (``PartitionServer._admit``); or its
        refusal, which changes nothing."""
        state = self.state
        problem = self._read_problem(request)
        if problem:
            return state.reject(request.request_id, problem)
        request_id = request.request_id
        if isinstance(request, ScanRequest):
            page = request.snapshot
            if page is not None and page.dc != state.dc:
                # A client that moved to another DC mid-scan: that snapshot means nothing here.
                state.stats.reads_given_up += 1
                message = f"the scan's snapshot belongs to DC {page.dc}, this is DC {state.dc}; start over"
                return [Respond(ErrorReply(request_id, ErrorCode.ABORTED, message))]
            cost = self.page_cap(request.limit)
        else:
            cost = len(request.keys)
        config = state.config
        if len(self._reads) >= config.max_concurrent_reads or (
            self._reads and self._read_items + cost > config.max_read_items
        ):
            state.stats.reads_refused += 1
            message = (f"{OVERLOADED}this server already coordinates {len(self._reads)} snapshot reads of "
                       f"{self._read_items} keys (max_concurrent_reads {config.max_concurrent_reads}, "
                       f"max_read_items {config.max_read_items}); retry later")
            return [Respond(ErrorReply(request_id, ErrorCode.RESOURCE_EXHAUSTED, message))]
        refused = self._admit(request_id, request.session, now_us, None)
        if refused is not None:
            return refused
        read = _Read(request, now_us, cost)
        self._reads[request_id] = read
        self._read_items += cost
        state.stats.operations["scan" if isinstance(request, ScanRequest) else "read_tx"] += 1
        return read

    def _start_read(self, read: _Read, snapshot: Vector, now_us: int) -> list[Effect]:
        state = self.state
        # An incarnation's ids start at its clock when it first needs one, so they are above every id
        # of an earlier incarnation of this server (whose ids grew by one per read while its clock
        # grew by 2**16 per microsecond): a peer's link resends what a crashed server had not
        # acknowledged to its new incarnation (``okapikv.server.links``), and an old read's slice
        # answer must not complete a new read of the same id (``on_slice_reply``).
        tx_id = self._next_tx_id or max(pack(now_us), state.hlc + 1)
        self._next_tx_id = tx_id + 1
        request = read.request
        slices: dict[int, TxSlice | ScanSlice] = {}
        if isinstance(request, ReadTxRequest):
            by_partition: dict[int, list[bytes]] = {}
            for key in dict.fromkeys(request.keys):
                by_partition.setdefault(partition_of(key, state.config.num_partitions), []).append(key)
            for partition, keys in by_partition.items():
                slices[partition] = TxSlice(state.id, tx_id, snapshot, tuple(keys))
        else:
            # Each partition returns about its share of the page (SCAN_SLICE_MARGIN); the page is
            # cut where the first slice that stopped early stopped (``_finish_read``).
            partitions = state.config.num_partitions
            cap = self.page_cap(request.limit)
            per_slice = min(cap, -(-cap // partitions) + SCAN_SLICE_MARGIN)
            for partition in range(partitions):
                slices[partition] = ScanSlice(state.id, tx_id, snapshot, request.start, request.end, per_slice)
        read.attempts += 1
        read.tx_id = tx_id
        read.snapshot = snapshot
        read.owed = slices
        if read.items or read.last_keys:  # a retry: forget the abandoned attempt's answers
            read.items = []
            read.last_keys = []
        read.sent_us = read.started_us = now_us
        read.slice_wait_us = 0
        self._pending[tx_id] = read
        dc = state.dc
        here = state.id.partition
        effects: list[Effect] = [Send(ServerId(dc, partition), slice_message)
                                 for partition, slice_message in slices.items() if partition != here]
        own = slices.get(here)
        if own is not None:
            outcome = self.on_slice(own, now_us)
            if isinstance(outcome, list):
                effects.extend(outcome)
            else:
                state.parked.append(Parked(own, outcome, now_us))
        elif not slices:
            effects.extend(self._finish_read(read, now_us))
        return effects

    def on_slice_reply(self, reply: SliceReply, now_us: int) -> list[Effect]:
        state = self.state
        source = reply.source
        if source.dc != state.dc:
            return []
        state.heard[source.partition] = now_us
        read = self._pending.get(reply.tx_id)
        if read is None or source.partition not in read.owed:
            return []  # a late reply of an abandoned attempt, or a second answer to a re-sent slice
        if reply.clock_ahead_us:
            message = clock_offset_error(f"partition {source.partition} refused the snapshot: it reaches",
                                         reply.clock_ahead_us, state.config)
            return self._fail(read, ErrorCode.OUT_OF_RANGE, message)
        if reply.too_old:
            self._end_attempt(read)
            return self._retry(read, now_us)
        del read.owed[source.partition]
        if reply.waited_us > read.slice_wait_us:
            read.slice_wait_us = reply.waited_us
        read.items.extend(reply.items)
        if reply.last_key is not None:
            read.last_keys.append(reply.last_key)
        if read.owed:
            return []
        return self._finish_read(read, now_us)

    def on_restarted(self, message: Restarted, now_us: int) -> list[Effect]:
        """A partition of this DC restarted: re-send it the slices it owes (the new incarnation
        never saw them, or its answer was lost with the old one). A second answer is ignored."""
        state = self.state
        source = message.source
        if source.dc != state.dc or source == state.id:
            return []
        state.heard[source.partition] = now_us
        effects: list[Effect] = []
        for read in self._pending.values():
            slice_message = read.owed.get(source.partition)
            if slice_message is not None:
                effects.append(Send(source, slice_message))
                read.sent_us = now_us
        state.stats.slices_resent += len(effects)
        return effects

    def _retry(self, read: _Read, now_us: int) -> list[Effect]:
        """A slice came back too old: a first page or RO-TX tries a fresh snapshot, a bounded number
        of times; a later page cannot (its snapshot is the scan's)."""
        state = self.state
        if isinstance(read.request, ScanRequest) and read.request.snapshot is not None:
            return self._give_up(read, "the scan's snapshot fell below the garbage-collection horizon between pages; "
                                       "start over")
        if read.attempts > state.config.max_snapshot_retries:
            return self._give_up(read, f"the snapshot fell below the garbage-collection horizon on each of "
                                       f"{read.attempts} attempts; retry later")
        state.stats.snapshot_retries += 1
        # Retry from the timer with a fresh snapshot rather than recursively from here.
        state.parked.append(Parked(read.request, WaitForClock(now_us + 1, "snapshot_retry"), read.since_us))
        return []

    def _give_up(self, read: _Read, message: str) -> list[Effect]:
        self.state.stats.reads_given_up += 1
        return self._fail(read, ErrorCode.ABORTED, message)

    def _fail(self, read: _Read, code: ErrorCode, message: str) -> list[Effect]:
        self._drop(read)
        return [Respond(ErrorReply(read.request.request_id, code, message))]

    def _end_attempt(self, read: _Read) -> None:
        if read.tx_id:
            self._pending.pop(read.tx_id, None)
            read.tx_id = 0
            read.owed = {}

    def _drop(self, read: _Read) -> None:
        if self._reads.pop(read.request.request_id, None) is None:
            return
        self._end_attempt(read)
        self._read_items -= read.cost

    def _unpark(self, read: _Read) -> None:
        """Take a read between attempts out of the parked requests."""
        if not read.tx_id:
            request = read.request
            state = self.state
            state.parked = [parked for parked in state.parked if parked.message is not request]

    def _lease(self, snapshot: Vector, now_us: int) -> None:
        """Hold ``snapshot`` above the GC horizon until the next page can come (``hold``)."""
        leases = self._leases
        if snapshot not in leases and len(leases) >= MAX_SNAPSHOT_LEASES:
            del leases[min(leases, key=leases.__getitem__)]
        leases[snapshot] = now_us + self.state.config.snapshot_lease_us

    def _finish_read(self, read: _Read, now_us: int) -> list[Effect]:
        self._drop(read)
        self._count_stall(read)
        request = read.request
        if isinstance(request, ReadTxRequest):
            by_key = {item.key: item.value for item in read.items}
            values = tuple(by_key.get(key) for key in request.keys)
            return [Respond(ReadTxReply(request.request_id, values, self._session_after(request, read.items)))]
        # Scan slices return only visible pairs; keys are distinct across partitions.
        page = sorted([(item.key, value) for item in read.items if (value := item.value) is not None])
        whole = len(page)
        boundary = min(read.last_keys) if read.last_keys else None
        if boundary is not None:
            # A partition whose slice stopped early has not covered the keys above its last one.
            page = page[: bisect_right(page, boundary, key=itemgetter(0))]
        cut = min(len(page), self.page_cap(request.limit))
        budget = self.state.config.max_scan_bytes
        if sum([len(key) + len(value) for key, value in page[:cut]]) + SCAN_ITEM_OVERHEAD_BYTES * cut > budget:
            size = 0
            for index, (key, value) in enumerate(page[:cut]):
                size += len(key) + len(value) + SCAN_ITEM_OVERHEAD_BYTES
                if index and size > budget:
                    cut = index
                    break
        if cut < len(page):
            page = page[:cut]
            boundary = page[-1][0] if page else boundary
        done = (boundary is None or boundary >= request.end
                or (request.limit is not None and len(page) >= request.limit))
        pairs = tuple(page)
        if len(page) == whole:
            session = self._session_after(request, read.items)
        else:  # only what the page returns counts
            last = page[-1][0] if page else b""
            session = self._session_after(request, [item for item in read.items if item.key <= last] if page else ())
        if done:
            if request.snapshot is not None:
                self._leases.pop(read.snapshot, None)
            return [Respond(ScanReply(request.request_id, pairs, session))]
        assert boundary is not None
        self.state.stats.scan_pages += 1
        self._lease(read.snapshot, now_us)
        # The smallest key above ``boundary`` in byte order: the next page starts there.
        resume = boundary + b"\x00"
        return [Respond(ScanReply(request.request_id, pairs, session, resume,
                                  SnapshotRef(self.state.dc, read.snapshot)))]

    def _count_stall(self, read: _Read) -> None:
        """Count the read's stall, once per transaction (the paper's Figure 4c/d: the probability that
        a transaction is stalled before being served and the stall's duration): the time before its
        last attempt began (a snapshot wait at the coordinator, GentleRain's; retries) plus the
        longest any of that attempt's slices was parked at its partition (Cure's clock wait): the
        slices wait in parallel, so the transaction waits for the longest one."""
        stall_us = read.started_us - read.since_us + read.slice_wait_us
        stats = self.state.stats
        stats.snapshot_reads_finished += 1
        if stall_us > 0:
            stats.snapshot_read_stalls += 1
            stats.snapshot_read_stall_us += stall_us

    def _session_after(self, request: ReadTxRequest | ScanRequest, items: Iterable[ReadItem]) -> Session:
        """The client's session after reading ``items``: their dependencies merged in."""
        stable = self.state.stable
        dt = request.session.dt
        dc = self.state.dc
        for item in items:
            if item.dv is not None:
                stable = merge_max(stable, item.dv[:dc] + (0,) + item.dv[dc + 1 :])
                dt = max(dt, item.dv[dc])
        return Session(stable, dt)

    def expire(self, now_us: int, effects: list[Effect]) -> None:
        """Fail the snapshot reads that cannot complete (UNAVAILABLE), and let go of expired leases.

        A read fails when a partition that owes it a slice has sent this server nothing for
        ``read_timeout_us`` (stopped or cut off: a restarted one announces itself, ``Restarted``),
        or when it is ``read_deadline_us`` old whatever its partitions do. It is not re-run: a
        partition that cannot answer one attempt in that time cannot answer another, and under
        overload each re-run would add the whole read's work again. A partition that stays in
        touch (its slice replies to other reads, its stabilization messages) is slow, not lost,
        and is waited for."""
        state = self.state
        config = state.config
        silence_limit = now_us - config.read_timeout_us
        here = state.id.partition
        heard = state.heard
        for read in list(self._reads.values()):
            if now_us - read.since_us > config.read_deadline_us:
                problem = f"not answered within read_deadline_us ({config.read_deadline_us / 1e6:g} s)"
            elif read.tx_id:
                sent_us = read.sent_us
                silent = [partition for partition in read.owed if partition != here
                          and max(sent_us, heard.get(partition, 0)) < silence_limit]
                if not silent:
                    continue
                problem = (f"partition {silent[0]} owes a slice and has sent nothing for read_timeout_us "
                           f"({config.read_timeout_us / 1e6:g} s)")
            else:
                continue
            state.stats.read_timeouts += 1
            self._unpark(read)
            effects.extend(self._fail(read, ErrorCode.UNAVAILABLE, f"snapshot read failed: {problem}; retry later"))
        if self._leases:
            for snapshot in [snapshot for snapshot, until in self._leases.items() if until <= now_us]:
                del self._leases[snapshot]

    def cancel(self, request_ids: Iterable[int]) -> int:
        """The clients of these requests went away: drop those that are snapshot reads still
        unanswered (``PartitionServer.cancel_reads``). Returns how many."""
        dropped = 0
        for request_id in request_ids:
            read = self._reads.get(request_id)
            if read is not None:
                self._unpark(read)
                self._drop(read)
                dropped += 1
        self.state.stats.reads_abandoned += dropped
        return dropped

    # ---------------------------------------------------------------- a partition's slice

    def on_slice(self, message: TxSlice | ScanSlice, now_us: int, waited_us: int = 0) -> list[Effect] | Wait:
        """Serve a slice, or say what it waits for; ``waited_us``: how long it has been parked
        already (``PartitionServer`` resumes it with that), which its reply carries."""
        state = self.state
        if not self._catch_up.serving:  # the store may still lack what the snapshot reads
            return WaitForClock(now_us + REPAIR_POLL_US, "repair")
        snapshot = message.snapshot
        if not leq(state.horizon, snapshot):
            # Versions this snapshot could read may already be collected: the coordinator retries.
            return self._slice_reply(message, (), too_old=True, now_us=now_us)
        if state.offset_guard and max(snapshot) > state.ceiling(now_us):
            return self._refuse_slice(message, max(snapshot), now_us)
        protocol = state.protocol
        wait = protocol.slice_wait(snapshot=snapshot, now_us=now_us)
        if wait is not None:
            return self._refuse_slice(message, pack(wait.clock_us), now_us) if state.too_long(wait, now_us) else wait
        dc = state.dc
        if protocol.raises_clock_on_slice and snapshot[dc] > state.vv[dc]:
            state.vv[dc] = snapshot[dc]  # updateClockOnTx: never create a version this snapshot misses
        state.stable = merge_max(state.stable, snapshot[:dc] + (state.stable[dc],) + snapshot[dc + 1 :])
        visible = protocol.visible_in_snapshot

        def in_snapshot(version: Version) -> bool:
            return visible(version=version, snapshot=snapshot)

        newest = state.read_newest
        read_item = self._read_item
        items: list[ReadItem] = []
        if isinstance(message, TxSlice):
            for key in message.keys:
                items.append(read_item(key, newest(key, in_snapshot, now_us)))
            return self._slice_reply(message, tuple(items), too_old=False, now_us=now_us, waited_us=waited_us)
        config = state.config
        limit = self.page_cap(message.limit)
        budget = max(config.max_scan_bytes // config.num_partitions, 1)
        room = SCAN_EXAMINE_FACTOR * limit  # keys it may still examine
        full = limit <= 0
        size = 0
        previous: bytes | None = None
        last_key: bytes | None = None
        for key in state.store.keys_in_range(message.start, message.end):
            if full or not room:
                last_key = previous  # a key is left: everything up to ``previous`` is covered
                break
            room -= 1
            previous = key
            version = newest(key, in_snapshot, now_us)
            if version is not None and (value := version.value) is not None:
                items.append(read_item(key, version))
                size += len(key) + len(value) + SCAN_ITEM_OVERHEAD_BYTES
                full = len(items) >= limit or size >= budget
        return self._slice_reply(message, tuple(items), too_old=False, now_us=now_us, last_key=last_key,
                                 waited_us=waited_us)

    def _refuse_slice(self, message: TxSlice | ScanSlice, timestamp: int, now_us: int) -> list[Effect]:
        """A slice whose snapshot reaches past the ceiling (or would wait that long): serving it
        would raise this partition's HLC to the snapshot (updateClockOnTx), so the read fails."""
        state = self.state
        state.stats.clock_offset_refusals += 1
        source = f"dc{message.source.dc}/p{message.source.partition}"
        ahead_us = state.note_offset("refused a snapshot slice", source, physical_of(timestamp), now_us)
        reply = SliceReply(state.id, message.tx_id, (), clock_ahead_us=max(ahead_us, 1))
        if message.source == state.id:
            return self.on_slice_reply(reply, now_us)
        return [Send(message.source, reply)]

    def _read_item(self, key: bytes, version: Version | None) -> ReadItem:
        state = self.state
        if version is None:
            return ReadItem(key, None, 0, state.dc, None)
        return ReadItem(key, version.value, version.timestamp, version.source_dc,
                        version.dependency_vector(state.num_dcs))

    def _slice_reply(
        self, message: TxSlice | ScanSlice, items: tuple[ReadItem, ...], *, too_old: bool, now_us: int,
        last_key: bytes | None = None, waited_us: int = 0,
    ) -> list[Effect]:
        state = self.state
        reply = SliceReply(state.id, message.tx_id, items, too_old, last_key, waited_us=waited_us)
        if message.source == state.id:
            return self.on_slice_reply(reply, now_us)
        return [Send(message.source, reply)]
