"""The simulated network: FIFO links between servers, their delays, and cuts between DCs.

Links between servers are FIFO and reliable, as the production peer links are (docs/protocol.md,
"Replication and heartbeats"): each message gets a delay but is never delivered before an earlier
message of the same link. Delays: inside a DC uniform in ``lan_us``; between DCs the WAN matrix
entry, plus relative and absolute jitter, plus a fixed extra delay per link (``link_extra``: links
of different partitions take different routes, so updates of one client to two partitions may
arrive in the other order, which the stabilization protocols must hide), plus, under a cost
model with a WAN bandwidth (``wan_bytes_per_us``), the time to send it behind what the link is
still sending. Client requests and replies take ``client_us``.

A *cut* (a partitioned DC, or the link between two DCs) holds what the cut links carry, in FIFO
order, and delivers it on repair (links are reliable). A crashed server receives nothing: what its
peers send it meanwhile, and what was in flight to it, stays unacknowledged in their links
(``unacked``) and is resent, in order, to the next incarnation (``resend``); what the crashed
server itself had queued behind a cut, or kept for a crashed destination, dies with it
(``drop_queues_from``). A link its destination
*refused* (a full disk refuses replication from other DCs: ``okapikv.core.host.Host.peer_refusal``)
ends as a production link does: it keeps the refused message and everything after it
(``refused``) and resends them, in order, once the destination takes them again. A *silent* link between
DCs keeps what it carries until its liveness check has reconnected it (``silent``:
``okapikv.sim.silent``).

The network also keeps the ledger of replication batches in flight on each cross-DC link (the
first update timestamp in each that the link had not carried before): the run is quiescent only
when it is empty, and the replication promise is checked against it (``okapikv.sim.invariants``).

Servers are numbered ``dc * num_partitions + partition``; link ``source * servers + destination``.
With a ``random`` that always returns 0 (``World.fixed``), every delay is its fixed part.
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from collections.abc import Callable
from typing import Protocol

from okapikv.core.messages import Message, ReplicateBatch, ServerId
from okapikv.sim.cost import message_bytes
from okapikv.sim.events import DELIVER, INFINITY, Events


class SilentLinkHooks(Protocol):
    """What the network asks of its silent links (``okapikv.sim.silent.SilentLinks``)."""

    def carry(self, number: int, message: Message) -> bool:
        """Keep ``message`` if link ``number`` is silent (True)."""

    def prepend(self, number: int, messages: list[Message]) -> bool:
        """Keep ``messages`` ahead of what link ``number`` keeps, if it is silent (True)."""

    def drop_from(self, index: int) -> None:
        """Server ``index`` crashed: what its silent links kept is lost."""

    def holding(self) -> bool:
        """Whether any silent link keeps messages."""


class Network:
    def __init__(
        self,
        events: Events,
        down: list[bool],
        num_partitions: int,
        *,
        wan_us: list[list[int]],
        lan_us: tuple[int, int],
        client_us: tuple[int, int],
        jitter: float,
        jitter_us: float,
        link_extra: list[int],
        random: Callable[[], float],
    ) -> None:
        """``down``: the world's per-server crashed flags (shared, not copied)."""
        self.events = events
        self.down = down
        self.num_partitions = num_partitions
        self.num_dcs = len(wan_us)
        count_servers = self.count_servers = self.num_dcs * num_partitions
        self.wan_us = wan_us
        self.lan_low, lan_high = lan_us
        self.lan_span = lan_high - self.lan_low + 1
        self.client_low, client_high = client_us
        self.client_span = client_high - self.client_low + 1
        self.jitter = jitter
        self.jitter_us = jitter_us
        if len(link_extra) != count_servers * count_servers:
            raise ValueError(f"link_extra must have {count_servers * count_servers} entries")
        self.link_extra = link_extra
        self._random = random
        self.link_last = [0] * (count_servers * count_servers)
        self.dc_down = [0] * self.num_dcs
        self.pair_down: Counter[tuple[int, int]] = Counter()
        #: per cut link, what it holds until the repair, in order
        self.held: dict[int, list[Message]] = {}
        #: per link its destination refused: the messages it keeps to resend, in order
        self.refused: dict[int, list[Message]] = {}
        #: per crashed server, per source server: the peer messages its links will resend to it
        self.unacked: list[dict[int, list[Message]]] = [{} for _ in range(count_servers)]
        #: per cross-DC link: the first new timestamp of each replication batch in flight
        self.inflight: dict[int, deque[int]] = {}
        #: per cross-DC link: the highest update timestamp it has carried
        self.carried: dict[int, int] = {}
        self.replication_inflight = 0
        #: messages sent, by type
        self.counts: dict[type, int] = {}
        #: the cost model's WAN bandwidth per link (bytes per us; 0: unbounded): a message between DCs
        #: first waits for the link to finish sending what is ahead of it, then takes size / bandwidth
        self.wan_bytes_per_us = 0.0
        self.link_sending_until = [0.0] * (count_servers * count_servers)
        #: links between DCs gone silent and their liveness check (``okapikv.sim.silent``), if any
        self.silent: SilentLinkHooks | None = None

    # ================================================================ delays and cuts

    def client_delay(self) -> int:
        """One-way delay between a client and a server of its DC."""
        return self.client_low + int(self._random() * self.client_span)

    def wan_delay(self, src_dc: int, dst_dc: int) -> int:
        """One-way delay between two DCs: the matrix entry, plus relative and absolute jitter."""
        random = self._random
        base = self.wan_us[src_dc][dst_dc]
        return base + int(base * self.jitter * random()) + int(self.jitter_us * random())

    def link_up(self, a: int, b: int) -> bool:
        """Whether DCs ``a`` and ``b`` can talk (always, inside one DC)."""
        if a == b:
            return True
        return not (self.dc_down[a] or self.dc_down[b] or self.pair_down[(min(a, b), max(a, b))])

    def cut_dc(self, dc: int) -> None:
        """Partition DC ``dc`` from every other (cuts nest: each needs its own ``repair_dc``)."""
        self.dc_down[dc] += 1

    def repair_dc(self, dc: int) -> None:
        self.dc_down[dc] -= 1
        self.release_held()

    def cut_link(self, a: int, b: int) -> None:
        """Cut the link between DCs ``a`` and ``b``, both ways (cuts nest)."""
        self.pair_down[(min(a, b), max(a, b))] += 1

    def repair_link(self, a: int, b: int) -> None:
        self.pair_down[(min(a, b), max(a, b))] -= 1
        self.release_held()

    def release_held(self) -> None:
        """Deliver, in FIFO order, what every link that is up again was holding."""
        count_servers = self.count_servers
        partitions = self.num_partitions
        for link in sorted(self.held):
            source, destination = divmod(link, count_servers)
            src_dc, dst_dc = source // partitions, destination // partitions
            if not self.link_up(src_dc, dst_dc):
                continue
            for message in self.held.pop(link):
                self._transmit(link, src_dc, dst_dc, destination, message)

    # ================================================================ sending

    def send(self, source: int, destination: int, message: Message) -> None:
        """Server ``source`` sends ``message`` to server ``destination``."""
        partitions = self.num_partitions
        src_dc, dst_dc = source // partitions, destination // partitions
        link = source * self.count_servers + destination
        kind = type(message)
        counts = self.counts
        counts[kind] = counts.get(kind, 0) + 1
        if src_dc == dst_dc:
            # inside a DC: the common case (slices, stabilization), kept short
            if self.down[destination]:
                self.unacked[destination].setdefault(source, []).append(message)
                return
            events = self.events
            at = events.now + self.lan_low + int(self._random() * self.lan_span)
            if at < self.link_last[link]:
                at = self.link_last[link]
            self.link_last[link] = at
            heapq.heappush(events.heap, (at, next(events.seq), DELIVER, destination, message))
            return
        if kind is ReplicateBatch:
            self._track_batch(link, message)  # type: ignore[arg-type]
        if link in self.refused:
            self.refused[link].append(message)
            return
        if not self.link_up(src_dc, dst_dc):
            self.held.setdefault(link, []).append(message)
            return
        self._transmit(link, src_dc, dst_dc, destination, message)

    def _transmit(self, link: int, src_dc: int, dst_dc: int, destination: int, message: Message) -> None:
        """Put a cross-DC message on its link: never delivered before the link's previous message.
        Nothing leaves for a crashed server: the link waits to resend it to the next incarnation, nor
        on a silent link: it keeps it until it has reconnected (``okapikv.sim.silent``)."""
        if self.silent is not None and self.silent.carry(link, message):
            return
        if self.down[destination]:
            self.unacked[destination].setdefault(link // self.count_servers, []).append(message)
            return
        events = self.events
        sent = events.now
        if self.wan_bytes_per_us:
            done = max(float(sent), self.link_sending_until[link]) + message_bytes(message) / self.wan_bytes_per_us
            self.link_sending_until[link] = done
            sent = int(done)
        at = sent + self.wan_delay(src_dc, dst_dc) + self.link_extra[link]
        last = self.link_last[link]
        if at < last:
            at = last
        self.link_last[link] = at
        heapq.heappush(events.heap, (at, next(events.seq), DELIVER, destination, message))

    def keep_for(self, destination: int, source: ServerId, message: Message) -> None:
        """A peer message reached crashed server ``destination``: its sender's link keeps it."""
        self.unacked[destination].setdefault(source.dc * self.num_partitions + source.partition, []).append(message)

    def refuse(self, destination: int, source: ServerId, message: Message) -> None:
        """Server ``destination`` refused ``message``: its link keeps it, and all it carries after it."""
        link = (source.dc * self.num_partitions + source.partition) * self.count_servers + destination
        self.refused.setdefault(link, []).append(message)

    def refusing(self, destination: int, source: ServerId) -> bool:
        """Whether the link from ``source`` to ``destination`` was refused and has not resent yet."""
        return ((source.dc * self.num_partitions + source.partition) * self.count_servers + destination
                in self.refused)

    def accepted(self, destination: int, in_flight: list[Message]) -> None:
        """Server ``destination`` takes its refused links again: each resends what it kept, then
        what was on its way after the refusal (``in_flight``, taken off the wire by the caller)."""
        count_servers = self.count_servers
        for message in in_flight:
            self.refuse(destination, message.source, message)  # type: ignore[union-attr]
        for link in sorted(link for link in self.refused if link % count_servers == destination):
            self.resend(link // count_servers, destination, self.refused.pop(link))

    def resend(self, source: int, destination: int, messages: list[Message]) -> None:
        """A link's unacknowledged tail, resent in order to a restarted server, ahead of anything
        the link sends later (and ahead of what it holds, if it is cut)."""
        partitions = self.num_partitions
        src_dc, dst_dc = source // partitions, destination // partitions
        link = source * self.count_servers + destination
        if not self.link_up(src_dc, dst_dc):
            self.held[link] = messages + self.held.get(link, [])
            return
        if self.silent is not None and self.silent.prepend(link, messages):
            return
        events = self.events
        for message in messages:
            if src_dc == dst_dc:
                at = max(events.now + self.lan_low + int(self._random() * self.lan_span), self.link_last[link])
                self.link_last[link] = at
                heapq.heappush(events.heap, (at, next(events.seq), DELIVER, destination, message))
            else:
                self._transmit(link, src_dc, dst_dc, destination, message)

    def drop_queues_from(self, index: int) -> None:
        """Server ``index`` crashed: what its links kept dies with it, as a production link's queue
        dies with its process: what its cut and refused links held (the newest of each link's
        batches in flight), and what they kept unacknowledged for a crashed destination (the oldest:
        a crashed destination receives nothing, so all a link sent it since is kept). A restarted
        destination asks the sender's next incarnation for what it misses (its catch-up); resending
        a dead incarnation's batches after its DC's new servers have heartbeated past them would
        hand the destination updates its vector already covers."""
        count_servers = self.count_servers
        for queues in (self.held, self.refused):
            for link in [link for link in queues if link // count_servers == index]:
                for message in queues.pop(link):
                    if type(message) is ReplicateBatch:
                        self.inflight[link].pop()
                        self.replication_inflight -= 1
        for destination, kept in enumerate(self.unacked):
            for message in kept.pop(index, ()):
                self.lost_on_link(index, destination, message)
        if self.silent is not None:
            self.silent.drop_from(index)

    def lost_on_link(self, source: int, destination: int, message: Message) -> None:
        """``message``, the oldest of its link still in flight, is lost with its sender's link: off the
        ledger."""
        if type(message) is ReplicateBatch:
            self.inflight[source * self.count_servers + destination].popleft()
            self.replication_inflight -= 1

    # ================================================================ the replication ledger

    def _track_batch(self, link: int, batch: ReplicateBatch) -> None:
        """Count a replication batch in flight, with the lowest timestamp in it that the link has not
        carried yet (what the replication promise is checked against): a catch-up answer resends
        updates the link carried before (``CatchUpRequest``), which a heartbeat sent before it may
        rightly cover; a batch with nothing new is recorded as ``INFINITY``. Only the sender's own
        DC's updates count: a relay answer (``okapikv.core.membership``) carries a removed DC's."""
        own = batch.source.dc
        updates = batch.updates if updates_own(batch) else tuple(u for u in batch.updates if u.source_dc == own)
        if not updates:
            self.inflight.setdefault(link, deque()).append(INFINITY)
            self.replication_inflight += 1
            return
        first, last = updates[0].timestamp, updates[-1].timestamp
        carried = self.carried.get(link, 0)
        if first <= carried:
            first = min((u.timestamp for u in updates if u.timestamp > carried), default=INFINITY)
        if last > carried:
            self.carried[link] = last
        self.inflight.setdefault(link, deque()).append(first)
        self.replication_inflight += 1

    def batch_arrived(self, batch: ReplicateBatch, destination: int) -> None:
        """A replication batch reached server ``destination``: no longer in flight."""
        source = batch.source
        queue = self.inflight.get((source.dc * self.num_partitions + source.partition) * self.count_servers
                                  + destination)
        if queue:
            queue.popleft()
            self.replication_inflight -= 1

    def carried_between_dcs(self) -> bool:
        """Whether any link between two DCs has put a message on the wire."""
        count_servers, partitions = self.count_servers, self.num_partitions
        return any(last and (link // count_servers) // partitions != (link % count_servers) // partitions
                   for link, last in enumerate(self.link_last))

    def quiet(self) -> bool:
        """No replication in flight and nothing held behind a cut or on a silent link."""
        return not self.replication_inflight and not self.held and (self.silent is None or not self.silent.holding())


def updates_own(batch: ReplicateBatch) -> bool:
    """Whether every update of ``batch`` is its sender's DC's (all but a relay answer's)."""
    own = batch.source.dc
    return all(update.source_dc == own for update in batch.updates)
