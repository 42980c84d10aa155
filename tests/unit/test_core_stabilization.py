"""The stabilization strategies on their own (``okapikv.core.stabilization``; docs/protocol.md,
"Stabilization"): one chosen per protocol and options, each driven here against a bare
``PartitionState`` with a recording ``resume``. The server-level behaviour (what leaves on the
replication stream, waits resumed, visibility) is in ``test_server_replication.py``."""

from __future__ import annotations

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    Effect,
    GetRequest,
    GstBroadcast,
    GsvBroadcast,
    GsvExchange,
    Send,
    ServerId,
    Session,
    StableTimeReport,
    VvReport,
)
from okapikv.core.server import PartitionServer
from okapikv.core.stabilization import (
    GstRound,
    GsvRound,
    NoStabilization,
    PiggybackedUsv,
    UsvFollowingVv,
    UsvOnStream,
    stabilization_for,
)
from okapikv.core.state import NEVER, Parked, PartitionState
from okapikv.core.timestamps import WaitForClock, pack

T0 = 1_000_000


def make(protocol: str = "cure", *, dcs: int = 2, partitions: int = 2, partition: int = 0,
         piggyback: bool = False) -> tuple[PartitionState, GsvRound, list[int]]:
    state = PartitionState(CoreConfig(0, partition, dcs, partitions, protocol=protocol, piggyback_usv=piggyback))
    resumed: list[int] = []

    def resume(now_us: int, effects: list[Effect], *, clock_only: bool) -> None:
        assert not clock_only
        resumed.append(now_us)

    return state, stabilization_for(state, resume=resume), resumed


@pytest.mark.parametrize(("protocol", "dcs", "partitions", "piggyback", "kind"), [
    ("eventual", 3, 4, False, NoStabilization),
    ("cure", 3, 4, False, GsvRound),
    ("gentlerain", 3, 1, True, GstRound),
    ("gentlerain", 3, 4, False, GstRound),
    ("okapi", 3, 4, False, UsvOnStream),
    ("okapi", 1, 1, False, UsvOnStream),  # no replicas: nothing to follow or share
    ("okapi", 3, 1, False, UsvFollowingVv),
    ("okapi", 3, 1, True, PiggybackedUsv),
    ("okapi", 3, 4, True, PiggybackedUsv),
])
def test_one_strategy_is_chosen_from_the_protocol_and_the_options(
    protocol: str, dcs: int, partitions: int, piggyback: bool, kind: type[GsvRound]
) -> None:
    server = PartitionServer(CoreConfig(0, 0, dcs, partitions, protocol=protocol, piggyback_usv=piggyback))
    strategy = server.stabilization
    assert type(strategy) is kind
    assert strategy.runs == (protocol != "eventual")
    assert strategy.universal == (protocol == "okapi")
    assert (strategy.follow is not None) == (kind is UsvFollowingVv)
    assert strategy.next_us == (NEVER if protocol == "eventual" else 0)


def test_the_aggregator_broadcasts_the_min_of_every_report_once_all_are_in() -> None:
    state, strategy, _ = make("cure")
    state.vv[1] = pack(40)
    effects: list[Effect] = []
    strategy.stabilize(T0, effects, (pack(30), pack(30)))
    assert effects == [] and state.vv[0] == pack(T0)  # partition 1 has not reported; the clock moved
    assert strategy.next_us == T0 + state.config.stabilization_interval_us
    strategy.on_vv_report(VvReport(ServerId(0, 1), (pack(T0 - 5), pack(20)), (pack(10), pack(25))), T0)
    assert state.heard == {1: T0}
    strategy.stabilize(T0 + 1, effects, (pack(30), pack(30)))
    gsv, horizon = (pack(T0 - 5), pack(20)), (pack(10), pack(25))
    assert effects == [Send(ServerId(0, 1), GsvBroadcast(ServerId(0, 0), gsv, None, horizon))]
    assert state.gsv == gsv and state.stable == gsv and state.horizon == horizon


def test_a_partition_reports_its_vv_and_floor_to_the_aggregator() -> None:
    state, strategy, _ = make("cure", partition=1)
    effects: list[Effect] = []
    strategy.stabilize(T0, effects, (pack(3), pack(3)))
    assert effects == [Send(ServerId(0, 0), VvReport(ServerId(0, 1), (pack(T0), 0), (pack(3), pack(3))))]
    assert state.stats.stabilization_messages_sent == 1


def test_gentlerain_reports_one_local_stable_time_and_broadcasts_one_gst() -> None:
    """GentleRain's round is scalar (docs/protocol.md, "GentleRain"): a partition reports the min
    of its vv and of its floor; the aggregator broadcasts the min of the reports, which every
    partition holds as its stable vector (the GST in every entry), as the vector round did."""
    state, strategy, _ = make("gentlerain", dcs=3, partition=1)
    state.vv[1], state.vv[2] = pack(40), pack(20)
    effects: list[Effect] = []
    strategy.stabilize(T0, effects, (pack(3), pack(5), pack(3)))
    assert effects == [Send(ServerId(0, 0), StableTimeReport(ServerId(0, 1), pack(20), pack(3)))]
    assert state.stats.stabilization_bytes == 4 + 8 and state.stats.gc_bytes == 8

    state, strategy, _ = make("gentlerain", dcs=3)
    state.vv[1], state.vv[2] = pack(50), pack(60)
    effects = []
    strategy.on_stable_time_report(StableTimeReport(ServerId(0, 1), pack(20), pack(3)), T0)
    strategy.stabilize(T0, effects, (pack(9),) * 3)
    assert effects == [Send(ServerId(0, 1), GstBroadcast(ServerId(0, 0), pack(20), pack(3)))]
    assert state.gsv == state.stable == (pack(20),) * 3 and state.horizon == (pack(3),) * 3
    # a broadcast never moves the GST back; another DC's is ignored
    strategy.on_gst_broadcast(GstBroadcast(ServerId(0, 1), pack(10), pack(1)), T0)
    strategy.on_gst_broadcast(GstBroadcast(ServerId(1, 0), pack(99), pack(99)), T0)
    assert state.stable == (pack(20),) * 3 and state.horizon == (pack(3),) * 3


def test_broadcasts_never_move_the_vectors_back_and_other_dcs_are_ignored() -> None:
    state, strategy, resumed = make("cure", partition=1)
    strategy.on_gsv_broadcast(GsvBroadcast(ServerId(0, 0), (9, 9), None, (5, 5)), T0)
    strategy.on_gsv_broadcast(GsvBroadcast(ServerId(0, 0), (3, 3), None, (1, 1)), T0)
    assert (state.gsv, state.stable, state.horizon) == ((9, 9), (9, 9), (5, 5))
    assert strategy.on_gsv_broadcast(GsvBroadcast(ServerId(1, 0), (99, 99), None, (99, 99)), T0) == []
    assert strategy.on_vv_report(VvReport(ServerId(1, 1), (99, 99), (99, 99)), T0) == []
    assert (state.gsv, state.stable, state.horizon) == ((9, 9), (9, 9), (5, 5))
    assert resumed == []  # nothing was parked
    state.parked.append(Parked(GetRequest(1, b"k", Session((0, 0), 0)), WaitForClock(T0 + 9, "test"), T0))
    strategy.on_gsv_broadcast(GsvBroadcast(ServerId(0, 0), (10, 10), None, (5, 5)), T0 + 1)
    assert resumed == [T0 + 1]


def test_usv_on_the_stream_shares_each_changed_gsv_once_and_takes_the_min_of_every_dcs() -> None:
    state, strategy, resumed = make("okapi", dcs=3, partition=1)
    assert strategy.take_gsv() is None
    strategy.on_gsv_broadcast(GsvBroadcast(ServerId(0, 0), (7, 7, 7), None, (0, 0, 0)), T0)
    assert strategy.gsv_unshared and strategy.take_gsv() == (7, 7, 7)
    assert not strategy.gsv_unshared and strategy.take_gsv() is None
    strategy.on_gsv_broadcast(GsvBroadcast(ServerId(0, 0), (7, 7, 7), None, (0, 0, 0)), T0)
    assert strategy.take_gsv() is None  # unchanged: nothing new to share
    assert strategy.absorb_gsv(0, (99, 99, 99), T0) == [] and state.stable == (0, 0, 0)  # our own DC's
    strategy.absorb_gsv(1, (5, 9, 9), T0)
    assert state.stable == (0, 0, 0)  # DC 2's GSV is still unknown
    strategy.absorb_gsv(2, (9, 9, 6), T0)
    assert state.stable == (5, 7, 6)
    strategy.absorb_gsv(2, (1, 1, 1), T0)  # an older GSV moves nothing back
    assert state.stable == (5, 7, 6) and resumed == []


def test_piggybacked_usv_is_exchanged_by_the_aggregator_and_rides_on_its_broadcast() -> None:
    state, strategy, _ = make("okapi", dcs=2, partitions=2, piggyback=True)
    strategy.on_gsv_exchange(GsvExchange(ServerId(1, 0), (pack(5), pack(5))), T0)
    strategy.on_vv_report(VvReport(ServerId(0, 1), (pack(T0), pack(8)), (0, 0)), T0)
    state.vv[1] = pack(9)
    effects: list[Effect] = []
    strategy.stabilize(T0, effects, (0, 0))
    gsv = (pack(T0), pack(8))
    usv = (pack(5), pack(5))
    assert effects == [Send(ServerId(1, 0), GsvExchange(ServerId(0, 0), gsv)),
                       Send(ServerId(0, 1), GsvBroadcast(ServerId(0, 0), gsv, usv, (0, 0)))]
    assert state.stable == usv and strategy.take_gsv() is None  # never on the replication stream


def test_one_partition_per_dc_follows_its_vv_and_says_when_the_gsv_moved() -> None:
    state, strategy, _ = make("okapi", dcs=2, partitions=1)
    assert strategy.follow is not None
    effects: list[Effect] = []
    assert strategy.follow(T0, effects) is False
    state.vv[0] = pack(T0)
    assert strategy.follow(T0, effects) is True and state.gsv == (pack(T0), 0)
    assert strategy.take_gsv() == (pack(T0), 0) and strategy.follow(T0, effects) is False


def test_eventual_runs_no_round() -> None:
    state, strategy, _ = make("eventual")
    assert strategy.next_us == NEVER and not strategy.runs
    strategy.on_gsv_broadcast(GsvBroadcast(ServerId(0, 1), (9, 9), None, state.horizon), T0)
    assert state.stable == (0, 0)  # every version is visible anyway: the stable vector stays
