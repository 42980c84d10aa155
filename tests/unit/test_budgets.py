"""The input budget and connection deadlines (``okapikv.server.budgets``) on a fake clock, and the
frame decoder's count of what a partial frame will take (``FrameDecoder.pending_bytes``)."""

from __future__ import annotations

import struct

import pytest

from okapikv.server.budgets import (
    BUDGET,
    FIRST_FRAME_TIMEOUT,
    FRAME_TIMEOUT,
    IDLE_TIMEOUT,
    ConnectionInput,
    InputBudget,
    InputGuard,
    InputLimits,
)
from okapikv.wire.frames import MAGIC, FrameDecoder, encode_frame
from okapikv.wire.stats import to_document

LIMITS = InputLimits(budget_bytes=1000, frame_timeout_s=10.0, first_frame_timeout_s=5.0, idle_timeout_s=60.0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _guard(limits: InputLimits = LIMITS) -> tuple[InputGuard, Clock, list[tuple[str, str, str]]]:
    clock = Clock()
    return InputGuard(limits, clock), clock, []


def _open(guard: InputGuard, expired: list[tuple[str, str, str]], label: str) -> ConnectionInput:
    return guard.open(label, lambda reason, message: expired.append((label, reason, message)))


def test_the_budget_refuses_what_does_not_fit_unless_forced() -> None:
    budget = InputBudget(100)
    assert budget.acquire(60) and not budget.acquire(41) and budget.in_use == 60
    assert budget.acquire(40) and budget.in_use == 100
    assert budget.acquire(50, force=True) and budget.in_use == 150 and budget.peak == 150
    budget.release(150)
    assert budget.in_use == 0 and budget.peak == 150
    with pytest.raises(AssertionError):
        budget.release(1)


def test_partial_frames_hold_their_announced_size_until_complete() -> None:
    guard, _, expired = _guard()
    first, second = _open(guard, expired, "a"), _open(guard, expired, "b")
    assert first.progress(0, 600) and guard.budget.in_use == 600
    assert first.progress(0, 600)  # more bytes of the same frame: nothing changes
    assert not second.progress(0, 500)  # does not fit: refused, nothing taken
    assert guard.budget.in_use == 600 and guard.closed[BUDGET] == 1
    assert "500 bytes" in second.refuse_message(500) and "600 of 1000" in second.refuse_message(500)
    assert first.progress(1, 0) and guard.budget.in_use == 0 and first.frames == 1  # complete: released
    assert second.progress(0, 500) and first.progress(0, 400) and guard.budget.in_use == 900
    second.close()
    first.close()
    first.close()  # twice is harmless
    assert guard.budget.in_use == 0 and not guard.connections


def test_an_exempt_connection_is_counted_but_never_refused() -> None:
    guard, _, expired = _guard()
    client, peer = _open(guard, expired, "client"), _open(guard, expired, "peer")
    assert client.progress(0, 900)
    peer.exempt = True
    assert peer.progress(0, 800) and guard.budget.in_use == 1700
    assert not _open(guard, expired, "late").progress(0, 10)  # the budget is over: others are refused


def test_a_frame_not_finished_in_time_is_closed() -> None:
    guard, clock, expired = _guard()
    slow = _open(guard, expired, "slow")
    assert slow.progress(1, 0)  # a first frame
    clock.now += 1
    assert slow.progress(0, 700)  # the next one starts now ...
    clock.now += 9.9
    assert slow.progress(0, 700)  # ... and trickles in
    guard.sweep()
    assert not expired
    clock.now += 0.1
    guard.sweep()
    assert expired == [("slow", FRAME_TIMEOUT, "a frame of 700 bytes was not complete 10 s after its first byte")]
    assert guard.closed[FRAME_TIMEOUT] == 1 and guard.budget.in_use == 0 and not guard.connections
    guard.sweep()
    assert len(expired) == 1  # once


def test_a_new_frame_after_a_complete_one_restarts_the_frame_clock() -> None:
    guard, clock, expired = _guard()
    busy = _open(guard, expired, "busy")
    for _ in range(30):  # a long stream of frames, each read ending inside the next one
        assert busy.progress(1, 300)
        clock.now += 1
        guard.sweep()
    assert not expired and guard.budget.in_use == 300


def test_no_first_frame_and_long_idleness_are_closed_but_not_while_a_frame_arrives() -> None:
    guard, clock, expired = _guard()
    silent, sending, idle = (_open(guard, expired, name) for name in ("silent", "sending", "idle"))
    assert sending.progress(0, 400)  # its first frame is under way: only the frame timeout applies
    assert idle.progress(1, 0)
    clock.now += 5
    guard.sweep()
    assert [(label, reason) for label, reason, _ in expired] == [("silent", FIRST_FRAME_TIMEOUT)]
    clock.now += 5
    guard.sweep()
    assert expired[-1][:2] == ("sending", FRAME_TIMEOUT)
    clock.now += 54.5
    guard.sweep()
    assert len(expired) == 2
    clock.now += 0.5  # 60 s since the first sweep that saw its frame
    guard.sweep()
    assert expired[-1][:2] == ("idle", IDLE_TIMEOUT)
    assert guard.closed == {BUDGET: 0, FRAME_TIMEOUT: 1, FIRST_FRAME_TIMEOUT: 1, IDLE_TIMEOUT: 1}


def test_idle_timeout_zero_means_never() -> None:
    limits = InputLimits(budget_bytes=1000, frame_timeout_s=10.0, first_frame_timeout_s=5.0, idle_timeout_s=0.0)
    guard, clock, expired = _guard(limits)
    connection = _open(guard, expired, "quiet")
    assert connection.progress(1, 0)
    clock.now += 1e6
    guard.sweep()
    assert not expired
    assert limits.sweep_interval_s == 1.0
    assert InputLimits(1000, 0.1, 5.0, 0.0).sweep_interval_s == 0.05


def test_stats_say_what_is_held_and_why_connections_closed() -> None:
    guard, _, expired = _guard()
    assert _open(guard, expired, "a").progress(0, 250)
    assert to_document(guard.figures()) == {
        "connections": 1, "partial_bytes": 250, "partial_bytes_peak": 250, "budget_bytes": 1000,
        "closed": {BUDGET: 0, FRAME_TIMEOUT: 0, FIRST_FRAME_TIMEOUT: 0, IDLE_TIMEOUT: 0}}


def test_pending_bytes_is_the_announced_size_of_the_incomplete_frame() -> None:
    decoder = FrameDecoder(expect_magic=True)
    assert decoder.feed(MAGIC[:3]) == [] and decoder.pending_bytes == 3  # part of the preamble
    assert decoder.feed(MAGIC[3:]) == [] and decoder.pending_bytes == 0
    assert decoder.feed(b"\x00\x00") == [] and decoder.pending_bytes == 2  # part of a length
    assert decoder.feed(struct.pack(">H", 1000)) == [] and decoder.pending_bytes == 1004
    assert decoder.feed(b"x" * 10) == [] and decoder.pending_bytes == 1004
    frames = decoder.feed(b"x" * 990 + encode_frame(b"done") + encode_frame(b"next")[:5])
    assert frames == [b"x" * 1000, b"done"] and decoder.pending_bytes == 8
