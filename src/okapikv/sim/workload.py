"""Client workload of the simulator: zipfian keys, an operation mix, unique values.

Keys are ``k000000`` .. in one fixed-width namespace, so byte order is numeric order and a SCAN of
``n`` consecutive keys is a range. Popularity is zipfian (the paper's 0.99, section 5) over a
seeded shuffle of the keys, so the hot keys land on different partitions. Every written value is
``<process>.<counter>``: unique in the whole run, which makes the history *differentiated* (a read
names the write it read from), the precondition of the causal checker. The operations come from
the mix, or (``SimConfig.workload``) alternate a RO-TX and a PUT per client (the paper's workload),
or are a PUT with probability ``write_ratio``, else a RO-TX.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from itertools import accumulate

from okapikv.core.partitioning import partition_of
from okapikv.sim.config import SimConfig


def key_name(index: int) -> bytes:
    return b"k%06d" % index


class Workload:
    """Shared, immutable-after-construction tables; draws come from the run's single RNG."""

    __slots__ = ("rng", "keys", "key_partition", "_cdf", "_rank_to_key", "_ops", "_op_cdf",
                 "_by_partition", "num_partitions", "rotx_partitions", "scan_span", "mode", "write_ratio")

    def __init__(self, config: SimConfig, rng: random.Random) -> None:
        self.rng = rng
        count = config.num_keys
        self.num_partitions = config.num_partitions
        self.keys = [key_name(i) for i in range(count)]
        self.key_partition = [partition_of(key, config.num_partitions) for key in self.keys]
        weights = [1.0 / (rank ** config.zipf_theta) for rank in range(1, count + 1)]
        total = sum(weights)
        self._cdf = list(accumulate(w / total for w in weights))
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
        return self._rank_to_key[bisect_left(self._cdf, self.rng.random())]

    def rotx_keys(self) -> list[int]:
        """Keys of a RO-TX: one zipfian key from each of ``rotx_partitions`` distinct partitions."""
        wanted = self.rotx_partitions
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

    def keys_between(self, start: bytes, end: bytes) -> int:
        return bisect_right(self.keys, end) - bisect_left(self.keys, start)
