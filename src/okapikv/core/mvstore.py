"""The multi-version store of one partition (Okapi section 3.1, "Item").

Each key maps to a chain of versions ordered by ``(timestamp, source_dc)``: every DC applies the same
total order to concurrent writes (last writer wins), so all DCs converge. Reads pick the newest
version that satisfies a visibility predicate supplied by the protocol. An ordered key index
(sortedcontainers) serves range scans.

Invariants (tested in ``tests/unit/test_mvstore.py``):
- a chain is strictly increasing in ``(timestamp, source_dc)``; inserting an order already present
  changes nothing (re-delivered replication is idempotent);
- a key holding one version maps to that ``Version`` itself, a key holding several to a list of
  them, never to a list of one or an empty list (inserting a second version promotes, GC leaving
  one demotes);
- the key index holds exactly the keys with at least one version; ``version_count`` is the number
  of versions held;
- every key holding more than one version, a tombstone or a value that expires is in the GC queue
  (``_collectable``).

Garbage collection (invariant tested by ``tests/property/test_prop_gc.py``): a version may be
removed only when a newer version of the same key is visible in every snapshot that may still be
read ("universally visible"). A universally visible tombstone is removed too, once the caller's
``tombstone_removable`` allows it: a snapshot that would have read it now reads nothing, which is
what a tombstone means, but a replica must keep it while an older concurrent write may still
arrive, or that write would become the newest version here and the replicas would diverge. Keys
left with no version leave the index.

Change log (for durable drivers, ``okapikv.storage``): with ``track_changes`` on, every successful
``insert`` and every version ``collect`` removes is appended, in order, to a log that
``drain_changes`` hands over and clears. Replaying the drained logs in order on a copy of the store
(insert, delete) yields exactly this store; the log is off by default so the simulator and the
in-memory server pay nothing for it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import NamedTuple

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedList

from okapikv.core.version import Version as Version  # its home is okapikv.core.version (why: there)

#: ``okapikv.core.counters.MAGIC``: the stored value of a counter's version begins with it
COUNTER_MAGIC = b"\xffOKAPI#C"
#: ``okapikv.core.expiry.MAGIC``: the stored value of a version with an expiry begins with it
EXPIRY_MAGIC = b"\xffOKAPI#E"
#: both: a stored value beginning with neither is a plain value, read as it is (one test for both)
RESERVED_PREFIXES = (COUNTER_MAGIC, EXPIRY_MAGIC)


def _lingers(value: bytes | None) -> bool:
    """Whether a key whose only version holds ``value`` stays in the GC queue: a tombstone, or a
    value that expires (collected once expired, as a tombstone)."""
    return value is None or value.startswith(EXPIRY_MAGIC)


#: a version's place in its chain (``Version.order``), as a key function
_order: Callable[[Version], tuple[int, int]] = attrgetter("timestamp", "source_dc")

VisibilityPredicate = Callable[[Version], bool]
#: (chain, position of the newest universally visible version, universally visible) -> positions to drop
MergedCollect = Callable[[list[Version], int, VisibilityPredicate], list[int]]


class Change(NamedTuple):
    """One entry of the change log: ``version`` of ``key`` was inserted (or removed by GC)."""

    key: bytes
    version: Version
    inserted: bool


#: ``Change(key, version, True)`` without the Python frame of a named tuple's ``__new__``: the
#: change log records every insert of a durable server
_new_change = tuple.__new__


# A key's entry in ``MultiVersionStore._chains``: its only version, or its chain of two or more.
Entry = Version | list[Version]


# Subclassable in the compiled build too: a test injects a store that counts what the collector asks
# (``PartitionState``'s ``store``).
@mypyc_attr(allow_interpreted_subclasses=True)
class MultiVersionStore:
    """Version chains (oldest first, so the common case of a newest write is an append)."""

    __slots__ = ("_chains", "_index", "_collectable", "version_count", "collected_count", "_changes", "_merged")

    def __init__(self, merged: MergedCollect | None = None) -> None:
        """``merged``: which versions GC may drop from a chain whose newest universally visible
        version is a counter's, whose older versions may still count in a read
        (``okapikv.core.counters.collectable``); None collects every chain as last-writer-wins."""
        self._merged = merged
        # Most keys hold one version: storing it without a one-element list saves the list (56 B)
        # and its item array (16 B), 387 -> 306 B/key with 1M 8-byte keys and values (1 DC, RSS of a
        # plain process; scripts/measure_store_memory.py).
        self._chains: dict[bytes, Entry] = {}
        self._index: SortedList = SortedList()
        # The GC queue, round robin. An ``OrderedDict`` takes its front key in O(1)
        # (``popitem(last=False)``); a plain dict finds its first key (``next(iter(d))``) by scanning
        # past the slots earlier pops emptied, O(queue length) per key (2.5 us at 3,000 keys queued,
        # 47 us at 100,000, a pop and a push), so a GC held back would pay more per key the further
        # behind it is (docs/benchmarks.md, "Durable YCSB-A at 1,000,000 records: where the rest goes").
        self._collectable: OrderedDict[bytes, None] = OrderedDict()
        self.version_count = 0
        self.collected_count = 0
        self._changes: list[Change] | None = None

    # ------------------------------------------------------------ change log

    @property
    def track_changes(self) -> bool:
        return self._changes is not None

    @track_changes.setter
    def track_changes(self, enabled: bool) -> None:
        if enabled and self._changes is None:
            self._changes = []
        elif not enabled:
            self._changes = None

    def drain_changes(self) -> list[Change]:
        """Inserts and removals since the last call, oldest first (empty when tracking is off)."""
        changes = self._changes
        if not changes:
            return []
        self._changes = []
        return changes

    @property
    def collectable_count(self) -> int:
        """Keys in the GC queue (more than one version, or a tombstone)."""
        return len(self._collectable)

    def __len__(self) -> int:
        return len(self._chains)

    def insert(self, key: bytes, version: Version) -> bool:
        """Insert a version in order; returns False (and changes nothing) for a duplicate
        ``(timestamp, source_dc)``, which makes re-delivered replication idempotent."""
        entry = self._chains.get(key)
        if entry is None:
            self._chains[key] = version
            self._index.add(key)
            self.version_count += 1
            if _lingers(version.value):
                self._collectable[key] = None
            if self._changes is not None:
                self._changes.append(_new_change(Change, (key, version, True)))
            return True
        order = _order(version)  # ``Version.order`` by the C getter: no Python call per insert
        if isinstance(entry, Version):
            present = _order(entry)
            if present == order:
                return False
            self._chains[key] = [entry, version] if present < order else [version, entry]
        elif _order(entry[-1]) < order:  # the common case: the newest version yet
            entry.append(version)
        else:  # a remote version that arrived late: its place by bisection (hot keys' chains are long)
            position = bisect_right(entry, order, key=_order)
            if position > 0 and entry[position - 1].order == order:
                return False
            entry.insert(position, version)
        self.version_count += 1
        self._collectable[key] = None
        if self._changes is not None:
            self._changes.append(_new_change(Change, (key, version, True)))
        return True

    def newest(self, key: bytes, visible: VisibilityPredicate) -> Version | None:
        """The newest version of ``key`` satisfying ``visible`` (tombstones included)."""
        entry = self._chains.get(key)
        if entry is None:
            return None
        if not isinstance(entry, list):
            return entry if visible(entry) else None
        version = entry[-1]  # the common case: the newest version is visible (no iterator)
        if visible(version):
            return version
        for version in reversed(entry):
            if visible(version):
                return version
        return None

    def latest(self, key: bytes) -> Version | None:
        entry = self._chains.get(key)
        if entry is None or isinstance(entry, Version):
            return entry
        return entry[-1]

    def versions(self, key: bytes) -> list[Version]:
        """A copy of the chain, oldest first (for tests and recovery)."""
        entry = self._chains.get(key)
        if entry is None:
            return []
        return [entry] if isinstance(entry, Version) else list(entry)

    def keys_in_range(self, start: bytes, end: bytes) -> Iterator[bytes]:
        """Keys with ``start <= key <= end`` in byte order."""
        if start > end:
            return iter(())
        return self._index.irange(start, end)  # type: ignore[no-any-return]

    def keys(self) -> Iterator[bytes]:
        return iter(self._index)

    def fit_dependencies(self, fitted: Callable[[Version], Version]) -> None:
        """Replace every version by ``fitted(version)`` (the same key, timestamp and DC, its
        dependency vector one entry longer: a DC added online, ``okapikv.core.growth``).
        Nothing is logged: the durable state is the same versions."""
        for key, entry in self._chains.items():
            if isinstance(entry, Version):
                self._chains[key] = fitted(entry)
            else:
                entry[:] = [fitted(version) for version in entry]

    def written_by(self, source_dc: int, after: int) -> list[tuple[bytes, Version]]:
        """Every version of ``source_dc`` with a timestamp above ``after``, in timestamp order: what a
        replica that has everything of ``source_dc`` up to ``after`` may lack (catch-up). Chains are
        ordered, so each one is read from its newest end only down to ``after``."""
        found: list[tuple[bytes, Version]] = []
        for key, entry in self._chains.items():
            if isinstance(entry, Version):
                if entry.timestamp > after and entry.source_dc == source_dc:
                    found.append((key, entry))
                continue
            for version in reversed(entry):
                if version.timestamp <= after:
                    break
                if version.source_dc == source_dc:
                    found.append((key, version))
        found.sort(key=lambda item: item[1].timestamp)
        return found

    # ------------------------------------------------------------ garbage collection

    def collect(
        self,
        key: bytes,
        universally_visible: VisibilityPredicate,
        *,
        tombstone_removable: VisibilityPredicate | None = None,
        expired: VisibilityPredicate | None = None,
    ) -> int:
        """Drop every version older than the newest universally visible one (and that one too when
        it is a tombstone, or ``expired`` says it expired, that ``tombstone_removable`` allows to
        go: by default always). Returns how many versions were removed."""
        entry = self._chains.get(key)
        if entry is None:
            self._collectable.pop(key, None)
            return 0
        chain = [entry] if isinstance(entry, Version) else entry
        keep_from = -1
        for position in range(len(chain) - 1, -1, -1):
            if universally_visible(chain[position]):
                keep_from = position
                break
        if keep_from < 0:
            return 0
        newest_visible = chain[keep_from]
        if (keep_from and self._merged is not None and newest_visible.value is not None
                and newest_visible.value.startswith(COUNTER_MAGIC)):
            return self._collect_merged(key, chain, keep_from, self._merged(chain, keep_from, universally_visible))
        if ((newest_visible.value is None or (expired is not None and expired(newest_visible)))
                and (tombstone_removable is None or tombstone_removable(newest_visible))):
            keep_from += 1
        removed = keep_from
        if removed:
            if self._changes is not None:
                self._changes.extend(Change(key, version, False) for version in chain[:keep_from])
            del chain[:keep_from]
            self.version_count -= removed
            self.collected_count += removed
        if not chain:
            del self._chains[key]
            self._index.remove(key)
            self._collectable.pop(key, None)
        elif len(chain) == 1:
            self._chains[key] = chain[0]  # demote: a single version is held without a list
            if not _lingers(chain[0].value):
                self._collectable.pop(key, None)
        return removed

    def _collect_merged(self, key: bytes, chain: list[Version], keep_from: int, drop: list[int]) -> int:
        """``collect`` where the newest universally visible version is a counter's: older versions
        may still count in its merge, so only those ``drop`` names (positions, ascending) go."""
        if not drop:
            return 0
        if self._changes is not None:
            self._changes.extend(Change(key, chain[position], False) for position in drop)
        for position in reversed(drop):
            del chain[position]
        self.version_count -= len(drop)
        self.collected_count += len(drop)
        if len(chain) == 1:
            self._chains[key] = chain[0]
            self._collectable.pop(key, None)
        return len(drop)

    def collect_some(
        self,
        universally_visible: VisibilityPredicate,
        budget: int,
        *,
        tombstone_removable: VisibilityPredicate | None = None,
        expired: VisibilityPredicate | None = None,
    ) -> int:
        """Collect up to ``budget`` keys that hold more than one version or a tombstone, so a GC pass
        never stalls the server for long. Keys are visited round robin: one not yet fully collected
        goes to the back of the queue."""
        removed = 0
        for _ in range(min(budget, len(self._collectable))):
            key = self._collectable.popitem(last=False)[0]
            removed += self.collect(key, universally_visible, tombstone_removable=tombstone_removable,
                                    expired=expired)
            entry = self._chains.get(key)
            if entry is not None and (not isinstance(entry, Version) or _lingers(entry.value)):
                self._collectable[key] = None  # not done yet: back of the queue
        return removed
