"""What the benchmark's parent process and its load processes send each other (over a pipe).

Frozen, picklable dataclasses only: a spawned process receives them by value. The conversation
(``driver`` is the parent, ``worker`` the load process):

1. parent -> ``Prepare`` (the run and this worker's share of sessions); the worker connects,
   builds its sessions and answers ``Ready`` (or ``Failed`` with the traceback);
2. parent -> ``Go(start_at)``, a wall-clock instant common to every worker, so the warm-up and
   measured windows line up across processes and with the parent's server-stats samples;
3. the worker runs its sessions, streams progress counts on a shared queue, and answers
   ``WorkerResult`` (latency histograms in HdrHistogram's encoded form, counts, errors, CPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from okapikv.bench.engine.adapters import TargetSpec
from okapikv.bench.engine.workloads import WorkloadConfig


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One measured run (or the load phase, ``phase="load"``) as every worker receives it."""

    target: TargetSpec
    workload: WorkloadConfig
    clients: int
    warmup_s: float = 0.5
    duration_s: float = 2.0
    max_ops_per_session: int = 10_000_000
    phase: str = "run"  # run | load
    seed: int = 1


@dataclass(frozen=True, slots=True)
class Prepare:
    spec: RunSpec
    worker_index: int
    num_workers: int
    sessions: int
    session_offset: int


@dataclass(frozen=True, slots=True)
class Go:
    start_at: float  # time.time() of the start of the warm-up, common to all workers


@dataclass(frozen=True, slots=True)
class Ready:
    worker_index: int


@dataclass(frozen=True, slots=True)
class Failed:
    worker_index: int
    message: str


@dataclass(slots=True)
class WorkerResult:
    worker_index: int
    histograms: dict[str, bytes] = field(default_factory=dict)
    operations: int = 0  # completed inside the measured window
    completed: int = 0  # completed in total (warm-up and tail included)
    errors: dict[str, int] = field(default_factory=dict)
    last_error: str = ""
    cpu_s: float = 0.0  # this process's CPU time during the measured window
    window_s: float = 0.0
