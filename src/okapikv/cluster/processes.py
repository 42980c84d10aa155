"""The `okapi server` processes of a local cluster, started one way by everything that starts one:
`okapi up` (``launcher``), `okapi fuzz` (``okapikv.fuzz.cluster``), the benchmarks
(``benchmarks.harness.clusters``), the scripts and the tests.

One command line per server (``server_command``: in memory unless given a data directory), one way
to start it (``spawn``: in a process group of its own, so Ctrl-C in a terminal reaches only the
launcher, and tied to this process's life, ``okapikv.lifetime``, so a killed launcher leaves no
server holding ports), one wait for a whole cluster that gives up as soon as a server exits
(``wait_started``), and one stop (``stop_children``: SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from okapikv.cluster.config import ClusterConfig, ServerConfig
from okapikv.cluster.health import wait_until_serving
from okapikv.lifetime import child_environment
from okapikv.tls import ClientTls

STARTUP_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0


class StartError(RuntimeError):
    """A local cluster did not start: a server exited, or did not answer its health check in time."""


@dataclass
class Child:
    """One server process; ``command`` restarts it (`okapi up --restart-budget`), ``restarts``
    holds the monotonic times of its restarts within the launcher's window."""

    server: ServerConfig
    process: subprocess.Popen[bytes]
    reported: bool = False
    command: list[str] = field(default_factory=list)
    restarts: deque[float] = field(default_factory=deque)


def server_data_dir(root: Path, server: ServerConfig) -> Path:
    """The data directory of one server under the cluster's data root: ``<dc>-p<n>``."""
    return root / f"{server.dc}-p{server.partition}"


def server_command(
    config_path: Path, server: ServerConfig, log_format: str | None = None, data_dir: Path | None = None,
    repair: bool = False, extra: Sequence[str] = (),
) -> list[str]:
    """The command line of one `okapi server` (in memory unless ``data_dir`` is given; ``repair``:
    in repair mode; ``extra``: more flags): what the launcher runs, restarts, and prints for a
    restart by hand."""
    command = [
        sys.executable, "-m", "okapikv.cli", "server",
        "--config", str(config_path), "--dc", server.dc, "--partition", str(server.partition),
    ]
    if data_dir is not None:
        command += ["--data-dir", str(data_dir)]
        if repair:
            command.append("--repair")
    else:
        command.append("--in-memory")
    if log_format:
        command += ["--log-format", log_format]
    return [*command, *extra]


def spawn(command: list[str], environment: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Run a server command line in a process group of its own, ending with this process; its log
    level WARNING unless ``environment`` (default: this process's) says otherwise (the launcher
    prints the endpoints itself)."""
    child = child_environment(environment)
    child.setdefault("OKAPI_LOG_LEVEL", "WARNING")
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, env=child, process_group=0)


def start_server(
    config_path: Path, server: ServerConfig, log_format: str | None = None, data_dir: Path | None = None,
    repair: bool = False,
) -> subprocess.Popen[bytes]:
    """Start one `okapi server` process (``server_command``)."""
    return spawn(server_command(config_path, server, log_format, data_dir, repair))


def start_all(config: ClusterConfig, config_path: Path, *, data_root: Path | None = None,
              log_format: str | None = None, repair: bool = False) -> list[Child]:
    """Start every server of ``config`` (read from ``config_path``), each keeping its data under
    ``data_root`` (``server_data_dir``) or, without one, in memory; each child keeps its command."""
    children = []
    for server in config.servers:
        data_dir = server_data_dir(data_root, server) if data_root is not None else None
        command = server_command(config_path, server, log_format, data_dir, repair)
        children.append(Child(server, spawn(command), command=command))
    return children


def first_exit(children: Sequence[Child]) -> str | None:
    """The first server of ``children`` that has exited, said in words (None: all run)."""
    for child in children:
        code = child.process.poll()
        if code is not None:
            return f"server {child.server.label} ({child.server.address}) exited with code {code}"
    return None


def wait_started(config: ClusterConfig, children: Sequence[Child], timeout_s: float = STARTUP_TIMEOUT_S, *,
                 give_up: Callable[[], str | None] | None = None, tls: ClientTls | None = None) -> None:
    """Wait until every server of ``config`` passes its health check; ``StartError`` as soon as one
    of ``children`` exits (or ``give_up`` says why), or with the servers still silent at
    ``timeout_s``."""

    def problem() -> str | None:
        return (give_up() if give_up is not None else None) or first_exit(children)

    try:
        pending = wait_until_serving([server.address for server in config.servers], timeout_s, give_up=problem,
                                     tls=tls)
    except RuntimeError as error:
        raise StartError(str(error)) from None
    if pending:
        raise StartError(f"no health from {', '.join(pending)} after {timeout_s:.0f} s")


def stop_children(children: Sequence[Child], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM every server (all first, so they stop together), then SIGKILL those still running
    after ``grace_s``; reaps them all."""
    for child in children:
        if child.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.process.terminate()
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()
