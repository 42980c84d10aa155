"""The YCSB generators: distribution shapes, key order, determinism."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from okapikv.bench.generators import (
    SCRAMBLED_ZETAN,
    DiscreteGenerator,
    InsertSequence,
    ScrambledZipfianGenerator,
    SkewedLatestGenerator,
    UniformGenerator,
    ZipfianGenerator,
    fnvhash64,
    format_key,
    key_width_for,
    make_values,
    zeta,
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
