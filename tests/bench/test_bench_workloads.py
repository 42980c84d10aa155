"""Workload mixes (YCSB A-F, the paper's RO-TX + PUT) and partition-targeted key selection."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from okapikv.bench.engine.generators import InsertSequence
from okapikv.bench.engine.keyspace import PartitionedKeyspace, PartitionKeyChooser
from okapikv.bench.engine.workloads import (
    INSERT,
    PUT,
    READ,
    RMW,
    ROTX,
    SCAN,
    UPDATE,
    YCSB,
    WorkloadConfig,
    make_source,
)
from okapikv.core.partitioning import partition_of

OPS = 20_000


def _mix(name: str) -> Counter[str]:
    config = WorkloadConfig(name, records=1000)
    source = make_source(config, random.Random(1), InsertSequence(1000, 0, 1), None)
    counts: Counter[str] = Counter()
    for _ in range(OPS):
        operation = source.next()
        counts[operation.kind] += 1
        source.acknowledge(operation)
    return counts


@pytest.mark.parametrize("name", sorted(YCSB))
def test_ycsb_mix_matches_the_standard_proportions(name: str) -> None:
    spec = YCSB[name]
    counts = _mix(name)
    for kind, share in ((READ, spec.read), (UPDATE, spec.update), (INSERT, spec.insert), (SCAN, spec.scan),
                        (RMW, spec.rmw)):
        assert counts[kind] / OPS == pytest.approx(share, abs=0.015), kind


def test_scans_cover_1_to_100_keys_from_the_start_key() -> None:
    config = WorkloadConfig("e", records=1000)
    source = make_source(config, random.Random(4), InsertSequence(1000, 0, 1), None)
    lengths = []
    for _ in range(5000):
        operation = source.next()
        if operation.kind == SCAN:
            span = int(operation.end) - int(operation.key) + 1
            assert span == operation.limit
            assert operation.key <= operation.end
            lengths.append(span)
    assert min(lengths) == 1 and max(lengths) == 100


def test_inserts_extend_the_key_space_and_latest_follows() -> None:
    config = WorkloadConfig("d", records=1000)
    inserts = InsertSequence(1000, 0, 1)
    source = make_source(config, random.Random(9), inserts, None)
    inserted = []
    for _ in range(4000):
        operation = source.next()
        if operation.kind == INSERT:
            inserted.append(int(operation.key))
        source.acknowledge(operation)
    assert inserted == list(range(1000, 1000 + len(inserted)))
    assert inserts.last_value() == 999 + len(inserted)


def test_read_modify_write_carries_a_value() -> None:
    config = WorkloadConfig("f", records=100, value_bytes=16)
    source = make_source(config, random.Random(2), InsertSequence(100, 0, 1), None)
    operations = [source.next() for _ in range(200)]
    assert all(len(op.value) == 16 for op in operations if op.kind == RMW)


@pytest.mark.parametrize("partitions,p", [(4, 1), (4, 2), (4, 4), (8, 3)])
def test_rotx_touches_exactly_p_distinct_partitions(partitions: int, p: int) -> None:
    keyspace = PartitionedKeyspace(2000, partitions, 8)
    chooser = PartitionKeyChooser(keyspace, random.Random(p))
    seen: Counter[int] = Counter()
    for _ in range(2000):
        keys = chooser.keys_on_distinct_partitions(p)
        touched = {partition_of(key, partitions) for key in keys}
        assert len(keys) == p and len(touched) == p
        assert all(int(key) < 2000 for key in keys)
        seen.update(touched)
    # partitions are chosen uniformly
    assert min(seen.values()) > 0.8 * max(seen.values())


def test_keyspace_groups_by_the_servers_partition_function() -> None:
    keyspace = PartitionedKeyspace(500, 3, 8)
    assert sum(len(indices) for indices in keyspace.by_partition) == 500
    for partition, indices in enumerate(keyspace.by_partition):
        assert all(partition_of(keyspace.key(partition, i), 3) == partition for i in range(len(indices)))
    chooser = PartitionKeyChooser(keyspace, random.Random(0))
    with pytest.raises(ValueError):
        chooser.keys_on_distinct_partitions(4)
    with pytest.raises(ValueError):
        PartitionedKeyspace(1, 4, 8)  # partitions left empty


def test_paper_workload_alternates_rotx_and_put() -> None:
    config = WorkloadConfig("rotx", records=1000, num_partitions=4, rotx_partitions=2)
    keyspace = PartitionedKeyspace(1000, 4, 8)
    source = make_source(config, random.Random(1), InsertSequence(1000, 0, 1), keyspace)
    kinds = [source.next().kind for _ in range(10)]
    assert kinds == [ROTX, PUT] * 5


def test_write_ratio_sets_the_share_of_puts() -> None:
    config = WorkloadConfig("rotx", records=1000, num_partitions=4, rotx_partitions=2, write_ratio=0.25)
    keyspace = PartitionedKeyspace(1000, 4, 8)
    source = make_source(config, random.Random(1), InsertSequence(1000, 0, 1), keyspace)
    counts = Counter(source.next().kind for _ in range(OPS))
    assert counts[PUT] / OPS == pytest.approx(0.25, abs=0.015)


def test_workload_config_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        WorkloadConfig("z")
    with pytest.raises(ValueError):
        WorkloadConfig("rotx", num_partitions=2, rotx_partitions=3)
    with pytest.raises(ValueError):
        WorkloadConfig("a", records=10**8, key_bytes=8)  # no room for inserts
    with pytest.raises(ValueError):
        WorkloadConfig("rotx", num_partitions=2, write_ratio=1.5)
