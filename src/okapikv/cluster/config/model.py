"""The cluster config as a value: ``ClusterConfig`` (every server of a deployment and the settings
they must agree on), valid by construction (``validate``), read from and written to TOML
(``parse``, ``write``). What each setting means: ``fields`` and docs/config.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from okapikv.cluster.config.fields import (
    DEFAULT_CLUSTER_ID,
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_IDLE_AFTER_MS,
    DEFAULT_IDLE_INTERVAL_MS,
    DEFAULT_MAX_CLOCK_OFFSET_MS,
    DEFAULT_MAX_KEY_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_VALUE_BYTES,
    DEFAULT_PROTOCOL,
    DEFAULT_STABILIZATION_INTERVAL_MS,
    MESSAGE_OVERHEAD_BYTES,
)
from okapikv.cluster.config.parse import cluster_fields, toml_data
from okapikv.cluster.config.servers import ServerConfig
from okapikv.cluster.config.validate import problems
from okapikv.cluster.config.write import render, write_atomically
from okapikv.cluster.connections import ConnectionSettings
from okapikv.cluster.reads import ReadLimits
from okapikv.core.config import CoreConfig
from okapikv.tls import TlsConfig


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """A whole deployment. ``servers`` is in dc-major order (every partition of ``dcs[0]``, then
    ``dcs[1]``, ...); a DC's index in the protocol is its position in ``dcs``."""

    dcs: tuple[str, ...]
    partitions: int
    servers: tuple[ServerConfig, ...]
    wan_ms: tuple[tuple[float, ...], ...] = ()
    cluster_id: str = DEFAULT_CLUSTER_ID
    protocol: str = DEFAULT_PROTOCOL
    heartbeat_interval_ms: float = DEFAULT_HEARTBEAT_INTERVAL_MS
    stabilization_interval_ms: float = DEFAULT_STABILIZATION_INTERVAL_MS
    idle_after_ms: float = DEFAULT_IDLE_AFTER_MS
    idle_interval_ms: float = DEFAULT_IDLE_INTERVAL_MS
    piggyback_usv: bool = False
    native: bool = True
    resp: bool = True
    bounded_visibility: bool = False
    max_clock_offset_ms: float = DEFAULT_MAX_CLOCK_OFFSET_MS
    auto_remove_after_s: float = 0.0
    max_key_bytes: int = DEFAULT_MAX_KEY_BYTES
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    tls: TlsConfig | None = None
    connections: ConnectionSettings = ConnectionSettings()
    reads: ReadLimits = ReadLimits()
    _index: dict[tuple[str, int], ServerConfig] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.wan_ms:
            object.__setattr__(self, "wan_ms", tuple((0.0,) * len(self.dcs) for _ in self.dcs))
        found = problems(self)
        if found:
            raise ValueError("invalid cluster config: " + "; ".join(found))
        ordered = tuple(sorted(self.servers, key=lambda s: (self.dcs.index(s.dc), s.partition)))
        object.__setattr__(self, "servers", ordered)
        object.__setattr__(self, "_index", {(s.dc, s.partition): s for s in ordered})

    # ---------------------------------------------------------------- queries

    def dc_index(self, name: str) -> int:
        try:
            return self.dcs.index(name)
        except ValueError:
            raise ValueError(f"unknown DC {name!r}; the cluster has {', '.join(self.dcs)}") from None

    def server(self, dc: str | int, partition: int) -> ServerConfig:
        name = self.dcs[dc] if isinstance(dc, int) else dc
        self.dc_index(name)
        found = self._index.get((name, partition))
        if found is None:
            raise ValueError(f"DC {name!r} has no partition {partition}; partitions are 0..{self.partitions - 1}")
        return found

    def delay_ms(self, source_dc: int, destination_dc: int) -> float:
        """One-way emulated WAN delay from one DC to another (0 inside a DC)."""
        return self.wan_ms[source_dc][destination_dc]

    def core_config(self, dc: str | int, partition: int) -> CoreConfig:
        index = dc if isinstance(dc, int) else self.dc_index(dc)
        return CoreConfig(
            dc=index,
            partition=partition,
            num_dcs=len(self.dcs),
            num_partitions=self.partitions,
            protocol=self.protocol,
            heartbeat_interval_us=round(self.heartbeat_interval_ms * 1000),
            stabilization_interval_us=round(self.stabilization_interval_ms * 1000),
            idle_after_us=round(self.idle_after_ms * 1000),
            idle_interval_us=round(self.idle_interval_ms * 1000),
            piggyback_usv=self.piggyback_usv,
            max_key_bytes=self.max_key_bytes,
            max_value_bytes=self.max_value_bytes,
            **self.reads.core_fields(self.page_room_bytes),
            max_clock_offset_us=round(self.max_clock_offset_ms * 1000),
            auto_remove_after_us=round(self.auto_remove_after_s * 1_000_000),
        )

    @property
    def page_room_bytes(self) -> int:
        """What the message limit leaves for a SCAN page beside one largest pair (a page may exceed
        its byte budget by one pair): the most ``[reads] max_scan_bytes`` may be."""
        return self.max_message_bytes - self.max_key_bytes - self.max_value_bytes - MESSAGE_OVERHEAD_BYTES

    # ---------------------------------------------------------------- TOML

    def to_dict(self) -> dict[str, Any]:
        data = {
            "cluster_id": self.cluster_id,
            "dcs": list(self.dcs),
            "partitions": self.partitions,
            "protocol": self.protocol,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "stabilization_interval_ms": self.stabilization_interval_ms,
            "idle_after_ms": self.idle_after_ms,
            "idle_interval_ms": self.idle_interval_ms,
            "piggyback_usv": self.piggyback_usv,
            "native": self.native,
            "resp": self.resp,
            "bounded_visibility": self.bounded_visibility,
            "max_clock_offset_ms": self.max_clock_offset_ms,
            "auto_remove_after_s": self.auto_remove_after_s,
            "max_key_bytes": self.max_key_bytes,
            "max_value_bytes": self.max_value_bytes,
            "max_message_bytes": self.max_message_bytes,
            "wan_ms": {name: list(row) for name, row in zip(self.dcs, self.wan_ms, strict=True)},
            "servers": [_server_dict(s) for s in self.servers],
        }
        if self.tls is not None:
            data["tls"] = _tls_dict(self.tls)
        if self.connections.changed():
            data["connections"] = self.connections.changed()
        if self.reads.changed():
            data["reads"] = self.reads.changed()
        return data

    def to_toml(self) -> str:
        """The config as TOML, laid out for people: one [[servers]] table per server (``write``)."""
        return render(self.to_dict())

    def dump(self, path: str | Path) -> Path:
        """Write the config atomically (a reader never sees half a file)."""
        return write_atomically(path, self.to_toml())

    @classmethod
    def from_toml(cls, text: str, source: str = "cluster config", directory: Path | None = None) -> ClusterConfig:
        """Parse a config; ``directory`` (the file's folder) anchors relative TLS paths."""
        data = toml_data(text, source)
        try:
            config = cls.from_dict(data)
        except ValueError as error:
            raise ValueError(f"{source}: {error}") from None
        if config.tls is not None and directory is not None:
            config = dataclasses.replace(config, tls=config.tls.resolved(directory))
        return config

    @classmethod
    def load(cls, path: str | Path) -> ClusterConfig:
        target = Path(path)
        try:
            text = target.read_text(encoding="utf-8")
        except OSError as error:
            raise ValueError(f"cannot read cluster config {str(target)!r}: {error.strerror or error}") from None
        return cls.from_toml(text, source=str(target), directory=target.parent.resolve())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterConfig:
        """The config of its plain form (a parsed file, ``to_dict``); ``ValueError`` naming the entry."""
        return cls(**cluster_fields(data))


def _server_dict(server: ServerConfig) -> dict[str, Any]:
    entry: dict[str, Any] = {"dc": server.dc, "partition": server.partition, "address": server.address,
                             "clock_skew_ms": server.clock_skew_ms}
    if server.metrics_port:
        entry["metrics_port"] = server.metrics_port
    if server.peer_address:
        entry["peer_address"] = server.peer_address
    if server.native_port:
        entry["native_port"] = server.native_port
    if server.resp_port:
        entry["resp_port"] = server.resp_port
    if server.bind:
        entry["bind"] = server.bind
    return entry


def _tls_dict(tls: TlsConfig) -> dict[str, Any]:
    entry: dict[str, Any] = {"ca": tls.ca, "certificate": tls.certificate, "key": tls.key,
                             "client_auth": tls.client_auth}
    if tls.server_name:
        entry["server_name"] = tls.server_name
    return entry
