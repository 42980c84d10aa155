"""Run real `okapi server` processes on loopback from a config written to a temporary folder.

Every wait is bounded, and every process started here is stopped at teardown (SIGTERM, then
SIGKILL), whether the test passed or not. Server logs go to files next to the config; a failing
test prints the tail of each so the cause is visible in CI output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc

from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.cluster.health import wait_until_serving
from okapikv.cluster.ports import free_port_block
from okapikv.cluster.processes import server_command
from okapikv.core.partitioning import partition_of
from okapikv.wire import encoding
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.frames import MAGIC, FrameDecoder, encode_frame

STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0


def free_port_range(count: int) -> int:
    """A base port such that base .. base + count - 1 are all free now (``okapikv.cluster.ports``:
    random, so parallel runs rarely collide; a collision shows up as a bind error, not a hang)."""
    return free_port_block(count)


class RunningCluster:
    """A cluster of `okapi server` processes. Address servers by (dc name or index, partition)."""

    def __init__(self, config: ClusterConfig, directory: Path) -> None:
        self.config = config
        self.directory = directory
        self.path = config.dump(directory / "cluster.toml")
        self.processes: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        self._channels: dict[str, grpc.Channel] = {}

    def _name(self, dc: str | int) -> str:
        return self.config.dcs[dc] if isinstance(dc, int) else dc

    def address(self, dc: str | int, partition: int) -> str:
        return self.config.server(self._name(dc), partition).address

    def log_path(self, dc: str | int, partition: int) -> Path:
        return self.directory / f"server-{self._name(dc)}-{partition}.log"

    def start(self, dc: str | int, partition: int) -> subprocess.Popen[bytes]:
        name = self._name(dc)
        with self.log_path(name, partition).open("ab") as log:
            process = subprocess.Popen(server_command(self.path, self.config.server(name, partition)),
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.processes[(name, partition)] = process
        return process

    def start_all(self, order: Sequence[tuple[str, int]] | None = None, pause_s: float = 0.0) -> None:
        for dc, partition in order or [(s.dc, s.partition) for s in self.config.servers]:
            self.start(dc, partition)
            if pause_s:
                time.sleep(pause_s)
        self.wait_serving()

    def wait_serving(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        def exited() -> str | None:
            for (dc, partition), process in self.processes.items():
                if process.poll() is not None:
                    return f"server {dc}/{partition} exited with {process.returncode}:\n{self.tail(dc, partition)}"
            return None

        pending = wait_until_serving([s.address for s in self.config.servers], timeout_s, give_up=exited)
        assert not pending, f"not serving after {timeout_s} s: {pending}"

    def stop(self, dc: str | int, partition: int, sig: int = signal.SIGTERM) -> int:
        process = self.processes.pop((self._name(dc), partition))
        return _stop(process, sig)

    def stop_all(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        processes = list(self.processes.values())
        self.processes.clear()
        for process in processes:  # signal every server first: they shut down in parallel
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        for process in processes:
            _stop(process, signal.SIGTERM)

    def channel(self, dc: str | int, partition: int) -> grpc.Channel:
        address = self.address(dc, partition)
        if address not in self._channels:
            options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
            self._channels[address] = grpc.insecure_channel(address, options=options)
        return self._channels[address]

    def stub(self, dc: str | int, partition: int) -> Any:
        return pb_grpc.KeyValueStub(self.channel(dc, partition))  # type: ignore[no-untyped-call]

    def stub_for_key(self, dc: str | int, key: bytes) -> Any:
        return self.stub(dc, partition_of(key, self.config.partitions))

    def tail(self, dc: str | int, partition: int, lines: int = 30) -> str:
        path = self.log_path(dc, partition)
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def all_tails(self) -> str:
        return "\n".join(f"--- {s.label}\n{self.tail(s.dc, s.partition)}" for s in self.config.servers)


def _stop(process: subprocess.Popen[bytes], sig: int) -> int:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
    try:
        return process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return -signal.SIGKILL


ClusterFactory = Callable[..., RunningCluster]


@contextlib.contextmanager
def cluster_processes(directory: Path) -> Iterator[tuple[ClusterFactory, list[RunningCluster]]]:
    clusters: list[RunningCluster] = []
    counter = iter(range(1_000))

    def make(dcs: Sequence[str] = ("dc0", "dc1"), partitions: int = 2, *, start: bool = True,
             wan_ms: float = 5.0, **overrides: Any) -> RunningCluster:
        count = len(dcs) * partitions
        config = local_cluster(dcs=dcs, partitions=partitions, wan=wan_ms, base_port=free_port_range(count),
                               cluster_id=f"test-{os.getpid()}")
        if overrides:
            data = config.to_dict() | overrides
            config = ClusterConfig.from_dict(data)
        where = directory / f"cluster-{next(counter)}"
        where.mkdir(parents=True)
        cluster = RunningCluster(config, where)
        clusters.append(cluster)
        if start:
            cluster.start_all()
        return cluster

    try:
        yield make, clusters
    finally:
        for cluster in clusters:
            cluster.stop_all()


# ---------------------------------------------------------------- helpers for the tests

T = TypeVar("T")
VISIBILITY_TIMEOUT_S = 10.0


def eventually(probe: Callable[[], T | None], timeout_s: float = VISIBILITY_TIMEOUT_S) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(0.02)


def keys_for_each_partition(partitions: int, prefix: str = "key") -> list[bytes]:
    """One key per partition, so a test touches every server of a DC."""
    found: dict[int, bytes] = {}
    index = 0
    while len(found) < partitions:
        key = f"{prefix}-{index}".encode()
        found.setdefault(partition_of(key, partitions), key)
        index += 1
    return [found[p] for p in range(partitions)]


def get_value(cluster: RunningCluster, dc: int, key: bytes) -> bytes | None:
    reply = cluster.stub_for_key(dc, key).Get(pb.GetRequest(key=key), timeout=5)
    return reply.value if reply.found else None


#: PUTs per frame of ``bulk_put``: large frames, so the servers spend their time storing, not framing.
BULK_BATCH = 2_000


def bulk_put(cluster: RunningCluster, dc: str | int, pairs: Sequence[tuple[bytes, bytes]],
             timeout_s: float = 120.0) -> None:
    """Store ``pairs`` fast: for each partition of ``dc``, every PUT of its keys goes in large frames
    over one native connection (empty sessions, so nothing waits), written by a thread while this
    one reads the results; raises if any PUT failed or the results do not come within ``timeout_s``."""
    partitions = cluster.config.partitions
    by_partition: list[list[tuple[bytes, bytes]]] = [[] for _ in range(partitions)]
    for key, value in pairs:
        by_partition[partition_of(key, partitions)].append((key, value))
    session = encoding.session_field(b"")
    deadline = time.monotonic() + timeout_s
    failures: list[str] = []

    def load(partition: int, items: list[tuple[bytes, bytes]]) -> None:
        info = cluster.stub(dc, partition).ClusterInfo(pb.ClusterInfoRequest(), timeout=10)
        host = cluster.address(dc, partition).rpartition(":")[0]
        frames = [MAGIC]
        for first in range(0, len(items), BULK_BATCH):
            frames.append(encode_frame(b"".join(
                encoding.batch_element(encoding.operation(first + index + 1, b"\x1a", encoding.write_request(
                    key, value, session)))
                for index, (key, value) in enumerate(items[first : first + BULK_BATCH]))))
        with socket.create_connection((host, info.native_port), timeout=timeout_s) as connection:
            writer = threading.Thread(target=connection.sendall, args=(b"".join(frames),), daemon=True)
            writer.start()
            decoder = FrameDecoder()
            answered = 0
            while answered < len(items) and time.monotonic() < deadline:
                chunk = connection.recv(1 << 20)
                if not chunk:
                    break
                for frame in decoder.feed(chunk):
                    for result in pb.ResultBatch.FromString(frame).results:
                        answered += 1
                        if result.WhichOneof("result") != "put":
                            failures.append(f"partition {partition}: {result}")
            writer.join(timeout=max(deadline - time.monotonic(), 0.1))
        if answered < len(items):
            failures.append(f"partition {partition}: {answered} of {len(items)} PUTs answered")

    threads = [threading.Thread(target=load, args=(partition, items), daemon=True)
               for partition, items in enumerate(by_partition)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(deadline - time.monotonic(), 0.1))
    assert not failures, failures[:5]
    assert not any(thread.is_alive() for thread in threads), f"bulk load not done within {timeout_s} s"
