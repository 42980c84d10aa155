"""The simulator catches broken protocols within a few seeds (the point of having it)."""

from __future__ import annotations

import pytest
from broken_protocols import UnboundedClockServer  # (and registers okapi-eager)

from okapikv.sim import SimConfig, reproduce_command, run_simulation

CAUSAL_NAMES = {"WriteCORead", "WriteCOInitRead", "CyclicCF", "FracturedRead", "MonotonicWrites",
                "WritesFollowReads", "MonotonicReads", "ReadYourWrites"}


@pytest.mark.parametrize("protocol", ["okapi-eager", "eventual"])
def test_visibility_without_stabilization_is_caught(protocol: str) -> None:
    """Remote versions visible on arrival: a reader sees an update before a causal dependency that
    travels on another partition's (slower) link. Caught as causal and session anomalies."""
    caught: dict[int, set[str]] = {}
    for seed in range(1, 7):
        config = SimConfig(seed=seed, protocol=protocol, num_partitions=2, num_clients=6, duration_s=0.5,
                           faults=True)
        outcome = run_simulation(config)
        names = {a.name for a in outcome.anomalies}
        if names & CAUSAL_NAMES:
            caught[seed] = names
            assert "okapi sim --seed" in reproduce_command(config)
    assert len(caught) >= 2, f"{protocol} escaped the simulator: caught only in seeds {sorted(caught)}"


def test_the_correct_protocol_passes_the_same_seeds() -> None:
    for seed in range(1, 4):
        outcome = run_simulation(SimConfig(seed=seed, num_partitions=2, num_clients=6, duration_s=0.5, faults=True))
        assert outcome.ok, [str(a) for a in outcome.anomalies[:3]]


def test_the_sweep_catches_a_server_without_the_clock_offset_bound() -> None:
    """The CI sweep's settings (clock jumps, liveness after the heal) with every server taking any
    timestamp, however far ahead of its clock (``broken_protocols.UnboundedClockServer``): a clock an
    hour ahead drags the others' HLCs (``ClockDragged``) and remote visibility stalls
    (docs/protocol.md). The correct server passes the same seeds (``test_sweep``)."""
    caught: dict[int, set[str]] = {}
    for seed in range(1, 9):
        config = SimConfig(seed=seed, num_partitions=3, num_clients=6, duration_s=0.5, faults=True,
                           clock_skew_ms=10, rotx_partitions=1 + seed % 3, clock_jumps=True, liveness_s=0.25)
        outcome = run_simulation(config, server_factory=UnboundedClockServer)
        names = {a.name for a in outcome.anomalies}
        if names:
            caught[seed] = names
    assert len(caught) >= 3, f"the unbounded clock escaped the sweep: caught only in seeds {sorted(caught)}"
    assert all("ClockDragged" in names for names in caught.values())
    assert any("VisibilityStalled" in names for names in caught.values())
