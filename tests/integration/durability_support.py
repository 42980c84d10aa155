"""Helpers for the durability and failure tests (test_durability.py): clusters whose servers keep their data
in a directory (``okapi server --data-dir``) and accept fault injection, writer threads that record
what was acknowledged, and the inter-DC cut.

A ``DurableCluster`` is a ``RunningCluster`` (``integration_support``) whose servers start with
``--data-dir DIR/<dc>-p<n>`` and ``OKAPI_FAULT_INJECTION=1`` (``okapikv.server.faults``), so a test
can kill -9 a server, restart it on the same data, and cut DCs apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
from integration_support import RunningCluster, free_port_range

from okapikv.cluster.config import local_cluster
from okapikv.cluster.processes import server_command
from okapikv.server.faults import ENVIRONMENT_VARIABLE, HOLD_LINKS
from okapikv.wire import okapikv_pb2 as pb


class DurableCluster(RunningCluster):
    def data_dir(self, dc: str | int, partition: int) -> Path:
        return self.directory / "data" / f"{self._name(dc)}-p{partition}"

    def command(self, dc: str | int, partition: int, *extra: str) -> list[str]:
        """The `okapi server` command line of one server (``extra``: more flags, e.g. --repair)."""
        name = self._name(dc)
        return server_command(self.path, self.config.server(name, partition), data_dir=self.data_dir(name, partition),
                              extra=extra)

    def start(self, dc: str | int, partition: int, *extra: str) -> subprocess.Popen[bytes]:
        name = self._name(dc)
        environment = dict(os.environ, **{ENVIRONMENT_VARIABLE: "1"})
        with self.log_path(name, partition).open("ab") as log:
            process = subprocess.Popen(self.command(name, partition, *extra), stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, env=environment)
        self.processes[(name, partition)] = process
        return process

    def run_to_exit(self, dc: str | int, partition: int, *extra: str, timeout_s: float = 60) -> tuple[int, str]:
        """Run one server that is expected to refuse to start: (exit status, stderr)."""
        result = subprocess.run(self.command(dc, partition, *extra), stdin=subprocess.DEVNULL, capture_output=True,
                                text=True, timeout=timeout_s)
        return result.returncode, result.stderr

    def stats(self, dc: str | int, partition: int) -> dict[str, Any]:
        reply = self.stub(dc, partition).Stats(pb.StatsRequest(), timeout=30, wait_for_ready=True)
        parsed: dict[str, Any] = json.loads(reply.json)
        return parsed

    def hold_links(self, dc: str | int, partition: int, to_dcs: Sequence[str]) -> None:
        """Cut (or with ``[]`` repair) the outgoing peer links of one server to ``to_dcs``."""
        call = self.channel(dc, partition).unary_unary(HOLD_LINKS)
        call(json.dumps({"dcs": list(to_dcs)}).encode(), timeout=30, wait_for_ready=True)

    def cut_off(self, dc: str) -> None:
        """Partition DC ``dc`` away from every other DC (both directions)."""
        others = [name for name in self.config.dcs if name != dc]
        for server in self.config.servers:
            self.hold_links(server.dc, server.partition, others if server.dc == dc else [dc])

    def repair(self) -> None:
        for server in self.config.servers:
            self.hold_links(server.dc, server.partition, [])


@contextlib.contextmanager
def durable_cluster(directory: Path, dcs: Sequence[str], partitions: int, *, wan_ms: float = 5.0,
                    protocol: str = "okapi") -> Iterator[DurableCluster]:
    """Start a durable cluster and stop every process at the end, printing the logs on failure."""
    count = len(dcs) * partitions
    config = local_cluster(dcs=dcs, partitions=partitions, wan=wan_ms, base_port=free_port_range(count),
                           cluster_id=f"durable-{os.getpid()}", protocol=protocol)
    cluster = DurableCluster(config, directory)
    failed = True
    try:
        cluster.start_all()
        yield cluster
        failed = False
    finally:
        cluster.stop_all()
        if failed:
            print(cluster.all_tails())


class Writers:
    """Threads that write unique keys through the cluster's servers of one DC and record exactly
    the writes that were acknowledged (an unanswered write may or may not have happened)."""

    def __init__(self, cluster: RunningCluster, dc: int, count: int, prefix: str) -> None:
        self.cluster = cluster
        self.dc = dc
        self.prefix = prefix
        self.acknowledged: dict[bytes, bytes] = {}
        self.failures = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(number,), daemon=True) for number in range(count)]

    def __enter__(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self, number: int) -> None:
        index = 0
        while not self._stop.is_set():
            key = f"{self.prefix}-{number}-{index}".encode()
            value = f"value-{number}-{index}".encode()
            index += 1
            try:
                self.cluster.stub_for_key(self.dc, key).Put(pb.PutRequest(key=key, value=value), timeout=2)
            except grpc.RpcError:
                with self._lock:
                    self.failures += 1
                time.sleep(0.02)
                continue
            with self._lock:
                self.acknowledged[key] = value

    def snapshot(self) -> dict[bytes, bytes]:
        with self._lock:
            return dict(self.acknowledged)


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.05)
