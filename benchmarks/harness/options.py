"""The resolved command line of one `okapi bench` invocation (``benchmarks.cli`` builds it).

What every stage reads: the harness (how to start and drive systems), the suites (what to sweep),
and results.json, whose ``config`` is ``BenchOptions.to_config()`` (systems by their names, under
``protocols``, the flag users give them with).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.harness.systems import System

#: ``--workload memory``: the resident memory per key of one loaded server (``harness.memory``).
MEMORY = "memory"
#: The YCSB workloads of single-key GET and SWAP only (what ``engine.lean`` sends; D needs its
#: inserts acknowledged before its "latest" reads can pick them).
LEAN_WORKLOADS = ("a", "b", "c")


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """The resolved command line (``cli.options_from_args``)."""

    suite: str | None = None
    workload: str = "a"
    systems: tuple[System, ...] = (System("okapi"),)
    clients: tuple[int, ...] = (1,)
    clients_given: bool = False
    duration_s: float = 5.0
    warmup_s: float = 1.0
    dcs: tuple[str, ...] | None = None
    partitions: int = 1
    partitions_given: bool = False
    clock_skew_ms: float | None = None
    #: how the skew's offsets are laid out over the servers (``okapikv.core.skew``; seeded by ``seed``)
    clock_skew_model: str = "uniform"
    #: who coordinates RO-TX and SCAN (``okapikv.client.policy.COORDINATORS``)
    coordinator: str = "session"
    rotx_partitions: int = 2
    write_ratio: float | None = None
    incr_ratio: float = 0.0  # probability an operation is an INCR of a counter (``workloads.MixedSource``)
    ttl_ms: int = 0  # every write a PUT with this time to live (0: none)
    records: int = 10_000
    key_bytes: int = 8
    value_bytes: int = 8
    connect: str | None = None
    quick: bool = False
    out: Path = Path("bench-out")
    processes: int | None = None
    wan: str | float = "realistic"
    seed: int = 1
    timeout_s: float = 10.0
    visibility_samples: int | None = None
    redis: bool = True
    progress: bool = True
    keep_cpus_busy: bool = False
    grpc_only: bool = False
    load: str = "client"  # okapi load generator: client (async client sessions) | lean (engine.lean)
    durable: bool = False  # local okapikv servers keep their stores in data directories (SQLite)
    max_sessions: int | None = None  # the paper suite's peak search: most sessions (harness.peak)
    latency_cap_ms: float | None = None  # ... and the mean latency it stops at

    def scaled(self) -> BenchOptions:
        """``--quick``: sub-second windows and a small data set (CI must finish in a minute)."""
        if not self.quick:
            return self
        return replace(self, duration_s=min(self.duration_s, 0.5), warmup_s=min(self.warmup_s, 0.2),
                       records=min(self.records, 1_000))

    def to_config(self) -> dict[str, Any]:
        """The options as results.json's ``config`` (JSON values; systems by name, as ``protocols``)."""
        config: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "systems":
                config["protocols"] = [system.name for system in value]
            else:
                config[field.name] = str(value) if isinstance(value, Path) else value
        return config
