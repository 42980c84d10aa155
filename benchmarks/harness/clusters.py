"""The clusters a benchmark measures: started fresh per protocol, or an existing one (--connect).

A local cluster is started through the documented server interface (`okapi server --config FILE
--dc NAME --partition N`, one OS process per partition server, the same processes `okapi up`
runs), from a config built by ``okapikv.cluster.config.local_cluster``. Owning the processes gives
us their pids, which is how server CPU time is measured (``/proc/<pid>/stat``).

Whatever started it, the benchmark only talks to a cluster over its public RPCs: ``ClusterInfo``
(discover every server) and ``Stats`` (counters as JSON, read before and after each measured
window). Those calls use plain synchronous stubs so the parent process needs no event loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from okapikv.bench.engine.errors import BenchError
from okapikv.cluster import ports
from okapikv.cluster.processes import Child, stop_children
from okapikv.core.skew import max_skew_in_dc_us

START_TIMEOUT_S = 60.0
STATS_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class ServerEndpoint:
    dc: int
    dc_name: str
    partition: int
    address: str
    pid: int | None = None


@dataclass(slots=True)
class RunningCluster:
    """A cluster under test, local or remote. ``stop`` is a no-op for a cluster we did not start."""

    protocol: str
    dc_names: tuple[str, ...]
    partitions: int
    servers: tuple[ServerEndpoint, ...]
    clock_skew_ms: float = 0.0
    #: the skew model its offsets were laid out by, and the largest skew inside one DC it gave
    #: (``okapikv.core.skew``); None for a cluster the bench did not start
    clock_skew_model: str | None = None
    max_dc_skew_ms: float | None = None
    wan: str = ""
    children: list[Child] = field(default_factory=list)
    workdir: tempfile.TemporaryDirectory[str] | None = None
    _channels: dict[str, Any] = field(default_factory=dict)

    @property
    def num_dcs(self) -> int:
        return len(self.dc_names)

    def dc_addresses(self) -> tuple[str, ...]:
        """One server per DC (its partition 0): where each DC's clients bootstrap."""
        chosen: dict[int, str] = {}
        for server in sorted(self.servers, key=lambda s: (s.dc, s.partition)):
            chosen.setdefault(server.dc, server.address)
        return tuple(chosen[dc] for dc in sorted(chosen))

    def pids(self) -> list[int]:
        return [server.pid for server in self.servers if server.pid is not None]

    # ------------------------------------------------------------------ RPCs

    def _stub(self, address: str) -> Any:
        import grpc

        from okapikv.wire import okapikv_pb2_grpc as pb_grpc

        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = grpc.insecure_channel(address)
        return pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]

    def fetch_stats(self) -> dict[str, dict[str, Any]]:
        """Every server's Stats JSON, keyed by address (a server that does not answer is left out)."""
        from okapikv.wire import okapikv_pb2 as pb

        def one(address: str) -> tuple[str, dict[str, Any] | None]:
            try:
                reply = self._stub(address).Stats(pb.StatsRequest(), timeout=STATS_TIMEOUT_S)
                parsed = json.loads(reply.json) if reply.json else {}
                return address, parsed if isinstance(parsed, dict) else {}
            except Exception:
                return address, None

        with ThreadPoolExecutor(max_workers=min(16, max(1, len(self.servers)))) as pool:
            answers = list(pool.map(one, [server.address for server in self.servers]))
        return {address: stats for address, stats in answers if stats is not None}

    def stop(self) -> None:
        for channel in self._channels.values():
            with contextlib.suppress(Exception):
                channel.close()
        self._channels.clear()
        stop_children(self.children)
        self.children.clear()
        if self.workdir is not None:
            self.workdir.cleanup()
            self.workdir = None


def _cluster_info(address: str, timeout_s: float) -> Any:
    import grpc

    from okapikv.wire import okapikv_pb2 as pb
    from okapikv.wire import okapikv_pb2_grpc as pb_grpc

    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
        return stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=timeout_s)


def connect(address: str, timeout_s: float = 10.0) -> RunningCluster:
    """Describe a running cluster from any of its servers (``--connect``)."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            info = _cluster_info(address, min(2.0, timeout_s))
            break
        except Exception as error:
            last = error
            time.sleep(0.2)
    else:
        raise BenchError(f"cannot reach a server at {address}: {last}")
    names = tuple(info.dc_names)
    servers = tuple(
        ServerEndpoint(s.dc, names[s.dc] if s.dc < len(names) else str(s.dc), s.partition, s.address)
        for s in info.servers
    )
    return RunningCluster(info.protocol, names, info.num_partitions, servers)


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """First port of ``count`` consecutive free ports (``okapikv.cluster.ports``)."""
    try:
        return ports.free_port_block(count, host)
    except RuntimeError as error:
        raise BenchError(str(error)) from None


def start_local(
    *,
    protocol: str,
    dcs: tuple[str, ...],
    partitions: int,
    wan: str | float = "realistic",
    clock_skew_ms: float = 0.0,
    clock_skew_model: str = "uniform",
    clock_skew_seed: int = 1,
    host: str = "127.0.0.1",
    settings: dict[str, Any] | None = None,
    durable: bool = False,
) -> RunningCluster:
    """Start one ``okapi server`` process per (DC, partition), as `okapi up` does, and wait until
    every one passes its gRPC health check. ``durable``: each server keeps its store in a data
    directory of its own (``WORKDIR/<dc>-p<n>``, as `okapi up` lays them out), else in memory.

    The processes come from ``okapikv.cluster.processes`` (as `okapi up`'s do), so they die with the
    benchmark even if it is killed (PR_SET_PDEATHSIG): a crashed run never leaves servers holding
    CPU that would distort the next measurement.
    """
    import dataclasses

    from okapikv.cluster.config import local_cluster
    from okapikv.cluster.processes import StartError, start_all, wait_started

    count = len(dcs) * partitions
    base_port = free_port_block(count, host)
    config = local_cluster(
        dcs=dcs, partitions=partitions, protocol=protocol, wan=wan, clock_skew_ms=clock_skew_ms,
        clock_skew_model=clock_skew_model, clock_skew_seed=clock_skew_seed, base_port=base_port, host=host,
        cluster_id=f"okapi-bench-{os.getpid()}-{base_port}",
    )
    if settings:
        config = dataclasses.replace(config, **settings)
    workdir = tempfile.TemporaryDirectory(prefix="okapi-bench-")
    config_path = config.dump(Path(workdir.name) / "cluster.toml")
    cluster = RunningCluster(
        protocol, tuple(config.dcs), partitions, (), clock_skew_ms=clock_skew_ms, clock_skew_model=clock_skew_model,
        max_dc_skew_ms=max_skew_in_dc_us([round(server.clock_skew_ms * 1000) for server in config.servers],
                                         partitions) / 1000,
        wan=str(wan), workdir=workdir,
    )
    try:
        children = start_all(config, config_path, data_root=Path(workdir.name) if durable else None)
        cluster.children = children
        cluster.servers = tuple(
            ServerEndpoint(config.dc_index(child.server.dc), child.server.dc, child.server.partition,
                           child.server.address, child.process.pid) for child in children)
        try:
            wait_started(config, children, START_TIMEOUT_S)
        except StartError as error:
            raise BenchError(str(error)) from None
    except BaseException:
        cluster.stop()
        raise
    return cluster
