"""``okapi fuzz --kill-partitions``: kill -9 partitions in the middle of a run, restart them, and say
what it did to the operations.

With ``--kill-partitions 1`` or ``1,2`` (local cluster only) the cluster is durable (``okapi server
--data-dir``, one directory per server in the run's temporary directory), and once about a third of
the operations have completed (``KILL_AT_FRACTION``) the server processes of the named partitions, in
every DC of the cluster, are killed with SIGKILL, left down ``KILL_DOWN_S`` (1 s) while the clients
keep issuing operations, and restarted on the same ports and data directories; the run then goes on
to its end. A partition down must only delay its operations (docs/operations.md, "Durability and
failures"), so every operation must complete and the history must check clean: acknowledged writes
must survive the kill (a lost one is a stale read the linearizability checker catches), and no
anomaly may appear around the restart. The summary says which servers were killed (old and new pids)
and when, and how many operations waited across the kill. The kill and the restart are done by the
watchdog loop of the main thread (``PartitionKiller.tick``), because the launcher ties each server's
life to the thread that started it (``PR_SET_PDEATHSIG``), so a helper thread must not start one.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from okapikv.check.history import Operation
from okapikv.core.partitioning import partition_of
from okapikv.fuzz.cluster import CLUSTER_START_TIMEOUT_S, LocalCluster
from okapikv.fuzz.errors import FuzzError
from okapikv.fuzz.recorder import Recorder

if TYPE_CHECKING:
    from okapikv.cluster.processes import Child

#: ``--kill-partitions``: kill once this share of the run's operations has completed ...
KILL_AT_FRACTION = 1 / 3
#: ... and restart the killed servers this long after the kill
KILL_DOWN_S = 1.0


@dataclass
class ServerKill:
    """One server that ``--kill-partitions`` killed and restarted."""

    label: str  # <dc>/<partition>
    address: str
    old_pid: int
    exit_status: int | None = None  # of the killed process: -9 after SIGKILL
    new_pid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"server": self.label, "address": self.address, "old_pid": self.old_pid,
                "exit_status": self.exit_status, "new_pid": self.new_pid}


@dataclass
class KillReport:
    """What ``PartitionKiller`` did; times on the history's clock (monotonic microseconds)."""

    partitions: tuple[int, ...]
    num_partitions: int
    servers: list[ServerKill]
    after_operations: int  # operations completed when the kill came
    killed_us: int  # just before the first SIGKILL
    dead_us: int  # once every killed process was reaped
    restarted_us: int | None = None  # the new processes started
    back_us: int | None = None  # every restarted server answered its health check
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"partitions": list(self.partitions), "after_operations": self.after_operations,
                "killed_us": self.killed_us, "dead_us": self.dead_us, "restarted_us": self.restarted_us,
                "back_us": self.back_us,
                "servers": [server.to_json() for server in self.servers]}

    def touches(self, op: Operation) -> bool:
        """Whether ``op`` needs a killed server: a single-key operation of a killed partition, or
        a scan (its coordinator reads every partition)."""
        if op.key is None:
            return True
        return partition_of(op.key.encode(), self.num_partitions) in self.partitions

    def waited(self, operations: Sequence[Operation]) -> list[Operation]:
        """The run's operations that waited across the kill: they needed a killed server, were
        issued before it was restarted (in flight at the kill, or issued while it was down) and
        completed only after the restart. A lower bound: an operation issued after the restart,
        while the new process was still starting, waited too but is not counted."""
        restarted = self.restarted_us if self.restarted_us is not None else INFINITE_US
        return [op for op in operations
                if not op.final and self.touches(op) and op.invoke_us < restarted
                and (op.complete_us if op.complete_us is not None else INFINITE_US) > restarted]


INFINITE_US = 1 << 62


class PartitionKiller:
    """``--kill-partitions``: once ``at_operations`` operations have completed, SIGKILL the servers
    of ``partitions`` in every DC, wait ``down_s``, restart them on the same ports and data
    directories and wait until they serve again. A state machine stepped by ``tick`` from the
    watchdog loop of the thread that started the cluster (see the module docstring)."""

    def __init__(self, cluster: LocalCluster, partitions: Sequence[int], at_operations: int,
                 down_s: float = KILL_DOWN_S) -> None:
        self.cluster = cluster
        self.partitions = tuple(partitions)
        self.at_operations = at_operations
        self.down_s = down_s
        self.report: KillReport | None = None
        self._victims: list[Child] = []
        self._pending: list[Child] = []  # restarted, not yet serving
        self._deadline = 0.0
        self._done = False

    def tick(self, recorder: Recorder) -> None:
        if self._done:
            return
        now = recorder.now_us()
        report = self.report
        if report is None:
            if recorder.completed >= self.at_operations:
                self._kill(recorder)
        elif report.restarted_us is None:
            if now >= report.killed_us + self.down_s * 1e6:
                self._restart(recorder)
        else:
            self._check_back(recorder)

    def finish(self, recorder: Recorder) -> None:
        """Step until the restarted servers serve (or it is given up), whatever the clients did. A kill
        due once every operation completed happens here, before the final reads."""
        self.tick(recorder)
        if self.report is None:
            self._done = True  # the run ended before the kill was due: run_plan reports it
        while not self._done:
            self.tick(recorder)
            time.sleep(0.05)

    def _kill(self, recorder: Recorder) -> None:
        victims = self.cluster.of_partitions(self.partitions)
        completed, killed_us = recorder.completed, recorder.now_us()
        statuses = self.cluster.kill(victims)
        servers = [ServerKill(child.server.label, child.server.address, child.process.pid, status)
                   for child, status in zip(victims, statuses, strict=True)]
        self.report = KillReport(self.partitions, self.cluster.config.partitions, servers, completed,
                                 killed_us, recorder.now_us())
        for server in servers:
            if server.exit_status is None:
                self.report.problems.append(f"--kill-partitions: server {server.label} did not die")
        self._victims = victims

    def _restart(self, recorder: Recorder) -> None:
        assert self.report is not None
        restarted = [self.cluster.restart(child) for child in self._victims]
        self.report.restarted_us = recorder.now_us()
        for server, child in zip(self.report.servers, restarted, strict=True):
            server.new_pid = child.process.pid
        self._pending = restarted
        self._deadline = time.monotonic() + CLUSTER_START_TIMEOUT_S

    def _check_back(self, recorder: Recorder) -> None:
        from okapikv.cluster.health import is_serving

        assert self.report is not None
        for child in list(self._pending):
            code = child.process.poll()
            if code is not None:
                self.report.problems.append(f"--kill-partitions: restarted server {child.server.label} exited "
                                            f"with status {code}")
                self._pending.remove(child)
            elif is_serving(child.server.address, timeout_s=0.5):
                self._pending.remove(child)
        if not self._pending:
            self.report.back_us = recorder.now_us()
            self._done = True
        elif time.monotonic() > self._deadline:
            self.report.problems.append("--kill-partitions: no health from restarted "
                                        + ", ".join(child.server.label for child in self._pending)
                                        + f" within {CLUSTER_START_TIMEOUT_S:g} s")
            self._done = True



def kill_lines(kill: KillReport, operations: Sequence[Operation], total: int) -> list[str]:
    """What ``--kill-partitions`` killed and when, and what it did to the operations."""
    start_us = min((op.invoke_us for op in operations if not op.final), default=kill.killed_us)

    def at(us: int) -> str:
        return f"{(us - start_us) / 1e6:.1f} s"

    which = ", ".join(str(partition) for partition in kill.partitions)
    old = ", ".join(f"{server.label} pid {server.old_pid} (exit {server.exit_status})" for server in kill.servers)
    lines = [f"killed partition(s) {which} with SIGKILL at {at(kill.killed_us)}, after {kill.after_operations} of "
             f"{total} operations: {old}"]
    if kill.restarted_us is not None:
        new = ", ".join(f"{server.label} pid {server.new_pid}" for server in kill.servers)
        back = (f", serving again at {at(kill.back_us)} ({(kill.back_us - kill.killed_us) / 1e6:.1f} s after the "
                "kill)" if kill.back_us is not None else ", not serving again")
        lines.append(f"restarted them at {at(kill.restarted_us)} on the same ports and data dirs: {new}{back}")
    waited = kill.waited(operations)
    statuses = Counter(op.status or "pending" for op in waited)
    in_flight = sum(1 for op in waited if op.invoke_us < kill.dead_us)
    longest = max(((op.complete_us or op.invoke_us) - op.invoke_us for op in waited), default=0)
    unknown = [op for op in operations if not op.final and op.status == "info"]
    lines.append(f"operations that waited across the kill (needed a killed server, issued before the restart, "
                 f"completed after it): {len(waited)} ({in_flight} in flight at the kill), longest "
                 f"{longest / 1e6:.1f} s; "
                 + ", ".join(f"{status} {count}" for status, count in sorted(statuses.items())))
    if unknown:
        lines.append(f"outcome unknown (recorded as info, may or may not have taken effect): {len(unknown)} "
                     f"write(s): {'; '.join(op.describe() for op in unknown[:5])}")
    return lines


def parse_partitions(text: str | None, partitions: int) -> tuple[int, ...]:
    """``--kill-partitions``: comma-separated partition numbers, each below ``partitions``."""
    if text is None:
        return ()
    try:
        numbers = tuple(dict.fromkeys(int(word) for word in text.split(",") if word.strip()))
    except ValueError:
        raise FuzzError(f"--kill-partitions takes partition numbers like 1 or 1,2, not {text!r}") from None
    if not numbers:
        raise FuzzError("--kill-partitions must name at least one partition")
    wrong = [number for number in numbers if not 0 <= number < partitions]
    if wrong:
        raise FuzzError(f"--kill-partitions: the cluster has partitions 0 to {partitions - 1}, not "
                        f"{', '.join(map(str, wrong))}")
    return numbers

