"""The Grafana dashboard and the Prometheus alert rules in src/okapikv/deploy/monitoring (docs/deploy.md, "Dashboard and
alerts"): every metric they name is one a live server exports, and each alert fires on synthetic
series that break its condition and stays quiet on healthy ones (promtool's rule tests).

Why a live server and not a list: a metric renamed in the exporter and not in the dashboard would
otherwise leave an empty panel or an alert that can never fire, silently.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from integration_support import free_port_range

from okapikv.client import AsyncClient
from okapikv.cluster.config import local_cluster
from okapikv.serve.app import serve

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "src" / "okapikv" / "deploy" / "monitoring" / "okapi-dashboard.json"
RULES = ROOT / "src" / "okapikv" / "deploy" / "monitoring" / "okapi-alerts.yml"
#: Series Prometheus makes itself (one per scrape target), not a server.
PROMETHEUS_SERIES = {"up"}
_NAME = re.compile(r"\b((?:okapi|process)_[a-z0-9_]+|up)\b")
_LABELS = re.compile(r"\{[^}]*\}|\"[^\"]*\"")


def named_series(expression: str) -> set[str]:
    """The series names a PromQL expression reads (label matchers and strings left out)."""
    return set(_NAME.findall(_LABELS.sub("", expression)))


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    expressions += [variable["query"]["query"] for variable in dashboard["templating"]["list"]
                    if isinstance(variable.get("query"), dict)]
    return expressions


def rule_expressions() -> list[str]:
    import yaml

    rules = yaml.safe_load(RULES.read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def test_the_name_extraction_sees_names_and_skips_label_values() -> None:
    assert named_series('sum by (dc) (rate(okapi_a_total{dc=~"okapi_fake"}[1m])) / okapi_b') == {
        "okapi_a_total", "okapi_b"}
    assert named_series('up{job="okapi"} == 0 or okapi_peer_link_up == 0') == {"up", "okapi_peer_link_up"}


def _scrape(tmp_path: Path) -> set[str]:
    """Series names a durable 2-DC cluster's first server exports after a few writes."""
    base, metrics = free_port_range(2), free_port_range(2)
    config = local_cluster(dcs=("east", "west"), partitions=1, wan="off", base_port=base, metrics_base_port=metrics)

    async def scenario() -> str:
        stops = [asyncio.Event(), asyncio.Event()]
        tasks = [asyncio.create_task(serve(config, dc, 0, stop=stops[dc], data_dir=str(tmp_path / f"dc{dc}")))
                 for dc in range(2)]
        try:
            await asyncio.sleep(0.5)
            async with AsyncClient(config.server(0, 0).address, timeout_s=10) as client:
                for index in range(3):
                    await client.put(b"k%d" % index, b"v")
                await client.get(b"k0")
            deadline = asyncio.get_running_loop().time() + 20
            url = f"http://127.0.0.1:{metrics}/metrics"
            while True:  # until the stable vector has an entry for the other DC and a group is durable
                body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
                if ('source_dc="west"' in body and "okapi_storage_fsyncs_total" in body) or (
                        asyncio.get_running_loop().time() > deadline):
                    return body
                await asyncio.sleep(0.2)
        finally:
            for stop in stops:
                stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=30)

    body = asyncio.run(scenario())
    names = {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line and not line.startswith("#")}
    for line in body.splitlines():  # families without samples yet (waits by reason under Okapi) count too
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            names |= {name} | ({f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else set())
    return names


def test_every_metric_the_dashboard_and_the_alerts_name_is_exported(tmp_path: Path) -> None:
    pytest.importorskip("yaml", reason="PyYAML reads the alert rules (the test extra)")
    exported = _scrape(tmp_path)
    named = {name for expression in dashboard_expressions() + rule_expressions() for name in named_series(expression)}
    assert len(named) > 20  # the extraction found the dashboard's and the rules' names
    missing = sorted(named - exported - PROMETHEUS_SERIES)
    assert not missing, f"named by the dashboard or the rules but not exported by a server: {missing}"


# ------------------------------------------------------------------ promtool on synthetic series


def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    text = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return {"series": f"{name}{{{text}}}", "values": values}


A0 = {"dc": "a", "partition": "0"}
B0 = {"dc": "b", "partition": "0"}
LINK = {**A0, "peer_dc": "b", "peer_partition": "0"}


def _alert(at: str, name: str, *expected: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name,
            "exp_alerts": [{"exp_labels": labels, "exp_annotations": {"summary": summary}}
                           for labels, summary in expected]}


def promtool_tests(rules: Path) -> dict[str, Any]:
    """Each alert: quiet while healthy (and on the healthy neighbour series), firing once broken."""
    series = [
        _series("okapi_stable_lag_seconds", "0.1 0.1 9x10", **A0, source_dc="b"),
        _series("okapi_stable_lag_seconds", "0.1x12", **B0, source_dc="a"),
        _series("okapi_peer_link_up", "1 1 0x10", **LINK),
        _series("okapi_peer_link_up", "1x12", **B0, peer_dc="a", peer_partition="0"),
        _series("okapi_peer_link_dead_total", "0 0 1x10", **LINK),
        _series("okapi_replication_queue_messages", "500+100x30", **LINK, state="pending"),
        _series("okapi_replication_queue_messages", "0x30", **LINK, state="unacked"),
        _series("okapi_replication_queue_messages", "2000x30", **B0, peer_dc="a", peer_partition="0",
                state="pending"),  # long but not growing
        _series("okapi_storage_filesystem_free_bytes", "50e9 50e9 5e9x20", **A0),
        _series("okapi_storage_filesystem_size_bytes", "100e9x22", **A0),
        _series("okapi_storage_filesystem_free_bytes", "50e9x22", **B0),
        _series("okapi_storage_filesystem_size_bytes", "100e9x22", **B0),
        _series("okapi_storage_disk_full", "0 0 1x10", **A0),
        _series("okapi_storage_disk_full", "0x12", **B0),
        _series("okapi_storage_commit_seconds_total", "0+0.01x30", **A0),
        _series("okapi_storage_fsyncs_total", "0+1x30", **A0),
        _series("okapi_storage_commit_seconds_total", "0+6x30", **B0),
        _series("okapi_storage_fsyncs_total", "0+60x30", **B0),
        _series("okapi_clock_offset_refusals_total", "0 0 0 1x10", **A0),
        _series("okapi_clock_offset_clamps_total", "0x13", **A0),
        _series("okapi_clock_offset_refusals_total", "0x13", **B0),
        _series("okapi_clock_offset_clamps_total", "0x13", **B0),
        _series("up", "1 1 0x10", job="okapi", instance="a-0:9100"),
        _series("up", "1x12", job="okapi", instance="b-0:9100"),
    ]
    warning, critical = {"severity": "warning"}, {"severity": "critical"}
    checks = [
        _alert("1m", "OkapiStableLagOverBound"),
        _alert("5m", "OkapiStableLagOverBound", ({"dc": "a", "source_dc": "b", **warning},
                                                 "DC a sees b's updates 9s late")),
        _alert("1m", "OkapiPeerLinkDown"),
        _alert("5m", "OkapiPeerLinkDown", ({**LINK, **critical}, "a/0 cannot reach b/0")),
        _alert("1m", "OkapiPeerLinksFoundDead"),
        _alert("3m", "OkapiPeerLinksFoundDead", ({**LINK, **warning},
                                                 "links from a/0 to b went silent (network cut or stalled peer)")),
        _alert("5m", "OkapiReplicationQueueGrowing"),
        _alert("20m", "OkapiReplicationQueueGrowing", ({"dc": "a", "partition": "0", "peer_dc": "b", **warning},
                                                       "a/0 has 2500 messages queued for b")),
        _alert("1m", "OkapiDiskNearlyFull"),
        _alert("10m", "OkapiDiskNearlyFull", ({**A0, **warning}, "a/0: 5% of its data file system free")),
        _alert("1m", "OkapiDiskFull"),
        _alert("3m", "OkapiDiskFull", ({**A0, **critical},
                                       "a/0 refuses writes: less than its reserve is free")),
        _alert("8m", "OkapiFsyncSlow"),
        _alert("20m", "OkapiFsyncSlow", ({**B0, **warning}, "b/0: commits take 100ms on average")),
        _alert("2m", "OkapiClockOffsetRefusals"),
        _alert("5m", "OkapiClockOffsetRefusals", ({**A0, **critical},
                                                  "a/0: a clock is off by more than the maximum offset")),
        _alert("1m", "OkapiServerDown"),
        _alert("5m", "OkapiServerDown", ({"job": "okapi", "instance": "a-0:9100", **critical},
                                         "a-0:9100 does not answer scrapes")),
    ]
    return {"rule_files": [str(rules)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": checks}]}


def test_the_alert_rules_fire_on_synthetic_series_and_only_there(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; scripts/install-test-deps.sh)")
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60,
                             check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tests = tmp_path / "okapi-alerts-test.yml"
    tests.write_text(json.dumps(promtool_tests(RULES), indent=1))  # JSON is YAML
    result = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    every_alert = {rule.split(":", 1)[1].strip() for rule in RULES.read_text().splitlines() if "- alert:" in rule}
    assert every_alert == {check["alertname"] for check in promtool_tests(RULES)["tests"][0]["alert_rule_test"]}


def test_every_dashboard_expression_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses each panel's query (the ``$dc`` variable as Grafana's "All" fills it) as a
    recording rule: a typo would otherwise show only as an empty panel."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; scripts/install-test-deps.sh)")
    rules = [{"record": f"okapi:dashboard_panel_{index}", "expr": expression.replace("$dc", ".*")}
             for index, expression in enumerate(dashboard_expressions()) if not expression.startswith("label_values")]
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60,
                             check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout

