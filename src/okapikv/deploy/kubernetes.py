"""`okapi deploy k8s`: Kubernetes manifests for the model (``okapikv.deploy.model``).

Per DC a StatefulSet (one pod per partition: the pod's ordinal is its partition, read from the
``apps.kubernetes.io/pod-index`` label, Kubernetes 1.28 and later), a headless Service that gives
each pod its stable name (``publishNotReadyAddresses``: peers must reach a server that is still
starting, as its catch-up needs them) and a PodDisruptionBudget that lets a drain take one server
of the DC at a time; for the cluster one ConfigMap holding cluster.toml. Probes run `okapi
health` in the container: gRPC probes cannot present the client certificate a TLS cluster demands.
A kustomization.yaml lists them all (``kubectl apply -k DIR``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from okapikv.deploy import yaml_text
from okapikv.deploy.model import (
    CONFIG_DIR,
    DATA_DIR,
    HEALTH_COMMAND,
    IMAGE_UID,
    METRICS_PORT,
    PORTS,
    SERVER_COMMAND,
    STOP_GRACE_S,
    TLS_DIR,
    Deployment,
    Slot,
    kubernetes_host,
)

CONFIG_MAP = "okapi-config"
#: With TLS, the Secret holding ca.crt, tls.crt and tls.key (made by the operator or cert-manager).
TLS_SECRET = "okapi-tls"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _labels(dc_group: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "okapikv", "app.kubernetes.io/instance": dc_group}


def _probe(period_s: int, failures: int) -> dict[str, Any]:
    return {"exec": {"command": list(HEALTH_COMMAND)}, "periodSeconds": period_s, "timeoutSeconds": 5,
            "failureThreshold": failures}


def _environment(deployment: Deployment, first: Slot) -> list[dict[str, Any]]:
    fixed = deployment.environment(first)
    variables: list[dict[str, Any]] = []
    for name, value in fixed.items():
        if name == "OKAPI_PARTITION":
            variables.append({"name": name, "valueFrom": {"fieldRef": {
                "fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}}})
        else:
            variables.append({"name": name, "value": value})
    return variables


def stateful_set(deployment: Deployment, slots: tuple[Slot, ...]) -> dict[str, Any]:
    group = slots[0].group
    labels = _labels(group)
    container = {
        "name": "okapi",
        "image": deployment.image,
        "command": list(SERVER_COMMAND),
        "env": _environment(deployment, slots[0]),
        "ports": [{"name": name, "containerPort": port} for name, port in PORTS.items()],
        "startupProbe": _probe(5, 120),  # recovery of a large data directory may take minutes
        "readinessProbe": _probe(5, 2),
        "livenessProbe": _probe(10, 6),
        "volumeMounts": [{"name": "data", "mountPath": DATA_DIR},
                         {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"},  # SQLite's temporary files
                         *([{"name": "tls", "mountPath": TLS_DIR, "readOnly": True}]
                           if deployment.tls_server_name else [])],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": group, "labels": labels},
        "spec": {
            "serviceName": group,
            "replicas": len(slots),
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {
                    "prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT)}},
                "spec": {
                    "terminationGracePeriodSeconds": STOP_GRACE_S,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": IMAGE_UID, "runAsGroup": IMAGE_UID,
                                        "fsGroup": IMAGE_UID},
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": CONFIG_MAP}},
                                {"name": "tmp", "emptyDir": {}},
                                # group-readable: the server runs as IMAGE_UID with fsGroup IMAGE_UID
                                *([{"name": "tls", "secret": {"secretName": TLS_SECRET, "defaultMode": 0o440}}]
                                  if deployment.tls_server_name else [])],
                },
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": f"{deployment.storage_gib}Gi"}}},
            }],
        },
    }


def headless_service(slots: tuple[Slot, ...]) -> dict[str, Any]:
    group = slots[0].group
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": group, "labels": _labels(group)},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": _labels(group),
                 "ports": [{"name": name, "port": port, "targetPort": port} for name, port in PORTS.items()]},
    }


def disruption_budget(slots: tuple[Slot, ...]) -> dict[str, Any]:
    group = slots[0].group
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": group, "labels": _labels(group)},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _labels(group)}},
    }


def manifests(deployment: Deployment) -> dict[str, dict[str, Any]]:
    """File name -> manifest, the ConfigMap first."""
    config = deployment.config(kubernetes_host)
    result: dict[str, dict[str, Any]] = {"configmap.yaml": {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "labels": {"app.kubernetes.io/name": "okapikv"}},
        "data": {"cluster.toml": config.to_toml()},
    }}
    for slots in deployment.groups().values():
        group = slots[0].group
        result[f"{group}-service.yaml"] = headless_service(slots)
        result[f"{group}-statefulset.yaml"] = stateful_set(deployment, slots)
        result[f"{group}-pdb.yaml"] = disruption_budget(slots)
    return result


def write_kubernetes(deployment: Deployment, out: Path) -> list[Path]:
    """The manifests in ``out``, with a kustomization.yaml listing them."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    documents = manifests(deployment)
    for name, manifest in documents.items():
        target = out / name
        target.write_text(yaml_text.dump(manifest), encoding="utf-8")
        written.append(target)
    kustomization = out / "kustomization.yaml"
    kustomization.write_text(yaml_text.dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                             "resources": list(documents)}), encoding="utf-8")
    return [*written, kustomization]
