"""The maximum clock offset as a property (``okapikv.core.server``; docs/operations.md, "Clocks: the
maximum offset").

Whatever sessions and peers send (timestamps near the clock or an hour ahead), a partition server's
HLC never exceeds ``max(its restored floor, its clock + the offset)`` plus the logical carry (a
microsecond per 65,536 timestamps), its remote ``vv`` entries and its stable vector never pass its
clock plus the offset, a request refused with OUT_OF_RANGE changed nothing, and a request whose
session is within that ceiling is never refused for the offset.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    ClientRequest,
    ErrorReply,
    GetRequest,
    Heartbeat,
    PutRequest,
    ReadTxRequest,
    ReplicateBatch,
    Respond,
    ServerId,
    Session,
    Update,
)
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import LOGICAL_MASK, pack, physical_of

SETTINGS = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
BASE_US = 10_000_000
OFFSET_US = 500_000
HOUR_US = 3_600_000_000

# A timestamp relative to the clock: just behind, just inside or outside the offset, or an hour ahead.
relative_us = st.one_of(st.integers(-2_000, 2_000), st.integers(OFFSET_US - 5, OFFSET_US + 5),
                        st.just(HOUR_US), st.integers(0, OFFSET_US))
logicals = st.one_of(st.just(0), st.just(LOGICAL_MASK), st.integers(0, LOGICAL_MASK))
actions = st.one_of(
    st.tuples(st.sampled_from(["put", "get", "rotx"]), relative_us, logicals, st.booleans()),
    st.tuples(st.sampled_from(["heartbeat", "replicate"]), relative_us, logicals, st.booleans()),
    st.tuples(st.just("timer"), st.integers(0, 20_000), st.just(0), st.just(False)),
)


def snapshot(server: PartitionServer) -> tuple[object, ...]:
    """What a refused request must leave as it was (the local ``vv`` entry may still rise to the clock:
    a server with one partition announces it, and its GSV, with every step:
    ``okapikv.core.stabilization.UsvFollowingVv``)."""
    return (server.vv[1], server.stable, server.store.version_count, server.parked_count,
            server.pending_reads)


@SETTINGS
@given(protocol=st.sampled_from(["okapi", "cure"]), floor_ahead_us=st.sampled_from([0, HOUR_US]),
       steps=st.lists(actions, min_size=1, max_size=50))
def test_nothing_from_elsewhere_moves_the_server_past_its_clock_plus_the_offset(
        protocol: str, floor_ahead_us: int, steps: list[tuple[str, int, int, bool]]) -> None:
    server = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=2, num_partitions=1, protocol=protocol,
                                        max_clock_offset_us=OFFSET_US))
    floor = pack(BASE_US + floor_ahead_us)
    server.restore((), vv=(0, 0), stable=(0, 0), gsv=(0, 0), horizon=(0, 0), hlc_floor=floor)
    now_us = BASE_US
    peer_sent = 0  # the replica's stream is FIFO: its timestamps only grow
    writes = 0
    for number, (kind, relative, logical, in_stable) in enumerate(steps):
        now_us += 1 + (relative if kind == "timer" else 0)
        ceiling = max(server.hlc, pack(now_us + OFFSET_US, LOGICAL_MASK))
        timestamp = max(0, pack(now_us + relative, logical))
        if kind in ("put", "get", "rotx"):
            session = Session((0, timestamp), 0) if in_stable else Session((0, 0), timestamp)
            requests: dict[str, ClientRequest] = {
                "put": PutRequest(number, b"k", b"v", session), "get": GetRequest(number, b"k", session),
                "rotx": ReadTxRequest(number, (b"k",), session)}
            request = requests[kind]
            before, hlc_before = snapshot(server), server.hlc
            effects = server.handle(request, now_us)
            while server.parked_count:  # a baseline's wait within the offset: let the clock get there
                now_us = max(now_us, server.next_deadline())
                effects += server.on_timer(now_us)
            answers = [effect.reply for effect in effects if isinstance(effect, Respond)]
            refused = [reply for reply in answers if isinstance(reply, ErrorReply) and reply.code == "OUT_OF_RANGE"]
            if refused:
                assert snapshot(server) == before
                assert server.hlc <= max(hlc_before, pack(now_us))
            elif kind == "put":
                writes += 1
            if timestamp <= ceiling and protocol == "okapi":
                assert not refused, refused
            if timestamp > ceiling:
                assert refused
        elif kind == "heartbeat":
            peer_sent = max(peer_sent, timestamp)
            server.handle(Heartbeat(ServerId(1, 0), peer_sent), now_us)
        elif kind == "replicate":
            peer_sent = max(peer_sent + 1, timestamp)
            server.handle(ReplicateBatch(ServerId(1, 0), (Update(b"r", b"x", peer_sent, 1, None),)), now_us)
        else:
            server.on_timer(now_us)
        cap = pack(now_us + OFFSET_US, LOGICAL_MASK)
        carry_us = 1 + writes // (LOGICAL_MASK + 1)
        assert physical_of(server.hlc) <= max(physical_of(floor), now_us + OFFSET_US) + carry_us
        assert server.vv[1] <= cap
        assert all(entry <= max(server.hlc, cap) for entry in server.stable)
