"""The failure detector in the simulator (``okapikv.core.detector``, driven by the production host):
a DC lost for good is removed by the survivors once it has been silent for the timeout, and remote
visibility between them resumes; with the detector off (the default) nothing is removed and, under
Okapi, a remote write stays invisible while the DC is gone."""

from __future__ import annotations

from okapikv.core.membership import MEMBER, REMOVED
from okapikv.core.messages import ClientReply, ClientRequest, GetReply, GetRequest, PutRequest, Session, WriteReply
from okapikv.sim.world import Mailbox, World

MS = 1_000
TIMEOUT_US = 200 * MS


def _ask(world: World, server: int, request: ClientRequest) -> ClientReply:
    mailbox = world.clients
    assert isinstance(mailbox, Mailbox)
    world.submit(server, request, 0)
    world.run_until(lambda: request.request_id in mailbox.replies)
    return mailbox.replies.pop(request.request_id)[0]


def _lose_dc_2_and_write_in_dc_0(world: World) -> None:
    world.advance(50 * MS)
    world.crash(2)
    reply = _ask(world, 0, PutRequest(1, b"k", b"from-dc0", Session((0, 0, 0), 0)))
    assert isinstance(reply, WriteReply)


def _visible_in_dc_1(world: World, request_id: int) -> bool:
    reply = _ask(world, 1, GetRequest(request_id, b"k", Session((0, 0, 0), 0)))
    assert isinstance(reply, GetReply)
    return reply.value == b"from-dc0"


def test_the_survivors_remove_a_dc_lost_for_good_and_visibility_resumes() -> None:
    world = World.fixed(3, 1, auto_remove_after_us=TIMEOUT_US)
    _lose_dc_2_and_write_in_dc_0(world)
    world.advance(TIMEOUT_US // 2)
    assert all(world.servers[index].membership.epoch == 0 for index in (0, 1))  # not before the timeout
    assert not _visible_in_dc_1(world, 2)
    world.advance(TIMEOUT_US)
    for index in (0, 1):
        assert world.servers[index].membership.states == (MEMBER, MEMBER, REMOVED)
    assert [world.servers[index].stats.auto_removals for index in (0, 1)] == [1, 0]  # dc0/p0 proposed
    world.advance(100 * MS)  # a few stabilization periods after the relay between survivors
    assert _visible_in_dc_1(world, 3)


def test_with_the_detector_off_nothing_is_removed() -> None:
    world = World.fixed(3, 1)
    _lose_dc_2_and_write_in_dc_0(world)
    world.advance(10 * TIMEOUT_US)
    assert all(world.servers[index].membership.epoch == 0 for index in (0, 1))
    assert not _visible_in_dc_1(world, 2)  # Okapi: visible only once every member DC has it
