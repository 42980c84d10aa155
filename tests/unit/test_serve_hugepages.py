"""``okapikv.serve.hugepages``: which mappings are the heap (thread stacks are not), which of its
huge-page blocks are in memory enough to collapse, the kernel's mode read, and a collapse that
changes nothing the process holds."""

from __future__ import annotations

import ctypes
import errno
import mmap
import sys
from pathlib import Path

import pytest

from okapikv.serve import hugepages
from okapikv.serve.hugepages import HUGE_PAGE, HeapAdvisor, Mapping, heap_ranges, resident_huge_pages, thp_mode

MAPS = """\
55d0c0000000-55d0c0021000 r--p 00000000 fd:00 1234   /usr/bin/python3.11
55d0c1000000-55d0c1400000 rw-p 00000000 00:00 0      [heap]
7f0000000000-7f0000001000 ---p 00000000 00:00 0
7f0000001000-7f0000801000 rw-p 00000000 00:00 0
7f1000000000-7f1000600000 rw-p 00000000 00:00 0
7f2000000000-7f2000100000 rw-p 00000000 00:00 0
7f3000000000-7f3000400000 rw-s 00000000 00:01 77     /dev/shm/x
7f4000000000-7f4000400000 r--p 00000000 fd:00 99     /usr/lib/libc.so
7ffc00000000-7ffc00800000 rw-p 00000000 00:00 0      [stack]
"""


def test_the_heap_is_the_large_private_anonymous_mappings_but_thread_stacks() -> None:
    maps = [Mapping.parse(line) for line in MAPS.splitlines()]
    assert heap_ranges(maps) == [(0x55D0C1000000, 0x55D0C1400000), (0x7F1000000000, 0x7F1000600000)]


def test_the_kernel_mode_is_the_bracketed_word(tmp_path: Path) -> None:
    setting = tmp_path / "enabled"
    setting.write_text("always [madvise] never\n")
    assert thp_mode(setting) == "madvise"
    setting.write_text("garbled\n")
    assert thp_mode(setting) == "never"
    assert thp_mode(tmp_path / "absent") == "never"


@pytest.mark.skipif(sys.platform != "linux", reason="mincore and madvise of Linux")
def test_only_blocks_mostly_in_memory_are_collapsible() -> None:
    libc = HeapAdvisor()._load()
    assert libc is not None
    area = mmap.mmap(-1, 4 * HUGE_PAGE)
    try:
        start = ctypes.addressof(ctypes.c_char.from_buffer(area))
        aligned = -(-start // HUGE_PAGE) * HUGE_PAGE
        assert resident_huge_pages(libc, start, start + 4 * HUGE_PAGE) == []  # nothing touched yet
        for offset in range(aligned - start, aligned - start + HUGE_PAGE, mmap.PAGESIZE):
            area[offset] = 1  # one whole block in memory
        for offset in range(aligned - start + HUGE_PAGE, aligned - start + HUGE_PAGE + HUGE_PAGE // 2, mmap.PAGESIZE):
            area[offset] = 1  # the next one half
        assert resident_huge_pages(libc, start, start + 4 * HUGE_PAGE) == [aligned]
    finally:
        area.close()


def test_a_collapse_keeps_every_object_and_does_nothing_where_huge_pages_are_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = {b"%08d" % index: (b"v" * 8, index) for index in range(200_000)}
    advisor = HeapAdvisor()
    collapsed = advisor.collapse()
    assert collapsed >= 0 and advisor.collapsed_bytes == collapsed
    assert all(store[b"%08d" % index] == (b"v" * 8, index) for index in range(0, 200_000, 997))
    monkeypatch.setattr(hugepages, "thp_mode", lambda: "never")
    assert HeapAdvisor().collapse() == 0


class FakeLibc:
    """``mincore`` says every page is in memory; ``madvise`` fails with ``error`` (0: succeeds)."""

    def __init__(self, error: int) -> None:
        self.error = error
        self.collapses: list[int] = []

    def mincore(self, start: int, length: int, vector: ctypes.Array[ctypes.c_char]) -> int:
        ctypes.memset(vector, 1, length // mmap.PAGESIZE)
        return 0

    def madvise(self, start: int, length: int, advice: int) -> int:
        self.collapses.append(start)
        if self.error:
            ctypes.set_errno(self.error)
            return -1
        return 0


@pytest.mark.skipif(sys.platform != "linux", reason="the advisor acts on Linux only")
def test_blocks_are_collapsed_once_refused_ones_retried_and_an_old_kernel_stops_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    monkeypatch.setattr(hugepages, "thp_mode", lambda: "madvise")
    monkeypatch.setattr(hugepages, "MAPS", maps)
    advisor, libc = HeapAdvisor(), FakeLibc(0)
    advisor._libc = libc  # type: ignore[assignment]
    assert advisor.collapse() == 5 * HUGE_PAGE  # [heap]: 2 blocks; the 6 MiB mapping: 3; not the stack's
    assert advisor.collapse() == 0 and len(libc.collapses) == 5  # each block once
    busy = HeapAdvisor()
    busy._libc = FakeLibc(errno.EAGAIN)  # type: ignore[assignment]
    assert busy.collapse() == 0 and busy.failures == 5 and not busy.collapsed
    assert busy.collapse() == 0 and busy.failures == 10  # tried again
    old = HeapAdvisor()
    old._libc = old_libc = FakeLibc(errno.EINVAL)  # type: ignore[assignment]
    assert old.collapse() == 0 and old.unsupported and len(old_libc.collapses) == 1
    assert old.collapse() == 0 and len(old_libc.collapses) == 1  # never asked again
