"""The simulator's paper workloads load every partition alike (``okapikv.sim.workload``): the
partition is chosen uniformly and the key by zipf(0.99) inside it, as in the paper (section 5) and
the real bench (``okapikv.bench.engine.keyspace``). One zipf over all the keys would make the hot
key's server set every simulated peak."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from okapikv.sim.config import SimConfig
from okapikv.sim.workload import Workload

PARTITIONS = 32
DRAWS = 200_000


@pytest.mark.parametrize("workload", ["paper", "write-ratio"])
def test_the_paper_workloads_load_every_partition_within_a_few_percent_of_uniform(workload: str) -> None:
    config = SimConfig(num_partitions=PARTITIONS, workload=workload, rotx_partitions=2)
    draws = Workload(config, random.Random(7))
    load: Counter[int] = Counter()
    for turn in range(DRAWS):
        keys = [draws.key_index()] if turn % 2 else draws.rotx_keys()
        load.update(draws.key_partition[index] for index in keys)
    mean = sum(load.values()) / PARTITIONS
    assert len(load) == PARTITIONS
    assert max(load.values()) / mean < 1.04 and min(load.values()) / mean > 0.96, sorted(load.values())


def test_keys_inside_a_partition_stay_zipfian() -> None:
    """The hottest key of a partition takes far more than its uniform share of that partition."""
    config = SimConfig(num_partitions=4, workload="paper", keys_per_partition=64)
    draws = Workload(config, random.Random(3))
    picks = Counter(draws.key_index() for _ in range(40_000))
    by_partition: dict[int, Counter[int]] = {}
    for index, count in picks.items():
        by_partition.setdefault(draws.key_partition[index], Counter())[index] = count
    for counts in by_partition.values():
        share = max(counts.values()) / sum(counts.values())
        assert share > 5 / len(counts), (share, len(counts))
