"""A local redis-server as the course suite's reference line.

Redis is what a reader of the course numbers knows: a single-threaded in-memory server written in
C. Driving it with our load generator, concurrency and process layout (``adapters.RedisTarget``)
shows how much of a measured number is the store and how much is Python and the benchmark.

Optional on purpose: redis-server comes from the OS packages (Debian: ``redis-server``) and redis-py
from the ``bench`` extra. When either is missing, the suite says so and goes on without it.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import time

from benchmarks.harness.clusters import free_port_block
from okapikv.bench.engine.errors import BenchError
from okapikv.lifetime import preexec_exit_with_parent

START_TIMEOUT_S = 10.0


def unavailable_reason() -> str | None:
    """Why the Redis reference cannot run here, or None when it can."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (Debian: apt-get install redis-server)"
    if importlib.util.find_spec("redis") is None:
        return "redis-py is not installed (pip install -e '.[bench]')"
    return None


class LocalRedis:
    """A throwaway redis-server on a free loopback port, no persistence."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = free_port_block(1, host)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> LocalRedis:
        executable = shutil.which("redis-server")
        if executable is None:
            raise BenchError("redis-server is not installed")
        self.process = subprocess.Popen(
            [executable, "--port", str(self.port), "--bind", self.host, "--save", "", "--appendonly", "no",
             "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            preexec_fn=preexec_exit_with_parent,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(f"redis-server exited with {self.process.returncode}")
            if self._ping():
                return self
            time.sleep(0.05)
        self.stop()
        raise BenchError(f"redis-server did not answer within {START_TIMEOUT_S:.0f} s")

    def _ping(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5.0)
        self.process = None

    def __enter__(self) -> LocalRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
