"""What a cluster config must be: every rule the model checks when it is built (``model``), each
problem named, all of them at once, so a typo fails at start-up instead of as a silent
misbehaviour later.

The rules read the config through ``Shape`` (what they need of it), so this module does not
depend on the model that calls it.
"""

from __future__ import annotations

import math
from typing import Protocol

from okapikv.cluster.config.addresses import join_address, split_address
from okapikv.cluster.config.fields import MESSAGE_OVERHEAD_BYTES
from okapikv.cluster.config.servers import ServerConfig
from okapikv.cluster.connections import ConnectionSettings
from okapikv.cluster.reads import ReadLimits
from okapikv.core.config import MAX_DCS
from okapikv.core.protocols import protocol_names
from okapikv.tls import TlsConfig


class Shape(Protocol):
    """What the rules read of a config (``model.ClusterConfig``)."""

    @property
    def dcs(self) -> tuple[str, ...]: ...
    @property
    def partitions(self) -> int: ...
    @property
    def servers(self) -> tuple[ServerConfig, ...]: ...
    @property
    def wan_ms(self) -> tuple[tuple[float, ...], ...]: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def heartbeat_interval_ms(self) -> float: ...
    @property
    def stabilization_interval_ms(self) -> float: ...
    @property
    def idle_after_ms(self) -> float: ...
    @property
    def idle_interval_ms(self) -> float: ...
    @property
    def max_clock_offset_ms(self) -> float: ...
    @property
    def auto_remove_after_s(self) -> float: ...
    @property
    def max_key_bytes(self) -> int: ...
    @property
    def max_value_bytes(self) -> int: ...
    @property
    def max_message_bytes(self) -> int: ...
    @property
    def tls(self) -> TlsConfig | None: ...
    @property
    def connections(self) -> ConnectionSettings: ...
    @property
    def reads(self) -> ReadLimits: ...
    @property
    def page_room_bytes(self) -> int: ...


def problems(config: Shape) -> list[str]:
    """Everything wrong with ``config``, each named ([] if nothing)."""
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
    quiet_ms = idle_interval if idle_after > 0 else config.heartbeat_interval_ms
    auto = config.auto_remove_after_s
    if not math.isfinite(auto) or auto < 0 or 0 < auto * 1000 < 3 * quiet_ms:
        problems.append(f"auto_remove_after_s must be 0 (off) or at least three heartbeat periods "
                        f"({3 * quiet_ms / 1000:g} s: the idle interval with idle pacing), not {auto}")
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
    return problems


def _server_problems(config: Shape) -> list[str]:
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
    config: Shape, server: ServerConfig, host: str, addresses: dict[str, ServerConfig]
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
