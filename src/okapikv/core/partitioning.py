"""Which partition holds a key: a stable hash of the key bytes, the same in every DC and process.

CRC-32 is in the standard library, stable across runs and platforms (unlike ``hash``), and fast.
"""

from __future__ import annotations

import zlib


def partition_of(key: bytes, num_partitions: int) -> int:
    return zlib.crc32(key) % num_partitions
