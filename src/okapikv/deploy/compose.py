"""`okapi deploy compose`: a compose project for the model (``okapikv.deploy.model``).

One service per server (its command, environment, data volume, health check through `okapi
health`, SIGTERM with a grace period), the cluster config mounted read-only, and a ``monitoring``
profile with Prometheus (scraping every server, the alert rules loaded) and Grafana (the dashboard
and its data source provisioned). The WAN emulation is the config's ``wan_ms``, applied by the
servers themselves as under `okapi up`. Nothing is published on the host but Prometheus and
Grafana (on loopback): clients run on the project network, where ClusterInfo's addresses resolve.
"""

from __future__ import annotations

import importlib.resources
import shutil
from pathlib import Path
from typing import Any

from okapikv.deploy import yaml_text
from okapikv.deploy.model import (
    CONFIG_PATH,
    DATA_DIR,
    HEALTH_COMMAND,
    METRICS_PORT,
    PORTS,
    SERVER_COMMAND,
    STOP_GRACE_S,
    TLS_DIR,
    Deployment,
    compose_host,
    dns_label,
)

PROMETHEUS_IMAGE = "prom/prometheus:v2.53.0"
GRAFANA_IMAGE = "grafana/grafana:11.1.0"
DASHBOARD = "okapi-dashboard.json"
ALERTS = "okapi-alerts.yml"
#: The Grafana data source's uid, which the dashboard's ``datasource`` variable selects.
DATASOURCE_UID = "okapi-prometheus"


def monitoring_file(name: str) -> Path:
    """A file of ``okapikv/deploy/monitoring`` (the dashboard, the alert rules)."""
    return Path(str(importlib.resources.files("okapikv.deploy").joinpath("monitoring", name)))


def compose_project(deployment: Deployment) -> dict[str, Any]:
    services: dict[str, Any] = {}
    for slot in deployment.slots:
        services[slot.name] = {
            "image": deployment.image,
            "hostname": slot.name,
            "command": list(SERVER_COMMAND),
            "environment": deployment.environment(slot),
            "volumes": [f"{slot.volume}:{DATA_DIR}", f"./cluster.toml:{CONFIG_PATH}:ro",
                        *([f"./tls:{TLS_DIR}:ro"] if deployment.tls_server_name else [])],
            "expose": [str(port) for port in PORTS.values()],
            "healthcheck": {"test": ["CMD", *HEALTH_COMMAND], "interval": "10s", "timeout": "5s", "retries": 3,
                            "start_period": "60s"},
            "stop_signal": "SIGTERM",
            "stop_grace_period": f"{STOP_GRACE_S}s",
            # bounded: a configuration error (exit 2) or damaged data (4) must not restart forever
            "restart": "on-failure:5",
            "ulimits": {"nofile": {"soft": 65536, "hard": 65536}},
        }
    services["prometheus"] = {
        "image": PROMETHEUS_IMAGE,
        "profiles": ["monitoring"],
        "volumes": ["./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro",
                    f"./prometheus/{ALERTS}:/etc/prometheus/{ALERTS}:ro",
                    *(["./tls:/etc/prometheus/tls:ro"] if deployment.tls_server_name else [])],
        "ports": ["127.0.0.1:9090:9090"],
    }
    services["grafana"] = {
        "image": GRAFANA_IMAGE,
        "profiles": ["monitoring"],
        "environment": {"GF_AUTH_ANONYMOUS_ENABLED": "true", "GF_AUTH_ANONYMOUS_ORG_ROLE": "Viewer"},
        "volumes": ["./grafana/provisioning:/etc/grafana/provisioning:ro",
                    "./grafana/dashboards:/var/lib/grafana/dashboards:ro"],
        "ports": ["127.0.0.1:3000:3000"],
        "depends_on": ["prometheus"],
    }
    return {"name": dns_label(deployment.template.cluster_id), "services": services,
            "volumes": {slot.volume: {} for slot in deployment.slots}}


def prometheus_config(deployment: Deployment) -> dict[str, Any]:
    """Every server's metrics; with TLS over HTTPS, Prometheus presenting the servers' certificate
    (the metrics endpoint demands one, ``okapikv.server.metrics``)."""
    job: dict[str, Any] = {"job_name": "okapi", "static_configs": [
        {"targets": [f"{slot.name}:{METRICS_PORT}" for slot in deployment.slots]}]}
    if deployment.tls_server_name:
        job["scheme"] = "https"
        job["tls_config"] = {"ca_file": "/etc/prometheus/tls/ca.crt", "cert_file": "/etc/prometheus/tls/tls.crt",
                             "key_file": "/etc/prometheus/tls/tls.key", "server_name": deployment.tls_server_name}
    return {"global": {"scrape_interval": "5s", "evaluation_interval": "15s"},
            "rule_files": [f"/etc/prometheus/{ALERTS}"], "scrape_configs": [job]}


def grafana_provisioning() -> dict[str, dict[str, Any]]:
    """Relative path -> content of Grafana's provisioning files."""
    return {
        "datasources/okapi.yml": {"apiVersion": 1, "datasources": [
            {"name": "Prometheus", "uid": DATASOURCE_UID, "type": "prometheus", "access": "proxy",
             "url": "http://prometheus:9090", "isDefault": True}]},
        "dashboards/okapi.yml": {"apiVersion": 1, "providers": [
            {"name": "okapikv", "type": "file", "disableDeletion": True,
             "options": {"path": "/var/lib/grafana/dashboards"}}]},
    }


def write_compose(deployment: Deployment, out: Path) -> list[Path]:
    """The compose project in ``out``: compose.yaml, cluster.toml and the monitoring files."""
    written = [deployment.config(compose_host).dump(out / "cluster.toml")]
    files: dict[str, str] = {
        "compose.yaml": yaml_text.dump(compose_project(deployment)),
        "prometheus/prometheus.yml": yaml_text.dump(prometheus_config(deployment)),
    }
    files |= {f"grafana/provisioning/{name}": yaml_text.dump(content)
              for name, content in grafana_provisioning().items()}
    for name, text in files.items():
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    for source, name in ((ALERTS, f"prometheus/{ALERTS}"), (DASHBOARD, f"grafana/dashboards/{DASHBOARD}")):
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(monitoring_file(source), target)
        written.append(target)
    return written
