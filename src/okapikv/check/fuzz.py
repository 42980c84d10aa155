"""``okapi fuzz``: the course fuzzer (seeds/kvstore-service.md) against a real cluster, then checked.

What it does, and why this way:

- It drives real ``okapi client`` processes over their stdin/stdout protocol, exactly as the course's
  fuzzer drives its clients, so the whole path a user's script takes is under test: the line format,
  the client library's routing and sessions, gRPC, the servers. One thread per client process writes
  one command, reads its complete result, and only then writes the next (the course fuzzer's
  one-at-a-time discipline; it also makes each client one causal session with a clear session order).
- The mix is the course's: PUT 20%, SWAP 20%, GET 30%, SCAN 20%, DELETE 10%, over 8-character
  alphanumeric keys, 5 per client (disjoint per client, or one set of 5 shared by every client with
  ``--conflict``), with 16-character values that are unique per write, so the history is
  *differentiated*: a read names the write it read from, which the checkers rely on.
- Every operation is recorded in the shared history format (``okapikv.check.history``): an invoke
  event taken before the command is written, a completion taken after its last result line is read,
  both on the monotonic clock. That interval contains the operation's real effect, which is what the
  linearizability checker needs.
- It then judges the history with ``okapikv.check.report.check_history``: per-key linearizability
  when every client is in one DC (DESIGN.md section 2: one partition server serializes a key), and
  the causal, snapshot, session and convergence checkers always. When clients are spread over DCs
  (``--dcs``), one reader per DC of the cluster then reads every key until all DCs agree, marked as
  ``final`` reads for the convergence checker (DESIGN.md section 1: replicas converge, last writer
  wins). After ``--kill-partitions`` with clients in one DC, one client reads every key once the
  restarted servers serve, so a write the restart lost is seen even if nothing read it in the run.

Write timestamps: the checkers need the store's last-writer-wins order, ``(timestamp, DC)``, which
the course protocol does not print (``PUT k found``). So the clients run with ``--timestamps``, which
ends the PUT, SWAP and DELETE lines in `` ts=<n>`` (the server's timestamp of the write), and every
successful write is recorded with its timestamp and its client's DC index (the index of the DC in the
cluster's protocol order, the source DC the store breaks timestamp ties with). With them the causal
checker ranks the writes of each key and checks every read against its causal past, and convergence
means agreement with the winning write. A client that prints no timestamp (an older ``okapi client``,
a stand-in) is still accepted: its writes are recorded without one, the checkers then check only what
needs no order (thin-air reads, causal cycles, scan shape and range), and the summary says so.

Isolation: a local cluster (the default) is fresh. With ``--connect`` the cluster keeps what earlier
runs wrote, and the checkers assume every key starts empty, so every key of a run starts with a
3-character prefix drawn afresh per run (printed and kept in the history's meta) and SCAN ranges lie
between two keys of the run; the operation sequence itself still follows ``--seed``.

Killing partitions (``--kill-partitions 1`` or ``1,2``; local cluster only): the cluster is then
durable (``okapi server --data-dir``, one directory per server in the run's temporary directory), and
once about a third of the operations have completed (``KILL_AT_FRACTION``) the server processes of
the named partitions, in every DC of the cluster, are killed with SIGKILL, left down ``KILL_DOWN_S``
(1 s) while the clients keep issuing operations, and restarted on the same ports and data
directories; the run then goes on to its end. Issue 7: a partition down must only delay its
operations, so every operation must complete and the history must check clean: acknowledged writes
must survive the kill (a lost one is a stale read the linearizability checker catches), and no
anomaly may appear around the restart. The summary says which servers were killed (old and new pids)
and when, and how many operations waited across the kill. The kill and the restart are done by the
watchdog loop of the main thread (``PartitionKiller.tick``), because the launcher ties each server's
life to the thread that started it (``PR_SET_PDEATHSIG``), so a helper thread must not start one.

What a kill does to the operations in flight, and how the history records it honestly (measured
before choosing; see ``okapikv.client.retry``): a call in flight on a killed server fails with
``UNAVAILABLE: Stream removed`` (the request was sent; it may or may not have been applied and made
durable before the kill), and every call made while the server is down fails at once with
``UNAVAILABLE: failed to connect to all addresses`` (never sent). By default the client library
retries both, which for a write is at-least-once: a retried SWAP whose first attempt was applied
returns the value it wrote itself, a retried PUT reports ``found``, and either may take effect twice,
which no register history explains; the checkers would then blame the store for the client's retry,
or (worse) accept a wrong answer recorded as ``ok``. So the fuzzer's clients run with ``okapi client
--at-most-once``: reads and calls that were never sent are retried until the server is back (they
complete ``ok``, after waiting), while a write whose call broke mid-way is not retried and answers
``ERROR outcome unknown``, which is recorded as ``info``: the checkers then let it take effect at any
point after its invocation, or never (linearizability gives it a return at infinity; the causal
checkers let it be read from and use it as no witness). Only the writes in flight at the kill end
so, a few per kill; the summary counts them.

Exit status: 0 when the history checks clean, 1 on an anomaly or when a client misbehaved (exited
early, answered out of format, hung), 2 when the run could not start (bad arguments, no cluster),
130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import random
import re
import secrets
import shlex
import shutil
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from okapikv.check.history import HistoryRecorder, Operation
from okapikv.check.report import CheckReport, check_history
from okapikv.cluster import ports
from okapikv.core.deployment import PAPER_DC_NAMES
from okapikv.core.partitioning import partition_of

if TYPE_CHECKING:
    from okapikv.cluster.config import ClusterConfig, ServerConfig
    from okapikv.cluster.launcher import Child

#: The course fuzzer's operation mix, in percent.
MIX: tuple[tuple[str, int], ...] = (("put", 20), ("swap", 20), ("get", 30), ("scan", 20), ("delete", 10))
ALPHANUMERIC = string.ascii_letters + string.digits
KEY_LENGTH = 8
KEY_PREFIX_LENGTH = 3
VALUE_LENGTH = 16
KEYS_PER_CLIENT = 5
#: ``okapi client --timeout-s``: an operation that cannot complete turns into an ERROR line by then.
CLIENT_TIMEOUT_S = 30.0
#: A client silent this long after a command is presumed hung and killed (its operation: unknown).
#: Well above ``CLIENT_TIMEOUT_S``: the client answers ERROR by then unless it is starved of CPU.
HANG_TIMEOUT_S = CLIENT_TIMEOUT_S + 60.0
#: How long a client may take to start and answer its warm-up read (importing gRPC on a loaded
#: two-core machine has been seen to take half a minute).
STARTUP_TIMEOUT_S = 180.0
#: How long the final readers keep reading every key, in every DC, before calling it divergence.
CONVERGENCE_TIMEOUT_S = 30.0
CLUSTER_START_TIMEOUT_S = 60.0
DEFAULT_DCS = PAPER_DC_NAMES
DEFAULT_PARTITIONS = 2
#: ``--kill-partitions``: kill once this share of the run's operations has completed ...
KILL_AT_FRACTION = 1 / 3
#: ... and restart the killed servers this long after the kill
KILL_DOWN_S = 1.0


class FuzzError(Exception):
    """The run could not be set up (exit status 2)."""


# ---------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True, slots=True)
class Command:
    """One generated operation: ``f`` as in the history format, the protocol line, its arguments."""

    f: str
    line: str
    key: str | None = None
    value: str | None = None
    start: str | None = None
    end: str | None = None

    def request(self) -> dict[str, Any]:
        """The invoke fields of the history format."""
        if self.f == "scan":
            return {"start": self.start, "end": self.end, "limit": None}
        if self.f in ("put", "swap"):
            return {"key": self.key, "value": self.value}
        return {"key": self.key}


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything that decides what the clients send; ``client_dcs[i]`` is the DC of client ``i``."""

    clients: int
    operations_per_client: int
    conflict: bool
    seed: int
    key_prefix: str
    client_dcs: tuple[str, ...]

    def key_sets(self) -> list[tuple[str, ...]]:
        """The keys of each client: ``KEYS_PER_CLIENT`` each, all distinct, or one shared set."""
        rng = random.Random(f"okapi-fuzz-keys/{self.seed}")
        needed = KEYS_PER_CLIENT if self.conflict else KEYS_PER_CLIENT * self.clients
        keys: list[str] = []
        seen: set[str] = set()
        while len(keys) < needed:
            key = self.key_prefix + "".join(rng.choices(ALPHANUMERIC, k=KEY_LENGTH - len(self.key_prefix)))
            if key not in seen:
                seen.add(key)
                keys.append(key)
        if self.conflict:
            return [tuple(keys)] * self.clients
        return [tuple(keys[i * KEYS_PER_CLIENT:(i + 1) * KEYS_PER_CLIENT]) for i in range(self.clients)]

    def all_keys(self) -> list[str]:
        return sorted({key for keys in self.key_sets() for key in keys})

    @property
    def warm_up_key(self) -> str:
        """A key no run writes (one character longer than the generated ones)."""
        return self.key_prefix + "warmup"

    def commands(self, client: int) -> Iterator[Command]:
        """Client ``client``'s operations, the same for the same seed.

        Values are ``<client, 3 digits><write number, 7 digits><6 random characters>``: unique per
        write in the run (the history must be differentiated) and 16 alphanumeric characters.
        """
        rng = random.Random(f"okapi-fuzz-ops/{self.seed}/{client}")
        keys = self.key_sets()[client]
        names = [name for name, _ in MIX]
        weights = [weight for _, weight in MIX]
        writes = 0
        for _ in range(self.operations_per_client):
            f = rng.choices(names, weights)[0]
            if f == "scan":
                start, end = sorted(rng.sample(keys, 2) if len(keys) > 1 else [keys[0], keys[0]],
                                    key=lambda k: k.encode())
                yield Command("scan", f"SCAN {start} {end}", start=start, end=end)
                continue
            key = rng.choice(keys)
            if f in ("put", "swap"):
                writes += 1
                value = f"{client:03d}{writes:07d}" + "".join(rng.choices(ALPHANUMERIC, k=VALUE_LENGTH - 10))
                yield Command(f, f"{f.upper()} {key} {value}", key=key, value=value)
            else:
                yield Command(f, f"{f.upper()} {key}", key=key)


def make_plan(args: argparse.Namespace, client_dcs: Sequence[str], fresh_prefix: bool) -> Plan:
    """The plan for ``args``; ``fresh_prefix``: draw the key prefix anew (a shared, used cluster)."""
    if fresh_prefix:
        prefix = "".join(secrets.choice(ALPHANUMERIC) for _ in range(KEY_PREFIX_LENGTH))
    else:
        prefix = "".join(random.Random(f"okapi-fuzz-prefix/{args.seed}").choices(ALPHANUMERIC,
                                                                                   k=KEY_PREFIX_LENGTH))
    return Plan(args.clients, args.ops, args.conflict, args.seed, prefix, tuple(client_dcs))


# ---------------------------------------------------------------------------------------- results


class ReplyError(ValueError):
    """A client's output that is not the protocol's answer to the command sent."""


#: the `` ts=<n>`` that ``okapi client --timestamps`` ends a PUT, SWAP or DELETE line with
_TIMESTAMP = re.compile(r"ts=([0-9]+)")


def parse_reply(command: Command, lines: Sequence[str]) -> dict[str, Any]:
    """The history's ok fields for ``lines``, the complete output for ``command``."""
    first = lines[0]
    words = first.split(" ")
    f = command.f
    if f == "scan":
        if first != f"SCAN {command.start} {command.end} BEGIN" or lines[-1] != "SCAN END":
            raise ReplyError(f"expected a SCAN {command.start} {command.end} block, got {list(lines[:3])}")
        items = []
        for line in lines[1:-1]:
            parts = line.split(" ")
            if len(parts) != 4 or parts[:2] != ["", ""]:
                raise ReplyError(f"malformed SCAN item line {line!r}")
            items.append((parts[2], parts[3]))
        return {"items": tuple(items)}
    stamp: dict[str, Any] = {}
    if f in ("put", "swap", "delete") and len(words) == 4:
        match = _TIMESTAMP.fullmatch(words[3])
        if match is None:
            raise ReplyError(f"expected '{f.upper()} {command.key} ... ts=<n>', got {first!r}")
        stamp = {"timestamp": int(match.group(1))}
        words = words[:3]
    if len(words) != 3 or words[0] != f.upper() or words[1] != command.key:
        raise ReplyError(f"expected '{f.upper()} {command.key} ...', got {first!r}")
    result = words[2]
    if f in ("put", "delete"):
        if result not in ("found", "not_found"):
            raise ReplyError(f"expected found or not_found, got {first!r}")
        return {"found": result == "found", **stamp}
    value = None if result == "null" else result
    return {"old": value, **stamp} if f == "swap" else {"read": value}


def read_reply(stream: IO[str], command: Command) -> list[str]:
    """The lines answering ``command`` (several for SCAN); ``EOFError`` if the client exited."""
    first = _read_line(stream)
    lines = [first]
    if command.f == "scan" and first.endswith(" BEGIN") and first.startswith("SCAN "):
        while lines[-1] != "SCAN END":
            lines.append(_read_line(stream))
    return lines


def _read_line(stream: IO[str]) -> str:
    line = stream.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


# ---------------------------------------------------------------------------------------- clients


def client_command(address: str, dc: str) -> list[str]:
    """The ``okapi client`` process for DC ``dc`` (``--dc`` makes it check ``address`` is there;
    ``--timestamps`` makes it print the write timestamps the checkers need; ``--at-most-once`` makes
    a write whose call broke mid-way an ``ERROR`` (recorded as unknown) rather than a retry that
    could apply it twice, see the module docstring)."""
    return [sys.executable, "-m", "okapikv.cli", "client", "--connect", address, "--dc", dc,
            "--timeout-s", str(CLIENT_TIMEOUT_S), "--timestamps", "--at-most-once"]


ClientCommand = Callable[[str, str], list[str]]


@dataclass(eq=False)
class ClientProcess:
    """One ``okapi client`` process and the session it is in the history (``name``, ``dc``)."""

    name: str
    dc: int
    process: subprocess.Popen[str]
    stderr: IO[str]
    #: when the command in flight counts as hung (monotonic seconds); None while idle
    deadline: float | None = None
    hung: bool = False
    problems: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, name: str, dc: int, command: list[str]) -> ClientProcess:
        # Kept open for the life of the process (its tail explains a crash); closed by ``close``.
        stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                   text=True, encoding="utf-8", errors="replace", bufsize=1)
        return cls(name, dc, process, stderr)

    def stderr_tail(self, lines: int = 5) -> str:
        with contextlib.suppress(OSError, ValueError):
            self.stderr.seek(0)
            tail = self.stderr.read().strip().splitlines()[-lines:]
            return " | ".join(tail)
        return ""

    def exchange(self, command: Command, limit_s: float) -> list[str]:
        """Send ``command`` and read its answer; ``EOFError`` or ``OSError`` if the client is gone
        (or was killed for staying silent ``limit_s``)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.deadline = time.monotonic() + limit_s
        try:
            self.process.stdin.write(command.line + "\n")
            self.process.stdin.flush()
            return read_reply(self.process.stdout, command)
        finally:
            self.deadline = None

    def hang_up(self, now: float) -> None:
        """Kill the process if the command in flight is past its deadline (called by the watchdog)."""
        deadline = self.deadline
        if deadline is not None and now > deadline and self.process.poll() is None:
            self.hung = True
            self.problems.append(f"{self.name}: no answer in time; killed the client")
            self.process.kill()

    def _gone(self, command: Command) -> None:
        """Note that the process stopped answering during ``command`` (once: the watchdog already
        said why when it killed the process)."""
        if self.hung:
            return
        try:
            status: int | str = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            status = "still running, output closed"
        tail = self.stderr_tail()
        self.problems.append(f"{self.name}: `okapi client` exited (status {status}) during {command.line!r}"
                             + (f": {tail}" if tail else ""))

    def warm_up(self, key: str) -> None:
        """Wait until the client is up and has completed one read (of ``key``, which no run writes,
        so leaving it out of the history hides nothing from the checkers): operation intervals then
        measure operations, not the start-up of a Python process."""
        command = Command("get", f"GET {key}", key=key)
        try:
            lines = self.exchange(command, STARTUP_TIMEOUT_S)
        except (EOFError, OSError):
            self._gone(command)
            return
        if lines != [f"GET {key} null"]:
            self.problems.append(f"{self.name}: warm-up read answered {lines[:3]}")

    def execute(self, recorder: Recorder, command: Command, final: bool = False) -> Operation | None:
        """Send one command, record it; None (and a problem noted) once the client is unusable."""
        op = recorder.invoke(self.name, self.dc, command, final)
        try:
            lines = self.exchange(command, HANG_TIMEOUT_S)
        except (EOFError, OSError):
            recorder.complete(op, "info", error="the client process exited")
            self._gone(command)
            return None
        if lines[0].startswith("ERROR "):
            # A read that failed had no effect; a write that failed may or may not have taken effect,
            # except when the server refused it outright.
            refused = command.f in ("get", "scan") or lines[0].startswith("ERROR invalid argument")
            recorder.complete(op, "fail" if refused else "info", error=lines[0][len("ERROR "):])
            return op
        try:
            result = parse_reply(command, lines)
        except ReplyError as error:
            recorder.complete(op, "info", error=str(error))
            self.problems.append(f"{self.name}: {error}")
            return None
        recorder.complete(op, "ok", **result)
        return op

    def stop(self) -> None:
        """STOP, then make sure the process is gone."""
        with contextlib.suppress(OSError, ValueError):
            assert self.process.stdin is not None
            self.process.stdin.write("STOP\n")
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        self.kill()
        for stream in (self.process.stdin, self.process.stdout, self.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()


class Recorder:
    """A thread-safe ``HistoryRecorder`` that reads the monotonic clock itself: an invoke's time is
    taken before its command is sent and a completion's after its answer is read, so the recorded
    interval always contains the operation's real effect."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self.history = HistoryRecorder(meta)
        self._lock = threading.Lock()
        #: operations of the run (not final reads) completed so far
        self.completed = 0

    @staticmethod
    def now_us() -> int:
        return time.monotonic_ns() // 1000

    def invoke(self, process: str, dc: int, command: Command, final: bool) -> Operation:
        with self._lock:
            extra: dict[str, Any] = {"final": True} if final else {}
            return self.history.invoke(process, dc, command.f, self.now_us(), **command.request(), **extra)

    def complete(self, op: Operation, status: str, **result: Any) -> None:
        with self._lock:
            self.history.complete(op, status, self.now_us(), **result)
            if not op.final:
                self.completed += 1


# ---------------------------------------------------------------------------------------- the run


@dataclass(frozen=True, slots=True)
class Target:
    """The cluster the clients talk to: DC names in protocol order and one server address per DC."""

    description: str
    protocol: str
    dcs: tuple[str, ...]
    addresses: dict[str, str]


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

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.problems


def run_plan(plan: Plan, target: Target, history_path: Path, *, command: ClientCommand = client_command,
             meta: dict[str, Any] | None = None, killer: PartitionKiller | None = None) -> Outcome:
    """Drive the clients of ``plan`` against ``target``, write the history, check it (``killer``:
    kill and restart partitions midway, ``--kill-partitions``)."""
    dc_index = {name: index for index, name in enumerate(target.dcs)}
    multi_dc = len(set(plan.client_dcs)) > 1
    recorder = Recorder({
        "source": "fuzz", "dcs": len(target.dcs), "dc_names": list(target.dcs), "protocol": target.protocol,
        "seed": plan.seed, "clients": plan.clients, "ops": plan.operations_per_client, "conflict": plan.conflict,
        "client_dcs": list(plan.client_dcs), "key_prefix": plan.key_prefix, **(meta or {}),
    })
    clients: list[ClientProcess] = []
    readers: list[ClientProcess] = []
    elapsed_s, final_rounds, converged = 0.0, 0, None
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
            _run_threads([functools.partial(_drive, client, plan.commands(number), recorder)
                          for number, client in enumerate(clients)], clients, tick)
            elapsed_s = time.monotonic() - started
            if killer is not None:
                killer.finish(recorder)  # the servers must be back (or given up on) before the final reads
            if readers and not any(client.problems for client in clients):
                final_rounds, converged = _read_until_converged(readers, plan.all_keys(), recorder)
        for process in everyone:
            process.stop()
    finally:
        for process in clients + readers:
            process.close()
    problems = [problem for process in dict.fromkeys(clients + readers) for problem in process.problems]
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
    return Outcome(report, history.operations, history_path, problems, elapsed_s, final_rounds, converged, kill)


def _drive(client: ClientProcess, commands: Iterator[Command], recorder: Recorder) -> None:
    for command in commands:
        if client.execute(recorder, command) is None:
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


# ---------------------------------------------------------------------------------------- the cluster


def free_base_port(count: int, host: str = "127.0.0.1") -> int:
    """A port p with p .. p + count - 1 free now (``okapikv.cluster.ports``)."""
    try:
        return ports.free_port_block(count, host)
    except RuntimeError as error:
        raise FuzzError(str(error)) from None


class LocalCluster:
    """The ``okapi server`` processes ``local_cluster`` started, and what is needed to kill one and
    start it again on the same port and data directory (``data_root``: None when in memory)."""

    def __init__(self, target: Target, config: ClusterConfig, config_path: Path, children: list[Child],
                 data_root: Path | None) -> None:
        self.target = target
        self.config = config
        self.config_path = config_path
        self.children = children
        self.data_root = data_root

    def data_dir(self, server: ServerConfig) -> Path | None:
        from okapikv.cluster.launcher import server_data_dir

        return server_data_dir(self.data_root, server) if self.data_root is not None else None

    def of_partitions(self, partitions: Sequence[int]) -> list[Child]:
        return [child for child in self.children if child.server.partition in partitions]

    def kill(self, children: Sequence[Child]) -> list[int | None]:
        """SIGKILL these servers (all the signals first, so they die together) and reap them:
        their exit statuses (None: still there after 10 s)."""
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                child.process.kill()
        statuses: list[int | None] = []
        for child in children:
            try:
                statuses.append(child.process.wait(timeout=10))
            except subprocess.TimeoutExpired:
                statuses.append(None)
        return statuses

    def restart(self, child: Child) -> Child:
        """Start the server of ``child`` again, same config, port and data directory (call it on the
        thread that started the cluster: the launcher ties a server's life to its starting thread)."""
        from okapikv.cluster.launcher import Child, start_server

        fresh = Child(child.server, start_server(self.config_path, child.server,
                                                 data_dir=self.data_dir(child.server)))
        self.children[self.children.index(child)] = fresh
        return fresh


@contextlib.contextmanager
def local_cluster(dcs: Sequence[str], partitions: int, protocol: str, directory: Path,
                  durable: bool = False, base_port: int | None = None) -> Iterator[LocalCluster]:
    """A fresh cluster of ``okapi server`` processes (as `okapi up` starts them, with the realistic
    WAN delays) on free ports, its config kept in ``directory`` rather than ``~/.okapi`` so a fuzz
    run leaves a user's own cluster alone. In memory unless ``durable`` (``--kill-partitions``: a
    killed server must come back with its data): then each server keeps its data in
    ``directory/data/<dc>-p<n>``, fresh, so every run still starts from an empty store. Stopped on
    exit, whatever happens. ``base_port`` (``--base-port``): the servers' consecutive ports start
    there (one attempt) instead of at a drawn block (``okapikv.cluster.ports``, three attempts)."""
    from okapikv.cluster import config as cluster_config
    from okapikv.cluster.health import wait_until_serving
    from okapikv.cluster.launcher import Child, server_data_dir, start_server, stop_children

    children: list[Child] = []
    data_root = directory / "data" if durable else None
    try:
        attempts = 1 if base_port is not None else 3
        for attempt in range(attempts):
            try:
                first = base_port if base_port is not None else free_base_port(len(dcs) * partitions)
                config = cluster_config.local_cluster(dcs=dcs, partitions=partitions, protocol=protocol,
                                                      base_port=first, cluster_id="okapi-fuzz")
            except ValueError as error:
                raise FuzzError(str(error)) from None
            path = config.dump(directory / "cluster.toml")
            if data_root is not None:
                shutil.rmtree(data_root, ignore_errors=True)  # an earlier attempt's (other ports)
            children = [Child(server, start_server(path, server, data_dir=None if data_root is None
                                                   else server_data_dir(data_root, server)))
                        for server in config.servers]

            def exited(children: list[Child] = children) -> str | None:
                for child in children:
                    code = child.process.poll()
                    if code is not None:
                        return f"server {child.server.label} exited with status {code}"
                return None

            try:
                not_ready = wait_until_serving([s.address for s in config.servers], CLUSTER_START_TIMEOUT_S,
                                               give_up=exited)
            except RuntimeError as error:  # a port taken meanwhile: try other ports
                stop_children(children)
                children = []
                if attempt == attempts - 1:
                    raise FuzzError(f"the local cluster did not start: {error}") from None
                continue
            if not_ready:
                raise FuzzError(f"the local cluster did not start: no health from {', '.join(not_ready)}")
            storage = "durable" if durable else "in memory"
            target = Target(f"a local cluster ({len(dcs)} DC(s) x {partitions} partition(s), realistic WAN, "
                            f"{storage})", protocol, config.dcs,
                            {dc: config.server(dc, 0).address for dc in config.dcs})
            yield LocalCluster(target, config, path, children, data_root)
            return
    finally:
        stop_children(children)


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


def connected_cluster(address: str) -> Target:
    """The running cluster ``address`` belongs to (asked through ClusterInfo)."""
    from okapikv.cluster.status import topology_from_server

    try:
        topology = topology_from_server(address)
    except ValueError as error:
        raise FuzzError(str(error)) from None
    addresses: dict[str, str] = {}
    for dc, partition, server_address in topology.servers:
        if partition == 0:
            addresses[dc] = server_address
    return Target(f"the cluster at {address} ({len(topology.dcs)} DC(s))", topology.protocol, topology.dcs,
                  addresses)


# ---------------------------------------------------------------------------------------- the command


def _client_dcs(args: argparse.Namespace, cluster_dcs: Sequence[str]) -> list[str]:
    """Round-robin over ``--dcs`` (names checked against the cluster), else the cluster's first DC."""
    if not args.dcs:
        return [cluster_dcs[0]] * args.clients
    names = _names(args.dcs)
    unknown = [name for name in names if name not in cluster_dcs]
    if unknown:
        raise FuzzError(f"unknown DC(s) {', '.join(unknown)}; the cluster has {', '.join(cluster_dcs)}")
    return [names[number % len(names)] for number in range(args.clients)]


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise FuzzError("--dcs must name at least one DC")
    return names


def reproduce_command(args: argparse.Namespace) -> str:
    words = ["okapi", "fuzz", "--clients", str(args.clients), "--ops", str(args.ops), "--seed", str(args.seed)]
    if args.conflict:
        words.append("--conflict")
    if args.dcs:
        words += ["--dcs", args.dcs]
    if args.connect:
        words += ["--connect", args.connect]
    for name in ("protocol", "partitions"):
        value = getattr(args, name, None)
        if value is not None:
            words += [f"--{name}", str(value)]
    if getattr(args, "kill_partitions", None):
        words += ["--kill-partitions", args.kill_partitions]
    return shlex.join(words)


def summary_lines(plan: Plan, target: Target, outcome: Outcome, args: argparse.Namespace) -> list[str]:
    history = outcome.report
    operations = [op for op in outcome.operations if not op.final]
    by_function = Counter(op.f for op in operations)
    errors = Counter(op.status for op in operations if op.status != "ok")
    total = len(operations)
    rate = total / outcome.elapsed_s if outcome.elapsed_s > 0 else 0.0
    lines = [
        f"ran {total} operations in {outcome.elapsed_s:.1f} s ({rate:.0f} ops/s): "
        + ", ".join(f"{f} {by_function[f]}" for f, _ in MIX)
        + (f"; not ok: {', '.join(f'{k} {v}' for k, v in sorted(errors.items()))}" if errors else "; all ok"),
    ]
    if outcome.converged is not None:
        finals = sum(1 for op in outcome.operations if op.final)
        state = "agreed" if outcome.converged else "still disagreed"
        lines.append(f"final reads: {finals} in {outcome.final_rounds} round(s), after which every DC {state}")
    lines += history.summary_lines(max_anomalies=20)
    unranked = sum(1 for op in outcome.operations if op.is_write and op.ok and op.timestamp is None)
    if unranked and len(set(plan.client_dcs)) > 1:
        lines.append(f"note: {unranked} successful write(s) came without a timestamp (a client that does not "
                     "print them), so the checkers do not know their place in the store's last-writer-wins order: "
                     "reads of them are checked for thin-air values and causal cycles only, and convergence "
                     "is agreement between DCs")
    elif unranked:
        lines.append(f"note: {unranked} successful write(s) came without a timestamp: single-key operations were "
                     "checked for linearizability (which needs none), scans for thin-air values, range and order "
                     "only")
    if outcome.kill is not None:
        lines += kill_lines(outcome.kill, outcome.operations, total)
    for problem in outcome.problems:
        lines.append(f"client problem: {problem}" if not problem.startswith("--kill-partitions") else problem)
    lines.append(f"history: {outcome.history_path} (re-check with: okapi check {outcome.history_path})")
    lines.append(f"reproduce: {reproduce_command(args)}")
    return lines


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


def _validate(args: argparse.Namespace) -> None:
    if args.clients < 1 or args.clients > 999:
        raise FuzzError("--clients must be between 1 and 999")
    if args.ops < 0:
        raise FuzzError("--ops must not be negative")
    partitions = getattr(args, "partitions", None)
    if partitions is not None and partitions < 1:
        raise FuzzError("--partitions must be at least 1")
    if getattr(args, "kill_partitions", None) and args.connect:
        raise FuzzError("--kill-partitions needs the local cluster the fuzzer starts (not --connect)")
    if getattr(args, "base_port", None) is not None and args.connect:
        raise FuzzError("--base-port places the local cluster the fuzzer starts (not --connect)")


def default_history_path(seed: int) -> Path:
    """Where a run keeps its history without ``--history``: ``$OKAPI_HOME/fuzz/seed<S>.jsonl`` (or
    ``~/.okapi/fuzz/...``), beside the cluster config, so it outlives the run for ``okapi check``
    (a temporary folder may be emptied at the next boot); a later run of the same seed replaces it."""
    from okapikv.cluster.config import okapi_home

    return okapi_home() / "fuzz" / f"seed{seed}.jsonl"


def _history_path(args: argparse.Namespace) -> Path:
    path = Path(args.history) if args.history else default_history_path(args.seed)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FuzzError(f"cannot write the history in {path.parent}: {error.strerror or error}") from None
    return path


def run_fuzz(args: argparse.Namespace) -> int:
    """Entry point of ``okapi fuzz`` (arguments defined in ``okapikv.cli``)."""
    protocol = getattr(args, "protocol", None) or "okapi"
    partitions = getattr(args, "partitions", None) or DEFAULT_PARTITIONS
    try:
        _validate(args)
        kill_partitions = parse_partitions(getattr(args, "kill_partitions", None), partitions)
        killer: PartitionKiller | None = None
        with contextlib.ExitStack() as stack:
            if args.connect:
                target = connected_cluster(args.connect)
            else:
                dcs = _names(args.dcs) if args.dcs else list(DEFAULT_DCS)
                directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="okapi-fuzz-")))
                durable = bool(kill_partitions)
                print(f"okapi fuzz: starting a local cluster: {', '.join(dcs)} x {partitions} partition(s), "
                      f"protocol {protocol}{', durable' if durable else ''}", flush=True)
                cluster = stack.enter_context(local_cluster(dcs, partitions, protocol, directory, durable,
                                                            getattr(args, "base_port", None)))
                target = cluster.target
                servers = cluster.config.servers
                print(f"okapi fuzz: local cluster on {servers[0].address} .. {servers[-1].address}", flush=True)
                if kill_partitions:
                    at_operations = int(args.clients * args.ops * KILL_AT_FRACTION)
                    killer = PartitionKiller(cluster, kill_partitions, at_operations)
                    print(f"okapi fuzz: will kill -9 partition(s) {', '.join(map(str, kill_partitions))} in every DC "
                          f"after {at_operations} operations and restart them {KILL_DOWN_S:g} s later", flush=True)
            plan = make_plan(args, _client_dcs(args, target.dcs), fresh_prefix=bool(args.connect))
            mode = "one shared set of" if plan.conflict else "disjoint sets of"
            print(f"okapi fuzz: seed {plan.seed}: {plan.clients} client(s) x {plan.operations_per_client} ops, "
                  f"{mode} {KEYS_PER_CLIENT} keys (prefix {plan.key_prefix}), in DC(s) "
                  f"{', '.join(dict.fromkeys(plan.client_dcs))} of {target.description}, protocol {target.protocol}",
                  flush=True)
            outcome = run_plan(plan, target, _history_path(args), meta={"command": reproduce_command(args)},
                               killer=killer)
    except FuzzError as error:
        print(f"okapi fuzz: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("okapi fuzz: interrupted", file=sys.stderr)
        return 130
    for line in summary_lines(plan, target, outcome, args):
        print(line)
    print("PASS" if outcome.ok else "FAIL", flush=True)
    return 0 if outcome.ok else 1
