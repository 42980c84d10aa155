"""`okapi status`: every server of a cluster, whether it answers, what it does, how stale it is.

The topology comes from a running server (``--connect``, through ClusterInfo), a config file
(``--config``) or the local cluster `okapi up` started last. Each server is then asked for its
Stats (the same figures its Prometheus endpoint exports, without needing that endpoint to be on).
Per server the table shows operations (and their rate with ``--watch``), waits, the replication
queue, stored and garbage-collected versions, and the lag of its stable vector (the USV for Okapi,
the GSV for Cure, the GST for GentleRain) behind its own clock, per DC: how old a remote update
can be and still be invisible there. On a healthy cluster the lag is about the WAN delay plus a
stabilization round or two; a DC whose lag keeps growing is cut off (or one of its servers is
down). A server that does not answer is flagged DOWN.

One-shot by default; ``--watch [SECONDS]`` redraws the table in place until interrupted;
``--json`` prints one document (with ``--watch``, one compact document per line and refresh).
TLS: the config's ``[tls]`` section is used (its certificate as the client certificate), or
``--tls-ca/--tls-cert/--tls-key`` with ``--connect``.

Exit status: 0 when every server answers, 1 when any is down, 2 when no topology could be found.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc

from okapikv.cluster.config import ClusterConfig, load_default_cluster
from okapikv.cluster.probe import protocol_problem
from okapikv.tls import ClientTls, client_tls_from_args, open_channel
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.stats import NodeSnapshot, from_json, to_document

TIMEOUT_S = 2.0
DEFAULT_WATCH_S = 1.0


@dataclass(frozen=True, slots=True)
class Topology:
    cluster_id: str
    protocol: str
    dcs: tuple[str, ...]
    servers: tuple[tuple[str, int, str], ...]  # (dc name, partition, address)
    tls: ClientTls | None = None


def topology_from_config(config: ClusterConfig, tls: ClientTls | None = None) -> Topology:
    """The config's servers; ``tls`` overrides the identity taken from its ``[tls]`` section."""
    if tls is None and config.tls is not None:
        tls = config.tls.client_side()
    return Topology(
        config.cluster_id,
        config.protocol,
        config.dcs,
        tuple((s.dc, s.partition, s.address) for s in config.servers),
        tls,
    )


def topology_from_server(address: str, tls: ClientTls | None = None) -> Topology:
    problem = protocol_problem(address, tls)  # another protocol, or TLS: one line within 2 s
    if problem is not None:
        raise ValueError(problem)
    with open_channel(address, tls) as channel:
        stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
        try:
            info = stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=TIMEOUT_S)
        except grpc.RpcError as error:
            raise ValueError(f"cannot reach {address}: {error.code().name} {error.details()}") from None
    dcs = tuple(info.dc_names)
    ordered = sorted(info.servers, key=lambda s: (s.dc, s.partition))
    servers = tuple((dcs[s.dc], s.partition, s.address) for s in ordered)
    return Topology(info.cluster_id, info.protocol, dcs, servers, tls)


def resolve_topology(args: argparse.Namespace) -> Topology:
    tls = client_tls_from_args(getattr(args, "tls_ca", None), getattr(args, "tls_cert", None),
                               getattr(args, "tls_key", None), getattr(args, "tls_server_name", None))
    if args.connect:
        return topology_from_server(args.connect, tls)
    if args.config:
        return topology_from_config(ClusterConfig.load(args.config), tls)
    return topology_from_config(load_default_cluster("--connect HOST:PORT or --config FILE"), tls)


def summarize(snapshot: NodeSnapshot, dcs: tuple[str, ...]) -> dict[str, Any]:
    """The figures `okapi status` shows, from one server's Stats snapshot (``okapikv.wire.stats``)."""
    core = snapshot.core
    links = snapshot.links
    waits = core.waits
    return {
        "pid": snapshot.identity.pid or None,
        # None, or why it refuses clients: repairing ("fetching", "settling"), "checking" (a start
        # with no data waiting for its replicas) or "lost" (writes lost: restart it with --repair)
        "repairing": snapshot.stabilization.repairing,
        "protocol": snapshot.identity.protocol,
        "cluster_id": snapshot.identity.cluster_id,
        "clock_skew_ms": snapshot.clock.clock_skew_us / 1000,
        "keys": snapshot.store.keys,
        "versions": snapshot.store.versions,
        "versions_collected": snapshot.store.versions_collected,
        "parked": snapshot.requests.parked,
        "stable_lag_ms": dict(zip(dcs, snapshot.stabilization.stable_lag_ms, strict=False)),
        "operations": dict(core.operations),
        "operations_total": sum(core.operations.values()),
        "waits": {reason: {"count": w.count, "total_ms": w.total_us / 1000} for reason, w in waits.items()},
        "waits_total": sum(w.count for w in waits.values()),
        "wait_ms_total": sum(w.total_us for w in waits.values()) / 1000,
        "latency": to_document(snapshot.latency),
        "queue_messages": sum(link.queued + link.unacked for link in links.values()),
        "queue_bytes": sum(link.queued_bytes + link.unacked_bytes for link in links.values()),
        "links_down": sorted(label for label, link in links.items() if not link.connected),
        "replication_metadata_bytes": core.counters.get("replication_metadata_bytes", 0),
        "stabilization_bytes": core.counters.get("stabilization_bytes", 0),
        # durable servers (``okapikv.storage.commit_rates``): None for one in memory
        "fsyncs_per_s": None if snapshot.storage is None else snapshot.storage.fsyncs_per_s,
        # the membership (docs/protocol.md, "Membership"): its epoch and each DC's state
        **membership_figures(snapshot, dcs),
        "operations_per_fsync": None if snapshot.storage is None else snapshot.storage.operations_per_fsync,
    }


def membership_figures(snapshot: NodeSnapshot, dcs: tuple[str, ...]) -> dict[str, Any]:
    """The server's membership epoch and each DC's state, by name (every DC a member, epoch 0, from
    a server that does not report one; "unknown" for a DC a server has not grown to yet, seen
    through a grown config: `okapi dc join`)."""
    membership = snapshot.membership
    if membership is None or len(membership.dc_states) > len(dcs):
        return {"membership_epoch": 0, "dc_states": dict.fromkeys(dcs, "member")}
    states = (*membership.dc_states, *("unknown",) * (len(dcs) - len(membership.dc_states)))
    return {"membership_epoch": membership.membership_epoch, "dc_states": dict(zip(dcs, states, strict=True))}


def membership_line(records: list[dict[str, Any]]) -> str | None:
    """One line for the table: the newest membership the servers that answer hold, and how many
    hold an older one (a change still travelling, or a server that missed it)."""
    live = [record for record in records if record["reachable"] and "membership_epoch" in record]
    if not live:
        return None
    newest = max(live, key=lambda record: record["membership_epoch"])
    behind = sum(record["membership_epoch"] < newest["membership_epoch"] for record in live)
    states = ", ".join(f"{dc} {state}" for dc, state in newest["dc_states"].items())
    return (f"membership epoch {newest['membership_epoch']}: {states}"
            + (f" ({behind} server(s) still at an older epoch)" if behind else ""))


def query_server(dc: str, partition: int, address: str, dcs: tuple[str, ...],
                 tls: ClientTls | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"dc": dc, "partition": partition, "address": address}
    with open_channel(address, tls) as channel:
        stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
        try:
            snapshot = from_json(stub.Stats(pb.StatsRequest(), timeout=TIMEOUT_S).json)
        except grpc.RpcError as error:
            problem = protocol_problem(address, tls)  # clearer than gRPC's words for another protocol
            record.update(reachable=False, error=problem or f"{error.code().name}: {error.details()}")
            return record
        except ValueError as error:  # not a Stats document (json.JSONDecodeError is a ValueError)
            record.update(reachable=False, error=f"unreadable Stats: {error}")
            return record
    record.update(reachable=True, **summarize(snapshot, dcs))
    return record


def collect(topology: Topology) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(topology.servers)))) as pool:
        futures = [pool.submit(query_server, dc, p, address, topology.dcs, topology.tls)
                   for dc, p, address in topology.servers]
        return [future.result() for future in futures]


def add_rates(records: list[dict[str, Any]], previous: list[dict[str, Any]] | None, elapsed_s: float) -> None:
    """Operations per second since the previous refresh (``--watch``), per server."""
    if previous is None or elapsed_s <= 0:
        return
    before = {(r["dc"], r["partition"]): r for r in previous}
    for record in records:
        old = before.get((record["dc"], record["partition"]))
        if record["reachable"] and old is not None and old["reachable"]:
            record["operations_per_s"] = round((record["operations_total"] - old["operations_total"]) / elapsed_s, 1)


def _format_lag(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}"


def _format_bytes(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1 << 20:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1 << 20):.1f} MiB"


def _format_fsyncs(record: dict[str, Any]) -> str:
    """Commit fsyncs per second and the client operations sharing each, over the last 10 s
    (``okapikv.storage.commit_rates``); "-" for a server in memory."""
    rate = record.get("fsyncs_per_s")
    if rate is None:
        return "-"
    return f"{rate:.0f} ({record.get('operations_per_fsync', 0.0):.1f})"


def _state(record: dict[str, Any]) -> Any:
    from rich.text import Text

    if not record["reachable"]:
        return Text("DOWN", style="bold red")
    if record.get("repairing") == "lost":
        return Text("LOST: --repair", style="bold red")
    if record.get("repairing"):
        return Text(f"up, {record['repairing']}", style="yellow")
    if record["links_down"]:
        return Text("up, links down", style="yellow")
    return Text("up", style="green")


def _removed(record: dict[str, Any]) -> set[str]:
    """The DCs this server holds removed: their lag grows for ever and means nothing."""
    return {dc for dc, state in record.get("dc_states", {}).items() if state == "removed"}


def _full_table(topology: Topology, records: list[dict[str, Any]], watching: bool, title: Any) -> Any:
    """Every figure, with one lag column per DC (about 200 columns for 3 DCs). Names and addresses
    are ``Text``, never markup: ``[::1]:7100`` is an address, not a style."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    numeric = {"part", "pid", "ops", "ops/s", "waits", "wait ms", "queue", "versions", "GC'd", "keys", "fsync/s (ops)"}
    columns = ["DC", "part", "address", "pid", "state", "ops", *(["ops/s"] if watching else []), "waits", "wait ms",
               "queue", "versions", "GC'd", "fsync/s (ops)"]
    for column in columns:
        table.add_column(column, justify="right" if column in numeric else "left", no_wrap=True)
    for dc in topology.dcs:
        table.add_column(Text(f"lag {dc} ms"), justify="right", no_wrap=True)
    for record in records:
        if record["reachable"]:
            rate = [f"{record.get('operations_per_s', 0.0):.0f}"] if watching else []
            queue = f"{record['queue_messages']} ({_format_bytes(record['queue_bytes'])})"
            removed = _removed(record)
            lags = ["removed" if dc in removed else _format_lag(record["stable_lag_ms"].get(dc)) for dc in topology.dcs]
            row = [str(record["operations_total"]), *rate, str(record["waits_total"]),
                   f"{record['wait_ms_total']:.1f}", queue, str(record["versions"]), str(record["versions_collected"]),
                   _format_fsyncs(record), *lags]
        else:
            row = [*("-" for _ in columns[5:]), *("-" for _ in topology.dcs)]
        table.add_row(Text(record["dc"]), str(record["partition"]), Text(record["address"]),
                      str(record.get("pid") or "-"), _state(record), *row)
    return table


def _compact_table(topology: Topology, records: list[dict[str, Any]], watching: bool, title: Any) -> Any:
    """The figures that matter at a glance, for an 80-column terminal: the state first, then the
    operations, the replication queue and the worst lag over the DCs."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("server", no_wrap=True, overflow="ellipsis", max_width=20)
    table.add_column("pid", justify="right", no_wrap=True)
    table.add_column("state", no_wrap=True, min_width=len("up, links down"))
    table.add_column("ops", justify="right", no_wrap=True)
    if watching:
        table.add_column("ops/s", justify="right", no_wrap=True)
    table.add_column("queue", justify="right", no_wrap=True)
    if not watching:
        table.add_column("versions", justify="right", no_wrap=True)
    table.add_column("max lag ms", justify="right", no_wrap=True)
    for record in records:
        label = f"{record['dc']}/{record['partition']}"
        if record["reachable"]:
            removed = _removed(record)
            lags = [lag for dc, lag in record["stable_lag_ms"].items() if lag is not None and dc not in removed]
            figures = [str(record["operations_total"]),
                       *([f"{record.get('operations_per_s', 0.0):.0f}"] if watching else []),
                       str(record["queue_messages"]),
                       *([] if watching else [str(record["versions"])]),
                       _format_lag(max(lags) if lags else None)]
        else:
            figures = ["-"] * (len(table.columns) - 3)
        table.add_row(Text(label), str(record.get("pid") or "-"), _state(record), *figures)
    return table


class StatusView:
    """What `okapi status` draws: the servers table, a legend and the servers that are down.

    The layout is chosen when it is drawn, from the width available: the full table (one lag
    column per DC) when it fits unsqueezed, else a compact one that fits 80 columns, so that a
    narrow terminal never squeezes the state column (up / DOWN) to nothing."""

    def __init__(self, topology: Topology, records: list[dict[str, Any]], watching: bool = False) -> None:
        self.topology = topology
        self.records = records
        self.watching = watching

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement
        from rich.text import Text

        topology = self.topology
        title = Text(f"cluster {topology.cluster_id} ({topology.protocol})" + (" [TLS]" if topology.tls else ""))
        table = _full_table(topology, self.records, self.watching, title)
        unlimited = options.update(max_width=10_000)  # a measurement never exceeds the width it is given
        compact = Measurement.get(console, unlimited, table).maximum > options.max_width
        if compact:
            table = _compact_table(topology, self.records, self.watching, title)
        yield table
        membership = membership_line(self.records)
        if membership is not None:
            yield Text(membership)
        if topology.dcs:
            legend = ("lag: how far a server's stable vector trails its clock (ms), "
                      + ("the largest over the DCs (a wider terminal or --json shows each); " if compact else
                         "per DC; ")
                      + "queue: peer messages not yet acknowledged")
            yield Text(legend, style="dim")
        down = [f"{r['dc']}/{r['partition']} ({r['address']}: {r.get('error', '')})" for r in self.records
                if not r["reachable"]]
        if down:
            yield Text.assemble(("down: ", "bold red"), "; ".join(down))


def build_table(topology: Topology, records: list[dict[str, Any]], watching: bool = False) -> StatusView:
    """A rich renderable of the servers (``StatusView``: its layout follows the terminal's width)."""
    return StatusView(topology, records, watching)


def _document(topology: Topology, records: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "cluster_id": topology.cluster_id,
        "protocol": topology.protocol,
        "dcs": list(topology.dcs),
        "time_unix_s": round(time.time(), 3),
        "servers": records,
    }


def _console() -> Any:
    from rich.console import Console

    class ReaderAware(Console):
        """rich ends a write to a reader that went away with exit 1; `okapi` ends it with 141, as
        for SIGPIPE (``okapikv.cli``), whatever the command prints with."""

        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    console = ReaderAware()
    if not console.is_terminal:
        console = ReaderAware(width=240)  # a pipe or a file: never squeeze the columns
    return console


def _refreshes(topology: Topology, interval_s: float) -> Iterator[list[dict[str, Any]]]:
    """Records every ``interval_s`` seconds, with rates against the previous round."""
    previous: list[dict[str, Any]] | None = None
    previous_time = 0.0
    while True:
        started = time.monotonic()
        records = collect(topology)
        add_rates(records, previous, started - previous_time)
        previous, previous_time = records, started
        yield records
        time.sleep(max(0.0, interval_s - (time.monotonic() - started)))


def watch(topology: Topology, interval_s: float, as_json: bool) -> int:
    if as_json:
        try:
            for records in _refreshes(topology, interval_s):
                print(json.dumps(_document(topology, records), separators=(",", ":")), flush=True)
        except KeyboardInterrupt:
            return 0
    from rich.live import Live

    console = _console()
    try:
        if not console.is_terminal:
            # A pipe or a file cannot be redrawn in place (rich's Live would print only at the end):
            # each refresh whole, as it is taken, for `okapi status --watch 2 | tee status.log`.
            for records in _refreshes(topology, interval_s):
                console.print(build_table(topology, records, watching=True))
                console.file.flush()
        with Live(console=console, auto_refresh=False, transient=False) as live:
            for records in _refreshes(topology, interval_s):
                live.update(build_table(topology, records, watching=True), refresh=True)
    except KeyboardInterrupt:
        pass
    return 0


def run_status(args: argparse.Namespace) -> int:
    try:
        topology = resolve_topology(args)
    except ValueError as error:
        print(f"okapi status: {error}", file=sys.stderr)
        return 2
    interval_s = getattr(args, "watch", None)
    if interval_s is not None:
        if interval_s <= 0:
            print("okapi status: --watch needs a positive number of seconds", file=sys.stderr)
            return 2
        return watch(topology, interval_s, args.json)
    records = collect(topology)
    if args.json:
        print(json.dumps(_document(topology, records), indent=2))
    else:
        console = _console()
        console.print(build_table(topology, records))
    return 0 if all(record["reachable"] for record in records) else 1
