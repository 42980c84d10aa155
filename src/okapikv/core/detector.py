"""The optional failure detector: a member DC silent for longer than ``auto_remove_after_us`` is
removed, as `okapi dc remove` would remove it (docs/protocol.md, "Membership"; docs/operations.md,
"Removing a lost DC automatically").

Off by default (``auto_remove_after_us = 0``), because it trades safety of *availability* for
liveness of visibility: a network partition longer than the timeout removes a DC that is alive.

What a server observes: the host (``okapikv.core.host``) tells ``hear`` the DC of every peer
message it receives, of any kind (heartbeats keep a quiet replica audible). Peer links run between
replicas of one partition, so a server hears each other DC through its replica there.

The rule (``proposal``), evaluated by every server at its timer, fires at exactly one server so
that no two proposals duel:
- only partition 0 proposes, and only while its own DC is a member;
- the *silent* DCs are the other member DCs it has heard nothing from for longer than the timeout
  (a DC that became a member, or changed state, is heard afresh from that moment, and so is every
  DC when the server starts, and when its disk stops being full: a full disk refuses the other
  DCs' messages, ``deaf``);
- the proposer is the lowest-numbered member DC that is not silent: a server proposes only if that
  is its own DC (so it never removes itself);
- it proposes only while it hears a strict majority of the member DCs, itself included: the side
  of a partition that holds a minority never removes the majority (with two member DCs, neither
  side is a majority, so the detector never fires);
- one DC per proposal, the lowest-numbered silent one (the next, if any, after the change);
- the last member is never removed (``Membership.with_state`` refuses it).
The change is an ordinary membership change (``PartitionServer.change_membership``): it floods,
and the survivors relay what the removed DC sent to some of them only.
"""

from __future__ import annotations

from okapikv.core.membership import REMOVED, Membership, MembershipError
from okapikv.core.messages import ServerId


class Detector:
    """One server's view of when it last heard each DC (module docstring)."""

    def __init__(self, after_us: int) -> None:
        if after_us <= 0:
            raise ValueError("the failure detector needs a positive timeout")
        self.after_us = after_us
        self._heard: dict[int, int] = {}
        self._since: int | None = None  # when this server first looked: every DC is heard then
        self._view: Membership | None = None

    def hear(self, dc: int, now_us: int) -> None:
        """A message from a server of DC ``dc`` arrived."""
        self._heard[dc] = now_us

    def deaf(self, now_us: int) -> None:
        """This server refuses messages from other DCs (a full disk, ``Host.peer_refusal``: their
        links end until it takes them again): it hears nobody, so it judges nobody, and every DC's
        silence counts afresh from the last moment it was deaf."""
        self._since = now_us
        self._heard.clear()

    def silent_for(self, dc: int, now_us: int) -> int:
        """How long DC ``dc`` has been silent."""
        since = self._since if self._since is not None else now_us
        return now_us - self._heard.get(dc, since)

    def proposal(self, view: Membership, here: ServerId, now_us: int) -> Membership | None:
        """The membership this server proposes now (``view`` with one silent DC removed), or None."""
        if self._since is None:
            self._since = now_us
        if view is not self._view:
            if self._view is not None:
                for dc, (old, new) in enumerate(zip(self._view.states, view.states, strict=False)):
                    if old != new:
                        self._heard[dc] = now_us
            self._view = view
        members = view.members
        if here.partition != 0 or here.dc not in members:
            return None
        silent = [dc for dc in members if dc != here.dc and self.silent_for(dc, now_us) > self.after_us]
        if not silent:
            return None
        audible = [dc for dc in members if dc not in silent]
        if min(audible) != here.dc or 2 * len(audible) <= len(members):
            return None
        try:
            return view.with_state(silent[0], REMOVED)
        except MembershipError:
            return None
