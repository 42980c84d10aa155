"""Recovery: load a data directory into a fresh protocol core.

What comes back (and why it is enough, DESIGN.md section 1 and ``okapikv.core.server``):

- every stored version: each acknowledged write was durable before its reply left, and each
  replicated update before the link message carrying it was acknowledged (``okapikv.server.node``);
- the vectors ``vv``, ``stable``, ``gsv`` and ``horizon`` as of the last group: ``vv`` covers exactly the
  stored versions, and ``stable``/``horizon`` are at least what every stored GC removal relied on, so
  a read served after the restart never misses a version GC removed;
- the clock: it restarts at the stored upper bound of every local timestamp issued or announced
  (``group_commit``), so no timestamp is issued twice and no heartbeat promise is broken.

What does not come back, on purpose: the replication queues of the old process. The core's
catch-up (``PartitionServer.start_catch_up``) asks every replica for what the recovered ``vv`` lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack
from okapikv.storage.sqlite import SqliteStore


@dataclass(frozen=True, slots=True)
class Recovered:
    versions: int
    keys: int
    clock_bound_us: int
    had_state: bool


def recover(core: PartitionServer, store: SqliteStore) -> Recovered:
    """Load ``store`` into ``core`` (which must be fresh) and turn its change log on."""
    state = store.load_state()
    bound_us = store.load_clock_bound_us()
    zeros = tuple(0 for _ in range(core.num_dcs))
    core.restore(
        store.load_versions(),
        vv=state.vv if state is not None else zeros,
        stable=state.stable if state is not None else zeros,
        gsv=state.gsv if state is not None else zeros,
        horizon=state.horizon if state is not None else zeros,
        clock_floor=pack(bound_us),
    )
    core.track_changes = True
    return Recovered(core.store.version_count, len(core.store), bound_us, state is not None)
