"""The key -> partition function: stable across processes and platforms, always in range."""

from __future__ import annotations

import subprocess
import sys
import zlib

import pytest

from okapikv.core.partitioning import partition_of

KEYS = [b"a", b"b", b"user:1", b"user:2", bytes(range(256)), b"\x00", b"k" * 1024]


@pytest.mark.parametrize("num_partitions", [1, 2, 3, 7, 32, 1000])
def test_in_range(num_partitions: int) -> None:
    for key in KEYS:
        assert 0 <= partition_of(key, num_partitions) < num_partitions


def test_one_partition_holds_everything() -> None:
    assert {partition_of(key, 1) for key in KEYS} == {0}


def test_is_crc32_mod_n() -> None:
    # The same function everywhere (docs/protocol.md, "Deployment and notation"): pin it, so a change is deliberate.
    assert partition_of(b"user:1", 32) == zlib.crc32(b"user:1") % 32
    assert partition_of(b"hello", 7) == 907060870 % 7


def test_stable_across_processes() -> None:
    # Unlike hash(), CRC-32 does not depend on PYTHONHASHSEED.
    code = f"from okapikv.core.partitioning import partition_of; print([partition_of(k, 13) for k in {KEYS!r}])"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2")
    }
    assert outputs == {f"{[partition_of(k, 13) for k in KEYS]}\n"}


def test_spreads_keys() -> None:
    counts = [0] * 8
    for index in range(8_000):
        counts[partition_of(f"key{index}".encode(), 8)] += 1
    assert min(counts) > 800
