"""The CI sweep: 20 seeds with faults (partitions, crashes, slow servers, clock steps and drift,
10 ms clock skew, replication links between DCs gone silent: ``SimConfig.silent_links``) for each
protocol, every history checked, the 0.25 s after the heal by the liveness
checker too. Okapi and Cure also get the clock jumps (a clock an hour ahead, a restart with the clock
an hour back or ahead: ``SimConfig.clock_jumps``); GentleRain does not: its RO-TX waits until the
DC's stable time, the minimum of every clock, reaches the session's dependencies, so behind a clock
an hour ahead it waits an hour (the baseline's design, docs/operations.md).

Longer sweeps (not in CI), one protocol at a time::

    okapi sim --seeds 1..500 --faults --partitions 3 --clients 9 --duration-s 1 --clock-skew-ms 10 \\
              --protocol okapi        # then cure, gentlerain
"""

from __future__ import annotations

import pytest

from okapikv.sim import SimConfig, reproduce_command, run_simulation
from okapikv.sim.config import FaultPlan

SEEDS = range(1, 21)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("protocol", "piggyback", "seeds", "jumps"),
    [("okapi", False, SEEDS, True), ("okapi", True, range(1, 11), True), ("cure", False, SEEDS, True),
     ("gentlerain", False, SEEDS, False)],
    ids=["okapi", "okapi-piggyback-usv", "cure", "gentlerain"],
)
def test_sweep_with_faults(protocol: str, piggyback: bool, seeds: range, jumps: bool) -> None:
    _sweep(protocol, piggyback, seeds, jumps)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["okapi", "cure"])
def test_sweep_with_crashes_that_lose_the_disk(protocol: str) -> None:
    """Every crash loses the server's disk when that loses nothing a repair cannot bring back: the
    restart repairs from the replicas (``FaultPlan.lose_disk_share``), with the clock jumps too."""
    _sweep(protocol, False, range(1, 11), True, FaultPlan(lose_disk_share=1.0))


@pytest.mark.slow
def test_sweep_with_large_scans() -> None:
    """Bursts of whole-range SCANs that cost their partitions time per key (``SimConfig.large_scans``,
    over 128 keys per partition), with the other faults: every page answered, no probe GET starved,
    nothing pending once the scanners finish or give up (``okapikv.sim.scans``)."""
    _sweep("okapi", False, range(1, 9), True, large_scans=True)


def _sweep(protocol: str, piggyback: bool, seeds: range, jumps: bool, plan: FaultPlan | None = None, *,
           large_scans: bool = False) -> None:
    failures = []
    operations = 0
    for seed in seeds:
        config = SimConfig(seed=seed, protocol=protocol, num_partitions=3, num_clients=6, duration_s=0.5,
                           faults=True, clock_skew_ms=10, piggyback_usv=piggyback, rotx_partitions=1 + seed % 3,
                           clock_jumps=jumps, silent_links=True, liveness_s=0.25, fault_plan=plan or FaultPlan(),
                           large_scans=large_scans, keys_per_partition=128 if large_scans else 32)
        outcome = run_simulation(config)
        operations += sum(outcome.result.operations.values())
        if not outcome.ok:
            first = "; ".join(str(a)[:300] for a in outcome.anomalies[:2])
            failures.append(f"{reproduce_command(config)}\n    {first}")
    assert not failures, "\n".join(failures)
    assert operations > 100 * len(seeds)
