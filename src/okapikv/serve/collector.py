"""A store that grows while the server runs goes out of the collector's sight, as a recovered one does.

A server freezes (``gc.freeze``) what it allocated before serving, a recovered store included, so
CPython's full collections never walk it (``serve.app``). Versions written later are tracked: a
bulk load of 1,000,000 records into a running server leaves about a million ``Version`` objects
(and the lists holding them) in the collector's generations, and the first full pass after the load
walks all of them, as does every later one. Measured in one durable and one in-memory server under
YCSB-A right after such a load (docs/benchmarks.md, "Durable YCSB-A at 1,000,000 against 10,000
records"): a full pass and a middle-generation pass of 0.3-1.4 s each (on a busy machine) stopped
the event loop inside the measured window, where a server loaded with 10,000 records had none.

``FreezeOnGrowth`` freezes again whenever the store holds ``FREEZE_GROWTH`` more versions than at
the last freeze (looked at every ``CHECK_S``), so a bulk-loaded store ends where a recovered one
starts. Freezing moves the tracked objects to the permanent generation (a list splice, no walk). A
frozen object is still freed by its reference count, which is how versions go (the core's GC,
``core.mvstore``, drops them from their chains; nothing in a chain refers back); what freezing keeps
forever is the cyclic garbage that exists at that moment (a few request objects at most), once per
``FREEZE_GROWTH`` versions stored, which a store of that growth outweighs many times over.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

#: versions the store must have grown by since the last freeze (about 25 MB of a store of 8-byte
#: keys and values; a YCSB-A load, whose writes replace versions, never reaches it)
FREEZE_GROWTH = 100_000
#: how often the serving loop looks at the store's size
CHECK_S = 1.0
#: how often ``on_freeze`` runs besides the freezes while the store changes (``activity`` moved):
#: under overwrites the store does not grow, but the versions written land in memory that the last
#: run did not see (``okapikv.serve.hugepages``)
REFRESH_S = 10.0


class FreezeOnGrowth:
    """Freezes the collector's generations once ``count()`` grew by ``growth`` since the last
    freeze (module docstring). A store that shrinks counts its growth from its smallest size."""

    def __init__(self, count: Callable[[], int], growth: int = FREEZE_GROWTH,
                 on_freeze: Callable[[], object] | None = None, activity: Callable[[], int] | None = None,
                 refresh_s: float = REFRESH_S) -> None:
        """``on_freeze``: run on a worker thread by ``run`` at its start, after each freeze, and
        every ``refresh_s`` in which ``activity`` (a counter of the store's changes) moved (the
        heap's huge pages, ``okapikv.serve.hugepages``); an idle server runs it no more."""
        if growth < 1:
            raise ValueError(f"the growth that triggers a freeze must be positive, not {growth}")
        self._count = count
        self.growth = growth
        self.base = count()
        self.freezes = 0
        self.on_freeze = on_freeze
        self._activity = activity
        self.refresh_s = refresh_s

    def look(self) -> bool:
        """Freeze if the store grew enough; whether it did."""
        size = self._count()
        if size < self.base:
            self.base = size
        if size - self.base < self.growth:
            return False
        gc.freeze()
        self.base = size
        self.freezes += 1
        return True

    async def run(self, every_s: float = CHECK_S) -> None:
        """``look`` every ``every_s`` until cancelled (the server's lifetime); ``on_freeze`` once
        first (the heap the server starts with: a recovered store), after each freeze and as
        ``refresh_s`` says."""
        hook = self.on_freeze
        if hook is not None:
            await asyncio.to_thread(hook)
        loop = asyncio.get_running_loop()
        last_s = loop.time()
        seen = self._activity() if self._activity is not None else 0
        while True:
            await asyncio.sleep(every_s)
            frozen = self.look()
            if hook is None:
                continue
            now = loop.time()
            moved = self._activity is not None and now - last_s >= self.refresh_s and self._activity() != seen
            if frozen or moved:
                await asyncio.to_thread(hook)
                last_s = loop.time()
                seen = self._activity() if self._activity is not None else 0
