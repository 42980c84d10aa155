"""The cluster a fuzz run talks to: a fresh local one of ``okapi server`` processes, or a running
one (``--connect``)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from okapikv.cluster import ports
from okapikv.fuzz.errors import FuzzError

if TYPE_CHECKING:
    from okapikv.cluster.config import ClusterConfig, ServerConfig
    from okapikv.cluster.processes import Child

CLUSTER_START_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Target:
    """The cluster the clients talk to: DC names in protocol order and one server address per DC."""

    description: str
    protocol: str
    dcs: tuple[str, ...]
    addresses: dict[str, str]



def free_base_port(count: int, host: str = "127.0.0.1") -> int:
    """A port p with p .. p + count - 1 free now (``okapikv.cluster.ports``)."""
    try:
        return ports.free_port_block(count, host)
    except RuntimeError as error:
        raise FuzzError(str(error)) from None


class LocalCluster:
    """The ``okapi server`` processes ``local_cluster`` started, and what is needed to kill one and
    start it again on the same port and data directory (``data_root``: None when in memory)."""

    def __init__(self, target: Target, config: ClusterConfig, config_path: Path, children: list[Child],
                 data_root: Path | None) -> None:
        self.target = target
        self.config = config
        self.config_path = config_path
        self.children = children
        self.data_root = data_root

    def data_dir(self, server: ServerConfig) -> Path | None:
        from okapikv.cluster.processes import server_data_dir

        return server_data_dir(self.data_root, server) if self.data_root is not None else None

    def of_partitions(self, partitions: Sequence[int]) -> list[Child]:
        return [child for child in self.children if child.server.partition in partitions]

    def kill(self, children: Sequence[Child]) -> list[int | None]:
        """SIGKILL these servers (all the signals first, so they die together) and reap them:
        their exit statuses (None: still there after 10 s)."""
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                child.process.kill()
        statuses: list[int | None] = []
        for child in children:
            try:
                statuses.append(child.process.wait(timeout=10))
            except subprocess.TimeoutExpired:
                statuses.append(None)
        return statuses

    def restart(self, child: Child) -> Child:
        """Start the server of ``child`` again, same config, port and data directory (call it on the
        thread that started the cluster: the launcher ties a server's life to its starting thread)."""
        from okapikv.cluster.processes import Child, start_server

        fresh = Child(child.server, start_server(self.config_path, child.server,
                                                 data_dir=self.data_dir(child.server)))
        self.children[self.children.index(child)] = fresh
        return fresh


@contextlib.contextmanager
def local_cluster(dcs: Sequence[str], partitions: int, protocol: str, directory: Path,
                  durable: bool = False, base_port: int | None = None) -> Iterator[LocalCluster]:
    """A fresh cluster of ``okapi server`` processes (as `okapi up` starts them, with the realistic
    WAN delays) on free ports, its config kept in ``directory`` rather than ``~/.okapi`` so a fuzz
    run leaves a user's own cluster alone. In memory unless ``durable`` (``--kill-partitions``: a
    killed server must come back with its data): then each server keeps its data in
    ``directory/data/<dc>-p<n>``, fresh, so every run still starts from an empty store. Stopped on
    exit, whatever happens. ``base_port`` (``--base-port``): the servers' consecutive ports start
    there (one attempt) instead of at a drawn block (``okapikv.cluster.ports``, three attempts)."""
    from okapikv.cluster import config as cluster_config
    from okapikv.cluster.processes import StartError, start_all, stop_children, wait_started

    children: list[Child] = []
    data_root = directory / "data" if durable else None
    try:
        attempts = 1 if base_port is not None else 3
        for attempt in range(attempts):
            try:
                first = base_port if base_port is not None else free_base_port(len(dcs) * partitions)
                config = cluster_config.local_cluster(dcs=dcs, partitions=partitions, protocol=protocol,
                                                      base_port=first, cluster_id="okapi-fuzz")
            except ValueError as error:
                raise FuzzError(str(error)) from None
            path = config.dump(directory / "cluster.toml")
            if data_root is not None:
                shutil.rmtree(data_root, ignore_errors=True)  # an earlier attempt's (other ports)
            children = start_all(config, path, data_root=data_root)
            try:
                wait_started(config, children, CLUSTER_START_TIMEOUT_S)
            except StartError as error:  # a port taken meanwhile: try other ports
                stop_children(children)
                children = []
                if attempt == attempts - 1:
                    raise FuzzError(f"the local cluster did not start: {error}") from None
                continue
            storage = "durable" if durable else "in memory"
            target = Target(f"a local cluster ({len(dcs)} DC(s) x {partitions} partition(s), realistic WAN, "
                            f"{storage})", protocol, config.dcs,
                            {dc: config.server(dc, 0).address for dc in config.dcs})
            yield LocalCluster(target, config, path, children, data_root)
            return
    finally:
        stop_children(children)



def connected_cluster(address: str) -> Target:
    """The running cluster ``address`` belongs to (asked through ClusterInfo)."""
    from okapikv.cluster.status import topology_from_server

    try:
        topology = topology_from_server(address)
    except ValueError as error:
        raise FuzzError(str(error)) from None
    addresses: dict[str, str] = {}
    for dc, partition, server_address in topology.servers:
        if partition == 0:
            addresses[dc] = server_address
    return Target(f"the cluster at {address} ({len(topology.dcs)} DC(s))", topology.protocol, topology.dcs,
                  addresses)

