"""One writer per clock and vector, as a property of whole servers (``okapikv.core.clock``,
``okapikv.core.stable``; docs/protocol.md, "Timestamps and the HLC").

Whatever clients, the replica and the DC's aggregator send (timestamps near the clock, at the
offset, an hour ahead), and after a restart above a persisted clock bound or not:

- every timestamp a write is given is strictly above every earlier one and above every timestamp
  a heartbeat or a stabilization report announced before it (never issued twice);
- the HLC never moves backwards, and never past ``max(restored floor, clock + offset)`` plus the
  logical carry (never past its ceiling);
- the replica's ``vv`` entry, ``stable``, ``gsv`` and ``horizon`` never move backwards.

``check`` is the property; the tests run it on the server and on deliberately broken variants, each
a second writer beside the holders (the bugs one writer rules out: "raise the HLC to the clock"
written again without the max, a peer's clock adopted into the HLC without the ceiling, a
session's stable vector taken instead of merged), and require the property to catch each one.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    ClientRequest,
    Effect,
    GetRequest,
    GsvBroadcast,
    Heartbeat,
    Message,
    PutRequest,
    ReplicateBatch,
    Respond,
    Send,
    ServerId,
    Session,
    TxSlice,
    Update,
    VvReport,
    WriteReply,
)
from okapikv.core.rules import RuleBroken
from okapikv.core.server import Outcome, PartitionServer
from okapikv.core.timestamps import LOGICAL_MASK, WaitForClock, pack, physical_of
from okapikv.core.vectors import Vector, leq

SETTINGS = settings(deadline=None, max_examples=120, suppress_health_check=[HealthCheck.too_slow])
#: the broken variants: no shrinking (only whether the property fails matters), a fixed search
BROKEN = settings(deadline=None, max_examples=300, derandomize=True, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=[HealthCheck.too_slow])
BASE_US = 10_000_000
OFFSET_US = 500_000
HOUR_US = 3_600_000_000
ME = ServerId(0, 1)  # partition 1 of DC 0: the aggregator (partition 0) sends it the DC's GSV
REPLICA, AGGREGATOR = ServerId(1, 1), ServerId(0, 0)

relative_us = st.one_of(st.integers(-2_000, 2_000), st.integers(OFFSET_US - 3, OFFSET_US + 3), st.just(HOUR_US))
logicals = st.one_of(st.just(0), st.just(LOGICAL_MASK), st.integers(0, LOGICAL_MASK))
Step = tuple[str, int, int, bool]
steps_strategy = st.lists(st.tuples(
    st.sampled_from(["put", "put", "get", "slice", "heartbeat", "replicate", "broadcast", "timer"]),
    relative_us, logicals, st.booleans()), min_size=1, max_size=40)


def announced(effects: list[Effect]) -> list[tuple[str, int]]:
    """What the effects say of the HLC, in order: ("issued", t) for a write's timestamp, ("promised",
    t) for a heartbeat's or a stabilization report's (no version at or below it follows)."""
    said: list[tuple[str, int]] = []
    for effect in effects:
        if isinstance(effect, Respond) and isinstance(effect.reply, WriteReply):
            said.append(("issued", effect.reply.timestamp))
        elif isinstance(effect, Send):
            message = effect.message
            if isinstance(message, Heartbeat):
                said.append(("promised", message.timestamp))
            elif isinstance(message, VvReport):
                said.append(("promised", message.vv[ME.dc]))
    return said


def check(factory: Callable[[CoreConfig], PartitionServer], protocol: str, floor_ahead_us: int,
          steps: list[Step]) -> None:
    """The property (module docstring) over one run of ``steps``."""
    server = factory(CoreConfig(dc=0, partition=1, num_dcs=2, num_partitions=2, protocol=protocol,
                                max_clock_offset_us=OFFSET_US))
    floor = pack(BASE_US + floor_ahead_us)
    server.restore((), vv=(0, 0), stable=(0, 0), gsv=(0, 0), horizon=(0, 0), hlc_floor=floor)
    now_us = BASE_US
    peer_sent = 0  # the replica's stream is FIFO: its timestamps only grow
    last_issued = promised = 0
    writes = 0
    for number, (kind, relative, logical, flag) in enumerate(steps):
        now_us += 1 + (abs(relative) % 20_000 if kind == "timer" else 0)  # the clock never goes back
        timestamp = max(0, pack(now_us + relative, logical))
        before: tuple[int, int, Vector, Vector, Vector] = (server.hlc, server.vv[1], server.stable, server.gsv,
                                                           server.horizon)
        message: Message
        if kind in ("put", "get"):
            session = Session((0, timestamp), 0) if flag else Session((0, 0), timestamp)
            request: ClientRequest = (PutRequest(number, b"k", b"v", session) if kind == "put"
                                      else GetRequest(number, b"k", session))
            message = request
        elif kind == "slice":
            message = TxSlice(AGGREGATOR, number, (timestamp, min(timestamp, server.vv[1])), (b"k",))
        elif kind == "heartbeat":
            peer_sent = max(peer_sent, timestamp)
            message = Heartbeat(REPLICA, peer_sent)
        elif kind == "replicate":
            peer_sent = max(peer_sent + 1, timestamp)
            message = ReplicateBatch(REPLICA, (Update(b"r", b"x", peer_sent, 1, None),))
        elif kind == "broadcast":  # the aggregator's GSV: lower bounds of the partitions' vv
            gsv = (min(timestamp, server.hlc), min(timestamp, server.vv[1]))
            message = GsvBroadcast(AGGREGATOR, gsv, gsv if flag else None, gsv)
        effects = server.on_timer(now_us) if kind == "timer" else server.handle(message, now_us)
        for _ in range(1_000):  # a baseline's wait for the clock, within the offset: let the clock get there
            if not any(isinstance(parked.wait, WaitForClock) for parked in server.parked):
                break
            now_us = max(now_us, server.next_deadline())
            effects += server.on_timer(now_us)
        for what, value in announced(effects):
            if what == "issued":
                assert value > last_issued, f"timestamp {value} issued again (after {last_issued})"
                assert value > promised, f"timestamp {value} issued at or below a promised {promised}"
                last_issued = value
                writes += 1
            else:
                promised = max(promised, value)
        hlc, remote, stable, gsv, horizon = before
        assert server.hlc >= hlc, f"the HLC moved back from {hlc} to {server.hlc}"
        carry_us = 1 + writes // (LOGICAL_MASK + 1)
        assert physical_of(server.hlc) <= max(physical_of(floor), now_us + OFFSET_US) + carry_us, (
            f"the HLC {server.hlc} is past its ceiling at {now_us} us")
        assert server.vv[1] >= remote, f"vv[1] moved back from {remote} to {server.vv[1]}"
        assert leq(stable, server.stable), f"stable moved back from {stable} to {server.stable}"
        assert leq(gsv, server.gsv) and leq(horizon, server.horizon), "the GSV or the horizon moved back"


@SETTINGS
@given(protocol=st.sampled_from(["okapi", "cure", "gentlerain"]), floor_ahead_us=st.sampled_from([0, HOUR_US]),
       steps=steps_strategy)
def test_the_hlc_and_the_vectors_keep_their_rules_whatever_arrives(
        protocol: str, floor_ahead_us: int, steps: list[Step]) -> None:
    check(PartitionServer, protocol, floor_ahead_us, steps)


class ClockBackwards(PartitionServer):
    """A second writer of the HLC: "raise the HLC to the clock" written again, without the max, in
    the heartbeat (each heartbeat sets it to the clock, below an HLC that is ahead of it)."""

    def _heartbeat(self, now_us: int, effects: list[Effect]) -> None:
        self.version_vector.entries[self.dc] = pack(now_us)
        super()._heartbeat(now_us, effects)


class ClockPastCeiling(PartitionServer):
    """A second writer of the HLC: a peer's heartbeat raises it (a Lamport clock's receive rule)
    without the ceiling, so a peer an hour ahead drags this HLC an hour ahead."""

    def _on_heartbeat(self, message: Heartbeat, now_us: int) -> list[Effect]:
        entries = self.version_vector.entries
        entries[self.dc] = max(entries[self.dc], message.timestamp)
        return super()._on_heartbeat(message, now_us)


class StableReplaced(PartitionServer):
    """A second writer of the stable vector: a session's vector taken instead of merged."""

    def _on_get(self, request: GetRequest, now_us: int) -> Outcome:
        outcome = super()._on_get(request, now_us)
        self.stable = request.session.stable
        return outcome


@pytest.mark.parametrize(("broken", "caught"), [
    (ClockBackwards, "the HLC moved back|issued at or below a promised"),
    (ClockPastCeiling, "past its ceiling"),
    (StableReplaced, "stable moved back"),
])
def test_a_second_writer_that_breaks_a_rule_is_caught(broken: type[PartitionServer], caught: str) -> None:
    @BROKEN
    @given(protocol=st.sampled_from(["okapi", "cure", "gentlerain"]), floor_ahead_us=st.sampled_from([0, HOUR_US]),
           steps=steps_strategy)
    def run(protocol: str, floor_ahead_us: int, steps: list[Step]) -> None:
        check(broken, protocol, floor_ahead_us, steps)

    with pytest.raises(AssertionError, match=caught) as failure:
        run()
    assert not isinstance(failure.value, RuleBroken)  # the property saw it, not the holders' own check
