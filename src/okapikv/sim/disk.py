"""A simulated server's disk: the ``Committer`` its host holds effects behind (``okapikv.core.host``).

By default a commit takes no time: every call's changes are durable as it returns, as the
simulator's crash model assumes (``okapikv.sim.world``: a restart recovers the store of the last
call that ran), so the world gives the host no committer, as a server kept in memory has none
(staging each call's changes for nothing cost the simulator a tenth of its time), only this
disk's free space. With ``commit_us`` the disk is the host's committer: a group takes that long,
one at a time, as the group committer's (``okapikv.storage.group_commit``); the calls that insert
a version while a group is written join the next one, and their effects wait in the host until it
is durable, so a test sees replies and replicated updates held for durability in virtual time; a
GET's reply waits only while a group that inserted a version of its key is (``read_need``), as on
a server. The simulated disk keeps no clock bound (a restart recovers the last call's clock).
``disk_full`` is a fault a test sets (``World.fill_disk``): the host then refuses client writes.
"""

from __future__ import annotations

from collections.abc import Callable

from okapikv.core.server import Changes


class SimDisk:
    __slots__ = ("commit_us", "durable", "disk_full", "groups_written", "_in_flight", "_next_waited", "_start",
                 "_unsettled", "_keys")

    def __init__(self, commit_us: int = 0, start: Callable[[int, int], None] | None = None) -> None:
        """``start(group, commit_us)``: schedule ``finished(group)`` ``commit_us`` from now."""
        if commit_us and start is None:
            raise ValueError("a disk whose commits take time needs a scheduler")
        self.commit_us = commit_us
        self.durable = 0
        self.disk_full = False
        self.groups_written = 0
        self._in_flight = 0  # the group being written (0: none)
        self._next_waited = False  # some call waits for the group after it
        self._start = start
        self._unsettled: dict[bytes, int] = {}  # key -> the newest group that inserted a version of it
        self._keys: dict[int, list[bytes]] = {}  # group -> the keys it inserted versions of

    def stage(self, changes: Changes, hlc: int) -> int:
        """The group a call's effects wait for: none (``durable``) unless it inserted a version
        and commits take time."""
        keys = [change.key for change in changes.store if change.inserted]
        if not self.commit_us or not keys:
            return self.durable
        group: int
        if not self._in_flight:
            group = self.durable + 1
            self._begin(group)
        else:
            self._next_waited = True
            group = self._in_flight + 1
        self._keys.setdefault(group, []).extend(keys)
        for key in keys:
            self._unsettled[key] = group
        return group

    def read_need(self, key: bytes) -> int:
        """The group a GET's reply of ``key`` waits for: the newest that inserted a version of it."""
        return self._unsettled.get(key, 0)

    def _begin(self, group: int) -> None:
        self._in_flight = group
        assert self._start is not None
        self._start(group, self.commit_us)

    def finished(self, group: int) -> None:
        """Group ``group`` is on disk; the next one starts if a call waits for it."""
        self.durable = group
        self.groups_written += 1
        for key in self._keys.pop(group, ()):
            if self._unsettled.get(key) == group:
                del self._unsettled[key]
        self._in_flight = 0
        if self._next_waited:
            self._next_waited = False
            self._begin(group + 1)
