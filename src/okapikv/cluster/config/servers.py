"""One ``[[servers]]`` entry of the cluster config: where a partition server listens and is dialled."""

from __future__ import annotations

from dataclasses import dataclass

from okapikv.cluster.config.addresses import join_address, split_address


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One partition server: where it listens and how far its clock is off (emulated skew).

    ``metrics_port`` (0: off) serves Prometheus metrics on the host of ``address``; ``peer_address``
    (optional) is a listener for peer links only, which then dial it instead of ``address``;
    ``native_port`` is the native port on the host of ``address`` (0: any free one), ``resp_port``
    the Redis-protocol port (0: any free one).

    ``bind`` (optional) is where the server listens when that is not where it is dialled: behind NAT,
    a published container port or a per-pod load balancer the server binds, say, ``0.0.0.0:7100``
    while peers and clients dial ``address`` (what ClusterInfo advertises), the listen/advertise
    split of etcd and CockroachDB. Every
    listener of the server then binds on the host of ``bind``: the client port on ``bind`` itself,
    the peer, metrics, native and RESP listeners on their own ports."""

    dc: str
    partition: int
    address: str
    clock_skew_ms: float = 0.0
    metrics_port: int = 0
    peer_address: str | None = None
    native_port: int = 0
    resp_port: int = 0
    bind: str | None = None

    @property
    def label(self) -> str:
        return f"{self.dc}/{self.partition}"

    @property
    def listen_address(self) -> str:
        """Where the client (gRPC) listener binds: ``bind``, else ``address``."""
        return self.bind or self.address

    @property
    def listen_host(self) -> str:
        """The host every other listener (metrics, native, RESP) binds on, without brackets."""
        return split_address(self.listen_address)[0]

    @property
    def peer_listen_address(self) -> str | None:
        """Where the peer listener binds: ``peer_address``'s port on the host of ``bind`` when
        the server has one, else ``peer_address`` itself (None without a peer listener)."""
        if self.peer_address is None or self.bind is None:
            return self.peer_address
        return join_address(self.listen_host, split_address(self.peer_address)[1])

    @property
    def local_address(self) -> str:
        """Where a process on the server's own host reaches its client listener (`okapi health` in a
        container): ``bind``, with a wildcard host replaced by loopback."""
        host, port = split_address(self.listen_address)
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return join_address(host, port)

    @property
    def peer_target(self) -> str:
        """Where peers dial this server."""
        return self.peer_address or self.address

    @property
    def metrics_address(self) -> str | None:
        """``host:port`` of the metrics endpoint, or None when it is off."""
        if not self.metrics_port:
            return None
        return join_address(split_address(self.address)[0], self.metrics_port)

    @property
    def resp_address(self) -> str | None:
        """``host:port`` of a configured RESP port, or None when it is any free port."""
        if not self.resp_port:
            return None
        return join_address(split_address(self.address)[0], self.resp_port)
