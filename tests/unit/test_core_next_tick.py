"""Cure's and GentleRain's writes take one clock microsecond each (``physical_put_timestamp``), so a
batch of n writes at one clock reading leaves n - 1 waiting for the next microseconds. They wait in
``next_tick``, oldest first, and each microsecond releases the oldest with one handler run: a
backlog drains in n handler runs, not n per microsecond (a pass over every waiting write at each
microsecond made a backlog of 1,000 cost about a millisecond per released write)."""

from __future__ import annotations

from typing import Any

import pytest

from okapikv.core import server as server_module
from okapikv.core.config import CoreConfig
from okapikv.core.messages import PutRequest, Session, WriteReply
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import LOGICAL_BITS

WRITES = 40
NOW = 10_000_000


class CountingProtocol:
    """The server's protocol, counting the timestamps it is asked for (one per handler run of a write)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.asked = 0

    def assign_timestamp(self, **arguments: int) -> Any:
        self.asked += 1
        return self.inner.assign_timestamp(**arguments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("protocol", ["cure", "gentlerain"])
def test_a_backlog_of_writes_goes_one_per_microsecond_oldest_first_one_handler_run_each(
        protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    server = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=3, num_partitions=1, protocol=protocol))
    server.on_timer(NOW - 10)  # its heartbeat takes NOW - 10: the batch finds its microsecond free
    counting = CountingProtocol(server.protocol)
    server.protocol = counting  # type: ignore[assignment]
    first = server.handle_batch([PutRequest(index + 1, b"k%02d" % index, b"v", Session((0, 0, 0), 0))
                                 for index in range(WRITES)], NOW)
    assert [effect.reply.request_id for effect in first
            if isinstance(getattr(effect, "reply", None), WriteReply)] == [1]
    assert server.parked_count == WRITES - 1
    rebuilt = 0
    parked_type = server_module.Parked

    def counted(*arguments: Any) -> Any:
        nonlocal rebuilt
        rebuilt += 1
        return parked_type(*arguments)

    monkeypatch.setattr(server_module, "Parked", counted)
    released: list[int] = []
    for tick in range(1, WRITES):
        assert server.next_deadline() == NOW + tick  # the next microsecond, met by the driver's spin
        replies = [effect.reply.request_id for effect in server.on_timer(NOW + tick)
                   if isinstance(getattr(effect, "reply", None), WriteReply)]
        assert len(replies) == 1, (tick, replies)  # one write per microsecond
        released += replies
    assert released == list(range(2, WRITES + 1))  # oldest first
    assert server.parked_count == 0
    assert rebuilt == 0  # no waiting write is looked at, let alone rebuilt, before its turn
    # one run for each write at the batch (the first went, the others parked), one at each release
    assert counting.asked == WRITES + (WRITES - 1)
    waits = server.stats.waits["clock_tick"]
    assert waits.count == WRITES - 1 and waits.max_us == WRITES - 1


@pytest.mark.parametrize("protocol", ["cure", "gentlerain"])
def test_once_the_clock_has_moved_past_a_batch_its_waiting_writes_go_in_one_call_each_at_its_own_microsecond(
        protocol: str) -> None:
    """A server that reads the clock per request would have given a batch's writes the successive
    microseconds it took to handle them; the driver reads it once per batch, so the writes that
    found their microsecond taken go at the next free ones as soon as the clock is past them."""
    server = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1, protocol=protocol))
    server.on_timer(NOW - 10)
    server.handle_batch([PutRequest(index + 1, b"k%02d" % index, b"v", Session((0,), 0))
                         for index in range(WRITES)], NOW)
    later = NOW + 1_000  # the batch's handling took a millisecond
    replies = [effect.reply for effect in server.on_timer(later)
               if isinstance(getattr(effect, "reply", None), WriteReply)]
    assert [reply.request_id for reply in replies] == list(range(2, WRITES + 1))
    stamps = [server.store.newest(b"k%02d" % index, lambda version: True).timestamp >> LOGICAL_BITS
              for index in range(WRITES)]
    assert stamps == [NOW + index for index in range(WRITES)]  # one microsecond each, none ahead of the clock
    waits = server.stats.waits["clock_tick"]
    assert waits.count == WRITES - 1 and waits.max_us == WRITES - 1  # each waited for its microsecond only
    assert server.parked_count == 0 and server.next_deadline() > later
