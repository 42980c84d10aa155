"""Reading a cluster config: TOML text into plain data, and plain data into the model's fields,
every value checked for its type with the entry named (``ValueError``). What the values must be
together (ranges, the servers' coverage, addresses) is ``validate``'s, run when the model is built.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from typing import Any

from okapikv.cluster.config.fields import CLUSTER, SERVER, TLS
from okapikv.cluster.config.servers import ServerConfig
from okapikv.cluster.connections import ConnectionSettings
from okapikv.cluster.reads import ReadLimits
from okapikv.core.config import MAX_DCS
from okapikv.tls import TlsConfig

#: Every key the top level may hold.
TOP_LEVEL_KEYS = frozenset({setting.name for setting in CLUSTER} | {"wan_ms", "servers", "tls", "connections", "reads"})


def toml_data(text: str, source: str) -> dict[str, Any]:
    """The TOML document ``text`` as data; ``ValueError`` naming ``source`` when it is not TOML."""
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as error:  # ValueError: an integer of too many digits
        raise ValueError(f"{source}: not valid TOML: {error}") from None
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise ValueError(f"{source}: not valid TOML: arrays or tables nested too deep") from None


def cluster_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The model's constructor arguments from a config's data, each value of its type."""
    unknown = sorted(set(data) - TOP_LEVEL_KEYS)
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
                 "max_clock_offset_ms", "auto_remove_after_s"):
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
    return {"dcs": dcs, "partitions": partitions, "servers": servers, "wan_ms": rows, **optional}


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
    unknown = sorted(set(entry) - {setting.name for setting in SERVER})
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
    unknown = sorted(set(entry) - {setting.name for setting in TLS})
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
