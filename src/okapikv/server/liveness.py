"""When an outgoing peer link's connection is dead though no error says so (a silent cut).

The protocol needs links that are reliable while up (docs/protocol.md, "Replication and heartbeats"): a
message is kept until the receiver acknowledges it and resent on a new connection after a break.
That only helps if a break is noticed. A cut that drops packets without a reset (a failed switch, a
black-holing firewall) leaves the TCP connection "established": the sender's writes sit in its
socket buffer, the kernel retransmits with exponential backoff, and after the heal the link waits
for the next retransmission, up to about the cut's own length later (up to 120 s). Meanwhile
``vv[m]`` for the cut DC stops moving and remote visibility stalls.

So the sender watches its acknowledgements (``LinkAck``, which the receiver sends at most
``InboundLink.ACK_INTERVAL_S`` after a message it handled):

- while it waits for an answer (messages written and not yet acknowledged, or a probe sent) and has
  heard nothing for ``probe_s``, it sends a probe: a ``PeerBatch`` with no messages, which the
  receiver acknowledges at once;
- an idle link (nothing outstanding) sends a probe after ``probe_s`` of silence too, so a dead idle
  connection is found before the next message has to wait for it;
- waiting with nothing heard for ``ack_timeout_s``: the connection is dead. The link closes it,
  reconnects with its backoff and resends the unacknowledged tail; the receiver's numbering skips
  what it already handled (``okapikv.server.inbound``), so declaring a live connection dead costs a
  reconnect and a resend, never a lost or duplicated message.

False positives under load: anything the peer sends counts (an acknowledgement that does not move
is still an answer), the timeout is counted from the first unanswered write (not from the enqueue:
the emulated WAN delay, ``wan_ms``, is spent before the write), and a check that runs late (this
server's own event loop stalled, so answers may be waiting unread in the socket) gives no verdict.

Everything here is pure: times are the event loop's seconds, passed in, so the tests drive it with
a fake clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Verdict(enum.Enum):
    ALIVE = "alive"
    PROBE = "probe"  # send a probe now
    DEAD = "dead"  # close the connection and reconnect


@dataclass(frozen=True, slots=True)
class LivenessSettings:
    """``probe_s``: silence before a probe; ``ack_timeout_s``: silence while waiting before the
    connection counts as dead (``[connections] link_probe_ms`` and ``link_ack_timeout_ms``)."""

    probe_s: float
    ack_timeout_s: float

    @property
    def check_interval_s(self) -> float:
        """How often the link asks for a verdict: fine enough that a probe leaves within a quarter
        of ``probe_s`` of being due."""
        return max(0.01, min(self.probe_s, self.ack_timeout_s) / 4)


class LinkLiveness:
    """The liveness state of one connection of an outgoing link."""

    __slots__ = ("settings", "last_heard", "waiting_since", "probed_at", "_last_check")

    def __init__(self, settings: LivenessSettings, now: float) -> None:
        self.settings = settings
        self.last_heard = now  # a new connection counts as heard from when it opens
        self.waiting_since: float | None = None  # first write not answered since
        self.probed_at: float | None = None  # the last probe, if nothing was heard since
        self._last_check = now

    def sent(self, now: float) -> None:
        """Something was written (messages or a probe): an answer is now expected."""
        if self.waiting_since is None:
            self.waiting_since = now

    def heard(self, now: float, outstanding: bool) -> None:
        """The receiver answered; ``outstanding``: messages are still unacknowledged after it."""
        self.last_heard = now
        self.probed_at = None
        self.waiting_since = now if outstanding else None

    def reset(self, now: float) -> None:
        """Forget the silence so far (the link is held by fault injection and sends nothing)."""
        self.last_heard = now
        self.waiting_since = None
        self.probed_at = None
        self._last_check = now

    def check(self, now: float) -> Verdict:
        """What to do now. Called every ``settings.check_interval_s``; a call much later than that
        (the event loop stalled) only notes the time: answers may be unread in the socket."""
        settings = self.settings
        stalled = now - self._last_check > 2 * settings.check_interval_s + 0.25
        self._last_check = now
        if stalled:
            return Verdict.ALIVE
        # waiting_since is never before last_heard: waiting that long means hearing nothing as long
        if self.waiting_since is not None and now - self.waiting_since >= settings.ack_timeout_s:
            return Verdict.DEAD
        probe_due = self.probed_at is None or now - self.probed_at >= settings.probe_s
        if now - self.last_heard >= settings.probe_s and probe_due:
            self.probed_at = now
            return Verdict.PROBE
        return Verdict.ALIVE
