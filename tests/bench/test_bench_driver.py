"""The multi-process closed-loop driver, against the in-process memory target (no servers)."""

from __future__ import annotations

from okapikv.bench.engine.adapters import TargetSpec
from okapikv.bench.engine.driver import WorkerPool
from okapikv.bench.engine.histograms import merge_encoded
from okapikv.bench.engine.messages import RunSpec
from okapikv.bench.engine.results import LatencySummary
from okapikv.bench.engine.workloads import WorkloadConfig


def test_spawned_workers_run_bounded_closed_loops_and_merge_histograms() -> None:
    calls: list[str] = []
    progress: list[int] = []
    with WorkerPool(2) as pool:
        load = pool.run(RunSpec(TargetSpec("memory"), WorkloadConfig("e", records=500), clients=4, warmup_s=0.0,
                                duration_s=30.0, phase="load"))
        # each worker has its own memory store; each session loads its share exactly once
        assert sum(worker.completed for worker in load.workers) == 500
        # bounded by count: 5 sessions x 50 operations end long before the 20 s window
        counted = pool.run(RunSpec(TargetSpec("memory"), WorkloadConfig("a", records=500), clients=5, warmup_s=0.0,
                                   duration_s=20.0, max_ops_per_session=50),
                           at_measure_start=lambda: calls.append("start"), at_measure_end=lambda: calls.append("end"))
        assert sum(worker.completed for worker in counted.workers) == 5 * 50
        assert calls == ["start", "end"]  # the stats hooks still pair up
        # bounded by time
        spec = RunSpec(TargetSpec("memory"), WorkloadConfig("f", records=500), clients=5, warmup_s=0.05,
                       duration_s=0.4)
        outcome = pool.run(spec, on_progress=lambda elapsed, completed, window: progress.append(completed))
    assert len(outcome.workers) == 2
    completed = sum(worker.completed for worker in outcome.workers)
    assert completed > 0
    assert sum(worker.operations for worker in outcome.workers) <= completed
    assert not any(worker.errors for worker in outcome.workers)
    kinds = {kind for worker in outcome.workers for kind in worker.histograms}
    assert {"all", "read", "rmw", "update"} <= kinds
    everything = LatencySummary.of(merge_encoded(worker.histograms["all"] for worker in outcome.workers))
    assert everything.count == sum(worker.operations for worker in outcome.workers)
    assert progress and progress[-1] <= completed
