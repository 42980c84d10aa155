"""Online membership: which DCs the stable vectors count (docs/protocol.md, "Membership").

A cluster's DCs are fixed by its config (every vector keeps one entry per DC), but a DC lost for
good must stop holding the others back: under Okapi a remote update is visible only once every DC
has it (the USV is a minimum over every DC's GSV), under GentleRain once every DC's stream is past
it (the GST is a minimum over every ``vv`` entry), and garbage collection waits on the same minima.
So each server keeps a ``Membership``: an epoch and each DC's state, ``member``, ``removed`` or
``joining`` (a removed DC coming back, ``okapi dc add``).
A change is made at one server (the admin RPC, ``okapi dc remove``) and flooded on the peer links
(``MembershipUpdate``, to the server's DC and its replicas); a server adopts a membership ordered
after its own (``Membership.key``: the epoch first, so every live server ends on the same one) and
passes it on once, so the flood ends.

The rule (the invariant, docs/protocol.md, "Membership"): a stable entry ``t`` for DC i at a server
means that every DC the server **counts** holds DC i's updates up to ``t``. A removed DC is counted
until the survivors have exchanged what it sent to some of them and not others (the **relay**:
``RelayRequest`` asks each surviving replica for the removed DC's updates above this server's
``vv`` entry; ``RelayReply`` ends the answer, which travels as replication batches on the FIFO
link). Only then does it leave the minima (``PartitionState.counted``). So at every moment the
counted set contains every DC that serves reads, a minimum taken over it is a minimum over a
superset of the survivors, and the stable vector (a max of such minima) never claims an update some
survivor lacks: causal consistency among the survivors holds through the change.

While removed, a DC gets nothing from the survivors (no replication, heartbeats or reports: its
link queues would grow without bound) and its stream is ignored (``ignores``). A server of a removed
DC refuses clients (``serving``): its DC is out of the cluster.

A membership that names more DCs than the server knows grows the server first (a new DC joining,
``okapikv.core.growth``; ``_aligned``).

A joining DC is a replica again (it gets the streams, its own is taken, and its servers re-run their
catch-up or repair, ``rejoined``), but each server counts it only once it has caught up there
(``check_joining``: under Okapi its GSV has reached this server's stable vector, so counting it
lowers no minimum; under the others its stream has reached the other counted streams). Its servers
refuse clients until the next epoch makes it a member, which `okapi dc add` takes only once every
server counts it: so no write of the joining DC can be depended on where it is not counted yet.

Invariants (tested in ``tests/unit/test_core_membership.py`` and
``tests/property/test_prop_membership.py``):
- a membership always has at least one member, and an adopted one is ordered after the previous;
- a DC leaves ``counted`` only once every surviving replica answered the relay for it;
- the stable vector never moves backwards across membership changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from okapikv.core.growth import GrowthError
from okapikv.core.messages import (
    Effect,
    MembershipUpdate,
    RelayReply,
    RelayRequest,
    ReplicateBatch,
    Send,
    ServerId,
    Update,
)
from okapikv.core.state import PartitionState

MEMBER = "member"
REMOVED = "removed"
JOINING = "joining"
STATES = (MEMBER, REMOVED, JOINING)
#: Updates per ReplicateBatch of a relay answer (the driver splits further by bytes).
RELAY_BATCH = 1_000


class MembershipError(ValueError):
    """A membership change that must not be made (the last DC, an unknown name, a stale epoch)."""


@dataclass(frozen=True, slots=True)
class Membership:
    """The membership epoch and each DC's state (``STATES``), one entry per DC of the config."""

    epoch: int
    states: tuple[str, ...]

    @classmethod
    def initial(cls, num_dcs: int) -> Membership:
        return cls(0, (MEMBER,) * num_dcs)

    def __post_init__(self) -> None:
        if self.epoch < 0:
            raise MembershipError(f"membership epoch {self.epoch} is negative")
        if any(state not in STATES for state in self.states):
            raise MembershipError(f"unknown DC state in {self.states}; states are {', '.join(STATES)}")
        if MEMBER not in self.states:
            raise MembershipError("a membership needs at least one member DC")

    @property
    def key(self) -> tuple[int, tuple[str, ...]]:
        """The order of memberships: a server adopts one whose key is above its own. Two changes
        made concurrently at the same epoch are ordered by their states, so every server ends on the
        same one."""
        return self.epoch, self.states

    @property
    def members(self) -> tuple[int, ...]:
        return tuple(dc for dc, state in enumerate(self.states) if state == MEMBER)

    def with_state(self, dc: int, state: str) -> Membership:
        """The next epoch with DC ``dc`` in ``state``; ``MembershipError`` if that changes nothing
        or would leave no member."""
        if not 0 <= dc < len(self.states):
            raise MembershipError(f"no DC {dc} in a cluster of {len(self.states)}")
        if self.states[dc] == state:
            raise MembershipError(f"DC {dc} is {state} already (epoch {self.epoch})")
        states = self.states[:dc] + (state,) + self.states[dc + 1 :]
        if MEMBER not in states:
            raise MembershipError("the last member DC cannot be removed")
        return Membership(self.epoch + 1, states)

    def with_new_dc(self) -> Membership:
        """The next epoch with one more DC, joining (``okapi dc join``, ``okapikv.core.growth``)."""
        return Membership(self.epoch + 1, (*self.states, JOINING))


class Members:
    """A partition server's membership, the flood of changes and the relay (module docstring)."""

    def __init__(self, state: PartitionState, grow: Callable[[int], None] | None = None) -> None:
        self.state = state
        #: grows the server to a number of DCs (``PartitionServer.grow``): a membership naming
        #: more DCs than this server knows is adopted only after it
        self._grow = grow
        self.view = Membership.initial(state.num_dcs)
        #: removed DC -> replica DCs whose relay answer for it has not arrived
        self.relays: dict[int, dict[int, int]] = {}
        self._next_id = 0
        #: how many memberships this server adopted (for the driver's metrics and logs)
        self.changes = 0
        #: whether this server's DC is a member: a server of a removed or joining DC refuses clients
        self.serving = True
        #: joining DCs this server counts (caught up here, ``check_joining``)
        self.admitted: set[int] = set()
        #: this server's DC came back (removed -> joining or member) since the server last looked:
        #: it asks its replicas again (``PartitionServer``: a catch-up, or the repair it was in)
        self.rejoined = False

    def ignores(self, dc: int) -> bool:
        """Whether messages from DC ``dc``'s servers are ignored (it is removed)."""
        return self.view.states[dc] == REMOVED

    @property
    def serving_peers(self) -> bool:
        """Whether this server's DC is in the cluster (not removed): it has replicas to talk to."""
        return self.view.states[self.state.dc] != REMOVED

    def on_restart(self, source: ServerId) -> list[Effect]:
        """A replica restarted (its ``CatchUpRequest``): tell it a membership newer than the initial
        one, which it may have lost with its disk or missed while down."""
        return self.tell(source) if self.view.epoch else []

    def tell(self, destination: ServerId) -> list[Effect]:
        """A message came from a removed DC's server: tell it the membership, so that it learns it
        is out (it then refuses clients and sends nothing more)."""
        view = self.view
        return [Send(destination, MembershipUpdate(self.state.id, view.epoch, view.states))]

    def restore(self, view: Membership) -> None:
        """The membership recovered with the server's durable state (before ``start``)."""
        if len(view.states) != self.state.num_dcs:
            raise MembershipError(f"recovered membership {view.states} does not have {self.state.num_dcs} DCs")
        self.view = view
        self._recount()

    def start(self) -> list[Effect]:
        """After a restart: tell the DC and the replicas this server's membership (one that knows a
        newer one answers with it: a server whose disk was lost, or that was down during a change,
        learns it so), and ask the surviving replicas again for every removed DC's updates (a
        relay in flight at the crash may never have been answered)."""
        state = self.state
        view = self.view
        effects: list[Effect] = []
        if view.epoch:  # (the initial membership: a replica that knows a newer one tells it, ``on_restart``)
            update = MembershipUpdate(state.id, view.epoch, view.states)
            effects.extend(Send(destination, update) for destination in (*state.dc_members, *state.peers)
                           if destination != state.id)
        for dc, dc_state in enumerate(view.states):
            if dc_state == REMOVED and dc != state.dc:
                self._start_relay(dc, effects)
        self._recount()
        return effects

    def change(self, view: Membership) -> list[Effect]:
        """Adopt ``view`` if it is ordered after this server's membership, and pass it on to the DC
        and the replicas (each adopts it once, so the flood ends); else nothing."""
        state = self.state
        try:
            view = self._aligned(view)
        except (GrowthError, MembershipError):
            return []  # a growth this server cannot make changes nothing
        if len(view.states) != state.num_dcs or view.key <= self.view.key:
            return []
        before = self.view
        self.view = view
        self.changes += 1
        effects: list[Effect] = []
        for dc, (old, new) in enumerate(zip(before.states, view.states, strict=True)):
            if old == new:
                continue
            self.admitted.discard(dc)
            if dc == state.dc:
                self.rejoined = old == REMOVED
            elif new == REMOVED:
                self._start_relay(dc, effects)
            else:
                self.relays.pop(dc, None)
        for dc, waiting in list(self.relays.items()):
            for replica in [replica for replica in waiting if view.states[replica] == REMOVED]:
                del waiting[replica]  # a replica removed since: its answer is not needed
            if not waiting:
                del self.relays[dc]
        self._recount()
        update = MembershipUpdate(state.id, view.epoch, view.states)
        for destination in (*state.dc_members, *state.peers):
            if destination != state.id:
                effects.append(Send(destination, update))
        return effects

    def on_update(self, message: MembershipUpdate, now_us: int) -> list[Effect]:
        """Adopt a newer membership; answer an older one with this server's (its sender missed a
        change: it was down, or lost its disk)."""
        try:
            view = Membership(message.epoch, message.states)
        except MembershipError:
            return []  # a malformed change changes nothing
        if view.key < self.view.key and len(view.states) == len(self.view.states):
            return self.tell(message.source)
        effects = self.change(view)
        if not effects and len(view.states) < len(self.view.states):
            effects = self.tell(message.source)  # its sender does not know every DC yet
        return effects

    def _aligned(self, view: Membership) -> Membership:
        """``view`` over as many DCs as this server's membership (``okapikv.core.growth``). One that
        names fewer DCs (its sender has not grown yet) keeps this server's states for the others;
        one that names more grows this server first, which takes the new DCs' states from it at its
        own epoch: so the new DCs are known whether or not ``view`` is ordered after, and two
        changes made at the same epoch, one of them a growth, are ordered as any two."""
        mine, theirs = self.view.states, view.states
        if len(theirs) < len(mine):
            return Membership(view.epoch, theirs + mine[len(theirs):])
        if len(theirs) > len(mine):
            if self._grow is None:
                raise GrowthError(f"this server cannot grow to {len(theirs)} DCs")
            self._grow(len(theirs))
            self.view = Membership(self.view.epoch, mine + theirs[len(mine):])
            self.changes += 1
            self._recount()
        return view

    def check_joining(self, caught_up: Callable[[int], bool]) -> bool:
        """Count each joining DC that ``caught_up`` says has caught up here; whether one was."""
        states = self.view.states
        new = [dc for dc, dc_state in enumerate(states)
               if dc_state == JOINING and dc != self.state.dc and dc not in self.admitted and caught_up(dc)]
        if not new:
            return False
        self.admitted.update(new)
        self._recount()
        return True

    @property
    def joining(self) -> bool:
        """Whether some other DC is joining and not counted here yet."""
        return any(state == JOINING and dc not in self.admitted and dc != self.state.dc
                   for dc, state in enumerate(self.view.states))

    # ---------------------------------------------------------------- the relay between survivors

    def _start_relay(self, dc: int, effects: list[Effect]) -> None:
        state = self.state
        waiting: dict[int, int] = {}
        for replica, replica_state in enumerate(self.view.states):
            if replica in (dc, state.dc) or replica_state == REMOVED:
                continue
            request_id = self._next_id or state.hlc + 1  # unique across incarnations (``catchup``)
            self._next_id = request_id + 1
            waiting[replica] = request_id
            effects.append(Send(ServerId(replica, state.id.partition),
                                RelayRequest(state.id, request_id, dc, state.vv[dc])))
        if waiting:
            self.relays[dc] = waiting
        else:
            self.relays.pop(dc, None)

    def on_relay_request(self, message: RelayRequest, now_us: int) -> list[Effect]:
        """Send every update of the removed DC above ``after`` this store holds, then the reply.
        Enough for convergence: a version of that DC this store collected was superseded by one
        visible under the USV (Okapi: every DC has it) or this DC's GSV, which the requester gets
        in its own stream or relay."""
        state = self.state
        dc = message.dc
        if not state.is_replica(message.source) or not 0 <= dc < state.num_dcs or dc == state.dc:
            return []
        updates = [Update(key, version.value, version.timestamp, dc, version.dv)
                   for key, version in state.store.written_by(dc, message.after)]
        effects: list[Effect] = [
            Send(message.source, ReplicateBatch(state.id, tuple(updates[start : start + RELAY_BATCH])))
            for start in range(0, len(updates), RELAY_BATCH)
        ]
        effects.append(Send(message.source, RelayReply(state.id, message.request_id, dc, state.vv[dc])))
        state.stats.relay_updates_sent += len(updates)
        return effects

    def on_relay_reply(self, message: RelayReply, now_us: int) -> list[Effect]:
        """Every update of the removed DC up to ``through`` that the replica held has arrived
        (before this, on the FIFO link); once every surviving replica answered, the DC leaves the
        minima."""
        state = self.state
        dc = message.dc
        waiting = self.relays.get(dc)
        if waiting is None or waiting.get(message.source.dc) != message.request_id:
            return []
        if message.through > state.vv[dc]:
            state.vv[dc] = message.through
        del waiting[message.source.dc]
        if not waiting:
            del self.relays[dc]
            self._recount()
        return []

    def _recount(self) -> None:
        """``counted``: the members, the removed DCs whose relay is not over and the joining DCs
        caught up here; ``peers``: the replicas in DCs not removed (nothing goes to a removed one,
        and a removed one sends nothing)."""
        state = self.state
        states = self.view.states
        self.serving = states[state.dc] == MEMBER
        inside = states[state.dc] != REMOVED
        state.counted = tuple(dc for dc in range(state.num_dcs)
                              if states[dc] == MEMBER or dc in self.relays or dc in self.admitted or dc == state.dc)
        state.peers = [ServerId(dc, state.id.partition) for dc in range(state.num_dcs)
                       if inside and dc != state.dc and states[dc] != REMOVED]
