"""The commit log's background costs, measured on the store alone, without servers
(docs/storage.md, "What it costs"): a restart's recovery of N versions all in the log and all in the
checkpoint, each into a fresh core, and one checkpoint alone and beside a thread spinning in Python
(an event loop at full load; switch interval 0.5 ms, as in a durable server), folded in a checkpoint
process as a server's background checkpoints are (``okapikv.storage.checkpoint_process``: the busy
thread then shares only the CPU with it, not the GIL). ``--suite fast`` reports them;
``scripts/measure_commit_log.py`` prints them beside the commit path's figures."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from okapikv.cluster.config import local_cluster
from okapikv.core.mvstore import Change, Version
from okapikv.core.server import PartitionServer
from okapikv.core.timestamps import pack
from okapikv.storage.log import segments
from okapikv.storage.logged_store import LoggedStore
from okapikv.storage.recovery import recover
from okapikv.storage.sqlite import CommitGroup, Identity, State

IDENTITY = Identity("measure", ("a",), 1, "okapi", "a", 0)
STATE = State((1,), (1,), (1,), (0,))
#: a durable server's switch interval (``okapikv.serve.main``)
SWITCH_INTERVAL_S = 0.0005


@dataclass(frozen=True, slots=True)
class StorageCosts:
    records: int
    log_bytes: int
    recovery_log_s: float
    recovery_checkpoint_s: float
    checkpoint_rows: int
    checkpoint_alone_s: float
    checkpoint_busy_s: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StorageCosts:
        return cls(**data)


def log_inserts(directory: Path, records: int) -> LoggedStore:
    """A store whose log holds ``records`` inserts of 8-byte values (groups of 1,000; no checkpoint)."""
    store = LoggedStore(directory, IDENTITY, segment_bytes=1 << 40)
    for start in range(0, records, 1000):
        store.commit(CommitGroup(0, [Change(b"user%09d" % index, Version(b"v" * 8, pack(10 + index), 0, None), True)
                                     for index in range(start, min(start + 1000, records))], STATE))
    return store


def checkpoint_s(directory: Path, rows: int, busy: bool, in_process: bool = False) -> float:
    """One checkpoint of ``rows`` logged inserts, alone or beside a thread spinning in Python; in a
    checkpoint process as a server's background checkpoints are (``in_process``: on this thread)."""
    store = log_inserts(directory, rows)
    stop = threading.Event()
    spinner = threading.Thread(target=lambda: [None for _ in iter(stop.is_set, True)])
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        if busy:
            spinner.start()
        started = time.perf_counter()
        store.checkpoint(in_process=in_process)
        return time.perf_counter() - started
    finally:
        stop.set()
        if busy:
            spinner.join()
        sys.setswitchinterval(previous)
        store.close()


def recovery_s(directory: Path) -> tuple[float, int]:
    """Open ``directory`` and load it into a fresh core: (seconds, versions)."""
    started = time.perf_counter()
    store = LoggedStore(directory, IDENTITY)
    core = PartitionServer(local_cluster(dcs=("a",), partitions=1, wan=0).core_config(0, 0))
    recovered = recover(core, store)
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed, recovered.versions


def measure_storage_costs(root: Path, records: int, checkpoint_rows: int) -> StorageCosts:
    """Every figure of ``StorageCosts`` in fresh directories under ``root``."""
    alone = checkpoint_s(root / "checkpoint-alone", checkpoint_rows, False)
    busy = checkpoint_s(root / "checkpoint-busy", checkpoint_rows, True)
    directory = root / "recovery"
    store = log_inserts(directory, records)
    log_bytes = sum(path.stat().st_size for path in segments(directory))
    store.close(checkpoint=False)
    from_log, _ = recovery_s(directory)  # the log, then a clean close folds it into the checkpoint
    from_checkpoint, _ = recovery_s(directory)
    return StorageCosts(records, log_bytes, round(from_log, 3), round(from_checkpoint, 3), checkpoint_rows,
                        round(alone, 3), round(busy, 3))
