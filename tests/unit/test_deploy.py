"""`okapi deploy compose|k8s` and the Dockerfile (docs/deploy.md, "6. Images, compose and
Kubernetes").

What must hold: the compose project and the Kubernetes manifests generated from one set of
parameters describe the cluster config exactly (every server one service / one pod, at the
address the config gives it, with its ports, its own data volume and `okapi health` as its check),
and the same cluster in both; the manifests pass the Kubernetes schemas (validated offline with
kubernetes-validate's bundled schemas, and rendered by `kubectl kustomize` where kubectl is
installed); the Dockerfile passes hadolint (where installed) and the structural rules below.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from okapikv.cluster.config import ClusterConfig, join_address, local_cluster
from okapikv.deploy import yaml_text
from okapikv.deploy.compose import monitoring_file
from okapikv.deploy.kubernetes import POD_INDEX_LABEL, TLS_SECRET
from okapikv.deploy.model import (
    CONFIG_PATH,
    DATA_DIR,
    GRPC_PORT,
    METRICS_PORT,
    NATIVE_PORT,
    RESP_PORT,
    TLS_DIR,
    Deployment,
    compose_host,
    kubernetes_host,
)
from okapikv.tls import TlsConfig

yaml = pytest.importorskip("yaml", reason="PyYAML reads the generated files back (the test extra)")
ROOT = Path(__file__).resolve().parents[2]
DCS = "oregon,virginia,ireland"
PARTITIONS = 2


def _deploy(platform: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "okapikv.cli", "deploy", platform, "--out", str(out), "--dcs", DCS,
                           "--partitions", str(PARTITIONS), *extra], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("deploy")
    for platform in ("compose", "k8s"):
        result = _deploy(platform, root / platform, "--wan-ms", "20", "--protocol", "cure")
        assert result.returncode == 0, result.stderr
    return root / "compose", root / "k8s"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_the_compose_project_runs_every_server_of_the_config(generated: tuple[Path, Path]) -> None:
    out = generated[0]
    config = ClusterConfig.load(out / "cluster.toml")
    assert (config.dcs, config.partitions, config.protocol) == (tuple(DCS.split(",")), PARTITIONS, "cure")
    assert config.wan_ms[0][1] == 20.0  # the WAN emulation, as `okapi up` runs it
    project = _load(out / "compose.yaml")
    services = project["services"]
    servers = {name: service for name, service in services.items() if "profiles" not in service}
    assert len(servers) == len(config.servers) == 6
    volumes = set()
    for server in config.servers:
        host, port = server.address.rsplit(":", 1)
        service = servers[host]  # the address a peer dials is the service's name on the network
        assert int(port) == GRPC_PORT and server.bind == f"0.0.0.0:{GRPC_PORT}"
        assert (server.native_port, server.resp_port, server.metrics_port) == (NATIVE_PORT, RESP_PORT, METRICS_PORT)
        assert service["command"] == ["okapi", "server"]
        assert service["environment"] == {"OKAPI_CONFIG": CONFIG_PATH, "OKAPI_DC": server.dc,
                                          "OKAPI_PARTITION": str(server.partition), "OKAPI_DATA_DIR": DATA_DIR,
                                          "OKAPI_LOG_FORMAT": "json"}
        assert sorted(map(int, service["expose"])) == sorted([GRPC_PORT, NATIVE_PORT, RESP_PORT, METRICS_PORT])
        data = [volume for volume in service["volumes"] if volume.endswith(f":{DATA_DIR}")]
        assert len(data) == 1 and f"./cluster.toml:{CONFIG_PATH}:ro" in service["volumes"]
        volumes.add(data[0].split(":")[0])
        assert service["healthcheck"]["test"] == ["CMD", "okapi", "health"]
        assert service["stop_signal"] == "SIGTERM"
    assert volumes == set(project["volumes"]) and len(volumes) == len(config.servers)  # a volume each

    # The monitoring profile: Prometheus scrapes every server and loads the rules; Grafana gets the dashboard.
    assert services["prometheus"]["profiles"] == services["grafana"]["profiles"] == ["monitoring"]
    scrape = _load(out / "prometheus" / "prometheus.yml")
    targets = scrape["scrape_configs"][0]["static_configs"][0]["targets"]
    assert sorted(targets) == sorted(server.metrics_address for server in config.servers)
    assert (out / "prometheus" / "okapi-alerts.yml").read_text() == monitoring_file("okapi-alerts.yml").read_text()
    dashboard = out / "grafana" / "dashboards" / "okapi-dashboard.json"
    assert json.loads(dashboard.read_text()) == json.loads(monitoring_file("okapi-dashboard.json").read_text())
    source = _load(out / "grafana" / "provisioning" / "datasources" / "okapi.yml")["datasources"][0]
    variable = json.loads(dashboard.read_text())["templating"]["list"][0]
    assert source["uid"] == variable["current"]["value"]  # the dashboard selects the provisioned source


def _manifests(out: Path) -> list[dict[str, Any]]:
    listed = _load(out / "kustomization.yaml")["resources"]
    assert sorted(listed) == sorted(path.name for path in out.glob("*.yaml") if path.name != "kustomization.yaml")
    return [_load(out / name) for name in listed]


def test_the_manifests_run_every_server_of_the_config(generated: tuple[Path, Path]) -> None:
    documents = _manifests(generated[1])
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        by_kind.setdefault(document["kind"], []).append(document)
    config = ClusterConfig.from_toml(by_kind["ConfigMap"][0]["data"]["cluster.toml"])
    assert len(by_kind["StatefulSet"]) == len(by_kind["Service"]) == len(by_kind["PodDisruptionBudget"]) == 3
    services = {service["metadata"]["name"]: service for service in by_kind["Service"]}
    pods = set()
    for stateful in by_kind["StatefulSet"]:
        spec = stateful["spec"]
        service = services[spec["serviceName"]]
        assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
        assert service["spec"]["selector"] == spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"]
        pod = spec["template"]["spec"]
        container = pod["containers"][0]
        environment = {item["name"]: item for item in container["env"]}
        dc = environment["OKAPI_DC"]["value"]
        assert spec["replicas"] == PARTITIONS
        assert environment["OKAPI_PARTITION"]["valueFrom"]["fieldRef"]["fieldPath"] == (
            f"metadata.labels['{POD_INDEX_LABEL}']")  # the pod's ordinal is its partition
        assert environment["OKAPI_CONFIG"]["value"] == CONFIG_PATH
        for ordinal in range(spec["replicas"]):  # pod <statefulset>-<ordinal> under its headless Service
            pods.add((dc, ordinal))
            server = config.server(dc, ordinal)
            assert server.address == join_address(f"{stateful['metadata']['name']}-{ordinal}.{spec['serviceName']}",
                                                  GRPC_PORT)
            assert {port["containerPort"] for port in container["ports"]} == {
                GRPC_PORT, server.native_port, server.resp_port, server.metrics_port}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["exec"]["command"] == ["okapi", "health"]
        mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
        assert mounts["data"] == DATA_DIR and [t["metadata"]["name"] for t in spec["volumeClaimTemplates"]] == ["data"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        name = stateful["metadata"]["name"]
        budget = next(b for b in by_kind["PodDisruptionBudget"] if b["metadata"]["name"] == name)
        assert budget["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
        assert budget["spec"]["maxUnavailable"] == 1
    assert pods == {(server.dc, server.partition) for server in config.servers}


def test_compose_and_kubernetes_describe_the_same_cluster(generated: tuple[Path, Path]) -> None:
    compose = ClusterConfig.load(generated[0] / "cluster.toml")
    kubernetes = ClusterConfig.from_toml(_load(generated[1] / "configmap.yaml")["data"]["cluster.toml"])

    def without_hosts(config: ClusterConfig) -> dict[str, Any]:
        data = config.to_dict()
        for server in data["servers"]:
            server.pop("address")
        return data

    assert without_hosts(compose) == without_hosts(kubernetes)
    deployment = Deployment(compose)
    assert [compose_host(slot) for slot in deployment.slots] == [s.address.split(":")[0] for s in compose.servers]
    assert [kubernetes_host(slot) for slot in deployment.slots] == [s.address.split(":")[0] for s in kubernetes.servers]


def test_the_manifests_pass_the_kubernetes_schemas_offline(generated: tuple[Path, Path]) -> None:
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (the test extra)")
    documents = _manifests(generated[1])
    for document in documents:
        validate.validate(document, "1.30.0", strict=True)
    broken = json.loads(json.dumps(documents[-1]))
    broken["spec"]["replicas"] = "two"
    with pytest.raises(validate.ValidationError):  # the validator does refuse a bad manifest
        validate.validate(broken, "1.30.0", strict=True)
    kubectl = shutil.which("kubectl")
    if kubectl is not None:  # renders offline: no cluster is contacted
        rendered = subprocess.run([kubectl, "kustomize", str(generated[1])], capture_output=True, text=True,
                                  timeout=60, check=False)
        assert rendered.returncode == 0, rendered.stderr
        assert len(list(yaml.safe_load_all(rendered.stdout))) == len(documents)


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(instruction, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        pending += stripped.removesuffix("\\") + " "
        if not stripped.endswith("\\"):
            keyword, _, arguments = pending.strip().partition(" ")
            result.append((keyword.upper(), arguments))
            pending = ""
    return result


def test_the_dockerfile_follows_the_rules_of_a_server_image() -> None:
    dockerfile = ROOT / "Dockerfile"
    instructions = _instructions(dockerfile)
    keywords = [keyword for keyword, _ in instructions]
    assert instructions[0] == ("ARG", "BASE_IMAGE=python:3.11-slim-bookworm")  # the base is an argument
    stages = [arguments for keyword, arguments in instructions if keyword == "FROM"]
    assert stages == ["${BASE_IMAGE} AS build", "${BASE_IMAGE}"]  # multi-stage
    final = instructions[keywords.index("FROM", keywords.index("FROM") + 1):]
    final_keywords = [keyword for keyword, _ in final]
    user = [arguments for keyword, arguments in final if keyword == "USER"]
    assert user and user[-1].split(":")[0] not in ("root", "0")  # runs as a non-root user
    assert any(keyword == "VOLUME" and DATA_DIR in arguments for keyword, arguments in final)
    exposed = {int(port) for keyword, arguments in final if keyword == "EXPOSE" for port in arguments.split()}
    assert exposed == {GRPC_PORT, NATIVE_PORT, RESP_PORT, METRICS_PORT}
    assert ("STOPSIGNAL", "SIGTERM") in final
    health = [arguments for keyword, arguments in final if keyword == "HEALTHCHECK"]
    assert len(health) == 1 and health[0].endswith('CMD ["okapi", "health"]')
    assert final[-1] == ("CMD", '["okapi", "server"]')  # exec form: the server is PID 1 and gets SIGTERM
    assert final_keywords.index("USER") > max(i for i, keyword in enumerate(final_keywords) if keyword == "RUN")
    assert all(keyword != "ADD" for keyword in keywords)
    hadolint = shutil.which("hadolint")
    if hadolint is not None:
        linted = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True, timeout=60, check=False)
        assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_systemd_unit_is_the_one_deploy_md_shows_and_runs_a_durable_server() -> None:
    """docs/deploy.md, "3. systemd": the unit it prints is the file the repository and the package
    ship, its server command is one `okapi server` takes, and exit statuses 2 (a bad config or its
    address in use) and 4 (damaged data) are not restarted, since a restart does not fix them."""
    import configparser
    import re
    import shlex

    from okapikv.cli import parse
    from okapikv.serve.main import EXIT_DATA_DAMAGED

    unit_path = ROOT / "src" / "okapikv" / "deploy" / "systemd" / "okapi@.service"
    shown = re.search(r"`/etc/systemd/system/okapi@\.service`.*?```ini\n(.*?)```",
                      (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8"), re.S)
    assert shown is not None and shown[1] == unit_path.read_text(encoding="utf-8")
    unit = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#",))
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # systemd's keys are case-sensitive
    unit.read_string(shown[1].replace("\\\n", " "))
    service = unit["Service"]
    command = shlex.split(service["ExecStart"].replace("${OKAPI_DC}", "oregon").replace("${OKAPI_PARTITION}", "0"))
    assert command[0].endswith("/okapi")
    args = parse(command[1:])
    assert args.command == "server" and args.data_dir and not args.in_memory
    assert set(service["RestartPreventExitStatus"].split()) == {"2", str(EXIT_DATA_DAMAGED)}
    assert service["KillSignal"] == "SIGTERM" and service["User"] == "okapi"
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_the_alert_rule_operations_md_shows_is_the_shipped_one() -> None:
    """docs/operations.md, "Clocks: the maximum offset", quotes a rule of the shipped alert rules."""
    import re

    operations = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    quoted = [rule for block in re.findall(r"```yaml\n(.*?)```", operations, re.S) for rule in yaml.safe_load(block)
              if isinstance(rule, dict) and "alert" in rule]
    shipped = {rule["alert"]: rule for group in _load(ROOT / "src/okapikv/deploy/monitoring/okapi-alerts.yml")["groups"]
               for rule in group["rules"]}
    assert quoted and all(rule == shipped.get(rule["alert"]) for rule in quoted), quoted


@pytest.mark.parametrize("value", [
    {"a": {"b": [1, "2", {"c": "x", "d": []}], "on": "true", "e": {}}, "f": 1.5, "g": None, "h": False},
    {"text": "line one\nline two\n", "spaced": "  leading\n", "crlf": "a\r\nb\n", "two": "a\n\n", "empty": ""},
    [["nested", ["lists"]], {"k": "v"}, "0", "yes", "null", "#", "a: b", "- x"],
])
def test_the_yaml_writer_reads_back_exactly(value: object) -> None:
    assert yaml.safe_load(yaml_text.dump(value)) == value


def test_bad_parameters_write_nothing_and_say_why(tmp_path: Path) -> None:
    for extra, message in ((("--partitions", "0"), "--partitions must be at least 1"),
                           (("--image", "bad image"), "image 'bad image'")):
        result = _deploy("compose", tmp_path / "out", *extra)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    clash = subprocess.run([sys.executable, "-m", "okapikv.cli", "deploy", "k8s", "--out", str(tmp_path / "out"),
                            "--dcs", "us east,us-east"], capture_output=True, text=True, timeout=60, check=False)
    assert clash.returncode == 2 and "same container names" in clash.stderr
    long_name = subprocess.run([sys.executable, "-m", "okapikv.cli", "deploy", "k8s", "--out", str(tmp_path / "out"),
                                "--dcs", "a" * 47 + ",b"], capture_output=True, text=True, timeout=60, check=False)
    assert long_name.returncode == 2 and "longer than the 52 characters" in long_name.stderr
    assert not (tmp_path / "out").exists()


def test_a_config_file_gives_the_cluster_its_settings(tmp_path: Path) -> None:
    source = local_cluster(dcs=("a", "b"), partitions=3, protocol="gentlerain", wan=7.0, cluster_id="from-file")
    path = source.dump(tmp_path / "source.toml")
    result = subprocess.run([sys.executable, "-m", "okapikv.cli", "deploy", "compose", "--config", str(path),
                             "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    written = ClusterConfig.load(tmp_path / "out" / "cluster.toml")
    assert (written.dcs, written.partitions, written.protocol, written.wan_ms, written.cluster_id) == (
        source.dcs, source.partitions, source.protocol, source.wan_ms, source.cluster_id)
    assert [s.address for s in written.servers] == [f"okapi-{s.dc}-{s.partition}:{GRPC_PORT}" for s in source.servers]
    assert _load(tmp_path / "out" / "compose.yaml")["name"] == "from-file"
    secured = ClusterConfig(dcs=source.dcs, partitions=source.partitions, servers=source.servers,
                            tls=TlsConfig("ca.pem", "server.pem", "key.pem")).dump(tmp_path / "tls.toml")
    refused = subprocess.run([sys.executable, "-m", "okapikv.cli", "deploy", "k8s", "--config", str(secured),
                              "--out", str(tmp_path / "k8s")], capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "--tls gives" in refused.stderr and not (tmp_path / "k8s").exists()


def test_with_tls_every_server_probe_and_scrape_uses_the_mounted_certificate(tmp_path: Path) -> None:
    for platform in ("compose", "k8s"):
        result = _deploy(platform, tmp_path / platform, "--tls", "--tls-server-name", "okapi.internal")
        assert result.returncode == 0, result.stderr
    config = ClusterConfig.load(tmp_path / "compose" / "cluster.toml")
    assert config.tls == TlsConfig(f"{TLS_DIR}/ca.crt", f"{TLS_DIR}/tls.crt", f"{TLS_DIR}/tls.key", client_auth=True,
                                   server_name="okapi.internal")
    services = _load(tmp_path / "compose" / "compose.yaml")["services"]
    for name, service in services.items():
        if name != "grafana":
            assert any(volume.startswith("./tls:") and volume.endswith(":ro") for volume in service["volumes"]), name
    job = _load(tmp_path / "compose" / "prometheus" / "prometheus.yml")["scrape_configs"][0]
    assert job["scheme"] == "https" and job["tls_config"]["server_name"] == "okapi.internal"
    documents = _manifests(tmp_path / "k8s")
    stateful = [document for document in documents if document["kind"] == "StatefulSet"]
    assert len(stateful) == 3
    for document in stateful:
        pod = document["spec"]["template"]["spec"]
        secret = next(volume for volume in pod["volumes"] if volume["name"] == "tls")["secret"]
        assert secret == {"secretName": TLS_SECRET, "defaultMode": 0o440}
        assert {"name": "tls", "mountPath": TLS_DIR, "readOnly": True} in pod["containers"][0]["volumeMounts"]
    configmap = next(document for document in documents if document["kind"] == "ConfigMap")
    assert ClusterConfig.from_toml(configmap["data"]["cluster.toml"]).tls == config.tls
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (the test extra)")
    for document in documents:
        validate.validate(document, "1.30.0", strict=True)
