"""The one way local clusters start their servers (``okapikv.cluster.processes``): the command line,
the wait that gives up when a server exits, and the stop that ends a server ignoring SIGTERM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from okapikv.cluster.config import local_cluster
from okapikv.cluster.ports import free_port_block
from okapikv.cluster.processes import Child, StartError, first_exit, server_command, stop_children, wait_started


def test_the_command_line_is_in_memory_unless_given_a_data_directory(tmp_path: Path) -> None:
    server = local_cluster(dcs=("a",), partitions=2, wan="off").server("a", 1)
    prefix = [sys.executable, "-m", "okapikv.cli", "server", "--config", str(tmp_path / "c.toml"), "--dc", "a",
              "--partition", "1"]
    assert server_command(tmp_path / "c.toml", server) == [*prefix, "--in-memory"]
    assert server_command(tmp_path / "c.toml", server, "json", tmp_path / "d", repair=True, extra=("--x",)) == [
        *prefix, "--data-dir", str(tmp_path / "d"), "--repair", "--log-format", "json", "--x"]


def _child(code: str) -> Child:
    server = local_cluster(dcs=("a",), partitions=1, wan="off").server("a", 0)
    return Child(server, subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE))


def test_the_wait_gives_up_as_soon_as_a_server_exits() -> None:
    config = local_cluster(dcs=("a",), partitions=1, wan="off", base_port=free_port_block(1))
    exited = _child("raise SystemExit(3)")
    exited.process.wait(timeout=30)
    assert first_exit([exited]) == f"server a/0 ({exited.server.address}) exited with code 3"
    with pytest.raises(StartError, match="exited with code 3"):
        wait_started(config, [exited], timeout_s=30)
    with pytest.raises(StartError, match="interrupted"):
        wait_started(config, [], timeout_s=30, give_up=lambda: "interrupted")
    with pytest.raises(StartError, match=r"no health from 127\.0\.0\.1:\d+ after 0 s"):
        wait_started(config, [], timeout_s=0.1)


def test_the_stop_ends_a_server_that_ignores_sigterm() -> None:
    stubborn = _child("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
                      "time.sleep(60)")
    polite = _child("import time\ntime.sleep(60)")
    assert stubborn.process.stdout is not None and stubborn.process.stdout.readline() == b"ready\n"
    stop_children([stubborn, polite], grace_s=0.5)
    assert polite.process.returncode == -15 and stubborn.process.returncode == -9
    for child in (stubborn, polite):
        assert child.process.stdout is not None
        child.process.stdout.close()
