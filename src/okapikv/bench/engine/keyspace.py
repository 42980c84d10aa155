"""Partition-aware key selection for the paper's workloads (Okapi, section 5).

The paper's RO-TX "involves p partitions": it reads one key from each of ``p`` distinct partitions
chosen uniformly at random, and "keys are chosen within each partition according to a zipf
distribution with parameter 0.99". To do that we must know which record lives on which partition,
so this module groups record indices by ``okapikv.core.partitioning.partition_of`` (the servers'
own function: a different hash here would silently make a "2-partition" transaction touch 1 or 3).

Every process rebuilds the same grouping from the same inputs (it is deterministic), which is
cheaper than pickling it to each worker.
"""

from __future__ import annotations

import random
from array import array

from okapikv.bench.engine.generators import ScrambledZipfianGenerator, format_key
from okapikv.core.partitioning import partition_of


class PartitionedKeyspace:
    """Record keys ``0 .. records - 1`` grouped by the partition that holds them."""

    def __init__(self, records: int, num_partitions: int, key_bytes: int) -> None:
        if num_partitions < 1:
            raise ValueError("num_partitions must be at least 1")
        self.records = records
        self.num_partitions = num_partitions
        self.key_bytes = key_bytes
        self.by_partition: list[array[int]] = [array("q") for _ in range(num_partitions)]
        for index in range(records):
            self.by_partition[partition_of(format_key(index, key_bytes), num_partitions)].append(index)
        empty = [partition for partition, indices in enumerate(self.by_partition) if not indices]
        if empty:
            raise ValueError(
                f"{records} records leave partitions {empty} of {num_partitions} empty: use more records"
            )

    def key(self, partition: int, position: int) -> bytes:
        """The key at ``position`` in ``partition``'s list."""
        return format_key(self.by_partition[partition][position], self.key_bytes)


class PartitionKeyChooser:
    """One session's chooser: a scrambled-zipfian key within any given partition."""

    def __init__(self, keyspace: PartitionedKeyspace, rng: random.Random) -> None:
        self.keyspace = keyspace
        self.rng = rng
        self._zipfians = [
            ScrambledZipfianGenerator(0, len(indices) - 1, rng) for indices in keyspace.by_partition
        ]

    def key_in(self, partition: int) -> bytes:
        return self.keyspace.key(partition, self._zipfians[partition].next())

    def random_key(self) -> bytes:
        """A key of a partition chosen uniformly (the paper's PUT)."""
        return self.key_in(self.rng.randrange(self.keyspace.num_partitions))

    def keys_on_distinct_partitions(self, count: int) -> list[bytes]:
        """One key from each of ``count`` distinct partitions chosen uniformly at random."""
        if not 1 <= count <= self.keyspace.num_partitions:
            raise ValueError(
                f"a RO-TX over {count} partitions needs 1..{self.keyspace.num_partitions} partitions"
            )
        partitions = self.rng.sample(range(self.keyspace.num_partitions), count)
        return [self.key_in(partition) for partition in partitions]
