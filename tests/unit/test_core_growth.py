"""A cluster grows by one DC online (``okapikv.core.growth``; docs/protocol.md, "A new DC").

The rules are checked on single cores (growth keeps every entry and adds one; vectors from a server
or client that knows fewer DCs are padded with 0; a session that depends on a DC the server does not
know is refused), and the whole procedure on a deterministic world whose last DC starts unborn
(``okapikv.sim.membership.DcLoss.add_dc``): the new DC repairs, joins, becomes a member, serves
what was written before it existed, and its writes reach the others.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from okapikv.core.catchup import Repair
from okapikv.core.config import CoreConfig
from okapikv.core.growth import GrowthError, fit, fit_message, session_problem
from okapikv.core.membership import JOINING, MEMBER, REMOVED, Membership
from okapikv.core.messages import (
    Effect,
    ErrorReply,
    GetReply,
    GetRequest,
    Heartbeat,
    MembershipUpdate,
    Message,
    PutRequest,
    ReplicateBatch,
    Respond,
    Send,
    ServerId,
    Session,
    Update,
    VvReport,
    WriteReply,
)
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack
from okapikv.sim.caller import Caller
from okapikv.sim.membership import DcLoss
from okapikv.sim.world import World

PROTOCOLS = ["okapi", "cure", "gentlerain"]
NOW = 2_000_000


def core(protocol: str = "okapi", *, dc: int = 0, num_dcs: int = 2, partitions: int = 1) -> PartitionServer:
    return PartitionServer(CoreConfig(dc=dc, partition=0, num_dcs=num_dcs, num_partitions=partitions,
                                      protocol=protocol))


def test_fit_pads_with_zeros_and_cuts() -> None:
    assert fit((1, 2), 3) == (1, 2, 0)
    assert fit((1, 2, 3), 2) == (1, 2)
    vector = (4, 5)
    assert fit(vector, 2) is vector


def test_fit_message_returns_the_message_itself_when_every_vector_fits() -> None:
    batch = ReplicateBatch(ServerId(1, 0), (Update(b"k", b"v", 5, 1, None),), (1, 2))
    assert fit_message(batch, 2) is batch
    request = GetRequest(1, b"k", Session((1, 2), 0))
    assert fit_message(request, 2) is request


def test_fit_message_pads_nested_vectors() -> None:
    batch = ReplicateBatch(ServerId(1, 0), (Update(b"k", b"v", 5, 1, (3, 5)),), (1, 2))
    fitted = fit_message(batch, 3)
    assert fitted.gsv == (1, 2, 0)
    assert fitted.updates[0].dv == (3, 5, 0)
    assert fit_message(VvReport(ServerId(0, 1), (1, 2, 3), (1, 1, 1)), 2) == VvReport(ServerId(0, 1), (1, 2), (1, 1))


def test_a_session_that_depends_on_an_unknown_dc_is_not_cut() -> None:
    request = GetRequest(1, b"k", Session((1, 2, 7), 0))
    assert fit_message(request, 2) is request
    assert session_problem((1, 2, 7), 2) is not None
    assert session_problem((1, 2, 0), 2) is None
    assert fit_message(GetRequest(1, b"k", Session((1, 2, 0), 0)), 2).session.stable == (1, 2)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_growth_keeps_every_entry_and_adds_one(protocol: str) -> None:
    server = core(protocol)
    server.on_timer(NOW)
    server.handle(Heartbeat(ServerId(1, 0), pack(NOW - 10)), NOW)
    server.handle(PutRequest(1, b"k", b"v", Session((0, 0), 0)), NOW)
    server.on_timer(NOW + 10_000)
    vv, stable, horizon = list(server.vv), server.stable, server.horizon
    server.grow(3)
    assert server.num_dcs == 3 and server.config.num_dcs == 3 and server.protocol.num_dcs == 3
    assert server.vv == [*vv, 0]
    assert server.stable[:2] == stable and server.horizon[:2] == horizon
    # GentleRain's stable vector is one time in every entry: the GST does not fall back
    assert server.stable[2] == (min(stable) if protocol == "gentlerain" else 0)
    assert all(version.dv is None or len(version.dv) == 3 for version in server.store.versions(b"k"))


def test_a_membership_naming_a_new_dc_grows_the_server_and_the_new_dc_is_not_counted() -> None:
    server = core()
    view = Membership.initial(2).with_new_dc()
    effects = server.handle(MembershipUpdate(ServerId(1, 0), view.epoch, view.states), NOW)
    assert server.num_dcs == 3 and server.membership == view
    assert server.counted == (0, 1)  # joining: no minimum waits for it
    assert ServerId(2, 0) in server.peers  # but it gets the stream
    sent = [effect for effect in effects if isinstance(effect, Send)]
    assert any(effect.destination == ServerId(2, 0) for effect in sent)


def test_a_server_that_has_not_grown_is_told_the_grown_membership() -> None:
    server = core()
    grown = Membership.initial(2).with_new_dc()
    server.change_membership(grown, NOW)
    effects = server.handle(MembershipUpdate(ServerId(1, 0), 0, (MEMBER, MEMBER)), NOW)
    told = [effect.message for effect in effects if isinstance(effect, Send) and effect.destination == ServerId(1, 0)]
    assert told == [MembershipUpdate(ServerId(0, 0), grown.epoch, grown.states)]


def test_a_shorter_session_is_padded_and_served() -> None:
    server = core(num_dcs=3)
    [effect] = server.handle(GetRequest(1, b"k", Session((0, 0), 0)), NOW)
    assert isinstance(effect, Respond) and isinstance(effect.reply, GetReply)
    assert len(effect.reply.session.stable) == 3


def test_a_session_that_depends_on_an_unknown_dc_is_refused_and_changes_nothing() -> None:
    server = core()
    stable = server.stable
    [effect] = server.handle(PutRequest(1, b"k", b"v", Session((0, 0, pack(NOW)), 0)), NOW)
    assert isinstance(effect, Respond) and isinstance(effect.reply, ErrorReply)
    assert "does not know yet" in effect.reply.message
    assert server.stable == stable and not list(server.store.keys())


def test_a_state_written_before_the_growth_is_restored_padded() -> None:
    server = core(num_dcs=3)
    server.restore((), vv=(5, 6), stable=(1, 2), gsv=(1, 2), horizon=(1, 1), hlc_floor=7)
    assert server.vv == [7, 6, 0] and server.stable == (1, 2, 0)


def test_growth_is_refused_below_two_dcs_and_never_shrinks() -> None:
    with pytest.raises(GrowthError):
        core(num_dcs=1).grow(2)
    with pytest.raises(GrowthError):
        core(num_dcs=3).grow(2)


def unborn_world(protocol: str, partitions: int = 2) -> tuple[World, DcLoss]:
    """DCs 0 and 1 run as a 2-DC cluster; DC 2's servers are down until ``add_dc``."""
    world = World.fixed(3, partitions, protocol, server_factory=lambda config: PartitionServer(
        replace(config, num_dcs=2) if config.dc < 2 else config))
    for index in range(2 * partitions, 3 * partitions):
        world.crash(index)
    return world, DcLoss(world, unborn=2)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_new_dc_joins_catches_up_and_serves(protocol: str) -> None:
    world, dcs = unborn_world(protocol)
    born: list[bool] = []
    dcs.on_born = lambda: born.append(True)
    old = Caller(world, dc=0)
    assert isinstance(old.put(b"before", b"1"), WriteReply)
    world.advance(200_000)
    assert dcs.add_dc()
    assert all(server.num_dcs == 3 for server in world.servers[4:])
    writer = Caller(world, dc=1)
    assert isinstance(writer.put(b"during", b"2"), WriteReply)  # writes go on while it joins
    world.run_until(lambda: bool(born), limit_us=5_000_000)
    assert all(server.num_dcs == 3 for server in world.servers)
    assert all(server.membership.states == (MEMBER, MEMBER, MEMBER) for server in world.servers)
    new = Caller(world, dc=2)
    world.run_until(lambda: all(isinstance(new.get(key), GetReply) and new.get(key).value is not None  # type: ignore[union-attr]
                                for key in (b"before", b"during")), limit_us=5_000_000)
    assert isinstance(new.put(b"after", b"3"), WriteReply)
    world.run_until(lambda: old.get(b"after").value == b"3", limit_us=5_000_000)  # type: ignore[union-attr]
    assert JOINING not in world.servers[0].membership.states



def test_a_new_dc_gets_the_writes_of_a_dc_removed_before_it_joined() -> None:
    """c wrote x, which reached a and b, and was lost and removed; then d joins. d gets x although c
    answers nothing: from its repair (every version a replica holds, of every DC) and the relay
    it asks the survivors for (a removed DC's updates)."""
    world = World.fixed(4, 1, "okapi", server_factory=lambda config: PartitionServer(
        replace(config, num_dcs=3) if config.dc < 3 else config))
    world.crash(3)
    dcs = DcLoss(world, unborn=3)
    born: list[bool] = []
    dcs.on_born = lambda: born.append(True)
    assert isinstance(Caller(world, dc=2).put(b"x", b"from-c"), WriteReply)
    world.run_until(lambda: all(world.servers[index].store.latest(b"x") is not None for index in (0, 1)))
    world.crash(2)  # c is lost, and removed
    removed = Membership.initial(3).with_state(2, REMOVED)
    world.deliver(0, MembershipUpdate(ServerId(0, 0), removed.epoch, removed.states))
    world.run_until(lambda: all(2 not in world.servers[index].counted for index in (0, 1)))
    assert dcs.add_dc()
    world.run_until(lambda: bool(born))
    assert world.servers[3].membership.states == (MEMBER, MEMBER, REMOVED, MEMBER)
    reply = Caller(world, dc=3).get(b"x")
    assert isinstance(reply, GetReply) and reply.value == b"from-c"


def test_a_new_server_started_from_the_initial_membership_learns_it_is_joining_before_it_serves() -> None:
    """A real new DC's server starts from its config (every DC a member, epoch 0) with --repair: its
    replicas tell it the membership with their repair answers, so by the time its repair ends it
    knows its DC is joining, and refuses clients (serving them before every server counts the DC
    would let a write of it reach a server that does not count it)."""
    world, _ = unborn_world("okapi", partitions=1)
    grown = Membership.initial(2).with_new_dc()
    world.deliver(0, MembershipUpdate(ServerId(0, 0), grown.epoch, grown.states))  # `okapi dc join`
    world.advance(100_000)
    seen: list[tuple[str, ...]] = []

    class Watched(PartitionServer):
        """Notes the membership it knows after each message once its repair ended."""

        def handle(self, message: Message, now_us: int) -> list[Effect]:
            effects = super().handle(message, now_us)
            if self.repairing is None:
                seen.append(self.membership.states)
            return effects

    new = Watched(CoreConfig(dc=2, partition=0, num_dcs=3, num_partitions=1))
    world.restart(2, server=new, repair=Repair(()))
    world.run_until(lambda: new.repairing is None and bool(seen))
    assert seen[0] == (MEMBER, MEMBER, JOINING)
    [effect] = new.handle(GetRequest(1, b"k", Session((0, 0, 0), 0)), world.now)
    assert isinstance(effect, Respond) and isinstance(effect.reply, ErrorReply)


def test_a_message_from_a_dc_the_server_does_not_know_changes_nothing() -> None:
    server = core()
    vv = list(server.vv)
    assert server.handle(Heartbeat(ServerId(2, 0), pack(NOW)), NOW) == []
    assert server.vv == vv and server.num_dcs == 2
