"""Which partition holds a key: a stable hash of the key bytes, the same in every DC and process.

docs/protocol.md, "Deployment and notation": p(n, m) holds partition n of DC m; every DC splits the keyspace the
same way, so the replicas of a key are exactly the servers p(n, i) for every DC i.

Invariants (tested in ``tests/unit/test_partitioning.py``): the result is in ``0..N-1``; it depends
only on the key bytes and N (not on ``PYTHONHASHSEED``, the process or the platform). CRC-32 is in the
standard library, stable across runs and platforms (unlike ``hash``), and fast.
"""

from __future__ import annotations

import zlib


def partition_of(key: bytes, num_partitions: int) -> int:
    return zlib.crc32(key) % num_partitions
