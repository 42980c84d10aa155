"""One fuzz run: start the clients, drive the plan, read every key until the DCs agree, check.

The history is judged with ``okapikv.check.report.check_history``: per-key linearizability when
every client is in one DC (docs/protocol.md, "Operations": one partition server serializes a key),
and the causal, snapshot, session and convergence checkers always. When clients are spread over DCs
(``--dcs``), one reader per DC of the cluster then reads every key until all DCs agree, marked as
``final`` reads for the convergence checker (docs/protocol.md, "Replication and heartbeats":
replicas converge, last writer wins). After ``--kill-partitions`` with clients in one DC, one client
reads every key once the restarted servers serve, so a write the restart lost is seen even if
nothing read it in the run.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from okapikv.check.history import Operation
from okapikv.check.report import CheckReport, check_history
from okapikv.fuzz.clients import ClientCommand, ClientProcess, client_command
from okapikv.fuzz.cluster import Target
from okapikv.fuzz.kill import KillReport, PartitionKiller
from okapikv.fuzz.plan import Command, Plan
from okapikv.fuzz.recorder import Recorder
from okapikv.fuzz.side import SideLedger

#: How long the final readers keep reading every key, in every DC, before calling it divergence.
CONVERGENCE_TIMEOUT_S = 30.0


@dataclass
class Outcome:
    report: CheckReport
    operations: list[Operation]
    history_path: Path
    problems: list[str]
    elapsed_s: float
    final_rounds: int
    converged: bool | None
    #: what ``--kill-partitions`` did (None without it)
    kill: KillReport | None = None
    #: ``--counters-ttls``: what the side operations were answered (None without it)
    side: SideLedger | None = None

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.problems


def run_plan(plan: Plan, target: Target, history_path: Path, *, command: ClientCommand = client_command,
             meta: dict[str, Any] | None = None, killer: PartitionKiller | None = None) -> Outcome:
    """Drive the clients of ``plan`` against ``target``, write the history, check it (``killer``:
    kill and restart partitions midway, ``--kill-partitions``)."""
    dc_index = {name: index for index, name in enumerate(target.dcs)}
    ledger = SideLedger() if plan.counters_ttls else None
    if ledger is not None:
        plain = command

        def command(address: str, dc: str) -> list[str]:
            return [*plain(address, dc), "--counters"]
    multi_dc = len(set(plan.client_dcs)) > 1
    recorder = Recorder({
        "source": "fuzz", "dcs": len(target.dcs), "dc_names": list(target.dcs), "protocol": target.protocol,
        "seed": plan.seed, "clients": plan.clients, "ops": plan.operations_per_client, "conflict": plan.conflict,
        "client_dcs": list(plan.client_dcs), "key_prefix": plan.key_prefix, **(meta or {}),
    })
    clients: list[ClientProcess] = []
    readers: list[ClientProcess] = []
    elapsed_s, final_rounds, converged = 0.0, 0, None
    side_problems: list[str] = []
    try:
        for number, dc in enumerate(plan.client_dcs):
            clients.append(ClientProcess.start(f"c{number}", dc_index[dc], command(target.addresses[dc], dc)))
        if multi_dc:
            # The final reads need one session per DC of the cluster: a client of that DC when there
            # is one (its session is as good as a fresh one), else a reader of its own.
            by_dc = {client.dc: client for client in reversed(clients)}
            readers = [by_dc.get(dc_index[dc]) or ClientProcess.start(f"final-{dc}", dc_index[dc],
                                                                       command(target.addresses[dc], dc))
                       for dc in target.dcs]
        elif killer is not None:
            # After a kill, one client reads every key once the restarted servers serve, so a write
            # the restart lost is seen even where no client read its key between the restart and its
            # next write (in the clients' one DC: the history stays single-DC, linearizability-checked).
            readers = clients[:1]
        everyone = list(dict.fromkeys(clients + readers))
        _run_threads([functools.partial(process.warm_up, plan.warm_up_key) for process in everyone], everyone)
        if not any(process.problems for process in everyone):
            started = time.monotonic()
            tick = None if killer is None else functools.partial(killer.tick, recorder)
            _run_threads([functools.partial(_drive, client, plan.commands(number), recorder, ledger)
                          for number, client in enumerate(clients)], clients, tick)
            elapsed_s = time.monotonic() - started
            if killer is not None:
                killer.finish(recorder)  # the servers must be back (or given up on) before the final reads
            if readers and not any(client.problems for client in clients):
                final_rounds, converged = _read_until_converged(readers, plan.all_keys(), recorder)
            if ledger is not None and not any(client.problems for client in clients):
                side_problems = ledger.check(readers or clients[:1], plan.counter_keys())
        for process in everyone:
            process.stop()
    finally:
        for process in clients + readers:
            process.close()
    problems = [problem for process in dict.fromkeys(clients + readers) for problem in process.problems]
    problems += side_problems
    kill = killer.report if killer is not None else None
    if killer is not None:
        if kill is None:
            problems.append(f"--kill-partitions: the run ended before {killer.at_operations} operations "
                            "completed, so nothing was killed")
        else:
            problems += kill.problems
            recorder.history.meta["kill"] = kill.to_json()
    recorder.history.write(history_path)
    history = recorder.history.history()
    report = check_history(history)
    return Outcome(report, history.operations, history_path, problems, elapsed_s, final_rounds, converged, kill,
                   ledger)


def _drive(client: ClientProcess, commands: Iterator[Command], recorder: Recorder,
           ledger: SideLedger | None = None) -> None:
    for command in commands:
        if command.f in ("incr", "putex"):  # out of the history (``okapikv.fuzz.side``)
            assert ledger is not None
            lines = client.side(command)
            if lines is None:
                return
            ledger.answered(client.name, command, lines)
        elif client.execute(recorder, command) is None:
            return


def _run_threads(work: Sequence[Callable[[], Any]], processes: Sequence[ClientProcess],
                 tick: Callable[[], None] | None = None) -> None:
    """Run ``work`` on one thread each, and be the watchdog meanwhile: a process that stays silent
    past its command's deadline is killed (its pending operation is then recorded as unknown and
    its thread ends), so one hung client cannot hang the run. ``tick`` is called on this thread
    every ~50 ms (the partition killer)."""
    threads = [threading.Thread(target=job, daemon=True) for job in work]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        for thread in threads:
            thread.join(timeout=0.05 if tick is not None else 0.2)
            if tick is not None:
                tick()
        now = time.monotonic()
        for process in processes:
            process.hang_up(now)


def _read_until_converged(readers: Sequence[ClientProcess], keys: Sequence[str],
                          recorder: Recorder) -> tuple[int, bool]:
    """Read every key in every DC (``final`` reads), round after round, until a round in which
    every DC reads the same value for every key, or ``CONVERGENCE_TIMEOUT_S``. The convergence
    checker judges the last round; earlier rounds are ordinary reads of the history."""
    deadline = time.monotonic() + CONVERGENCE_TIMEOUT_S
    rounds = 0
    while True:
        rounds += 1
        seen: dict[str, dict[str, str | None]] = {reader.name: {} for reader in readers}
        _run_threads([functools.partial(_read_keys, reader, keys, recorder, seen[reader.name])
                      for reader in readers], readers)
        if any(reader.problems for reader in readers):
            return rounds, False
        views = list(seen.values())
        if all(view == views[0] for view in views) and "<error>" not in views[0].values():
            return rounds, True
        if time.monotonic() >= deadline:
            return rounds, False
        time.sleep(0.05)


def _read_keys(reader: ClientProcess, keys: Sequence[str], recorder: Recorder, into: dict[str, str | None]) -> None:
    """One round of final reads in one DC: ``into[key]`` is what it read (``<error>`` if it failed)."""
    for key in keys:
        op = reader.execute(recorder, Command("get", f"GET {key}", key=key), final=True)
        if op is None:
            return
        into[key] = op.read if op.ok else "<error>"

