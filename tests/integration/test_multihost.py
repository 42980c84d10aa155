"""Multi-host deployment, proven with Linux network namespaces (docs/deploy.md).

Each DC gets its own network namespace, a stand-in for a host: its own interface and address
(10.200.0.1, .2, .3 on a /24), joined by veth pairs to a bridge in a fourth "switch" namespace
(``netns_support``).
Nothing is added to the test machine's own network namespace, and nothing outside the namespaces
made here is ever addressed. One cluster config file lists the three servers at those addresses;
each server is started inside its DC's namespace with ``ip netns exec NS okapi server --config
FILE --dc NAME --partition 0`` and binds only its own address, as on a real host. TLS is on
(certificates carrying the three IP addresses), as the deployment recipe in docs/deploy.md
prescribes.

Clients run inside the namespaces too (``netns_agent.py``, driven over pipes), one per DC, and
check causality across DCs (a write that depends on another is never visible without it) and
convergence (concurrent writes to one key end with the same value everywhere).

Skips, saying why, where namespaces cannot be made: not Linux, not root, no ``ip`` command (the
iproute2 package), or ``ip netns add`` / bridge creation refused (an unprivileged container).
The namespaces are deleted in a finalizer whatever happens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from netns_support import Hosts, namespace_hosts, server_logs, start_agent
from tls_support import CertificateAuthority

from okapikv.cluster.config import ClusterConfig, ServerConfig, uniform_wan_ms

DCS = ("oregon", "virginia", "ireland")
PORT = 7100
METRICS_PORT = 9100


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    with namespace_hosts("mh", len(DCS)) as made:
        yield made


def test_three_dcs_on_three_hosts(hosts: Hosts, tmp_path: Path) -> None:
    authority = CertificateAuthority.create(tmp_path / "pki", "deploy")
    issued = authority.issue("okapi-server", ips=tuple(hosts.addresses), dns=())
    servers = tuple(ServerConfig(dc, 0, f"{address}:{PORT}", metrics_port=METRICS_PORT)
                    for dc, address in zip(DCS, hosts.addresses, strict=True))
    config = ClusterConfig(dcs=DCS, partitions=1, servers=servers, wan_ms=uniform_wan_ms(DCS, 5.0),
                           cluster_id="netns-test", tls=authority.server_tls(issued))
    path = config.dump(tmp_path / "cluster.toml")

    with server_logs(tmp_path, DCS) as logs:
        for index, dc in enumerate(DCS):
            hosts.exec(index, [sys.executable, "-m", "okapikv.cli", "server", "--config", str(path), "--dc", dc,
                               "--partition", "0", "--in-memory", "--log-format", "json"], stdin=subprocess.DEVNULL,
                       stdout=logs[dc], stderr=subprocess.STDOUT)
        tls_arguments = ["--ca", str(authority.path), "--cert", str(issued.certificate), "--key", str(issued.key)]
        clients = [start_agent(hosts, index, f"{address}:{PORT}", len(DCS), *tls_arguments)
                   for index, address in enumerate(hosts.addresses)]
        oregon, virginia, ireland = clients
        every_server = [server.address for server in config.servers]
        for client in clients:  # each host reaches every server across the bridge
            client("ready", addresses=every_server)

        # Causality: oregon writes x then y; virginia sees y, so it must see x, and writes z
        # (which depends on y); ireland sees z, so it must see y and x.
        oregon("put", key="x", value="1")
        oregon("put", key="y", value="2")
        assert virginia("wait", key="y", value="2") == "2"
        assert virginia("get", key="x") == "1"
        virginia("put", key="z", value="3")
        assert ireland("wait", key="z", value="3") == "3"
        assert ireland("get", key="y") == "2"
        assert ireland("get", key="x") == "1"

        # Convergence: concurrent writes of one key from every DC end with one value everywhere.
        for client, dc in zip(clients, DCS, strict=True):
            client("put", key="contested", value=dc)
        # Each DC reads its own write at once, so once all three read the same value, that value is
        # ordered after every one of the writes: the last-writer-wins winner, final everywhere.
        deadline = time.monotonic() + 20
        finals = [client("get", key="contested") for client in clients]
        while len(set(finals)) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
            finals = [client("get", key="contested") for client in clients]
        assert len(set(finals)) == 1 and finals[0] in DCS, finals
        time.sleep(0.2)
        assert [client("get", key="contested") for client in clients] == finals
        for client in clients:
            client.stop()
    # Each server bound only its own host's address, and logged it as one JSON event.
    for dc, address in zip(DCS, hosts.addresses, strict=True):
        events = [json.loads(line) for line in (tmp_path / f"{dc}.log").read_text().splitlines()
                  if line.startswith("{")]
        listening = [event for event in events if event.get("event") == "listening"]
        assert listening and listening[0]["address"] == f"{address}:{PORT}" and listening[0]["tls"] is True
        assert all(event["dc"] == dc for event in events)
