"""The server's heap on transparent huge pages, so that a large store does not pay a TLB miss per object.

A store of 1,000,000 keys is about 300 MB of small Python objects (the index's table, each key's
bytes, its ``Version``, the value's bytes and the timestamp's int), and an operation touches a few
of them at random. On 4 KiB pages each such touch is also a TLB miss, and in a virtual machine a
miss walks two page tables (the guest's and the host's). Measured in one process (the native path
of one partition under YCSB-A, docs/benchmarks.md "Durable YCSB-A at 1,000,000 records:
back-to-back windows and huge pages"), the CPU per operation at 1,000,000 keys was 8.7-12.0 us on
4 KiB pages and 7.2-8.7 us right after the heap's collapse, where 10,000 keys take 7.1-8.6 us.

CPython maps its 1 MiB arenas with plain ``mmap``; where the kernel's THP mode is ``madvise`` (the
default of many distributions) such memory never gets huge pages by itself. ``HeapAdvisor.collapse``
collapses (``MADV_COLLAPSE``, Linux 6.1 and later) every 2 MiB block of the private anonymous
read-write mappings that is at least ``RESIDENT_SHARE`` in memory (``mincore``) and was not
collapsed before: the memory it costs is the few pages missing from such blocks (mappings are not
advised with ``MADV_HUGEPAGE``, so later faults keep taking small pages and no fault waits for a
compaction). Thread stacks are left alone (a mapping right above a guard page). The server runs
it on a worker thread once it serves and whenever its store grew (``okapikv.serve.collector``):
``madvise`` runs without the interpreter lock. Where the mode is ``never``, the kernel lacks
``MADV_COLLAPSE`` or the platform is not Linux, it does nothing; a block refused for want of a free
huge page is tried again the next time.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
HUGE_PAGE = 2 << 20
SMALL_PAGE = 4096
#: the share of a block's small pages in memory for it to be collapsed (``resident_huge_pages``)
RESIDENT_SHARE = 7 / 8
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")
MAPS = Path("/proc/self/maps")

log = logging.getLogger("okapikv.server")


@dataclass(slots=True)
class Mapping:
    """One line of ``/proc/self/maps``: its range, permissions and path (empty when anonymous)."""

    start: int
    end: int
    perms: str
    path: str

    @classmethod
    def parse(cls, line: str) -> Mapping:
        fields = line.split(maxsplit=5)
        start, end = (int(bound, 16) for bound in fields[0].split("-"))
        return cls(start, end, fields[1], fields[5].strip() if len(fields) > 5 else "")


def heap_ranges(maps: list[Mapping]) -> list[tuple[int, int]]:
    """The private anonymous read-write mappings of at least a huge page, but thread stacks (a
    mapping whose lower neighbour is an inaccessible guard page ending where it starts)."""
    found = []
    below: Mapping | None = None
    for mapping in maps:
        guarded = below is not None and below.end == mapping.start and below.perms.startswith("---")
        if (mapping.perms == "rw-p" and mapping.path in ("", "[heap]") and not guarded
                and mapping.end - mapping.start >= HUGE_PAGE):
            found.append((mapping.start, mapping.end))
        below = mapping
    return found


def thp_mode(path: Path = THP_MODE) -> str:
    """The kernel's THP mode (``always``, ``madvise`` or ``never``); ``never`` where unknown."""
    try:
        text = path.read_text()
    except OSError:
        return "never"
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else "never"


@dataclass
class HeapAdvisor:
    """``collapse`` with what it collapsed so far (each huge page's address, while its mapping stands)."""

    collapsed: set[int] = field(default_factory=set)
    collapsed_bytes: int = 0
    failures: int = 0
    unsupported: bool = False  # the kernel refused MADV_COLLAPSE as unknown (before Linux 6.1)
    _libc: ctypes.CDLL | None = None

    def enabled(self) -> bool:
        return sys.platform == "linux" and not self.unsupported and thp_mode() != "never"

    def collapse(self) -> int:
        """Collapse every huge page's worth of the heap that is mostly in memory
        (``resident_huge_pages``) and not collapsed yet (module docstring); the bytes newly
        collapsed."""
        if not self.enabled():
            return 0
        libc = self._load()
        if libc is None:
            return 0
        try:
            maps = [Mapping.parse(line) for line in MAPS.read_text().splitlines() if line.strip()]
        except (OSError, ValueError):
            return 0
        ranges = heap_ranges(maps)
        self.collapsed = {page for page in self.collapsed if any(start <= page < end for start, end in ranges)}
        newly = failures = 0
        for start, end in ranges:
            for page in resident_huge_pages(libc, start, end):
                if page in self.collapsed:
                    continue
                self.collapsed.add(page)
                if libc.madvise(page, HUGE_PAGE, MADV_COLLAPSE) == 0:
                    newly += HUGE_PAGE
                elif ctypes.get_errno() == errno.EINVAL:  # a kernel without MADV_COLLAPSE: nothing to do
                    self.collapsed.discard(page)
                    self.unsupported = True
                    return 0
                else:  # EAGAIN, ENOMEM: no huge page free now; tried again once the heap grows
                    self.collapsed.discard(page)
                    failures += 1
        self.collapsed_bytes += newly
        self.failures += failures
        if newly or failures:
            log.info("heap: %d MiB more on huge pages, %d MiB in all (%d blocks refused)", newly >> 20,
                     self.collapsed_bytes >> 20, failures,
                     extra={"event": "huge_pages", "collapsed_bytes": self.collapsed_bytes, "refused": failures})
        return newly

    def _load(self) -> ctypes.CDLL | None:
        if self._libc is None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
                libc.madvise.restype = ctypes.c_int
                libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
                libc.mincore.restype = ctypes.c_int
            except (OSError, AttributeError):
                return None
            self._libc = libc
        return self._libc


def resident_huge_pages(libc: ctypes.CDLL, start: int, end: int) -> list[int]:
    """The huge-page-aligned blocks inside ``[start, end)`` of which at least ``RESIDENT_SHARE`` of
    the small pages are in memory (``mincore``): collapsing one costs at most the rest in memory.
    Why not all of them: CPython's 1 MiB arenas leave a few pages of each untouched, so most blocks
    of a loaded heap are 7/8 to all but a page resident, and few in between (1,000,000 keys: 61 of
    159 blocks wholly resident, 65 more at 7/8 or above, 32 under 1/8)."""
    first = -(-start // HUGE_PAGE) * HUGE_PAGE
    last = end // HUGE_PAGE * HUGE_PAGE
    if last <= first:
        return []
    small = HUGE_PAGE // SMALL_PAGE
    vector = ctypes.create_string_buffer((last - first) // SMALL_PAGE)
    if libc.mincore(first, last - first, vector) != 0:
        return []
    flags = vector.raw
    return [first + index * HUGE_PAGE for index in range((last - first) // HUGE_PAGE)
            if small - flags.count(0, index * small, (index + 1) * small) >= small * RESIDENT_SHARE]
