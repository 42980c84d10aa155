"""The simulator catches broken protocols within a few seeds (the point of having it)."""

from __future__ import annotations

import broken_protocols  # noqa: F401  (registers okapi-eager)
import pytest

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
