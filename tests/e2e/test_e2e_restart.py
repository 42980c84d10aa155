"""A server of an `okapi up` cluster killed with SIGKILL and restarted by hand, the documented way
(its data directory) and the wrong ways (no flag; ``--in-memory``): no read in its DC ever returns
less than a session already saw (read-your-writes, monotonic reads), and the in-memory start refuses
client requests until it has fetched its data back from its replicas (``okapikv.core.catchup``,
Verification; docs/operations.md, "Restarting one server by hand").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from okapi_processes import ClientProcess, Cluster

pytestmark = pytest.mark.timeout(240)

OKAPI = [sys.executable, "-m", "okapikv.cli"]
KEYS = [f"k{index}" for index in range(20)]


def _read_all(session: ClientProcess) -> dict[str, str]:
    values = {}
    for key in KEYS:
        (line,) = session.send(f"GET {key}")
        assert line.startswith(f"GET {key} "), line
        values[key] = line.split(" ", 2)[2]
    return values


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().split()[2] == "Z":  # a zombie of the launcher's: gone as a server
                return
        time.sleep(0.05)


@pytest.mark.slow
def test_a_restarted_server_never_serves_less_than_a_session_saw(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, ["a", "b"], partitions=1, extra=["--wan", "off", "--restart-budget", "0"])
    cluster.start()
    config = str(tmp_path / "cluster.toml")
    server = ["server", "--config", config, "--dc", "a", "--partition", "0"]
    writer = ClientProcess(cluster.env, "--dc", "a")
    reader = ClientProcess(cluster.env, "--dc", "a")
    far = ClientProcess(cluster.env, "--dc", "b")
    started: list[subprocess.Popen[bytes]] = []
    try:
        for key in KEYS:
            assert writer.send(f"PUT {key} v-{key}") == [f"PUT {key} not_found"]
        written = {key: f"v-{key}" for key in KEYS}
        deadline = time.monotonic() + 30
        while _read_all(far) != written:  # replicated to b: the replica the restart fetches from
            assert time.monotonic() < deadline, "a's writes did not reach b"
            time.sleep(0.1)
        assert _read_all(reader) == written

        # The documented way: the same command line, with its data directory.
        _kill(cluster.server_pid("a", 0))
        durable = [*OKAPI, *server, "--data-dir", str(tmp_path / "okapi-data" / "a-p0")]
        started.append(subprocess.Popen(durable, stdin=subprocess.DEVNULL, env=cluster.env))
        assert _read_all(writer) == written and _read_all(reader) == written
        _kill(started[-1].pid)
        started[-1].wait()

        # The wrong ways: no flag is refused at once; in memory, it serves only once repaired.
        began = time.monotonic()
        refused = subprocess.run([*OKAPI, *server], capture_output=True, text=True, timeout=60, env=cluster.env)
        assert refused.returncode == 2 and "pass --data-dir DIR" in refused.stderr
        assert time.monotonic() - began < 10
        log = tmp_path / "in-memory.log"
        with log.open("wb") as output:
            started.append(subprocess.Popen([*OKAPI, *server, "--in-memory"], stdin=subprocess.DEVNULL,
                                            stdout=output, stderr=subprocess.STDOUT,
                                            env={**cluster.env, "OKAPI_LOG_LEVEL": "INFO"}))
        assert _read_all(writer) == written and _read_all(reader) == written
        text = log.read_text()
        assert "its data was lost with the last run" in text and "repair complete" in text, text
        # A fresh session on the repaired server sees the data too, and the server takes writes.
        fresh = ClientProcess(cluster.env, "--dc", "a")
        try:
            assert _read_all(fresh) == written
            assert fresh.send("PUT after 1") == ["PUT after not_found"]
        finally:
            fresh.close()
    finally:
        for session in (writer, reader, far):
            session.close()
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
        cluster.stop()
