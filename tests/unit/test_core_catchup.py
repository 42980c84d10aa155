"""Catch-up and repair on their own (``okapikv.core.catchup``; docs/protocol.md, "Catch-up and
repair"): a ``CatchUp`` over a bare ``PartitionState``. Whole restarts, with replicas answering, are
in ``test_core_durability.py``."""

from __future__ import annotations

from okapikv.core.catchup import CatchUp, Repair, Verify
from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    CatchUpReply,
    CatchUpRequest,
    ErrorCode,
    ErrorReply,
    GetRequest,
    RepairAnswer,
    RepairBatch,
    ReplicateBatch,
    Respond,
    Restarted,
    Send,
    ServerId,
    Session,
    Update,
)
from okapikv.core.mvstore import Version
from okapikv.core.state import PartitionState
from okapikv.core.timestamps import pack

T0 = 1_000_000


def make(dcs: int = 3, *, stable_moves: bool = True) -> tuple[PartitionState, CatchUp]:
    state = PartitionState(CoreConfig(0, 0, dcs, 2))
    return state, CatchUp(state, stable_moves=stable_moves)


def requests(effects: list[object]) -> dict[int, CatchUpRequest]:
    return {effect.destination.dc: effect.message for effect in effects  # type: ignore[attr-defined]
            if isinstance(effect, Send) and isinstance(effect.message, CatchUpRequest)}


def test_a_restart_asks_every_replica_above_its_vv_and_tells_its_dc() -> None:
    state, catch_up = make()
    state.vv[:] = [pack(T0), pack(5), pack(7)]
    effects = catch_up.start()
    asked = requests(effects)  # type: ignore[arg-type]
    assert sorted(asked) == [1, 2] and [asked[1].after, asked[2].after] == [pack(5), pack(7)]
    assert asked[1].request_id == pack(T0) + 1 and asked[2].request_id == pack(T0) + 2  # above the clock
    assert all(request.restarted and not request.repair for request in asked.values())
    assert Send(ServerId(0, 1), Restarted(ServerId(0, 0))) in effects
    assert catch_up.awaited == {1: asked[1].request_id, 2: asked[2].request_id} and catch_up.status is None


def test_only_the_answer_to_the_latest_request_ends_the_freeze() -> None:
    state, catch_up = make(dcs=2)
    first = requests(catch_up.start())[1]  # type: ignore[arg-type]
    # The replica restarted too: it asks us, and we ask it again (its old stream is cut).
    again = requests(catch_up.on_request(CatchUpRequest(ServerId(1, 0), 1, 0, True), T0))[1]  # type: ignore[arg-type]
    assert again.request_id > first.request_id and not again.restarted
    catch_up.on_reply(CatchUpReply(ServerId(1, 0), first.request_id, pack(3)), T0)
    assert 1 in catch_up.awaited and state.vv[1] == pack(3)  # any answer proves its updates arrived
    catch_up.on_reply(CatchUpReply(ServerId(1, 0), again.request_id, pack(4)), T0)
    assert catch_up.awaited == {} and state.vv[1] == pack(4)


def test_the_clock_moves_above_what_a_replica_holds_of_this_dc() -> None:
    state, catch_up = make(dcs=2)
    request = requests(catch_up.start())[1]  # type: ignore[arg-type]
    catch_up.on_reply(CatchUpReply(ServerId(1, 0), request.request_id, 0, pack(T0 + 9)), T0)
    assert state.hlc == pack(T0 + 9) and state.stats.replica_knows_clock == pack(T0 + 9)


def test_messages_from_non_replicas_are_ignored() -> None:
    state, catch_up = make(dcs=2)
    assert catch_up.on_request(CatchUpRequest(ServerId(1, 1), 1, 0, True), T0) == []
    assert catch_up.on_reply(CatchUpReply(ServerId(0, 1), 1, pack(5)), T0) == []
    assert state.vv == [0, 0] and catch_up.awaited == {}


def test_an_answer_holds_every_local_update_above_after() -> None:
    state, catch_up = make(dcs=2)
    state.store.insert(b"a", Version(b"1", pack(1), 0, None))
    state.store.insert(b"b", Version(b"2", pack(2), 0, None))
    state.store.insert(b"c", Version(b"3", pack(3), 1, None))  # another DC's: not in a catch-up
    state.vv[:] = [pack(9), pack(3)]
    effects = catch_up.on_request(CatchUpRequest(ServerId(1, 0), 4, pack(1), False), T0)
    assert effects == [Send(ServerId(1, 0), ReplicateBatch(state.id, (Update(b"b", b"2", pack(2), 0, None),))),
                       Send(ServerId(1, 0), CatchUpReply(state.id, 4, pack(9), pack(3)))]


def test_a_repair_refuses_clients_fetches_then_settles_at_the_replicas_stable_vector() -> None:
    state, catch_up = make(dcs=2)
    salvaged = ((b"mine", Version(b"late", pack(50), 0, None)), (b"old", Version(b"x", pack(2), 0, None)))
    request = requests(catch_up.start(Repair(salvaged)))[1]  # type: ignore[arg-type]
    assert request.repair and catch_up.status == "fetching"
    [refusal] = catch_up.refuse(GetRequest(3, b"k", Session((0, 0), 0)))
    assert isinstance(refusal, Respond) and isinstance(refusal.reply, ErrorReply)
    assert refusal.reply.code == ErrorCode.UNAVAILABLE and "1 of 1 replicas" in refusal.reply.message
    # A plain catch-up request waits for the fetch to end: its answer must include what comes back.
    assert catch_up.on_request(CatchUpRequest(ServerId(1, 0), 8, 0, False), T0) == []
    catch_up.on_repair_batch(RepairBatch(ServerId(1, 0), request.request_id,
                                         (Update(b"old", b"x", pack(2), 0, None),)), T0)
    answer = RepairAnswer((pack(20), pack(20)), (pack(10), pack(10)), (pack(30), pack(30)))
    effects = catch_up.on_reply(CatchUpReply(ServerId(1, 0), request.request_id, pack(40), pack(20), answer), T0)
    assert catch_up.status == "settling" and sorted(state.store.keys()) == [b"mine", b"old"]
    assert state.hlc == pack(50)  # above every timestamp of this DC anywhere
    assert any(isinstance(effect, Send) and isinstance(effect.message, CatchUpReply) for effect in effects)
    catch_up.settle()
    assert catch_up.status == "settling"  # the stable vector has not reached the replica's
    state.advance_stable((pack(30), pack(30)))
    catch_up.settle()
    assert catch_up.repair is None and state.horizon == (pack(30), pack(30))
    assert state.stats.repairs_completed == 1 and state.stats.repair_local_kept == 1


def test_a_repair_without_replicas_or_a_moving_stable_vector_ends_after_the_fetch() -> None:
    state, catch_up = make(dcs=1)
    catch_up.start(Repair())
    assert catch_up.repair is None and state.stats.repairs_completed == 1
    state, catch_up = make(dcs=2, stable_moves=False)  # eventual: nothing to settle on
    request = requests(catch_up.start(Repair()))[1]  # type: ignore[arg-type]
    answer = RepairAnswer((0, 0), (0, 0), (0, 0))
    catch_up.on_reply(CatchUpReply(ServerId(1, 0), request.request_id, pack(4), 0, answer), T0)
    assert catch_up.repair is None and state.stats.repairs_completed == 1


# ---------------------------------------------------------------- verification (a start that may have lost writes)


def test_a_start_with_no_data_holds_clients_until_every_replica_answered() -> None:
    state, catch_up = make()
    asked = requests(catch_up.start(verify=Verify(own_from=pack(T0), hold=True, repair=True)))  # type: ignore[arg-type]
    assert not catch_up.serving and catch_up.status == "checking"
    refusal = catch_up.refuse(GetRequest(7, b"k", Session((0, 0, 0), 0)))[0]
    assert isinstance(refusal, Respond) and isinstance(refusal.reply, ErrorReply)
    assert refusal.reply.code is ErrorCode.UNAVAILABLE and "waiting for 2 of 2" in refusal.reply.message
    # One replica holds nothing of ours, the other only this incarnation's first heartbeat: no loss.
    catch_up.on_reply(CatchUpReply(ServerId(1, 0), asked[1].request_id, pack(3), 0), T0)
    assert not catch_up.serving
    assert catch_up.on_reply(CatchUpReply(ServerId(2, 0), asked[2].request_id, pack(3), pack(T0 + 2)), T0) == []
    assert catch_up.serving and catch_up.status is None and catch_up.lost_through == 0


def test_a_replica_holding_lost_writes_starts_a_repair_that_ends_the_loss() -> None:
    state, catch_up = make(dcs=2, stable_moves=False)
    asked = requests(catch_up.start(verify=Verify(own_from=pack(T0), hold=True, repair=True)))  # type: ignore[arg-type]
    effects = catch_up.on_reply(CatchUpReply(ServerId(1, 0), asked[1].request_id, pack(3), pack(T0 - 50)), T0)
    repair = requests(effects)[1]  # type: ignore[arg-type]
    assert repair.repair and not repair.restarted and catch_up.status == "fetching"
    assert catch_up.lost_through == pack(T0 - 50)
    catch_up.on_repair_batch(RepairBatch(ServerId(1, 0), repair.request_id, (
        Update(b"k", b"v1", pack(T0 - 50), 0, (0, 0)),)), T0)
    catch_up.on_reply(CatchUpReply(ServerId(1, 0), repair.request_id, pack(3), pack(T0 - 50),
                                   RepairAnswer((0, 0), (0, 0), (0, 0))), T0)
    assert catch_up.serving and not catch_up.refusing_lost and state.store.latest(b"k") is not None
    assert state.vv[0] >= pack(T0 - 50)  # never reissue a timestamp a replica holds


def test_an_older_disk_serves_until_a_replica_shows_the_loss_then_refuses() -> None:
    state, catch_up = make(dcs=2)
    state.vv[0] = pack(T0 - 100)  # the recovered clock bound of an older copy of the disk
    asked = requests(catch_up.start(verify=Verify(own_from=pack(T0))))  # type: ignore[arg-type]
    assert catch_up.serving  # a disk says nothing of its age: no hold
    assert catch_up.on_reply(CatchUpReply(ServerId(1, 0), asked[1].request_id, 0, pack(T0 - 40)), T0) == []
    assert not catch_up.serving and catch_up.status == "lost" and catch_up.repair is None
    refusal = catch_up.refuse(GetRequest(7, b"k", Session((0, 0), 0)))[0]
    assert "--repair" in refusal.reply.message  # type: ignore[union-attr]


def test_a_current_disk_finds_no_loss() -> None:
    state, catch_up = make(dcs=2)
    state.vv[0] = pack(T0 - 10)
    asked = requests(catch_up.start(verify=Verify(own_from=pack(T0))))  # type: ignore[arg-type]
    catch_up.on_reply(CatchUpReply(ServerId(1, 0), asked[1].request_id, 0, pack(T0 - 10)), T0)
    assert catch_up.serving and catch_up.lost_through == 0


def test_a_released_replica_no_longer_holds_clients_but_its_answer_is_still_checked() -> None:
    state, catch_up = make(dcs=2)
    asked = requests(catch_up.start(verify=Verify(own_from=pack(T0), hold=True)))  # type: ignore[arg-type]
    catch_up.release(1)  # the driver could not reach it: a DC cut off still serves
    assert catch_up.serving and catch_up.holding_for == []
    catch_up.on_reply(CatchUpReply(ServerId(1, 0), asked[1].request_id, 0, pack(T0 - 5)), T0)
    assert not catch_up.serving and catch_up.status == "lost"


def test_a_loss_shown_by_an_earlier_requests_answer_counts_when_the_replica_restarted_too() -> None:
    """A replica restarted while this server was down (a whole cluster restarted, one disk empty)
    asks this server, which asks it again: the answer to the first request still shows what the
    replica holds of this DC, where the second's may carry this incarnation's first heartbeats only."""
    for first_answered_first in (True, False):
        state, catch_up = make(dcs=2)
        asked = requests(catch_up.start(verify=Verify(own_from=pack(T0), hold=True)))  # type: ignore[arg-type]
        again = requests(catch_up.on_request(CatchUpRequest(ServerId(1, 0), 1, 0, True), T0))[1]  # type: ignore[arg-type]
        answers = [CatchUpReply(ServerId(1, 0), asked[1].request_id, 0, pack(T0 - 50)),  # our lost writes
                   CatchUpReply(ServerId(1, 0), again.request_id, 0, pack(T0 + 5))]  # our new heartbeats
        for answer in answers if first_answered_first else answers[::-1]:
            catch_up.on_reply(answer, T0)
        assert catch_up.lost_through == pack(T0 - 50), first_answered_first
        assert not catch_up.serving and catch_up.status == "lost"
