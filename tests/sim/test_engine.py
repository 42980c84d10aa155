"""The simulator itself: determinism, the fault model, phases, and its internal invariant checks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest

from okapikv.check.history import history_events
from okapikv.check.report import check_history
from okapikv.core.config import CoreConfig
from okapikv.core.messages import Effect, Heartbeat, Message, ReplicateBatch, Send, Session
from okapikv.core.mvstore import Version
from okapikv.core.server import PartitionServer
from okapikv.core.session import Adoption
from okapikv.sim import SimConfig, Simulation, clients, run_simulation
from okapikv.sim.engine import START_US, SimResult

SMALL = SimConfig(num_partitions=2, num_clients=6, duration_s=0.3)


def _events(config: SimConfig) -> list[dict[str, object]]:
    result = Simulation(config).run()
    assert result.history is not None
    return list(history_events(result.history))


def test_same_seed_same_run_different_seed_different_run() -> None:
    config = replace(SMALL, faults=True, clock_skew_ms=5)
    first = _events(config)
    assert first == _events(config)
    assert first != _events(config.with_seed(2))


def test_a_clean_run_passes_every_checker_and_reads_every_key_everywhere() -> None:
    outcome = run_simulation(SMALL)
    assert outcome.ok, [str(a) for a in outcome.anomalies[:5]]
    result = outcome.result
    assert result.quiescent_us is not None and result.quiescent_us > result.fault_phase_end_us
    history = result.history
    assert history is not None
    finals = [op for op in history.operations if op.final]
    written = {op.key for op in history.operations if op.is_write}
    assert {(op.key, op.dc) for op in finals} == {(key, dc) for key in written for dc in range(3)}
    assert set(result.operations) == {"get", "put", "swap", "delete", "scan", "rotx"}
    assert outcome.report is not None and outcome.report.reads_checked > 0
    assert result.visibility_us, "remote visibility latency was measured"


def test_a_partitioned_dc_keeps_serving_under_okapi_and_catches_up_on_repair() -> None:
    """UST's availability (Okapi section 3.3): cut DC 2 off for the whole fault phase. Its clients
    keep completing operations (no wait), nothing it writes is visible elsewhere meanwhile, and
    after the repair every DC converges."""
    simulation = Simulation(replace(SMALL, duration_s=0.4))
    simulation.world.network.cut_dc(2)  # from the start, repaired at the heal
    simulation.nemesis.undo.append(lambda: simulation.world.network.repair_dc(2))
    result = simulation.run()
    history = result.history
    assert history is not None
    end = START_US + result.fault_phase_end_us
    in_dc2 = [op for op in history.operations if op.dc == 2 and not op.final and op.invoke_us < end - 100_000]
    assert in_dc2 and all(op.status == "ok" for op in in_dc2)
    written_in_2 = {op.value for op in in_dc2 if op.f in ("put", "swap")}
    seen_elsewhere = {
        op.read for op in history.operations if op.dc != 2 and not op.final and op.complete_us is not None
        and op.complete_us < end
    }
    assert not written_in_2 & seen_elsewhere
    from okapikv.check.report import check_history

    assert check_history(history).ok


def test_a_pause_queues_messages_and_processes_them_on_resume() -> None:
    simulation = Simulation(SMALL)
    simulation.world.at(START_US + 50_000, lambda: simulation.nemesis.pause(1, 100_000))
    result = simulation.run()
    assert [f.description for f in result.faults][:2] == ["pause dc0/p1 for 100 ms", "resume dc0/p1"]
    assert not simulation.world.inbox[1]
    history = result.history
    assert history is not None
    # DC 0's two clients soon wait on the paused partition (directly or through a snapshot's slice)
    # and complete only once it restarts; nothing completes at the paused partition meanwhile but
    # what it had answered before (a reply on its way, at most the LAN delay)
    crash, restart = START_US + 50_000, START_US + 150_000
    before_restart = sorted((op for op in history.operations if op.dc == 0 and op.invoke_us < restart),
                            key=lambda op: op.invoke_us)
    stuck = {op.process: op for op in before_restart}  # each client's last operation invoked before it
    assert len(stuck) == 2
    assert all(op.complete_us is not None and op.complete_us >= restart for op in stuck.values())
    assert any(op.server == (0, 1) for op in stuck.values())
    assert not [op for op in history.operations
                if op.server == (0, 1) and op.complete_us is not None
                and crash + SMALL.lan_us[1] < op.complete_us < restart]


def _crash_run(factory: type[PartitionServer] = PartitionServer) -> tuple[Simulation, SimResult]:
    simulation = Simulation(SMALL, server_factory=factory)
    simulation.world.at(START_US + 150_000, lambda: simulation.nemesis.crash(1, 60_000))
    return simulation, simulation.run()


def test_a_crash_loses_the_memory_not_the_disk_and_the_restart_catches_up() -> None:
    simulation = Simulation(SMALL)
    original = simulation.world.servers[1]
    resent: list[Message] = []
    resend = simulation.world.network.resend

    def recording(source: int, destination: int, messages: list[Message]) -> None:
        resent.extend(messages)
        resend(source, destination, messages)

    simulation.world.network.resend = recording  # type: ignore[method-assign]
    simulation.world.at(START_US + 150_000, lambda: simulation.nemesis.crash(1, 60_000))
    result = simulation.run()
    # what peers had sent it and it had not handled was resent to the new incarnation, in order
    assert resent and simulation.world.network.unacked[1] == {}
    assert {type(m).__name__ for m in resent} >= {"Heartbeat", "ReplicateBatch"}
    assert [f.description for f in result.faults][:2] == ["crash dc0/p1 for 60 ms", "restart dc0/p1"]
    restarted = simulation.world.servers[1]
    assert restarted is not original and simulation.world.retired == [original]
    # what it had made durable came back (every version it held at the crash, as far as GC since allows)
    # and it asked both replicas for what its lost link queues may have held
    assert restarted.stats.catch_up_requests_sent >= 2 and restarted.catching_up == ()
    history = result.history
    assert history is not None
    restart = START_US + 210_000
    # requests lost with it were retried by their clients and served by the new incarnation
    across = [op for op in history.operations if op.server == (0, 1) and op.invoke_us < restart
              and op.complete_us is not None and op.complete_us > restart]
    assert across and all(op.status == "ok" for op in across)
    assert simulation.world.network.replication_inflight == 0 and not simulation.world.network.held
    assert check_history(history).ok and not result.anomalies, [str(a) for a in result.anomalies[:3]]
    # its counters before the crash still count
    assert result.server_operations[0] == (simulation.world.servers[0].stats.operations + original.stats.operations
                                           + restarted.stats.operations)
    assert original.stats.operations.total() > 0 and restarted.stats.operations.total() > 0


class AmnesiacServer(PartitionServer):
    """A durability bug: the restart recovers the vectors but none of the versions."""

    def restore(self, versions: Iterable[tuple[bytes, Version]], **vectors: Any) -> None:
        super().restore((), **vectors)


def test_a_restart_that_loses_the_disk_is_caught() -> None:
    _, result = _crash_run(AmnesiacServer)
    assert result.history is not None
    report = check_history(result.history)
    assert not report.ok
    assert {"Divergence", "LostUpdate"} & {a.name for a in report.anomalies}, report.summary_lines()


def _disk_loss_run(factory: type[PartitionServer] = PartitionServer) -> tuple[Simulation, SimResult]:
    simulation = Simulation(SMALL, server_factory=factory)
    simulation.world.at(START_US + 150_000, lambda: simulation.nemesis.crash(1, 60_000, lose_disk=True))
    return simulation, simulation.run()


def test_a_crash_that_loses_the_disk_is_repaired_from_the_replicas() -> None:
    simulation, result = _disk_loss_run()
    assert "restart dc0/p1 on an empty disk, repairing" in [f.description for f in result.faults]
    restarted = simulation.world.servers[1]
    assert restarted.repairing is None and restarted.stats.repairs_completed == 1
    assert restarted.stats.repair_local_received > 0  # its own versions came back from the replicas
    assert result.history is not None
    assert check_history(result.history).ok and not result.anomalies, [str(a) for a in result.anomalies[:3]]


class PlainCatchUp(PartitionServer):
    """A repair bug: a server that lost its disk catches up as after a plain crash (its replicas
    send only their own DCs' updates, so its own versions never come back)."""

    def start_catch_up(self, repair: Any = None) -> list[Effect]:
        return super().start_catch_up()


def test_a_repair_that_forgets_the_servers_own_versions_is_caught() -> None:
    _, result = _disk_loss_run(PlainCatchUp)
    assert "restart dc0/p1 on an empty disk, repairing" in [f.description for f in result.faults]
    assert result.history is not None
    report = check_history(result.history)
    assert not report.ok, report.summary_lines()


def _long_crash_run() -> tuple[Simulation, SimResult]:
    """DC 0's partition 0 down for 400 ms. Clients think up to 50 ms between operations, so some
    sessions of DC 0 depend on nothing recent enough to be missing elsewhere: those can move (a
    session that just wrote in DC 0 cannot until DC 0 stabilizes again, after the restart)."""
    simulation = Simulation(replace(SMALL, duration_s=0.8, think_us_max=50_000))
    simulation.world.at(START_US + 250_000, lambda: simulation.nemesis.crash(0, 400_000))
    return simulation, simulation.run()


def test_a_client_whose_server_stays_down_moves_to_another_dc_with_its_guarantees() -> None:
    simulation, result = _long_crash_run()
    moves = [f.description for f in result.faults if "fails over" in f.description]
    assert moves and simulation.clients.failovers == len(moves) and all("dc0 -> " in move for move in moves)
    history = result.history
    assert history is not None
    moved = {op.process for op in history.operations if op.process in {c.process for c in simulation.clients.clients
                                                                       if c.index % 3 == 0} and op.dc != 0}
    assert moved  # clients of DC 0 went on in another DC
    assert check_history(history).ok and not result.anomalies, [str(a) for a in result.anomalies[:3]]


def test_a_failover_that_forgets_the_session_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def forgetful(session: Session, *, from_dc: int, here_dc: int, stable: tuple[int, ...]) -> Adoption:
        return Adoption(True, Session(stable, 0), tuple(0 for _ in stable))  # drops the session's writes

    monkeypatch.setattr(clients, "adopt", forgetful)
    _, result = _long_crash_run()
    assert result.history is not None
    names = {a.name for a in check_history(result.history).anomalies}
    assert names & {"ReadYourWrites", "MonotonicReads", "MonotonicWrites", "WritesFollowReads"}, names


def test_a_slow_servers_backlog_is_served_at_full_speed_once_it_recovers() -> None:
    simulation = Simulation(SMALL)
    simulation.world.at(START_US + 50_000, lambda: simulation.nemesis.slow(1, 100_000, 20_000))
    backlog: list[int] = []

    def probe(into: list[int]) -> None:
        into.append(simulation.world.busy_until[1] - simulation.world.now)

    simulation.world.at(START_US + 149_999, lambda: probe(backlog))
    simulation.world.at(START_US + 150_001, lambda: probe(backlog))
    result = simulation.run()
    assert "recover dc0/p1" in [f.description for f in result.faults]
    before, after = backlog
    assert before > 1_000_000  # 20 ms a message for 100 ms: seconds of backlog...
    assert after <= 0  # ...served at once at full speed, in order
    assert result.quiescent_us is not None and not result.anomalies


def test_held_messages_keep_fifo_order_on_repair() -> None:
    simulation = Simulation(replace(SMALL, num_clients=3))
    network = simulation.world.network
    network.cut_link(0, 1)
    assert simulation.world.now == START_US
    for number in range(5):
        network.send(0, 2, Heartbeat(simulation.world.servers[0].id, number))
    assert len(network.held[2]) == 5
    network.repair_link(0, 1)
    delivered = sorted((at, seq, payload) for at, seq, kind, target, payload in simulation.world.heap
                       if target == 2 and isinstance(payload, Heartbeat))
    assert [p.timestamp for _, _, p in delivered] == [0, 1, 2, 3, 4]


class HeartbeatFirstServer(PartitionServer):
    """The ordering bug of an earlier core: a timer that resumes a parked write and sends a heartbeat
    in the same call put the heartbeat (covering the write) before the write's replication batch."""

    def on_timer(self, now_us: int) -> list[Effect]:
        effects = super().on_timer(now_us)
        heartbeats = [e for e in effects if isinstance(e, Send) and isinstance(e.message, Heartbeat)]
        batches = [e for e in effects if isinstance(e, Send) and isinstance(e.message, ReplicateBatch)]
        if batches:
            top = max(u.timestamp for e in batches for u in e.message.updates)  # type: ignore[union-attr]
            for peer in self.peers:
                heartbeats.append(Send(peer, Heartbeat(self.id, top)))
        others = [e for e in effects if e not in heartbeats and e not in batches]
        return heartbeats + batches + others


def test_replication_promise_invariant_catches_a_heartbeat_overtaking_an_update() -> None:
    config = replace(SMALL, protocol="cure", clock_skew_ms=10)
    outcome = run_simulation(config, server_factory=HeartbeatFirstServer)
    assert "ReplicationPromise" in {a.name for a in outcome.anomalies}


def test_core_config_is_built_from_the_sim_config() -> None:
    seen: list[CoreConfig] = []

    def factory(config: CoreConfig) -> PartitionServer:
        seen.append(config)
        return PartitionServer(config)

    Simulation(replace(SMALL, piggyback_usv=True), server_factory=factory)
    assert len(seen) == 6 and all(c.piggyback_usv and c.num_partitions == 2 for c in seen)


def test_cure_read_transactions_finish_under_large_skew() -> None:
    """Regression (found by this simulator): a Cure slice that waits for its clock longer than a
    stabilization period used to fall below the GC horizon, be answered too_old, retried with a
    snapshot that waits as long again, forever (seed 1 at 30 ms skew never finished). Snapshot reads
    in progress now hold the horizon back."""
    for seed in (1, 2):
        config = replace(SMALL, seed=seed, protocol="cure", clock_skew_ms=30)
        outcome = run_simulation(config)
        assert outcome.ok, [str(a) for a in outcome.anomalies[:3]]
        assert outcome.result.snapshot_retries == 0
        assert outcome.result.waits["tx_clock"].count > 0
