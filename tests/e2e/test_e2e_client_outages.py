"""`okapi client` when servers are not there: at start-up (nothing listens yet) and while it runs (a
partition stopped longer than the old 30 s bound), as the course's harness meets them.

A first connection that is refused fails at once with a clear error (as redis-cli does), unless
``--wait-s`` asks to wait; a server that goes away under a running client only delays the
operations routed to it, which complete once it is back (``okapikv.client.stdio``).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from okapi_processes import ClientProcess, Cluster

from okapikv.cluster.ports import free_port_block
from okapikv.core.partitioning import partition_of

pytestmark = pytest.mark.timeout(180)

OKAPI = [sys.executable, "-m", "okapikv.cli"]
#: Generous for a loaded 2-core machine: the client answers in well under a second when idle.
REFUSED_BOUND_S = 5.0


def test_a_refused_first_connection_fails_at_once(tmp_path: Path) -> None:
    port = free_port_block(1)  # reserved for this process, and nothing listens on it
    started = time.monotonic()
    result = subprocess.run([*OKAPI, "client", "--connect", f"127.0.0.1:{port}"], input="GET k\n",
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "OKAPI_HOME": str(tmp_path)})
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert elapsed < REFUSED_BOUND_S, f"took {elapsed:.1f} s"
    assert f"nothing listens at 127.0.0.1:{port} (connection refused" in result.stderr
    assert "--wait-s" in result.stderr
    assert result.stdout == ""  # no protocol line for a client that never started


def test_wait_s_waits_for_a_cluster_that_starts_later(tmp_path: Path) -> None:
    base = free_port_block(1)
    cluster = Cluster(tmp_path, ["solo"], partitions=1, extra=["--wan", "off", "--in-memory"])
    process = ClientProcess(cluster.env, "--connect", f"127.0.0.1:{base}", "--wait-s", "90")
    try:
        time.sleep(1.0)
        assert process.process.poll() is None  # still waiting, not failed
        cluster.start(base_port=base)
        assert process.send("PUT waited 1") == ["PUT waited not_found"]
        assert process.stop() == 0
    finally:
        process.close()
        cluster.stop()


@pytest.mark.slow
def test_a_partition_stopped_for_longer_than_30_s_delays_its_operations(tmp_path: Path) -> None:
    """One partition SIGSTOPped for 35 s (past the old 30 s bound, after which the
    client printed `ERROR unavailable`): the pending command completes once the server runs again,
    with no line in between, and the client goes on."""
    cluster = Cluster(tmp_path, ["solo"], partitions=2, extra=["--wan", "off", "--in-memory"])
    cluster.start()
    key = next(f"stopped{i}" for i in range(1_000) if partition_of(f"stopped{i}".encode(), 2) == 1)
    process = ClientProcess(cluster.env)
    server = cluster.server_pid("solo", 1)
    try:
        assert process.send(f"PUT {key} before") == [f"PUT {key} not_found"]
        os.kill(server, signal.SIGSTOP)
        try:
            assert process.process.stdin is not None
            process.process.stdin.write(f"SWAP {key} after\n")
            process.process.stdin.flush()
            with pytest.raises(queue.Empty):  # nothing, in particular no ERROR line, while it is down
                process._lines.get(timeout=35.0)
            assert process.process.poll() is None
        finally:
            os.kill(server, signal.SIGCONT)
        assert process._read_line() == f"SWAP {key} before"
        assert process.send(f"GET {key}") == [f"GET {key} after"]
        assert process.stop() == 0
    finally:
        process.close()
        cluster.stop()
