"""What a node's start does besides serving: open and recover its data directory, check with the
replicas for writes it lost, and say loudly what it finds.

- **Open** (``open``): the disk reserve first (a full disk fails the start, before listening),
  then the store recovered (``okapikv.storage.recovery``) and the membership kept beside it
  (``okapikv.server.membership_file``). Damaged data stops the start with a one-line error; in
  repair mode the directory is rebuilt from the replicas instead, and the core refuses client
  requests until the repair ends.
- **Verify** (``verify_plan``, ``okapikv.core.catchup``): a start with no data (in memory, an
  empty directory) holds client requests until every replica has answered, but not for ever for
  one its link has not reached in ``UNREACHABLE_HOLD_US`` (``release_unreachable``): a DC cut off
  from the others must still serve. A replica that holds writes of this server it does not means
  lost data (``log_lost``): in memory it is repaired at once, a directory is marked to repair and
  needs ``--repair``.
- **Clock** (``check_clock``): the recovered HLC restarts at the clock bound kept on disk; when that
  is further ahead of the clock than the offset plus the bound's lead, the clock stepped back since
  the last run (docs/operations.md, "Clocks: the maximum offset").
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from okapikv.cluster.config import ClusterConfig
from okapikv.core.messages import ServerId
from okapikv.core.server import PartitionServer, Repair, Verify
from okapikv.core.timestamps import pack, physical_of
from okapikv.server import membership_file
from okapikv.storage.errors import DataDirError
from okapikv.storage.group_commit import DEFAULT_CLOCK_LEAD_US
from okapikv.storage.integrity import describe_timestamp
from okapikv.storage.logged_store import LoggedStore
from okapikv.storage.recovery import mark_behind, open_and_recover, repair_finished
from okapikv.storage.space import DiskSpace
from okapikv.storage.sqlite import Identity
from okapikv.wire.stats import RecoveredFigures

log = logging.getLogger("okapikv.server")

#: How long a start with no data holds client requests for a replica its link has not reached
#: (``Startup.release_unreachable``); a reached replica's answer is always waited for.
UNREACHABLE_HOLD_US = 3_000_000


class Startup:
    """The start of partition server ``server`` of ``config`` (module docstring)."""

    def __init__(self, config: ClusterConfig, server: ServerId, label: str) -> None:
        self.config = config
        self.server = server
        self.label = label
        self.storage: LoggedStore | None = None
        self.space: DiskSpace | None = None
        self.directory: Path | None = None
        self.recovered: RecoveredFigures | None = None
        self.repair_plan: Repair | None = None
        self.repair_logged = True  # "repair complete" said (or no repair under way)
        self.repair_durable_group: int | None = None  # the marker goes once this group is durable
        self.fresh_start = False  # an empty data directory, started without --repair
        self.lost_logged = False  # the data_lost error (``okapikv.core.catchup``, Verification)
        self.repair_asked = False  # --repair given (an intact directory may still be an older copy)
        self.clock_ahead_at_start_us = 0  # how far the recovered HLC was ahead of the clock

    def open(self, directory: Path, repair: bool, integrity: str, reserve_bytes: int | None,
             now_us: int) -> PartitionServer:
        """The core recovered from ``directory`` (``DataDirError`` if it cannot be used)."""
        config, server = self.config, self.server
        identity = Identity(config.cluster_id, tuple(config.dcs), config.partitions, config.protocol,
                            config.dcs[server.dc], server.partition)
        core_config = config.core_config(server.dc, server.partition)
        space = DiskSpace(directory, reserve_bytes)
        space.prepare()  # before the database and before listening: a full disk fails the start
        core, store, recovered = open_and_recover(
            lambda: PartitionServer(core_config), directory, identity, integrity=integrity, repair=repair,
            now_us=now_us)
        self.storage, self.space, self.directory = store, space, directory
        try:
            core.members.restore(membership_file.load(directory, len(config.dcs)))
        except ValueError as error:
            raise DataDirError(str(error)) from None
        self.recovered = RecoveredFigures(recovered.versions, recovered.keys, recovered.clock_bound_us)
        if store.migrated_versions is not None:
            log.warning("%s: migrated %s to data format 2: %d version(s) checksummed as they stood", self.label,
                        store.path, store.migrated_versions, extra={"event": "data_migrated"})
        self.fresh_start = store.fresh and recovered.repair is None
        self.repair_asked = repair
        if recovered.repair is None:
            log.info("%s: recovered %d version(s) of %d key(s) from %s", self.label, recovered.versions,
                     recovered.keys, directory)
            if repair:
                log.info("%s: --repair: %s is intact, nothing to repair", self.label, directory)
            self.check_clock(core, now_us)
            return core
        self.repair_plan = recovered.repair
        self.repair_logged = False
        self.recovered = dataclasses.replace(self.recovered, repair=recovered.damage, salvaged_local=recovered.salvaged,
                                             moved_aside=tuple(str(path) for path in recovered.moved_aside))
        moved = ""
        if recovered.moved_aside:
            moved = f"; damaged files moved aside: {', '.join(map(str, recovered.moved_aside))}"
        log.warning("%s: repairing %s from its %d replica(s): %s%s; %d local version(s) salvaged, clock restarts "
                    "after %s; client requests are refused until the repair ends", self.label, directory,
                    len(core.peers), recovered.damage, moved, recovered.salvaged,
                    describe_timestamp(pack(recovered.clock_bound_us)), extra={"event": "repair_started"})
        self.check_clock(core, now_us)
        return core

    def disk_note(self) -> str:
        """What a full disk means here (the host's refusal)."""
        assert self.space is not None
        return (f"{self.space.directory} has less than the {self.space.reserve_bytes} bytes this server keeps "
                "free")

    def verify_plan(self, started_us: int) -> Verify | None:
        """How this start checks with its replicas for writes it lost (``okapikv.core.catchup``,
        Verification): a start with no data holds client requests until every replica has
        answered; in memory, a loss is repaired at once (nothing on disk to mark), while a directory
        that lost writes needs ``--repair``. With ``--repair`` on an intact directory (perhaps an
        older copy) both: it holds, and repairs a loss the answers show."""
        if self.repair_plan is not None:
            return None
        fresh = self.storage is None or self.fresh_start
        asked = self.storage is None or self.repair_asked
        return Verify(pack(started_us), hold=fresh or self.repair_asked, repair=asked)

    def after_timer(self, core: PartitionServer, held_us: int, reached: Callable[[int], bool],
                    required_group: int | None) -> bool:
        """The checks after a timer run, ``held_us`` after the start: lost data, replicas not
        reached, the repair's end (``required_group``: the commit group it needs durable, None in
        memory). Whether the repair ended now."""
        catch_up = core.catch_up
        if catch_up.lost_through and not self.lost_logged:
            self.log_lost(catch_up.lost_through)
        if catch_up.holding_for and held_us >= UNREACHABLE_HOLD_US:
            self.release_unreachable(core, {dc for dc in catch_up.holding_for if reached(dc)})
        if self.repair_logged or core.repairing is not None:
            return False
        self.repair_complete(core, required_group)
        return True

    def release_unreachable(self, core: PartitionServer, reached: set[int]) -> None:
        """Stop holding client requests for the replicas (by DC) not in ``reached``, said loudly,
        since what such a replica holds of this server's is unchecked until it answers."""
        catch_up = core.catch_up
        for dc in catch_up.holding_for:
            if dc in reached:
                continue  # its answer is on the way
            catch_up.release(dc)
            log.warning("%s: started without its data and cannot reach its replica in DC %s after %.0f s: serving "
                        "without its answer; if it holds writes this server acknowledged before, they are missing "
                        "here until it answers (then repaired, or refused until --repair)", self.label,
                        self.config.dcs[dc], UNREACHABLE_HOLD_US / 1e6, extra={"event": "unchecked_start"})

    def log_lost(self, lost: int) -> None:
        """A replica holds writes of this server that it does not: say so loudly, once, and mark a
        data directory as one to repair (``mark_behind``: until the repair ends, for ``--repair``)."""
        self.lost_logged = True
        held = describe_timestamp(lost)
        if self.storage is not None:
            try:
                mark_behind(self.storage.directory)
            except DataDirError as error:
                log.error("%s: %s", self.label, error)
        if self.storage is not None and self.repair_asked:
            self.repair_logged = False
            log.warning("%s: --repair: the data directory is older than its replicas know (they hold updates of this "
                        "server up to %s): repairing from the replicas; client requests are refused until the repair "
                        "ends", self.label, held, extra={"event": "repair_started"})
            return
        if self.storage is None:
            self.repair_logged = False  # the repair under way ends with "repair complete"
            log.error("%s: started in memory, but a replica holds updates of this server up to %s: its data was lost "
                      "with the last run. Repairing from the replicas; client requests are refused until the repair "
                      "ends (start servers with --data-dir DIR to keep their data)", self.label, held,
                      extra={"event": "data_lost"})
            return
        what = "was empty" if self.fresh_start else "is older than its replicas know"
        log.error("%s: the data directory %s, but a replica holds updates of this server up to %s: its data was "
                  "lost. Restart it with --repair to fetch its own writes back from the replicas "
                  "(docs/operations.md); client requests are refused until then", self.label, what, held,
                  extra={"event": "data_lost"})

    def repair_complete(self, core: PartitionServer, required_group: int | None) -> None:
        """The repair ended: its marker goes once ``required_group`` is durable (``durable``)."""
        self.repair_logged = True
        self.repair_durable_group = required_group
        stats = core.stats
        log.warning("%s: repair complete: %d version(s) of %d key(s) held, %d of this DC's own fetched back from "
                    "the replicas, %d kept from the damaged store; serving", self.label,
                    core.store.version_count, len(core.store), stats.repair_local_received,
                    stats.repair_local_kept, extra={"event": "repair_complete"})

    def durable(self, group: int) -> None:
        """Commit group ``group`` is durable: remove the repair marker if it waited for it."""
        if self.repair_durable_group is None or group < self.repair_durable_group:
            return
        self.repair_durable_group = None
        assert self.storage is not None
        try:
            repair_finished(self.storage.directory)
        except OSError as error:
            log.error("%s: cannot remove the repair marker: %s", self.label, error)

    def check_clock(self, core: PartitionServer, now_us: int) -> None:
        """Warn once, loudly, when the recovered HLC (restarted at the clock bound kept on disk) is
        ahead of the clock by more than the maximum offset plus the bound's lead: the clock stepped
        back since the last run (or was ahead then). Timestamps must continue above the bound, so
        this server's writes run ahead of every other clock until its own catches up."""
        ahead_us = physical_of(core.hlc) - now_us
        self.clock_ahead_at_start_us = max(0, ahead_us)
        max_offset_us = core.config.max_clock_offset_us
        if ahead_us <= max_offset_us + DEFAULT_CLOCK_LEAD_US:
            return
        log.warning(
            "%s: CLOCK BEHIND ITS RECOVERED BOUND: the timestamps of the last run reach %.3f s ahead of this "
            "server's clock (maximum clock offset %g ms). The clock stepped back since the last run, or was "
            "ahead then. Timestamps continue above the bound, so for the next %.0f s this server's writes are "
            "held back by the other DCs (their clocks plus the offset) and sessions that read them are refused "
            "by other servers; fix the clock (docs/operations.md, \"Clocks: the maximum offset\")",
            self.label, ahead_us / 1e6, max_offset_us / 1000, ahead_us / 1e6,
            extra={"event": "clock_behind_bound", "ahead_ms": round(ahead_us / 1000, 3)})
