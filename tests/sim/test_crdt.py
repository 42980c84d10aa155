"""Counters and expiring keys in the simulator (``okapikv.sim.crdt``): sweeps over seeds with faults
(partitions, crashes, disk losses and repairs, failovers, clock steps and skew) end with every
counter reading the sum of its acknowledged increments in every DC and no GET reading a value its
server's clock had expired, and every counter's expiry that of its latest acknowledged EXPIRE,
while the causal checkers judge the rest of the mix; a merge that keeps one DC's contribution
(last-writer-wins), and an INCR that drops the expiry, are caught."""

from __future__ import annotations

import dataclasses

import pytest

from okapikv.core import counters
from okapikv.core.counters import Resolved
from okapikv.core.mvstore import Version
from okapikv.sim import SimConfig, reproduce_command, run_simulation
from okapikv.sim.config import FaultPlan, WorkloadMix

MIX = WorkloadMix(get=20.0, put=15.0, swap=5.0, delete=3.0, scan=3.0, rotx=20.0, incr=20.0, ttl=14.0)


def config(seed: int, protocol: str = "okapi", **changes: object) -> SimConfig:
    return dataclasses.replace(
        SimConfig(seed=seed, protocol=protocol, num_partitions=2, num_clients=6, duration_s=0.4, faults=True,
                  clock_skew_ms=10, liveness_s=0.2, mix=MIX, fault_plan=FaultPlan(lose_disk_share=0.3)),
        **changes)


def run_sweep(protocol: str, seeds: range) -> None:
    failures = []
    increments = reads = expiries = 0
    for seed in seeds:
        outcome = run_simulation(config(seed, protocol))
        if not outcome.ok:
            failures.append(f"{reproduce_command(config(seed, protocol))}: {outcome.anomalies[:3]}")
        crdt = outcome.result.crdt
        assert crdt is not None
        increments += sum(crdt.acked.values())
        reads += crdt.ttl_reads
        expiries += len(crdt.counter_expiries)
    assert failures == []
    assert increments > 100 and reads > 0 and expiries > 0  # the mix did exercise them all


def test_sweep_okapi_with_faults() -> None:
    run_sweep("okapi", range(1, 4))


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain"])
def test_longer_sweep_with_faults(protocol: str) -> None:
    run_sweep(protocol, range(5, 17))


def test_a_last_writer_wins_merge_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the newest visible counter version counts, as last-writer-wins would have it: the
    concurrent increments of the other DCs are lost, and the checker says so."""
    resolve = counters.resolve

    def newest_only(chain: list[Version], visible: object, num_dcs: int) -> Resolved:
        full = resolve(chain, visible, num_dcs)  # type: ignore[arg-type]
        if full.state is None:
            return full
        newest = full.contributors[0]
        assert newest.value is not None
        return Resolved(newest, counters.decode(newest.value), (newest,))

    monkeypatch.setattr(counters, "resolve", newest_only)
    outcome = run_simulation(config(1, faults=False))
    assert any(anomaly.name == "CounterMismatch" for anomaly in outcome.anomalies)


def test_an_expiry_ignored_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from okapikv.core import expiry

    view = expiry.view
    monkeypatch.setattr(expiry, "view", lambda version, now_us: view(version, 0))
    outcome = run_simulation(config(2, faults=False))
    assert any(anomaly.name == "ExpiredRead" for anomaly in outcome.anomalies)


def test_an_incr_that_drops_the_counters_expiry_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    increment = counters.increment

    def forgetful(*args: object) -> counters.CounterState | str:
        state = increment(*args)  # type: ignore[arg-type]
        if isinstance(state, str):
            return state
        return counters.CounterState(state.epoch, state.base, state.totals)

    monkeypatch.setattr(counters, "increment", forgetful)
    outcome = run_simulation(config(1, faults=False))
    assert any(anomaly.name == "CounterExpiryMismatch" for anomaly in outcome.anomalies)
