"""The sans-I/O host's rules on their own (``okapikv.core.host``): what waits for durability and in
which order, when the deadline is looked at again, the spin's bounds, the peer refusal of a full
disk, and a stopping host. The refusals in a simulated run: ``tests/sim/test_host_rules.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

from okapikv.core.config import CoreConfig
from okapikv.core.host import SPIN_BUDGET_US, SPIN_US, Host
from okapikv.core.messages import (
    Effect,
    ErrorCode,
    ErrorReply,
    GetReply,
    GetRequest,
    Heartbeat,
    PutRequest,
    Respond,
    Send,
    ServerId,
    Session,
    WriteReply,
)
from okapikv.core.server import Changes, PartitionServer
from okapikv.core.timestamps import pack

NOW = 1_000_000


@dataclass
class StubCommitter:
    """Every call that inserts a version needs group ``next``; ``durable`` moves when the test says;
    ``bound``: the group of a clock bound every call needs (a clock that jumped past it)."""

    next: int = 1
    durable: int = 0
    disk_full: bool = False
    bound: int = 0
    unsettled: dict[bytes, int] = field(default_factory=dict)

    def stage(self, changes: Changes, hlc: int) -> int:
        keys = [change.key for change in changes.store if change.inserted]
        for key in keys:
            self.unsettled[key] = self.next
        return max(self.next if keys else self.durable, self.bound)

    def read_need(self, key: bytes) -> int:
        return max(self.unsettled.get(key, 0), self.bound)


def _host(committer: StubCommitter | None = None, num_dcs: int = 2) -> Host[str]:
    core = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=num_dcs, num_partitions=1))
    core.track_changes = committer is not None
    return Host(core, committer)


def _put(request_id: int, key: bytes = b"k") -> PutRequest:
    return PutRequest(request_id, key, b"v", Session((0, 0), 0))


def test_effects_wait_in_order_for_their_group_and_leave_once_it_is_durable() -> None:
    committer = StubCommitter()
    host = _host(committer)
    host.expect(1, "first")
    assert host.handle([_put(1)], NOW).effects == []  # the version is not durable yet
    committer.next = 2
    host.expect(2, "second")
    assert host.handle([_put(2, b"j")], NOW + 10).effects == []
    assert host.held_effect_groups == 2
    committer.durable = 1
    released = host.durable().effects
    assert [type(effect.reply) for effect in released if isinstance(effect, Respond)] == [WriteReply]
    assert [host.take(effect.reply.request_id) for effect in released if isinstance(effect, Respond)] == ["first"]
    committer.durable = 2
    assert [effect.reply.request_id for effect in host.durable().effects if isinstance(effect, Respond)] == [2]
    assert host.held_effect_groups == 0 and host.waiting_replies == 1  # "second" not taken yet


def test_effects_behind_held_ones_wait_even_when_they_need_nothing() -> None:
    committer = StubCommitter()
    host = _host(committer)
    host.handle([_put(1)], NOW)
    outbox = host.timer(NOW + 5_000)  # a heartbeat and a round: nothing to make durable, but behind the PUT
    assert outbox.effects == [] and host.held_effect_groups == 2
    committer.durable = 1
    released = host.durable().effects
    assert isinstance(released[0], Respond) and any(isinstance(effect, Send) for effect in released[1:])


def _get(request_id: int, key: bytes = b"k") -> GetRequest:
    return GetRequest(request_id, key, Session((0, 0), 0))


def _replies(effects: list[Effect]) -> list[tuple[type, int]]:
    return [(type(effect.reply), effect.reply.request_id) for effect in effects if isinstance(effect, Respond)]


def test_a_get_of_a_durable_key_overtakes_held_effects_and_one_of_a_held_version_waits() -> None:
    """Nothing revealed before it is durable: a GET's reply leaves at once when no group that
    inserted a version of its key is still to become durable, and waits in order otherwise."""
    committer = StubCommitter()
    host = _host(committer)
    assert host.handle([_put(1, b"old")], NOW).effects == []
    committer.durable, committer.next = 1, 2
    assert _replies(host.durable().effects) == [(WriteReply, 1)]
    assert host.handle([_put(2, b"new")], NOW + 10).effects == []  # held: group 2 is not durable
    # A read of the durable key leaves now, ahead of the held PUT; a read of the held version waits.
    assert _replies(host.handle([_get(3, b"old")], NOW + 20).effects) == [(GetReply, 3)]
    assert host.handle([_get(4, b"new")], NOW + 30).effects == []
    # In one batch too: the write's reply and the read of its key wait, the other read leaves.
    committer.next = 3
    released = host.handle([_put(5, b"old"), _get(6, b"old"), _get(7, b"none")], NOW + 40).effects
    assert _replies(released) == [(GetReply, 7)]
    committer.durable = 2
    second = host.durable().effects
    assert _replies(second) == [(WriteReply, 2), (GetReply, 4)]
    assert isinstance(second[-1], Respond) and isinstance(second[-1].reply, GetReply)
    assert second[-1].reply.value == b"v"  # the version that was held
    committer.durable = 3
    assert _replies(host.durable().effects) == [(WriteReply, 5), (GetReply, 6)]
    assert host.held_effect_groups == 0
    # counted for the Stats (``driver``): replies 3 and 7 overtook held effects, 4 and 6 were held
    assert (host.get_replies_early, host.get_replies_held) == (2, 2)


def test_a_get_waits_for_a_clock_bound_that_is_not_durable() -> None:
    """Every local timestamp of a reply is under a durable clock bound: while the staged calls need
    a new bound, a GET of a durable key waits too."""
    committer = StubCommitter()
    host = _host(committer)
    committer.next = 1
    host.handle([_put(1, b"held")], NOW)
    committer.bound = 1  # the clock jumped past the durable bound: group 1 carries the new one
    assert host.handle([_get(2, b"other")], NOW + 10).effects == []
    committer.durable = 1
    assert _replies(host.durable().effects) == [(WriteReply, 1), (GetReply, 2)]
    assert (host.get_replies_early, host.get_replies_held) == (0, 1)


def test_the_deadline_is_looked_at_after_a_request_and_a_timer_run_not_after_a_heartbeat() -> None:
    host = _host()
    host.timer(NOW)
    assert host.handle([Heartbeat(ServerId(1, 0), pack(NOW - 100))], NOW + 1).deadline is None
    assert host.handle([_put(1)], NOW + 2).deadline == host.core.next_deadline()
    assert host.timer(NOW + 3).deadline == host.core.next_deadline()


def test_the_spin_meets_only_near_deadlines_within_its_budget() -> None:
    host = _host()
    host.timer(NOW)
    deadline = host.core.next_deadline()
    assert Host.spins(SPIN_US) and not Host.spins(SPIN_US + 1)
    assert host.spin_deadline(deadline - SPIN_US, deadline - SPIN_US) == deadline
    assert host.spin_deadline(deadline - SPIN_US - 1, deadline - SPIN_US - 1) is None  # a timer's job
    assert host.spin_deadline(deadline - 1, deadline - 1 - SPIN_BUDGET_US) is None  # the budget is spent


def test_a_full_disk_refuses_writes_and_other_dcs_replication_only() -> None:
    committer = StubCommitter(disk_full=True)
    host = _host(committer)
    refused = host.refusal(_put(1))
    assert isinstance(refused, ErrorReply) and refused.code == ErrorCode.RESOURCE_EXHAUSTED
    assert host.peer_refusal(ServerId(1, 0)) is not None and host.peer_refusal(ServerId(0, 1)) is None
    committer.disk_full = False
    assert host.refusal(_put(2)) is None and host.peer_refusal(ServerId(1, 0)) is None
    assert host.client_requests == 2


def test_the_doors_refuse_nothing_only_on_one_partition_with_no_full_disk() -> None:
    """``refuses_nothing`` lets a driver skip ``refusal`` per request: only where no request can be
    misrouted and the disk is not full (a durable server's batch while it has room); the requests
    it passes are still counted."""
    host = _host()
    assert host.refuses_nothing
    host.count_requests(3)
    assert host.client_requests == 3
    committer = StubCommitter()
    durable = _host(committer)
    assert durable.refuses_nothing
    committer.disk_full = True
    assert not durable.refuses_nothing
    assert durable.refusal(_put(1)) is not None
    split = Host(PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=2)))
    assert not split.refuses_nothing
    assert any(split.refusal(_put(index, b"k%d" % index)) is not None for index in range(100))


def test_a_stopping_host_calls_the_core_no_more_and_answers_the_waiting_requests() -> None:
    host = _host()
    host.expect(1, "caller")
    host.closing = True
    outbox = host.handle([_put(1)], NOW)
    assert outbox.effects == [Respond(ErrorReply(1, ErrorCode.UNAVAILABLE, "the server is shutting down"))]
    assert len(host.core.store) == 0
