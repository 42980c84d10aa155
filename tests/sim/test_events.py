"""The event heap (``okapikv.sim.events``): time order, ties in scheduling order, in-place removal."""

from __future__ import annotations

import heapq

from okapikv.sim.events import CONTROL, DELIVER, PROCESS, TIMER, Events


def drain(events: Events) -> list[tuple[int, int, object]]:
    out = []
    while events.heap:
        at, _, kind, target, payload = heapq.heappop(events.heap)
        out.append((at, target, payload))
    return out


def test_events_run_in_time_order_and_ties_in_the_order_they_were_scheduled() -> None:
    events = Events(0)
    for payload, at in (("c", 20), ("a", 10), ("b", 10), ("d", 10)):
        events.push(at, CONTROL, 0, payload)
    assert [payload for _, _, payload in drain(events)] == ["a", "b", "d", "c"]


def test_take_removes_a_targets_events_in_place_and_returns_them_in_time_order() -> None:
    events = Events(0)
    heap = events.heap
    for at, kind, target in ((30, DELIVER, 1), (10, PROCESS, 1), (20, DELIVER, 2), (5, TIMER, 1), (15, DELIVER, 1)):
        events.push(at, kind, target, f"{kind}-{target}-{at}")
    taken = events.take(1, (DELIVER, PROCESS))
    assert [event[0] for event in taken] == [10, 15, 30]
    assert events.heap is heap and [payload for _, _, payload in drain(events)] == ["2-1-5", "0-2-20"]
    assert events.take(1, (DELIVER,)) == []


def test_take_payload_removes_that_very_object() -> None:
    events = Events(0)
    mine, equal = ["request"], ["request"]
    events.push(1, DELIVER, 0, mine)
    events.push(2, DELIVER, 0, equal)
    assert events.take_payload(mine) and not events.take_payload(mine)
    assert events.scheduled(DELIVER) == [(2, 1, DELIVER, 0, equal)]
