"""``--workload memory``: resident memory per key of one in-memory partition server.

One ``okapi server`` process (1 DC x 1 partition) is loaded with distinct keys through the
pipelined async client; its RSS is read from /proc (``harness.proc``) before the load and after it
has settled. The custom run measures ``--records`` keys, the fast suite its own count.
"""

from __future__ import annotations

import time

from benchmarks.harness.harness import Bench
from benchmarks.harness.proc import rss_bytes
from benchmarks.harness.systems import System
from okapikv.bench.engine.errors import BenchError
from okapikv.bench.engine.results import MemoryRow

#: Sessions loading the keys: more in flight means bigger pipelined batches, and 1M keys load in
#: about a minute on 2 cores.
MEMORY_LOAD_SESSIONS = 128
MEMORY_SETTLE_S = 2.0


def run_memory(bench: Bench, records: int | None = None) -> None:
    """One ``MemoryRow`` per system of ``--protocols``, after loading ``records`` keys (default
    ``--records``)."""
    o = bench.options
    count = o.records if records is None else records
    for system in o.systems:
        def body(system: System = system) -> None:
            with bench.start(system, o.dcs or ("local",), 1, 0.0) as sut:
                if len(sut.pids) != 1:
                    raise BenchError(f"--workload memory needs one server process, not {len(sut.pids)}")
                pid = sut.pids[0]
                time.sleep(MEMORY_SETTLE_S)
                before = rss_bytes(pid)
                load_s = bench.load(sut, sessions=MEMORY_LOAD_SESSIONS, records=count)
                time.sleep(MEMORY_SETTLE_S)
                after = rss_bytes(pid)
                # The kernel updates VmHWM lazily (at unmap and exit), so it can read below the
                # VmRSS just taken: the peak is at least what was just measured.
                peak = max(rss_bytes(pid, "VmHWM"), after)
                stats = next(iter(sut.cluster.fetch_stats().values()), {}) if sut.cluster else {}
                keys = int(stats.get("keys", count))
                row = MemoryRow(
                    system=sut.label, records=count, key_bytes=o.key_bytes, value_bytes=o.value_bytes, keys=keys,
                    versions=stats.get("versions"), rss_before_bytes=before, rss_after_bytes=after,
                    rss_peak_bytes=peak, bytes_per_key=round((after - before) / max(keys, 1), 1),
                    rss_after_per_key=round(after / max(keys, 1), 1), load_s=round(load_s, 2),
                    load_ops_s=round(count / load_s, 1) if load_s > 0 else None,
                )
                bench.results.memory.append(row)
                bench.ui.finish_run(
                    f"  {sut.label}: {keys:,} keys ({row.versions} versions), RSS {before / 2**20:.1f} -> "
                    f"{after / 2**20:.1f} MiB: {row.bytes_per_key:.1f} B/key loaded "
                    f"({row.rss_after_per_key:.1f} B/key of the whole RSS)")
        bench.guarded(f"memory on {system.name}", body)
