"""Prometheus metrics of one partition server, read at scrape time.

Why a custom collector: the core already counts what the paper measures (operations, waits by
reason, replication and stabilization bytes, ``okapikv.core.stats``) and the store counts its
versions; copying those into prometheus-client metric objects on every operation would add locks
and calls to the hot path for numbers nobody reads between scrapes. ``NodeCollector`` instead turns
the current counters into metric families when Prometheus asks, so the core pays nothing extra.

The one figure the core cannot know is how long a client waited for its reply, end to end through
the driver (parking included). ``LatencyHistograms`` records it per operation type with one
bisection and two additions per operation: no lock, because everything runs on the server's event
loop, the scrapes included.

That is also why the endpoint is a small asyncio HTTP responder on the server's own loop rather
than prometheus-client's threaded server: a scrape reads the core's dictionaries between two
protocol steps, never while one is half done. It serves ``GET /metrics`` (and ``/``), over TLS when
the cluster has a ``[tls]`` section (a client certificate required when ``client_auth`` is on).

Every sample carries the server's ``dc`` and ``partition`` labels, so one query can aggregate a
DC or the whole cluster without relabeling rules.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import ssl
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.process_collector import ProcessCollector

from okapikv.core.timestamps import physical_of

if TYPE_CHECKING:
    from okapikv.server.node import PartitionNode

log = logging.getLogger("okapikv.server.metrics")

# Upper bounds in seconds: from a loopback GET (~100 us) to a GentleRain RO-TX waiting out the
# furthest DC (hundreds of ms) and a stuck request (seconds).
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
# Core counters exported above under their own names (the rest go out as okapi_<name>_total).
_NAMED_CORE_COUNTERS = frozenset({
    "operations", "waits", "replicated_updates_sent", "replicated_updates_received", "replication_metadata_bytes",
    "replication_payload_bytes", "heartbeats_sent", "heartbeat_bytes", "stabilization_messages_sent",
    "stabilization_bytes", "gc_bytes", "snapshot_retries", "rejected_requests", "clock_offset_refusals",
    "clock_offset_clamps",
})
MAX_REQUEST_HEAD_BYTES = 8192
REQUEST_TIMEOUT_S = 5.0


class LatencyHistograms:
    """Cumulative latency histograms per operation type (Prometheus ``le`` buckets)."""

    __slots__ = ("bounds", "_counts", "_sums")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS_S) -> None:
        self.bounds = tuple(bounds)
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def observe(self, kind: str, seconds: float) -> None:
        counts = self._counts.get(kind)
        if counts is None:
            counts = self._counts[kind] = [0] * (len(self.bounds) + 1)
            self._sums[kind] = 0.0
        counts[bisect.bisect_left(self.bounds, seconds)] += 1  # bucket i: bounds[i-1] < s <= bounds[i]
        self._sums[kind] += seconds

    def kinds(self) -> list[str]:
        return sorted(self._counts)

    def count(self, kind: str) -> int:
        return sum(self._counts.get(kind, ()))

    def total_s(self, kind: str) -> float:
        return self._sums.get(kind, 0.0)

    def cumulative(self, kind: str) -> list[tuple[str, float]]:
        """``(le, count)`` pairs as Prometheus wants them, ending with ``+Inf``."""
        running = 0
        result: list[tuple[str, float]] = []
        counts = self._counts.get(kind, [0] * (len(self.bounds) + 1))
        for bound, count in zip((*self.bounds, float("inf")), counts, strict=True):
            running += count
            result.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
        return result

    def quantile_s(self, kind: str, quantile: float) -> float | None:
        """The upper bound of the bucket holding the ``quantile``; None without observations and
        +inf when it falls in the overflow bucket. Coarse on purpose: it is for `okapi status`."""
        counts = self._counts.get(kind)
        total = sum(counts) if counts else 0
        if not counts or total == 0:
            return None
        rank = quantile * total
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), counts, strict=True):
            running += count
            if running >= rank:
                return bound
        return float("inf")

    def summary(self) -> dict[str, dict[str, float | int | None]]:
        """Per type: count, mean, p50 and p99 (bucket bounds) in ms, for the Stats RPC."""
        result: dict[str, dict[str, float | int | None]] = {}
        for kind in self.kinds():
            count = self.count(kind)
            p50, p99 = self.quantile_s(kind, 0.5), self.quantile_s(kind, 0.99)
            result[kind] = {
                "count": count,
                "mean_ms": round(self.total_s(kind) / count * 1000, 3) if count else None,
                "p50_ms": None if p50 is None or p50 == float("inf") else p50 * 1000,
                "p99_ms": None if p99 is None or p99 == float("inf") else p99 * 1000,
            }
        return result


class LagSamples:
    """Per source DC, how often each remote visibility lag (in tenths of a ms, rounded up) was seen: sampled at every
    timer tick of the server (each stabilization period under Okapi), cumulative.

    Why here and not by polling ``Stats``: a poller at 20 Hz got ~70 samples per pair in a 5 s
    window, so its "p99" was the maximum; a tick samples every 5 ms (~1,000 per pair) at no RPC
    cost. Read twice and subtract (``okapikv.bench.fast``) for a window's distribution.
    """

    __slots__ = ("counts",)

    def __init__(self, num_dcs: int) -> None:
        self.counts: list[dict[int, int]] = [{} for _ in range(num_dcs)]

    def observe(self, now_us: int, stable: Sequence[int], own_dc: int) -> None:
        for source, entry in enumerate(stable):
            if source != own_dc and entry:
                lag = -((physical_of(entry) - now_us) // 100)  # tenths of a ms, rounded up: never flatters
                counts = self.counts[source]
                counts[lag] = counts.get(lag, 0) + 1

    def snapshot(self) -> list[dict[str, int]]:
        """JSON-ready: per source DC, ``{lag in tenths of a ms: samples}`` (string keys)."""
        return [{str(lag): count for lag, count in sorted(counts.items())} for counts in self.counts]


class NodeCollector:
    """Turns a running ``PartitionNode``'s counters into metric families at scrape time."""

    def __init__(self, node: PartitionNode) -> None:
        self.node = node
        self._label_names = ["dc", "partition"]
        self._labels = [node.config.dcs[node.id.dc], str(node.id.partition)]

    # prometheus-client calls ``describe`` when registering (to catch name clashes); without it,
    # registration would run ``collect`` once before the server has started.
    def describe(self) -> Iterable[Metric]:
        return []

    def _counter(self, name: str, documentation: str, value: float, unit: str = "") -> CounterMetricFamily:
        family = CounterMetricFamily(name, documentation, labels=self._label_names, unit=unit)
        family.add_metric(self._labels, value)
        return family

    def _gauge(self, name: str, documentation: str, value: float, unit: str = "") -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, documentation, labels=self._label_names, unit=unit)
        family.add_metric(self._labels, value)
        return family

    def collect(self) -> Iterator[Metric]:
        node = self.node
        core = node.core
        stats = core.stats
        labels = self._labels
        names = self._label_names

        info = GaugeMetricFamily("okapi_server_info", "Constant 1; what this server is.",
                                 labels=[*names, "cluster_id", "protocol", "address"])
        info.add_metric([*labels, node.config.cluster_id, node.config.protocol, node.server_config.address], 1)
        yield info

        operations = CounterMetricFamily("okapi_operations", "Client operations handled by the core, by type.",
                                         labels=[*names, "type"])
        for kind, count in sorted(stats.operations.items()):
            operations.add_metric([*labels, kind], count)
        yield operations

        latency = HistogramMetricFamily(
            "okapi_operation_latency_seconds",
            "Time from a request reaching the server to its reply, parking included, by type.",
            labels=[*names, "type"],
        )
        histograms = node.latency
        for kind in histograms.kinds():
            latency.add_metric([*labels, kind], histograms.cumulative(kind), histograms.total_s(kind))
        yield latency

        waits = CounterMetricFamily("okapi_waits", "Requests that waited (parked), by reason.",
                                    labels=[*names, "reason"])
        wait_time = CounterMetricFamily("okapi_wait_seconds", "Total time requests waited, by reason.",
                                        labels=[*names, "reason"])
        wait_max = GaugeMetricFamily("okapi_wait_max_seconds", "Longest single wait so far, by reason.",
                                     labels=[*names, "reason"])
        for reason, wait in sorted(stats.waits.items()):
            waits.add_metric([*labels, reason], wait.count)
            wait_time.add_metric([*labels, reason], wait.total_us / 1e6)
            wait_max.add_metric([*labels, reason], wait.max_us / 1e6)
        yield from (waits, wait_time, wait_max)

        yield from self._links()

        yield self._counter("okapi_replicated_updates_sent", "Updates replicated to peers (each counted once).",
                            stats.replicated_updates_sent)
        yield self._counter("okapi_replicated_updates_received", "Updates received from peers.",
                            stats.replicated_updates_received)
        yield self._counter("okapi_replication_metadata_bytes", "Dependency metadata bytes sent with updates.",
                            stats.replication_metadata_bytes)
        yield self._counter("okapi_replication_payload_bytes", "Key and value bytes sent with updates.",
                            stats.replication_payload_bytes)
        yield self._counter("okapi_heartbeats_sent", "Heartbeats sent to peers.", stats.heartbeats_sent)
        yield self._counter("okapi_heartbeat_bytes", "Heartbeat bytes sent to peers.", stats.heartbeat_bytes)
        yield self._counter("okapi_stabilization_messages", "Stabilization messages sent (GSV and USV rounds).",
                            stats.stabilization_messages_sent)
        yield self._counter("okapi_stabilization_bytes", "Stabilization bytes sent (GSV and USV rounds).",
                            stats.stabilization_bytes)
        yield self._counter("okapi_gc_metadata_bytes", "Bytes of garbage-collection metadata sent.",
                            stats.gc_bytes)

        lag = GaugeMetricFamily(
            "okapi_usv_lag_milliseconds",
            "This server's clock minus its stable vector's entry for each DC (USV for Okapi, GSV for Cure, "
            "GST for GentleRain): how old a remote update may be and still be invisible here.",
            labels=[*names, "source_dc"],
        )
        now_us = node.clock.now_us()
        for index, entry in enumerate(core.stable):
            if entry:  # 0: nothing known from that DC yet, no meaningful lag
                lag.add_metric([*labels, node.config.dcs[index]], (now_us - physical_of(entry)) / 1000)
        yield lag

        yield self._gauge("okapi_versions_stored", "Versions held by the multi-version store.",
                          core.store.version_count)
        yield self._counter("okapi_versions_collected", "Versions removed by garbage collection.",
                            core.store.collected_count)
        yield self._gauge("okapi_keys", "Keys with at least one version.", len(core.store))
        yield self._gauge("okapi_parked_requests", "Requests waiting for the clock or the stable vector.",
                          core.parked_count)
        yield self._gauge("okapi_pending_reads", "RO-TX and SCAN reads this server coordinates, not answered yet.",
                          core.pending_reads)
        yield self._gauge("okapi_snapshot_leases", "Paged SCANs' snapshots held for their next page.",
                          core.snapshot_leases)
        yield self._counter("okapi_rejected_requests", "Requests the core refused (invalid arguments).",
                            stats.rejected_requests)
        yield self._counter("okapi_snapshot_retries", "Snapshot reads restarted.", stats.snapshot_retries)
        yield from self._clock(now_us)
        for name, figure in stats.as_dict().items():
            # Counters the core gains later (catch-up, progress, ...) appear without an edit here.
            if name not in _NAMED_CORE_COUNTERS and isinstance(figure, int) and not isinstance(figure, bool):
                yield self._counter(f"okapi_{name}", f"Core counter {name} (okapikv.core.stats).", figure)
        yield self._counter("okapi_client_requests", "Client requests received by the driver.",
                            node.client_requests)
        yield self._counter("okapi_peer_batches_received", "Peer batches received.", node.peer_batches_received)
        yield self._counter("okapi_handler_errors", "Unexpected failures in handlers (see the log).",
                            node.handler_errors)
        yield from self._input()

    def _input(self) -> Iterator[Metric]:
        """The input guard (``okapikv.server.budgets``): partial-frame bytes held, open stream
        connections, and the connections it closed, by reason."""
        guard = self.node.input_guard
        yield self._gauge("okapi_input_partial_bytes", "Bytes announced by partially received frames, all "
                          "connections (the input budget's use).", guard.budget.in_use)
        yield self._gauge("okapi_input_budget_bytes", "The input budget: most bytes partial frames may hold.",
                          guard.budget.limit)
        yield self._gauge("okapi_input_connections", "Open connections on the native port.", len(guard.connections))
        closed = CounterMetricFamily("okapi_input_closed", "Connections closed by the input guard, by reason.",
                                     labels=[*self._label_names, "reason"])
        for reason, count in sorted(guard.closed.items()):
            closed.add_metric([*self._labels, reason], count)
        yield closed

    def _clock(self, now_us: int) -> Iterator[Metric]:
        """The maximum clock offset's counters and the clock figures to alert on (docs/operations.md,
        "Clocks: the maximum offset")."""
        node = self.node
        core = node.core
        yield self._counter("okapi_clock_offset_refusals",
                            "Client requests and snapshot slices refused (OUT_OF_RANGE): they reached more than the "
                            "maximum clock offset ahead of this server's clock.", core.stats.clock_offset_refusals)
        yield self._counter("okapi_clock_offset_clamps",
                            "Peer timestamps (updates, heartbeats, catch-up answers) more than the maximum clock "
                            "offset ahead of this server's clock, whose watermark was held back.",
                            core.stats.clock_offset_clamps)
        yield self._gauge("okapi_max_clock_offset_seconds", "The cluster's configured maximum clock offset.",
                          core.config.max_clock_offset_us / 1e6)
        yield self._gauge("okapi_hlc_ahead_seconds",
                          "How far this server's hybrid clock (its last timestamp) is ahead of its physical clock "
                          "(0 when not ahead); above the maximum offset its writes are held back elsewhere.",
                          max(0, physical_of(core.hlc) - now_us) / 1e6)
        yield self._gauge("okapi_clock_ahead_at_start_seconds",
                          "How far the recovered clock bound was ahead of the clock when this server started "
                          "(a clock stepped back since the last run).", node.clock_ahead_at_start_us / 1e6)

    def _links(self) -> Iterator[Metric]:
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
        for destination, link in sorted(self.node.links().items()):
            labels = [*self._labels, self.node.config.dcs[destination.dc], str(destination.partition)]
            queue_messages.add_metric([*labels, "pending"], link.queued)
            queue_messages.add_metric([*labels, "unacked"], link.unacked)
            queue_bytes.add_metric([*labels, "pending"], link.queued_bytes)
            queue_bytes.add_metric([*labels, "unacked"], link.unacked_bytes)
            connected.add_metric(labels, 1 if link.connected else 0)
            sent.add_metric(labels, link.stats.sent_messages)
            resent.add_metric(labels, link.stats.resent_messages)
            failures.add_metric(labels, link.stats.failures)
            dead.add_metric(labels, link.stats.dead)
            probes.add_metric(labels, link.stats.probes)
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
