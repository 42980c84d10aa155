"""The client's view of the cluster: which server of its DC holds which partition.

A client is given one address (any server of the DC it should use). It asks that server for
``ClusterInfo`` and from then on talks directly to every server of the DC: single-key operations go
to the server of ``partition_of(key)`` (the one place that serializes the key), RO-TX and SCAN to any
server of the DC, which coordinates the snapshot read (docs/protocol.md, "Snapshot reads").
"""

from __future__ import annotations

from dataclasses import dataclass

from okapikv.core.partitioning import partition_of
from okapikv.errors import ProtocolMismatch
from okapikv.wire import okapikv_pb2 as pb

_WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")
DEFAULT_MESSAGE_LIMIT_BYTES = 4 << 20  # gRPC's default receive limit
MESSAGE_OVERHEAD_BYTES = 64 << 10


@dataclass(frozen=True, slots=True)
class Topology:
    """The cluster as seen from one DC. ``addresses[p]`` is the server of partition p in this DC."""

    cluster_id: str
    protocol: str
    dc: int
    dc_names: tuple[str, ...]
    num_partitions: int
    addresses: tuple[str, ...]
    max_key_bytes: int
    max_value_bytes: int
    max_message_bytes: int
    max_read_keys: int = 0  # the most keys a RO-TX may name (0: the servers did not say)

    @property
    def batch_budget_bytes(self) -> int:
        """How many bytes of operations one pipelined batch may carry: the servers' message limit
        less room for framing (gRPC's default 4 MiB when a server does not say)."""
        limit = self.max_message_bytes or DEFAULT_MESSAGE_LIMIT_BYTES
        return max(limit - MESSAGE_OVERHEAD_BYTES, limit // 2)

    @property
    def num_dcs(self) -> int:
        return len(self.dc_names)

    @property
    def dc_name(self) -> str:
        return self.dc_names[self.dc]

    def partition_of(self, key: bytes) -> int:
        return partition_of(key, self.num_partitions)

    @classmethod
    def from_cluster_info(cls, info: pb.ClusterInfoResponse, bootstrap_address: str) -> Topology:
        """Build the topology from a ClusterInfo reply, checking it names one server per partition.

        A server bound to a wildcard address (0.0.0.0) advertises it as is; a client cannot dial
        that, so the host it used for the bootstrap server is put in its place.
        """
        num_dcs = len(info.dc_names)
        if num_dcs == 0 or info.num_partitions == 0:
            raise ProtocolMismatch(f"{bootstrap_address} described an empty cluster (no DC or no partition)")
        if info.dc >= num_dcs:
            raise ProtocolMismatch(f"{bootstrap_address} claims DC {info.dc} of a {num_dcs}-DC cluster")
        by_partition: dict[int, str] = {}
        for server in info.servers:
            if server.dc == info.dc:
                by_partition[server.partition] = _dialable(server.address, bootstrap_address)
        missing = [p for p in range(info.num_partitions) if p not in by_partition]
        if missing:
            raise ProtocolMismatch(
                f"{bootstrap_address} lists no server for partition(s) {missing} of DC {info.dc_names[info.dc]}")
        return cls(
            cluster_id=info.cluster_id,
            protocol=info.protocol,
            dc=info.dc,
            dc_names=tuple(info.dc_names),
            num_partitions=info.num_partitions,
            addresses=tuple(by_partition[p] for p in range(info.num_partitions)),
            max_key_bytes=info.max_key_bytes,
            max_value_bytes=info.max_value_bytes,
            max_message_bytes=info.max_message_bytes,
            max_read_keys=info.max_read_keys,
        )


def split_host_port(address: str) -> tuple[str, str]:
    host, separator, port = address.rpartition(":")
    if not separator:
        return address, ""
    return host, port


def _dialable(advertised: str, bootstrap_address: str) -> str:
    host, port = split_host_port(advertised)
    if host in _WILDCARD_HOSTS and port:
        bootstrap_host, _ = split_host_port(bootstrap_address)
        return f"{bootstrap_host}:{port}"
    return advertised
