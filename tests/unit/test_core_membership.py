"""Online membership in the core (docs/protocol.md, "Membership"; ``okapikv.core.membership``).

A small cluster of cores is driven by hand (``Mesh``); a "dead" DC's servers get no timer and
every message to or from them is dropped, as when every process of a DC is killed.
"""

from __future__ import annotations

import pytest
from unit.test_server_replication import Mesh, replies, session

from okapikv.core.catchup import Repair
from okapikv.core.membership import JOINING, MEMBER, REMOVED, Membership, MembershipError
from okapikv.core.messages import (
    ErrorCode,
    ErrorReply,
    GetReply,
    GetRequest,
    MembershipUpdate,
    PutRequest,
    RelayReply,
    Send,
    ServerId,
)
from okapikv.core.vectors import leq

T0 = 1_000_000
PROTOCOLS = ["okapi", "cure", "gentlerain"]


class DeadMesh(Mesh):
    """``Mesh`` where the servers of the DCs in ``dead`` are gone: no timer, nothing in or out."""

    def __init__(self, num_dcs: int, num_partitions: int, protocol: str, **config: object) -> None:
        super().__init__(num_dcs, num_partitions, protocol, **config)
        self.dead: set[int] = set()
        self.dropped = 0
        self.hold = self._drop

    def _drop(self, send: Send) -> bool:
        message = send.message
        if send.destination.dc in self.dead or message.source.dc in self.dead:  # type: ignore[union-attr]
            self.dropped += 1
            return True
        return False

    def tick(self, now_us: int) -> None:
        for server_id, server in self.servers.items():
            if server_id.dc not in self.dead:
                self.deliver(server.on_timer(now_us), now_us)
        self.held.clear()

    def put(self, dc: int, key: bytes, value: bytes, now_us: int) -> None:
        server = self.servers[ServerId(dc, 0)]
        self.deliver(server.handle(PutRequest(1, key, value, session(server.num_dcs)), now_us), now_us)

    def get(self, dc: int, key: bytes, now_us: int) -> bytes | None:
        server = self.servers[ServerId(dc, 0)]
        [reply] = replies(server.handle(GetRequest(1, key, session(server.num_dcs)), now_us))
        assert isinstance(reply, GetReply)
        return reply.value

    def remove(self, dc: int, at: ServerId, now_us: int) -> None:
        self.set_state(dc, REMOVED, at, now_us)

    def set_state(self, dc: int, state: str, at: ServerId, now_us: int) -> None:
        server = self.servers[at]
        self.deliver(server.change_membership(server.membership.with_state(dc, state), now_us), now_us)

    def restart_empty(self, dc: int, now_us: int, *, repair: bool = True) -> None:
        """DC ``dc``'s servers come back on new, empty disks, in repair mode (``okapi server --repair``)
        unless ``repair`` is false."""
        self.dead.discard(dc)
        for server_id in [server_id for server_id in self.servers if server_id.dc == dc]:
            old = self.servers[server_id]
            fresh = type(old)(old.config)
            self.servers[server_id] = fresh
            self.deliver(fresh.start_catch_up(Repair() if repair else None), now_us)


class TestMembershipValue:
    def test_removing_advances_the_epoch(self) -> None:
        view = Membership.initial(3).with_state(2, REMOVED)
        assert view == Membership(1, (MEMBER, MEMBER, REMOVED))
        assert view.members == (0, 1)

    def test_the_last_member_cannot_be_removed(self) -> None:
        view = Membership.initial(2).with_state(1, REMOVED)
        with pytest.raises(MembershipError, match="last member"):
            view.with_state(0, REMOVED)

    def test_a_change_that_changes_nothing_is_refused(self) -> None:
        with pytest.raises(MembershipError, match="already"):
            Membership.initial(2).with_state(1, MEMBER)

    def test_unknown_states_and_dcs_are_refused(self) -> None:
        with pytest.raises(MembershipError):
            Membership(1, ("member", "gone"))
        with pytest.raises(MembershipError):
            Membership.initial(2).with_state(5, REMOVED)


class TestRemoval:
    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_a_dead_dc_freezes_visibility_until_removed(self, protocol: str) -> None:
        mesh = DeadMesh(3, 2, protocol)
        mesh.run(T0, T0 + 50_000)
        mesh.dead = {2}
        mesh.put(0, b"k", b"a-wrote", T0 + 51_000)
        mesh.run(T0 + 52_000, T0 + 150_000)
        if protocol != "cure":  # Cure's visibility waits for what a write depends on, not for every DC
            assert mesh.get(1, b"k", T0 + 150_000) is None  # c holds the minimum back
        mesh.remove(2, ServerId(1, 1), T0 + 150_500)
        # the change reached every live server through the flood, at one epoch
        for server_id, server in mesh.servers.items():
            expected = 1 if server_id.dc != 2 else 0
            assert server.membership.epoch == expected
        mesh.run(T0 + 151_000, T0 + 200_000)
        assert mesh.get(1, b"k", T0 + 200_000) == b"a-wrote"
        # writes flow both ways between the survivors
        mesh.put(1, b"j", b"b-wrote", T0 + 201_000)
        mesh.run(T0 + 202_000, T0 + 260_000)
        assert mesh.get(0, b"j", T0 + 260_000) == b"b-wrote"

    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_overwrites_are_collected_again(self, protocol: str) -> None:
        mesh = DeadMesh(3, 1, protocol)
        mesh.run(T0, T0 + 20_000)
        mesh.dead = {2}
        for index in range(5):
            mesh.put(0, b"k", b"v%d" % index, T0 + 21_000 + index)
        mesh.run(T0 + 22_000, T0 + 300_000)
        survivors = [mesh.servers[ServerId(dc, 0)] for dc in (0, 1)]
        assert all(server.store.version_count == 5 for server in survivors)  # GC waits for c
        mesh.remove(2, ServerId(0, 0), T0 + 300_500)
        mesh.run(T0 + 301_000, T0 + 600_000)
        assert [server.store.version_count for server in survivors] == [1, 1]

    def test_nothing_is_sent_to_a_removed_dc(self) -> None:
        mesh = DeadMesh(3, 1, "okapi")
        mesh.run(T0, T0 + 20_000)
        mesh.dead = {2}
        mesh.remove(2, ServerId(0, 0), T0 + 20_500)
        mesh.run(T0 + 21_000, T0 + 40_000)
        dropped = mesh.dropped
        mesh.put(0, b"k", b"v", T0 + 41_000)
        mesh.run(T0 + 42_000, T0 + 80_000)
        assert mesh.dropped == dropped

    def test_a_server_of_a_removed_dc_refuses_clients(self) -> None:
        mesh = DeadMesh(2, 1, "okapi")
        server = mesh.servers[ServerId(1, 0)]
        server.change_membership(Membership.initial(2).with_state(1, REMOVED), T0)
        [reply] = replies(server.handle(GetRequest(7, b"k", session(2)), T0))
        assert isinstance(reply, ErrorReply) and reply.code == ErrorCode.UNAVAILABLE
        assert "removed" in reply.message

    def test_an_older_or_equal_membership_is_ignored(self) -> None:
        mesh = DeadMesh(2, 1, "okapi")
        server = mesh.servers[ServerId(0, 0)]
        newer = Membership.initial(2).with_state(1, REMOVED)
        server.change_membership(newer, T0)
        assert server.membership == newer
        assert server.change_membership(newer, T0) == []
        # an older one is answered with the newer one (its sender missed the change)
        [answer] = server.handle(MembershipUpdate(ServerId(1, 0), 0, (MEMBER, MEMBER)), T0)
        assert answer == Send(ServerId(1, 0), MembershipUpdate(ServerId(0, 0), newer.epoch, newer.states))
        assert server.membership == newer
        # a malformed one changes nothing either
        assert server.handle(MembershipUpdate(ServerId(1, 0), 9, (REMOVED, REMOVED)), T0) == []
        assert server.membership == newer


class TestRelay:
    @pytest.mark.parametrize("protocol", PROTOCOLS)
    def test_what_only_one_survivor_got_reaches_the_other(self, protocol: str) -> None:
        mesh = DeadMesh(3, 1, protocol)
        mesh.run(T0, T0 + 20_000)
        # c's write reaches a, not b; then c dies
        mesh.hold = lambda send: send.destination.dc == 1 and send.message.source.dc == 2  # type: ignore[union-attr]
        mesh.put(2, b"k", b"c-wrote", T0 + 20_500)
        mesh.held.clear()
        mesh.dead = {2}
        mesh.hold = mesh._drop
        mesh.run(T0 + 21_000, T0 + 60_000)
        mesh.remove(2, ServerId(1, 0), T0 + 60_500)
        mesh.run(T0 + 61_000, T0 + 150_000)
        assert mesh.get(1, b"k", T0 + 150_000) == b"c-wrote"
        assert mesh.get(0, b"k", T0 + 150_000) == b"c-wrote"
        assert mesh.servers[ServerId(0, 0)].stats.relay_updates_sent == 1

    def test_a_removed_dc_counts_until_every_survivor_answered(self) -> None:
        mesh = DeadMesh(3, 1, "okapi")
        mesh.run(T0, T0 + 20_000)
        mesh.dead = {2}
        mesh.put(0, b"k", b"a-wrote", T0 + 20_500)
        replies_held: list[Send] = []
        mesh.hold = lambda send: (isinstance(send.message, RelayReply) and not replies_held.append(send)
                                  ) or mesh._drop(send)
        mesh.remove(2, ServerId(1, 0), T0 + 21_000)
        mesh.run(T0 + 21_500, T0 + 80_000)
        b = mesh.servers[ServerId(1, 0)]
        assert 2 in b.counted and mesh.get(1, b"k", T0 + 80_000) is None
        assert len(replies_held) == 2  # a and b each asked the other
        mesh.hold = mesh._drop
        mesh.deliver(replies_held, T0 + 80_500)
        mesh.run(T0 + 81_000, T0 + 130_000)
        assert 2 not in b.counted and mesh.get(1, b"k", T0 + 130_000) == b"a-wrote"


def lose_and_remove(mesh: DeadMesh) -> int:
    """DC 2 dies with writes of a and b after its death; it is removed. Returns the time reached."""
    mesh.run(T0, T0 + 20_000)
    mesh.put(2, b"from-c", b"old", T0 + 20_500)
    mesh.run(T0 + 21_000, T0 + 40_000)
    mesh.dead = {2}
    mesh.put(0, b"k", b"a-wrote", T0 + 40_500)
    mesh.put(1, b"j", b"b-wrote", T0 + 40_600)
    mesh.remove(2, ServerId(0, 0), T0 + 41_000)
    mesh.run(T0 + 41_500, T0 + 100_000)
    return T0 + 100_000


class TestReAdd:
    @pytest.mark.parametrize(("protocol", "partitions"), [("okapi", 1), ("okapi", 2), ("cure", 1),
                                                          ("gentlerain", 2)])
    def test_a_removed_dc_comes_back_catches_up_and_serves(self, protocol: str, partitions: int) -> None:
        mesh = DeadMesh(3, partitions, protocol)
        now = lose_and_remove(mesh)
        mesh.restart_empty(2, now)
        c = mesh.servers[ServerId(2, 0)]
        assert c.membership.states[2] == REMOVED  # a survivor told it
        mesh.run(now, now + 20_000)
        assert c.repairing == "fetching"  # nobody answers a removed DC
        stables = {server_id: server.stable for server_id, server in mesh.servers.items()}
        mesh.set_state(2, JOINING, ServerId(1, 0), now + 20_500)
        for step in range(now + 21_000, now + 300_000, 500):
            mesh.tick(step)
            for server_id, server in mesh.servers.items():
                if protocol == "gentlerain":
                    assert min(stables[server_id]) <= min(server.stable)
                else:
                    assert leq(stables[server_id], server.stable)  # visibility never goes backwards
                stables[server_id] = server.stable
        now += 300_000
        survivors = [server for server_id, server in mesh.servers.items() if server_id.dc != 2]
        assert all(2 in server.counted for server in survivors)
        assert all(server.repairing is None for server_id, server in mesh.servers.items())
        [refused] = replies(c.handle(GetRequest(9, b"k", session(3)), now))
        assert isinstance(refused, ErrorReply)  # joining: no clients yet
        mesh.set_state(2, MEMBER, ServerId(0, 0), now + 500)
        mesh.run(now + 1_000, now + 60_000)
        now += 60_000
        assert mesh.get(2, b"k", now) == b"a-wrote"
        assert mesh.get(2, b"j", now) == b"b-wrote"
        assert mesh.get(2, b"from-c", now) == b"old"  # its own write, back from the survivors
        mesh.put(2, b"new-c", b"c-again", now + 500)
        mesh.run(now + 1_000, now + 100_000)
        now += 100_000
        assert mesh.get(0, b"new-c", now) == b"c-again"
        assert mesh.get(1, b"new-c", now) == b"c-again"

    def test_a_joining_dc_behind_a_slow_link_is_counted_once_caught_up(self) -> None:
        """Every message to c takes 30 ms (its GSV always trails the survivors' freshest stable
        vectors): it is still counted, once it holds what was visible when it began to join."""
        mesh = DeadMesh(3, 2, "okapi")
        now = lose_and_remove(mesh)
        mesh.restart_empty(2, now)
        in_flight: list[tuple[int, Send]] = []
        clock = [now]

        def slow_to_c(send: Send) -> bool:
            if send.destination.dc == 2:
                in_flight.append((clock[0] + 30_000, send))
                return True
            return mesh._drop(send)

        mesh.hold = slow_to_c
        mesh.set_state(2, JOINING, ServerId(1, 0), now + 500)
        stables = {server_id: server.stable for server_id, server in mesh.servers.items()}
        for step in range(now + 1_000, now + 400_000, 500):
            clock[0] = step
            due = [send for at, send in in_flight if at <= step]
            in_flight[:] = [(at, send) for at, send in in_flight if at > step]
            for send in due:  # arrived: handled there, and what that sends goes on as usual
                mesh.deliver(mesh.servers[send.destination].handle(send.message, step), step)
            mesh.tick(step)
            for server_id, server in mesh.servers.items():
                assert leq(stables[server_id], server.stable)
                stables[server_id] = server.stable
        assert all(2 in server.counted for server in mesh.servers.values())

    def test_re_entering_without_the_repair_loses_its_own_writes(self) -> None:
        """The broken variant: c's servers come back empty without fetching everything (a plain
        catch-up asks each survivor for its own DC's writes only), so c's write that the survivors
        hold never comes back to c, and c, once a member, disagrees with them: the test above
        (which reads it back at c) would fail."""
        mesh = DeadMesh(3, 1, "okapi")
        now = lose_and_remove(mesh)
        mesh.restart_empty(2, now, repair=False)
        mesh.set_state(2, JOINING, ServerId(1, 0), now + 500)
        mesh.run(now + 1_000, now + 100_000)
        mesh.set_state(2, MEMBER, ServerId(0, 0), now + 100_500)
        mesh.run(now + 101_000, now + 150_000)
        now += 150_000
        assert mesh.get(0, b"from-c", now) == b"old"
        assert mesh.get(2, b"from-c", now) is None
