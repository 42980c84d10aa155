"""One DC's store against a dict (docs/protocol.md, "Operations"), as a hypothesis ``RuleBasedStateMachine``.

Partitions are one DC of the simulator's deterministic world with no delay inside the DC
(``okapikv.sim.world.World.fixed``: every Send is delivered to the right ``PartitionServer`` at
once). With a single DC every protocol must behave like a plain key-value store for the client's
own session: PUT/DELETE report whether a value existed, SWAP returns the old value, GET/RO-TX/SCAN
read the latest writes (SCAN: inclusive byte-order range, tombstones skipped, limit applied). A
second, empty session checks that single-key reads are linearizable (they see the latest write
whatever the session). Time moves only when a rule says so, so many operations share a microsecond
(HLC logical counter, Cure/GentleRain ticks) and timers run stabilization and garbage collection
in between.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from okapikv.core.messages import GetReply, ReadTxReply, ScanReply, SwapReply, WriteReply
from okapikv.sim.caller import Caller
from okapikv.sim.world import World

KEYS = [b"a", b"aa", b"ab", b"b", b"ba", b"c", b"B", b"\x00", b"\xff", b"zz"]
keys = st.one_of(st.sampled_from(KEYS), st.binary(min_size=1, max_size=2))
values = st.binary(max_size=4)
bounds = st.one_of(st.sampled_from([b"", b"a", b"ab", b"b", b"c", b"\xff", b"\xff\xff"]), st.binary(max_size=2))


class StoreModel(RuleBasedStateMachine):
    partitions = 1
    protocol = "okapi"

    def __init__(self) -> None:
        super().__init__()
        # A short GC interval so collection runs between operations.
        world = World.fixed(1, self.partitions, self.protocol, lan_us=0, gc_interval_us=2_000, gc_budget=3)
        self.dc = Caller(world)
        self.model: dict[bytes, bytes] = {}
        self.stranger = Caller(world)

    # ------------------------------------------------------------------ writes

    @rule(key=keys, value=values)
    def put(self, key: bytes, value: bytes) -> None:
        reply = self.dc.put(key, value)
        assert isinstance(reply, WriteReply)
        assert reply.found == (key in self.model)
        self.model[key] = value

    @rule(key=keys, value=values)
    def swap(self, key: bytes, value: bytes) -> None:
        reply = self.dc.swap(key, value)
        assert isinstance(reply, SwapReply)
        assert reply.old_value == self.model.get(key)
        self.model[key] = value

    @rule(key=keys)
    def delete(self, key: bytes) -> None:
        reply = self.dc.delete(key)
        assert isinstance(reply, WriteReply)
        assert reply.found == (key in self.model)
        self.model.pop(key, None)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def overwrite_existing(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        self.put(key, data.draw(values))

    # ------------------------------------------------------------------ reads

    @rule(key=keys)
    def get(self, key: bytes) -> None:
        reply = self.dc.get(key)
        assert isinstance(reply, GetReply)
        assert reply.value == self.model.get(key)

    @rule(key=keys)
    def get_with_an_empty_session(self, key: bytes) -> None:
        reply = self.stranger.get(key)
        assert isinstance(reply, GetReply)
        assert reply.value == self.model.get(key)

    @rule(chosen=st.lists(keys, max_size=6), coordinator=st.integers(0, 2))
    def read_tx(self, chosen: list[bytes], coordinator: int) -> None:
        reply = self.dc.read_tx(chosen, coordinator % self.partitions)
        assert isinstance(reply, ReadTxReply)
        assert reply.values == tuple(self.model.get(key) for key in chosen)

    @rule(start=bounds, end=bounds, limit=st.none() | st.integers(0, 5), coordinator=st.integers(0, 2))
    def scan(self, start: bytes, end: bytes, limit: int | None, coordinator: int) -> None:
        reply = self.dc.scan(start, end, limit, coordinator % self.partitions)
        assert isinstance(reply, ScanReply)
        expected = sorted((key, value) for key, value in self.model.items() if start <= key <= end)
        if limit is not None:
            expected = expected[:limit]
        assert list(reply.items) == expected

    # ------------------------------------------------------------------ time

    @rule(elapsed_us=st.sampled_from([0, 1, 7, 500, 1_000, 2_500, 6_000]))
    def advance(self, elapsed_us: int) -> None:
        self.dc.world.advance(elapsed_us)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def nothing_is_left_hanging(self) -> None:
        assert all(server.parked_count == 0 and server.pending_reads == 0 for server in self.dc.world.servers)
        assert self.dc.mailbox.replies == {}
        assert not self.dc.world.network.carried_between_dcs()

    @invariant()
    def every_key_lives_at_its_owner(self) -> None:
        for server in self.dc.world.servers:
            stored = list(server.store.keys())
            assert all(self.dc.owner(key) is server for key in stored)

    @invariant()
    def newest_version_of_every_key_matches_the_model(self) -> None:
        for server in self.dc.world.servers:
            stored = list(server.store.keys())
            for key in stored:
                latest = server.store.latest(key)
                assert latest is not None
                assert latest.value == self.model.get(key)


SETTINGS = settings(
    deadline=None, max_examples=60, stateful_step_count=40, suppress_health_check=[HealthCheck.too_slow]
)


class OkapiOnePartition(StoreModel):
    partitions = 1


class OkapiThreePartitions(StoreModel):
    partitions = 3


class CureThreePartitions(StoreModel):
    partitions = 3
    protocol = "cure"


class GentleRainThreePartitions(StoreModel):
    partitions = 3
    protocol = "gentlerain"


class EventualThreePartitions(StoreModel):
    partitions = 3
    protocol = "eventual"


TestOkapiOnePartition = OkapiOnePartition.TestCase
TestOkapiOnePartition.settings = SETTINGS
TestOkapiThreePartitions = OkapiThreePartitions.TestCase
TestOkapiThreePartitions.settings = SETTINGS
TestCureThreePartitions = CureThreePartitions.TestCase
TestCureThreePartitions.settings = settings(SETTINGS, max_examples=25)
TestGentleRainThreePartitions = GentleRainThreePartitions.TestCase
TestGentleRainThreePartitions.settings = settings(SETTINGS, max_examples=25)
TestEventualThreePartitions = EventualThreePartitions.TestCase
TestEventualThreePartitions.settings = settings(SETTINGS, max_examples=15)
