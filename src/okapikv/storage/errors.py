"""Why a data directory cannot be used, as exceptions whose message is the one line an operator
reads (``okapi server`` prints it and exits with a status that says which kind it is:
``okapikv.serve.main``).

- ``DataDirError``: the directory is fine but not usable here (locked by another server, another
  server's data, another data format, cannot be created): fix the command or the environment.
- ``DataDamagedError``: the data is damaged or lost committed writes (a checksum fails, SQLite finds
  a malformed page, a metadata row is missing a field, the WAL lost committed groups): repair it
  (``okapi server --repair``: docs/operations.md, "Storage integrity and replacing a disk").
- ``DiskFullError``: the file system has too little free space to run safely (its reserve).
"""

from __future__ import annotations


class DataDirError(Exception):
    """The data directory cannot be used: locked by another server, another server's data, or
    unreadable. The message says which and what to do."""


class DataDamagedError(DataDirError):
    """The data directory is damaged or lost committed writes; the message names the file and the
    damage, and says how to repair."""


class DiskFullError(DataDirError):
    """The data directory's file system lacks the free space the server keeps in reserve."""


REPAIR_HINT = "start the server with --repair to rebuild it from its replicas (docs/operations.md)"
