"""`okapi status`: every server of a cluster, whether it answers, and how stale its stable vector is.

The topology comes from a running server (``--connect``, through ClusterInfo), a config file
(``--config``) or the local cluster `okapi up` started last. Each server is then asked for its
Stats; the interesting figure is the lag of its stable vector (the USV for Okapi, the GSV for Cure,
the GST for GentleRain) behind its own clock, per DC: how old a remote update can be and still be
invisible there. On a healthy cluster it is about the WAN delay plus a stabilization round or two;
a DC whose lag keeps growing is cut off (or one of its servers is down).

Exit status: 0 when every server answers, 1 when any is down, 2 when no topology could be found.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc

from okapikv.cluster.config import ClusterConfig, load_default_cluster
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class Topology:
    cluster_id: str
    protocol: str
    dcs: tuple[str, ...]
    servers: tuple[tuple[str, int, str], ...]  # (dc name, partition, address)


def topology_from_config(config: ClusterConfig) -> Topology:
    return Topology(
        config.cluster_id,
        config.protocol,
        config.dcs,
        tuple((s.dc, s.partition, s.address) for s in config.servers),
    )


def topology_from_server(address: str) -> Topology:
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
        try:
            info = stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=TIMEOUT_S)
        except grpc.RpcError as error:
            raise ValueError(f"cannot reach {address}: {error.code().name} {error.details()}") from None
    dcs = tuple(info.dc_names)
    ordered = sorted(info.servers, key=lambda s: (s.dc, s.partition))
    servers = tuple((dcs[s.dc], s.partition, s.address) for s in ordered)
    return Topology(info.cluster_id, info.protocol, dcs, servers)


def resolve_topology(args: argparse.Namespace) -> Topology:
    if args.connect:
        return topology_from_server(args.connect)
    if args.config:
        return topology_from_config(ClusterConfig.load(args.config))
    return topology_from_config(load_default_cluster())


def query_server(dc: str, partition: int, address: str, dcs: tuple[str, ...]) -> dict[str, Any]:
    record: dict[str, Any] = {"dc": dc, "partition": partition, "address": address}
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
        try:
            stats = json.loads(stub.Stats(pb.StatsRequest(), timeout=TIMEOUT_S).json)
        except grpc.RpcError as error:
            record.update(reachable=False, error=f"{error.code().name}: {error.details()}")
            return record
    lags = stats.get("stable_lag_ms", [])
    record.update(
        reachable=True,
        protocol=stats.get("protocol"),
        cluster_id=stats.get("cluster_id"),
        clock_skew_ms=stats.get("clock_skew_us", 0) / 1000,
        keys=stats.get("keys"),
        parked=stats.get("parked"),
        stable_lag_ms=dict(zip(dcs, lags, strict=False)),
        operations=stats.get("core", {}).get("operations", {}),
    )
    return record


def collect(topology: Topology) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(topology.servers)))) as pool:
        futures = [pool.submit(query_server, dc, p, address, topology.dcs) for dc, p, address in topology.servers]
        return [future.result() for future in futures]


def _format_lag(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}"


def print_table(topology: Topology, records: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"cluster {topology.cluster_id} ({topology.protocol})")
    for column in ("DC", "part", "address", "protocol", "state", "keys", "parked"):
        table.add_column(column, justify="right" if column in ("part", "keys", "parked") else "left", no_wrap=True)
    for dc in topology.dcs:
        table.add_column(f"lag {dc} ms", justify="right", no_wrap=True)
    for record in records:
        if record["reachable"]:
            lags = [_format_lag(record["stable_lag_ms"].get(dc)) for dc in topology.dcs]
            row = [record["protocol"], "[green]up[/green]", str(record["keys"]), str(record["parked"]), *lags]
        else:
            row = ["-", "[bold red]DOWN[/bold red]", "-", "-", *("-" for _ in topology.dcs)]
        table.add_row(record["dc"], str(record["partition"]), record["address"], *row)
    console = Console()
    if not console.is_terminal:
        console = Console(width=240)  # a pipe or a file: never squeeze the columns
    console.print(table)
    if topology.dcs:
        console.print("lag: how far each server's stable vector trails its clock, per DC (ms)")
    down = [f"{r['dc']}/{r['partition']}" for r in records if not r["reachable"]]
    if down:
        Console(stderr=True).print(f"[bold red]down:[/bold red] {', '.join(down)}")


def run_status(args: argparse.Namespace) -> int:
    try:
        topology = resolve_topology(args)
    except ValueError as error:
        print(f"okapi status: {error}", file=sys.stderr)
        return 2
    records = collect(topology)
    if args.json:
        document = {
            "cluster_id": topology.cluster_id,
            "protocol": topology.protocol,
            "dcs": list(topology.dcs),
            "servers": records,
        }
        print(json.dumps(document, indent=2))
    else:
        print_table(topology, records)
    return 0 if all(record["reachable"] for record in records) else 1
