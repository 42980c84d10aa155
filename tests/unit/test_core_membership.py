"""Online membership in the core (docs/protocol.md, "Membership"; ``okapikv.core.membership``).

A small cluster of cores is driven by hand (``Mesh``); a "dead" DC's servers get no timer and
every message to or from them is dropped, as when every process of a DC is killed.
"""

from __future__ import annotations

import pytest
from unit.test_server_replication import Mesh, replies, session

from okapikv.core.membership import MEMBER, REMOVED, Membership, MembershipError
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
        server = self.servers[at]
        self.deliver(server.change_membership(server.membership.with_state(dc, REMOVED), now_us), now_us)


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
        assert server.handle(MembershipUpdate(ServerId(1, 0), 0, (MEMBER, MEMBER)), T0) == []
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
