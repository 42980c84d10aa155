"""The cluster config file: every server of a deployment and the knobs they must agree on.

One TOML file describes the whole cluster, and every server binds the address written next to its
own (dc, partition), so the same file works for a loopback cluster and for a multi-host one: copy it
to each host and start `okapi server --config FILE --dc NAME --partition N --data-dir DIR` there.

What must agree across servers lives here (DC order, partitions per DC, protocol, stabilization
intervals, size limits, the maximum clock offset); what is per server is the address and the injected
clock skew. ``max_clock_offset_ms`` (default 500) is the most any server's clock may be ahead of
another's: a timestamp further ahead of a server's clock is refused or held back there
(``okapikv.core.server``; docs/operations.md, "Clocks: the maximum offset"). The WAN
delay matrix is an emulation knob for local runs: each sender holds a message to another DC back
for the one-way delay (see ``okapikv.server.links``).

Example (what `okapi up --print-config` prints, shortened)::

    cluster_id = "okapi-local"
    dcs = ["oregon", "virginia"]
    partitions = 1
    protocol = "okapi"

    [wan_ms]            # one-way delay, row DC -> column DC, in the order of `dcs`
    oregon = [0.0, 35.0]
    virginia = [35.0, 0.0]

    [[servers]]
    dc = "oregon"
    partition = 0
    address = "127.0.0.1:7100"
    clock_skew_ms = 0.0

Optional per server: ``metrics_port`` (Prometheus metrics on the host of ``address``; 0 or absent
means off), ``native_port`` (the native port, on the host of ``address``; 0 or absent: any free
port, which clients learn through ClusterInfo), ``resp_port`` (the Redis-protocol port, on the host
of ``address``; 0 or absent: any free port, shown by the server's Stats; see ``okapikv.resp``),
``peer_address`` (a second listener for peer links only, e.g. on a private network; required with
``[tls] client_auth = false``, see ``okapikv.tls``) and ``bind`` (where the server listens when that
is not the ``address`` peers and clients dial: NAT, published container ports; ``ServerConfig``).
Optional for the cluster: ``native = false`` (serve no native port: clients then pipeline over gRPC;
see ``okapikv.wire.frames``), ``resp = false`` (serve no Redis-protocol port), ``bounded_visibility
= true`` (Okapi: servers hold client batches while remote updates take longer than the UST bound to
become visible, a bound computed from ``wan_ms``, so for emulated WANs; see
``okapikv.server.admission``), a ``[connections]`` section (timeouts and input budgets,
``okapikv.cluster.connections``), a ``[reads]`` section (the bounds on snapshot reads,
``okapikv.cluster.reads``) and a ``[tls]`` section (``ca``, ``certificate``, ``key``: PEM paths,
relative ones taken from the config file's folder; ``client_auth``, default true; ``server_name``)::

    [tls]
    ca = "ca.pem"
    certificate = "server.pem"     # each host may hold its own certificate at this path
    key = "server-key.pem"
    client_auth = true

Loading validates everything and raises ``ValueError`` naming the offending entry, so a typo fails
at start-up instead of as a silent misbehaviour later.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import random
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from okapikv.cluster.connections import ConnectionSettings
from okapikv.cluster.reads import ReadLimits
from okapikv.core.config import DEFAULT_IDLE_INTERVAL_US, MAX_DCS, CoreConfig
from okapikv.core.deployment import PAPER_DC_NAMES, PAPER_WAN_MS
from okapikv.core.protocols import protocol_names
from okapikv.core.skew import DC_MAJOR, clock_offsets_us
from okapikv.tls import TlsConfig

DEFAULT_CLUSTER_ID = "okapi-local"
DEFAULT_MAX_KEY_BYTES = 1024
DEFAULT_MAX_VALUE_BYTES = 1 << 20
# Big enough for pipelined batches and for scan slices of many large values; small enough that a
# hostile client cannot make a server allocate without bound. A single largest operation must fit
# (checked), so the value limit, not the message limit, is what refuses an oversized value.
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
# Far above what NTP keeps clocks to (milliseconds), far below a bad step (minutes, hours).
DEFAULT_MAX_CLOCK_OFFSET_MS = 500.0
MESSAGE_OVERHEAD_BYTES = 64 << 10

# One-way delays between the paper's AWS regions, in ms (``okapikv.core.deployment``).
REALISTIC_WAN_MS: dict[frozenset[str], float] = {
    frozenset({a, b}): PAPER_WAN_MS[i][j]
    for i, a in enumerate(PAPER_DC_NAMES) for j, b in enumerate(PAPER_DC_NAMES) if i < j
}
DEFAULT_REALISTIC_WAN_MS = 50.0
# Idle pacing (``okapikv.core.pacing``): after a second without a client write or remote update, a
# partition's round, heartbeat and GC pass run once a second instead of every few ms, and snap back
# at the next write. An idle 3 DC x 2 partition cluster on a 2-core machine otherwise costs ~0.12
# core per server; at 200 ms ~0.015, at 1 s ~0.004 (docs/benchmarks.md, "Idle cost").
DEFAULT_IDLE_AFTER_MS = 1000.0
DEFAULT_IDLE_INTERVAL_MS = DEFAULT_IDLE_INTERVAL_US / 1000

_TOP_LEVEL_KEYS = {
    "cluster_id",
    "dcs",
    "partitions",
    "protocol",
    "heartbeat_interval_ms",
    "stabilization_interval_ms",
    "idle_after_ms",
    "idle_interval_ms",
    "piggyback_usv",
    "native",
    "resp",
    "bounded_visibility",
    "max_clock_offset_ms",
    "max_key_bytes",
    "max_value_bytes",
    "max_message_bytes",
    "wan_ms",
    "servers",
    "tls",
    "connections",
    "reads",
}
_SERVER_KEYS = {"dc", "partition", "address", "clock_skew_ms", "metrics_port", "peer_address", "native_port",
                "resp_port", "bind"}
_TLS_KEYS = {"ca", "certificate", "key", "client_auth", "server_name"}


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


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """A whole deployment. ``servers`` is in dc-major order (every partition of ``dcs[0]``, then
    ``dcs[1]``, ...); a DC's index in the protocol is its position in ``dcs``."""

    dcs: tuple[str, ...]
    partitions: int
    servers: tuple[ServerConfig, ...]
    wan_ms: tuple[tuple[float, ...], ...] = ()
    cluster_id: str = DEFAULT_CLUSTER_ID
    protocol: str = "okapi"
    heartbeat_interval_ms: float = 1.0
    stabilization_interval_ms: float = 5.0
    idle_after_ms: float = DEFAULT_IDLE_AFTER_MS
    idle_interval_ms: float = DEFAULT_IDLE_INTERVAL_MS
    piggyback_usv: bool = False
    native: bool = True
    resp: bool = True
    bounded_visibility: bool = False
    max_clock_offset_ms: float = DEFAULT_MAX_CLOCK_OFFSET_MS
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
        _validate(self)
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
        """The config as TOML, laid out for people: one [[servers]] table per server."""
        lines = [
            "# okapikv cluster config. Start one server with:",
            "#   okapi server --config THIS_FILE --dc NAME --partition N --data-dir DIR",
            f"cluster_id = {_toml_string(self.cluster_id)}",
            f"dcs = [{', '.join(_toml_string(name) for name in self.dcs)}]",
            f"partitions = {self.partitions}",
            f"protocol = {_toml_string(self.protocol)}",
            f"heartbeat_interval_ms = {_toml_float(self.heartbeat_interval_ms)}",
            f"stabilization_interval_ms = {_toml_float(self.stabilization_interval_ms)}",
            "# Idle pacing: after this long without a write, rounds and heartbeats run every idle_interval_ms",
            "# (0: never back off, the paper's setting).",
            f"idle_after_ms = {_toml_float(self.idle_after_ms)}",
            f"idle_interval_ms = {_toml_float(self.idle_interval_ms)}",
            f"piggyback_usv = {'true' if self.piggyback_usv else 'false'}",
            f"native = {'true' if self.native else 'false'}",
            f"resp = {'true' if self.resp else 'false'}",
            f"bounded_visibility = {'true' if self.bounded_visibility else 'false'}",
            "# A timestamp more than this ahead of a server's clock is refused or held back there.",
            f"max_clock_offset_ms = {_toml_float(self.max_clock_offset_ms)}",
            f"max_key_bytes = {self.max_key_bytes}",
            f"max_value_bytes = {self.max_value_bytes}",
            f"max_message_bytes = {self.max_message_bytes}",
            "",
            "# Emulated one-way WAN delay in ms from the row DC to each DC, in the order of `dcs`.",
            "[wan_ms]",
        ]
        for name, row in zip(self.dcs, self.wan_ms, strict=True):
            lines.append(f"{_toml_key(name)} = [{', '.join(_toml_float(delay) for delay in row)}]")
        for server in self.servers:
            lines += [
                "",
                "[[servers]]",
                f"dc = {_toml_string(server.dc)}",
                f"partition = {server.partition}",
                f"address = {_toml_string(server.address)}",
                f"clock_skew_ms = {_toml_float(server.clock_skew_ms)}",
            ]
            if server.metrics_port:
                lines.append(f"metrics_port = {server.metrics_port}")
            if server.peer_address:
                lines.append(f"peer_address = {_toml_string(server.peer_address)}")
            if server.native_port:
                lines.append(f"native_port = {server.native_port}")
            if server.resp_port:
                lines.append(f"resp_port = {server.resp_port}")
            if server.bind:
                lines.append(f"bind = {_toml_string(server.bind)}")
        if self.tls is not None:
            lines += ["", "# TLS for clients and peer links (peers always use mutual TLS).", "[tls]"]
            for name, value in _tls_dict(self.tls).items():
                text = ("true" if value else "false") if isinstance(value, bool) else _toml_string(str(value))
                lines.append(f"{name} = {text}")
        if self.connections.changed():
            lines += ["", "# Timeouts and input budgets (docs/operations.md, Connections).", "[connections]"]
            lines += [f"{name} = {value}" for name, value in self.connections.changed().items()]
        if self.reads.changed():
            lines += ["", "# Bounds on snapshot reads (docs/operations.md, Read limits and paging).", "[reads]"]
            lines += [f"{name} = {value}" for name, value in self.reads.changed().items()]
        return "\n".join(lines) + "\n"

    def dump(self, path: str | Path) -> Path:
        """Write the config atomically (a reader never sees half a file)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temporary.write_text(self.to_toml(), encoding="utf-8")
        temporary.replace(target)
        return target

    @classmethod
    def from_toml(cls, text: str, source: str = "cluster config", directory: Path | None = None) -> ClusterConfig:
        """Parse a config; ``directory`` (the file's folder) anchors relative TLS paths."""
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, ValueError) as error:  # ValueError: an integer of too many digits
            raise ValueError(f"{source}: not valid TOML: {error}") from None
        except RecursionError:  # tomllib parses nested arrays and tables by recursion
            raise ValueError(f"{source}: not valid TOML: arrays or tables nested too deep") from None
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
        unknown = sorted(set(data) - _TOP_LEVEL_KEYS)
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(unknown)}")
        dcs = _string_list(data.get("dcs"), "dcs")
        if len(dcs) > MAX_DCS:  # before anything sized by the DC count (the wan_ms matrix) is built
            raise ValueError(f"dcs names {len(dcs)} DCs; a cluster has at most {MAX_DCS}")
        partitions = _integer(data.get("partitions"), "partitions")
        servers_data = data.get("servers")
        if not isinstance(servers_data, list) or not servers_data:
            raise ValueError("servers must be a non-empty array of tables ([[servers]])")
        servers = tuple(_server(entry, number) for number, entry in enumerate(servers_data, start=1))
        wan = data.get("wan_ms", {})
        if not isinstance(wan, dict):
            raise ValueError("wan_ms must be a table of rows, one per DC")
        unknown_dcs = sorted(set(wan) - set(dcs))
        if unknown_dcs:
            raise ValueError(f"wan_ms names unknown DC(s) {', '.join(unknown_dcs)}; DCs are {', '.join(dcs)}")
        rows = tuple(_wan_row(wan.get(name), name, len(dcs)) for name in dcs)
        optional: dict[str, Any] = {}
        for name in ("heartbeat_interval_ms", "stabilization_interval_ms", "idle_after_ms", "idle_interval_ms",
                     "max_clock_offset_ms"):
            if name in data:
                optional[name] = _number(data[name], name)
        for name in ("max_key_bytes", "max_value_bytes", "max_message_bytes"):
            if name in data:
                optional[name] = _integer(data[name], name)
        for name in ("piggyback_usv", "native", "resp", "bounded_visibility"):
            if name in data:
                if not isinstance(data[name], bool):
                    raise ValueError(f"{name} must be true or false")
                optional[name] = data[name]
        for name in ("cluster_id", "protocol"):
            if name in data:
                if not isinstance(data[name], str):
                    raise ValueError(f"{name} must be a string")
                optional[name] = data[name]
        if "tls" in data:
            optional["tls"] = _tls(data["tls"])
        if "connections" in data:
            optional["connections"] = ConnectionSettings.from_dict(data["connections"])
        if "reads" in data:
            optional["reads"] = ReadLimits.from_dict(data["reads"])
        return cls(dcs=dcs, partitions=partitions, servers=servers, wan_ms=rows, **optional)


# -------------------------------------------------------------------- TOML emitting


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


def _toml_string(text: str) -> str:
    """A TOML basic string: escapes quotes, backslashes and every control character."""
    escaped = []
    for char in text:
        if char in ('"', "\\"):
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _toml_key(name: str) -> str:
    if name and all(char.isascii() and (char.isalnum() or char in "-_") for char in name):
        return name
    return _toml_string(name)


def _toml_float(value: float) -> str:
    text = repr(float(value))
    return text if ("." in text or "e" in text or "n" in text) else text + ".0"


# -------------------------------------------------------------------- validation helpers


def _integer(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    return value


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, not {value!r}")
    return float(value)


def _string_list(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{name} must be a non-empty array of strings")
    return tuple(value)


def _wan_row(value: object, name: str, size: int) -> tuple[float, ...]:
    if value is None:
        return (0.0,) * size
    if not isinstance(value, list) or len(value) != size:
        raise ValueError(f"wan_ms.{name} must be an array of {size} delays (one per DC, in the order of dcs)")
    return tuple(_number(item, f"wan_ms.{name}[{index}]") for index, item in enumerate(value))


def _server(entry: object, number: int) -> ServerConfig:
    where = f"servers entry #{number}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be a table")
    unknown = sorted(set(entry) - _SERVER_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown setting(s) {', '.join(unknown)}")
    for required in ("dc", "partition", "address"):
        if required not in entry:
            raise ValueError(f"{where}: missing {required}")
    if not isinstance(entry["dc"], str):
        raise ValueError(f"{where}: dc must be a string")
    if not isinstance(entry["address"], str):
        raise ValueError(f"{where}: address must be a string")
    skew = _number(entry.get("clock_skew_ms", 0.0), f"{where}: clock_skew_ms")
    metrics_port = _integer(entry.get("metrics_port", 0), f"{where}: metrics_port")
    native_port = _integer(entry.get("native_port", 0), f"{where}: native_port")
    resp_port = _integer(entry.get("resp_port", 0), f"{where}: resp_port")
    peer_address = entry.get("peer_address")
    if peer_address is not None and not isinstance(peer_address, str):
        raise ValueError(f"{where}: peer_address must be a string")
    bind = entry.get("bind")
    if bind is not None and not isinstance(bind, str):
        raise ValueError(f"{where}: bind must be a string")
    return ServerConfig(entry["dc"], _integer(entry["partition"], f"{where}: partition"), entry["address"], skew,
                        metrics_port, peer_address or None, native_port, resp_port, bind or None)


def _tls(entry: object) -> TlsConfig:
    if not isinstance(entry, dict):
        raise ValueError("tls must be a table ([tls])")
    unknown = sorted(set(entry) - _TLS_KEYS)
    if unknown:
        raise ValueError(f"tls: unknown setting(s) {', '.join(unknown)}")
    paths: dict[str, str] = {}
    for name in ("ca", "certificate", "key"):
        value = entry.get(name)
        if not isinstance(value, str) or not value:
            raise ValueError(f"tls: {name} must be the path of a PEM file")
        paths[name] = value
    client_auth = entry.get("client_auth", True)
    if not isinstance(client_auth, bool):
        raise ValueError("tls: client_auth must be true or false")
    server_name = entry.get("server_name")
    if server_name is not None and (not isinstance(server_name, str) or not server_name):
        raise ValueError("tls: server_name must be a non-empty string")
    return TlsConfig(paths["ca"], paths["certificate"], paths["key"], client_auth, server_name)


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port), with a precise error otherwise."""
    host, separator, port_text = address.rpartition(":")
    if not separator or not host or not port_text.isdigit():
        raise ValueError(f"address {address!r} must be HOST:PORT")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"address {address!r}: port must be in 1..65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        ipaddress.IPv6Address(host)
    elif ":" in host:
        raise ValueError(f"address {address!r}: write an IPv6 host in brackets, as [::1]:7100")
    return host, port


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _validate(config: ClusterConfig) -> None:
    problems: list[str] = []
    dcs = config.dcs
    if not 1 <= len(dcs) <= MAX_DCS:
        problems.append(f"dcs must name 1 to {MAX_DCS} DCs")
    if len(set(dcs)) != len(dcs):
        problems.append(f"dcs has duplicate names: {', '.join(sorted({d for d in dcs if dcs.count(d) > 1}))}")
    if any(not name or name != name.strip() for name in dcs):
        problems.append("DC names must be non-empty and have no surrounding spaces")
    if config.partitions < 1:
        problems.append(f"partitions must be at least 1, not {config.partitions}")
    if not config.cluster_id:
        problems.append("cluster_id must not be empty")
    if config.protocol not in protocol_names():
        problems.append(f"unknown protocol {config.protocol!r}; choose one of {', '.join(protocol_names())}")
    for name in ("heartbeat_interval_ms", "stabilization_interval_ms"):
        value = getattr(config, name)
        if not math.isfinite(value) or value <= 0:
            problems.append(f"{name} must be a positive number of ms, not {value}")
        elif value * 1000 < 1:
            problems.append(f"{name} must be at least 0.001 ms")
    idle_after, idle_interval = config.idle_after_ms, config.idle_interval_ms
    if not math.isfinite(idle_after) or idle_after < 0:
        problems.append(f"idle_after_ms must be a non-negative number of ms (0: never back off), not {idle_after}")
    if not math.isfinite(idle_interval) or idle_interval * 1000 < 1:
        problems.append(f"idle_interval_ms must be a positive number of ms (at least 0.001), not {idle_interval}")
    elif idle_after > 0 and idle_interval < max(config.heartbeat_interval_ms, config.stabilization_interval_ms):
        problems.append(f"idle_interval_ms ({idle_interval:g}) must be at least heartbeat_interval_ms and "
                        "stabilization_interval_ms: backing off must not speed up")
    elif idle_after > 0 and idle_interval >= config.reads.read_timeout_ms:
        problems.append(f"idle_interval_ms ({idle_interval:g}) must be below [reads] read_timeout_ms")
    for name in ("max_key_bytes", "max_value_bytes", "max_message_bytes"):
        if getattr(config, name) < 1:
            problems.append(f"{name} must be positive")
    offset = config.max_clock_offset_ms
    if not math.isfinite(offset) or offset * 1000 < 1:
        problems.append(f"max_clock_offset_ms must be a positive number of ms (at least 0.001), not {offset}")
    smallest_message = config.max_key_bytes + config.max_value_bytes + MESSAGE_OVERHEAD_BYTES
    if config.max_message_bytes < smallest_message:
        problems.append(
            f"max_message_bytes ({config.max_message_bytes}) must be at least max_key_bytes + max_value_bytes "
            f"+ {MESSAGE_OVERHEAD_BYTES} bytes of overhead = {smallest_message}"
        )
    problems.extend(config.reads.problems(config.page_room_bytes))
    if len(config.wan_ms) != len(dcs) or any(len(row) != len(dcs) for row in config.wan_ms):
        problems.append(f"wan_ms must be a {len(dcs)}x{len(dcs)} matrix")
    else:
        for i, row in enumerate(config.wan_ms):
            for j, delay in enumerate(row):
                if not math.isfinite(delay) or delay < 0:
                    problems.append(f"wan_ms.{dcs[i]}[{j}] must be a non-negative number of ms, not {delay}")
                elif i == j and delay != 0:
                    problems.append(f"wan_ms.{dcs[i]}[{j}]: the delay from a DC to itself must be 0")
    problems.extend(config.connections.problems(config.max_message_bytes))
    problems.extend(_server_problems(config))
    if problems:
        raise ValueError("invalid cluster config: " + "; ".join(problems))


def _server_problems(config: ClusterConfig) -> list[str]:
    problems: list[str] = []
    seen: dict[tuple[str, int], ServerConfig] = {}
    addresses: dict[str, ServerConfig] = {}
    for server in config.servers:
        if server.dc not in config.dcs:
            problems.append(f"server {server.label}: unknown DC {server.dc!r}; DCs are {', '.join(config.dcs)}")
            continue
        if not 0 <= server.partition < max(config.partitions, 1):
            problems.append(
                f"server {server.label}: partition {server.partition} out of range 0..{config.partitions - 1}"
            )
            continue
        if (server.dc, server.partition) in seen:
            problems.append(f"server {server.label} is listed twice")
        seen[(server.dc, server.partition)] = server
        try:
            host, port = split_address(server.address)
        except ValueError as error:
            problems.append(f"server {server.label}: {error}")
            continue
        canonical = join_address(host.lower(), port)
        if canonical in addresses:
            problems.append(
                f"servers {addresses[canonical].label} and {server.label} share the address {server.address}"
            )
        addresses[canonical] = server
        if not math.isfinite(server.clock_skew_ms):
            problems.append(f"server {server.label}: clock_skew_ms must be finite")
        if server.bind is not None:
            try:
                split_address(server.bind)
            except ValueError as error:
                problems.append(f"server {server.label}: bind: {error}")
        problems.extend(_listener_problems(config, server, host, addresses))
    for dc in config.dcs:
        missing = _missing_partitions({p for d, p in seen if d == dc}, config.partitions)
        if missing:
            problems.append(f"DC {dc!r} has no server for partition(s) {missing}")
    return problems


def _missing_partitions(present: set[int], partitions: int, shown: int = 10) -> str:
    """The partitions in 0..partitions-1 that are not ``present``, listed up to ``shown`` and then
    counted: found in steps bounded by the servers listed, not by ``partitions``, a number any
    config may hold (``partitions = 1000000000000`` lists one server and must fail at once)."""
    missing_count = max(partitions, 0) - len(present)
    listed: list[str] = []
    candidate = 0
    while len(listed) < min(shown, missing_count):
        if candidate not in present:
            listed.append(str(candidate))
        candidate += 1
    if missing_count > len(listed):
        listed.append(f"... ({missing_count:,} in all)")
    return ", ".join(listed)


def _listener_problems(
    config: ClusterConfig, server: ServerConfig, host: str, addresses: dict[str, ServerConfig]
) -> list[str]:
    """The optional metrics and peer listeners: valid, and sharing no address with any other."""
    problems: list[str] = []
    for name, port, zero in (("metrics", server.metrics_port, "off"), ("native", server.native_port, "any free port"),
                             ("resp", server.resp_port, "any free port")):
        if not 0 <= port <= 65535:
            problems.append(f"server {server.label}: {name}_port must be in 0..65535 (0: {zero})")
        elif port:
            canonical = join_address(host.lower(), port)
            if canonical in addresses:
                problems.append(f"server {server.label}: {name} port {port} is already used by "
                                f"{addresses[canonical].label}")
            addresses[canonical] = server
    if server.peer_address is not None:
        try:
            peer_host, peer_port = split_address(server.peer_address)
        except ValueError as error:
            problems.append(f"server {server.label}: peer_address: {error}")
        else:
            canonical = join_address(peer_host.lower(), peer_port)
            if canonical in addresses:
                problems.append(f"server {server.label}: peer_address {server.peer_address} is already used by "
                                f"{addresses[canonical].label}")
            addresses[canonical] = server
    elif config.tls is not None and not config.tls.client_auth:
        problems.append(f"server {server.label}: with tls client_auth = false, peer links need a listener that "
                        "demands certificates: give every server a peer_address")
    return problems


# -------------------------------------------------------------------- the default local cluster


def realistic_wan_ms(dcs: Sequence[str]) -> tuple[tuple[float, ...], ...]:
    """One-way delays for the paper's regions (``okapikv.core.deployment``: about half of public AWS
    inter-region round-trip times); any pair involving another DC name gets 50 ms."""
    return tuple(
        tuple(
            0.0 if a == b else REALISTIC_WAN_MS.get(frozenset({a, b}), DEFAULT_REALISTIC_WAN_MS) for b in dcs
        )
        for a in dcs
    )


def uniform_wan_ms(dcs: Sequence[str], delay_ms: float) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(0.0 if a == b else float(delay_ms) for b in dcs) for a in dcs)


LOCAL_HEARTBEAT_INTERVAL_MS = 5.0


def local_cluster(
    dcs: Sequence[str] = PAPER_DC_NAMES,
    partitions: int = 2,
    protocol: str = "okapi",
    wan: float | str = "realistic",
    clock_skew_ms: float = 0.0,
    clock_skew_model: str = DC_MAJOR,
    clock_skew_seed: int = 1,
    base_port: int = 7100,
    host: str = "127.0.0.1",
    cluster_id: str = DEFAULT_CLUSTER_ID,
    metrics_base_port: int = 0,
    tls: TlsConfig | None = None,
    heartbeat_interval_ms: float = LOCAL_HEARTBEAT_INTERVAL_MS,
    stabilization_interval_ms: float = 5.0,
    resp: bool = True,
    resp_base_port: int = 0,
    idle_after_ms: float = DEFAULT_IDLE_AFTER_MS,
    idle_interval_ms: float = DEFAULT_IDLE_INTERVAL_MS,
) -> ClusterConfig:
    """The cluster `okapi up` starts: one server per (DC, partition) on ``host``.

    Heartbeats default to every ``LOCAL_HEARTBEAT_INTERVAL_MS`` (5 ms) rather than the paper's 1 ms:
    every local server shares one machine, and at 1 ms an idle 3-DC x 2-partition cluster spends
    about 25% of a core per server on heartbeats alone (measured on a 2-core machine). Pass
    ``heartbeat_interval_ms=1`` (`okapi up --heartbeat-ms 1`) for the paper's setting, with
    ``idle_after_ms=0`` (no idle pacing, ``okapikv.core.pacing``; `okapi up` turns it off whenever
    ``--heartbeat-ms`` is given without ``--idle-after-ms``).

    Ports are ``base_port``, ``base_port + 1``, ... in dc-major order (every partition of the first
    DC, then the second DC, ...). ``wan`` is a uniform one-way delay in ms, ``"realistic"`` (see
    ``realistic_wan_ms``) or ``"off"``. ``clock_skew_ms`` gives the servers fixed clock offsets of
    up to X ms as ``clock_skew_model`` lays them out (``okapikv.core.skew``): by default spread
    evenly over [0, X] in the same order, the first server 0 and the last X; ``uniform`` and
    ``half-normal`` draw them from ``random.Random(clock_skew_seed)``. ``metrics_base_port`` (0: no
    metrics) numbers the metrics ports the same way, and ``resp_base_port`` the Redis-protocol ports (0:
    each server takes any free port; ``resp = False``: none). With ``tls`` and ``client_auth = false`` each
    server also gets a peer listener, on the ports right after the client ones.
    """
    names = tuple(name.strip() for name in dcs)
    if isinstance(wan, str):
        if wan == "realistic":
            matrix = realistic_wan_ms(names)
        elif wan == "off":
            matrix = uniform_wan_ms(names, 0.0)
        else:
            raise ValueError(f"wan must be a number of ms, 'realistic' or 'off', not {wan!r}")
    else:
        matrix = uniform_wan_ms(names, wan)
    if not math.isfinite(clock_skew_ms) or clock_skew_ms < 0:
        raise ValueError(f"clock skew must be a non-negative number of ms, not {clock_skew_ms}")
    count = len(names) * partitions
    offsets_us = clock_offsets_us(clock_skew_model, round(clock_skew_ms * 1000), count, random.Random(clock_skew_seed))
    peer_listeners = tls is not None and not tls.client_auth
    needed = 2 * count if peer_listeners else count
    if count > 0 and not 1 <= base_port <= 65536 - needed:
        raise ValueError(f"base port {base_port} leaves no room for {needed} consecutive ports")
    for what, first in (("metrics", metrics_base_port), ("RESP", resp_base_port if resp else 0)):
        if first and count > 0 and not 1 <= first <= 65536 - count:
            raise ValueError(f"{what} base port {first} leaves no room for {count} consecutive ports")
    servers = []
    for position in range(count):
        dc, partition = divmod(position, partitions)
        skew = offsets_us[position] / 1000
        servers.append(ServerConfig(
            names[dc], partition, join_address(host, base_port + position), round(skew, 6),
            metrics_port=metrics_base_port + position if metrics_base_port else 0,
            peer_address=join_address(host, base_port + count + position) if peer_listeners else None,
            resp_port=resp_base_port + position if resp and resp_base_port else 0,
        ))
    return ClusterConfig(
        dcs=names,
        partitions=partitions,
        servers=tuple(servers),
        wan_ms=matrix,
        cluster_id=cluster_id,
        protocol=protocol,
        tls=tls,
        heartbeat_interval_ms=heartbeat_interval_ms,
        stabilization_interval_ms=stabilization_interval_ms,
        idle_after_ms=idle_after_ms,
        idle_interval_ms=idle_interval_ms,
        resp=resp,
    )


def okapi_home() -> Path:
    """``$OKAPI_HOME`` if set, else ``~/.okapi``: where `okapi up` leaves the running cluster's config."""
    configured = os.environ.get("OKAPI_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".okapi"


def default_config_path() -> Path:
    return okapi_home() / "cluster.toml"


def load_default_cluster(alternatives: str = "--connect HOST:PORT") -> ClusterConfig:
    """The config of the cluster `okapi up` started last; ``ValueError`` with advice when none.
    ``alternatives`` names the caller's own flags that name a cluster another way (a hint must only
    name flags its command has)."""
    path = default_config_path()
    if not path.exists():
        raise ValueError(f"no local cluster config at {path}: start a cluster with `okapi up`, "
                         f"or name one with {alternatives}")
    return ClusterConfig.load(path)
