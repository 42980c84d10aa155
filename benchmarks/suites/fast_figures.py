"""What ``--suite fast`` measured, typed, and its form in results.json (the ``fast`` section).

The phases (``suites.fast``) fill a ``FastFigures``; the acceptance table (``suites.acceptance``)
judges it into ``Verdict`` rows. ``to_dict`` is results.json's ``fast`` section, key for key (a
phase that did not run is absent); ``from_dict`` reads it back, from older files too (a figure they
lack is zero or absent), so a saved run can be judged again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.latency import SequentialLatency
from benchmarks.harness.replication import LagSummary, QueueSummary
from benchmarks.harness.storage_costs import StorageCosts
from okapikv.bench.engine.results import Run, VisibilityPair, plain

#: (results key, label) of the one-at-a-time latency paths; the last is shown for comparison only.
LATENCY_PATHS = (("client", "Client"), ("stdio", "okapi client"), ("client_grpc", "Client over gRPC only"))
#: The latency phase's durable pair: PUTs through the Client to a durable server, and the disk's own
#: fdatasync of a 100-byte append on the same file system, measured in the same rounds (PUT only).
DURABLE = "client_durable"
FDATASYNC = "fdatasync"

#: By path, by operation kind (get, put).
PathLatency = dict[str, dict[str, SequentialLatency]]


def _latency_of(data: dict[str, Any]) -> PathLatency:
    return {via: {kind: SequentialLatency(**figures) for kind, figures in kinds.items()} for via, kinds in data.items()}


@dataclass(frozen=True, slots=True)
class LatencyPhase:
    """Target 1: each path's figures from the round with the median mean, and every round."""

    paths: PathLatency
    operations: int
    rounds: list[PathLatency]

    def to_dict(self) -> dict[str, Any]:
        return {**plain(self.paths), "operations": self.operations, "rounds": [plain(one) for one in self.rounds]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LatencyPhase:
        paths = {via: kinds for via, kinds in data.items() if via not in ("operations", "rounds")}
        return cls(_latency_of(paths), data["operations"], [_latency_of(one) for one in data.get("rounds", [])])


@dataclass(frozen=True, slots=True)
class Throughput:
    """A run's figures as the targets compare them."""

    ops_s: float
    mean_us: float | None
    p99_us: float | None
    errors: int
    server_cpu_s: float | None
    client_cores: float | None
    partitions: int | None

    @classmethod
    def of(cls, run: Run | None) -> Throughput | None:
        if run is None:
            return None
        latency = run.latency_us.get("all")
        return cls(ops_s=run.throughput_ops_s, mean_us=latency.mean_us if latency else None,
                   p99_us=latency.p99_us if latency else None, errors=sum(run.errors.values()),
                   server_cpu_s=run.cpu.server_s, client_cores=run.cpu.client_cores, partitions=run.partitions)


@dataclass(frozen=True, slots=True)
class PairUnderLoad:
    """Target 5, one DC pair: the client probe's summary (its samples are not kept), Okapi's bound,
    and the servers' lag."""

    probe: VisibilityPair
    bound_ms: float
    lag: LagSummary

    @property
    def lag_p99_ms(self) -> float:
        return self.lag.p99_ms or 0.0

    def to_dict(self) -> dict[str, Any]:
        """The probe's summary, the bound and the lag in one flat row (results.json's form)."""
        summary = {name: value for name, value in dataclasses.asdict(self.probe).items() if name != "samples_ms"}
        return {**summary, "bound_ms": self.bound_ms, **self.lag.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PairUnderLoad:
        figures = {field.name: data.get(field.name, 0) for field in dataclasses.fields(VisibilityPair)}
        probe = VisibilityPair(**{**figures, "source": data["source"], "destination": data["destination"],
                                  "samples_ms": []})
        return cls(probe, data["bound_ms"], LagSummary.from_dict(data))


@dataclass(frozen=True, slots=True)
class ReplicationFigures:
    """Target 5: a PUT-only load in every DC, its rate, visibility per pair and the queues."""

    system: str
    throughput: Throughput | None
    visibility: list[PairUnderLoad]
    queues: QueueSummary

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "throughput": plain(self.throughput),
                "visibility": [pair.to_dict() for pair in self.visibility], "queues": self.queues.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplicationFigures:
        throughput = data.get("throughput")
        return cls(data.get("system", ""), None if throughput is None else Throughput(**throughput),
                   [PairUnderLoad.from_dict(pair) for pair in data["visibility"]],
                   QueueSummary.from_dict(data.get("queues", {})))


@dataclass(frozen=True, slots=True)
class BenchmarkPoint:
    """One ``redis-benchmark -t set,get,incr -c C -P P`` point of one round: requests per second of
    SET, GET and INCR against okapikv's RESP port and against redis-server, one right after the
    other (INCR 0: a result from before INCR was measured)."""

    clients: int
    pipeline: int
    okapi_set: float
    okapi_get: float
    redis_set: float
    redis_get: float
    okapi_incr: float = 0.0
    redis_incr: float = 0.0

    @property
    def ratio(self) -> float:
        """okapikv's share of redis-server's throughput, the mean of SET's and GET's."""
        shares = [ours / theirs for ours, theirs in ((self.okapi_set, self.redis_set), (self.okapi_get, self.redis_get))
                  if theirs]
        return sum(shares) / len(shares) if shares else 0.0


@dataclass(frozen=True, slots=True)
class DurableScale:
    """The durable data-size targets: each round bulk-loads ``large`` records into a fresh durable
    partition (the load rate), waits for the load's checkpoints and runs YCSB-A on it, and the same
    on another loaded with ``small``."""

    large: int
    small: int
    quick: bool
    load_rates: list[float]  # records per second, one per round
    rounds: list[dict[str, float]]  # YCSB-A ops/s by "large" and "small", one per round
    #: seconds from the large load's last acknowledgement until its log was checkpointed, one per round
    checkpoint_s: list[float] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DurableScale:
        return cls(data["large"], data["small"], data.get("quick", False), list(data.get("load_rates", [])),
                   list(data.get("rounds", [])), list(data.get("checkpoint_s", [])))


@dataclass(frozen=True, slots=True)
class IdlePair:
    """The idle phase, one DC pair: the first update's remote visibility after the idle spell
    (None: the probe timed out) and Okapi's bound for the pair."""

    source: str
    destination: str
    visible_ms: float | None
    bound_ms: float


@dataclass(frozen=True, slots=True)
class IdleFigures:
    """The idle phase (``harness.idle``): each server's cores over the idle window, and each pair's
    first-update visibility after it."""

    idle_s: float
    cores: list[float]
    visibility: list[IdlePair]

    def to_dict(self) -> dict[str, Any]:
        return plain(self)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IdleFigures:
        return cls(data["idle_s"], list(data["cores"]), [IdlePair(**pair) for pair in data["visibility"]])


@dataclass(frozen=True, slots=True)
class Verdict:
    """One row of the targets table as measured: a target of ``suites.acceptance.TARGETS``."""

    target: str
    goal: str
    measured: str
    met: bool | None  # None: a comparison row, not judged
    id: str = ""  # the target's id (results written before targets had ids: "")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(data["target"], data["goal"], data["measured"], data["met"], data.get("id", ""))


#: Figures by system key (``suites.fast.CONTENDERS``), None for a run that failed.
ByKey = dict[str, Throughput | None]


@dataclass(slots=True)
class FastFigures:
    """Everything the phases measured; a phase that did not run leaves its fields None."""

    latency: LatencyPhase | None = None
    ycsb_a: ByKey | None = None
    ycsb_a_rounds: list[dict[str, float]] | None = None  # each round's throughput by system key
    rotx: ByKey | None = None
    rotx_rounds: list[dict[str, float]] | None = None
    replication: ReplicationFigures | None = None  # the target's system
    replication_unbounded: ReplicationFigures | None = None  # plain okapi, the same load, for comparison
    ycsb_a_server_us_per_op: dict[str, float] | None = None  # the median runs' server CPU per operation, by key
    redis_benchmark: list[list[BenchmarkPoint]] | None = None  # each round's points
    durable_scale: DurableScale | None = None
    idle: IdleFigures | None = None  # the idle cluster's cores and first-update visibility
    storage: StorageCosts | None = None  # the commit log's recovery and checkpoint costs, store alone
    targets: list[Verdict] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if isinstance(value, LatencyPhase | ReplicationFigures | DurableScale | IdleFigures | StorageCosts):
                data[field.name] = value.to_dict()
            else:
                data[field.name] = plain(value)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FastFigures:
        def by_key(found: dict[str, Any] | None) -> ByKey | None:
            if found is None:
                return None
            return {key: None if figures is None else Throughput(**figures) for key, figures in found.items()}

        def replication(found: dict[str, Any] | None) -> ReplicationFigures | None:
            return None if found is None else ReplicationFigures.from_dict(found)

        latency = data.get("latency")
        idle = data.get("idle")
        targets = data.get("targets")
        return cls(
            latency=None if latency is None else LatencyPhase.from_dict(latency),
            ycsb_a=by_key(data.get("ycsb_a")), ycsb_a_rounds=data.get("ycsb_a_rounds"),
            rotx=by_key(data.get("rotx")), rotx_rounds=data.get("rotx_rounds"),
            replication=replication(data.get("replication")),
            replication_unbounded=replication(data.get("replication_unbounded")),
            ycsb_a_server_us_per_op=data.get("ycsb_a_server_us_per_op"),
            redis_benchmark=[[BenchmarkPoint(**point) for point in round_] for round_ in data["redis_benchmark"]]
            if "redis_benchmark" in data else None,
            durable_scale=DurableScale.from_dict(data["durable_scale"]) if "durable_scale" in data else None,
            idle=None if idle is None else IdleFigures.from_dict(idle),
            storage=StorageCosts.from_dict(data["storage"]) if "storage" in data else None,
            targets=None if targets is None else [Verdict.from_dict(row) for row in targets],
        )

