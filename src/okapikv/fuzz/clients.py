"""The ``okapi client`` processes the fuzzer drives, one command at a time each.

It drives real ``okapi client`` processes over their stdin/stdout protocol, exactly as the course's
fuzzer drives its clients, so the whole path a user's script takes is under test: the line format,
the client library's routing and sessions, the servers. One thread per client process writes one
command, reads its complete result, and only then writes the next (the course fuzzer's
one-at-a-time discipline; it also makes each client one causal session with a clear session order).

What a kill does to the operations in flight, and how the history records it honestly (see
``okapikv.client.retry``): a call in flight on a killed server fails with ``UNAVAILABLE: Stream
removed`` (the request was sent; it may or may not have been applied and made durable before the
kill), and every call made while the server is down fails at once with ``UNAVAILABLE: failed to
connect to all addresses`` (never sent). By default the client library retries both, which for a
write is at-least-once: a retried SWAP whose first attempt was applied returns the value it wrote
itself, a retried PUT reports ``found``, and either may take effect twice, which no register history
explains; the checkers would then blame the store for the client's retry, or (worse) accept a wrong
answer recorded as ``ok``. So the fuzzer's clients run with ``okapi client --at-most-once``: reads
and calls that were never sent are retried until the server is back (they complete ``ok``, after
waiting), while a write whose call broke mid-way is not retried and answers ``ERROR outcome
unknown``, which is recorded as ``info``: the checkers then let it take effect at any point after
its invocation, or never (linearizability gives it a return at infinity; the causal checkers let it
be read from and use it as no witness). Only the writes in flight at a kill end so, a few per kill.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from okapikv.check.history import Operation
from okapikv.fuzz.plan import Command
from okapikv.fuzz.recorder import Recorder
from okapikv.fuzz.replies import ReplyError, parse_reply, read_reply

#: ``okapi client --timeout-s``: an operation that cannot complete turns into an ERROR line by then.
CLIENT_TIMEOUT_S = 30.0
#: A client silent this long after a command is presumed hung and killed (its operation: unknown).
#: Well above ``CLIENT_TIMEOUT_S``: the client answers ERROR by then unless it is starved of CPU.
HANG_TIMEOUT_S = CLIENT_TIMEOUT_S + 60.0
#: How long a client may take to start and answer its warm-up read (importing gRPC on a loaded
#: two-core machine has been seen to take half a minute).
STARTUP_TIMEOUT_S = 180.0


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

    def side(self, command: Command) -> list[str] | None:
        """Send a command that stays out of the history (``okapikv.fuzz.side``); its answer, or
        None (and a problem noted) once the client is unusable."""
        try:
            return self.exchange(command, HANG_TIMEOUT_S)
        except (EOFError, OSError):
            self._gone(command)
            return None

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

