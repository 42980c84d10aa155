"""Client workload of the simulator: zipfian keys, an operation mix, unique values.

Keys are ``k000000`` .. in one fixed-width namespace, so byte order is numeric order and a SCAN of
``n`` consecutive keys is a range. Popularity is zipfian (the paper's 0.99, section 5). The paper's
workloads (``paper``, ``write-ratio``) pick the partition uniformly and the key by zipf inside it,
as the paper does ("keys are chosen within each partition according to a zipf distribution") and
as the real bench does (``okapikv.bench.engine.keyspace``): every server gets the same share of the
load, so no one hot server sets a peak. The ``mix`` workload (the checkers' runs) draws from one
zipf over a seeded shuffle of all the keys, so the hot keys land on different partitions. Every written value is
``<process>.<counter>``: unique in the whole run, which makes the history *differentiated* (a read
names the write it read from), the precondition of the causal checker. The operations come from
the mix, or (``SimConfig.workload``) alternate a RO-TX and a PUT per client (the paper's workload),
or are a PUT with probability ``write_ratio``, else a RO-TX.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from itertools import accumulate

from okapikv.core.partitioning import partition_of
from okapikv.sim.config import SimConfig


def key_name(index: int) -> bytes:
    return b"k%06d" % index


class Workload:
    """Shared, immutable-after-construction tables; draws come from the run's single RNG."""

    __slots__ = ("rng", "keys", "key_partition", "_cdf", "_rank_to_key", "_ops", "_op_cdf",
                 "_by_partition", "num_partitions", "rotx_partitions", "scan_span", "mode", "write_ratio",
                 "_weights", "_per_partition")

    def __init__(self, config: SimConfig, rng: random.Random) -> None:
        self.rng = rng
        count = config.num_keys
        self.num_partitions = config.num_partitions
        self.keys = [key_name(i) for i in range(count)]
        self.key_partition = [partition_of(key, config.num_partitions) for key in self.keys]
        weights = [1.0 / (rank ** config.zipf_theta) for rank in range(1, count + 1)]
        #: cumulative zipf weights by rank: a partition of m keys draws from the first m
        self._weights = list(accumulate(weights))
        total = self._weights[-1]
        self._cdf = [w / total for w in self._weights]
        self._cdf[-1] = 1.0
        order = list(range(count))
        rng.shuffle(order)
        self._rank_to_key = order
        mix = [(name, weight) for name, weight in config.mix.weights() if weight > 0]
        if not mix:
            raise ValueError("the workload mix has no operation with a positive weight")
        self._ops = [name for name, _ in mix]
        op_total = sum(weight for _, weight in mix)
        self._op_cdf = list(accumulate(weight / op_total for _, weight in mix))
        self._op_cdf[-1] = 1.0
        self._by_partition: list[list[int]] = [[] for _ in range(config.num_partitions)]
        for index, partition in enumerate(self.key_partition):
            self._by_partition[partition].append(index)
        self.rotx_partitions = max(1, min(config.rotx_partitions, config.num_partitions))
        self.scan_span = max(1, config.scan_span)
        self.mode = config.workload
        self.write_ratio = config.write_ratio
        #: the paper's workloads: each partition's keys by zipf rank (a seeded shuffle, like the
        #: global ranks), partitions without keys left out of the uniform choice
        self._per_partition: list[list[int]] = []
        if self.mode != "mix":
            self._per_partition = [[] for _ in range(config.num_partitions)]
            for index in order:
                self._per_partition[self.key_partition[index]].append(index)

    def operation(self) -> str:
        return self._ops[bisect_left(self._op_cdf, self.rng.random())]

    def next_operation(self, turn: int) -> str:
        """A client's ``turn``-th operation (from 0) under the configured workload
        (``okapikv.sim.config.WORKLOADS``)."""
        mode = self.mode
        if mode == "mix":
            return self.operation()
        if mode == "paper":
            return "rotx" if turn % 2 == 0 else "put"
        return "put" if self.rng.random() < self.write_ratio else "rotx"

    def key_index(self) -> int:
        if self._per_partition:
            return self._key_in(self.rng.randrange(self.num_partitions))
        return self._rank_to_key[bisect_left(self._cdf, self.rng.random())]

    def _key_in(self, partition: int) -> int:
        """A key of ``partition`` by zipf over its keys (the paper's workloads); a partition the
        hash gave no key is replaced by a uniformly chosen one that has keys."""
        ranked = self._per_partition[partition]
        while not ranked:
            ranked = self._per_partition[self.rng.randrange(self.num_partitions)]
        size = len(ranked)
        return ranked[bisect_left(self._weights, self.rng.random() * self._weights[size - 1], 0, size - 1)]

    def rotx_keys(self) -> list[int]:
        """Keys of a RO-TX: one zipfian key from each of ``rotx_partitions`` distinct partitions
        (chosen uniformly under the paper's workloads, as the hot keys fall otherwise)."""
        wanted = self.rotx_partitions
        if self._per_partition:
            filled = [p for p in range(self.num_partitions) if self._per_partition[p]]
            return [self._key_in(p) for p in self.rng.sample(filled, min(wanted, len(filled)))]
        chosen: dict[int, int] = {}
        for _ in range(wanted * 20):
            index = self.key_index()
            chosen.setdefault(self.key_partition[index], index)
            if len(chosen) == wanted:
                break
        if len(chosen) < wanted:
            free = [p for p in range(self.num_partitions) if p not in chosen and self._by_partition[p]]
            for partition in self.rng.sample(free, min(wanted - len(chosen), len(free))):
                chosen[partition] = self.rng.choice(self._by_partition[partition])
        return list(chosen.values())

    def scan_range(self) -> tuple[int, int]:
        start = self.key_index()
        end = min(len(self.keys) - 1, start + self.rng.randrange(self.scan_span))
        return start, end

