"""Small operator mistakes get one clear line and a non-zero exit: a reader of stdout that goes
away (``okapi status --json | head -c 1500``), an empty history for `okapi check`, a clock skew
above the clock offset limit, and `okapi server --help` giving the disk reserve's real default."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from okapikv.cli import main
from okapikv.cluster.config import local_cluster
from okapikv.cluster.launcher import PortLocks
from okapikv.cluster.ports import free_port_block
from okapikv.storage.space import DEFAULT_RESERVE_BYTES

OKAPI = [sys.executable, "-m", "okapikv.cli"]


@pytest.mark.parametrize("command", [["status", "--json"], ["status"], ["status", "--watch", "0.1"],
                                     ["up", "--print-config", "--partitions", "500"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path, command: list[str]) -> None:
    """stdout's reader is gone before the first byte: exit 141 (SIGPIPE's), no traceback."""
    config = local_cluster(dcs=("a", "b"), partitions=2, wan="off", base_port=free_port_block(4))
    path = config.dump(tmp_path / "cluster.toml")  # nothing listens: every server DOWN, at once
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "wb") as stdout:
        result = subprocess.run([*OKAPI, *command, *(["--config", str(path)] if command[0] == "status" else [])],
                                stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=60,
                                env={**os.environ, "OKAPI_HOME": str(tmp_path)})
    assert result.returncode == 141 and result.stderr == "", result.stderr


def test_check_refuses_an_empty_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["check", str(empty)]) == 2
    assert capsys.readouterr().err == f"okapi check: {empty} holds no operations: nothing to check\n"


def test_up_refuses_a_skew_above_the_clock_offset_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", "--clock-skew-ms", "600", "--print-config"]) == 2
    assert capsys.readouterr().err == ("okapi up: --clock-skew-ms 600 puts a server 600 ms ahead, above the clock "
                                       "offset limit (500 ms, max_clock_offset_ms)\n")
    assert main(["up", "--clock-skew-ms", "500", "--print-config"]) == 0


def test_server_help_gives_the_reserves_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["server", "--help"])
    words = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert f"MiB kept in reserve for a full disk (default: {DEFAULT_RESERVE_BYTES >> 20}, at most 5% of" in words


def test_a_refused_launcher_names_the_holder_that_has_not_written_its_pid_yet(tmp_path: Path) -> None:
    """Two `okapi up` started at the same moment: the loser can find the port's lock taken and its
    file still empty (the winner writes its pid right after taking the lock); it waits for the pid
    instead of answering "pid unknown"."""
    directory = tmp_path / "locks"
    directory.mkdir()
    with (directory / "7100.lock").open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        writer = threading.Timer(0.2, lambda: (held.write("4242\n"), held.flush()))
        writer.start()
        try:
            refusal = PortLocks(directory).acquire([7100])
        finally:
            writer.join()
    assert refusal is not None and "belongs to another okapi up (pid 4242)" in refusal
