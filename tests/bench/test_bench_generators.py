"""The YCSB generators: distribution shapes, key order, determinism; the vectorized (chunked)
generators against the scalar ones they port."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from okapikv.bench.engine import workloads
from okapikv.bench.engine.generators import (
    FNV_OFFSET_BASIS_64,
    FNV_PRIME_64,
    SCRAMBLED_ZETAN,
    DiscreteGenerator,
    InsertSequence,
    ScrambledZipfianGenerator,
    SkewedLatestGenerator,
    UniformGenerator,
    ZipfianGenerator,
    fnvhash64,
    fnvhash64_array,
    format_key,
    format_keys,
    key_table,
    key_width_for,
    make_values,
    zeta,
)
from okapikv.bench.engine.workloads import (
    INSERT,
    READ,
    SCAN,
    YCSB,
    ChunkedYcsbSource,
    Operation,
    WorkloadConfig,
    YcsbSource,
    YcsbSpec,
    make_source,
)

SAMPLES = 100_000


def test_fnvhash64_is_ycsb_fnv1a_over_eight_bytes() -> None:
    # FNV-1a over the 8 little-endian bytes of the value, 64-bit wrap-around, then abs() of the
    # signed (Java long) result: pinned so a refactor cannot silently change every key choice.
    assert fnvhash64(0) == 6284781860667377211
    assert fnvhash64(1) == 8517097267634966620
    assert fnvhash64(12345) == 1792800413050876852
    assert all(0 <= fnvhash64(value) < 1 << 63 for value in range(1000))


def test_zeta_matches_direct_sum() -> None:
    direct = sum(1 / i**0.99 for i in range(1, 5001))
    assert zeta(0, 5000, 0.99) == pytest.approx(direct, rel=1e-12)
    # incremental extension (used when the item count grows) equals the full sum
    assert zeta(2000, 5000, 0.99, zeta(0, 2000, 0.99)) == pytest.approx(direct, rel=1e-12)


def test_zipfian_frequencies_follow_rank_to_the_minus_theta() -> None:
    items = 1000
    generator = ZipfianGenerator(0, items - 1, random.Random(7))
    counts = Counter(generator.next() for _ in range(SAMPLES))
    assert min(counts) >= 0 and max(counts) <= items - 1
    normalizer = zeta(0, items, 0.99)
    # The head of the distribution: the algorithm is exact for ranks 0 and 1.
    for rank in (0, 1):
        expected = (1 / (rank + 1) ** 0.99) / normalizer
        assert counts[rank] / SAMPLES == pytest.approx(expected, rel=0.05)
    # Popularity decreases with rank, roughly as rank^-0.99 (log-log slope between ranks 1 and 50).
    assert counts[0] > counts[1] > counts[3] > counts[20]
    band_low = sum(counts[r] for r in range(8, 12)) / 4
    band_high = sum(counts[r] for r in range(80, 120)) / 40
    slope = math.log(band_high / band_low) / math.log(100 / 10)
    assert -1.3 < slope < -0.7


def test_zipfian_stays_in_range_with_tiny_item_counts() -> None:
    for items in (1, 2, 3):
        generator = ZipfianGenerator(5, 5 + items - 1, random.Random(1))
        assert {generator.next() for _ in range(2000)} <= set(range(5, 5 + items))


def test_scrambled_zipfian_is_skewed_but_spread_over_the_key_space() -> None:
    items = 1000
    generator = ScrambledZipfianGenerator(0, items - 1, random.Random(3))
    counts = Counter(generator.next() for _ in range(SAMPLES))
    assert set(counts) <= set(range(items))
    top = [value for value, _ in counts.most_common(10)]
    # skewed: the hottest key gets item 0 of YCSB's 10^10-item zipfian, 1/zeta = 3.8% (uniform: 0.1%)
    assert counts[top[0]] / SAMPLES == pytest.approx(1 / SCRAMBLED_ZETAN, rel=0.1)
    # scrambled: the hot keys are not the first keys of the space (scans and partitions spread)
    assert sorted(top) != list(range(10))
    assert max(top) > items // 4


def test_latest_favours_the_newest_acknowledged_key() -> None:
    sequence = InsertSequence(first=1000, worker_index=0, num_workers=1)
    generator = SkewedLatestGenerator(sequence.last_value, random.Random(5))
    counts = Counter(generator.next() for _ in range(20_000))
    assert max(counts) == 999 and min(counts) >= 0
    assert counts.most_common(1)[0][0] == 999
    assert counts[999] > counts[998] > counts[990]
    # after inserts are acknowledged, the newest key moves up
    for _ in range(5):
        sequence.acknowledge(sequence.next_index())
    assert Counter(generator.next() for _ in range(5000)).most_common(1)[0][0] == 1004


def test_insert_sequences_of_different_workers_never_collide() -> None:
    workers = [InsertSequence(100, index, 3) for index in range(3)]
    issued = [sequence.next_index() for _ in range(50) for sequence in workers]
    assert len(issued) == len(set(issued))
    assert min(issued) == 100


def test_uniform_and_discrete_generators() -> None:
    rng = random.Random(11)
    uniform = UniformGenerator(1, 100, rng)
    values = [uniform.next() for _ in range(20_000)]
    assert min(values) == 1 and max(values) == 100
    assert sum(values) / len(values) == pytest.approx(50.5, rel=0.03)
    chooser = DiscreteGenerator([("read", 0.95), ("update", 0.05), ("never", 0.0)], rng)
    counts = Counter(chooser.next() for _ in range(SAMPLES))
    assert counts["read"] / SAMPLES == pytest.approx(0.95, abs=0.01)
    assert "never" not in counts
    with pytest.raises(ValueError):
        DiscreteGenerator([("x", 0.0)], rng)


def test_fixed_width_keys_sort_in_insertion_order() -> None:
    indices = random.Random(2).sample(range(10**7), 2000)
    keys = [format_key(index, 8) for index in indices]
    assert all(len(key) == 8 and key.isdigit() for key in keys)
    assert sorted(keys) == [format_key(index, 8) for index in sorted(indices)]
    assert format_key(42, 8) == b"00000042"
    assert key_width_for(1000) == 3 and key_width_for(1001) == 4
    with pytest.raises(ValueError):
        format_key(10**8, 8)
    with pytest.raises(ValueError):
        format_key(-1, 8)


def test_values_are_alphanumeric_of_the_requested_size() -> None:
    values = make_values(16, 8, random.Random(1))
    assert len(values) == 16 and all(len(value) == 8 and value.isalnum() for value in values)


# ------------------------------------------------------------------ vectorized against scalar


class _Replay(random.Random):
    """Hands out the given uniform draws, so a scalar generator sees what a vectorized one does."""

    def __init__(self, draws: np.ndarray) -> None:
        super().__init__(0)
        self._draws = iter(draws.tolist())

    def random(self) -> float:
        return next(self._draws)


def _draws(count: int, seed: int) -> np.ndarray:
    draws = np.random.default_rng(seed).random(count)
    # the edges of the algorithm's branches: 0, around 1/zetan and (1 + 0.5^theta)/zetan, near 1
    edges = [0.0, 1e-300, 1 / SCRAMBLED_ZETAN, np.nextafter(1 / SCRAMBLED_ZETAN, 0), (1 + 0.5**0.99) / SCRAMBLED_ZETAN,
             np.nextafter((1 + 0.5**0.99) / SCRAMBLED_ZETAN, 0), 0.5, np.nextafter(1.0, 0)]
    draws[: len(edges)] = edges
    return draws


def _fnv1a_unsigned(value: int) -> int:
    hashval = FNV_OFFSET_BASIS_64
    for _ in range(8):
        hashval = ((hashval ^ (value & 0xFF)) * FNV_PRIME_64) & ((1 << 64) - 1)
        value >>= 8
    return hashval


def test_vectorized_fnvhash64_equals_fnvhash64() -> None:
    rng = np.random.default_rng(1)
    values = np.concatenate([
        np.arange(20_000, dtype=np.uint64),
        rng.integers(0, 10**10 + 1, 20_000, dtype=np.uint64),  # the scrambled zipfian's ranks
        rng.integers(1 << 63, (1 << 64) - 1, 20_000, dtype=np.uint64, endpoint=True),  # top bit set
        np.array([1 << 63, (1 << 63) - 1, (1 << 64) - 1], dtype=np.uint64),
    ])
    hashed = fnvhash64_array(values)
    assert hashed.dtype == np.uint64 and hashed.shape == values.shape
    assert hashed.tolist() == [fnvhash64(value) for value in values.tolist()]
    # both sides of Java's abs() of the signed result were exercised
    tops = {_fnv1a_unsigned(value) >> 63 for value in values[:2000].tolist()}
    assert tops == {0, 1}
    # a Java long's negative values hash as their two's complement bytes, as fnvhash64 reads them
    negative = np.array([-1, -12345, -(1 << 63)], dtype=np.int64)
    assert fnvhash64_array(negative).tolist() == [fnvhash64(value) for value in negative.tolist()]


@pytest.mark.parametrize("items", [1, 2, 3, 1000, 10_000, 123_457])
def test_vectorized_zipfian_equals_scalar_for_the_same_draws(items: int) -> None:
    draws = _draws(50_000, items)
    scalar = ZipfianGenerator(7, 7 + items - 1, _Replay(draws))
    vectorized = ZipfianGenerator(7, 7 + items - 1, random.Random(0))
    assert vectorized.next_array(draws).tolist() == [scalar.next() for _ in range(len(draws))]


@pytest.mark.parametrize("items", [1, 2, 1000, 10_000, 1_000_000])
def test_vectorized_scrambled_zipfian_equals_scalar_for_the_same_draws(items: int) -> None:
    draws = _draws(100_000, items)
    scalar = ScrambledZipfianGenerator(5, 5 + items - 1, _Replay(draws))
    vectorized = ScrambledZipfianGenerator(5, 5 + items - 1, random.Random(0))
    values = vectorized.next_array(draws)
    assert values.dtype == np.int64
    assert values.tolist() == [scalar.next() for _ in range(len(draws))]


def test_vectorized_scrambled_zipfian_has_the_scalar_hot_keys() -> None:
    # independent draws (numpy's generator against random.Random): the same popularity of the top keys
    items = 1000
    scalar = ScrambledZipfianGenerator(0, items - 1, random.Random(3))
    scalar_counts = Counter(scalar.next() for _ in range(SAMPLES))
    vectorized = ScrambledZipfianGenerator(0, items - 1, random.Random(0))
    vector_counts = Counter(vectorized.next_array(np.random.default_rng(3).random(SAMPLES)).tolist())
    for key, count in scalar_counts.most_common(5):
        assert vector_counts[key] == pytest.approx(count, rel=0.15), key


def test_vectorized_discrete_choice_equals_next() -> None:
    chooser = DiscreteGenerator([("read", 0.5), ("update", 0.25), ("never", 0.0), ("scan", 0.25)], random.Random(0))
    draws = np.concatenate([np.random.default_rng(2).random(10_000), np.array(chooser.cumulative[:-1]), [0.0]])
    replayed = DiscreteGenerator([("read", 0.5), ("update", 0.25), ("never", 0.0), ("scan", 0.25)], _Replay(draws))
    labels = [chooser.labels[index] for index in chooser.indices_for(draws).tolist()]
    assert labels == [replayed.next() for _ in range(len(draws))]


def test_vectorized_key_formatting_equals_format_key() -> None:
    indices = np.concatenate([np.arange(1000), np.random.default_rng(4).integers(0, 10**8, 5000), [10**8 - 1]])
    assert format_keys(indices, 8) == [format_key(index, 8) for index in indices.tolist()]
    assert format_keys(np.array([42]), 25) == [format_key(42, 25)]
    assert format_keys(np.array([], dtype=np.int64), 8) == []
    assert key_table(1234, 5) == [format_key(index, 5) for index in range(1234)]
    with pytest.raises(ValueError):
        format_keys(np.array([10**8]), 8)
    with pytest.raises(ValueError):
        format_keys(np.array([-1]), 8)
    with pytest.raises(ValueError):
        key_table(10**3 + 1, 3)


# ------------------------------------------------------------------ chunked YCSB sources


def _source(name: str, seed: int, records: int = 1000) -> workloads.OperationSource:
    return make_source(WorkloadConfig(name, records=records), random.Random(seed), InsertSequence(records, 0, 1), None)


def _fields(operation: Operation) -> tuple[object, ...]:
    return (operation.kind, operation.key, operation.value, operation.keys, operation.end, operation.limit,
            operation.index)


def test_sources_are_chunked_except_latest() -> None:
    for name, spec in YCSB.items():
        expected = YcsbSource if spec.distribution == "latest" else ChunkedYcsbSource
        assert type(_source(name, 1)) is expected, name


@pytest.mark.parametrize("name", ["a", "e", "f"])
def test_chunked_source_is_reproducible_from_its_seed(name: str) -> None:
    first, second, other = _source(name, 1), _source(name, 1), _source(name, 2)
    count = 3 * workloads.CHUNK + 5
    ops = [_fields(first.next()) for _ in range(count)]
    assert ops == [_fields(second.next()) for _ in range(count)]
    assert ops != [_fields(other.next()) for _ in range(count)]


def test_chunked_source_keys_follow_the_scalar_distribution() -> None:
    config = WorkloadConfig("c", records=1000)
    chunked = ChunkedYcsbSource(config, random.Random(5), InsertSequence(1000, 0, 1))
    scalar = YcsbSource(config, random.Random(5), InsertSequence(1000, 0, 1))
    chunked_counts = Counter(chunked.next().key for _ in range(SAMPLES))
    scalar_counts = Counter(scalar.next().key for _ in range(SAMPLES))
    assert set(chunked_counts) <= {format_key(index, 8) for index in range(1000)}
    for key, count in scalar_counts.most_common(5):
        assert chunked_counts[key] == pytest.approx(count, rel=0.15), key


def test_chunked_source_with_a_uniform_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(YCSB, "c", YcsbSpec("c", read=1.0, distribution="uniform"))
    source = _source("c", 3)
    assert type(source) is ChunkedYcsbSource
    counts = Counter(int(source.next().key) for _ in range(SAMPLES))
    assert min(counts) == 0 and max(counts) == 999
    assert max(counts.values()) < 3 * SAMPLES / 1000  # no hot keys


def test_chunked_source_formats_keys_without_a_table_beyond_the_table_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    with_table = _source("e", 8)
    expected = [_fields(with_table.next()) for _ in range(2 * workloads.CHUNK)]
    monkeypatch.setattr(workloads, "KEY_TABLE_MAX", 0)
    source = _source("e", 8)
    assert isinstance(source, ChunkedYcsbSource) and source._table is None
    assert [_fields(source.next()) for _ in range(2 * workloads.CHUNK)] == expected


def test_chunked_scans_and_inserts() -> None:
    inserts = InsertSequence(1000, 0, 1)
    config = WorkloadConfig("e", records=1000)
    sessions = [ChunkedYcsbSource(config, random.Random(seed), inserts) for seed in (1, 2)]
    inserted: list[int] = []
    for step in range(4 * workloads.CHUNK):
        operation = sessions[step % 2].next()
        if operation.kind == INSERT:
            # the index is taken when the operation is handed out: in order across the sessions
            assert operation.key == format_key(operation.index, 8) and len(operation.value) == 8
            inserted.append(operation.index)
            sessions[step % 2].acknowledge(operation)
        else:
            assert operation.kind == SCAN
            assert 1 <= operation.limit <= 100
            assert int(operation.end) - int(operation.key) + 1 == operation.limit
            assert int(operation.key) < 1000
    assert inserted == list(range(1000, 1000 + len(inserted))) and inserted
    assert inserts.last_value() == inserted[-1]


def test_chunked_operations_are_fresh_objects() -> None:
    source = _source("a", 1)
    operations = [source.next() for _ in range(2 * workloads.CHUNK)]
    assert len({id(operation) for operation in operations}) == len(operations)
    assert all(operation.value == b"" for operation in operations if operation.kind == READ)
    assert all(len(operation.value) == 8 for operation in operations if operation.kind != READ)
