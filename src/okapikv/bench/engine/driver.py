"""The closed-loop load driver: several spawned OS processes, each running many asyncio sessions.

Why processes: the client library spends most of an operation in Python (protobuf, asyncio), so
one process saturates one core long before the servers do; threads would measure the GIL. Why
``spawn``: a forked child would inherit the parent's gRPC state and threads, which gRPC forbids.

``WorkerPool`` keeps the load processes (``worker.worker_main``) alive across runs (spawning one
costs about a second) and drives the Prepare / Ready / Go / WorkerResult conversation described in
``messages``. Everything is bounded: the wait for workers to be ready, each run by a deadline past
its window (workers that overrun are killed and the run fails with ``BenchError``).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from okapikv.bench.engine.errors import BenchError
from okapikv.bench.engine.messages import Failed, Go, Prepare, Ready, RunSpec, WorkerResult
from okapikv.bench.engine.worker import READY_TIMEOUT_S, worker_main


@dataclass(slots=True)
class RunOutcome:
    """The merged results of every worker for one run."""

    spec: RunSpec
    workers: list[WorkerResult]
    start_at: float
    stats_before: dict[str, Any] = field(default_factory=dict)
    stats_after: dict[str, Any] = field(default_factory=dict)


class _Worker:
    def __init__(self, context: Any, progress: Any, index: int) -> None:
        parent, child = context.Pipe(duplex=True)
        self.connection: multiprocessing.connection.Connection = parent
        self.process = context.Process(
            target=worker_main, args=(child, progress, index), name=f"okapi-bench-{index}", daemon=True
        )
        self.process.start()
        child.close()
        self.index = index


def default_processes(clients: int) -> int:
    """Load processes for ``clients`` sessions: at least two (so the driver is never one core's GIL),
    at most half the cores (the servers need the rest), never more than there are sessions."""
    cores = os.cpu_count() or 2
    return max(1, min(clients, max(2, cores // 2)))


ProgressCallback = Callable[[float, int, int], None]  # (elapsed_s, completed, in_window)
Hook = Callable[[], None]


class WorkerPool:
    """Long-lived spawned load processes, reused across runs (spawning costs ~1 s each)."""

    def __init__(self, max_processes: int) -> None:
        self.max_processes = max(1, max_processes)
        self._context = multiprocessing.get_context("spawn")
        self._progress = self._context.Queue()
        self._workers: list[_Worker] = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure(self, count: int) -> list[_Worker]:
        alive = [worker for worker in self._workers if worker.process.is_alive()]
        if len(alive) != len(self._workers):
            for worker in self._workers:
                if not worker.process.is_alive():
                    worker.connection.close()
            self._workers = alive
        while len(self._workers) < count:
            self._workers.append(_Worker(self._context, self._progress, len(self._workers)))
        for position, worker in enumerate(self._workers):
            worker.index = position
        return self._workers[:count]

    def close(self) -> None:
        for worker in self._workers:
            with contextlib.suppress(Exception):
                worker.connection.send(None)
        for worker in self._workers:
            worker.process.join(timeout=3.0)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(timeout=2.0)
            worker.connection.close()
        self._workers = []
        with contextlib.suppress(Exception):
            self._progress.close()
            self._progress.join_thread()

    def _kill(self, workers: list[_Worker]) -> None:
        for worker in workers:
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(timeout=2.0)
            worker.connection.close()
        self._workers = [worker for worker in self._workers if worker not in workers]

    def _drain_progress(self, totals: dict[int, tuple[int, int]]) -> None:
        while True:
            try:
                index, completed, in_window = self._progress.get_nowait()
            except (queue.Empty, OSError, ValueError):
                return
            totals[index] = (completed, in_window)

    def run(
        self,
        spec: RunSpec,
        *,
        processes: int | None = None,
        on_progress: ProgressCallback | None = None,
        at_measure_start: Hook | None = None,
        at_measure_end: Hook | None = None,
    ) -> RunOutcome:
        count = max(1, min(processes or self.max_processes, self.max_processes, spec.clients))
        workers = self._ensure(count)
        base, extra = divmod(spec.clients, count)
        offset = 0
        for position, worker in enumerate(workers):
            share = base + (1 if position < extra else 0)
            worker.connection.send(Prepare(spec, position, count, share, offset))
            offset += share
        self._drain_progress({})
        self._await_all(workers, Ready, READY_TIMEOUT_S)
        start_at = time.time() + 0.05
        for worker in workers:
            worker.connection.send(Go(start_at))
        warmup = 0.0 if spec.phase == "load" else spec.warmup_s
        measure_at = start_at + warmup
        end_at = measure_at + spec.duration_s
        deadline = end_at + spec.target.timeout_s + 15.0
        outcome = RunOutcome(spec, [], start_at)
        totals: dict[int, tuple[int, int]] = {}
        results: dict[int, WorkerResult] = {}
        started_hook = ended_hook = False
        while len(results) < len(workers):
            now = time.time()
            if now > deadline:
                self._kill(workers)
                raise BenchError(f"run did not finish by its deadline ({spec.workload.label}, {spec.clients} clients)")
            if not started_hook and now >= measure_at:
                started_hook = True
                if at_measure_start:
                    at_measure_start()
            if not ended_hook and now >= end_at:
                ended_hook = True
                if at_measure_end:
                    at_measure_end()
            for worker in workers:
                if worker.index in results or not worker.connection.poll(0):
                    continue
                message = self._receive(worker)
                if isinstance(message, Failed):
                    self._kill(workers)
                    raise BenchError(f"load process {message.worker_index} failed:\n{message.message}")
                if isinstance(message, WorkerResult):
                    results[worker.index] = message
            self._drain_progress(totals)
            if on_progress:
                on_progress(
                    max(0.0, now - start_at),
                    sum(completed for completed, _ in totals.values()),
                    sum(in_window for _, in_window in totals.values()),
                )
            if len(results) < len(workers):
                multiprocessing.connection.wait([w.connection for w in workers if w.index not in results], 0.05)
        # Workers that spent their operation budget early end the run before its window: the
        # hooks still run, in order, so the caller's before/after samples always pair up.
        if not started_hook and at_measure_start:
            at_measure_start()
        if not ended_hook and at_measure_end:
            at_measure_end()
        outcome.workers = [results[index] for index in sorted(results)]
        return outcome

    def _receive(self, worker: _Worker) -> Any:
        try:
            return worker.connection.recv()
        except (EOFError, OSError) as error:
            code = worker.process.exitcode
            return Failed(worker.index, f"load process exited unexpectedly ({error}); exit code {code}")

    def _await_all(self, workers: list[_Worker], kind: type, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pending = list(workers)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill(workers)
                raise BenchError(f"load processes did not become ready within {timeout_s:.0f} s")
            for connection in multiprocessing.connection.wait([w.connection for w in pending], remaining):
                worker = next(w for w in pending if w.connection is connection)
                message = self._receive(worker)
                if isinstance(message, Failed):
                    self._kill(workers)
                    raise BenchError(f"load process {message.worker_index} failed:\n{message.message}")
                if not isinstance(message, kind):
                    self._kill(workers)
                    raise BenchError(f"load process {worker.index} answered {type(message).__name__}")
                pending.remove(worker)
