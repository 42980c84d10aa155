"""The simulator runs the production host (``okapikv.core.host``), so its rules show in simulated
runs: a misrouted request and a write on a full disk are refused as a real server refuses them,
and with commits that take time replies and replicated updates wait until what they reveal is
durable."""

from __future__ import annotations

from okapikv.cluster.config import local_cluster
from okapikv.core.host import Host
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    ErrorCode,
    ErrorReply,
    GetReply,
    GetRequest,
    PutManyRequest,
    PutRequest,
    ReplicateBatch,
    Session,
    WriteReply,
)
from okapikv.core.partitioning import partition_of
from okapikv.server.node import PartitionNode
from okapikv.sim.caller import Caller
from okapikv.sim.events import DELIVER
from okapikv.sim.world import START_US, Mailbox, World

MS = 1_000
#: keys of partition 0 and partition 1 of 2
KEY_0, KEY_1 = b"d", b"b"


def _ask(world: World, server: int, request: ClientRequest) -> tuple[ClientReply, int]:
    """``request`` sent to server ``server`` now; its reply and when it arrived."""
    mailbox = world.clients
    assert isinstance(mailbox, Mailbox)
    world.submit(server, request, 0)
    world.run_until(lambda: request.request_id in mailbox.replies)
    return mailbox.replies.pop(request.request_id)


def _session(world: World) -> Session:
    return Session((0,) * world.num_dcs, 0)


def test_the_simulator_and_the_server_drive_the_same_host() -> None:
    world = World.fixed(1, 1)
    node = PartitionNode(local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=45400), 0, 0)
    assert type(world.hosts[0]) is Host and type(node.host) is Host
    assert world.hosts[0].core is world.servers[0] and node.host.core is node.core


def test_a_misrouted_request_is_refused_and_changes_nothing() -> None:
    assert (partition_of(KEY_0, 2), partition_of(KEY_1, 2)) == (0, 1)
    world = World.fixed(1, 2)
    reply, _ = _ask(world, 0, PutRequest(1, KEY_1, b"v", _session(world)))
    assert isinstance(reply, ErrorReply) and reply.code == ErrorCode.FAILED_PRECONDITION
    assert "key belongs to partition 1 (dc0/p1); this server is partition 0" in reply.message
    bulk, _ = _ask(world, 0, PutManyRequest(2, (KEY_0, KEY_1), (b"v", b"v"), _session(world)))
    assert isinstance(bulk, ErrorReply) and bulk.code == ErrorCode.FAILED_PRECONDITION
    assert "a bulk PUT's keys must all belong to the server it is sent to" in bulk.message
    assert all(len(server.store) == 0 for server in world.servers)
    assert world.hosts[0].client_requests == 2
    # The key's own partition takes it.
    assert isinstance(_ask(world, 1, PutRequest(3, KEY_1, b"v", _session(world)))[0], WriteReply)


def test_a_full_disk_refuses_writes_while_reads_go_on_and_takes_them_again_once_freed() -> None:
    world = World.fixed(2, 1)
    assert isinstance(_ask(world, 0, PutRequest(1, b"k", b"v1", _session(world)))[0], WriteReply)
    world.fill_disk(0)
    refused, _ = _ask(world, 0, PutRequest(2, b"k", b"v2", _session(world)))
    assert isinstance(refused, ErrorReply) and refused.code == ErrorCode.RESOURCE_EXHAUSTED
    assert "disk full: the simulated disk of dc0/p0 is full" in refused.message
    read, _ = _ask(world, 0, GetRequest(3, b"k", _session(world)))
    assert isinstance(read, GetReply) and read.value == b"v1"  # reads go on
    assert len(world.servers[0].store.versions(b"k")) == 1
    world.fill_disk(0, False)
    assert isinstance(_ask(world, 0, PutRequest(4, b"k", b"v2", _session(world)))[0], WriteReply)


def test_with_slow_commits_replies_and_replicated_updates_wait_for_durability() -> None:
    commit_us = 4 * MS
    world = World.fixed(2, 1, wan_us=10 * MS, commit_us=commit_us)
    reply, arrived = _ask(world, 0, PutRequest(1, b"k", b"v", _session(world)))
    assert isinstance(reply, WriteReply) and arrived == START_US + commit_us
    assert world.disks[0].groups_written == 1
    batches = [at for at, _, kind, _, message in world.heap if kind == DELIVER and isinstance(message, ReplicateBatch)]
    assert batches and min(batches) >= START_US + commit_us + 10 * MS  # left once durable, then the WAN
    # A write taken while a group is on its way to disk joins the next group and waits for it.
    world.submit(0, PutRequest(2, b"a", b"v", _session(world)), 0)
    world.advance(1 * MS)
    world.submit(0, PutRequest(3, b"b", b"v", _session(world)), 0)
    mailbox = world.clients
    assert isinstance(mailbox, Mailbox)
    world.run_until(lambda: {2, 3} <= set(mailbox.replies))
    assert mailbox.replies[3][1] - mailbox.replies[2][1] == commit_us
    assert world.hosts[0].held_effect_groups == 0


def test_with_slow_commits_a_read_of_a_durable_key_is_answered_at_once_and_of_a_held_version_once_durable(
) -> None:
    """Nothing revealed before it is durable, and nothing more held: while a write's group is on its
    way to disk, a GET of another (durable) key is answered at once, and a GET of the written key
    only with the write's reply, once its group is durable, and it reads the new value."""
    commit_us = 4 * MS
    world = World.fixed(1, 1, commit_us=commit_us)
    _ask(world, 0, PutRequest(1, b"old", b"v0", _session(world)))
    world.submit(0, PutRequest(2, b"new", b"v1", _session(world)), 0)
    world.advance(1 * MS)
    groups = world.disks[0].groups_written
    read, _ = _ask(world, 0, GetRequest(3, b"old", _session(world)))
    assert isinstance(read, GetReply) and read.value == b"v0"
    mailbox = world.clients
    assert isinstance(mailbox, Mailbox) and 2 not in mailbox.replies  # the write is still on its way to disk
    assert world.disks[0].groups_written == groups
    held, at = _ask(world, 0, GetRequest(4, b"new", _session(world)))
    assert isinstance(held, GetReply) and held.value == b"v1"
    assert at == mailbox.replies[2][1] and world.disks[0].groups_written == groups + 1  # released together


def test_a_full_disk_refuses_replication_from_other_dcs_until_freed_then_gets_it_in_order() -> None:
    world = World.fixed(2, 2, wan_us=10 * MS)
    world.fill_disk(2)  # dc1/p0: its link from dc0/p0 ends, as a production link does
    caller = Caller(world, 0)
    for index in range(3):
        assert isinstance(caller.put(KEY_0, b"v%d" % index), WriteReply)
    world.advance(50 * MS)
    source, replica = world.servers[0], world.servers[2]
    assert replica.store.versions(KEY_0) == [] and world.network.refusing(2, source.id)
    assert replica.vv[0] < source.vv[0]
    sent = source.vv[0]
    world.fill_disk(2, False)  # the link resends what it kept, in order
    world.advance(50 * MS)
    assert replica.store.versions(KEY_0)[-1].value == b"v2"  # older ones may be collected already
    assert replica.vv[0] >= sent and not world.network.refused  # all of it, with no gap
