"""Prometheus metrics of one partition server, read at scrape time.

Why a custom collector: the core already counts what the paper measures (operations, waits by
reason, replication and stabilization bytes, ``okapikv.core.stats``) and the store counts its
versions; copying those into prometheus-client metric objects on every operation would add locks
and calls to the hot path for numbers nobody reads between scrapes. ``NodeCollector`` instead takes
the node's snapshot when Prometheus asks (``PartitionNode.snapshot``, ``okapikv.wire.stats``) and
renders it, so the core pays nothing extra: every field the snapshot declares with ``counter`` or
``gauge`` is exported under its name, the core's counters each as ``okapi_<name>_total`` (a few
under the names in ``CORE_COUNTERS``), and the labelled families here (per operation type, wait
reason, remote DC, outgoing link, input-guard reason). The latency histograms and lag samples the
node updates as it runs are ``okapikv.server.instruments``.

That is also why the endpoint is a small asyncio HTTP responder on the server's own loop rather
than prometheus-client's threaded server: a scrape reads the core's dictionaries between two
protocol steps, never while one is half done. It serves ``GET /metrics`` (and ``/``), over TLS when
the cluster has a ``[tls]`` section (a client certificate required when ``client_auth`` is on).

Every sample carries the server's ``dc`` and ``partition`` labels, so one query can aggregate a
DC or the whole cluster without relabeling rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Iterable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.process_collector import ProcessCollector

from okapikv.server.node import PartitionNode
from okapikv.wire.stats import LinkFigures, NodeSnapshot, exported

log = logging.getLogger("okapikv.server.metrics")

#: Core counters exported under a name and help of their own (the others as okapi_<name>_total,
#: "Core counter <name>"). Names follow Prometheus's conventions: base units (seconds, bytes), a
#: counter's name ends in ``_total`` (prometheus-client appends it), no precomputed ratios.
CORE_COUNTERS: dict[str, tuple[str, str]] = {
    "replicated_updates_sent": ("okapi_replicated_updates_sent", "Updates replicated to peers (each counted once)."),
    "replicated_updates_received": ("okapi_replicated_updates_received", "Updates received from peers."),
    "replication_metadata_bytes": ("okapi_replication_metadata_bytes", "Dependency metadata bytes sent with updates."),
    "replication_payload_bytes": ("okapi_replication_payload_bytes", "Key and value bytes sent with updates."),
    "heartbeats_sent": ("okapi_heartbeats_sent", "Heartbeats sent to peers."),
    "heartbeat_bytes": ("okapi_heartbeat_bytes", "Heartbeat bytes sent to peers."),
    "stabilization_messages_sent": ("okapi_stabilization_messages",
                                    "Stabilization messages sent (GSV and USV rounds)."),
    "stabilization_bytes": ("okapi_stabilization_bytes", "Stabilization bytes sent (GSV and USV rounds)."),
    "gc_bytes": ("okapi_gc_metadata_bytes", "Bytes of garbage-collection metadata sent."),
    "rejected_requests": ("okapi_rejected_requests", "Requests the core refused (invalid arguments)."),
    "snapshot_retries": ("okapi_snapshot_retries", "Snapshot reads restarted."),
    "clock_offset_refusals": (
        "okapi_clock_offset_refusals", "Client requests and snapshot slices refused (OUT_OF_RANGE): they reached more "
        "than the maximum clock offset ahead of this server's clock."),
    "clock_offset_clamps": (
        "okapi_clock_offset_clamps", "Peer timestamps (updates, heartbeats, catch-up answers) more than the maximum "
        "clock offset ahead of this server's clock, whose watermark was held back."),
    "snapshot_read_stall_us": (
        "okapi_snapshot_read_stall_seconds", "Time snapshot reads waited for their snapshot to become readable."),
}
#: Core counters kept in microseconds, exported in seconds.
MICROSECOND_COUNTERS = frozenset({"snapshot_read_stall_us"})
MAX_REQUEST_HEAD_BYTES = 8192
REQUEST_TIMEOUT_S = 5.0


class NodeCollector:
    """Renders a running ``PartitionNode``'s snapshot as metric families at scrape time."""

    def __init__(self, node: PartitionNode) -> None:
        self.node = node
        self._label_names = ["dc", "partition"]
        self._labels = [node.config.dcs[node.id.dc], str(node.id.partition)]

    # prometheus-client calls ``describe`` when registering (to catch name clashes); without it,
    # registration would run ``collect`` once before the server has started.
    def describe(self) -> Iterable[Metric]:
        return []

    def _family(self, kind: str, name: str, documentation: str, value: float) -> Metric:
        family_type = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        family = family_type(name, documentation, labels=self._label_names)
        family.add_metric(self._labels, value)
        return family

    def collect(self) -> Iterator[Metric]:
        snapshot = self.node.snapshot()
        labels = self._labels
        names = self._label_names
        identity = snapshot.identity

        info = GaugeMetricFamily("okapi_server_info", "Constant 1; what this server is.",
                                 labels=[*names, "cluster_id", "protocol", "address"])
        info.add_metric([*labels, identity.cluster_id, identity.protocol, identity.address], 1)
        yield info

        operations = CounterMetricFamily("okapi_operations", "Client operations handled by the core, by operation.",
                                         labels=[*names, "operation"])
        for kind, count in sorted(snapshot.core.operations.items()):
            operations.add_metric([*labels, kind], count)
        yield operations

        latency = HistogramMetricFamily(
            "okapi_operation_latency_seconds",
            "Time from a request reaching the server to its reply, parking included, by operation.",
            labels=[*names, "operation"],
        )
        for kind, figures in snapshot.latency.items():
            latency.add_metric([*labels, kind], list(figures.buckets), figures.total_s)
        yield latency

        waits = CounterMetricFamily("okapi_waits", "Requests that waited (parked), by reason.",
                                    labels=[*names, "reason"])
        wait_time = CounterMetricFamily("okapi_wait_seconds", "Total time requests waited, by reason.",
                                        labels=[*names, "reason"])
        for reason, wait in sorted(snapshot.core.waits.items()):
            waits.add_metric([*labels, reason], wait.count)
            wait_time.add_metric([*labels, reason], wait.total_us / 1e6)
        yield from (waits, wait_time)

        yield from self._links(snapshot.links.values())

        lag = GaugeMetricFamily(
            "okapi_stable_lag_seconds",
            "This server's clock minus its stable vector's entry for each DC (USV for Okapi, GSV for Cure, "
            "GST for GentleRain): how old a remote update may be and still be invisible here.",
            labels=[*names, "source_dc"],
        )
        dcs = self.node.config.dcs
        for index, lag_ms in enumerate(snapshot.stabilization.stable_lag_ms):
            if lag_ms is not None:  # nothing known from that DC yet: no meaningful lag
                lag.add_metric([*labels, dcs[index]], lag_ms / 1000)
        yield lag

        for name, count in snapshot.core.counters.items():
            metric, documentation = CORE_COUNTERS.get(
                name, (f"okapi_{name}", f"Core counter {name} (okapikv.core.stats)."))
            yield self._family("counter", metric, documentation, count / 1e6 if name in MICROSECOND_COUNTERS else count)
        for spec, name, value in exported(snapshot):
            yield self._family(spec.kind, spec.name or f"okapi_{name}", spec.help, value)
        yield from self._input_closed(snapshot)

    def _input_closed(self, snapshot: NodeSnapshot) -> Iterator[Metric]:
        """The connections the input guard (``okapikv.server.budgets``) closed, by reason."""
        closed = CounterMetricFamily("okapi_input_closed", "Connections closed by the input guard, by reason.",
                                     labels=[*self._label_names, "reason"])
        for reason, count in sorted(snapshot.input.closed.items()):
            closed.add_metric([*self._labels, reason], count)
        yield closed

    def _links(self, links: Iterable[LinkFigures]) -> Iterator[Metric]:
        """Per outgoing peer link: the replication queue (messages waiting for release or for an
        acknowledgement, and their bytes), whether it is connected, and its traffic."""
        names = [*self._label_names, "peer_dc", "peer_partition"]
        queue_messages = GaugeMetricFamily(
            "okapi_replication_queue_messages",
            "Peer messages not yet acknowledged: pending (not sent yet, WAN delay included) or unacked.",
            labels=[*names, "state"])
        queue_bytes = GaugeMetricFamily("okapi_replication_queue_bytes", "Bytes of the messages in the queue.",
                                        labels=[*names, "state"])
        connected = GaugeMetricFamily("okapi_peer_link_up", "1 while the link's stream is acknowledged.",
                                      labels=names)
        sent = CounterMetricFamily("okapi_peer_messages_sent", "Messages sent on the link.", labels=names)
        resent = CounterMetricFamily("okapi_peer_messages_resent", "Messages resent after a reconnect.",
                                     labels=names)
        failures = CounterMetricFamily("okapi_peer_link_failures", "Broken or failed link streams.", labels=names)
        dead = CounterMetricFamily("okapi_peer_link_dead", "Link connections found dead by the acknowledgement "
                                   "timeout (silent peer or network).", labels=names)
        probes = CounterMetricFamily("okapi_peer_link_probes", "Liveness probes sent on the link.", labels=names)
        for link in links:
            labels = [*self._labels, link.peer_dc, str(link.peer_partition)]
            queue_messages.add_metric([*labels, "pending"], link.queued)
            queue_messages.add_metric([*labels, "unacked"], link.unacked)
            queue_bytes.add_metric([*labels, "pending"], link.queued_bytes)
            queue_bytes.add_metric([*labels, "unacked"], link.unacked_bytes)
            connected.add_metric(labels, 1 if link.connected else 0)
            sent.add_metric(labels, link.sent_messages)
            resent.add_metric(labels, link.resent_messages)
            failures.add_metric(labels, link.failures)
            dead.add_metric(labels, link.dead)
            probes.add_metric(labels, link.probes)
        yield from (queue_messages, queue_bytes, connected, sent, resent, failures, dead, probes)


def registry_for(node: PartitionNode) -> CollectorRegistry:
    """The node's metrics plus the process's (CPU, memory, file descriptors, Python GC)."""
    registry = CollectorRegistry()
    registry.register(NodeCollector(node))
    ProcessCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class MetricsServer:
    """``GET /metrics`` over HTTP/1.1 (one request per connection), served on the event loop."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, ssl_context: ssl.SSLContext | None) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self._server: asyncio.Server | None = None
        self.scrapes = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, ssl=self.ssl_context,
                                                  reuse_address=True)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=1.0)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=REQUEST_TIMEOUT_S)
            status, body, content_type = self._respond(head)
            header = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                      f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
            method = head.split(b" ", 1)[0]
            writer.write(header if method == b"HEAD" else header + body)
            await asyncio.wait_for(writer.drain(), timeout=REQUEST_TIMEOUT_S)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ssl.SSLError):
            pass  # a slow, broken or non-TLS client: just drop the connection
        except Exception:
            log.exception("metrics request failed")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), timeout=1.0)

    def _respond(self, head: bytes) -> tuple[str, bytes, str]:
        if len(head) > MAX_REQUEST_HEAD_BYTES:
            return "431 Request Header Fields Too Large", b"", "text/plain"
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3:
            return "400 Bad Request", b"bad request\n", "text/plain"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", b"GET only\n", "text/plain"
        if target not in (b"/metrics", b"/"):
            return "404 Not Found", b"metrics are at /metrics\n", "text/plain"
        self.scrapes += 1
        return "200 OK", generate_latest(self.registry), CONTENT_TYPE_LATEST
