"""Clocks far off in the simulator: a running server's clock jumping an hour ahead, a
restart with the clock stepped back an hour (its recovered clock bound ahead of it) or an hour
ahead, the liveness phase after the heal, and what the maximum clock offset makes of them: nobody
else's HLC moves, the far-ahead server's writes are held back (and marked so in the history), and
everything else stays live. Without the offset bound the same fault drags every HLC and stalls
remote visibility, which the checkers report.
"""

from __future__ import annotations

from dataclasses import replace

from broken_protocols import UnboundedClockServer

from okapikv.check.report import check_history
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import physical_of
from okapikv.sim import SimConfig, Simulation, reproduce_command
from okapikv.sim.engine import START_US, SimResult

HOUR_US = 3_600_000_000
OFFSET_US = 500_000
LIVE = SimConfig(num_partitions=2, num_clients=6, duration_s=0.3, clock_skew_ms=5, liveness_s=0.25, clock_jumps=True)


def run(action: str, factory: type[PartitionServer] = PartitionServer, seed: int = 1) -> tuple[Simulation, SimResult]:
    """LIVE with one clock fault on server dc0/p1 at 100 ms (no random faults)."""
    simulation = Simulation(replace(LIVE, seed=seed), server_factory=factory)
    faults = {
        "jump": lambda: simulation.nemesis.clock_step(1, HOUR_US),
        "restart_back": lambda: simulation.nemesis.crash(1, 50_000, clock_step_us=-HOUR_US),
        "restart_ahead": lambda: simulation.nemesis.crash(1, 50_000, clock_step_us=HOUR_US),
    }
    simulation.world.at(START_US + 100_000, faults[action])
    return simulation, simulation.run()


def hlc_ahead_us(simulation: Simulation, index: int) -> int:
    return physical_of(simulation.world.servers[index].hlc) - simulation.world.read_clock(index)


def test_a_clock_an_hour_ahead_drags_no_other_hlc_and_only_its_own_writes_are_held_back() -> None:
    simulation, result = run("jump")
    assert result.history is not None
    report = check_history(result.history)
    assert report.ok and not result.anomalies, report.summary_lines() + [str(a) for a in result.anomalies[:3]]
    assert "liveness" in report.checkers
    assert all(hlc_ahead_us(simulation, index) <= OFFSET_US for index in range(len(simulation.world.servers)))
    writes = [op for op in result.history.operations if op.is_write and op.ok and op.invoke_us > START_US + 100_000]
    ahead = [op for op in writes if op.server == (0, 1)]
    assert ahead and all(op.held_until_us is not None and op.held_until_us > simulation.world.now for op in ahead)
    assert all(op.held_until_us is None for op in writes if op.server != (0, 1))
    healed = [op for op in writes if op.invoke_us >= START_US + 300_000 and op.server != (0, 1)]
    assert healed and all(len(op.visible or {}) == 2 for op in healed)  # visible in both other DCs
    servers = simulation.world.retired + simulation.world.servers
    assert sum(s.stats.clock_offset_clamps for s in servers) > 0  # its heartbeats, held back
    assert sum(s.stats.clock_offset_refusals for s in servers) > 0  # sessions that read its writes


def test_a_restart_with_the_clock_stepped_back_continues_above_its_bound_and_is_fixed_at_the_heal() -> None:
    simulation, result = run("restart_back")
    descriptions = [f.description for f in result.faults]
    assert "crash dc0/p1 for 50 ms, restarting with its clock -3600 s" in descriptions
    assert "fix clock dc0/p1 +3600 s" in descriptions
    assert result.history is not None
    report = check_history(result.history)
    assert report.ok and not result.anomalies, report.summary_lines() + [str(a) for a in result.anomalies[:3]]
    # No timestamp issued twice: the new incarnation's writes are above the old one's.
    writes = [op for op in result.history.operations if op.is_write and op.ok and op.server == (0, 1)]
    before = [op.timestamp or 0 for op in writes if (op.complete_us or 0) < START_US + 100_000]
    after = [op.timestamp or 0 for op in writes if op.invoke_us > START_US + 150_000]
    assert before and after and min(after) > max(before)
    assert len({op.timestamp for op in writes}) == len(writes)


def test_a_restart_with_the_clock_an_hour_ahead_is_held_back_not_followed() -> None:
    simulation, result = run("restart_ahead")
    assert result.history is not None
    report = check_history(result.history)
    assert report.ok and not result.anomalies, report.summary_lines() + [str(a) for a in result.anomalies[:3]]
    assert all(hlc_ahead_us(simulation, index) <= OFFSET_US for index in range(len(simulation.world.servers))
               if index != 1)


def test_without_the_offset_bound_one_clock_an_hour_ahead_drags_every_hlc_and_stalls_visibility() -> None:
    # Whether a write after the heal is seen stalling depends on the run: seeds 2 and 3 of 1-4 show
    # it in this small world (every seed shows the dragged clocks).
    simulation, result = run("jump", UnboundedClockServer, seed=2)
    assert result.history is not None
    names = {a.name for a in result.anomalies} | {a.name for a in check_history(result.history).anomalies}
    assert {"ClockDragged", "VisibilityStalled"} <= names, names
    dragged = [index for index in range(len(simulation.world.servers)) if index != 1
               and hlc_ahead_us(simulation, index) > HOUR_US // 2]
    assert len(dragged) >= 3, dragged


def test_the_fault_schedule_draws_clock_jumps_and_the_reproduction_names_them() -> None:
    config = replace(LIVE, faults=True, duration_s=0.5, num_clients=2, record=False)
    described: list[str] = []
    for seed in range(1, 9):
        described += [f.description for f in Simulation(config.with_seed(seed)).run().faults]
    assert any("restarting with its clock -" in text for text in described)
    assert any("restarting with its clock +" in text for text in described)
    assert any(text.startswith("clock step") and float(text.split("+")[1].split()[0]) >= 60_000 for text in described)
    command = reproduce_command(replace(config, num_clients=6, record=True))
    assert "--clock-jumps" in command and "--liveness-s 0.25" in command and "plus" not in command
