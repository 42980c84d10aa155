"""Clock properties (Okapi section 3.1, Algorithm 3; the maximum clock offset).

For any sequence of physical clock readings (including backwards steps, as NTP may cause) and any
client dependency values, the hybrid rule yields strictly increasing timestamps above every
dependency and never waits (a full logical counter carries into the physical part); the physical
rule yields the clock reading itself or a wait for a later one. The same holds end to end through a
partition server, and there the HLC never runs further ahead of the clock than the maximum offset
plus the carry, whatever the sessions and peers send: what is further ahead is refused or clamped
and changes nothing.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from okapikv.core.config import CoreConfig
from okapikv.core.messages import PutRequest, Respond, Session, WriteReply
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import (
    LOGICAL_MASK,
    WaitForClock,
    hybrid_put_timestamp,
    pack,
    physical_of,
    physical_put_timestamp,
)

SETTINGS = settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
BASE_US = 1_000_000

# Clock readings wander around a base, backwards included; dependencies sit near them, with logical
# parts near the limit so overflows happen often.
clock_steps = st.integers(min_value=-50, max_value=50)
logicals = st.one_of(st.integers(0, 3), st.integers(LOGICAL_MASK - 3, LOGICAL_MASK))
dependencies = st.one_of(
    st.just(0),
    st.builds(lambda offset, logical: pack(BASE_US + offset, logical), st.integers(-60, 120), logicals),
)


@SETTINGS
@given(st.lists(st.tuples(clock_steps, dependencies), min_size=1, max_size=60))
def test_hybrid_rule_is_monotonic_and_above_every_dependency(steps: list[tuple[int, int]]) -> None:
    previous = 0
    now_us = BASE_US
    for step, dependency in steps:
        now_us = max(0, now_us + step)
        result = hybrid_put_timestamp(previous, dependency, now_us)
        assert result == max(previous + 1, pack(now_us), dependency + 1)  # no larger jump than needed
        assert result > previous
        assert result > dependency
        assert physical_of(result) >= now_us
        previous = result


@SETTINGS
@given(st.lists(st.tuples(clock_steps, dependencies), min_size=1, max_size=60))
def test_physical_rule_takes_the_clock_or_waits_for_it(steps: list[tuple[int, int]]) -> None:
    previous = 0
    now_us = BASE_US
    for step, dependency in steps:
        now_us = max(0, now_us + step)
        result = physical_put_timestamp(previous, dependency, now_us)
        if isinstance(result, WaitForClock):
            assert result.clock_us > now_us
            assert pack(result.clock_us) > max(previous, dependency)
            assert pack(result.clock_us - 1) <= max(previous, dependency)  # the earliest possible
            now_us = result.clock_us
            result = physical_put_timestamp(previous, dependency, now_us)
        assert result == pack(now_us)
        assert result > previous and result > dependency
        previous = result


@SETTINGS
@given(
    protocol=st.sampled_from(["okapi", "cure", "gentlerain"]),
    steps=st.lists(st.tuples(clock_steps, dependencies, st.booleans()), min_size=1, max_size=40),
)
def test_server_timestamps_increase_and_cover_the_session(protocol: str, steps: list[tuple[int, int, bool]]) -> None:
    server = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1, protocol=protocol))
    now_us = BASE_US
    previous = 0
    for request_id, (step, dependency, run_timer) in enumerate(steps):
        now_us = max(0, now_us + step)
        if run_timer:
            server.on_timer(now_us)  # heartbeats and stabilization also raise the local clock
        effects = server.handle(PutRequest(request_id, b"k", b"v", Session((0,), dependency)), now_us)
        waited = False
        while not effects:
            assert server.parked_count == 1
            deadline = server.next_deadline()
            waited = True
            now_us = max(now_us, deadline)
            effects = [e for e in server.on_timer(now_us) if isinstance(e, Respond)]
        [effect] = effects
        assert isinstance(effect, Respond) and isinstance(effect.reply, WriteReply)
        timestamp = effect.reply.timestamp
        assert timestamp > previous
        assert timestamp > dependency
        assert server.hlc >= timestamp
        assert not (protocol == "okapi" and waited)  # Okapi never parks a PUT
        previous = timestamp
    if protocol == "okapi":
        assert server.stats.waits == {}
