"""The one model a containerized cluster is rendered from (compose file and Kubernetes manifests).

A ``Deployment`` is the cluster config `okapi up` would run (same DCs, partitions, protocol, WAN
emulation, intervals) with each server in a container of its own: every server listens on the same
ports inside its container (``bind = "0.0.0.0:7100"``) and is dialled at its container's name
(``address``), which the platform resolves: the compose service name, or the Kubernetes pod name
under its DC's headless Service. With ``tls_server_name`` every listener speaks mutual TLS with one
certificate mounted at ``TLS_DIR``. Everything both renderings need per server comes from here: its
name, its address, its environment (``okapi server`` and ``okapi health`` read their identity from
``OKAPI_CONFIG``, ``OKAPI_DC``, ``OKAPI_PARTITION``, ``OKAPI_DATA_DIR``), its ports, its data
volume and its health check, so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from okapikv.cluster.config import ClusterConfig, ServerConfig, join_address
from okapikv.tls import TlsConfig

#: Ports inside every container (each server has its own network namespace, so all use the same).
GRPC_PORT = 7100
NATIVE_PORT = 7101
RESP_PORT = 6379
METRICS_PORT = 9100
PORTS: dict[str, int] = {"grpc": GRPC_PORT, "native": NATIVE_PORT, "resp": RESP_PORT, "metrics": METRICS_PORT}
#: Where the image keeps the config and the data (the image's volume).
CONFIG_DIR = "/etc/okapi"
CONFIG_PATH = f"{CONFIG_DIR}/cluster.toml"
DATA_DIR = "/var/lib/okapi"
#: With TLS: the CA, the certificate and its key, as a Kubernetes TLS Secret (or cert-manager) names
#: them. One certificate serves every server: it names ``tls_server_name``, which every peer, probe
#: and client expects (the config's ``[tls] server_name``), so pods and services need no SAN each.
TLS_DIR = f"{CONFIG_DIR}/tls"
TLS_FILES = ("ca.crt", "tls.crt", "tls.key")
#: The server's command and its probe: identity from the environment (``okapikv.cli``).
SERVER_COMMAND = ("okapi", "server")
HEALTH_COMMAND = ("okapi", "health")
DEFAULT_IMAGE = "okapikv:latest"
#: The image's non-root user (Dockerfile).
IMAGE_UID = 10001
#: A server's grace after SIGTERM: health NOT_SERVING, links closed, in-flight calls finished.
STOP_GRACE_S = 15

#: The longest StatefulSet name (its pods' controller-revision-hash label adds 11 characters).
MAX_GROUP_NAME = 52
_LABEL = re.compile(r"[^a-z0-9-]+")


def dns_label(text: str) -> str:
    """``text`` as a DNS label (RFC 1123: lower case letters, digits, inner hyphens)."""
    label = _LABEL.sub("-", text.lower()).strip("-")
    if not label:
        raise ValueError(f"DC name {text!r} has no letter or digit to name its containers by")
    return label


@dataclass(frozen=True, slots=True)
class Slot:
    """One server of the deployment: its (dc, partition) and the names it runs under."""

    dc: str
    partition: int
    group: str  # its DC's name on the platform: okapi-<dc> (StatefulSet and headless Service)

    @property
    def name(self) -> str:
        """The container's name: the compose service, the StatefulSet's pod (``<group>-<ordinal>``)."""
        return f"{self.group}-{self.partition}"

    @property
    def volume(self) -> str:
        return f"{self.name}-data"


@dataclass(frozen=True, slots=True)
class Deployment:
    """A cluster config (``template``: its settings; its addresses are replaced per platform), the
    image, the data volume size, and the host name the TLS certificate names (None: plaintext)."""

    template: ClusterConfig
    image: str = DEFAULT_IMAGE
    storage_gib: int = 10
    tls_server_name: str | None = None

    def __post_init__(self) -> None:
        groups = [f"okapi-{dns_label(dc)}" for dc in self.template.dcs]
        if len(set(groups)) != len(groups):
            raise ValueError(f"DC names {', '.join(self.template.dcs)} give the same container names: rename one")
        too_long = [group for group in groups if len(group) > MAX_GROUP_NAME]
        if too_long:  # a StatefulSet's name goes into its pods' controller-revision-hash label (63 at most)
            raise ValueError(f"{too_long[0]!r} is longer than the {MAX_GROUP_NAME} characters a StatefulSet may "
                             "have: shorten the DC name")
        if not self.image or any(char.isspace() for char in self.image):
            raise ValueError(f"image {self.image!r} must be a non-empty reference without spaces")
        if not 1 <= self.storage_gib <= 1 << 20:
            raise ValueError("the data volume size must be 1 GiB or more")
        if self.template.tls is not None:
            raise ValueError("the cluster's TLS comes from the deployment (--tls), not from the config's [tls]")
        if self.tls_server_name is not None and not self.tls_server_name.strip():
            raise ValueError("--tls-server-name must name the host the certificate names")

    @property
    def slots(self) -> tuple[Slot, ...]:
        """Every server, in the config's (dc-major) order."""
        return tuple(Slot(server.dc, server.partition, f"okapi-{dns_label(server.dc)}")
                     for server in self.template.servers)

    def groups(self) -> dict[str, tuple[Slot, ...]]:
        """Each DC's servers, by DC name."""
        return {dc: tuple(slot for slot in self.slots if slot.dc == dc) for dc in self.template.dcs}

    def config(self, host: Callable[[Slot], str]) -> ClusterConfig:
        """The cluster config with each server dialled at ``host(slot)`` and listening on every
        interface of its container, on the fixed ports."""
        servers: list[ServerConfig] = []
        for slot, server in zip(self.slots, self.template.servers, strict=True):
            servers.append(dataclasses.replace(
                server, address=join_address(host(slot), GRPC_PORT), bind=join_address("0.0.0.0", GRPC_PORT),
                native_port=NATIVE_PORT, resp_port=RESP_PORT if self.template.resp else 0,
                metrics_port=METRICS_PORT, peer_address=None))
        ca, certificate, key = (f"{TLS_DIR}/{name}" for name in TLS_FILES)
        tls = None if self.tls_server_name is None else TlsConfig(ca, certificate, key, client_auth=True,
                                                                  server_name=self.tls_server_name)
        return dataclasses.replace(self.template, servers=tuple(servers), tls=tls)

    @staticmethod
    def environment(slot: Slot) -> dict[str, str]:
        """What `okapi server` and `okapi health` read in the container (Kubernetes takes the
        partition from the pod's ordinal instead: ``okapikv.deploy.kubernetes``)."""
        return {"OKAPI_CONFIG": CONFIG_PATH, "OKAPI_DC": slot.dc, "OKAPI_PARTITION": str(slot.partition),
                "OKAPI_DATA_DIR": DATA_DIR, "OKAPI_LOG_FORMAT": "json"}


def compose_host(slot: Slot) -> str:
    """Compose resolves a service by its name on the project network."""
    return slot.name


def kubernetes_host(slot: Slot) -> str:
    """A StatefulSet pod resolves as ``<pod>.<headless service>`` within its namespace."""
    return f"{slot.name}.{slot.group}"
