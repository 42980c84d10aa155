"""A checkpoint of the commit log in a process of its own (``logged_store``'s background checkpoints).

Why a process: a checkpoint folds whole segments (about 220,000 versions per 8 MiB) in Python and
writes them through SQLite, whose module lets go of the GIL at every row. As a thread of a loaded
server it shared the interpreter lock with the event loop (and the objects it decodes pushed the
collector into full passes over the whole store): a checkpoint of 100,000 versions took 16.4 s
under a YCSB-A load against 0.74 s alone, and a durable partition bulk-loaded with 1,000,000
records served YCSB-A at half the rate of one with 10,000 while its checkpoints ran; without them,
at the same rate (docs/benchmarks.md, "Checkpoints out of the server process, and disk use under
overwrites"). Here the fold and the transaction run on their own interpreter and the server only
waits for the exit status.

    python -m okapikv.storage.checkpoint_process [--nice=N] DIR IDENTITY_JSON SEGMENT...

folds the segments (closed ones, oldest first) into ``DIR``'s SQLite file in one transaction, as
``LoggedStore`` does in process, then truncates the WAL (``SqliteStore.maintain``), and prints one
JSON line: the group number the checkpoint ends at and the pages vacuumed; ``--nice``: first lower
its own CPU priority by N (``logged_store.niceness``: a short backlog yields the CPU to the server
and its clients). It deletes nothing: the
server deletes the segments once this process exited with status 0, so a crash of either at any
point leaves a checkpoint that is one transaction, and segments deleted only after it is durable.
The server holds the directory's lock throughout (this process writes under it), and the child
ends with the server (``okapikv.lifetime``: a server killed with SIGKILL leaves no writer behind).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from okapikv.lifetime import exit_with_parent
from okapikv.storage.log import LogScan, read_log
from okapikv.storage.logged_store import apply_log
from okapikv.storage.sqlite import DirectoryLock, Identity, SqliteStore

#: test-only crash point (``OKAPI_FAULT_INJECTION=1``, ``OKAPI_STORAGE_KILL_AT=checkpoint-process``):
#: this process kills itself with SIGKILL before its COMMIT (``tests/unit/test_logged_store.py``)
KILL_POINT = "checkpoint-process"


class _HeldByServer(DirectoryLock):
    """The directory's lock, held by the server that started this process for as long as it runs."""

    def __init__(self) -> None:  # nothing to take: the server holds it
        pass

    def release(self) -> None:
        pass


def _fault() -> None:
    if os.environ.get("OKAPI_FAULT_INJECTION") == "1" and os.environ.get("OKAPI_STORAGE_KILL_AT") == KILL_POINT:
        os.kill(os.getpid(), signal.SIGKILL)


def checkpoint(directory: Path, identity: Identity, paths: list[Path]) -> dict[str, int]:
    """Fold ``paths`` into the checkpoint of ``directory`` (module docstring); what it printed."""
    store = SqliteStore(directory, identity, integrity="off", lock=_HeldByServer(), record=False)
    try:
        apply_log(store, read_log(paths, LogScan()), directory, _fault)
        store.maintain()
        return {"seq": store.tally.seq, "vacuumed_pages": store.vacuumed_pages}
    finally:
        store.close(checkpoint=False)


def main(argv: list[str] | None = None) -> int:
    exit_with_parent()
    arguments = sys.argv[1:] if argv is None else argv
    if arguments and arguments[0].startswith("--nice="):
        value = arguments.pop(0).removeprefix("--nice=")
        if value.isdigit() and int(value):
            os.nice(int(value))
    if len(arguments) < 3:
        print("usage: python -m okapikv.storage.checkpoint_process [--nice=N] DIR IDENTITY_JSON SEGMENT...",
              file=sys.stderr)
        return 2
    directory, identity_text, *names = arguments
    try:
        done = checkpoint(Path(directory), Identity.from_json(identity_text), [Path(name) for name in names])
    except Exception as error:  # the one line the server logs, whatever failed
        print(f"{directory}: checkpoint failed: {error}", file=sys.stderr)
        return 1
    print(json.dumps(done), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
