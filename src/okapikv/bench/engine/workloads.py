"""What each benchmark session does next: the YCSB core workloads A-F and the paper's workloads.

A workload is a frozen, picklable description (``WorkloadConfig``) sent to every load process; each
session turns it into an ``OperationSource`` with its own seeded random generator, so sessions
never share mutable state and a run is reproducible from its seed.

YCSB mapping (the course service's driver): READ = GET, UPDATE = SWAP,
INSERT = PUT, SCAN of length n = SCAN from the start key to the key n - 1 positions later (keys are
fixed-width so dictionary order is insertion order), READ-MODIFY-WRITE = GET then SWAP.

YCSB sessions whose key distribution does not depend on acknowledgements ("zipfian", "uniform")
generate their operations ``CHUNK`` at a time with numpy (``ChunkedYcsbSource``); "latest"
(workload D) draws one operation at a time, as it must follow the acknowledged inserts.

The paper's workload (Okapi, section 5): each client performs a RO-TX reading one zipfian key from
each of ``p`` distinct uniformly chosen partitions, then a PUT to a zipfian key of a uniformly
chosen partition. With a write ratio ``w`` the alternation becomes a coin: each operation is a PUT
with probability ``w``, otherwise the RO-TX (how the write-intensity sweep varies the mix).

Counters and expiry mix into any of them (``MixedSource``, docs/benchmarks.md): with
``incr_ratio`` an operation is, with that probability, an INCR of one of ``COUNTER_KEYS`` counters
(a namespace of their own, hot: the rate-limit pattern); with ``ttl_ms`` every PUT, INSERT and
UPDATE is a PUT with that time to live (``PUT_TTL``: the client's SWAP has no expiry).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from okapikv.bench.engine.generators import (
    KEY_TABLE_MAX,
    DiscreteGenerator,
    InsertSequence,
    ScrambledZipfianGenerator,
    SkewedLatestGenerator,
    UniformGenerator,
    format_key,
    format_keys,
    key_table,
    make_values,
)
from okapikv.bench.engine.keyspace import PartitionedKeyspace, PartitionKeyChooser

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

READ: Final = "read"
UPDATE: Final = "update"
INSERT: Final = "insert"
SCAN: Final = "scan"
RMW: Final = "rmw"
ROTX: Final = "rotx"
PUT: Final = "put"
LOAD: Final = "load"
INCR: Final = "incr"
PUT_TTL: Final = "put_ttl"

OPERATION_KINDS: Final = (READ, UPDATE, INSERT, SCAN, RMW, ROTX, PUT, LOAD, INCR, PUT_TTL)
#: the counters ``incr_ratio`` increments: few, so every session and DC increments each concurrently
COUNTER_KEYS: Final = 16
#: the first byte of a counter's key: YCSB's keys are decimal digits, so the two never meet
COUNTER_PREFIX: Final = b"#"


@dataclass(frozen=True, slots=True)
class YcsbSpec:
    """One YCSB core workload: operation proportions and the request distribution."""

    name: str
    read: float = 0.0
    update: float = 0.0
    insert: float = 0.0
    scan: float = 0.0
    rmw: float = 0.0
    distribution: str = "zipfian"  # zipfian (scrambled) | latest | uniform
    max_scan_length: int = 100


#: YCSB's workloads/workload{a..f}.
YCSB: Final[dict[str, YcsbSpec]] = {
    "a": YcsbSpec("a", read=0.5, update=0.5),
    "b": YcsbSpec("b", read=0.95, update=0.05),
    "c": YcsbSpec("c", read=1.0),
    "d": YcsbSpec("d", read=0.95, insert=0.05, distribution="latest"),
    "e": YcsbSpec("e", scan=0.95, insert=0.05),
    "f": YcsbSpec("f", read=0.5, rmw=0.5),
}


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """Everything a load process needs to generate the same workload as every other one."""

    name: str  # "a" .. "f" or "rotx"
    records: int = 10_000
    key_bytes: int = 8
    value_bytes: int = 8
    num_partitions: int = 1
    rotx_partitions: int = 2
    write_ratio: float | None = None
    seed: int = 1
    incr_ratio: float = 0.0  # probability an operation is an INCR of a counter (``MixedSource``)
    ttl_ms: int = 0  # every write a PUT with this time to live (0: none)

    def __post_init__(self) -> None:
        if self.name != "rotx" and self.name not in YCSB:
            raise ValueError(f"unknown workload {self.name!r}: choose one of a-f or rotx")
        if self.records < 1:
            raise ValueError("records must be at least 1")
        if self.value_bytes < 1 or self.key_bytes < 1:
            raise ValueError("keys and values must be at least 1 byte")
        if self.write_ratio is not None and not 0.0 <= self.write_ratio <= 1.0:
            raise ValueError("write ratio must be within [0, 1]")
        if not 0.0 <= self.incr_ratio <= 1.0:
            raise ValueError("incr ratio must be within [0, 1]")
        if self.ttl_ms < 0:
            raise ValueError("ttl must not be negative")
        if self.name == "rotx" and not 1 <= self.rotx_partitions <= self.num_partitions:
            raise ValueError(
                f"--rotx-partitions {self.rotx_partitions} needs 1..{self.num_partitions} partitions"
            )
        format_key(self.records * 2, self.key_bytes)  # room for inserts, or a clear error now

    @property
    def label(self) -> str:
        return "rotx" if self.name == "rotx" else f"ycsb-{self.name}"


@dataclass(slots=True)
class Operation:
    """One client operation to issue. ``keys`` is for RO-TX, ``end``/``limit`` for SCAN."""

    kind: str
    key: bytes = b""
    value: bytes = b""
    keys: tuple[bytes, ...] = ()
    end: bytes = b""
    limit: int = 0
    index: int = -1  # record index of an INSERT, acknowledged when it completes
    ttl_ms: int = 0  # PUT_TTL: the time to live


class OperationSource:
    """Produces one session's operations. Not thread-safe; one per session."""

    def next(self) -> Operation:
        raise NotImplementedError

    def acknowledge(self, operation: Operation) -> None:
        """Called when ``operation`` completed successfully (inserts extend the key space)."""


class YcsbSource(OperationSource):
    """One YCSB session, an operation at a time (YCSB's own structure); ``make_source`` uses it for
    the "latest" distribution and ``ChunkedYcsbSource`` otherwise."""

    def __init__(self, config: WorkloadConfig, rng: random.Random, inserts: InsertSequence) -> None:
        spec = YCSB[config.name]
        self.spec = spec
        self.config = config
        self.rng = rng
        self.inserts = inserts
        self.values = make_values(16, config.value_bytes, rng)
        self._value_index = 0
        self.chooser = DiscreteGenerator(
            [(READ, spec.read), (UPDATE, spec.update), (INSERT, spec.insert), (SCAN, spec.scan), (RMW, spec.rmw)],
            rng,
        )
        self.scan_length = UniformGenerator(1, spec.max_scan_length, rng)
        last = config.records - 1
        self.keys: ScrambledZipfianGenerator | SkewedLatestGenerator | UniformGenerator
        if spec.distribution == "latest":
            self.keys = SkewedLatestGenerator(inserts.last_value, rng)
        elif spec.distribution == "uniform":
            self.keys = UniformGenerator(0, last, rng)
        else:
            self.keys = ScrambledZipfianGenerator(0, last, rng)

    def _value(self) -> bytes:
        self._value_index = (self._value_index + 1) % len(self.values)
        return self.values[self._value_index]

    def _key(self, index: int) -> bytes:
        return format_key(index, self.config.key_bytes)

    def next(self) -> Operation:
        kind = self.chooser.next()
        if kind == INSERT:
            index = self.inserts.next_index()
            return Operation(INSERT, self._key(index), self._value(), index=index)
        start = self.keys.next()
        if kind == SCAN:
            length = self.scan_length.next()
            end = start + length - 1
            return Operation(SCAN, self._key(start), end=self._key(end), limit=length)
        if kind == READ:
            return Operation(READ, self._key(start))
        return Operation(kind, self._key(start), self._value())

    def acknowledge(self, operation: Operation) -> None:
        if operation.kind == INSERT:
            self.inserts.acknowledge(operation.index)


#: Operations a ``ChunkedYcsbSource`` draws at a time: numpy's per-call overhead (a few us a call,
#: ~40 calls a chunk) amortized, at ~100 KB of pending operations per session.
CHUNK: Final = 1024


class ChunkedYcsbSource(YcsbSource):
    """A YCSB session with a "zipfian" (scrambled) or "uniform" key distribution, drawn ``CHUNK``
    operations at a time with numpy.

    Why: drawing one operation at a time in Python (operation kind, zipfian rank, FNV hash, key
    formatting) was 8-12% of a load process's CPU under YCSB-A with 64 sessions, CPU the measured
    store did not get. These distributions do not depend on acknowledgements, so a chunk can be
    drawn ahead: kinds by ``searchsorted`` on the cumulative weights, keys by the vectorized port of
    the scrambled zipfian (the scalar generator's values for the same uniform draws), scan lengths
    uniform, key bytes from a table shared by the process's sessions. Each session seeds its own
    numpy generator from its ``random.Random``, so a run stays reproducible from ``--seed``. An
    INSERT takes its record index from the ``InsertSequence`` when ``next()`` hands it out, not when
    its chunk was drawn, so indices are issued in order across a process's sessions, as before.
    """

    def __init__(self, config: WorkloadConfig, rng: random.Random, inserts: InsertSequence) -> None:
        import numpy as np

        super().__init__(config, rng, inserts)
        if self.spec.distribution not in ("zipfian", "uniform"):
            raise ValueError(f"the {self.spec.distribution!r} distribution is drawn one operation at a time")
        self._np_rng = np.random.default_rng(rng.getrandbits(128))
        # Scan ends reach records + max_scan_length - 2: the table covers every key but inserts'.
        span = config.records + self.spec.max_scan_length
        self._table = key_table(span, config.key_bytes) if span <= KEY_TABLE_MAX else None
        self._chunk_values = list(itertools.islice(itertools.cycle(self.values), CHUNK))
        self._has_scans = SCAN in self.chooser.labels
        self._pending: list[Operation | None] = []

    def _keys_of(self, indices: npt.NDArray[np.int64]) -> list[bytes]:
        table = self._table
        if table is None:
            return format_keys(indices, self.config.key_bytes)
        return [table[index] for index in indices.tolist()]

    def _draw_chunk(self) -> list[Operation | None]:
        """The next ``CHUNK`` operations, last first (``next()`` pops); ``None`` stands for an INSERT."""
        np_rng = self._np_rng
        labels = self.chooser.labels
        kinds = [labels[code] for code in self.chooser.indices_for(np_rng.random(CHUNK)).tolist()]
        if isinstance(self.keys, ScrambledZipfianGenerator):
            starts = self.keys.next_array(np_rng.random(CHUNK))
        else:
            starts = np_rng.integers(0, self.config.records, CHUNK)
        keys = self._keys_of(starts)
        values = self._chunk_values
        operations: list[Operation | None]
        if not self._has_scans:
            operations = [
                None if kind == INSERT else Operation(READ, key) if kind == READ else Operation(kind, key, value)
                for kind, key, value in zip(kinds, keys, values, strict=True)
            ]
        else:
            lengths = np_rng.integers(1, self.spec.max_scan_length + 1, CHUNK)
            ends = self._keys_of(starts + lengths - 1)
            operations = [
                None if kind == INSERT
                else Operation(SCAN, key, b"", (), end, length) if kind == SCAN
                else Operation(READ, key) if kind == READ
                else Operation(kind, key, value)
                for kind, key, value, end, length in zip(kinds, keys, values, ends, lengths.tolist(), strict=True)
            ]
        operations.reverse()
        return operations

    def next(self) -> Operation:
        # Chunked draws: 3.8 -> 0.7 us of CPU per YCSB-A next() (best of 7 x 200,000, 10,000 records).
        try:
            operation = self._pending.pop()
        except IndexError:
            self._pending = self._draw_chunk()
            operation = self._pending.pop()
        if operation is None:
            index = self.inserts.next_index()
            return Operation(INSERT, self._key(index), self._value(), index=index)
        return operation


class RotxSource(OperationSource):
    """The paper's RO-TX + PUT workload, or a PUT/RO-TX coin with ``write_ratio``."""

    def __init__(self, config: WorkloadConfig, rng: random.Random, keyspace: PartitionedKeyspace) -> None:
        self.config = config
        self.rng = rng
        self.chooser = PartitionKeyChooser(keyspace, rng)
        self.values = make_values(16, config.value_bytes, rng)
        self._count = 0

    def next(self) -> Operation:
        self._count += 1
        ratio = self.config.write_ratio
        is_put = (self._count % 2 == 0) if ratio is None else self.rng.random() < ratio
        if is_put:
            return Operation(PUT, self.chooser.random_key(), self.values[self._count % len(self.values)])
        keys = self.chooser.keys_on_distinct_partitions(self.config.rotx_partitions)
        return Operation(ROTX, keys=tuple(keys))


class MixedSource(OperationSource):
    """Another source's operations with counters and expiry mixed in (module docstring): an INCR
    with probability ``incr_ratio``, and with ``ttl_ms`` each write turned into a PUT_TTL (an
    INSERT keeps its record index, acknowledged as before)."""

    _WRITES = frozenset({PUT, INSERT, UPDATE})

    def __init__(self, inner: OperationSource, config: WorkloadConfig, rng: random.Random) -> None:
        self.inner = inner
        self.rng = rng
        self.incr_ratio = config.incr_ratio
        self.ttl_ms = config.ttl_ms
        self.counters = [COUNTER_PREFIX + format_key(index, config.key_bytes) for index in range(COUNTER_KEYS)]

    def next(self) -> Operation:
        rng = self.rng
        if self.incr_ratio and rng.random() < self.incr_ratio:
            return Operation(INCR, self.counters[rng.randrange(COUNTER_KEYS)])
        operation = self.inner.next()
        if self.ttl_ms and operation.kind in self._WRITES:
            return Operation(PUT_TTL, operation.key, operation.value, index=operation.index, ttl_ms=self.ttl_ms)
        return operation

    def acknowledge(self, operation: Operation) -> None:
        if operation.index >= 0:
            self.inner.acknowledge(Operation(INSERT, operation.key, index=operation.index))


def make_source(
    config: WorkloadConfig,
    rng: random.Random,
    inserts: InsertSequence,
    keyspace: PartitionedKeyspace | None,
) -> OperationSource:
    """The operation source of one session."""
    source: OperationSource
    if config.name == "rotx":
        if keyspace is None:
            raise ValueError("the rotx workload needs a partitioned keyspace")
        source = RotxSource(config, rng, keyspace)
    elif YCSB[config.name].distribution == "latest":
        source = YcsbSource(config, rng, inserts)
    else:
        source = ChunkedYcsbSource(config, rng, inserts)
    if config.incr_ratio or config.ttl_ms:
        return MixedSource(source, config, rng)
    return source
