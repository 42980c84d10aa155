"""The load process: many asyncio sessions in a closed loop, each its own client session.

Runs in a spawned OS process (``driver.WorkerPool``) with one event loop for its whole life
(grpc.aio binds to the first loop it sees). Every session loop is bounded by time (the run's
window) and by count (its operation budget); operations that fail are counted, not retried, so a
broken server shows as errors rather than as a hang. What is recorded, and when, is
``engine.recording``'s. With ``--load lean`` the process runs ``engine.lean`` instead of sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import multiprocessing.connection
import random
import time
import traceback
from typing import Any

from okapikv.bench.engine.adapters import BenchSession, Target, build_target
from okapikv.bench.engine.errors import BenchError
from okapikv.bench.engine.generators import InsertSequence, format_key, make_values
from okapikv.bench.engine.keyspace import PartitionedKeyspace
from okapikv.bench.engine.lean import LeanLoad
from okapikv.bench.engine.messages import Failed, Go, Prepare, Ready, WorkerResult
from okapikv.bench.engine.recording import Recorder, Window
from okapikv.bench.engine.workloads import (
    INCR,
    INSERT,
    LOAD,
    PUT,
    PUT_TTL,
    READ,
    RMW,
    ROTX,
    SCAN,
    UPDATE,
    Operation,
    OperationSource,
    WorkloadConfig,
    make_source,
)

PROGRESS_INTERVAL_S = 0.25
READY_TIMEOUT_S = 60.0
ERROR_BACKOFF_S = 0.002


async def _execute(session: BenchSession, operation: Operation, state: Recorder, window: Window) -> None:
    """Issue one operation of the kinds ``_session_loop`` does not issue itself (it does READ, UPDATE
    and writes). A read-modify-write also records its GET and SWAP (as YCSB does)."""
    kind = operation.kind
    if kind == SCAN:
        await session.scan(operation.key, operation.end, operation.limit)
    elif kind == ROTX:
        await session.read_tx(operation.keys)
    elif kind == INCR:
        await session.incr(operation.key)
    elif kind == PUT_TTL:
        await session.put_ttl(operation.key, operation.value, operation.ttl_ms)
    elif kind == RMW:
        started = time.perf_counter_ns()
        await session.get(operation.key)
        middle = time.perf_counter_ns()
        await session.swap(operation.key, operation.value)
        if window.measure_ns <= middle <= window.end_ns:
            state.record_part(READ, middle - started)
            state.record_part(UPDATE, time.perf_counter_ns() - middle)
    else:
        raise ValueError(f"unknown operation kind {kind!r}")


async def _session_loop(
    session: BenchSession,
    source: OperationSource,
    state: Recorder,
    window: Window,
    max_ops: int,
) -> None:
    """Closed loop: issue, wait for the reply, record, repeat; bounded by time and count.

    The per-operation path is kept lean, as its CPU is taken from the measured store on a small
    machine: methods bound once, the common kinds awaited here rather than through ``_execute``
    (one coroutine frame less per operation), and one array append per completed operation."""
    await asyncio.sleep(window.seconds_until(window.start_ns))
    issued = 0
    end_ns = window.end_ns
    measure_ns = window.measure_ns
    clock = time.perf_counter_ns
    next_operation = source.next
    acknowledge = source.acknowledge
    get, swap, put = session.get, session.swap, session.put
    latencies = state.latencies_us
    while issued < max_ops:
        started = clock()
        if started >= end_ns:
            break
        operation = next_operation()
        issued += 1
        kind = operation.kind
        try:
            # Inline dispatch, one append: 2.2 -> 1.4 us of loop CPU per YCSB-A operation (no-op session).
            if kind == READ:
                await get(operation.key)
            elif kind == UPDATE:
                await swap(operation.key, operation.value)
            elif kind in (INSERT, PUT, LOAD):
                await put(operation.key, operation.value)
            else:
                await _execute(session, operation, state, window)
        except Exception as error:
            state.errors[kind] += 1
            state.last_error = f"{kind}: {type(error).__name__}: {error}"[:500]
            await asyncio.sleep(ERROR_BACKOFF_S)
            continue
        finished = clock()
        acknowledge(operation)
        state.completed += 1
        if measure_ns <= finished <= end_ns:
            state.in_window += 1
            samples = latencies.get(kind)
            if samples is None:
                samples = state.samples(kind)
            samples.append((finished - started) // 1000)


class _LoadSource(OperationSource):
    """The load phase: PUT each record index of the session's share exactly once."""

    def __init__(self, indices: range, config: WorkloadConfig, rng: random.Random) -> None:
        self.indices = iter(indices)
        self.config = config
        self.values = make_values(16, config.value_bytes, rng)
        self.remaining = len(indices)

    def next(self) -> Operation:
        index = next(self.indices)
        self.remaining -= 1
        return Operation(LOAD, format_key(index, self.config.key_bytes), self.values[index % len(self.values)])


@functools.lru_cache(maxsize=4)
def _keyspace(records: int, num_partitions: int, key_bytes: int) -> PartitionedKeyspace:
    """Cached per process: the same grouping serves every run on the same cluster."""
    return PartitionedKeyspace(records, num_partitions, key_bytes)


def _sources(prepare: Prepare) -> list[tuple[int, OperationSource]]:
    """Each session's operation source (seeded by run seed and global session number)."""
    spec = prepare.spec
    config = spec.workload
    global_sessions = spec.clients
    result: list[tuple[int, OperationSource]] = []
    keyspace = None
    if spec.phase != "load" and config.name == "rotx":
        keyspace = _keyspace(config.records, config.num_partitions, config.key_bytes)
    inserts = InsertSequence(config.records, prepare.worker_index, prepare.num_workers)
    for local in range(prepare.sessions):
        number = prepare.session_offset + local
        rng = random.Random(f"{spec.seed}/{spec.phase}/{config.name}/{number}")
        if spec.phase == "load":
            # Session k of n loads indices k, k + n, ...: every record exactly once, spread over DCs.
            source: OperationSource = _LoadSource(range(number, config.records, global_sessions), config, rng)
        else:
            source = make_source(config, rng, inserts, keyspace)
        result.append((number, source))
    return result


async def _cpu_sampler(window: Window, readings: list[float]) -> None:
    await asyncio.sleep(window.seconds_until(window.measure_ns))
    readings.append(time.process_time())
    await asyncio.sleep(window.seconds_until(window.end_ns))
    readings.append(time.process_time())


async def _progress_reporter(worker_index: int, state: Recorder, progress: Any) -> None:
    while True:
        await asyncio.sleep(PROGRESS_INTERVAL_S)
        with contextlib.suppress(Exception):
            progress.put_nowait((worker_index, state.completed, state.in_window))


async def _run_prepared(
    prepare: Prepare, connection: multiprocessing.connection.Connection, progress: Any
) -> WorkerResult:
    spec = prepare.spec
    lean: LeanLoad | None = None
    if spec.target.kind == "lean":  # sessions as slots of one closed loop (engine.lean)
        if spec.phase == "load":
            raise BenchError("the lean load generator measures; loading runs with the async client")
        lean = LeanLoad(spec.target, [source for _, source in _sources(prepare)],
                        max_operations=spec.max_ops_per_session * prepare.sessions)
        target: Target = _NoTarget()
        opened = lean.open()
    else:
        target = build_target(spec.target, prepare.sessions)
        opened = target.open()
    await asyncio.wait_for(opened, timeout=max(READY_TIMEOUT_S / 2, spec.target.timeout_s))
    try:
        sources = [] if lean is not None else _sources(prepare)
        sessions = [(target.session(number), source) for number, source in sources]
        # The run's long-lived objects (sessions, key tables, the client) out of the collector's
        # sight: full collections of a load process paused it for up to 40 ms otherwise.
        gc.freeze()
        connection.send(Ready(prepare.worker_index))
        loop = asyncio.get_running_loop()
        ready = await loop.run_in_executor(None, connection.poll, READY_TIMEOUT_S)
        if not ready:
            raise BenchError("the parent never started the run")
        go = connection.recv()
        if not isinstance(go, Go):
            raise BenchError(f"expected Go, got {type(go).__name__}")
        if spec.phase == "load":
            window = Window(go.start_at, 0.0, spec.duration_s)
            budgets = [source.remaining if isinstance(source, _LoadSource) else 0 for _, source in sessions]
        else:
            window = Window(go.start_at, spec.warmup_s, spec.duration_s)
            budgets = [spec.max_ops_per_session] * len(sessions)
        state = Recorder()
        cpu_readings: list[float] = []
        reporter = asyncio.create_task(_progress_reporter(prepare.worker_index, state, progress))
        sampler = asyncio.create_task(_cpu_sampler(window, cpu_readings))
        loops = [
            _session_loop(session, source, state, window, budget)
            for (session, source), budget in zip(sessions, budgets, strict=True)
        ]
        grace_s = window.seconds_until(window.end_ns) + spec.target.timeout_s + 5.0
        try:
            await asyncio.wait_for(asyncio.gather(*loops) if lean is None else lean.run(window, state), timeout=grace_s)
        finally:
            reporter.cancel()
            sampler.cancel()
        with contextlib.suppress(Exception):
            progress.put_nowait((prepare.worker_index, state.completed, state.in_window))
        finished_ns = time.perf_counter_ns()
        if len(cpu_readings) < 2:
            cpu_readings = cpu_readings[:1] or [time.process_time()]
            cpu_readings.append(time.process_time())
        window_end = min(finished_ns, window.end_ns)
        return WorkerResult(
            worker_index=prepare.worker_index,
            histograms={kind: histogram.encode() for kind, histogram in state.histograms().items()},
            operations=state.in_window,
            completed=state.completed,
            errors=dict(state.errors),
            last_error=state.last_error,
            cpu_s=cpu_readings[1] - cpu_readings[0],
            window_s=max(0.0, (window_end - window.measure_ns) / 1e9),
        )
    finally:
        if lean is not None:
            lean.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(target.close(), timeout=5.0)


class _NoTarget(Target):
    """The lean load's stand-in: it opens its own connections and has no sessions to hand out."""

    async def open(self) -> None:
        return None

    def session(self, index: int) -> BenchSession:
        raise BenchError("the lean load generator has no sessions of the async interface")

    async def close(self) -> None:
        return None


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency where it exists
        return asyncio.new_event_loop()


def worker_main(connection: multiprocessing.connection.Connection, progress: Any, worker_index: int) -> None:
    """Entry point of a spawned load process: serve ``Prepare`` messages until told to stop.

    One event loop for the life of the process: grpc.aio binds its completion-queue poller to the
    first loop that uses it, so a fresh loop per run would leave callbacks aimed at a closed loop.
    """
    loop = _new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        while True:
            try:
                message = connection.recv()
            except (EOFError, OSError, KeyboardInterrupt):
                return
            if message is None:
                return
            if not isinstance(message, Prepare):
                connection.send(Failed(worker_index, f"unexpected message {type(message).__name__}"))
                continue
            try:
                result: WorkerResult | Failed = loop.run_until_complete(_run_prepared(message, connection, progress))
            except KeyboardInterrupt:
                return
            except BaseException as error:
                result = Failed(worker_index, "".join(traceback.format_exception(error)))
            try:
                connection.send(result)
            except (BrokenPipeError, OSError):
                return
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
