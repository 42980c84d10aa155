"""Idle pacing (``okapikv.core.pacing``): the backoff decisions, driven with explicit clock readings.

``Pacing`` alone, then a ``PartitionServer``'s timers and effects: idle only after ``idle_after_us``
without activity and with nothing waiting; one tick per idle interval for the round, the heartbeat
and the GC pass; a client write, a remote update or a wake-up call snaps the server back at once,
and writes and remote updates wake the DC's other partitions."""

from __future__ import annotations

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.messages import (
    Effect,
    Heartbeat,
    PutRequest,
    ReplicateBatch,
    Send,
    ServerId,
    Session,
    Update,
    VvReport,
)
from okapikv.core.pacing import Pacing
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack

T0 = 1_000_000
AFTER_US = 1_000_000
INTERVAL_US = 100_000


def config(**changes: object) -> CoreConfig:
    fields: dict[str, object] = {"dc": 0, "partition": 1, "num_dcs": 2, "num_partitions": 2,
                                 "idle_after_us": AFTER_US, "idle_interval_us": INTERVAL_US}
    fields.update(changes)
    return CoreConfig(**fields)  # type: ignore[arg-type]


def sends(effects: list[Effect]) -> list[Send]:
    return [effect for effect in effects if isinstance(effect, Send)]


def idle_server(**changes: object) -> tuple[PartitionServer, int]:
    """A server driven by its own deadlines until it has backed off; (server, now)."""
    server = PartitionServer(config(**changes))
    now = T0
    server.on_timer(now)
    while not server.pacing.idle:
        now = server.next_deadline()
        server.on_timer(now)
    return server, now


# ---------------------------------------------------------------- Pacing alone


def test_pacing_goes_idle_only_after_the_quiet_spell_and_snaps_back_at_activity() -> None:
    pacing = Pacing(config())
    assert not pacing.settle(T0, waiting=False)  # the first timer starts the spell
    assert not pacing.settle(T0 + AFTER_US - 1, waiting=False)
    assert pacing.settle(T0 + AFTER_US, waiting=False) and pacing.tick_us == T0 + AFTER_US
    assert pacing.activity(T0 + AFTER_US + 5)  # snapped back ...
    assert not pacing.activity(T0 + AFTER_US + 6)  # ... once
    assert not pacing.settle(T0 + 2 * AFTER_US, waiting=False)  # the spell restarts at the activity
    assert pacing.settle(T0 + 2 * AFTER_US + 6, waiting=False)


def test_pacing_stays_busy_while_something_waits_and_never_backs_off_when_off() -> None:
    pacing = Pacing(config())
    pacing.settle(T0, waiting=False)
    assert not pacing.settle(T0 + 5 * AFTER_US, waiting=True)
    assert not pacing.settle(T0 + 6 * AFTER_US - 1, waiting=False)
    off = Pacing(config(idle_after_us=0))
    off.settle(T0, waiting=False)
    assert not off.settle(T0 + 100 * AFTER_US, waiting=False)
    assert not off.call_due(T0)


def test_wake_up_calls_go_when_snapping_back_and_at_most_every_half_spell_while_busy() -> None:
    pacing = Pacing(config())
    assert pacing.call_due(T0)  # never called yet
    assert not pacing.call_due(T0 + AFTER_US // 2 - 1)
    assert pacing.call_due(T0 + AFTER_US // 2)
    pacing.idle = True
    assert pacing.call_due(T0 + AFTER_US // 2 + 1)  # snapping back always calls


def test_the_idle_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="idle_after_us must not be negative"):
        config(idle_after_us=-1)
    with pytest.raises(ValueError, match="must not speed up"):
        config(idle_interval_us=1_000)
    with pytest.raises(ValueError, match="below read_timeout_us"):
        config(idle_interval_us=6_000_000)


# ---------------------------------------------------------------- the server


def test_an_idle_server_runs_one_tick_per_interval_with_the_round_and_the_heartbeat() -> None:
    server, now = idle_server()
    assert now >= T0 + AFTER_US and server.stats.idle_spells == 1
    tick = server.next_deadline()
    assert tick == now + INTERVAL_US
    assert server.on_timer(tick - 1) == []  # nothing between ticks
    effects = server.on_timer(tick)
    kinds = {(type(send.message), send.destination) for send in sends(effects)}
    assert kinds == {(VvReport, ServerId(0, 0)), (Heartbeat, ServerId(1, 1))}
    assert server.next_deadline() == tick + INTERVAL_US
    assert server.vv[0] == pack(tick)


def test_a_client_write_snaps_back_and_wakes_the_other_partitions_of_the_dc() -> None:
    server, now = idle_server()
    write_at = now + 30_000
    effects = server.handle(PutRequest(1, b"k", b"v", Session((0, 0), 0)), write_at)
    assert server.woke and not server.pacing.idle and server.stats.idle_wakes == 1
    calls = [send for send in sends(effects) if isinstance(send.message, Heartbeat)]
    assert [call.destination for call in calls] == [ServerId(0, 0)]  # the DC's other partition
    assert any(isinstance(send.message, ReplicateBatch) for send in sends(effects))
    assert server.next_deadline() == write_at  # the round is due at once
    assert any(isinstance(send.message, VvReport) for send in sends(server.on_timer(write_at)))
    later = server.handle(PutRequest(2, b"k", b"w", Session((0, 0), 0)), write_at + 1)
    assert not server.woke and not [send for send in sends(later) if isinstance(send.message, Heartbeat)]


def test_a_remote_update_snaps_back_and_wakes_the_dc_but_a_duplicate_does_not() -> None:
    server, now = idle_server()
    update = Update(b"k", b"v", pack(now - 5_000), 1, (0, 0))
    effects = server.handle(ReplicateBatch(ServerId(1, 1), (update,)), now + 10)
    assert server.woke and [send.destination for send in sends(effects)] == [ServerId(0, 0)]
    again, now2 = idle_server()
    again.handle(ReplicateBatch(ServerId(1, 1), (update,)), now2 + 10)
    while not again.pacing.idle:
        now2 = again.next_deadline()
        again.on_timer(now2)
    assert sends(again.handle(ReplicateBatch(ServerId(1, 1), (update,)), now2 + 10)) == []
    assert not again.woke and again.pacing.idle  # a re-delivered duplicate changes nothing


def test_a_wake_up_call_snaps_back_announces_nothing_and_is_not_passed_on() -> None:
    server, now = idle_server()
    vv = list(server.vv)
    effects = server.handle(Heartbeat(ServerId(0, 0), pack(now + 400_000), None), now + 10)
    assert effects == [] and server.woke and not server.pacing.idle
    assert server.vv == vv  # a partition of the own DC promises nothing about this one's stream
    assert server.next_deadline() == now + 10
    heartbeats = [send for send in sends(server.on_timer(now + 10)) if isinstance(send.message, Heartbeat)]
    assert [send.destination for send in heartbeats] == [ServerId(1, 1)]  # at once, to the replica


def test_a_busy_server_keeps_the_configured_periods() -> None:
    server = PartitionServer(config(idle_after_us=0))
    now = T0
    for _ in range(500):
        server.on_timer(now)
        now = server.next_deadline()
    assert not server.pacing.idle and now - T0 < AFTER_US
