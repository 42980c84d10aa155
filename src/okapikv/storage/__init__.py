"""Durable storage of one partition server: a commit log checkpointed into SQLite, group commit, recovery.

The protocol core (``okapikv.core``) never does I/O: it reports what changed (``drain_changes``:
versions inserted and garbage-collected, and its vectors) and accepts a recovered state
(``restore``). This package does the rest, for the gRPC driver (``okapikv.server.node``):

- ``log`` and ``logged_store.LoggedStore``: each commit group as one checksummed record appended to a
  segment file (one write, one fdatasync); a background checkpoint folds closed segments into SQLite
  and deletes them; recovery replays the log after the checkpoint (docs/storage.md).
- ``sqlite.SqliteStore``: the checkpoint's on-disk format (one table of versions, one of metadata), the data
  directory's lock and identity check, one transaction per commit group, and maintenance
  (``wal_checkpoint(TRUNCATE)``, incremental vacuum) so the files stay bounded under overwrites.
- ``group_commit.GroupCommitter``: collects the changes of many core calls into one group
  (requests arriving during an fsync join the next group) and tells the driver when a group is
  durable, so it can release the replies and messages of the calls in that group. It also keeps a
  persisted upper bound on the hybrid clock ahead of use, so a restarted server never issues a
  timestamp twice.
- ``recovery.open_and_recover``: load a data directory into a fresh core, checking it
  (``integrity``: row checksums and SQLite's structure check; ``commit_record``: committed groups
  the database lost), or, in repair mode, rebuild a damaged, lost or empty one from the replicas.
- ``space``: the disk reserve, so a full disk refuses writes instead of crashing the server.

The durability rule the driver follows (``okapikv.server.node``): the effects of a core call (client
replies, peer messages) leave only once every commit group holding a version created up to that call
is durable, and once the clock bound covers every local timestamp they may carry. So an
acknowledged write survives ``kill -9``, a value a reader saw can never vanish, and no peer ever holds
an update its origin lost.
"""

from __future__ import annotations

from okapikv.storage.errors import DataDamagedError, DataDirError, DiskFullError
from okapikv.storage.sqlite import Identity, SqliteStore

__all__ = ["DataDamagedError", "DataDirError", "DiskFullError", "Identity", "SqliteStore"]
