"""Silent links: a peer link whose connection stops delivering without closing, and the link's own
liveness check that finds it (the model of ``okapikv.server.liveness`` as ``okapikv.server.links``
uses it; docs/operations.md, "Peer link liveness").

A cut that drops packets without a reset (a failed switch, a black-holing firewall) leaves the
sender's TCP connection "established": what it writes is never delivered and nothing says so. The
protocol's links must be reliable while up (docs/protocol.md, "Replication and heartbeats"), so the
real link keeps every message until it is acknowledged and watches the acknowledgements: waiting
``link_ack_timeout_ms`` for any answer since the first unanswered write (an idle link probes after
``link_probe_ms`` of silence and waits for the probe's answer), it declares the connection dead,
drops it, reconnects with its backoff (50 ms doubling to 1 s, ``okapikv.server.links``) and resends
its unacknowledged tail, then what queued meanwhile, in order. That is what this module models, on
one directed link between servers of two DCs (``silence``):

- while the fault lasts, the link's connection carries nothing: every message sent on it is kept,
  in order (the unacknowledged tail); the sender does not know;
- the fault's end (``heal``) lets *new* connections through. The old one stays silent: a middlebox
  that dropped the connection's state never passes it again, and TCP's own retransmissions back off
  to up to the cut's length (issue: 120 s at most), beyond any simulated run. So the link moves
  again only once its liveness check has declared the connection dead and a reconnect succeeds;
- the check: ``ack_timeout`` after the first message written into the silence (or a probe after
  ``probe`` of silence, if none), the connection is dead; a reconnect is tried after each backoff
  step, fails while the fault lasts, and the first after the fault's end connects. A real attempt
  into a silent path may hang until its connect timeout before it fails; the gRPC channel under it
  retries within its own 1 s backoff of the heal, so the bound after the heal is the same;
- a crash of the sender loses its link and what the link kept (as ``Network.drop_queues_from``);
  its next incarnation connects afresh, once the fault is over. A crash of the receiver changes
  nothing here: what the link resends to a crashed server waits for its restart (``Network``).

So a silent link stalls its destination's ``vv`` entry for the source's DC, hence remote visibility,
for at most the ack timeout plus one backoff step after the fault ends. Without the check
(``detect`` False: the links before ``okapikv.server.liveness``) it never moves again, which the
liveness checker reports (``VisibilityStalled``) and quiescence never comes.

Only links between DCs go silent (the replication links of the issue's cut between two DCs); a
partition that stops answering inside its DC is the snapshot reads' ``read_timeout_us``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from okapikv.core.messages import Message, ReplicateBatch
from okapikv.sim.events import CONTROL
from okapikv.sim.network import Network


@dataclass(frozen=True, slots=True)
class LinkTimers:
    """The link's liveness settings, in us: ``[connections] link_probe_ms`` and
    ``link_ack_timeout_ms``, and the reconnect backoff (first step, largest step)."""

    probe_us: int
    ack_timeout_us: int
    backoff_us: tuple[int, int] = (50_000, 1_000_000)


@dataclass(slots=True)
class _Link:
    source: int
    destination: int
    #: the fault is in force: the old connection is silent and new ones fail
    faulty: bool = True
    #: the link still believes its (silent) connection is up
    connected: bool = True
    #: what the link keeps for the destination, in order: the unacknowledged tail, then its queue
    kept: list[Message] = field(default_factory=list)
    #: when the first unanswered write went out (None: nothing written into the silence yet)
    waiting_since: int | None = None
    backoff_us: int = 0
    #: bumped when the link is dropped, so its scheduled checks of an earlier life do nothing
    generation: int = 0


@dataclass(slots=True)
class LinkCounts:
    silenced: int = 0
    dead: int = 0  # connections the liveness check declared dead
    failed_attempts: int = 0  # reconnects tried while the fault lasted
    resent: int = 0  # messages sent again on a new connection


class SilentLinks:
    """The silent directed links of one network (``Network.silent``), by link number."""

    def __init__(self, network: Network, timers: LinkTimers, *, detect: bool = True,
                 note: Callable[[str], None] = lambda text: None,
                 name: Callable[[int], str] = str) -> None:
        self.network = network
        self.timers = timers
        self.detect = detect
        self.note = note
        self.name = name
        self.links: dict[int, _Link] = {}
        self.counts = LinkCounts()

    def _label(self, link: _Link) -> str:
        return f"{self.name(link.source)}->{self.name(link.destination)}"

    def _at(self, delay_us: int, link: _Link, action: Callable[[_Link], None]) -> None:
        generation = link.generation
        events = self.network.events

        def run() -> None:
            if self.links.get(link.source * self.network.count_servers + link.destination) is link \
                    and link.generation == generation:
                action(link)

        events.push(events.now + delay_us, CONTROL, 0, run)

    # ================================================================ the fault

    def silence(self, source: int, destination: int) -> bool:
        """The link ``source`` -> ``destination`` (servers of two DCs) goes silent; False if it
        already is (or is still reconnecting after an earlier silence)."""
        network = self.network
        partitions = network.num_partitions
        if source // partitions == destination // partitions:
            raise ValueError("only links between DCs go silent")
        number = source * network.count_servers + destination
        if number in self.links:
            return False
        link = self.links[number] = _Link(source, destination)
        self.counts.silenced += 1
        # An idle link probes after ``probe`` of silence: the latest its wait can start.
        self._at(self.timers.probe_us + self.timers.ack_timeout_us, link, self._check)
        return True

    def heal(self, source: int, destination: int) -> None:
        """The fault ends: new connections get through (the old one stays silent)."""
        link = self.links.get(source * self.network.count_servers + destination)
        if link is not None:
            link.faulty = False

    def holding(self) -> bool:
        """Whether any silent or reconnecting link keeps messages."""
        return any(link.kept for link in self.links.values())

    # ================================================================ the network's hooks

    def carry(self, number: int, message: Message) -> bool:
        """A message for the wire of link ``number``: kept (True) if that link is silent or
        reconnecting; the first one written into the silence starts the ack timeout."""
        link = self.links.get(number)
        if link is None:
            return False
        link.kept.append(message)
        if link.connected and link.waiting_since is None:
            link.waiting_since = self.network.events.now
            self._at(self.timers.ack_timeout_us, link, self._check)
        return True

    def prepend(self, number: int, messages: list[Message]) -> bool:
        """A restarted destination's resend (older than what the link keeps) goes first; False if
        link ``number`` is not silent."""
        link = self.links.get(number)
        if link is None:
            return False
        link.kept[:0] = messages
        return True

    def drop_from(self, index: int) -> None:
        """Server ``index`` crashed: its links and what they kept are lost; a link whose fault still
        lasts stays cut for the next incarnation (it reconnects once the fault ends)."""
        network = self.network
        for number, link in list(self.links.items()):
            if link.source != index:
                continue
            for message in reversed(link.kept):
                if type(message) is ReplicateBatch:
                    network.inflight[number].pop()
                    network.replication_inflight -= 1
            link.kept = []
            link.generation += 1
            if not link.faulty:
                del self.links[number]
                continue
            link.connected, link.waiting_since = False, None
            link.backoff_us = self.timers.backoff_us[0]
            self._at(link.backoff_us, link, self._attempt)

    # ================================================================ the link's liveness check

    def _check(self, link: _Link) -> None:
        if not link.connected or not self.detect:
            return
        now = self.network.events.now
        if link.waiting_since is not None and now - link.waiting_since < self.timers.ack_timeout_us:
            return  # a probe's deadline came first; the write's is still ahead
        self.counts.dead += 1
        silent_ms = (now - (link.waiting_since if link.waiting_since is not None else now)) / 1000
        self.note(f"link {self._label(link)} dead: no answer for {silent_ms:.0f} ms; reconnecting "
                  f"({len(link.kept)} messages kept)")
        link.connected, link.waiting_since = False, None
        link.backoff_us = self.timers.backoff_us[0]
        self._at(link.backoff_us, link, self._attempt)

    def _attempt(self, link: _Link) -> None:
        if link.faulty:
            self.counts.failed_attempts += 1
            link.backoff_us = min(2 * link.backoff_us, self.timers.backoff_us[1])
            self._at(link.backoff_us, link, self._attempt)
            return
        network = self.network
        number = link.source * network.count_servers + link.destination
        del self.links[number]
        kept = link.kept
        self.counts.resent += len(kept)
        self.note(f"link {self._label(link)} reconnected, resending {len(kept)} messages")
        partitions = network.num_partitions
        src_dc, dst_dc = link.source // partitions, link.destination // partitions
        for message in kept:
            if network.link_up(src_dc, dst_dc):
                network._transmit(number, src_dc, dst_dc, link.destination, message)
            else:
                network.held.setdefault(number, []).append(message)
