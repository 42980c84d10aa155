"""A snapshot read refused for its server's load (OVERLOADED: nothing ran) is retried after the
real clients' backoff (``okapikv.sim.clients``), not skipped: a skipped RO-TX hands its client to
the next operation, a PUT, and the run's throughput then counts PUTs of a mix that is not the
workload's. The paper experiments set the read bounds past any sweep's load
(``okapikv.sim.experiments.UNBOUNDED_READS``): the paper's servers queue such reads."""

from __future__ import annotations

from okapikv.sim.config import SimConfig
from okapikv.sim.cost import packaged_profile
from okapikv.sim.experiments import UNBOUNDED_READS, Plan, config_of, points
from okapikv.sim.runner import run_simulation


def gentlerain_under_load(max_concurrent_reads: int | None) -> SimConfig:
    # GentleRain's RO-TXs wait for their snapshot (a stabilization round): with 96 clients on 6
    # servers, far more reads wait at once than a bound of 2 lets a server coordinate
    return SimConfig(seed=1, protocol="gentlerain", num_dcs=3, num_partitions=2, num_clients=96, duration_s=0.5,
                     warmup_s=0.1, think_us_max=0, workload="paper", rotx_partitions=2,
                     cost=packaged_profile("python-quiet"), record=False, invariants=False, drain=False,
                     max_concurrent_reads=max_concurrent_reads)


def test_refused_reads_are_retried_and_the_mix_stays_the_workloads() -> None:
    result = run_simulation(gentlerain_under_load(2), check=False).result
    refused = sum(int(stats["reads_refused"]) for stats in result.server_stats)  # type: ignore[call-overload]
    assert refused > 0 and result.overload_retries == refused
    assert not result.window_failed
    # each client alternates RO-TX and PUT: the counts in the window differ by a client's one at most
    rotx, put = len(result.latencies_us["rotx"]), len(result.latencies_us["put"])
    assert rotx > 0 and abs(rotx - put) <= 96, (rotx, put)


def test_without_refusals_nothing_is_retried() -> None:
    result = run_simulation(gentlerain_under_load(None), check=False).result
    assert result.overload_retries == 0 and not result.window_failed
    assert sum(int(stats["reads_refused"]) for stats in result.server_stats) == 0  # type: ignore[call-overload]


def test_the_paper_experiments_lift_the_read_bounds() -> None:
    plan = Plan(partitions=2)
    point = next(iter(points("fig3", plan)))
    config = config_of(point, plan, packaged_profile("python-quiet"), 96, checked=False)
    assert config.max_concurrent_reads == UNBOUNDED_READS and config.max_read_items is not None
    assert config.max_read_items >= UNBOUNDED_READS
