"""Very large reads: SCANs over the whole key range that cost their partitions real work, the
scanners that issue them in bursts and give up, and what must hold meanwhile (docs/operations.md,
"Read limits and paging").

A SCAN over a huge range (the issue's 500,000 keys) took its partitions longer than the read
timeout; re-run without a limit it never completed and starved every other request. The core bounds
that work (``okapikv.core.reads``): a SCAN reply is a page of at most ``max_scan_items`` pairs, a
slice examines at most ``SCAN_EXAMINE_FACTOR`` keys per pair it may return, retries are bounded, a
read whose client went away is dropped. Here is what the simulator needs to see it:

- *the cost* (``ScanCost``, the world's ``work_us``): with ``SimConfig.large_scans`` each key a scan
  slice examines costs its server ``FaultPlan.scan_key_us`` of service time, charged when the
  slice (or the SCAN whose own slice its coordinator serves) arrives. The keys are counted as the
  slice's loop (``SnapshotReads.on_slice``) walks them: the stored keys of its range until as many
  hold a value as its page may return, at most ``SCAN_EXAMINE_FACTOR`` per such pair (a key's
  newest version stands for the one in the snapshot). Each simulated key stands for a block of
  real ones: at 25 ms a key (~2,500 keys at ~10 us), a partition of 100 written keys is the issue's
  250,000 keys per partition, 2.5 s a whole pass;
- *the scanners* (``Scanners``): a ``large_scan`` fault is a burst of ``large_scan_burst`` SCANs of
  the whole key range, without a limit, at one DC; each pages through as the real clients do and
  gives up after ``large_scan_patience_ms`` (its connection closes: ``PartitionServer.cancel_reads``);
  they are load, not sessions of the history;
- *probes*: while scanners run, a GET to every partition of their DC every ``PROBE_EVERY_US``.

Anomalies (checker ``sim``): ``SlowScanPage`` (a page answered, by a reply or an error, later than
the liveness operation bound after it was asked), ``ProbeStarved`` (a probe GET that took longer than
that bound: the scans starve other clients), ``ReadsLeftPending`` (at the end, a server still
coordinating snapshot reads though every scanner has finished or gone).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice

from okapikv.check.anomalies import Anomaly
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    ErrorReply,
    GetRequest,
    Message,
    ScanReply,
    ScanRequest,
    ScanSlice,
    replace,
)
from okapikv.core.partitioning import partition_of
from okapikv.core.reads import SCAN_EXAMINE_FACTOR, SCAN_SLICE_MARGIN
from okapikv.core.session import ClientSession
from okapikv.sim.world import ClientSide, World

#: scanners and probes are the world's clients from this index on (the workload's come first)
SCANNER_BASE = 1 << 20
#: their request ids start here (the workload's count from 1)
REQUEST_BASE = 1 << 40
PROBE_EVERY_US = 20_000
RETRY_US = 10_000


def _any(version: object) -> bool:
    return True


class ScanCost:
    """The service time a scan slice costs its server (module docstring): the world's ``work_us``."""

    def __init__(self, world: World, key_us: int) -> None:
        self.world = world
        self.key_us = key_us

    def __call__(self, index: int, message: Message) -> int:
        kind = type(message)
        if kind is not ScanSlice and kind is not ScanRequest:
            return 0
        server = self.world.servers[index]
        if kind is ScanSlice:
            assert isinstance(message, ScanSlice)
            pairs = server.reads.page_cap(message.limit)
        else:  # a SCAN page: its coordinator serves its own partition's slice at once
            assert isinstance(message, ScanRequest)
            cap = server.reads.page_cap(message.limit)
            pairs = min(cap, -(-cap // server.config.num_partitions) + SCAN_SLICE_MARGIN)
        store = server.store
        keys = found = 0
        for key in islice(store.keys_in_range(message.start, message.end), SCAN_EXAMINE_FACTOR * pairs):
            keys += 1
            version = store.newest(key, _any)
            if version is not None and version.value is not None:
                found += 1
                if found >= pairs:
                    break
        return keys * self.key_us


@dataclass(slots=True)
class _Scanner:
    index: int
    dc: int
    server: int
    session: ClientSession
    first: ScanRequest | None = None  # a scanner's first page (None: a probe)
    request: ClientRequest | None = None  # in flight
    sent_us: int = 0
    give_up_us: int = 0
    done: bool = False


@dataclass(slots=True)
class ScanCounts:
    scans: int = 0
    pages: int = 0
    completed: int = 0
    failed: Counter[str] = field(default_factory=Counter)  # by error code
    abandoned: int = 0  # gave up: the server was told the client went away
    probes: int = 0


class Scanners:
    """The large scans' clients and probes (module docstring)."""

    def __init__(self, world: World, rng: random.Random, *, keys: list[bytes], bound_us: int,
                 anomalies: list[Anomaly]) -> None:
        self.world = world
        self.rng = rng
        self.keys = keys
        self.bound_us = bound_us
        self.anomalies = anomalies
        self.scanners: list[_Scanner] = []
        self.counts = ScanCounts()
        self._next_request = REQUEST_BASE
        self._probing: set[int] = set()  # DCs whose probes run
        partitions = world.num_partitions
        #: the key each partition's probes read
        self.probe_keys = {partition_of(key, partitions): key for key in reversed(keys)}

    def _request_id(self) -> int:
        self._next_request += 1
        return self._next_request

    def _report(self, name: str, text: str) -> None:
        if sum(1 for a in self.anomalies if a.name == name) < 10:
            self.anomalies.append(Anomaly(name, "sim", f"at {self.world.now} us: {text}"))

    # ================================================================ issuing

    def burst(self, dc: int, count: int, patience_us: int) -> None:
        """``count`` whole-range SCANs at DC ``dc``, each given up after ``patience_us``."""
        world = self.world
        partitions = world.num_partitions
        for _ in range(count):
            scanner = _Scanner(SCANNER_BASE + len(self.scanners), dc,
                               dc * partitions + self.rng.randrange(partitions), ClientSession(world.num_dcs))
            self.scanners.append(scanner)
            scanner.first = ScanRequest(self._request_id(), self.keys[0], self.keys[-1], None,
                                        scanner.session.current)
            scanner.give_up_us = world.now + patience_us
            self.counts.scans += 1
            self._send(scanner, scanner.first)
            world.at(scanner.give_up_us, lambda s=scanner: self._give_up(s))  # type: ignore[misc]
        if dc not in self._probing:
            self._probing.add(dc)
            world.at(world.now + PROBE_EVERY_US, lambda: self._probe(dc))

    def _send(self, scanner: _Scanner, request: ClientRequest) -> None:
        scanner.request = request
        scanner.sent_us = self.world.now
        if isinstance(request, ScanRequest):
            self.counts.pages += 1
        self.world.submit(scanner.server, request, scanner.index)

    def _probe(self, dc: int) -> None:
        """A GET to every partition of ``dc`` while a scanner there runs (each probe is a fresh
        session on a key of that partition)."""
        world = self.world
        if not any(s.first is not None and not s.done and s.dc == dc for s in self.scanners):
            self._probing.discard(dc)
            return
        partitions = world.num_partitions
        for partition in range(partitions):
            server = dc * partitions + partition
            if world.down[server]:
                continue
            key = self.probe_keys.get(partition)
            if key is None:
                continue
            probe = _Scanner(SCANNER_BASE + len(self.scanners), dc, server, ClientSession(world.num_dcs))
            self.scanners.append(probe)
            self.counts.probes += 1
            self._send(probe, GetRequest(self._request_id(), key, probe.session.current))
        world.at(world.now + PROBE_EVERY_US, lambda: self._probe(dc))

    # ================================================================ the world's client side

    def reply(self, client: int, reply: ClientReply) -> None:
        scanner = self.scanners[client - SCANNER_BASE]
        if scanner.done or scanner.request is None or reply.request_id != scanner.request.request_id:
            return
        world = self.world
        took = world.now - scanner.sent_us
        if took > self.bound_us:
            what = "a probe GET" if scanner.first is None else "a page of a whole-range SCAN"
            self._report("ProbeStarved" if scanner.first is None else "SlowScanPage",
                         f"{what} at {world.name(scanner.server)} took {took / 1000:.0f} ms "
                         f"(bound {self.bound_us / 1000:.0f} ms)")
        if type(reply) is ErrorReply and reply.code == "UNAVAILABLE" and scanner.first is not None \
                and world.now < scanner.give_up_us:
            world.pending[scanner.request.request_id] = client  # refused: nothing ran; retry
            world.send_request(scanner.server, scanner.request, RETRY_US)
            return
        if type(reply) is ScanReply and reply.resume is not None and scanner.first is not None:
            scanner.session.merge(reply.session)
            self._send(scanner, replace(scanner.first, request_id=self._request_id(), start=reply.resume,
                                        session=scanner.session.current, snapshot=reply.snapshot))
            return
        scanner.done, scanner.request = True, None
        if scanner.first is None:
            return
        if type(reply) is ErrorReply:
            self.counts.failed[reply.code] += 1
        else:
            self.counts.completed += 1

    def lost(self, client: int, request: ClientRequest) -> None:
        scanner = self.scanners[client - SCANNER_BASE]
        if not scanner.done and scanner.request is request:
            self.world.send_request(scanner.server, request, RETRY_US)

    def crashed(self, index: int) -> None:
        pending = self.world.pending
        for scanner in self.scanners:
            request = scanner.request
            if not scanner.done and scanner.server == index and request is not None \
                    and request.request_id in pending:
                self.world.send_request(index, request, RETRY_US)

    def _give_up(self, scanner: _Scanner) -> None:
        """The scanner's client goes away: its connection closes, so its server drops the read."""
        if scanner.done:
            return
        world = self.world
        scanner.done = True
        request, scanner.request = scanner.request, None
        if scanner.first is not None:
            self.counts.abandoned += 1
        if request is None:
            return
        world.pending.pop(request.request_id, None)
        world.take_payload(request)
        if not world.down[scanner.server]:
            world.servers[scanner.server].cancel_reads([request.request_id])

    # ================================================================ at the end

    def finish(self) -> None:
        """At the end of the run: report pages unanswered past the bound; the scanners still running
        go away (``_give_up``), and then no server may still coordinate a snapshot read (the
        workload's clients have stopped; a read whose client went away is dropped)."""
        world = self.world
        for scanner in self.scanners:
            if not scanner.done and world.now - scanner.sent_us > self.bound_us:
                self._report("SlowScanPage", f"{world.name(scanner.server)} never answered a request of "
                                             f"{'a probe' if scanner.first is None else 'a scanner'}")
            self._give_up(scanner)
        if not self.scanners:
            return
        for index, server in enumerate(world.servers):
            if not world.down[index] and server.reads.count:
                self._report("ReadsLeftPending", f"{world.name(index)} still coordinates {server.reads.count} "
                                                 f"snapshot read(s) after every scanner finished or went away")


class ClientRouter:
    """The world's client side with scanners: replies and losses go to the workload's clients or
    to the scanners by client index (``SCANNER_BASE``)."""

    def __init__(self, clients: ClientSide, scanners: Scanners) -> None:
        self.clients = clients
        self.scanners = scanners

    def reply(self, client: int, reply: ClientReply) -> None:
        if client >= SCANNER_BASE:
            self.scanners.reply(client, reply)
        else:
            self.clients.reply(client, reply)

    def issue(self, client: int) -> None:
        self.clients.issue(client)

    def lost(self, client: int, request: ClientRequest) -> None:
        if client >= SCANNER_BASE:
            self.scanners.lost(client, request)
        else:
            self.clients.lost(client, request)

    def crashed(self, index: int) -> None:
        self.clients.crashed(index)
        self.scanners.crashed(index)
