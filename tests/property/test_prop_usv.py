"""The stable vector (Okapi's USV, section 3.3) never moves backwards.

Whatever stabilization messages arrive (GSV broadcasts, GSV exchanges, VV reports, heartbeats,
replication, slices carrying a snapshot, client sessions), in any order and with any values, a
server's ``stable`` (Okapi: the USV; Cure: the GSV), ``gsv``, ``horizon`` and ``vv`` only grow
entry-wise; for GentleRain the GST (the minimum of ``stable``) only grows.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    GetRequest,
    GsvBroadcast,
    GsvExchange,
    Heartbeat,
    Message,
    ReplicateBatch,
    ServerId,
    Session,
    TxSlice,
    Update,
    VvReport,
)
from okapikv.core.server import PartitionServer
from okapikv.core.vectors import leq

SETTINGS = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
M = 3
N = 2
DC = 0

stamps = st.integers(min_value=0, max_value=1_000)
vectors = st.tuples(*[stamps] * M)
optional_vectors = st.none() | vectors
dcs = st.integers(0, M - 1)
partitions = st.integers(0, N - 1)
servers = st.builds(ServerId, dcs, partitions)

messages: st.SearchStrategy[Message | int] = st.one_of(
    st.builds(GsvBroadcast, st.builds(ServerId, st.just(DC), st.just(0)), vectors, optional_vectors, vectors),
    st.builds(GsvBroadcast, servers, vectors, optional_vectors, vectors),
    st.builds(GsvExchange, servers, vectors),
    st.builds(VvReport, st.builds(ServerId, st.just(DC), partitions), vectors, vectors),
    st.builds(Heartbeat, servers, stamps, optional_vectors),  # with a replica's GSV riding along, or not
    st.builds(
        lambda source, key, stamp, gsv: ReplicateBatch(source, (Update(key, b"v", stamp, source.dc, None),), gsv),
        st.builds(ServerId, st.integers(1, M - 1), st.just(0)),
        st.sampled_from([b"a", b"b"]),
        stamps,
        optional_vectors,
    ),
    st.builds(lambda stable, dt: GetRequest(1, b"a", Session(stable, dt)), vectors, stamps),
    st.builds(lambda snapshot: TxSlice(ServerId(DC, 1), 1, snapshot, (b"a",)), vectors),
    # an int is a timer run at that many microseconds after the previous one
    st.integers(min_value=0, max_value=6_000),
)


@SETTINGS
@given(
    protocol=st.sampled_from(["okapi", "cure", "gentlerain"]),
    partition=partitions,
    piggyback=st.booleans(),
    sequence=st.lists(messages, max_size=60),
)
def test_stable_vector_never_moves_backwards(
    protocol: str, partition: int, piggyback: bool, sequence: list[Message | int]
) -> None:
    server = PartitionServer(
        CoreConfig(dc=DC, partition=partition, num_dcs=M, num_partitions=N, protocol=protocol, piggyback_usv=piggyback)
    )
    run_growing(server, protocol, sequence)


def run_growing(server: PartitionServer, protocol: str, sequence: list[Message | int]) -> None:
    """Run ``sequence`` (an int: a timer that many microseconds later) and check after each item
    that the vectors only grew."""
    now_us = 0
    for item in sequence:
        before = (server.stable, server.gsv, server.horizon, list(server.vv))
        if isinstance(item, int):
            now_us += item
            server.on_timer(now_us)
        else:
            server.handle(item, now_us)
        if protocol == "gentlerain":
            # GentleRain's stable vector holds one scalar, the GST (its minimum entry): that is what
            # never moves back. Entries merged above it from sessions or slices carry no promise.
            assert min(before[0]) <= min(server.stable), f"GST moved back: {before[0]} -> {server.stable}"
        else:
            assert leq(before[0], server.stable), f"stable moved back: {before[0]} -> {server.stable}"
        assert leq(before[1], server.gsv), f"gsv moved back: {before[1]} -> {server.gsv}"
        assert leq(before[2], server.horizon), f"horizon moved back: {before[2]} -> {server.horizon}"
        assert leq(tuple(before[3]), tuple(server.vv)), f"vv moved back: {before[3]} -> {server.vv}"


@SETTINGS
@given(gsvs=st.lists(st.tuples(st.integers(1, M - 1), vectors), max_size=12), own=st.lists(vectors, max_size=4))
def test_okapi_usv_is_the_min_of_the_freshest_gsv_of_every_dc(
    gsvs: list[tuple[int, tuple[int, ...]]], own: list[tuple[int, ...]]
) -> None:
    server = PartitionServer(CoreConfig(dc=DC, partition=1, num_dcs=M, num_partitions=N))
    freshest: dict[int, tuple[int, ...]] = {}
    for number, (source, gsv) in enumerate(gsvs):
        # a GSV arrives on its own or riding on a heartbeat or replication batch: the same USV
        carrier = number % 3
        if carrier == 0:
            server.handle(GsvExchange(ServerId(source, 1), gsv), 0)
        elif carrier == 1:
            server.handle(Heartbeat(ServerId(source, 1), 0, gsv), 0)
        else:
            server.handle(ReplicateBatch(ServerId(source, 1), (), gsv), 0)
        known = freshest.get(source, (0,) * M)
        freshest[source] = tuple(max(a, b) for a, b in zip(known, gsv, strict=True))
    local = (0,) * M
    for gsv in own:
        server.handle(GsvBroadcast(ServerId(DC, 0), gsv, None, (0,) * M), 0)
        local = tuple(max(a, b) for a, b in zip(local, gsv, strict=True))
    if own and len(freshest) == M - 1:
        expected = tuple(min(column) for column in zip(local, *freshest.values(), strict=True))
        assert server.stable == expected
    else:
        assert server.stable == (0,) * M
