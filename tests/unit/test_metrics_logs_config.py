"""Observability and config tests that need no network: latency histograms, the metrics collector,
single-line log events, and the config's ``[tls]``, ``metrics_port`` and ``peer_address``."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.core.messages import PutRequest, Session
from okapikv.server.instruments import LagSamples, LatencyHistograms
from okapikv.server.logs import ServerLogFormatter
from okapikv.server.metrics import registry_for
from okapikv.server.node import PartitionNode
from okapikv.tls import ClientTls, TlsConfig, client_tls_from_args

# ---------------------------------------------------------------- latency histograms


def test_histogram_buckets_are_inclusive_upper_bounds() -> None:
    histograms = LatencyHistograms(bounds=(0.001, 0.01))
    for seconds in (0.0005, 0.001, 0.002, 0.01, 5.0):
        histograms.observe("get", seconds)
    assert histograms.cumulative("get") == [("0.001", 2.0), ("0.01", 4.0), ("+Inf", 5.0)]
    assert histograms.count("get") == 5 and histograms.total_s("get") == pytest.approx(5.0135)
    assert histograms.quantile_s("get", 0.5) == 0.01
    assert histograms.quantile_s("get", 1.0) == float("inf")
    assert histograms.quantile_s("put", 0.5) is None
    summary = histograms.figures()["get"]
    assert summary.count == 5 and summary.p50_ms == 10.0 and summary.p99_ms is None


def test_lag_samples_count_each_remote_dcs_lag_in_tenths_of_a_ms_rounded_up() -> None:
    from okapikv.core.timestamps import pack

    samples = LagSamples(3)
    now_us = 1_000_000
    samples.observe(now_us, (pack(now_us - 80_000), pack(now_us), 0), own_dc=1)  # DC 2: nothing yet
    samples.observe(now_us, (pack(now_us - 80_010), pack(now_us), pack(now_us - 5)), own_dc=1)
    assert samples.snapshot() == [{"800": 1, "801": 1}, {}, {"1": 1}]  # 80.01 ms -> 80.1; 5 us -> 0.1


def test_collector_reads_the_core_at_scrape_time() -> None:
    config = local_cluster(dcs=("solo",), partitions=1, wan="off")
    node = PartitionNode(config, 0, 0)
    registry = registry_for(node)
    before = _samples(generate_latest(registry).decode())
    assert ("okapi_operations_total", ()) not in before
    for index in range(3):
        node.run_core([PutRequest(index + 1, b"k%d" % index, b"v", Session((0,), 0))])
    node.latency.observe("put", 0.002)
    after = _samples(generate_latest(registry).decode())
    labels = (("dc", "solo"), ("partition", "0"))
    put = (("dc", "solo"), ("operation", "put"), ("partition", "0"))  # labels sorted by name
    assert after[("okapi_operations_total", put)] == 3
    assert after[("okapi_versions_stored", labels)] == 3
    assert after[("okapi_keys", labels)] == 3
    assert after[("okapi_operation_latency_seconds_count", put)] == 1
    bucket = tuple(sorted((*labels, ("le", "0.0025"), ("operation", "put"))))
    assert after[("okapi_operation_latency_seconds_bucket", bucket)] == 1
    # No stabilization round has run: no stable entry, so no lag sample (rather than a bogus one).
    assert not any(name == "okapi_stable_lag_seconds" for name, _ in after)


def test_clock_offset_refusals_are_counted_exported_and_logged_at_most_once_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    from okapikv.core.timestamps import pack

    config = local_cluster(dcs=("solo",), partitions=1, wan="off")
    node = PartitionNode(config, 0, 0)
    registry = registry_for(node)
    hour_ahead = pack(node.clock.now_us() + 3_600_000_000)
    with caplog.at_level(logging.WARNING, logger="okapikv.server"):
        for index in range(3):
            node.run_core([PutRequest(index + 1, b"k", b"v", Session((0,), hour_ahead))])
    assert isinstance(node.core.last_clock_offset, tuple)
    lines = [record.getMessage() for record in caplog.records if "CLOCK OFFSET EXCEEDED" in record.getMessage()]
    assert len(lines) == 1, lines  # the next report waits for CLOCK_LOG_INTERVAL_S
    assert "1 request(s) or slice(s) refused" in lines[0] and "maximum clock offset 500 ms" in lines[0]
    assert "ms ahead of this server's clock" in lines[0]
    samples = _samples(generate_latest(registry).decode())
    labels = (("dc", "solo"), ("partition", "0"))
    assert samples[("okapi_clock_offset_refusals_total", labels)] == 3
    assert samples[("okapi_clock_offset_clamps_total", labels)] == 0
    assert samples[("okapi_max_clock_offset_seconds", labels)] == 0.5
    assert samples[("okapi_hlc_ahead_seconds", labels)] == 0.0  # nothing was adopted
    assert samples[("okapi_clock_ahead_at_start_seconds", labels)] == 0.0
    assert ("okapi_operations_total", tuple(sorted((*labels, ("operation", "put"))))) not in samples
    assert node.core.stats.rejected_requests == 0


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


# ---------------------------------------------------------------- log events


def _record(message: str, *, exc: bool = False, **extra: object) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom\nsecond line")
        except ValueError:
            exc_info = sys.exc_info()
    record = logging.LogRecord("okapikv.server", logging.WARNING, __file__, 1, message, (), exc_info)
    record.__dict__.update(extra)
    return record


def test_text_log_lines_are_single_lines_naming_the_server() -> None:
    formatter = ServerLogFormatter("text", "us east", 3)
    line = formatter.format(_record("link\nbroke", exc=True, event="link_broken", peer="10.0.0.2:7100"))
    assert "\n" not in line
    assert 'dc="us east" partition=3 link\\nbroke event=link_broken peer=10.0.0.2:7100' in line
    assert "exception=" in line and "second line" in line
    assert line.split(" ")[1:3] == ["WARNING", "okapikv.server"]


def test_json_log_lines_carry_fields() -> None:
    formatter = ServerLogFormatter("json", "oregon", 0)
    line = formatter.format(_record("refused %s", exc=True, event="peer_refused", reason="cluster id"))
    assert "\n" not in line
    event = json.loads(line)
    assert (event["dc"], event["partition"], event["level"], event["event"]) == ("oregon", 0, "WARNING",
                                                                                  "peer_refused")
    assert event["reason"] == "cluster id" and "ValueError" in event["exception"]
    assert event["time"].endswith("Z")
    with pytest.raises(ValueError, match="log format"):
        ServerLogFormatter("xml", "oregon", 0)


# ---------------------------------------------------------------- config


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    return path


BASE = """
dcs = ["a", "b"]
partitions = 1
[[servers]]
dc = "a"
partition = 0
address = "127.0.0.1:7100"
metrics_port = 9100
[[servers]]
dc = "b"
partition = 0
address = "127.0.0.1:7101"
"""


def test_tls_section_paths_are_taken_from_the_config_folder(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE + '[tls]\nca = "pki/ca.pem"\ncertificate = "/etc/okapi/s.pem"\nkey = "k.pem"\n')
    config = ClusterConfig.load(path)
    assert config.tls == TlsConfig(str(tmp_path / "pki/ca.pem"), "/etc/okapi/s.pem", str(tmp_path / "k.pem"),
                                   client_auth=True)
    assert config.servers[0].metrics_address == "127.0.0.1:9100" and config.servers[1].metrics_address is None
    again = ClusterConfig.from_toml(config.to_toml())
    assert again == config


@pytest.mark.parametrize(("extra", "problem"), [
    ('[tls]\nca = "c"\ncertificate = "s"\n', "tls: key must be the path"),
    ('[tls]\nca = "c"\ncertificate = "s"\nkey = "k"\ncolour = "blue"\n', "unknown setting(s) colour"),
    ('[tls]\nca = "c"\ncertificate = "s"\nkey = "k"\nclient_auth = "yes"\n', "client_auth must be true or false"),
    ('[tls]\nca = "c"\ncertificate = "s"\nkey = "k"\nclient_auth = false\n', "give every server a peer_address"),
])
def test_tls_section_mistakes_are_named(tmp_path: Path, extra: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        ClusterConfig.load(_write(tmp_path, BASE + extra))


def test_listener_clashes_are_refused() -> None:
    data = local_cluster(dcs=("a", "b"), partitions=1, base_port=7100).to_dict()
    data["servers"][0]["metrics_port"] = 7101  # b's client port
    with pytest.raises(ValueError, match="share the address|already used"):
        ClusterConfig.from_dict(data)
    data["servers"][0]["metrics_port"] = 70000
    with pytest.raises(ValueError, match="metrics_port must be in"):
        ClusterConfig.from_dict(data)
    data["servers"][0]["metrics_port"] = 0
    data["servers"][0]["peer_address"] = "127.0.0.1:7101"
    with pytest.raises(ValueError, match="share the address 127.0.0.1:7101"):
        ClusterConfig.from_dict(data)


def test_local_cluster_assigns_metrics_and_peer_ports() -> None:
    tls = TlsConfig("ca.pem", "s.pem", "k.pem", client_auth=False)
    config = local_cluster(dcs=("a", "b"), partitions=2, base_port=7100, metrics_base_port=9100, tls=tls)
    assert [s.metrics_port for s in config.servers] == [9100, 9101, 9102, 9103]
    assert [s.peer_address for s in config.servers] == [f"127.0.0.1:{7104 + i}" for i in range(4)]
    assert config.servers[0].peer_target == "127.0.0.1:7104"
    assert ClusterConfig.from_toml(config.to_toml()) == config


def test_client_tls_flags() -> None:
    assert client_tls_from_args(None, None, None) is None
    assert client_tls_from_args("ca.pem", None, None) == ClientTls("ca.pem")
    with pytest.raises(ValueError, match="need --tls-ca"):
        client_tls_from_args(None, "c.pem", "k.pem")
    with pytest.raises(ValueError, match="needs its key"):
        ClientTls("ca.pem", certificate="c.pem")
