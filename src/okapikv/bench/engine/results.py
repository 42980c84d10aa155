"""The results of a benchmark invocation, typed, and their one serialized form (results.json).

One ``Results`` holds every measured ``Run`` grouped in ``Series`` (a series is one figure's data:
runs that differ in one variable, e.g. clients, partitions per RO-TX, write ratio), the visibility
probes (``VisibilityPair`` per DC pair), memory rows, the configuration and the machine.

results.json is exactly ``Results.to_dict()``, and ``Results.from_dict`` reads it back (files
written by earlier versions too: a section they lack is empty, a run field they lack is absent).
The CSV files, plots and report derive from that dictionary alone (``engine.report``), so they can
be regenerated from a saved results.json, and anything that fills a ``Results`` (a suite, or a
source other than the load generator) gets the same outputs.

The shape: top-level keys in the order of ``Results.to_dict``; a run is its fields in order, with
``load``, ``waits``, ``traffic``, ``server_operations``, ``sweep``, ``unsteady``, ``steady`` and
``durability`` left out when absent. Three sections belong to one suite each and are stored as that
suite serializes them: ``fast`` (``benchmarks.suites.fast_figures.FastFigures``), ``resp``
(``benchmarks.suites.resp``) and ``paper`` (``benchmarks.suites.paper_figures``).
This module imports nothing else of the benchmark: it is the data model the other stages share.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

_T = TypeVar("_T")


def _build(cls: type[_T], data: dict[str, Any], **converted: Any) -> _T:
    """An instance of the dataclass ``cls`` from its serialized fields (``converted`` overrides);
    a missing field without a default is a ``KeyError`` naming it."""
    values: dict[str, Any] = {}
    for item in dataclasses.fields(cls):  # type: ignore[arg-type]
        if item.name in converted:
            values[item.name] = converted[item.name]
        elif item.name in data:
            values[item.name] = data[item.name]
        elif item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
            raise KeyError(f"{cls.__name__} needs {item.name!r}")
    return cls(**values)


class _Histogram(Protocol):
    def get_total_count(self) -> int: ...

    def get_mean_value(self) -> float: ...

    def get_value_at_percentile(self, percentile: float) -> int: ...

    def get_max_value(self) -> int: ...


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """One operation kind's client-measured latency over a run's window, in microseconds."""

    count: int
    mean_us: float
    p50_us: float
    p99_us: float
    p999_us: float
    max_us: float

    @classmethod
    def of(cls, histogram: _Histogram) -> LatencySummary:
        count = histogram.get_total_count()
        if count == 0:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return cls(
            count=count,
            mean_us=round(histogram.get_mean_value(), 1),
            p50_us=float(histogram.get_value_at_percentile(50.0)),
            p99_us=float(histogram.get_value_at_percentile(99.0)),
            p999_us=float(histogram.get_value_at_percentile(99.9)),
            max_us=float(histogram.get_max_value()),
        )


@dataclass(frozen=True, slots=True)
class WaitSummary:
    """How often operations of one kind blocked, and for how long on average when they did.

    ``probability`` = waits / operations of that kind. For Cure a RO-TX over p partitions can wait
    on each of its p slices, so the ``rotx`` figure counts slice waits per transaction: it is the
    probability for p = 1 and an upper bound (capped at 1) beyond. ``rotx_tx`` counts each
    transaction once, stalled or not, for its longest wait (the paper's Figure 4c/d).
    """

    operations: int
    waits: int
    probability: float
    mean_us: float
    total_us: float
    reasons: dict[str, int]


@dataclass(frozen=True, slots=True)
class TrafficSummary:
    """Replication and stabilization traffic of the whole cluster during the measured window."""

    updates_replicated: int
    metadata_bytes_per_update: float
    payload_bytes_per_update: float
    replication_bytes_per_s: float
    stabilization_bytes_per_s: float
    heartbeat_bytes_per_s: float
    stabilization_messages_per_s: float
    # measured on the peer links (``okapikv.server.wire_bytes``); None where a run has no such figure
    wire_metadata_bytes_per_update: float | None = None  # an update's Update message minus key and value
    wire_batch_bytes_per_update: float | None = None  # its share of its batch's GSV and framing
    wire_replication_bytes_per_op: float | None = None  # per client operation of the window
    wire_stabilization_bytes_per_op: float | None = None  # stabilization and heartbeats
    wire_total_bytes_per_op: float | None = None  # the two together: the paper's communication cost
    wire_read_bytes_per_op: float | None = None  # slices of snapshot reads inside a DC


@dataclass(frozen=True, slots=True)
class Cpu:
    """CPU seconds of the load processes and of the servers over the window, and per second of it."""

    client_s: float
    client_cores: float
    server_s: float | None
    server_cores: float | None
    server_cpu_us_per_op: float | None
    server_idle_cores: float | None = None  # the same servers idle, measured before the load
    server_net_cpu_us_per_op: float | None = None  # server CPU per operation less that idle background
    #: the busiest server's and the median server's share of their cores busy over the window (the
    #: simulator's cost model): far apart, one hot server sets the peak
    server_busy_max: float | None = None
    server_busy_median: float | None = None
    #: seconds CPython's cyclic collector ran in the servers over the window, and its passes (Stats'
    #: ``collector_seconds``, ``okapikv.server.collector_clock``): a window holding a full pass over
    #: a large heap measures the collector, not the store
    server_collector_s: float | None = None
    server_collector_passes: int | None = None


@dataclass(frozen=True, slots=True)
class DurabilitySummary:
    """A durable run's commit groups over the window, from the servers' Stats (``storage`` and
    ``driver``): where a durable operation's latency goes (docs/benchmarks.md, "Where a durable
    operation's time goes"). ``commit_ms``: mean from a group's hand-over to the worker to the loop
    hearing it is durable; ``release_lag_ms``: the part of it after the append returned;
    ``gets_held``: GET replies held for a group (their key had a version in flight), of ``gets``."""

    fsyncs: int
    versions_per_fsync: float | None
    operations_per_fsync: float | None
    commit_ms: float | None
    release_lag_ms: float | None
    gets: int
    gets_early: int
    gets_held: int


#: Run fields that a run without them leaves out of results.json rather than writing as null.
_OMITTED_WHEN_ABSENT = ("load", "waits", "traffic", "server_operations", "clock_skew_model", "max_dc_skew_ms",
                        "coordinator", "sweep", "unsteady", "steady", "durability")
#: Figures of a run's CPU and traffic that are left out when absent (a run that has no idle
#: measurement or no wire counters, and files written before them, read and write back alike).
_FIGURES_OMITTED_WHEN_ABSENT = frozenset({
    "server_idle_cores", "server_net_cpu_us_per_op", "server_busy_max", "server_busy_median",
    "server_collector_s", "server_collector_passes",
    "wire_metadata_bytes_per_update",
    "wire_batch_bytes_per_update", "wire_replication_bytes_per_op", "wire_stabilization_bytes_per_op",
    "wire_total_bytes_per_op", "wire_read_bytes_per_op"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One measured run: what ran (system, workload, clients, cluster shape), what it did
    (throughput, latency per operation kind, errors), and what it cost (CPU, waits, traffic)."""

    system: str  # how results show the system (``System.name``, or a suite's label of it)
    workload: str
    clients: int
    processes: int
    dcs: int
    partitions: int
    clock_skew_ms: float
    rotx_partitions: int | None
    write_ratio: float | None
    load: str | None = None  # client | lean; absent in results written before the lean load
    #: the skew model (``okapikv.core.skew``), the largest skew inside one DC it gave, and who
    #: coordinated RO-TX and SCAN; None where unknown (Redis, a --connect cluster, older results)
    clock_skew_model: str | None = None
    max_dc_skew_ms: float | None = None
    coordinator: str | None = None
    records: int
    duration_s: float
    warmup_s: float
    operations: int
    throughput_ops_s: float
    errors: dict[str, int]
    last_error: str
    latency_us: dict[str, LatencySummary]
    cpu: Cpu
    waits: dict[str, WaitSummary] | None = None  # these three: from the servers' stats, when read
    traffic: TrafficSummary | None = None
    server_operations: dict[str, Any] | None = None
    #: a simulated peak's sweep, every step's [clients, ops/s]: a knee or a peak still growing
    #: (``okapikv.sim.experiments.run_point``); None for measured runs
    sweep: list[list[float]] | None = None
    #: the step that ended a simulated sweep out of a steady state: [clients, ops/s, throughput x mean
    #: latency / clients] on a kept peak (``okapikv.sim.experiments.steady``); ``steady`` False on such
    #: a step kept among every step of its sweep
    unsteady: list[float] | None = None
    steady: bool | None = None
    durability: DurabilitySummary | None = None  # a durable run's commit groups (``DurabilitySummary``)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if value is None and item.name in _OMITTED_WHEN_ABSENT:
                continue
            data[item.name] = plain(value)
            if item.name in ("cpu", "traffic") and value is not None:
                data[item.name] = {key: figure for key, figure in data[item.name].items()
                                   if figure is not None or key not in _FIGURES_OMITTED_WHEN_ABSENT}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        waits, traffic, durability = data.get("waits"), data.get("traffic"), data.get("durability")
        return _build(
            cls, data,
            latency_us={kind: _build(LatencySummary, summary) for kind, summary in data["latency_us"].items()},
            cpu=_build(Cpu, data["cpu"]),
            waits=None if waits is None else {kind: _build(WaitSummary, wait) for kind, wait in waits.items()},
            traffic=None if traffic is None else _build(TrafficSummary, traffic),
            durability=None if durability is None else _build(DurabilitySummary, durability),
        )


@dataclass(slots=True)
class Series:
    name: str
    kind: str  # what the runs differ in, which decides the plots: clients, single, rotx_partitions, ...
    title: str
    runs: list[Run] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "title": self.title, "runs": [run.to_dict() for run in self.runs]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Series:
        return cls(data["name"], data["kind"], data["title"], [Run.from_dict(run) for run in data["runs"]])


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """``--workload memory``: one server's resident memory before and after loading ``keys`` keys."""

    system: str
    records: int
    key_bytes: int
    value_bytes: int
    keys: int
    versions: int | None
    rss_before_bytes: int
    rss_after_bytes: int
    rss_peak_bytes: int
    bytes_per_key: float  # (after - before) / keys
    rss_after_per_key: float  # after / keys
    load_s: float
    load_ops_s: float | None


@dataclass(frozen=True, slots=True)
class VisibilityPair:
    """Remote update visibility from ``source`` to ``destination``: the probe's samples (ms from a
    PUT's acknowledgement until a fresh session in the destination reads it) and their summary."""

    source: str
    destination: str
    count: int
    timeouts: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    samples_ms: list[float]


@dataclass(frozen=True, slots=True)
class Machine:
    cpu_model: str
    cores: int | None
    memory_gib: float | None
    python: str
    implementation: str
    platform: str

    @classmethod
    def current(cls) -> Machine:
        return cls(cpu_model=_cpu_model(), cores=os.cpu_count(), memory_gib=_memory_gib(),
                   python=sys.version.split()[0], implementation=platform.python_implementation(),
                   platform=platform.platform())


def _started_at() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime())


def _version() -> str:
    from okapikv import __version__

    return __version__


@dataclass(slots=True)
class Results:
    config: dict[str, Any]  # the resolved options (``BenchOptions.to_config``) and the suite's plan
    series: dict[str, Series] = field(default_factory=dict)
    visibility: dict[str, list[VisibilityPair]] = field(default_factory=dict)  # by system
    memory: list[MemoryRow] = field(default_factory=list)  # --workload memory, one row per system
    fast: dict[str, Any] = field(default_factory=dict)  # --suite fast, serialized (module docstring)
    resp: list[dict[str, Any]] = field(default_factory=list)  # --suite resp, serialized
    paper: dict[str, Any] = field(default_factory=dict)  # --suite paper's summary (``suites.paper_figures``)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds by phase
    okapikv_version: str = field(default_factory=_version)
    started_at: str = field(default_factory=_started_at)
    elapsed_s: float | None = None  # None while running: ``to_dict`` says how long so far
    machine: Machine = field(default_factory=Machine.current)
    files: dict[str, Any] | None = None  # what ``engine.report.write_outputs`` wrote
    _started: float = field(default_factory=time.time, init=False, repr=False, compare=False)

    def series_for(self, name: str, kind: str, title: str) -> Series:
        found = self.series.get(name)
        if found is None:
            found = self.series[name] = Series(name, kind, title)
        return found

    def note(self, message: str) -> None:
        self.notes.append(message)

    def add_time(self, phase: str, seconds: float) -> None:
        self.timings[phase] = round(self.timings.get(phase, 0.0) + seconds, 3)

    def completed_runs(self) -> int:
        return sum(len(series.runs) for series in self.series.values())

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "okapikv_version": self.okapikv_version,
            "started_at": self.started_at,
            "elapsed_s": round(time.time() - self._started, 2) if self.elapsed_s is None else self.elapsed_s,
            "config": self.config,
            "machine": dataclasses.asdict(self.machine),
            "series": {name: series.to_dict() for name, series in self.series.items()},
            "visibility": {system: [plain(pair) for pair in pairs] for system, pairs in self.visibility.items()},
            "memory": [plain(row) for row in self.memory],
            "fast": self.fast,
            "resp": self.resp,
            "paper": self.paper,
            "notes": self.notes,
            "timings_s": self.timings,
        }
        if self.files is not None:
            data["files"] = self.files
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Results:
        return cls(
            config=data["config"],
            series={name: Series.from_dict(series) for name, series in data.get("series", {}).items()},
            visibility={system: [_build(VisibilityPair, pair) for pair in pairs]
                        for system, pairs in data.get("visibility", {}).items()},
            memory=[_build(MemoryRow, row) for row in data.get("memory", [])],
            fast=data.get("fast", {}),
            resp=data.get("resp", []),
            paper=data.get("paper", {}),
            notes=data.get("notes", []),
            timings=data.get("timings_s", {}),
            okapikv_version=data["okapikv_version"],
            started_at=data["started_at"],
            elapsed_s=data["elapsed_s"],
            machine=_build(Machine, data["machine"]),
            files=data.get("files"),
        )


def plain(value: Any) -> Any:
    """A dataclass (in dicts and lists too) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / (1024 * 1024), 1)
    except (OSError, ValueError):
        pass
    return None
