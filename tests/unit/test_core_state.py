"""The state every mechanism of a partition server shares, and the maximum clock offset rule
(``okapikv.core.state``; docs/operations.md, "Clocks: the maximum offset"). The server-level
refusals and clamps are in ``test_server_clock_offset.py``."""

from __future__ import annotations

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.messages import ErrorCode, ErrorReply, Heartbeat, Respond, ServerId
from okapikv.core.protocols.eventual import TOP
from okapikv.core.state import PartitionState
from okapikv.core.timestamps import LOGICAL_MASK, WaitForClock, offset_ceiling, pack

T0 = 1_000_000
OFFSET_US = 500_000


def make(protocol: str = "okapi", dcs: int = 2) -> PartitionState:
    return PartitionState(CoreConfig(0, 1, dcs, 2, protocol=protocol, max_clock_offset_us=OFFSET_US))


@pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain", "eventual"])
def test_a_fresh_state_starts_at_zero_and_eventual_has_no_horizon(protocol: str) -> None:
    state = make(protocol)
    assert state.vv == [0, 0] and state.stable == (0, 0) and state.gsv == (0, 0) and state.hlc == 0
    assert state.horizon == ((TOP, TOP) if protocol == "eventual" else (0, 0))
    assert state.offset_guard == (protocol != "eventual")
    assert state.peers == [ServerId(1, 1)] and state.dc_members == [ServerId(0, 0), ServerId(0, 1)]
    assert state.parked == [] and state.heard == {}


def test_hlc_is_the_local_entry_of_the_version_vector() -> None:
    state = make()
    state.clock.recover(pack(7))
    assert state.hlc == pack(7)


def test_the_ceiling_is_the_clock_plus_the_offset_or_the_hlc_above_it() -> None:
    state = make()
    assert state.ceiling(T0) == pack(T0 + OFFSET_US, LOGICAL_MASK) == offset_ceiling(T0, OFFSET_US)
    state.clock.recover(pack(T0 + 2 * OFFSET_US))  # restarted above a persisted bound
    assert state.ceiling(T0) == pack(T0 + 2 * OFFSET_US)


def test_a_wait_is_too_long_past_the_offset() -> None:
    state = make()
    assert not state.too_long(WaitForClock(T0 + OFFSET_US, "clock_tick"), T0)
    assert state.too_long(WaitForClock(T0 + OFFSET_US + 1, "clock_tick"), T0)


def test_a_watermark_is_clamped_to_the_ceiling_and_never_moves_back() -> None:
    state = make()
    heartbeat = Heartbeat(ServerId(1, 1), 0)
    assert state.watermark(heartbeat, 1, pack(T0 + 10), T0) == pack(T0 + 10)
    assert state.stats.clock_offset_clamps == 0 and state.last_clock_offset is None
    far = pack(T0 + 3_600_000_000)
    assert state.watermark(heartbeat, 1, far, T0) == offset_ceiling(T0, OFFSET_US)
    assert state.stats.clock_offset_clamps == 1
    assert state.last_clock_offset == ("held back a Heartbeat watermark", "dc1/p1", 3_600_000_000)
    state.version_vector.adopt(1, far - 1)  # already past the ceiling (adopted while the clock read later)
    assert state.watermark(heartbeat, 1, far, T0) == far - 1


def test_a_malformed_request_is_refused_with_invalid_argument() -> None:
    state = make()
    assert state.check_key(b"") == "key must not be empty"
    assert state.check_key(b"k" * 1025) == "key of 1025 bytes exceeds the limit of 1024 bytes"
    assert state.check_key(b"k") is None
    assert state.reject(3, "no") == [Respond(ErrorReply(3, ErrorCode.INVALID_ARGUMENT, "no"))]
    assert state.stats.rejected_requests == 1
