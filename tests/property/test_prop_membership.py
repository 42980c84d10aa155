"""Membership changes never move a stable vector backwards, and the survivors converge
(docs/protocol.md, "Membership": the invariant).

The first property mixes membership messages (a change of any epoch and states, relay requests and
replies with any values) into ``test_prop_usv``'s arbitrary stabilization traffic: ``stable``
(GentleRain: the GST), ``gsv``, ``horizon`` and ``vv`` only grow. The second runs a small cluster
in which one DC dies at a random point (its last write reaching one survivor only), with writes
anywhere before and on the survivors after, and removes it at a random server: the survivors'
stable vectors only grow, and once the cluster has run a while every survivor reads the same
value for every key (a relay that sends no updates fails it).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from property.test_prop_usv import DC, SETTINGS, M, N, messages, partitions, run_growing, servers, stamps
from unit.test_core_membership import DeadMesh

from okapikv.core.config import CoreConfig
from okapikv.core.membership import REMOVED
from okapikv.core.messages import MembershipUpdate, Message, RelayReply, RelayRequest, ServerId
from okapikv.core.server import PartitionServer
from okapikv.core.vectors import leq

states = st.tuples(*[st.sampled_from(["member", "removed", "joining"])] * M)
membership_messages: st.SearchStrategy[Message | int] = st.one_of(
    messages,
    st.builds(MembershipUpdate, servers, st.integers(0, 4), states),
    st.builds(RelayRequest, servers, st.integers(0, 5), st.integers(0, M - 1), stamps),
    st.builds(RelayReply, servers, st.integers(0, 5), st.integers(0, M - 1), stamps),
)


@SETTINGS
@given(protocol=st.sampled_from(["okapi", "cure", "gentlerain"]), partition=partitions,
       sequence=st.lists(membership_messages, max_size=60))
def test_membership_traffic_never_moves_a_vector_backwards(
        protocol: str, partition: int, sequence: list[Message | int]) -> None:
    run_growing(PartitionServer(CoreConfig(dc=DC, partition=partition, num_dcs=M, num_partitions=N,
                                           protocol=protocol)), protocol, sequence)


T0 = 1_000_000
KEYS = [b"a", b"b", b"c"]
writes = st.lists(st.tuples(st.integers(0, M - 1), st.sampled_from(KEYS), st.integers(0, 99)), max_size=12)


@SETTINGS
@given(protocol=st.sampled_from(["okapi", "cure", "gentlerain"]), dead=st.integers(0, M - 1),
       before=writes, after=writes, remover=st.integers(0, M - 2), died_at=st.integers(0, 20))
def test_survivors_converge_after_a_removal(protocol: str, dead: int, before: list[tuple[int, bytes, int]],
                                            after: list[tuple[int, bytes, int]], remover: int, died_at: int) -> None:
    mesh = DeadMesh(M, 1, protocol)
    survivors = [dc for dc in range(M) if dc != dead]
    now_us = T0
    mesh.run(now_us, now_us + 10_000)
    now_us += 10_000
    for index, (dc, key, value) in enumerate(before):
        if index == died_at:
            if dc == dead:  # its last write reaches one survivor only
                mesh.hold = lambda send: send.destination.dc == survivors[1]
                mesh.put(dc, key, b"%d" % value, now_us)
                mesh.held.clear()
                mesh.hold = mesh._drop
            mesh.dead = {dead}
        if dc not in mesh.dead:
            mesh.put(dc, key, b"%d" % value, now_us)
        now_us += 700
        mesh.tick(now_us)
    mesh.dead = {dead}
    stables = {dc: mesh.servers[ServerId(dc, 0)].stable for dc in survivors}
    mesh.remove(dead, ServerId(survivors[remover], 0), now_us)
    for dc, key, value in after:
        if dc != dead:
            mesh.put(dc, key, b"%d" % value, now_us)
        now_us += 700
        mesh.tick(now_us)
        for survivor in survivors:
            stable = mesh.servers[ServerId(survivor, 0)].stable
            assert leq(stables[survivor], stable), f"stable moved back at {survivor}"
            stables[survivor] = stable
    mesh.run(now_us, now_us + 200_000, 2_000)
    now_us += 200_000
    for key in KEYS:
        assert len({mesh.get(dc, key, now_us) for dc in survivors}) == 1, f"survivors differ on {key!r}"
    assert all(mesh.servers[ServerId(dc, 0)].membership.states[dead] == REMOVED for dc in survivors)
