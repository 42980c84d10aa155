"""Real processes for end-to-end tests: an `okapi up` cluster and `okapi client` processes.

The cluster runs on free loopback ports with its own ``$OKAPI_HOME`` (a temporary folder), so
`okapi client` without flags finds it exactly as a user's would, and a developer's own cluster in
``~/.okapi`` is never touched. Every wait is bounded, and teardown always ends every process it
started (SIGINT to the launcher, which stops its servers; then SIGKILL to the whole process group
if anything is left).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from okapikv.cluster.ports import free_port_block

READY_LINE = "okapi: cluster ready"
START_TIMEOUT_S = 60.0
REPLY_TIMEOUT_S = 60.0


def free_base_port(count: int, host: str = "127.0.0.1") -> int:
    """A port p such that p .. p+count-1 are free now (the launcher checks again before binding)."""
    return free_port_block(count, host)


class Cluster:
    """`okapi up` in a subprocess, ready when it prints its ready line."""

    def __init__(self, home: Path, dcs: Sequence[str], partitions: int, extra: Sequence[str] = ()) -> None:
        self.home = home
        self.dcs = list(dcs)
        self.partitions = partitions
        self.env = {**os.environ, "OKAPI_HOME": str(home), "PYTHONUNBUFFERED": "1"}
        self._extra = list(extra)
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.base_port = 0

    def start(self, attempts: int = 3, base_port: int | None = None) -> None:
        """Start on ``base_port`` (one attempt), or on drawn ports (``attempts`` tries)."""
        if base_port is not None:
            attempts = 1
        for attempt in range(attempts):
            # the servers' ports and, right after them, their RESP ports (`okapi up`'s default)
            self.base_port = base_port if base_port is not None else free_base_port(2 * len(self.dcs) * self.partitions)
            if self._start_once():
                return
            self.stop()
            if attempt == attempts - 1:
                raise RuntimeError("okapi up did not become ready:\n" + "".join(self.output[-40:]))

    def _start_once(self) -> bool:
        command = [sys.executable, "-m", "okapikv.cli", "up", "--dcs", ",".join(self.dcs),
                   "--partitions", str(self.partitions), "--base-port", str(self.base_port), *self._extra]
        self.output = []
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, env=self.env, start_new_session=True)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(self.process.stdout, lines, self.output), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                return False  # the launcher exited (ports taken meanwhile?)
            if line.strip() == READY_LINE:
                return True
        return False

    def address(self, dc: str, partition: int = 0) -> str:
        return f"127.0.0.1:{self.base_port + self.dcs.index(dc) * self.partitions + partition}"

    def server_pid(self, dc: str, partition: int) -> int:
        """The pid of one `okapi server` child of the launcher (Linux: /proc), found by its arguments."""
        assert self.process is not None
        wanted = ["--dc", dc, "--partition", str(partition)]
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                with contextlib.suppress(OSError):
                    arguments = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
                    if "server" in arguments and any(arguments[i:i + 4] == wanted for i in range(len(arguments))):
                        return int(child)
        raise AssertionError(f"no server process for {dc}/{partition}")

    def stop(self) -> None:
        process = self.process
        if process is None:
            return
        self.process = None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=15)
        # Whatever is left of the session (a launcher that hung, a server that ignored SIGTERM).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


def _pump(stream: object, lines: queue.Queue[str | None], keep: list[str]) -> None:
    assert hasattr(stream, "readline")
    for line in iter(stream.readline, ""):
        keep.append(line)
        lines.put(line)
    lines.put(None)


class ClientProcess:
    """One `okapi client` process driven line by line, as the course's fuzzer drives it."""

    def __init__(self, env: dict[str, str], *flags: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "okapikv.cli", "client", *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._seen: list[str] = []
        threading.Thread(target=_pump, args=(self.process.stdout, self._lines, self._seen), daemon=True).start()

    def _read_line(self) -> str:
        try:
            line = self._lines.get(timeout=REPLY_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"no answer within {REPLY_TIMEOUT_S} s; so far: {self._seen[-10:]}") from None
        if line is None:
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise AssertionError(f"okapi client exited ({self.process.poll()}): {stderr}")
        return line.rstrip("\n")

    def send(self, line: str) -> list[str]:
        """Send one command and return its complete output (several lines for SCAN and TX)."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        first = self._read_line()
        lines = [first]
        if first.endswith(" BEGIN") and first.split()[0] in ("SCAN", "TX"):
            end = first.split()[0] + " END"
            while lines[-1] != end:
                lines.append(self._read_line())
        return lines

    def run(self, script: Sequence[str]) -> list[str]:
        output: list[str] = []
        for line in script:
            output += self.send(line)
        return output

    def stop(self) -> int:
        """Send STOP, expect the echo, and return the exit status."""
        assert self.send("STOP") == ["STOP"]
        return self.wait()

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=15)
        finally:
            self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
