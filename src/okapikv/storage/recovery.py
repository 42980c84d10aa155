"""Recovery: load a data directory into a fresh protocol core, or rebuild it from the replicas.

What comes back (and why it is enough, docs/protocol.md, "Catch-up and repair", and ``okapikv.core.server``):

- every stored version, each verified against its checksum: each acknowledged write was durable
  before its reply left, and each replicated update before the link message carrying it was
  acknowledged (``okapikv.server.node``);
- the vectors ``vv``, ``stable``, ``gsv`` and ``horizon`` as of the last group: ``vv`` covers exactly the
  stored versions, and ``stable``/``horizon`` are at least what every stored GC removal relied on, so
  a read served after the restart never misses a version GC removed;
- the clock: it restarts at the stored upper bound of every local timestamp issued or announced
  (``group_commit``), so no timestamp is issued twice and no heartbeat promise is broken.

What does not come back, on purpose: the replication queues of the old process. The core's
catch-up (``PartitionServer.start_catch_up``) asks every replica for what the recovered ``vv`` lacks.

Damage (``LoggedStore``'s checks, a version failing its checksum while it loads) raises a one-line
``DataDamagedError``, unless the server starts in repair mode (``repair=True``, ``okapi server
--repair``). Then a directory that is damaged, lost committed groups, or is empty (a new disk) is
rebuilt: what still verifies is salvaged (``sqlite.salvage``), the files are moved aside, a fresh
store starts, and the core asks its replicas for everything they hold (``start_catch_up`` with a
``Repair``): the versions of every DC, its own included. Of the salvaged versions it keeps only its
own writes that no replica holds (never replicated: nowhere else to get them). An intact directory
is recovered as usual, whatever the mode.

A repair in progress is marked by ``DIR/REPAIRING`` (created, fsynced, before the rebuilt store
opens; removed by the driver once the repaired state is durable: ``repair_finished``): a crash during
a repair leaves a store that holds only part of what the replicas sent, which a plain restart would
serve as if it were whole, so such a directory counts as damaged and a restart in repair mode runs
the repair again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from okapikv.core.server import PartitionServer, Repair
from okapikv.core.timestamps import pack
from okapikv.storage.errors import REPAIR_HINT, DataDamagedError, DataDirError
from okapikv.storage.log import sync_directory
from okapikv.storage.logged_store import LoggedStore, salvage_log
from okapikv.storage.sqlite import DirectoryLock, Identity, salvage

REPAIR_MARKER = "REPAIRING"


@dataclass(frozen=True, slots=True)
class Recovered:
    versions: int
    keys: int
    clock_bound_us: int
    had_state: bool
    #: the repair this start runs (None: the directory was intact, or repair mode is off)
    repair: Repair | None = None
    #: why the directory is being rebuilt, and the files moved aside
    damage: str | None = None
    moved_aside: tuple[Path, ...] = ()
    salvaged: int = 0


def recover(core: PartitionServer, store: LoggedStore) -> Recovered:
    """Load ``store`` into ``core`` (which must be fresh) and turn its change log on. Raises
    ``DataDamagedError`` at the first version that fails its checksum (``core`` is then unusable)."""
    state = store.load_state()
    bound_us = max(store.load_clock_bound_us(), store.tally.clock_bound_us)
    zeros = tuple(0 for _ in range(core.num_dcs))
    core.restore(
        store.load_versions(),
        vv=state.vv if state is not None else zeros,
        stable=state.stable if state is not None else zeros,
        gsv=state.gsv if state is not None else zeros,
        horizon=state.horizon if state is not None else zeros,
        hlc_floor=pack(bound_us),
    )
    core.track_changes = True
    return Recovered(core.store.version_count, len(core.store), bound_us, state is not None)


def open_and_recover(
    make_core: Callable[[], PartitionServer], directory: Path, identity: Identity, *, integrity: str = "quick",
    repair: bool = False, now_us: int = 0,
) -> tuple[PartitionServer, LoggedStore, Recovered]:
    """Open ``directory`` and recover it into a core made by ``make_core``; in repair mode, rebuild
    it instead when it is damaged, lost commits or is empty (module docstring). ``now_us``: the
    server's clock reading, the least a rebuilt server's clock restarts at."""
    damage: str | None = None
    if (directory / REPAIR_MARKER).exists():
        damage = f"{directory / REPAIR_MARKER} says a repair of this directory was interrupted; {REPAIR_HINT}"
        if not repair:
            raise DataDamagedError(damage)
        return _rebuild(make_core, directory, identity, damage, now_us)
    try:
        store = LoggedStore(directory, identity, integrity=integrity)
    except DataDamagedError as error:
        if not repair:
            raise
        damage = str(error)
    else:
        if repair and store.fresh:
            try:
                _mark_repairing(directory)
            except BaseException:
                store.close()
                raise
            core = make_core()
            core.restore((), **_zeros(core), hlc_floor=pack(now_us))
            core.track_changes = True
            return core, store, Recovered(0, 0, now_us, False, Repair(()), "the data directory was empty")
        core = make_core()
        try:
            return core, store, recover(core, store)
        except DataDamagedError as error:
            store.close(checkpoint=False)
            if not repair:
                raise
            damage = str(error)
    return _rebuild(make_core, directory, identity, damage, now_us)


def _zeros(core: PartitionServer) -> dict[str, tuple[int, ...]]:
    zeros = tuple(0 for _ in range(core.num_dcs))
    return {"vv": zeros, "stable": zeros, "gsv": zeros, "horizon": zeros}


def _rebuild(make_core: Callable[[], PartitionServer], directory: Path, identity: Identity, damage: str,
             now_us: int) -> tuple[PartitionServer, LoggedStore, Recovered]:
    lock = DirectoryLock(directory)
    try:
        _mark_repairing(directory)  # first: a crash while the files move aside must not leave a "new" directory
        found = salvage(directory, identity.dc_index)
        logged, moved = salvage_log(directory, identity.dc_index, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
        store = LoggedStore(directory, identity, lock=lock)
    except BaseException:
        lock.release()
        raise
    core = make_core()
    # The clock restarts above every bound that survived; the replicas' answers raise it above every
    # timestamp of this server they hold before any new one is issued (``PartitionServer``'s repair).
    bound_us = max(found.clock_bound_us, now_us)
    core.restore((), **_zeros(core), hlc_floor=pack(bound_us))
    core.track_changes = True
    detail = damage.replace(f"; {REPAIR_HINT}", "")
    if found.error is not None:
        detail += f" (salvage stopped at: {found.error})"
    local = {(key, version.timestamp): (key, version) for key, version in (*found.local_versions, *logged)}
    return core, store, Recovered(0, 0, bound_us, False, Repair(tuple(local.values())), detail,
                                  (*found.moved_aside, *moved), len(local))


def _mark_repairing(directory: Path) -> None:
    try:
        with (directory / REPAIR_MARKER).open("w") as marker:
            marker.write("a repair from the replicas is in progress (okapikv.storage.recovery)\n")
            marker.flush()
            os.fsync(marker.fileno())
        sync_directory(directory)
    except OSError as error:
        raise DataDirError(f"cannot write {directory / REPAIR_MARKER}: {error.strerror or error}") from None


def mark_behind(directory: Path) -> None:
    """The directory holds less than the replicas know (an older copy, or emptied): mark it as a
    repair to run, so the next start refuses it, or repairs it with ``--repair``, even though this
    incarnation's own clock bound will have moved past the lost writes' timestamps by then (the
    evidence the replicas gave would be gone). Raises ``DataDirError`` if the marker cannot be
    written."""
    _mark_repairing(directory)


def repair_finished(directory: Path) -> None:
    """The repaired state is durable: the directory is whole again (call once, after the repair
    ended and every group written until then is durable)."""
    (directory / REPAIR_MARKER).unlink(missing_ok=True)
    sync_directory(directory)
